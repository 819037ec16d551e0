#!/usr/bin/env python3
"""Writes the end-to-end goldens tests/golden/data/<model>.json (+ <model>.logits.bin).

The reference is Hugging Face transformers: each checkpoint is loaded with its
bf16 weights upcast to float32 (dtype=torch.float32, attn_implementation="eager")
and, for each prompt,

  * generated_ids: greedy decoding of NEW_TOKENS tokens with the KV cache
    (model.generate, do_sample=False, no EOS stop: an EOS token is just a token,
    as with `ninfer --ignore-eos`). Cross-checked against a hand-written greedy
    loop over model.forward with a DynamicCache (must be identical) and against
    recomputing the whole sequence without a cache at each step (reported; equal
    for every family except dynamic NTK, whose transformers implementation
    depends on how the sequence was chunked, so ninfer must follow the cached
    path: prefill of the whole prompt in one step, then one token per step). LongRoPE
    past its original length: the manual loop computes the sequence again into a fresh
    cache where it first runs past that length, as Phi-3's generate does.
  * last-position logits: float32 logits of the forward pass over the whole
    prompt at its last position, stored as raw little-endian float32 in
    <model>.logits.bin (prompt k at byte offset logits_offset, vocab_size values).
  * margins: top-1 minus top-2 logit at every greedy step (and at the prompt's last
    position); their minimum says how much numeric error the ids can absorb.
  * emulated runtime numerics: the same decoding with (a) K and V rounded to f16
    (ninfer's KV cache format) and (b) additionally every linear layer's input
    rounded to bf16 (a pessimistic stand-in for bf16 tensor-core GEMMs). Reported:
    max abs logit error vs the f32 reference and the first id mismatch (-1: none).

Prompts: for the tiny random models (make_tiny_models.py), random id lists of
lengths 1, 10, 23 and 40 drawn from a seeded generator; a draw is rejected (next
seed) when its trajectory has a top-1/top-2 margin below MIN_MARGIN (or below
MARGIN_OVER_ERR times the emulated f16-KV logit error) or when the
f16-KV / bf16-activation emulations change an id, so the goldens do not hinge on
near-ties, or when it generates fewer than MIN_DISTINCT distinct ids (random
models like to fall into a loop, and a stable loop has large margins).
For the trained pycode models: real Python snippets tokenized with the model's
own tokenizer.json (BOS prepended by its post-processor); these cannot be
re-drawn: candidates failing the same checks are dropped (fibonacci is always
kept) and the margins are reported.

Usage: python3 make_goldens.py [--shared DIR] [--out DIR] [--only name,name]
(--shared defaults to $NINFER_SHARED_DIR, else ../../../shared from this file.)
"""
import argparse
import hashlib
import json
import os
import platform
import struct
import sys

import numpy as np
import torch
import transformers
from transformers import AutoConfig, AutoModelForCausalLM, AttentionInterface, GenerationConfig
from transformers.cache_utils import DynamicCache
from transformers.masking_utils import AttentionMaskInterface, eager_mask
from transformers.models.llama.modeling_llama import eager_attention_forward

HERE = os.path.dirname(os.path.abspath(__file__))
NEW_TOKENS = 40
MIN_MARGIN = 0.1           # tiny models: minimum top-1/top-2 logit margin along a trajectory
MIN_DISTINCT = 8          # ... and at least this many distinct generated ids (no degenerate loop)
MARGIN_OVER_ERR = 20      # ... and at least this many times the emulated f16-KV logit error
TINY_PROMPT_LENGTHS = [1, 10, 23, 40]
TINY_MODELS = ["tiny-qwen2", "tiny-qwen3", "tiny-mistral", "tiny-llama3",
               "tiny-llama-yarn", "tiny-llama-dynamic", "tiny-llama-linear", "tiny-phi3",
               "tiny-phi3-longrope", "tiny-phi3-longrope-switch", "tiny-smollm3",
               "tiny-smollm3-nope4", "tiny-olmo2"]
SHARED_MODELS = ["pycode-llama-23m", "pycode-llama-3m", "pycode-ternary-llama-23m"]

PY_PROMPTS = [
    ("fibonacci", "def fibonacci(n):\n"),
    ("argparse", "import argparse\nimport sys\n\n\ndef main(argv=None):\n    parser = argparse.ArgumentParser("),
    ("class_stack", "class Stack:\n    \"\"\"A simple LIFO stack.\"\"\"\n\n    def __init__(self):\n"
                    "        self.items = []\n\n    def push(self, item):\n"),
    ("loop", "    for i, line in enumerate(lines):\n        line = line.strip()\n        if not line or line.startswith(\"#\"):\n"),
    ("typing", "from typing import List\n\n\ndef mean(values: List[float]) -> float:\n"),
    ("try_import", "try:\n    import numpy as np\nexcept ImportError:\n"),
]
PY_PROMPTS_KEPT = 5  # fibonacci always, then the first ones with a safe margin


