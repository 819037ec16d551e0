#!/usr/bin/env python3
"""Writes the goldens for tokenizer_tests: reference token ids, decoded text and pre-tokenizer pieces.

The reference is Hugging Face `tokenizers` (pip install tokenizers): the pycode models'
tokenizer.json for ids, and Split pre-tokenizers with the GPT-2 / Llama 3 / Qwen2 regexes for
pieces. Long inputs (chunks of heldout_python.txt, the whole file, a sweep over all of Unicode)
are stored as an id count and a 64-bit FNV-1a hash to keep the file small; `--dump-chunk N`
prints the full reference ids of chunk N when a hash mismatch needs a closer look.

Line format (one record per line, fields separated by single spaces):
  case <name> <utf-8 text in hex>           a hand-made string; the records below refer to it
  ids <id>...                               encode(text) with special tokens (BOS)
  pieces <pretokenizer> <byte length>...    the pre-tokenizer's pieces of the text
  chunk <byte offset> <byte length> <count> <hash>   heldout_python.txt slice, no special tokens
  sweep <count> <hash>                      the Unicode sweep text (see sweep_text), no specials
  sweeppieces <pretokenizer> <count> <hash> piece byte lengths of the sweep text

Besides tokenizer_goldens.txt (the pycode tokenizer, format above), goldens/<name>.txt is written
for each of the other tokenizers (the Llama 2 tokenizer.model and the fixtures made by
make_fixtures.py), each by its own reference: the `sentencepiece` library for tokenizer.model files,
Hugging Face `tokenizers` for tokenizer.json files. Their format:
  reference <library> <version> <tokenizer path>
  case <name> <utf-8 text in hex>          a hand-made string
  ids <id>...                              encode(text) with special tokens (BOS where added)
  decoded <hex>                            decode(ids without special tokens), "-" when empty
  chunk <offset> <length> <count> <hash> <decoded length> <decoded hash>
                                           heldout_python.txt slice (the last: the whole file)
  text <name> <count> <hash> <decoded length> <decoded hash>
                                           sweep, multilingual (fixtures/multilingual.txt),
                                           nfc_fuzz (fixtures/nfc_fuzz.txt)
Decoded text is hashed as its bytes. goldens/nfc.txt holds NFC as `tokenizers` computes it:
  nfcline <line number> <hex>              each line of fixtures/nfc_fuzz.txt
  nfctext <name> <length> <hash>           sweep and multilingual

Usage: python3 tests/tokenizer/make_goldens.py [--shared ../shared] [-o tokenizer_goldens.txt]
"""
import argparse
import json
import os

import sentencepiece
import tokenizers
from tokenizers import Regex, Tokenizer, normalizers, pre_tokenizers

PATTERNS = {
    "gpt2": r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+",
    "llama3": r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+"
              r"[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
    "qwen2": r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+"
             r"[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
}

CASES = [
    ("empty", ""),
    ("hello", "hello world"),
    ("contractions", "It's a test: we'll see what they've done, I'm sure he'd say 's 't 're 've."),
    ("contractions_upper", "IT'S WE'LL THEY'VE I'M HE'D DON'T 'S 'LL 'Re x''s ''"),
    ("long_s", "'\u017f '\u017ft 'ſ"),
    ("crlf_tabs", "x = 1\r\n\ty = 2\r\n\r\n\t\tz\t=\t3\r\n"),
    ("whitespace_runs", "a" + " " * 100 + "b" + "\t" * 20 + "c" + "\n" * 10 + "d \n \n  e   "),
    ("trailing_space", "end   "),
    ("leading_space", "   start"),
    ("scripts", "Ελληνικά русский עברית العربية हिन्दी 中文字符 日本語のテキスト 한국어 ไทย"),
    ("digits", "0123456789 ٠١٢٣ ४५६ 一二三 ½ ⅔ Ⅻ ① 12345678 3.14159 1e-10 0x1F 12,345"),
    ("emoji", "family: 👨\u200d👩\u200d👧\u200d👦, flags 🇩🇪🇯🇵, skin 👍🏽, heart ❤️!"),
    ("special_inside", "def f():<|end_of_text|>\n<|begin_of_text|>x<|end_of_text|><|end_of_text|>"
                       " <|end_of_text <|end_of_text|>y"),
    ("accents", "café naïve résumé — “quotes” ‘single’ … e\u0301 a\u0308 ñ"),
    ("unicode_spaces", "a\u00a0b\u2003c\u3000d\u2028e\u0085f\u200bg\u202f h"),
    ("controls", "\x00\x01\x7f\x1b[0m\x0b\x0c\x1c\x1d"),
    ("python", "class Foo(Base):\n    def __init__(self, x: int = 0) -> None:\n"
               "        self._x = x  # comment\n\n    @property\n    def x(self):\n"
               "        return self._x ** 2 != -1\n"),
    ("punctuation", "(hello) [world]\n\n{x}!!! ?? ... --- +++ ===\n\n\n  def  \r\n  x"),
    ("astral", "𝔘𝔫𝔦𝔠𝔬𝔡𝔢 𝟙𝟚𝟛 𐍈 𓀀𓀁 🀄"),
    ("mixed_classes", "a1b2 c3-d4_e5 f6.g7 1a 1'a a'1 ' a 'a '1"),
]

