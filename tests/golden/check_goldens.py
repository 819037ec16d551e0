#!/usr/bin/env python3
"""Re-runs the transformers reference on this machine and compares with the stored goldens.

Checks that the goldens do not depend on the machine or the torch/transformers
version that made them: generated ids must be identical and the last-prompt
logits close (prints max abs error per prompt). Runs on CPU, or on CUDA with
--device cuda (TF32 disabled, so float32 matmuls stay float32).

Usage: python3 check_goldens.py [--device cpu|cuda] [--shared DIR] [--only a,b]
Exit status 1 on any id mismatch or logit error above --tol (default 1e-3).
"""
import argparse
import json
import os
import struct
import sys

import torch
import transformers
from transformers import AutoModelForCausalLM, GenerationConfig

HERE = os.path.dirname(os.path.abspath(__file__))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--shared", default=os.environ.get("NINFER_SHARED_DIR")
                    or os.path.normpath(os.path.join(HERE, "..", "..", "..", "shared")))
    ap.add_argument("--only", default="")
    ap.add_argument("--tol", type=float, default=1e-3)
    args = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    only = [m for m in args.only.split(",") if m]
    print(f"torch {torch.__version__}, transformers {transformers.__version__}, device {args.device}")
    bad = 0
    for fn in sorted(os.listdir(os.path.join(HERE, "data"))):
        if not fn.endswith(".json"):
            continue
        g = json.load(open(os.path.join(HERE, "data", fn)))
        if only and g["model"] not in only:
            continue
        mdir = (os.path.join(HERE, "models", g["model"]) if g["source"] == "golden"
                else os.path.join(args.shared, "models", g["model"]))
        if not os.path.isfile(os.path.join(mdir, "model.safetensors")):
            print(f"== {g['model']}: skipped, no checkpoint at {mdir}")
            continue
        blob = open(os.path.join(HERE, "data", g["logits_file"]), "rb").read()
        V = g["vocab_size"]
        print(f"== {g['model']} (goldens by transformers {g['reference']['transformers']})")
        for p in g["prompts"]:
            # Fresh model per prompt: dynamic NTK keeps state between calls.
            model = AutoModelForCausalLM.from_pretrained(mdir, dtype=torch.float32,
                                                         attn_implementation="eager").to(args.device).eval()
            model.generation_config.eos_token_id = None
            inp = torch.tensor([p["prompt_ids"]], device=args.device)
            gc = GenerationConfig(do_sample=False, max_new_tokens=g["new_tokens"], eos_token_id=None,
                                  pad_token_id=0, bos_token_id=None, temperature=None, top_p=None,
                                  top_k=None, output_logits=True, return_dict_in_generate=True)
            with torch.no_grad():
                out = model.generate(inp, attention_mask=torch.ones_like(inp), generation_config=gc)
            ids = out.sequences[0, inp.shape[1]:].tolist()
            last = out.logits[0][0].float().cpu()
            gold = torch.tensor(struct.unpack(f"<{V}f", blob[p["logits_offset"]:p["logits_offset"] + 4 * V]))
            err = float((last - gold).abs().max())
            mm = next((i for i, (a, b) in enumerate(zip(ids, p["generated_ids"])) if a != b), -1)
            ok = mm == -1 and len(ids) == len(p["generated_ids"]) and err <= args.tol
            bad += not ok
            print(f"  {'ok  ' if ok else 'FAIL'} {p['name']:14s} ids first diff {mm:3d}  logits max abs err {err:.2e}")
    print("all goldens reproduced" if bad == 0 else f"{bad} prompts differ")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