# --- emulated runtime numerics --------------------------------------------------

def _f16kv_attention(module, query, key, value, attention_mask, scaling, dropout=0.0, **kwargs):
    # K (after RoPE) and V as read back from an f16 KV cache.
    key = key.to(torch.float16).to(query.dtype)
    value = value.to(torch.float16).to(query.dtype)
    return eager_attention_forward(module, query, key, value, attention_mask,
                                   scaling=scaling, dropout=dropout, **kwargs)


AttentionInterface.register("golden_f16kv", _f16kv_attention)
AttentionMaskInterface.register("golden_f16kv", eager_mask)


def _bf16_input_hook(module, args):
    return (args[0].to(torch.bfloat16).to(args[0].dtype),) + tuple(args[1:])


def load(model_dir, mode="ref"):
    """A fresh model (dynamic NTK keeps state across calls, so never reuse one).
    mode: ref | f16kv | bf16act | off (the model's tested feature switched off)."""
    attn = "golden_f16kv" if mode in ("f16kv", "bf16act") else "eager"
    kwargs = {}
    if mode == "off":
        config = AutoConfig.from_pretrained(model_dir)
        feature_off_config(config, os.path.basename(os.path.normpath(model_dir)))
        kwargs["config"] = config
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32, attn_implementation=attn,
                                                 **kwargs)
    model.eval()
    if mode == "off":
        feature_off_model(model, os.path.basename(os.path.normpath(model_dir)))
    model.generation_config.eos_token_id = None
    if mode == "bf16act":
        for m in model.modules():
            if isinstance(m, torch.nn.Linear):
                m.register_forward_pre_hook(_bf16_input_hook)
    return model


# --- the feature each tiny model exists for, switched off ----------------------
# make_goldens checks that switching it off changes the goldens, so a runtime that
# ignores the feature cannot pass.

def feature_off_config(config, name):
    rope = dict(config.rope_parameters or {})
    if name == "tiny-phi3-longrope-switch":
        config.rope_parameters = dict(rope, long_factor=list(rope["short_factor"]))
    elif config.model_type == "smollm3":
        config.no_rope_layers = [1] * config.num_hidden_layers
    elif config.model_type == "mistral":
        config.sliding_window = None
    elif rope.get("rope_type", "default") != "default":
        config.rope_parameters = {"rope_type": "default", "rope_theta": rope["rope_theta"]}


def swap_row_blocks(weight, begin, middle, end):
    """Rows [begin, middle) and [middle, end) of weight trade places (sizes may differ)."""
    with torch.no_grad():
        rows = weight[begin:end].clone()
        weight[begin:begin + end - middle] = rows[middle - begin:]
        weight[begin + end - middle:end] = rows[:middle - begin]


