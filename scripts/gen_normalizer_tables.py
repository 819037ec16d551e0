#!/usr/bin/env python3
"""Generates runtime/src/NormalizerTables.cpp: the Unicode data behind the runtime's NFC normalizer.

Token ids must match Hugging Face `tokenizers`, so NFC must be *its* NFC, and its tables are not
Python's: `tokenizers` normalizes with the `unicode-normalization-alignments` crate, whose Unicode
data is older than `unicodedata` here (it gives U+07FD, U+0898.. no combining class and does not
decompose U+11938). So every table is measured on the engine itself and `unicodedata` only
supplies what the engine cannot show directly (one-level decomposition mappings, the numeric
combining class), each value checked against the engine's behaviour:

  decompositions   NFD of every code point through `tokenizers.normalizers.NFD`; the one-level
                   mapping from `unicodedata`, kept only where its full expansion equals the
                   engine's NFD.
  combining class  `unicodedata.combining`, kept where the engine reorders/blocks exactly as that
                   class predicts against a reference mark of every class; 0 where the engine
                   treats the mark as a starter (characters newer than its data); anything else
                   aborts.
  compositions     the two-character mappings whose composite survives the engine's NFC (this
                   drops composition exclusions and non-starter decompositions).

Then a Python copy of the runtime's algorithm, run on these tables, must agree with the engine on
every code point and on a large random sample of combining sequences; otherwise nothing is written.

Usage: python3 scripts/gen_normalizer_tables.py [-o runtime/src/NormalizerTables.cpp]
"""
import argparse
import os
import random
import sys
import unicodedata

from tokenizers import __version__ as tokenizers_version, normalizers

HF_NFC = normalizers.NFC()
HF_NFD = normalizers.NFD()
SEP = "\x00"  # a starter that never composes: separates probes in one engine call
HANGUL_FIRST, HANGUL_LAST = 0xAC00, 0xD7A3
CODE_POINTS = [c for c in range(1, 0x110000) if not 0xD800 <= c < 0xE000]


def engine(normalizer, strings):
    """Runs the engine on many strings (a few calls, each split on SEP)."""
    out = []
    for start in range(0, len(strings), 100000):
        part = strings[start:start + 100000]
        got = normalizer.normalize_str(SEP.join(part)).split(SEP)
        assert len(got) == len(part), "separator was changed by the normalizer"
        out.extend(got)
    return out


def is_hangul(cp):
    return HANGUL_FIRST <= cp <= HANGUL_LAST


def measure_decompositions():
    """cp -> full canonical decomposition (tuple), as the engine computes it; Hangul excluded."""
    nfd = engine(HF_NFD, [chr(c) for c in CODE_POINTS])
    full = {}
    for cp, out in zip(CODE_POINTS, nfd):
        if out != chr(cp) and not is_hangul(cp):
            full[cp] = tuple(ord(ch) for ch in out)
    # Hangul syllables must decompose algorithmically in the engine too.
    for cp in (HANGUL_FIRST, 0xAC01, 0xB098, HANGUL_LAST):
        if engine(HF_NFD, [chr(cp)])[0] != unicodedata.normalize("NFD", chr(cp)):
            sys.exit(f"engine decomposes Hangul U+{cp:04X} unexpectedly")
    return full


def one_level_mapping(cp):
    """unicodedata's canonical one-level mapping, or None (compatibility mappings have a <tag>)."""
    text = unicodedata.decomposition(chr(cp))
    if not text or text.startswith("<"):
        return None
    return tuple(int(part, 16) for part in text.split())


