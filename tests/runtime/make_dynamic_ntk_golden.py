#!/usr/bin/env python3
"""Prints the dynamic-NTK inverse frequencies that transformers computes, as the
C++ table in CpuOpsTest.cpp (DynamicNtkMatchesTransformers). Run:
    python3 tests/runtime/make_dynamic_ntk_golden.py
Needs torch and transformers (checked with transformers 5.x)."""
import torch
from transformers import LlamaConfig
from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

CASES = [  # (theta, factor, original_max_positions, head_dim, seq_len)
    (10000.0, 2.0, 16, 8, 17),
    (10000.0, 2.0, 16, 8, 40),
    (500000.0, 4.0, 64, 16, 1000),
]

print("// theta, factor, original_max, head_dim, seq_len, inv_freq...")
for theta, factor, original, head_dim, seq_len in CASES:
    config = LlamaConfig(hidden_size=head_dim * 4, num_attention_heads=4, head_dim=head_dim,
                         max_position_embeddings=original,
                         rope_parameters={"rope_type": "dynamic", "factor": factor,
                                          "rope_theta": theta})
    inv_freq, _ = ROPE_INIT_FUNCTIONS["dynamic"](config, "cpu", seq_len=torch.tensor(seq_len))
    values = ", ".join(f"{float(v):.9e}f" for v in inv_freq)
    print(f"{{{theta}f, {factor}f, {original}, {head_dim}, {seq_len}, {{{values}}}}},")
