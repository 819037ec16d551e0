#!/usr/bin/env python3
"""End-to-end golden test: ninferc + ninfer against Hugging Face transformers.

For every tests/golden/data/<model>.json (made by make_goldens.py):
  1. ninferc <model_dir> --target sm_90 --ctx 128 -o WORK/<model>.nplan
     (--gguf [SUBDIR]: ninferc gguf/<model>.gguf, llama.cpp's conversion of the checkpoint)
  2. for each prompt:
       ninfer WORK/<model>.nplan --device DEV --prompt-ids 1,2,3 -n 40 --print-ids
              --ignore-eos --no-bos --dump-logits WORK/<model>.<prompt>.logits.bin
     stdout: the generated ids as one comma-separated line;
     dump:   vocab_size little-endian float32 logits at the last prompt position.
  3. ids: the first --min-match (default 32) generated ids must equal the golden
     ones (the first mismatch index is reported, also past --min-match);
     logits: max |ninfer - golden| <= --tol (default 2e-2, see README.md).

Exit status: 0 all passed; 1 any failure; 77 (ctest SKIP_RETURN_CODE) for
--device cuda on a machine without a usable CUDA device/driver.
Last line: 'N passed, M failed' (N, M count prompts).
"""
import argparse
import ctypes
import glob
import hashlib
import json
import math
import os
import re
import shlex
import struct
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SKIP = 77
NO_DEVICE_RE = re.compile(
    r"no (cuda|gpu)|no .*device|cuda.*(not available|unavailable)|driver|libcuda|cuInit|"
    r"CUDA_ERROR_NO_DEVICE|CUDA_ERROR_NOT_INITIALIZED|CUDA_ERROR_INSUFFICIENT_DRIVER", re.I)


def log(msg=""):
    print(msg, flush=True)


def tail(text, lines=40):
    t = text.strip().splitlines()
    if not t:
        return "    | (empty)"
    if len(t) > lines:
        t = [f"... ({len(t) - lines} lines omitted)"] + t[-lines:]
    return "\n".join("    | " + l for l in t)


def run(cmd, timeout):
    log("  $ " + " ".join(shlex.quote(c) for c in cmd))
    t0 = time.time()
    try:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=timeout,
                           text=True, errors="replace")
        return p.returncode, p.stdout, p.stderr, time.time() - t0
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
        err = e.stderr.decode(errors="replace") if isinstance(e.stderr, bytes) else (e.stderr or "")
        return None, out, err + f"\n[timed out after {timeout} s]", time.time() - t0
    except OSError as e:
        return None, "", f"cannot execute: {e}", time.time() - t0


def describe_rc(rc):
    if rc is None:
        return "did not finish"
    if rc < 0:
        return f"killed by signal {-rc} (crash)"
    return f"exit status {rc}"


def cuda_device_problem():
    """None when a CUDA device is usable, else a reason (checked through the driver API)."""
    try:
        cuda = ctypes.CDLL("libcuda.so.1")
    except OSError as e:
        return f"libcuda.so.1 cannot be loaded ({e})"
    rc = cuda.cuInit(0)
    if rc != 0:
        return f"cuInit failed with CUresult {rc}"
    n = ctypes.c_int(0)
    rc = cuda.cuDeviceGetCount(ctypes.byref(n))
    if rc != 0 or n.value == 0:
        return f"no CUDA device (cuDeviceGetCount: CUresult {rc}, count {n.value})"
    return None


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def parse_ids(stdout, prompt_ids, n_new):
    """The generated ids from ninfer's stdout: the last line that is a comma-separated
    list of integers. A line holding prompt + generated ids is accepted too."""
    lines = [l.strip() for l in stdout.splitlines()]
    cand = [l for l in lines if re.fullmatch(r"-?\d+(\s*,\s*-?\d+)*,?", l)]
    if not cand:
        return None
    ids = [int(x) for x in cand[-1].rstrip(",").split(",")]
    if len(ids) == len(prompt_ids) + n_new and ids[:len(prompt_ids)] == prompt_ids and len(prompt_ids) > 0:
        ids = ids[len(prompt_ids):]
    return ids