def measure_combining_classes(decomposable, compose):
    """cp -> combining class as the engine behaves, for code points the engine does not decompose."""
    # Reference marks: per class, the first mark the engine reorders against U+0334 (class 1)
    # and U+0301 (class 230) as that class says and does not block A + ring (U+030A) with; the
    # references are then checked against each other.
    by_class = {}
    for cp in CODE_POINTS:
        ccc = unicodedata.combining(chr(cp))
        if ccc and cp not in decomposable:
            by_class.setdefault(ccc, []).append(cp)

    def honours(cp, ccc):
        ch = chr(cp)
        probes = [ch + "\u0334", "\u0334" + ch, ch + "\u0301", "\u0301" + ch]
        expect = ["\u0334" + ch if ccc > 1 else ch + "\u0334", "\u0334" + ch,
                  "\u0301" + ch if ccc > 230 else ch + "\u0301",
                  ch + "\u0301" if ccc < 230 else "\u0301" + ch]
        if engine(HF_NFD, probes) != expect:
            return False
        composed = engine(HF_NFC, ["A" + ch + "\u030A"])[0]
        return composed == ("\u00C5" + ch if ccc != 230 else "A" + ch + "\u030A")

    references = {}
    for ccc, cps in by_class.items():
        for cp in cps:
            if honours(cp, ccc):
                references[ccc] = cp
                break
    values = sorted(references)
    probes = [chr(references[a]) + chr(references[b]) for a in values for b in values]
    results = iter(engine(HF_NFD, probes))
    for a in values:
        for b in values:
            swapped = next(results) != chr(references[a]) + chr(references[b])
            if swapped != (a > b):
                sys.exit(f"engine orders reference marks of classes {a} and {b} unexpectedly")

    def probe_strings(ch):
        # Starter test: a mark of class 1..229 between A and a combining ring does not block
        # the ring (A + ring -> U+00C5); a starter does. Plus one reordering probe per class.
        return ["A" + ch + "\u030A"] + [ch + chr(references[v]) for v in values]

    def predicted(ch, ccc):
        # The starter test through the reference algorithm (ch may itself compose with A or
        # with the ring), the reordering probes directly.
        classes = {0x30A: 230}
        if ccc:
            classes[ord(ch)] = ccc
        out = [nfc_reference("A" + ch + "\u030A", {}, classes, compose)]
        for v in values:
            ref = chr(references[v])
            out.append(ref + ch if ccc > v else ch + ref)
        return out

    candidates = [cp for cp in CODE_POINTS if cp not in decomposable and not is_hangul(cp)]
    # Screen: U+0334 (class 1) after, U+0301 (class 230) before. A starter moves neither; any
    # non-starter moves at least one of them.
    after = engine(HF_NFD, [chr(cp) + "\u0334" for cp in candidates])
    before = engine(HF_NFD, ["\u0301" + chr(cp) for cp in candidates])
    marks = [cp for cp, a, b in zip(candidates, after, before)
             if unicodedata.combining(chr(cp)) or a != chr(cp) + "\u0334"
             or b != "\u0301" + chr(cp)]
    strings = []
    for cp in marks:
        strings.extend(probe_strings(chr(cp)))
    # NFC for the starter test, NFD for the reordering probes: compute both, pick per probe.
    nfc_out = engine(HF_NFC, strings)
    nfd_out = engine(HF_NFD, strings)
    per = 1 + len(values)
    classes, overridden = {}, []
    for i, cp in enumerate(marks):
        got = [nfc_out[i * per]] + nfd_out[i * per + 1:(i + 1) * per]
        ccc = unicodedata.combining(chr(cp))
        if got == predicted(chr(cp), ccc):
            if ccc:
                classes[cp] = ccc
            continue
        if ccc and got == predicted(chr(cp), 0):
            overridden.append(cp)  # newer than the engine's data: a starter there
            continue
        sys.exit(f"U+{cp:04X}: engine behaves like neither combining class {ccc} nor 0")
    return classes, overridden


