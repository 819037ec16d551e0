#!/usr/bin/env python3
"""Trains the small tokenizers under tests/tokenizer/fixtures/ that the parity tests run.

Real checkpoints of these families are too big to commit, so each layout is reproduced on a
small vocabulary trained here on calib_python.txt plus the multilingual sample below:

  sp_prepend/           SentencePiece-style BPE in tokenizer.json as Llama 2 / Mistral / TinyLlama
                        ship it (trained with `tokenizers`): byte_fallback, <0x00>..<0xFF> at ids
                        3..258, normalizer Sequence[Prepend("▁"), Replace(" ", "▁")], no
                        pre-tokenizer, decoder Sequence[Replace, ByteFallback, Fuse, Strip].
  sp_metaspace_first/   the same model as newer transformers converts it: no normalizer,
                        Metaspace(prepend_scheme="first", split=False).
  sp_metaspace_split/   the same model with Metaspace(prepend_scheme="always", split=True).
  llama3_bl/            byte-level BPE with the Llama 3 Split regex and ignore_merges (`tokenizers`).
  qwen2_bl/             byte-level BPE with the Qwen2 Split regex and the NFC normalizer.
  sp_tiny/              a SentencePiece BPE tokenizer.model trained with `sentencepiece` itself:
                        no byte fallback (unknown characters become <unk>), user-defined symbols.
  sp_ties/              a hand-written SentencePiece BPE model whose pieces tie on score, so the
                        leftmost pair must win (written with sentencepiece's own protobuf classes).
  multilingual.txt      test text: many scripts, emoji with ZWJ, whitespace runs, digits, code.
  nfc_fuzz.txt          test text: random combining sequences for the NFC normalizer.

The trained files are committed; rerun only to change them (then rerun make_goldens.py).
Usage: python3 tests/tokenizer/make_fixtures.py [--shared ../shared]
"""
import argparse
import io
import json
import os
import random
import unicodedata

import sentencepiece as spm
from tokenizers import (AddedToken, Regex, Tokenizer, decoders, models, normalizers,
                        pre_tokenizers, processors, trainers)

LLAMA3 = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+"
          r"[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN2 = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+"
         r"[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")

