#!/usr/bin/env python3
"""Converts tiny golden checkpoints to GGUF with llama.cpp's own converter.

For each model in MODELS, a copy of tests/golden/models/<name>/ gets a small
SentencePiece BPE tokenizer (trained here on examples/data/calib_python.txt at the
model's vocab_size, bos 0 / eos 1 / unk 2 as the configs say) and is converted by
llama.cpp's convert_hf_to_gguf.py with --outtype bf16 (gguf/<name>.gguf), so every
weight keeps the exact value the goldens were made from: ninfer's GGUF import must
then reproduce the goldens of tests/golden/data/<name>.json (run_golden.py --gguf).
The models in Q8_0 are also converted with --outtype q8_0 (gguf/q8_0/<name>.gguf):
their weights are decoded (and llama's q/k rows put back in order after decoding),
so the goldens hold within a wider logit tolerance. The trained tokenizer is kept as
gguf/tiny-spm-<vocab>.model: the GGUF's tokenizer table must equal the one ninferc
reads from that file directly.

gguf/pycode-tokenizer.gguf carries the byte-level BPE tokenizer of the shared
pycode-llama-3m (the converter's --vocab-only output; its pre-tokenizer, plain GPT-2
ByteLevel, is named "gpt-2" for the converter, which does not know its hash) in a
stub model of hidden size 2, so the file stays small: GgufTest compares its table
with the one ninferc reads from tokenizer.json. gguf/spm-bytes-tokenizer.gguf does
the same for a SentencePiece model with byte fallback (gguf/tiny-spm-bytes-384.model,
as Llama 2's tokenizer is), compared with the table read from that file.

Needs: torch, transformers, numpy, sentencepiece, and an unpacked llama.cpp source
tree (the converter and its gguf-py; llama-cpp-python's sdist carries one under
vendor/llama.cpp). Made with llama.cpp from llama-cpp-python 0.3.36, sentencepiece
0.2, torch 2.15.0, transformers 5.25.0.

Usage: python3 make_gguf_models.py --llama-cpp DIR
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

import sentencepiece as spm

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
CALIB = os.path.join(ROOT, "examples", "data", "calib_python.txt")

# name -> what its GGUF adds to the test (beyond the golden's own feature)
MODELS = {
    "tiny-qwen2": "qwen2: biases, tied embeddings, rows in Hugging Face order",
    "tiny-qwen3": "qwen3: q/k norms, head_dim 32",
    "tiny-llama3": "llama: q/k rows reordered by the converter; llama3 RoPE as rope_freqs",
    "tiny-llama-linear": "llama: linear RoPE scaling, q/k/v/o and MLP biases, MHA",
    "tiny-phi3": "phi3: fused attn_qkv and ffn_up (gate rows, then up rows), sliding window",
    "tiny-phi3-longrope": "phi3: LongRoPE's rope_factors_short/long tensors and attn_factor",
    "tiny-phi3-longrope-switch": "phi3: LongRoPE's long factors past the original length",
    "tiny-smollm3-nope4": "smollm3: q/k rows reordered as llama's; no RoPE in every fourth layer",
    "tiny-olmo2": "olmo2: post_attention_norm and post_ffw_norm, q/k norms over whole rows",
}
# Converter classes that read a checkpoint's own vocabulary files (Olmo2Model: a GPT-2 BPE
# tokenizer.json) take the trained SentencePiece model here instead.
SENTENCEPIECE_VOCAB = {"tiny-olmo2": ("conversion.olmo", "Olmo2Model")}
# Q8_0 is kept exact (q8_g32): tiny-phi3's fused matrices are then split as packed rows.
Q8_0 = ["tiny-llama3", "tiny-phi3"]


def train_tokenizer(vocab, out_prefix):
    spm.SentencePieceTrainer.train(
        input=CALIB, model_prefix=out_prefix, vocab_size=vocab, model_type="bpe",
        character_coverage=1.0, bos_id=0, eos_id=1, unk_id=2, pad_id=-1,
        byte_fallback=False, add_dummy_prefix=True, remove_extra_whitespaces=False,
        normalization_rule_name="identity", num_threads=1, minloglevel=2,
        input_sentence_size=0, shuffle_input_sentence=False)
    return out_prefix + ".model"


def convert(llama_cpp, name, outtype, out_dir, spm_dir):
    src = os.path.join(HERE, "models", name)
    vocab = json.load(open(os.path.join(src, "config.json")))["vocab_size"]
    spm_model = os.path.join(spm_dir, f"tiny-spm-{vocab}.model")
    with tempfile.TemporaryDirectory() as work:
        if not os.path.exists(spm_model):
            shutil.copy(train_tokenizer(vocab, os.path.join(work, "spm")), spm_model)
        model_dir = os.path.join(work, name)
        shutil.copytree(src, model_dir)
        shutil.copy(spm_model, os.path.join(model_dir, "tokenizer.model"))
        tokenizer_config = {"add_bos_token": True, "add_eos_token": False,
                            "bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>"}
        if name.startswith("tiny-phi3"):  # the phi3 converter reads it (Phi-4's GPT2Tokenizer?)
            tokenizer_config["tokenizer_class"] = "LlamaTokenizer"
        with open(os.path.join(model_dir, "tokenizer_config.json"), "w") as f:
            json.dump(tokenizer_config, f)
        out = os.path.join(out_dir, name + ".gguf")
        patch = ""
        if name in SENTENCEPIECE_VOCAB:
            module, cls = SENTENCEPIECE_VOCAB[name]
            patch = ("import %s as m, conversion.base as b; "
                     "m.%s.set_vocab = b.TextModel._set_vocab_sentencepiece; ") % (module, cls)
        script = ("import sys; sys.path[:0] = [%r, %r]; %s"
                  "sys.argv = ['convert_hf_to_gguf.py'] + sys.argv[1:]; "
                  "import convert_hf_to_gguf as c; c.main()") % (
                      llama_cpp, os.path.join(llama_cpp, "gguf-py"), patch)
        subprocess.run([sys.executable, "-c", script, model_dir, "--outtype", outtype,
                        "--outfile", out], check=True, cwd=llama_cpp)
    print(f"{name}: {out} ({os.path.getsize(out)} bytes)")


def tokenizer_gguf(llama_cpp, model_dir, out, pre=None):
    """The converter's --vocab-only output for model_dir, in a stub model of hidden size 2.

    pre: a tokenizer.ggml.pre name for byte-level tokenizers whose pre-tokenizer hash the
    converter does not know."""
    import numpy as np
    sys.path.insert(0, os.path.join(llama_cpp, "gguf-py"))
    import gguf
    with tempfile.TemporaryDirectory() as work:
        vocab_only = os.path.join(work, "vocab.gguf")
        patch = ("b.TextModel.get_vocab_base_pre = lambda self, tokenizer: %r; " % pre) if pre else ""
        script = ("import sys; sys.path[:0] = [%r, %r]; import conversion.base as b; %s"
                  "sys.argv = ['convert_hf_to_gguf.py'] + sys.argv[1:]; "
                  "import convert_hf_to_gguf as c; c.main()") % (
                      llama_cpp, os.path.join(llama_cpp, "gguf-py"), patch)
        subprocess.run([sys.executable, "-c", script, model_dir, "--vocab-only",
                        "--outfile", vocab_only], check=True, cwd=llama_cpp)
        reader = gguf.GGUFReader(vocab_only)
        writer = gguf.GGUFWriter(out, arch="llama")
        stub = {"llama.embedding_length": 2, "llama.attention.head_count": 1,
                "llama.attention.head_count_kv": 1}
        for key, field in reader.fields.items():
            if key.startswith("GGUF.") or key == "general.architecture":
                continue
            if key in stub or key.startswith(("llama.rope.", "llama.attention.key", "llama.attention.value")):
                continue
            vtype = field.types[0]
            sub_type = field.types[-1] if vtype == gguf.GGUFValueType.ARRAY else None
            writer.add_key_value(key, field.contents(), vtype, sub_type=sub_type)
        for key, value in stub.items():
            writer.add_uint32(key, value)
        vocab = len(reader.fields["tokenizer.ggml.tokens"].contents())
        writer.add_tensor("token_embd.weight", np.zeros((vocab, 2), dtype=np.float32))
        writer.write_header_to_file()
        writer.write_kv_data_to_file()
        writer.write_tensors_to_file()
        writer.close()
    print(f"tokenizer: {out} ({os.path.getsize(out)} bytes)")


def convert_tokenizers(llama_cpp, shared, out_dir):
    tokenizer_gguf(llama_cpp, os.path.join(shared, "models", "pycode-llama-3m"),
                   os.path.join(out_dir, "pycode-tokenizer.gguf"), pre="gpt-2")
    # SentencePiece with byte fallback (as Llama 2's): 384 pieces, rare characters as bytes.
    spm_model = os.path.join(out_dir, "tiny-spm-bytes-384.model")
    with tempfile.TemporaryDirectory() as work:
        if not os.path.exists(spm_model):
            spm.SentencePieceTrainer.train(
                input=CALIB, model_prefix=os.path.join(work, "spm"), vocab_size=384,
                model_type="bpe", character_coverage=0.995, bos_id=0, eos_id=1, unk_id=2,
                pad_id=-1, byte_fallback=True, add_dummy_prefix=True,
                remove_extra_whitespaces=False, normalization_rule_name="identity",
                num_threads=1, minloglevel=2, input_sentence_size=0,
                shuffle_input_sentence=False)
            shutil.copy(os.path.join(work, "spm.model"), spm_model)
        model_dir = os.path.join(work, "model")
        shutil.copytree(os.path.join(HERE, "models", "tiny-llama3"), model_dir)
        shutil.copy(spm_model, os.path.join(model_dir, "tokenizer.model"))
        tokenizer_gguf(llama_cpp, model_dir, os.path.join(out_dir, "spm-bytes-tokenizer.gguf"))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--llama-cpp", required=True, help="llama.cpp source tree")
    parser.add_argument("--only", default="", help="comma-separated model names")
    parser.add_argument("--shared", default=os.path.join(ROOT, "..", "shared"),
                        help="the shared folder (models/pycode-llama-3m)")
    args = parser.parse_args()
    out_dir = os.path.join(HERE, "gguf")
    os.makedirs(out_dir, exist_ok=True)
    names = args.only.split(",") if args.only else list(MODELS)
    llama_cpp = os.path.abspath(args.llama_cpp)
    for name in names:
        convert(llama_cpp, name, "bf16", out_dir, out_dir)
        if name in Q8_0:
            os.makedirs(os.path.join(out_dir, "q8_0"), exist_ok=True)
            convert(llama_cpp, name, "q8_0", os.path.join(out_dir, "q8_0"), out_dir)
    if not args.only:
        convert_tokenizers(llama_cpp, os.path.abspath(args.shared), out_dir)


if __name__ == "__main__":
    main()
