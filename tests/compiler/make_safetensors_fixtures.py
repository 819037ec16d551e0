#!/usr/bin/env python3
"""Writes the safetensors fixtures the C++ tests read, using the reference
`safetensors` package (never our own writer), so the reader is checked against
files the ecosystem produces.

  fixtures/sharded/      a two-shard checkpoint with model.safetensors.index.json;
                         tensor values are arange-based, so the test can state them.
  fixtures/pycode_llama_23m_facts.json
                         tensor count, some shapes/dtypes and element values of
                         ${NINFER_SHARED_DIR}/models/pycode-llama-23m read with
                         safetensors + numpy (the shared model itself is not copied).

Usage: python3 make_safetensors_fixtures.py [shared_dir]   (default: ../../../shared)
"""
import json
import os
import sys

import numpy as np
import torch
from safetensors import safe_open
from safetensors.numpy import save_file

HERE = os.path.dirname(os.path.abspath(__file__))


def write_sharded(out_dir):
    os.makedirs(out_dir, exist_ok=True)
    # shard 1: f32 matrix 3x4 = arange(12); i32 vector [0, -1, ..., -4]
    shard1 = {
        "a.weight": np.arange(12, dtype=np.float32).reshape(3, 4),
        "ids": -np.arange(5, dtype=np.int32),
    }
    # shard 2: f16 vector 0.5 * arange(6)
    shard2 = {"b.weight": (0.5 * np.arange(6)).astype(np.float16)}
    names = {"model-00001-of-00002.safetensors": shard1,
             "model-00002-of-00002.safetensors": shard2}
    weight_map = {}
    for file_name, tensors in names.items():
        save_file(tensors, os.path.join(out_dir, file_name), metadata={"format": "pt"})
        for name in tensors:
            weight_map[name] = file_name
    with open(os.path.join(out_dir, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": 48 + 20 + 12}, "weight_map": weight_map}, f,
                  indent=2)
        f.write("\n")


def write_facts(shared_dir, out_path):
    path = os.path.join(shared_dir, "models", "pycode-llama-23m", "model.safetensors")
    facts = {"tensor_count": 0, "tensors": []}
    picks = [
        ("model.embed_tokens.weight", [(0, 0), (1, 7), (4095, 511)]),
        ("model.layers.0.self_attn.k_proj.weight", [(0, 0), (255, 511), (17, 42)]),
        ("model.layers.5.mlp.down_proj.weight", [(0, 0), (511, 1535), (100, 1000)]),
        ("model.norm.weight", [(0,), (511,)]),
        ("lm_head.weight", [(3, 5)]),
    ]
    with safe_open(path, "pt") as f:
        facts["tensor_count"] = len(list(f.keys()))
        for name, indices in picks:
            t = f.get_tensor(name)
            facts["tensors"].append({
                "name": name,
                "dtype": {torch.bfloat16: "BF16", torch.float16: "F16",
                          torch.float32: "F32"}[t.dtype],
                "shape": list(t.shape),
                "values": [{"index": list(i), "value": float(t[i].float())} for i in indices],
            })
    with open(out_path, "w") as out:
        json.dump(facts, out, indent=1)
        out.write("\n")


def main():
    shared = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "..", "..", "..", "shared")
    write_sharded(os.path.join(HERE, "fixtures", "sharded"))
    write_facts(shared, os.path.join(HERE, "fixtures", "pycode_llama_23m_facts.json"))
    print("wrote fixtures under", os.path.join(HERE, "fixtures"))


if __name__ == "__main__":
    main()
