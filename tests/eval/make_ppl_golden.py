#!/usr/bin/env python3
"""Independent perplexity reference for `ninfer perplexity` (runtime/src/Evaluation.cpp):
Hugging Face transformers (float32, eager attention, CPU) runs pycode-llama-3m over the first
LINES lines of shared/data/heldout_python.txt with llama.cpp's chunking, implemented here on
its own:

  ids = tokenizer(text) (tokenizer.json's post-processor prepends BOS = 0)
  chunk c = ids[c*ctx : (c+1)*ctx] with its first id replaced by BOS, for c < len(ids) // ctx
  each chunk is one forward pass from position 0; the logits at positions ctx//2 .. ctx-2
  predict the ids at ctx//2+1 .. ctx-1; PPL = exp(mean NLL), NLL in float64.

Writes ppl_golden.txt next to this script (one `key value...` per line, a `config` line per
chunk size). The C++ test compiles the same model with ninferc and must match mean NLL to 1e-3
relative.

With --full MODEL it instead prints the perplexity of MODEL over the whole heldout file at
--ctx (default 512), for comparing with `ninfer perplexity` and llama.cpp (nothing is written).

Usage: python3 make_ppl_golden.py [--shared DIR] [--full pycode-llama-23m --ctx 512]
"""
import argparse
import math
import os

import numpy as np
import torch
from tokenizers import Tokenizer
from transformers import AutoModelForCausalLM

LINES = 200
CONFIGS = (128, 100)  # chunk sizes: a power of two, and one with an even half of 50
MODEL = "pycode-llama-3m"


def default_shared():
    env = os.environ.get("NINFER_SHARED_DIR")
    if env:
        return env
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "shared")


def chunk_nlls(model, ids, ctx, bos, max_chunks=None):
    chunks = len(ids) // ctx
    if max_chunks:
        chunks = min(chunks, max_chunks)
    first = ctx // 2
    nlls = []
    for c in range(chunks):
        chunk = list(ids[c * ctx:(c + 1) * ctx])
        if bos is not None:
            chunk[0] = bos
        with torch.no_grad():
            logits = model(torch.tensor([chunk])).logits[0].double().numpy()
        for pos in range(first, ctx - 1):
            row = logits[pos]
            m = row.max()
            lse = m + math.log(np.exp(row - m).sum())
            nlls.append(lse - row[chunk[pos + 1]])
    return chunks, np.array(nlls)


def load(shared, name):
    path = os.path.join(shared, "models", name)
    tok = Tokenizer.from_file(os.path.join(path, "tokenizer.json"))
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32,
                                                 attn_implementation="eager")
    model.eval()
    return tok, model


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shared", default=default_shared())
    ap.add_argument("--full", help="model folder name: score the whole heldout file")
    ap.add_argument("--ctx", type=int, default=512)
    ap.add_argument("--no-bos", action="store_true")
    args = ap.parse_args()
    torch.set_num_threads(max(1, os.cpu_count() or 1))
    data = os.path.join(args.shared, "data", "heldout_python.txt")
    with open(data, encoding="utf-8") as f:
        full = f.read()

    if args.full:
        tok, model = load(args.shared, args.full)
        ids = tok.encode(full, add_special_tokens=not args.no_bos).ids
        chunks, nll = chunk_nlls(model, ids, args.ctx, None if args.no_bos else 0)
        se = nll.std(ddof=1) / math.sqrt(len(nll))
        ppl = math.exp(nll.mean())
        print("%s: %d tokens, %d chunks of %d, %d scored, PPL = %.4f +/- %.5f" %
              (args.full, len(ids), chunks, args.ctx, len(nll), ppl, ppl * se))
        return

    # The first LINES '\n'-terminated lines (only '\n' counts, as in the C++ test).
    end = -1
    for _ in range(LINES):
        end = full.index("\n", end + 1)
    text = full[:end + 1]
    tok, model = load(args.shared, MODEL)
    ids = tok.encode(text).ids
    assert ids[0] == 0, "the pycode tokenizer should prepend BOS = 0"
    lines = [
        "# Made by make_ppl_golden.py (transformers float32 on CPU); do not edit.",
        "model %s" % MODEL,
        "lines %d" % LINES,
        "tokens %d" % len(ids),
        "first_ids " + " ".join(str(i) for i in ids[:32]),
        "last_ids " + " ".join(str(i) for i in ids[-32:]),
    ]
    for ctx in CONFIGS:
        chunks, nll = chunk_nlls(model, ids, ctx, 0)
        lines.append("config %d %d %d %.17g %.17g" %
                     (ctx, chunks, len(nll), nll.mean(), math.exp(nll.mean())))
    out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "ppl_golden.txt")
    with open(out, "w") as f:
        f.write("\n".join(lines) + "\n")
    print("wrote", out)
    print("\n".join(lines[1:]))


if __name__ == "__main__":
    main()