MULTILINGUAL = """English: The quick brown fox jumps over the lazy dog. It's 3.14159 -- isn't it? THEY'VE, we'll.
Français : « Où est la bibliothèque ? » — naïve café, résumé, cœur, Noël, à l'école.
Deutsch: Größenwahn, Straße, übermäßig, Äpfel und Öl; „Anführungszeichen“.
Español: ¿Dónde está el baño? ¡Qué niño tan pequeño! año, señor, pingüino.
Português: ação, coração, não, pão, maçã, você.
Русский: Съешь же ещё этих мягких французских булок, да выпей чаю.
Ελληνικά: Ξεσκεπάζω την ψυχοφθόρα βδελυγμία. Ἀρχὴ ἥμισυ παντός.
Українська: Чуєш їх, доцю, га? Кумедна ж ти, прощайся без ґольфів!
עברית: דג סקרן שט בים מאוכזב ולפתע מצא חברה.
العربية: نص حكيم له سر قاطع وذو شأن عظيم مكتوب على ثوب أخضر ومغلف بجلد أزرق.
हिन्दी: ऋषियों को सताने वाले दुष्ट राक्षसों के राजा रावण का सर्वनाश करने वाले।
বাংলা: আমি বাংলায় গান গাই। தமிழ்: யாமறிந்த மொழிகளிலே தமிழ்மொழி போல்.
ไทย: เป็นมนุษย์สุดประเสริฐเลิศคุณค่า ກະທູ້ ລາວ
中文：我能吞下玻璃而不伤身体。繁體中文：我能吞下玻璃而不傷身體。
日本語：いろはにほへと ちりぬるを わかよたれそ つねならむ。カタカナ、ｶﾀｶﾅ（半角）。
한국어: 다람쥐 헌 쳇바퀴에 타고파. 자모: ᄒ ᅡ ᆫ 한
Tiếng Việt: Tôi có thể ăn thủy tinh mà không hại gì. Ế ệ ỗ.
Emoji: 👨‍👩‍👧‍👦 👩🏽‍💻 🏳️‍🌈 🇯🇵🇩🇪 ❤️‍🔥 🤷🏻‍♂️ 1️⃣ #️⃣ ©️ 😀😃😄 🫠🪿
Math: ∀x∈ℝ, ∃y: x² + y² ≤ 1; ∑_{i=1}^{n} i = n(n+1)/2; ½ ⅔ ¾ ① ⑳ Ⅻ ﬁ ﬀ
Digits: 0123456789 1234567890123 ٠١٢٣٤٥٦٧٨٩ ०१२३४५६७८९ 3.14 1e-10 0xFF 1,000,000 $12.50 50%
Spaces:  two  three   four    eight        sixteen                end
\ttabs\t\tand\tmore\t\t\t
lines\n\n\n\r\n\r\n   \n    indented code
        deeper
                        deepest
Code: def f(x: int) -> int:
    return x ** 2  # comment
\tif (a && b) { return -1; } else { x += 0x1F; }
    for i in range(10):
        print(f"{i:>4d}", end="")
Combining: e\u0301 a\u0308 n\u0303 o\u0302\u0323 A\u030a \u212b \u1100\u1161\u11a8 q\u0307\u0323 \u0958 \u00c5\u0316
Quotes: ‘single’ “double” ‹angle› «guillemets» 'plain' "plain" `tick`
Special-looking: <s> </s> <unk> <|endoftext|> <tool> [INST] <<SYS>> @@ ▁ ▁▁ ▁x
"""


def write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8", newline="") as f:
        f.write(text)


def nfc_fuzz_text():
    """Random short combining sequences (one per line) over characters that NFC moves or merges."""
    rng = random.Random(20240611)
    marks = [c for c in range(0x300, 0x370)] + [0x591, 0x5B0, 0x610, 0x64B, 0x93C, 0x94D,
                                                 0x9BC, 0xE38, 0xF71, 0xF72, 0xF74, 0x1DC0,
                                                 0x20D0, 0x302A, 0x3099, 0x309A, 0x1D165,
                                                 0x1D16D, 0x7FD, 0x898]
    bases = (list(range(0x41, 0x5B)) + list(range(0x61, 0x7B)) + [0xC5, 0xE9, 0x212B, 0x1E9B,
             0x3B1, 0x1F00, 0x415, 0x439, 0x915, 0x9C7, 0xB47, 0xBC6, 0xCC6, 0xD46, 0x1025,
             0x304B, 0x30CF, 0x11099, 0x11131, 0x1100, 0x1161, 0x11A8, 0xAC00, 0xAC01, 0x0958,
             0xFB2C, 0x2260, 0x226E, 0x3C, 0x338, 0x9BE, 0xB3E, 0xBBE, 0xCD5, 0xD3E, 0x11935,
             0x11930, 0x1F82, 0x344, 0xF73, 0xF81])
    lines = []
    for _ in range(1500):
        seq = []
        for _ in range(rng.randint(1, 3)):
            seq.append(rng.choice(bases))
            seq.extend(rng.choice(marks) for _ in range(rng.randint(0, 3)))
        lines.append("".join(map(chr, seq)))
    return "\n".join(lines) + "\n"


def training_lines(shared):
    with open(os.path.join(shared, "data/calib_python.txt"), encoding="utf-8") as f:
        calib = f.read()
    sample = MULTILINGUAL.splitlines()
    return calib.splitlines() + sample * 30