def nfc_reference(text, decomp, ccc, compose):
    """The runtime's algorithm (Normalizer.cpp), on the generated tables."""
    SBase, LBase, VBase, TBase = 0xAC00, 0x1100, 0x1161, 0x11A7
    LCount, VCount, TCount = 19, 21, 28
    NCount = VCount * TCount
    chars = []
    for ch in text:
        cp = ord(ch)
        if is_hangul(cp):
            s = cp - SBase
            chars.append(LBase + s // NCount)
            chars.append(VBase + (s % NCount) // TCount)
            if s % TCount:
                chars.append(TBase + s % TCount)
        elif cp in decomp:
            chars.extend(decomp[cp])
        else:
            chars.append(cp)
    # Canonical ordering: stable sort of each run of non-starters.
    i = 0
    while i < len(chars):
        if ccc.get(chars[i], 0) == 0:
            i += 1
            continue
        j = i
        while j < len(chars) and ccc.get(chars[j], 0) != 0:
            j += 1
        chars[i:j] = sorted(chars[i:j], key=lambda c: ccc.get(c, 0))
        i = j
    # Composition.
    out = []
    starter = -1  # index in out of the last starter
    last_ccc = 0
    for cp in chars:
        c = ccc.get(cp, 0)
        if starter >= 0:
            first = out[starter]
            adjacent = starter == len(out) - 1
            if adjacent or (last_ccc != 0 and last_ccc < c):
                composite = None
                if LBase <= first < LBase + LCount and VBase <= cp < VBase + VCount and adjacent:
                    composite = SBase + ((first - LBase) * VCount + (cp - VBase)) * TCount
                elif (SBase <= first <= HANGUL_LAST and (first - SBase) % TCount == 0
                      and TBase < cp < TBase + TCount and adjacent):
                    composite = first + (cp - TBase)
                else:
                    composite = compose.get((first, cp))
                if composite is not None:
                    out[starter] = composite
                    continue
        if c == 0:
            starter = len(out)
            last_ccc = 0
        else:
            last_ccc = c
        out.append(cp)
    return "".join(map(chr, out))


def verify(decomp, ccc, compose):
    singles = [chr(c) for c in CODE_POINTS]
    for text, got in zip(singles, engine(HF_NFC, singles)):
        if nfc_reference(text, decomp, ccc, compose) != got:
            sys.exit(f"NFC(U+{ord(text):04X}) differs from the engine")
    # Random combining sequences over the characters that take part in normalization.
    interesting = sorted(set(decomp) | set(ccc) | {a for a, _ in compose} | {b for _, b in compose}
                         | set(range(0x1100, 0x1113)) | set(range(0x1161, 0x1176))
                         | set(range(0x11A8, 0x11C3)) | {0xAC00, 0xAC01, 0xB098, 0xD7A3}
                         | set(range(0x41, 0x5B)) | {0x20, 0x7FD, 0x898, 0x11935, 0x11930})
    rng = random.Random(1234)
    samples = []
    for _ in range(300000):
        n = rng.randint(1, 6)
        samples.append("".join(chr(rng.choice(interesting)) for _ in range(n)))
    # Bias towards real collisions: a starter followed by marks that compose with it.
    firsts = {}
    for (a, b) in compose:
        firsts.setdefault(a, []).append(b)
    keys = sorted(firsts)
    marks = sorted(ccc)
    for _ in range(200000):
        a = rng.choice(keys)
        seq = [a] + [rng.choice(firsts[a] + [rng.choice(marks)]) for _ in range(rng.randint(1, 4))]
        tail = seq[1:]
        rng.shuffle(tail)
        seq = [a] + tail
        samples.append("".join(map(chr, seq)))
    mismatches = 0
    for text, got in zip(samples, engine(HF_NFC, samples)):
        if nfc_reference(text, decomp, ccc, compose) != got:
            mismatches += 1
            if mismatches <= 5:
                print("mismatch:", [f"U+{ord(c):04X}" for c in text], file=sys.stderr)
    if mismatches:
        sys.exit(f"{mismatches} of {len(samples)} random sequences differ from the engine")
    return len(samples)


def emit(decomp, ccc, compose, notes):
    lines = []
    lines.append("const CombiningClassRange kCombiningClasses[] = {")
    ranges = []
    for cp in sorted(ccc):
        if ranges and ranges[-1][1] + 1 == cp and ranges[-1][2] == ccc[cp]:
            ranges[-1][1] = cp
        else:
            ranges.append([cp, cp, ccc[cp]])
    row = []
    for lo, hi, value in ranges:
        row.append(f"{{0x{lo:X}, 0x{hi:X}, {value}}},")
        if len(row) == 4:
            lines.append("    " + " ".join(row))
            row = []
    if row:
        lines.append("    " + " ".join(row))
    lines.append("};")
    lines.append("const size_t kCombiningClassesCount = "
                 "sizeof(kCombiningClasses) / sizeof(kCombiningClasses[0]);\n")

    data, entries = [], []
    for cp in sorted(decomp):
        entries.append((cp, len(data), len(decomp[cp])))
        data.extend(decomp[cp])
    lines.append("const char32_t kDecompositionData[] = {")
    for i in range(0, len(data), 8):
        lines.append("    " + " ".join(f"0x{c:X}," for c in data[i:i + 8]))
    lines.append("};")
    lines.append("const Decomposition kDecompositions[] = {")
    for i in range(0, len(entries), 4):
        lines.append("    " + " ".join(f"{{0x{cp:X}, {off}, {n}}}," for cp, off, n in entries[i:i + 4]))
    lines.append("};")
    lines.append("const size_t kDecompositionsCount = "
                 "sizeof(kDecompositions) / sizeof(kDecompositions[0]);\n")

    lines.append("const Composition kCompositions[] = {")
    pairs = sorted(compose.items())
    for i in range(0, len(pairs), 3):
        lines.append("    " + " ".join(f"{{0x{a:X}, 0x{b:X}, 0x{c:X}}}," for (a, b), c in pairs[i:i + 3]))
    lines.append("};")
    lines.append("const size_t kCompositionsCount = sizeof(kCompositions) / sizeof(kCompositions[0]);")

    header = (f"// Generated by scripts/gen_normalizer_tables.py from the NFC/NFD normalizers of\n"
              f"// Hugging Face tokenizers {tokenizers_version}, checked against unicodedata "
              f"{unicodedata.unidata_version}:\n// {notes}. Do not edit.\n")
    return header + """#include "Normalizer.h"

namespace ninfer {
namespace unicode {

""" + "\n".join(lines) + """

} // namespace unicode
} // namespace ninfer
"""


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    parser.add_argument("-o", "--output",
                        default=os.path.join(root, "runtime/src/NormalizerTables.cpp"))
    args = parser.parse_args()

    full = measure_decompositions()
    # Full expansion of unicodedata's one-level mappings must give the engine's NFD.
    def expand(cp):
        mapping = one_level_mapping(cp)
        if mapping is None:
            return (cp,)
        return tuple(x for part in mapping for x in expand(part))
    decomp = {}
    dropped = []
    for cp in CODE_POINTS:
        if is_hangul(cp):
            continue
        mapping = one_level_mapping(cp)
        if cp in full:
            if mapping is None:
                sys.exit(f"engine decomposes U+{cp:04X}, unicodedata has no canonical mapping")
            decomp[cp] = full[cp]
        elif mapping is not None:
            dropped.append(cp)  # unicodedata decomposes it, the engine does not
    print(f"decompositions: {len(decomp)} (engine lacks {len(dropped)} that unicodedata has: "
          f"{', '.join(f'U+{c:04X}' for c in dropped[:8])})")


    singles = [chr(c) for c in sorted(decomp)]
    stays = {ord(t) for t, out in zip(singles, engine(HF_NFC, singles)) if out == t}
    compose = {}
    for cp in sorted(decomp):
        mapping = one_level_mapping(cp)
        if cp in stays and len(mapping) == 2:
            compose[mapping] = cp
    print(f"compositions: {len(compose)}")

    ccc, overridden = measure_combining_classes(set(decomp), compose)
    print(f"combining classes: {len(ccc)} non-starters ({len(overridden)} that unicodedata "
          f"classes as marks are starters in the engine)")
    for (first, _), cp in compose.items():
        if ccc.get(first, 0) != 0:
            sys.exit(f"U+{cp:04X} composes from a non-starter")

    samples = verify(decomp, ccc, compose)
    print(f"verified against the engine: all code points and {samples} random sequences")

    notes = (f"engine lacks {len(dropped)} decompositions and {len(overridden)} combining "
             f"classes of that version")
    with open(args.output, "w") as f:
        f.write(emit(decomp, ccc, compose, notes))
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
