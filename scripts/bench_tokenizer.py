#!/usr/bin/env python3
"""Encoding speed of ninfer's tokenizers next to the reference libraries, single-threaded.

Runs the C++ benchmark (tests/tokenizer/bench_tokenizer.cpp, target `bench_tokenizer`) and the
reference on the same text and tokenizers, and prints both side by side. The reference is
Hugging Face `tokenizers` for tokenizer.json directories and `sentencepiece` for tokenizer.model
ones, both pinned to one thread (RAYON_NUM_THREADS=1, TOKENIZERS_PARALLELISM=false). Each side
encodes the text --repeats times with one tokenizer object: the first pass (cold word cache) is
shown apart from the median of the others (warm). --lines encodes line by line instead of the
whole file in one call. Not a test: nothing is asserted.

Usage: python3 scripts/bench_tokenizer.py [--bench build/tests/tokenizer/bench_tokenizer]
           [--text ../shared/data/heldout_python.txt] [--repeats 10] [--lines]
"""
import os

os.environ["RAYON_NUM_THREADS"] = "1"  # before tokenizers starts its thread pool
os.environ["TOKENIZERS_PARALLELISM"] = "false"

import argparse
import datetime
import platform
import statistics
import subprocess
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def tokenizer_dirs(shared):
    fixtures = os.path.join(ROOT, "tests/tokenizer/fixtures")
    return [
        ("pycode (byte-level, GPT-2 regex)", os.path.join(shared, "models/pycode-llama-3m")),
        ("llama2 tokenizer.model", os.path.join(shared, "models/tokenizers/llama2")),
        ("llama3-style (ignore_merges)", os.path.join(fixtures, "llama3_bl")),
        ("qwen2-style (NFC)", os.path.join(fixtures, "qwen2_bl")),
        ("sentencepiece-style json", os.path.join(fixtures, "sp_prepend")),
    ]


def reference_encoder(directory):
    path = os.path.join(directory, "tokenizer.json")
    if os.path.exists(path):
        import tokenizers
        tok = tokenizers.Tokenizer.from_file(path)
        return (f"tokenizers {tokenizers.__version__}",
                lambda text: tok.encode(text, add_special_tokens=False).ids)
    import sentencepiece
    sp = sentencepiece.SentencePieceProcessor(model_file=os.path.join(directory, "tokenizer.model"))
    return f"sentencepiece {sentencepiece.__version__}", sp.encode


def time_reference(directory, pieces, repeats):
    name, encode = reference_encoder(directory)
    seconds = []
    for _ in range(repeats):
        start = time.perf_counter()
        for piece in pieces:
            encode(piece)
        seconds.append(time.perf_counter() - start)
    return name, seconds[0], statistics.median(seconds[1:])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bench", default=os.path.join(ROOT, "build/tests/tokenizer/bench_tokenizer"))
    parser.add_argument("--shared", default=os.path.join(ROOT, "../shared"))
    parser.add_argument("--text", default=None)
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--lines", action="store_true")
    args = parser.parse_args()
    text_path = args.text or os.path.join(args.shared, "data/heldout_python.txt")
    with open(text_path, encoding="utf-8") as f:
        text = f.read()
    megabytes = len(text.encode("utf-8")) / 1e6
    pieces = text.splitlines(keepends=True) if args.lines else [text]
    dirs = tokenizer_dirs(args.shared)

    command = [args.bench, "--repeats", str(args.repeats)] + (["--lines"] if args.lines else [])
    command += [text_path] + [d for _, d in dirs]
    ours = {}
    for line in subprocess.run(command, check=True, capture_output=True, text=True).stdout.splitlines():
        directory, _, cold, warm = line.split("\t")
        ours[directory] = (float(cold.split()[1]), float(warm.split()[1]))

    print(f"{datetime.date.today()}  {platform.node()}  {platform.processor() or platform.machine()}"
          f"  {os.cpu_count()} cpus; text {os.path.basename(text_path)} ({megabytes:.2f} MB, "
          f"{'line by line' if args.lines else 'whole file'}), {args.repeats} passes, 1 thread")
    print(f"{'tokenizer':34} {'ninfer cold':>12} {'ninfer warm':>12} {'ref cold':>10} "
          f"{'ref warm':>10}  reference  (MB/s)")
    for label, directory in dirs:
        name, cold, warm = time_reference(directory, pieces, args.repeats)
        our_cold, our_warm = ours[directory]
        print(f"{label:34} {our_cold:12.2f} {our_warm:12.2f} {megabytes / cold:10.2f} "
              f"{megabytes / warm:10.2f}  {name}")


if __name__ == "__main__":
    main()