def read_f32(path, count):
    with open(path, "rb") as f:
        data = f.read()
    if len(data) != 4 * count:
        raise ValueError(f"{path}: {len(data)} bytes, expected {4 * count} ({count} float32)")
    return list(struct.unpack(f"<{count}f", data))


def first_mismatch(a, b):
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return -1 if len(a) == len(b) else min(len(a), len(b))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ninferc", help="the compiler (not needed with --plan-dir)")
    ap.add_argument("--plan-dir", help="use plans compiled beforehand as DIR/<model>.nplan (on a "
                    "machine without the compiler); checkpoints are then not needed")
    ap.add_argument("--ninfer", required=True)
    ap.add_argument("--device", choices=["cpu", "cuda"], required=True)
    ap.add_argument("--golden-dir", default=HERE, help="folder holding data/ and models/")
    ap.add_argument("--shared", default=os.environ.get("NINFER_SHARED_DIR", ""),
                    help="shared folder holding models/pycode-*")
    ap.add_argument("--work", required=True, help="scratch folder for plans and logit dumps")
    ap.add_argument("--models", default="", help="comma-separated subset (default: all goldens)")
    ap.add_argument("--gguf", nargs="?", const="gguf", default=None, metavar="SUBDIR",
                    help="compile GOLDEN_DIR/SUBDIR/<model>.gguf (default SUBDIR gguf: "
                         "llama.cpp's conversion of the checkpoint, make_gguf_models.py) "
                         "instead of the checkpoint; models without one are left out")
    ap.add_argument("--target", default="sm_90")
    ap.add_argument("--ctx", type=int, default=128,
                    help="context for ninferc (prompts + 40 tokens need <= 80; 128 stays within every "
                         "golden model's max_position_embeddings except tiny-llama-dynamic's 32, which "
                         "dynamic NTK exists to exceed)")
    ap.add_argument("--tol", type=float, default=None,
                    help="max abs logit error allowed (default 2e-2 on cpu; 6e-2 on cuda, whose "
                    "tensor-core prefill rounds activations to the weights' bf16/f16)")
    ap.add_argument("--min-match", type=int, default=32,
                    help="this many leading generated ids must match (default 32 of 40)")
    ap.add_argument("--compile-timeout", type=int, default=900)
    ap.add_argument("--run-timeout", type=int, default=300)
    ap.add_argument("--extra-ninferc-args", default="", help="appended to the ninferc command (shell-split)")
    ap.add_argument("--extra-ninfer-args", default="", help="appended to each ninfer command (shell-split)")
    args = ap.parse_args()
    if args.tol is None:
        args.tol = 2e-2 if args.device == "cpu" else 6e-2

    if not args.ninferc and not args.plan_dir:
        ap.error("give --ninferc or --plan-dir")
    for b in ([args.ninferc] if not args.plan_dir else []) + [args.ninfer]:
        if not (os.path.isfile(b) and os.access(b, os.X_OK)):
            log(f"FAIL: binary {b} does not exist or is not executable")
            log("0 passed, 1 failed")
            return 1

    if args.device == "cuda":
        why = cuda_device_problem()
        if why:
            log(f"SKIP: --device cuda needs a CUDA device: {why}")
            return SKIP

    files = sorted(glob.glob(os.path.join(args.golden_dir, "data", "*.json")))
    goldens = [json.load(open(f)) for f in files]
    wanted = [m for m in args.models.split(",") if m]
    if wanted:
        known = {g["model"] for g in goldens}
        unknown = [m for m in wanted if m not in known]
        if unknown:
            log(f"FAIL: no goldens for {', '.join(unknown)} (have: {', '.join(sorted(known))})")
            log("0 passed, 1 failed")
            return 1
        goldens = [g for g in goldens if g["model"] in wanted]
    if args.gguf:
        goldens = [g for g in goldens
                   if os.path.isfile(os.path.join(args.golden_dir, args.gguf, g["model"] + ".gguf"))]
    if not goldens:
        log(f"FAIL: no goldens found under {os.path.join(args.golden_dir, 'data')}")
        log("0 passed, 1 failed")
        return 1
    os.makedirs(args.work, exist_ok=True)

    ref = goldens[0]["reference"]
    log(f"goldens: transformers {ref['transformers']}, torch {ref['torch']}; device {args.device}; "
        f"tol {args.tol:g}; ids: first {args.min_match} must match")
    rows = []  # (model, prompt, len, ids text, maxabs, rel, status)
    passed = failed = 0

    for g in goldens:
        name = g["model"]
        n_new = g["new_tokens"]
        vocab = g["vocab_size"]
        log(f"\n== {name} ({g['family']}, rope {g['rope_type']}"
            + (f", sliding window {g['sliding_window']}" if g.get("sliding_window") else "") + ")")
        if g["source"] == "golden":
            model_dir = os.path.join(args.golden_dir, "models", name)
        else:
            if not args.shared:
                model_dir = None
            else:
                model_dir = os.path.join(args.shared, "models", name)

        def fail_all(reason):
            nonlocal failed
            log(f"  FAIL: {reason}")
            for p in g["prompts"]:
                rows.append((name, p["name"], len(p["prompt_ids"]), "-", None, None, "FAIL"))
                failed += 1

        if args.plan_dir:
            plan = os.path.join(args.plan_dir, f"{name}.nplan")
            if not os.path.isfile(plan):
                fail_all(f"no precompiled plan {plan}")
                continue
            log(f"  precompiled plan {plan}")
        else:
            st = os.path.join(model_dir, "model.safetensors") if model_dir else None
            if not st or not os.path.isfile(st):
                fail_all(f"checkpoint not found: {st or '(pass --shared)'}")
                continue
            if sha256(st) != g["safetensors_sha256"]:
                fail_all(f"{st} differs from the checkpoint the goldens were made from "
                         f"(sha256 mismatch): regenerate with make_goldens.py")
                continue
            plan = os.path.join(args.work, f"{name}.nplan")
            if os.path.exists(plan):
                os.remove(plan)
            source = (os.path.join(args.golden_dir, args.gguf, name + ".gguf") if args.gguf
                      else model_dir)
            cmd = [args.ninferc, source, "--target", args.target, "--ctx", str(args.ctx),
                   "-o", plan]
            cmd += shlex.split(args.extra_ninferc_args)
            rc, out, err, dt = run(cmd, args.compile_timeout)
            if rc != 0 or not os.path.isfile(plan):
                fail_all(f"ninferc {describe_rc(rc)}" + ("" if rc != 0 else ", but wrote no plan")
                         + f"\n  stderr:\n{tail(err)}\n  stdout:\n{tail(out, 10)}")
                continue
            log(f"  compiled in {dt:.1f} s ({os.path.getsize(plan) / 1024:.0f} KiB)")

        gold_logits_all = open(os.path.join(args.golden_dir, "data", g["logits_file"]), "rb").read()
        for p in g["prompts"]:
            pname = p["name"]
            prompt = p["prompt_ids"]
            gold_ids = p["generated_ids"]
            off = p["logits_offset"]
            gold = list(struct.unpack(f"<{vocab}f", gold_logits_all[off:off + 4 * vocab]))
            dump = os.path.join(args.work, f"{name}.{pname}.logits.bin")
            if os.path.exists(dump):
                os.remove(dump)
            cmd = [args.ninfer, plan, "--device", args.device,
                   "--prompt-ids", ",".join(map(str, prompt)), "-n", str(n_new),
                   "--print-ids", "--ignore-eos", "--no-bos", "--dump-logits", dump]
            cmd += shlex.split(args.extra_ninfer_args)
            rc, out, err, dt = run(cmd, args.run_timeout)
            if rc != 0:
                if (args.device == "cuda" and passed == 0 and rc is not None and rc > 0
                        and NO_DEVICE_RE.search(err)):
                    log(f"SKIP: ninfer --device cuda reports no usable device:\n{tail(err, 10)}")
                    return SKIP
                log(f"  FAIL {pname}: ninfer {describe_rc(rc)}\n  stderr:\n{tail(err)}")
                rows.append((name, pname, len(prompt), "-", None, None, "FAIL"))
                failed += 1
                continue

            problems = []
            ids = parse_ids(out, prompt, n_new)
            if ids is None:
                problems.append("no line of comma-separated ids on stdout:\n" + tail(out, 10))
                ids_text = "none"
            else:
                mm = first_mismatch(ids, gold_ids)
                if mm == -1:
                    ids_text = f"{n_new}/{n_new}"
                else:
                    margin = p["margins"][mm] if mm < len(p["margins"]) else float("nan")
                    ids_text = f"first diff @{mm}"
                    detail = (f"ids differ first at generated index {mm} (golden top1-top2 margin there "
                              f"{margin:.3g}; prompt min margin {p['min_margin']:.3g})\n"
                              f"    golden: {gold_ids}\n    ninfer: {ids}")
                    if mm < args.min_match or len(ids) < args.min_match:
                        problems.append(detail)
                    else:
                        log(f"  note {pname}: {detail}")
            maxabs = rel = None
            if not os.path.isfile(dump):
                problems.append(f"no logits dump written to {dump}")
            else:
                try:
                    got = read_f32(dump, vocab)
                except ValueError as e:
                    problems.append(str(e))
                else:
                    if any(not math.isfinite(x) for x in got):
                        problems.append("logits dump holds NaN/Inf")
                        maxabs = float("inf")
                    else:
                        maxabs = max(abs(a - b) for a, b in zip(got, gold))
                        scale = max(abs(b) for b in gold)
                        rel = maxabs / scale if scale > 0 else float("inf")
                        am_got = max(range(vocab), key=got.__getitem__)
                        am_gold = max(range(vocab), key=gold.__getitem__)
                        if am_got != am_gold:
                            problems.append(f"last-prompt argmax {am_got} != golden {am_gold}")
                        if maxabs > args.tol:
                            problems.append(f"logits max abs err {maxabs:.3e} > tol {args.tol:g} "
                                            f"(rel {rel:.2e})")
            status = "ok" if not problems else "FAIL"
            errtxt = f"max abs err {maxabs:.3e}, rel {rel:.2e}" if rel is not None else "no logits"
            log(f"  {status:4s} {pname:14s} len {len(prompt):3d}  ids {ids_text:16s} {errtxt}  ({dt:.2f} s)")
            for pr in problems:
                log("       " + pr)
            if problems and err.strip():
                log(f"       ninfer stderr:\n{tail(err, 15)}")
            rows.append((name, pname, len(prompt), ids_text, maxabs, rel, status))
            if problems:
                failed += 1
            else:
                passed += 1

    log(f"\nsummary (device {args.device}, tol {args.tol:g}):")
    log(f"{'model':20s} {'prompt':14s} {'len':>4s}  {'ids':16s} {'max abs err':>12s} {'rel err':>9s}  status")
    worst = 0.0
    for m, pn, ln, it, ma, rl, stt in rows:
        mas = f"{ma:.3e}" if ma is not None else "-"
        rls = f"{rl:.2e}" if rl is not None else "-"
        if ma is not None:
            worst = max(worst, ma)
        log(f"{m:20s} {pn:14s} {ln:4d}  {it:16s} {mas:>12s} {rls:>9s}  {stt}")
    log(f"worst max abs logit error: {worst:.3e} (tolerance {args.tol:g})")
    log(f"{passed} passed, {failed} failed")
    return 0 if failed == 0 and passed > 0 else 1


if __name__ == "__main__":
    sys.exit(main())