def rebuild_with_bytes(trained, specials):
    """The trained vocabulary behind the specials and the 256 byte tokens, as Llama 2 orders it."""
    model = json.loads(trained.to_str())["model"]
    ordered = sorted(model["vocab"].items(), key=lambda kv: kv[1])
    vocab = {}
    for name in specials:
        vocab[name] = len(vocab)
    for b in range(256):
        vocab[f"<0x{b:02X}>"] = len(vocab)
    for token, _ in ordered:
        if token not in vocab:
            vocab[token] = len(vocab)
    merges = [tuple(m) if isinstance(m, list) else tuple(m.split(" ")) for m in model["merges"]]
    return vocab, merges


def sentencepiece_style(lines, vocab_size):
    specials = ["<unk>", "<s>", "</s>"]
    trainer_tok = Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=True, fuse_unk=True))
    trainer_tok.normalizer = normalizers.Sequence([normalizers.Prepend("▁"),
                                                   normalizers.Replace(" ", "▁")])
    # Training only: words are a run of "▁" plus what follows, so merges like "▁▁▁▁" and
    # "▁▁▁▁if" exist and none crosses into a following "▁".
    trainer_tok.pre_tokenizer = pre_tokenizers.Split(Regex("▁*[^▁]+|▁+"), behavior="isolated")
    trainer = trainers.BpeTrainer(vocab_size=vocab_size - 256, special_tokens=specials,
                                  limit_alphabet=150, show_progress=False)
    trainer_tok.train_from_iterator(lines, trainer)
    vocab, merges = rebuild_with_bytes(trainer_tok, specials)

    def build(normalizer, pre_tokenizer):
        tok = Tokenizer(models.BPE(vocab=vocab, merges=merges, unk_token="<unk>",
                                   byte_fallback=True, fuse_unk=True))
        if normalizer is not None:
            tok.normalizer = normalizer
        if pre_tokenizer is not None:
            tok.pre_tokenizer = pre_tokenizer
        tok.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(),
                                         decoders.Fuse(), decoders.Strip(" ", 1, 0)])
        tok.add_special_tokens([AddedToken(s, special=True, normalized=False) for s in specials])
        tok.post_processor = processors.TemplateProcessing(
            single="<s> $A", pair="<s> $A <s> $B", special_tokens=[("<s>", 1)])
        return tok

    prepend = build(normalizers.Sequence([normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")]),
                    None)
    first = build(None, pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="first",
                                                 split=False))
    split = build(None, pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always",
                                                 split=True))
    return {"sp_prepend": prepend, "sp_metaspace_first": first, "sp_metaspace_split": split}


def byte_level(lines, pattern, vocab_size, specials, nfc, ignore_merges, bos):
    tok = Tokenizer(models.BPE(ignore_merges=ignore_merges))
    if nfc:
        tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(pattern), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=specials,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tok.train_from_iterator(lines, trainer)
    if bos:
        tok.post_processor = processors.Sequence([
            processors.ByteLevel(trim_offsets=False),
            processors.TemplateProcessing(single=f"{bos} $A", pair=f"{bos} $A {bos} $B",
                                          special_tokens=[(bos, tok.token_to_id(bos))])])
    else:
        tok.post_processor = processors.ByteLevel(trim_offsets=False)
    return tok


def add_whole_words(tok, lines, count):
    """Adds frequent words as tokens without merges: only ignore_merges finds them whole (real
    Llama 3 vocabularies have such tokens too), so the fixture shows whether it is honoured."""
    counts = {}
    for line in lines:
        for piece, _ in tok.pre_tokenizer.pre_tokenize_str(line):
            counts[piece] = counts.get(piece, 0) + 1
    spec = json.loads(tok.to_str())
    vocab = spec["model"]["vocab"]
    words = [p for p, _ in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
             if p not in vocab and len(p) >= 4][:count]
    for word in words:
        vocab[word] = len(vocab)
    return Tokenizer.from_str(json.dumps(spec))


