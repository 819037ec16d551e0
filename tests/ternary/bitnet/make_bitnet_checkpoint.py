#!/usr/bin/env python3
"""Writes the tiny Hugging Face BitNet checkpoint tests/ternary/bitnet/tiny-bitnet-llama/.

A 2-layer llama (hidden 64, intermediate 128, 4 heads, 2 KV heads, vocab 128)
whose config.json declares quantization_config.quant_method = "bitnet"
(linear_class "bitlinear", quantization_mode "offline", lm_head not converted).
Every block linear is stored the way transformers stores BitLinear layers: a
uint8 "X.weight" of shape [out / 4, in], packed by transformers' own
integrations.bitnet.pack_weights, plus a one-element bf16 "X.weight_scale".
Embeddings, norms and lm_head are plain bf16.

reference.safetensors holds, for each block linear, the weight the BitLinear
layer applies, computed from the packed bytes by transformers' own
integrations.bitnet.unpack_weights: t / weight_scale in float32 (BitLinear
divides its outputs by weight_scale). tests/ternary/BitNetImportTest.cpp checks
that ninferc's import gives exactly these values, so the packing convention is
checked against transformers, not against a copy of ninfer's reading of it.

Usage: python3 make_bitnet_checkpoint.py [--out DIR]
Needs torch, transformers, numpy and safetensors; deterministic (seeded).
"""
import argparse
import json
import os

import numpy as np
import torch
from safetensors.torch import save_file
from transformers.integrations import bitnet

HIDDEN, INTERMEDIATE, LAYERS, HEADS, KV_HEADS, VOCAB = 64, 128, 2, 4, 2, 128
HEAD_DIM = HIDDEN // HEADS


def bf16(values):
    """A bf16 tensor of the values (rounded to nearest even)."""
    return torch.from_numpy(np.ascontiguousarray(values, dtype=np.float32)).to(torch.bfloat16)


def config():
    return {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "hidden_size": HIDDEN,
        "intermediate_size": INTERMEDIATE,
        "num_hidden_layers": LAYERS,
        "num_attention_heads": HEADS,
        "num_key_value_heads": KV_HEADS,
        "vocab_size": VOCAB,
        "max_position_embeddings": 256,
        "rms_norm_eps": 1e-5,
        "rope_theta": 10000.0,
        "hidden_act": "silu",
        "tie_word_embeddings": False,
        "torch_dtype": "bfloat16",
        "bos_token_id": 1,
        "eos_token_id": 2,
        "quantization_config": {
            "quant_method": "bitnet",
            "linear_class": "bitlinear",
            "quantization_mode": "offline",
            "modules_to_not_convert": ["lm_head"],
        },
    }


def linears(layer):
    prefix = f"model.layers.{layer}."
    return [
        (prefix + "self_attn.q_proj", HEADS * HEAD_DIM, HIDDEN),
        (prefix + "self_attn.k_proj", KV_HEADS * HEAD_DIM, HIDDEN),
        (prefix + "self_attn.v_proj", KV_HEADS * HEAD_DIM, HIDDEN),
        (prefix + "self_attn.o_proj", HIDDEN, HEADS * HEAD_DIM),
        (prefix + "mlp.gate_proj", INTERMEDIATE, HIDDEN),
        (prefix + "mlp.up_proj", INTERMEDIATE, HIDDEN),
        (prefix + "mlp.down_proj", HIDDEN, INTERMEDIATE),
    ]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                      "tiny-bitnet-llama"))
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    rng = np.random.default_rng(158)
    tensors, reference = {}, {}
    tensors["model.embed_tokens.weight"] = bf16(rng.normal(0, 1, (VOCAB, HIDDEN)))
    tensors["lm_head.weight"] = bf16(rng.normal(0, 0.1, (VOCAB, HIDDEN)))
    tensors["model.norm.weight"] = bf16(1 + rng.normal(0, 0.1, HIDDEN))
    for layer in range(LAYERS):
        for norm in ("input_layernorm", "post_attention_layernorm"):
            tensors[f"model.layers.{layer}.{norm}.weight"] = bf16(
                1 + rng.normal(0, 0.1, HIDDEN))
        for name, out_features, in_features in linears(layer):
            ternary = torch.from_numpy(rng.integers(-1, 2, (out_features, in_features))).to(
                torch.int8)
            packed = bitnet.pack_weights(ternary.clone())
            assert packed.dtype == torch.uint8 and packed.shape == (out_features // 4, in_features)
            # BitNet b1.58 keeps 1 / absmean of the latent weights: around 20..60 here.
            scale = bf16(np.array([rng.uniform(20, 60)]))
            tensors[name + ".weight"] = packed
            tensors[name + ".weight_scale"] = scale
            unpacked = bitnet.unpack_weights(packed, dtype=torch.float32)
            assert torch.equal(unpacked, ternary.float()), name
            reference[name + ".weight"] = unpacked / scale.float()

    save_file(tensors, os.path.join(args.out, "model.safetensors"), metadata={"format": "pt"})
    save_file(reference, os.path.join(args.out, "reference.safetensors"))
    with open(os.path.join(args.out, "config.json"), "w") as f:
        json.dump(config(), f, indent=2)
        f.write("\n")


if __name__ == "__main__":
    main()