# More cases for the other tokenizers: SentencePiece whitespace handling, byte fallback,
# user-defined and special-looking pieces, normalization.
EXTRA_CASES = [
    ("indent", "int:\n    if n"),
    ("leading_space", " hello"),
    ("two_leading_spaces", "  hello world"),
    ("only_spaces", "   "),
    ("one_space", " "),
    ("tab_start", "\thello"),
    ("newline_start", "\nx = 1"),
    ("trailing_newlines", "x\n\n"),
    ("space_runs", "a" + " " * 7 + "b" + " " * 16 + "c" + " " * 33 + "d\n" + " " * 12 + "return"),
    ("special_looking", "<s>hi</s> <unk> <tool>x@@y </tool>    def f(): <|endoftext|><|im_start|>"),
    ("unknown_runs", "𝔘𝔫𝔦𝔠𝔬𝔡𝔢 ⓐⓑⓒ ꙮ x 𓀀𓀁 ᚠᛇᚻ"),
    ("lower_block", "▁ ▁▁x ▁"),
    ("nfc", "e\u0301 a\u0308 A\u030a \u212b \u1100\u1161\u11a8 q\u0307\u0323 \u0958 o\u0323\u0302 "
            "\u00c5\u0316 \U00011935\U00011930 \u07fd\u0301"),
    ("cr_only", "a\rb\r\rc"),
    ("ties", "abc abcbc aab bab cab  abca bcab"),
]

SWEEP_SEPARATORS = ["", " ", "a", "", "1", "  ", "\n", "'s", "\r\n "]


def sweep_text():
    """Every 13th code point (no surrogates), with separators that put each next to other classes.

    tokenizer_tests builds the same string (SweepText in TokenizerParityTest.cpp)."""
    out = []
    for k, cp in enumerate(range(0, 0x110000, 13)):
        if 0xD800 <= cp < 0xE000:
            continue
        out.append(chr(cp))
        out.append(SWEEP_SEPARATORS[k % len(SWEEP_SEPARATORS)])
    return "".join(out)


