#!/usr/bin/env python3
"""Which kernels of two plans differ in machine code (SASS), without a GPU.

    scripts/sass_diff.py A.nplan B.nplan [--cuobjdump PATH]

Takes the cubins a plan embeds (ELF images, in order; the n-th of A is compared with the n-th
of B), disassembles each with cuobjdump -sass and compares every kernel's instructions. The
addresses of the module's global symbols (c[0x4][...]) and the instruction encodings are left
out: they move when another kernel of the module changes. Prints one line per kernel that
differs or is in only one plan, then a count; exit status 0 when every kernel is the same,
1 otherwise, 2 on bad input.

Use it to show that a change leaves the code that ran on the GPU as it was (a refactor, a
change that only touches other kernels), or which kernels a change does reach.

cuobjdump: the CUDA toolkit's, or PyPI's nvidia-cuda-cuobjdump
(`pip download nvidia-cuda-cuobjdump --no-deps`, then unzip the wheel).
"""
import argparse
import re
import shutil
import struct
import subprocess
import sys
import tempfile
from pathlib import Path


def cubins(data):
    """The ELF images in `data`, each cut at the end of its section or program headers."""
    images, at = [], data.find(b"\x7fELF")
    while at >= 0:
        if len(data) < at + 64 or data[at + 4] != 2:  # ELFCLASS64
            raise ValueError(f"a truncated or 32-bit ELF image at byte {at}")
        phoff, shoff = struct.unpack_from("<QQ", data, at + 0x20)
        phentsize, phnum, shentsize, shnum = struct.unpack_from("<HHHH", data, at + 0x36)
        end = at + max(shoff + shentsize * shnum, phoff + phentsize * phnum)
        if end > len(data):
            raise ValueError(f"the ELF image at byte {at} runs past the end of the file")
        images.append(data[at:end])
        at = data.find(b"\x7fELF", end)
    return images


SYMBOL_ADDRESS = re.compile(r"c\[0x4\]\[0x[0-9a-f]+\]")
ENCODING = re.compile(r"/\* 0x[0-9a-f]+ \*/")
OFFSET = re.compile(r"/\*[0-9a-f]{4,}\*/")


def kernels(cuobjdump, image, workdir, name):
    """{kernel: its instructions} of one cubin."""
    path = Path(workdir) / name
    path.write_bytes(image)
    out = subprocess.run([cuobjdump, "-sass", str(path)], capture_output=True, text=True)
    if out.returncode != 0:
        raise ValueError(f"cuobjdump failed on {name}: {out.stderr.strip()}")
    result, current = {}, None
    for line in out.stdout.splitlines():
        match = re.search(r"Function : (\S+)", line)
        if match:
            current = result.setdefault(match.group(1), [])
            continue
        text = OFFSET.sub("", ENCODING.sub("", SYMBOL_ADDRESS.sub("c[0x4][.]", line))).strip()
        if current is not None and text and not text.startswith((".", "code for")):
            current.append(text)
    return result


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("a")
    ap.add_argument("b")
    ap.add_argument("--cuobjdump", default=shutil.which("cuobjdump") or "cuobjdump")
    args = ap.parse_args()
    try:
        images = [cubins(Path(p).read_bytes()) for p in (args.a, args.b)]
    except (OSError, ValueError) as e:
        print(f"sass_diff: {e}", file=sys.stderr)
        return 2
    if not images[0] or len(images[0]) != len(images[1]):
        print(f"sass_diff: the plans hold {len(images[0])} and {len(images[1])} cubins",
              file=sys.stderr)
        return 2
    differ = total = 0
    with tempfile.TemporaryDirectory() as work:
        for n, (ia, ib) in enumerate(zip(*images)):
            try:
                ka = kernels(args.cuobjdump, ia, work, f"a{n}.cubin")
                kb = kernels(args.cuobjdump, ib, work, f"b{n}.cubin")
            except (OSError, ValueError) as e:
                print(f"sass_diff: {e}", file=sys.stderr)
                return 2
            for name in sorted(set(ka) | set(kb)):
                total += 1
                if name not in ka or name not in kb:
                    print(f"cubin {n}: {name} only in {'b' if name not in ka else 'a'}")
                    differ += 1
                elif ka[name] != kb[name]:
                    print(f"cubin {n}: {name} differs")
                    differ += 1
    print(f"{total} kernels, {differ} differ")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
