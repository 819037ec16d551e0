#!/usr/bin/env python3
"""Writes rope_goldens.json: RoPE tables computed by Hugging Face transformers.

For each config below, transformers builds the model family's rotary embedding
module (the code path the real model runs) and we record its inv_freq and
attention scaling. The C++ test (RopeGoldenTest.cpp) loads each config with
loadModelConfig and compares computeRopeTables against these values, so the
expected numbers come from the reference implementation, not from our code.

Usage: python3 make_rope_goldens.py [output.json]   (default: next to this file)
"""
import json
import os
import sys

import torch
import transformers
from transformers import AutoConfig


def rotary_class(model_type):
    if model_type == "llama":
        from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding as C
    elif model_type == "mistral":
        from transformers.models.mistral.modeling_mistral import MistralRotaryEmbedding as C
    elif model_type == "qwen2":
        from transformers.models.qwen2.modeling_qwen2 import Qwen2RotaryEmbedding as C
    elif model_type == "qwen3":
        from transformers.models.qwen3.modeling_qwen3 import Qwen3RotaryEmbedding as C
    elif model_type == "phi3":
        from transformers.models.phi3.modeling_phi3 import Phi3RotaryEmbedding as C
    else:
        raise ValueError(model_type)
    return C


def base(model_type, **extra):
    cfg = {
        "model_type": model_type,
        "vocab_size": 1000,
        "hidden_size": 1024,
        "intermediate_size": 2048,
        "num_hidden_layers": 2,
        "num_attention_heads": 16,
        "num_key_value_heads": 4,
        "max_position_embeddings": 4096,
        "rms_norm_eps": 1e-5,
        "hidden_act": "silu",
    }
    cfg.update(extra)
    return cfg


CASES = {
    # Old style: top-level rope_theta, no scaling.
    "llama_default_toplevel": base("llama", rope_theta=10000.0),
    # transformers 5 style, as the shared pycode models store it.
    "llama_default_rope_parameters": base(
        "llama", head_dim=64, hidden_size=512, num_attention_heads=8,
        rope_parameters={"rope_theta": 50000.0, "rope_type": "default"}),
    # head_dim not a power of two (2i/dim is inexact in float).
    "llama_default_headdim80": base("llama", hidden_size=1280, rope_theta=1000000.0),
    # Old configs spell the type key "type".
    "llama_linear_typekey": base("llama", rope_theta=10000.0,
                                 rope_scaling={"type": "linear", "factor": 4.0}),
    "llama_dynamic": base("llama", rope_theta=10000.0,
                          rope_scaling={"rope_type": "dynamic", "factor": 2.0}),
    # Llama 3.1 8B's real RoPE settings.
    "llama_llama3": base(
        "llama", hidden_size=4096, num_attention_heads=32, num_key_value_heads=8,
        max_position_embeddings=131072, rope_theta=500000.0,
        rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                      "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}),
    # Qwen2.5's documented YaRN setting for long context.
    "qwen2_yarn": base(
        "qwen2", hidden_size=3584, num_attention_heads=28, num_key_value_heads=4,
        max_position_embeddings=131072, rope_theta=1000000.0,
        rope_scaling={"type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768}),
    "llama_yarn_mscale": base(
        "llama", max_position_embeddings=16384,
        rope_parameters={"rope_type": "yarn", "rope_theta": 10000.0, "factor": 4.0,
                         "original_max_position_embeddings": 4096, "mscale": 1.0,
                         "mscale_all_dim": 0.5, "beta_fast": 16.0, "beta_slow": 2.0}),
    "llama_yarn_notruncate": base(
        "llama", max_position_embeddings=16384,
        rope_parameters={"rope_type": "yarn", "rope_theta": 10000.0, "factor": 4.0,
                         "original_max_position_embeddings": 4096, "truncate": False}),
    "llama_yarn_attention_factor": base(
        "llama", max_position_embeddings=16384,
        rope_parameters={"rope_type": "yarn", "rope_theta": 10000.0, "factor": 4.0,
                         "original_max_position_embeddings": 4096, "attention_factor": 0.9}),
    # Mistral-Nemo-like: explicit head_dim that differs from hidden/heads.
    "mistral_headdim": base("mistral", hidden_size=5120, num_attention_heads=32,
                            num_key_value_heads=8, head_dim=128, rope_theta=1000000.0,
                            sliding_window=None),
    # Phi-3.5-mini-like LongRoPE ("longrope"; Phi-3-mini-128k says "su"), head_dim 96, factors
    # that differ per frequency; the attention factor from the two lengths.
    "phi3_longrope": base(
        "phi3", hidden_size=3072, num_attention_heads=32, num_key_value_heads=32, pad_token_id=None,
        max_position_embeddings=131072, original_max_position_embeddings=4096,
        rope_theta=10000.0,
        rope_scaling={"type": "longrope",
                      "short_factor": [1.0 + 0.01 * i for i in range(48)],
                      "long_factor": [1.0 + 1.5 * i for i in range(48)]}),
    "phi3_su_attention_factor": base(
        "phi3", hidden_size=512, num_attention_heads=8, num_key_value_heads=8, pad_token_id=None,
        max_position_embeddings=8192, original_max_position_embeddings=2048, rope_theta=10000.0,
        rope_scaling={"type": "su", "attention_factor": 1.25,
                      "short_factor": [1.0] * 32, "long_factor": [2.0 + 0.25 * i for i in range(32)]}),
    "qwen3_default": base(
        "qwen3", hidden_size=2048, num_attention_heads=16, num_key_value_heads=8, head_dim=128,
        rope_parameters={"rope_theta": 1000000.0, "rope_type": "default"}),
}


def main():
    out_path = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "rope_goldens.json")
    goldens = []
    for name, cfg_dict in CASES.items():
        model_type = cfg_dict["model_type"]
        kwargs = {k: v for k, v in cfg_dict.items() if k != "model_type"}
        # Deep-copy through JSON: transformers edits the rope dicts in place.
        cfg = AutoConfig.for_model(model_type, **json.loads(json.dumps(kwargs)))
        rotary = rotary_class(model_type)(cfg)
        inv_freq = [float(x) for x in rotary.inv_freq.tolist()]
        if cfg.rope_parameters.get("rope_type") == "longrope":
            # The module holds the short table; a position past the original length makes
            # its forward switch to the long one. ninfer keeps both, short then long.
            original = cfg.rope_parameters["original_max_position_embeddings"]
            rotary(torch.zeros(1, 1, 8), torch.tensor([[original]]))
            inv_freq += [float(x) for x in rotary.inv_freq.tolist()]
        goldens.append({
            "name": name,
            "config": cfg_dict,
            "inv_freq": inv_freq,
            "attention_factor": float(rotary.attention_scaling),
        })
    with open(out_path, "w") as f:
        json.dump({"transformers_version": transformers.__version__, "cases": goldens}, f,
                  indent=2)
        f.write("\n")
    print(f"wrote {len(goldens)} cases to {out_path}")


if __name__ == "__main__":
    main()