def feature_off_model(model, name):
    cfg = model.config
    if name == "tiny-phi3":
        # The fused projections read in another order: v rows before k rows, up before gate.
        head_dim = cfg.hidden_size // cfg.num_attention_heads
        q, kv = cfg.num_attention_heads * head_dim, cfg.num_key_value_heads * head_dim
        for layer in model.model.layers:
            swap_row_blocks(layer.self_attn.qkv_proj.weight, q, q + kv, q + 2 * kv)
            rows = layer.mlp.gate_up_proj.weight.shape[0]
            swap_row_blocks(layer.mlp.gate_up_proj.weight, 0, rows // 2, rows)
    for m in model.modules():
        if hasattr(m, "q_norm") and hasattr(m, "k_norm"):  # qwen3, olmo2
            m.q_norm = torch.nn.Identity()
            m.k_norm = torch.nn.Identity()
        if model.config.model_type == "qwen2":
            for proj in ("q_proj", "k_proj", "v_proj"):
                lin = getattr(m, proj, None)
                if lin is not None and lin.bias is not None:
                    with torch.no_grad():
                        lin.bias.zero_()


FEATURE = {
    "tiny-qwen2": "q/k/v bias (zeroed)",
    "tiny-qwen3": "q/k RMSNorm (removed)",
    "tiny-mistral": "sliding window (full attention instead)",
    "tiny-llama3": "llama3 rope scaling (plain rope instead)",
    "tiny-llama-yarn": "yarn rope scaling (plain rope instead)",
    "tiny-llama-dynamic": "dynamic NTK rope (plain rope instead)",
    "tiny-llama-linear": "linear rope scaling (plain rope instead)",
    "tiny-phi3": "fused projections' order (k/v rows and gate/up rows swapped)",
    "tiny-phi3-longrope": "longrope rope scaling (plain rope instead)",
    "tiny-phi3-longrope-switch": "the long factors past 32 positions (the short ones instead)",
    "tiny-smollm3": "the layer without RoPE (RoPE in every layer instead)",
    "tiny-smollm3-nope4": "the layer without RoPE (RoPE in every layer instead)",
    "tiny-olmo2": "q/k RMSNorm over the whole projections (removed)",
}


# --- decoding ---------------------------------------------------------------------

@torch.no_grad()
def prompt_logits(model_dir, ids, mode="ref"):
    model = load(model_dir, mode)
    return model(torch.tensor([ids])).logits[0, -1].float().clone()


@torch.no_grad()
def greedy_generate(model_dir, ids, mode="ref"):
    """model.generate; returns (new ids, per-step logits [NEW_TOKENS, vocab])."""
    model = load(model_dir, mode)
    inp = torch.tensor([ids])
    gc = GenerationConfig(do_sample=False, max_new_tokens=NEW_TOKENS, min_new_tokens=0,
                          eos_token_id=None, pad_token_id=0, bos_token_id=None,
                          num_beams=1, temperature=None, top_p=None, top_k=None,
                          output_logits=True, return_dict_in_generate=True)
    out = model.generate(inp, attention_mask=torch.ones_like(inp), generation_config=gc)
    new = out.sequences[0, len(ids):].tolist()
    if len(new) != NEW_TOKENS:
        raise RuntimeError(f"generate stopped after {len(new)} tokens")
    return new, torch.stack([l[0].float() for l in out.logits])


def longrope_switch(config):
    """LongRoPE's original length, past which the long factors rotate; None for other RoPE."""
    rope = config.rope_parameters or {}
    if rope.get("rope_type") != "longrope":
        return None
    return rope.get("original_max_position_embeddings",
                    getattr(config, "original_max_position_embeddings", None))


@torch.no_grad()
def greedy_manual(model_dir, ids):
    """Cached greedy loop over model.forward: prefill, then one token per step. LongRoPE:
    the step whose sequence first runs past the original length computes the whole sequence
    again into a fresh cache (what ninfer's Generator does, and Phi-3's generate)."""
    model = load(model_dir)
    switch = longrope_switch(model.config)
    cache = DynamicCache(config=model.config)
    out = model(torch.tensor([ids]), past_key_values=cache, use_cache=True)
    seq = list(ids)
    new = []
    for step in range(NEW_TOKENS):
        tok = int(torch.argmax(out.logits[0, -1]))
        new.append(tok)
        seq.append(tok)
        if step + 1 == NEW_TOKENS:
            break
        pos = len(ids) + step
        if switch is not None and pos == switch:
            out = model(torch.tensor([seq]), past_key_values=DynamicCache(config=model.config),
                        use_cache=True)
            continue
        out = model(torch.tensor([[tok]]), past_key_values=out.past_key_values, use_cache=True,
                    position_ids=torch.tensor([[pos]]))
    return new


@torch.no_grad()
def greedy_nocache(model_dir, ids):
    """Recomputes the whole sequence at each step, without a cache."""
    seq = list(ids)
    model = load(model_dir)
    dynamic = "dynamic" in str((model.config.rope_parameters or {}).get("rope_type", ""))
    for _ in range(NEW_TOKENS):
        if dynamic:
            model = load(model_dir)  # its rotary embedding keeps state from the last call
        logits = model(torch.tensor([seq]), use_cache=False).logits[0, -1]
        seq.append(int(torch.argmax(logits)))
    return seq[len(ids):]


def margin(logits):
    top = torch.topk(logits, 2).values
    return float(top[0] - top[1])


def first_mismatch(a, b):
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return -1 if len(a) == len(b) else min(len(a), len(b))


def evaluate(model_dir, ids, full_checks):
    """Everything recorded for one prompt."""
    gen, step_logits = greedy_generate(model_dir, ids)
    last = prompt_logits(model_dir, ids)
    # The first generation step's logits are the prompt's last-position logits.
    d0 = float((step_logits[0] - last).abs().max())
    if d0 > 1e-4:
        raise RuntimeError(f"generate's first logits differ from the prompt forward by {d0}")
    margins = [margin(l) for l in step_logits]
    rec = {
        "generated_ids": gen,
        "last_logits": last,
        "margins": margins,
        "min_margin": min(margins),
        "min_margin_step": int(np.argmin(margins)),
        "last_logits_margin": margin(last),
        "logit_absmax": float(last.abs().max()),
    }
    emu = {}
    for mode in ("f16kv", "bf16act"):
        m_gen, _ = greedy_generate(model_dir, ids, mode)
        m_last = prompt_logits(model_dir, ids, mode)
        emu[mode] = {"max_abs_err": float((m_last - last).abs().max()),
                     "first_id_mismatch": first_mismatch(m_gen, gen)}
    rec["emulated"] = emu
    if full_checks:
        man = greedy_manual(model_dir, ids)
        if man != gen:
            raise RuntimeError(f"manual cached greedy loop disagrees with generate at "
                               f"{first_mismatch(man, gen)}: {man} vs {gen}")
        rec["nocache_first_mismatch"] = first_mismatch(greedy_nocache(model_dir, ids), gen)
    return rec


def acceptable(rec):
    return (len(set(rec["generated_ids"])) >= MIN_DISTINCT and rec["min_margin"] >= MIN_MARGIN and rec["last_logits_margin"] >= MIN_MARGIN
            and rec["min_margin"] >= MARGIN_OVER_ERR * rec["emulated"]["f16kv"]["max_abs_err"]
            and rec["emulated"]["f16kv"]["first_id_mismatch"] == -1
            and rec["emulated"]["bf16act"]["first_id_mismatch"] == -1)


# --- per model --------------------------------------------------------------------

def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def tiny_prompts(model_dir, name, vocab):
    prompts = []
    for length in TINY_PROMPT_LENGTHS:
        for attempt in range(300):
            seed = 1000 * length + attempt + sum(map(ord, name))
            g = np.random.default_rng(seed)
            ids = [int(x) for x in g.integers(2, vocab, size=length)]
            gen, step_logits = greedy_generate(model_dir, ids)  # cheap first filter
            if min(margin(l) for l in step_logits) < MIN_MARGIN or len(set(gen)) < MIN_DISTINCT:
                continue
            rec = evaluate(model_dir, ids, full_checks=False)
            if acceptable(rec):
                break
            print(f"  {name} len {length}: seed {seed} rejected (min margin {rec['min_margin']:.3f}, f16kv err {rec['emulated']['f16kv']['max_abs_err']:.1e} "
                  f"emulated mismatches {rec['emulated']['f16kv']['first_id_mismatch']}/"
                  f"{rec['emulated']['bf16act']['first_id_mismatch']})", flush=True)
        else:
            raise RuntimeError(f"{name}: no acceptable prompt of length {length} in 300 draws")
        prompts.append({"name": f"random_len{length}", "seed": seed, "prompt_ids": ids})
    return prompts


def py_prompts(model_dir):
    from tokenizers import Tokenizer
    tok = Tokenizer.from_file(os.path.join(model_dir, "tokenizer.json"))
    out = []
    for name, text in PY_PROMPTS:
        ids = tok.encode(text).ids
        if ids[0] != 0:
            raise RuntimeError(f"expected BOS 0 first, got {ids[:3]}")
        out.append({"name": name, "text": text, "prompt_ids": ids})
    return out


def make(name, model_dir, source, out_dir):
    cfg = json.load(open(os.path.join(model_dir, "config.json")))
    vocab = cfg["vocab_size"]
    print(f"== {name} ({model_dir})", flush=True)
    if source == "golden":
        prompts = tiny_prompts(model_dir, name, vocab)
    else:
        prompts = py_prompts(model_dir)
    records = []
    kept_py = 0
    for p in prompts:
        rec = evaluate(model_dir, p["prompt_ids"], full_checks=True)
        if source == "shared":
            if p["name"] != "fibonacci" and (kept_py >= PY_PROMPTS_KEPT or not acceptable(rec)):
                print(f"  {p['name']}: skipped (min margin {rec['min_margin']:.3f}, emulated "
                      f"{rec['emulated']}, kept {kept_py})")
                continue
            kept_py += 1
        records.append((p, rec))

    feature = None
    if source == "golden":
        # Switch the model's feature off: the ids of at least one prompt must
        # change, and the last-position logits of one by 10x the 2e-2 tolerance.
        changes, diffs = [], []
        for p, rec in records:
            ids = p["prompt_ids"]
            off_gen, _ = greedy_generate(model_dir, ids, "off")
            off_last = prompt_logits(model_dir, ids, "off")
            changes.append(float((off_last - rec["last_logits"]).abs().max()))
            diffs.append(first_mismatch(off_gen, rec["generated_ids"]))
        feature = {"switched_off": FEATURE[name], "max_abs_logit_change": [round(c, 4) for c in changes],
                   "ids_first_diff": diffs}
        print(f"  feature off ({FEATURE[name]}): logit change {feature['max_abs_logit_change']}, "
              f"ids first diff {diffs}")
        if all(d == -1 for d in diffs) or max(changes) < 0.2:
            raise RuntimeError(f"{name}: switching off {FEATURE[name]} hardly changes the goldens")

    os.makedirs(out_dir, exist_ok=True)
    bin_name = f"{name}.logits.bin"
    entries = []
    with open(os.path.join(out_dir, bin_name), "wb") as f:
        for k, (p, rec) in enumerate(records):
            last = rec.pop("last_logits").numpy().astype("<f4")
            assert last.shape == (vocab,)
            f.write(last.tobytes())
            order = np.argsort(-last)[:5]
            e = dict(p)
            e.update({
                "generated_ids": rec["generated_ids"],
                "logits_offset": k * vocab * 4,
                "last_logits_top5": [[int(i), round(float(last[i]), 5)] for i in order],
                "last_logits_margin": round(rec["last_logits_margin"], 5),
                "logit_absmax": round(rec["logit_absmax"], 5),
                "min_margin": round(rec["min_margin"], 5),
                "min_margin_step": rec["min_margin_step"],
                "margins": [round(m, 4) for m in rec["margins"]],
                "emulated": {k2: {"max_abs_err": float(f"{v['max_abs_err']:.3g}"),
                                  "first_id_mismatch": v["first_id_mismatch"]}
                             for k2, v in rec["emulated"].items()},
                "nocache_first_mismatch": rec["nocache_first_mismatch"],
            })
            entries.append(e)
            print(f"  {e['name']:14s} len {len(p['prompt_ids']):3d}  min margin {e['min_margin']:7.3f} "
                  f"(step {e['min_margin_step']:2d})  |logit|max {e['logit_absmax']:6.2f}  "
                  f"f16kv err {e['emulated']['f16kv']['max_abs_err']:.2e} "
                  f"mis {e['emulated']['f16kv']['first_id_mismatch']:3d}  "
                  f"bf16act err {e['emulated']['bf16act']['max_abs_err']:.2e} "
                  f"mis {e['emulated']['bf16act']['first_id_mismatch']:3d}  "
                  f"nocache mis {e['nocache_first_mismatch']:3d}", flush=True)

    rope = cfg.get("rope_parameters") or cfg.get("rope_scaling") or {}
    doc = {
        "model": name,
        "source": source,  # "golden": tests/golden/models/<model>; "shared": <shared>/models/<model>
        "family": cfg["model_type"],
        "rope_type": rope.get("rope_type", rope.get("type", "default")),
        "sliding_window": cfg.get("sliding_window") if cfg["model_type"] == "mistral" else None,
        "vocab_size": vocab,
        "safetensors_sha256": sha256(os.path.join(model_dir, "model.safetensors")),
        "new_tokens": NEW_TOKENS,
        "logits_file": bin_name,
        "logits_format": "little-endian float32, vocab_size values per prompt at logits_offset (bytes)",
        "reference": {
            "what": "transformers greedy decoding, float32 (bf16 weights upcast), eager attention, "
                    "KV cache, no EOS stop",
            "torch": torch.__version__,
            "transformers": transformers.__version__,
            "numpy": np.__version__,
            "python": platform.python_version(),
        },
        "feature_check": feature,
        "prompts": entries,
    }
    with open(os.path.join(out_dir, f"{name}.json"), "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shared", default=os.environ.get("NINFER_SHARED_DIR")
                    or os.path.normpath(os.path.join(HERE, "..", "..", "..", "shared")))
    ap.add_argument("--out", default=os.path.join(HERE, "data"))
    ap.add_argument("--only", default="")
    args = ap.parse_args()
    torch.set_num_threads(max(1, min(2, os.cpu_count() or 1)))
    names = [n for n in args.only.split(",") if n] or TINY_MODELS + SHARED_MODELS
    print(f"torch {torch.__version__}, transformers {transformers.__version__}")
    for n in names:
        if n in TINY_MODELS:
            make(n, os.path.join(HERE, "models", n), "golden", args.out)
        elif n in SHARED_MODELS:
            make(n, os.path.join(args.shared, "models", n), "shared", args.out)
        else:
            sys.exit(f"unknown model {n}")


if __name__ == "__main__":
    main()