def fnv1a64(values):
    h = 0xCBF29CE484222325
    for v in values:
        for byte in int(v).to_bytes(4, "little"):
            h ^= byte
            h = (h * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return f"{h:016x}"


def chunks(data, size=2048):
    """~2 KB slices of the file ending at line breaks (so each is valid UTF-8)."""
    start = 0
    while start < len(data):
        end = data.find(b"\n", start + size)
        end = len(data) if end < 0 else end + 1
        yield start, end - start
        start = end


def piece_lengths(splitter, text):
    return [len(piece.encode("utf-8")) for piece, _ in splitter.pre_tokenize_str(text)]


def bytes_hash(text):
    data = text.encode("utf-8")
    return len(data), fnv1a64(data)


class HfReference:
    def __init__(self, path):
        self.tok = Tokenizer.from_file(path)
        self.name = f"tokenizers {tokenizers.__version__}"

    def encode(self, text, special):
        return self.tok.encode(text, add_special_tokens=special).ids

    def decode(self, ids):
        return self.tok.decode(ids, skip_special_tokens=False)


class SentencePieceReference:
    def __init__(self, path, add_bos):
        self.sp = sentencepiece.SentencePieceProcessor(model_file=path)
        self.add_bos = add_bos
        self.name = f"sentencepiece {sentencepiece.__version__}"

    def encode(self, text, special):
        ids = self.sp.encode(text)
        return [self.sp.bos_id()] + ids if special and self.add_bos else ids

    def decode(self, ids):
        return self.sp.decode(ids)


def golden_lines(ref, label, data, texts):
    lines = [f"reference {ref.name} {label}"]
    for name, text in CASES + EXTRA_CASES:
        lines.append(f"case {name} {text.encode('utf-8').hex()}")
        lines.append("ids " + " ".join(map(str, ref.encode(text, True))))
        decoded = ref.decode(ref.encode(text, False)).encode("utf-8").hex()
        lines.append("decoded " + (decoded or "-"))
    spans = list(chunks(data)) + [(0, len(data))]
    for offset, length in spans:
        text = data[offset:offset + length].decode("utf-8")
        ids = ref.encode(text, False)
        n, h = bytes_hash(ref.decode(ids))
        lines.append(f"chunk {offset} {length} {len(ids)} {fnv1a64(ids)} {n} {h}")
    for name, text in texts:
        ids = ref.encode(text, False)
        n, h = bytes_hash(ref.decode(ids))
        lines.append(f"text {name} {len(ids)} {fnv1a64(ids)} {n} {h}")
    return lines


def write_other_goldens(here, shared, data):
    fixtures = os.path.join(here, "fixtures")
    out_dir = os.path.join(here, "goldens")
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(fixtures, "multilingual.txt"), encoding="utf-8", newline="") as f:
        multilingual = f.read()
    with open(os.path.join(fixtures, "nfc_fuzz.txt"), encoding="utf-8", newline="") as f:
        nfc_fuzz = f.read()
    texts = [("sweep", sweep_text()), ("multilingual", multilingual), ("nfc_fuzz", nfc_fuzz)]

    references = [
        ("llama2", SentencePieceReference(
            os.path.join(shared, "models/tokenizers/llama2/tokenizer.model"), add_bos=True),
         "models/tokenizers/llama2/tokenizer.model"),
        ("sp_tiny", SentencePieceReference(os.path.join(fixtures, "sp_tiny/tokenizer.model"),
                                           add_bos=True), "fixtures/sp_tiny/tokenizer.model"),
        ("sp_ties", SentencePieceReference(os.path.join(fixtures, "sp_ties/tokenizer.model"),
                                           add_bos=True), "fixtures/sp_ties/tokenizer.model"),
    ]
    for name in ["sp_prepend", "sp_metaspace_first", "sp_metaspace_split", "llama3_bl",
                 "qwen2_bl"]:
        references.append((name, HfReference(os.path.join(fixtures, name, "tokenizer.json")),
                           f"fixtures/{name}/tokenizer.json"))
    for name, ref, label in references:
        lines = golden_lines(ref, label, data, texts)
        path = os.path.join(out_dir, f"{name}.txt")
        with open(path, "w") as f:
            f.write("\n".join(lines) + "\n")
        print(f"wrote {path}")

    # ignore_merges must matter for the Llama 3 fixture, or its test proves nothing.
    with_flag = Tokenizer.from_file(os.path.join(fixtures, "llama3_bl/tokenizer.json"))
    spec = json.loads(with_flag.to_str())
    spec["model"]["ignore_merges"] = False
    without = Tokenizer.from_str(json.dumps(spec))
    differ = sum(with_flag.encode(t).ids != without.encode(t).ids
                 for t in [text for _, text in texts] + [multilingual] +
                 [data[o:o + n].decode("utf-8") for o, n in chunks(data)])
    if differ == 0:
        raise SystemExit("llama3_bl: ignore_merges changes nothing on the test texts")
    print(f"llama3_bl: ignore_merges changes {differ} of the test texts")

    nfc = normalizers.NFC()
    lines = [f"# NFC by tokenizers {tokenizers.__version__}"]
    for number, line in enumerate(nfc_fuzz.split("\n")):
        lines.append(f"nfcline {number} {nfc.normalize_str(line).encode('utf-8').hex() or '-'}")
    for name, text in [("sweep", sweep_text()), ("multilingual", multilingual)]:
        n, h = bytes_hash(nfc.normalize_str(text))
        lines.append(f"nfctext {name} {n} {h}")
    path = os.path.join(out_dir, "nfc.txt")
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    print(f"wrote {path}")


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shared", default=os.path.join(here, "../../../shared"))
    parser.add_argument("-o", "--output", default=os.path.join(here, "tokenizer_goldens.txt"))
    parser.add_argument("--dump-chunk", type=int, help="print the reference ids of one chunk")
    args = parser.parse_args()

    tok_path = os.path.join(args.shared, "models/pycode-llama-3m/tokenizer.json")
    tok = Tokenizer.from_file(tok_path)
    with open(os.path.join(args.shared, "data/heldout_python.txt"), "rb") as f:
        data = f.read()
    splitters = {name: pre_tokenizers.Split(Regex(p), behavior="isolated")
                 for name, p in PATTERNS.items()}

    if args.dump_chunk is not None:
        offset, length = list(chunks(data))[args.dump_chunk]
        text = data[offset:offset + length].decode("utf-8")
        print(" ".join(map(str, tok.encode(text, add_special_tokens=False).ids)))
        return

    lines = [f"# Made by make_goldens.py with tokenizers {tokenizers.__version__} from "
             "pycode-llama-3m/tokenizer.json and heldout_python.txt. Do not edit."]
    for name, text in CASES:
        lines.append(f"case {name} {text.encode('utf-8').hex()}")
        lines.append("ids " + " ".join(map(str, tok.encode(text).ids)))
        for kind, splitter in splitters.items():
            lines.append(f"pieces {kind} " + " ".join(map(str, piece_lengths(splitter, text))))

    for offset, length in chunks(data):
        text = data[offset:offset + length].decode("utf-8")
        ids = tok.encode(text, add_special_tokens=False).ids
        lines.append(f"chunk {offset} {length} {len(ids)} {fnv1a64(ids)}")
    ids = tok.encode(data.decode("utf-8"), add_special_tokens=False).ids
    lines.append(f"chunk 0 {len(data)} {len(ids)} {fnv1a64(ids)}")

    sweep = sweep_text()
    ids = tok.encode(sweep, add_special_tokens=False).ids
    lines.append(f"sweep {len(ids)} {fnv1a64(ids)}")
    for kind, splitter in splitters.items():
        lengths = piece_lengths(splitter, sweep)
        lines.append(f"sweeppieces {kind} {len(lengths)} {fnv1a64(lengths)}")

    with open(args.output, "w") as f:
        f.write("\n".join(lines) + "\n")
    print(f"wrote {args.output}")

    write_other_goldens(here, args.shared, data)


if __name__ == "__main__":
    main()
