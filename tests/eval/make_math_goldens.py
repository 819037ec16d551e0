#!/usr/bin/env python3
"""Goldens for the evaluation math in runtime/src/Evaluation.cpp, computed with numpy in
float64 (scipy-free, written out longhand so it is independent of the C++ code):

  log-softmax, NLL of a target, KL(P || Q) with P, Q = softmax of two logit vectors, argmax,
  and the statistics (mean, standard error of the mean, percentiles with numpy's default linear
  interpolation, which is also llama.cpp's).

Logits are float32 values (what executors produce), printed with 9 significant digits so they
read back exactly. Writes math_goldens.txt next to this script:

  case N TARGET
  p  N logits        q  N logits
  lsp  N log-softmax(p) values
  nll_q  -log softmax(q)[TARGET]        kl_pq  KL(P || Q)        top  argmax(p) argmax(q)
  end
  stats N
  v  N values
  mean SE P99.9 P99 P50 P10
  end

Usage: python3 make_math_goldens.py
"""
import os

import numpy as np


def log_softmax(x):
    x = x.astype(np.float64)
    m = np.max(x)
    return x - (m + np.log(np.sum(np.exp(x - m))))


def f32(values):
    return " ".join("%.9g" % v for v in values.astype(np.float32))


def f64(values):
    return " ".join("%.17g" % v for v in values)


def logits_cases(rng):
    cases = []
    # (p, q, target)
    p = rng.normal(0, 3, 10).astype(np.float32)
    cases.append((p, (p + rng.normal(0, 0.5, 10)).astype(np.float32), 3))
    # Large offsets: a naive exp() overflows float64 at ~709.
    p = (1000 + rng.normal(0, 2, 16)).astype(np.float32)
    cases.append((p, (p - 2000 + rng.normal(0, 1, 16)).astype(np.float32), 15))
    # Huge spread: some probabilities underflow to exactly zero.
    p = np.linspace(-800, 60, 24).astype(np.float32)
    cases.append((p, rng.permutation(p).astype(np.float32), 0))
    # Identical distributions: KL is exactly zero in exact arithmetic.
    p = rng.normal(0, 4, 33).astype(np.float32)
    cases.append((p, p.copy(), 7))
    # A shift does not change the distribution.
    p = rng.normal(0, 2, 12).astype(np.float32)
    cases.append((p, (p + np.float32(5.5)).astype(np.float32), 11))
    # A vocabulary-sized vector.
    p = rng.normal(0, 5, 1024).astype(np.float32)
    cases.append((p, (p + rng.normal(0, 0.3, 1024)).astype(np.float32), 1000))
    return cases


def main():
    rng = np.random.default_rng(20240611)
    lines = ["# Made by make_math_goldens.py (numpy %s); do not edit." % np.__version__]
    for p, q, target in logits_cases(rng):
        lp = log_softmax(p)
        lq = log_softmax(q)
        prob_p = np.exp(lp)
        mask = prob_p > 0
        kl = float(np.sum(prob_p[mask] * (lp[mask] - lq[mask])))
        lines.append("case %d %d" % (len(p), target))
        lines.append("p " + f32(p))
        lines.append("q " + f32(q))
        lines.append("lsp " + f64(lp))
        lines.append("nll_q %.17g" % -lq[target])
        lines.append("kl_pq %.17g" % max(kl, 0.0))
        lines.append("top %d %d" % (int(np.argmax(p)), int(np.argmax(q))))
        lines.append("end")
    for n in (2, 7, 1000):
        v = rng.gamma(0.5, 0.02, n)  # skewed like per-token KLD values
        mean = float(np.mean(v))
        se = float(np.std(v, ddof=1) / np.sqrt(n))
        pct = [float(np.percentile(v, f * 100)) for f in (0.999, 0.99, 0.5, 0.1)]
        lines.append("stats %d" % n)
        lines.append("v " + f64(v))
        lines.append(f64(np.array([mean, se] + pct)))
        lines.append("end")
    out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "math_goldens.txt")
    with open(out, "w") as f:
        f.write("\n".join(lines) + "\n")
    print("wrote", out)


if __name__ == "__main__":
    main()