def sentencepiece_model(lines, path):
    buffer = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(lines), model_writer=buffer, model_type="bpe", vocab_size=600,
        byte_fallback=False, character_coverage=0.995, normalization_rule_name="identity",
        add_dummy_prefix=True, remove_extra_whitespaces=False, allow_whitespace_only_pieces=True,
        split_digits=True, user_defined_symbols=["<tool>", "</tool>", "@@", "▁▁▁▁def"],
        max_sentence_length=100000, minloglevel=2)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(buffer.getvalue())


def sentencepiece_ties(path):
    from sentencepiece import sentencepiece_model_pb2 as pb
    model = pb.ModelProto()
    pieces = [("<unk>", 0.0, pb.ModelProto.SentencePiece.UNKNOWN),
              ("<s>", 0.0, pb.ModelProto.SentencePiece.CONTROL),
              ("</s>", 0.0, pb.ModelProto.SentencePiece.CONTROL)]
    # "b" and "c" get lower ids than "a": a tie broken by id instead of position shows.
    normal = [("b", -20.0), ("c", -20.0), ("a", -20.0), ("\u2581", -20.0), ("ab", -1.0),
              ("bc", -1.0), ("ba", -1.0), ("aa", -1.0), ("\u2581a", -2.0), ("\u2581b", -2.0),
              ("abc", -3.0), ("\u2581\u2581", -5.0), ("cab", -3.0), ("bca", -3.0)]
    pieces += [(text, score, pb.ModelProto.SentencePiece.NORMAL) for text, score in normal]
    for text, score, kind in pieces:
        piece = model.pieces.add()
        piece.piece, piece.score, piece.type = text, score, kind
    model.trainer_spec.model_type = pb.TrainerSpec.BPE
    model.trainer_spec.vocab_size = len(pieces)
    model.normalizer_spec.name = "identity"
    model.normalizer_spec.add_dummy_prefix = True
    model.normalizer_spec.remove_extra_whitespaces = False
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(model.SerializeToString())


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shared", default=os.path.join(here, "../../../shared"))
    args = parser.parse_args()
    out = os.path.join(here, "fixtures")

    write(os.path.join(out, "multilingual.txt"), MULTILINGUAL)
    write(os.path.join(out, "nfc_fuzz.txt"), nfc_fuzz_text())
    lines = training_lines(args.shared)
    # NFC-relevant training text for Qwen2: decomposed forms of the sample too.
    nfd_lines = [unicodedata.normalize("NFD", line) for line in MULTILINGUAL.splitlines()] * 10

    tokenizers_out = sentencepiece_style(lines, vocab_size=1000)
    tokenizers_out["llama3_bl"] = byte_level(lines, LLAMA3, 1000,
                                             ["<|begin_of_text|>", "<|end_of_text|>"], nfc=False,
                                             ignore_merges=True, bos="<|begin_of_text|>")
    tokenizers_out["llama3_bl"] = add_whole_words(tokenizers_out["llama3_bl"], lines, 40)
    tokenizers_out["qwen2_bl"] = byte_level(lines + nfd_lines, QWEN2, 1000,
                                            ["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
                                            nfc=True, ignore_merges=False, bos=None)
    for name, tok in tokenizers_out.items():
        path = os.path.join(out, name, "tokenizer.json")
        os.makedirs(os.path.dirname(path), exist_ok=True)
        tok.save(path, pretty=False)
        print(f"wrote {path} ({tok.get_vocab_size()} tokens, {os.path.getsize(path)} bytes)")
    sentencepiece_model(lines, os.path.join(out, "sp_tiny/tokenizer.model"))
    print(f"wrote {os.path.join(out, 'sp_tiny/tokenizer.model')}")
    sentencepiece_ties(os.path.join(out, "sp_ties/tokenizer.model"))
    print(f"wrote {os.path.join(out, 'sp_ties/tokenizer.model')}")


if __name__ == "__main__":
    main()
