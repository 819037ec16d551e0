#!/usr/bin/env python3
"""Creates the tiny random-weight checkpoints under tests/golden/models/<name>/.

Each checkpoint is written by Hugging Face transformers itself (save_pretrained:
config.json + model.safetensors, bf16 weights, no tokenizer files: ninferc and
ninfer are driven with --prompt-ids). They exercise one family feature each:

  tiny-qwen2          q/k/v bias, tied embeddings, GQA
  tiny-qwen3          per-head q/k RMSNorm, head_dim (32) != hidden/heads (16), GQA
  tiny-mistral        sliding_window = 8 (prompts and generations are longer), MQA
  tiny-llama3         rope_type llama3 (factor 8, low 1, high 4, original max 32)
  tiny-llama-yarn     rope_type yarn (factor 4, original max 32: cos/sin scaled)
  tiny-llama-dynamic  rope_type dynamic NTK (factor 4, max_position_embeddings 32,
                      which transformers uses as the original length)
  tiny-llama-linear   rope_type linear (factor 4), attention_bias + mlp_bias
  tiny-phi3           fused qkv_proj (4 heads / 2 KV) and gate_up_proj, sliding_window 12
  tiny-phi3-longrope  rope_type longrope within its original length (128 of 512: the short
                      factors per frequency and an attention factor of 1.13)
  tiny-phi3-longrope-switch  rope_type longrope past its original length (32 of 128): every
                      golden sequence runs past it, where transformers computes the sequence
                      again with the long factors (one prompt starts past it)
  tiny-smollm3        no RoPE in layer 1 of 3 (no_rope_layers [1, 0, 1]), a sliding window of
                      8 on that layer only, tied embeddings
  tiny-smollm3-nope4  the default layout, which llama.cpp's smollm3 assumes: 4 layers, no
                      RoPE in the fourth, no window
  tiny-olmo2          RMSNorm after the attention and the MLP (none before), q/k RMSNorm over
                      the whole projections

Weights: the default init (std 0.02) gives nearly flat next-token distributions,
so greedy decoding would hinge on near-ties that any numeric noise flips. The
init below is larger (matrices ~ N(0, 0.8^2/fan_in), embeddings N(0, 1),
random signs on the final norm weight of the tied model (see init_weights),
lm_head scaled so logits have std ~4, norm weights 1 + N(0, 0.1^2), biases
N(0, 0.1^2)), seeded, so the distributions are peaked. make_goldens.py
measures the top-1/top-2 margins along the golden trajectories. (A larger gain,
1.5, made the random networks chaotic: f16 rounding of K/V then moved the
logits by ~1e-2; with 0.8 it is ~1e-3.)

The weights are rounded to bf16 *here*, before saving; the goldens are made by
loading these files and upcasting to float32, so the reference and ninfer see
exactly the same weight values.

Usage: python3 make_tiny_models.py [--out DIR] [--only name,name]
Deterministic: the same transformers/torch versions give byte-identical files.
"""
import argparse
import json
import math
import os
import shutil
import sys

import torch
import transformers
from transformers import AutoConfig, AutoModelForCausalLM

HERE = os.path.dirname(os.path.abspath(__file__))


def common(**extra):
    cfg = {
        "hidden_act": "silu",
        "rms_norm_eps": 1e-5,
        "num_hidden_layers": 2,
        "max_position_embeddings": 256,
        "bos_token_id": 0,
        "eos_token_id": 1,
        "pad_token_id": None,
        "use_cache": True,
        "attention_dropout": 0.0,
    }
    cfg.update(extra)
    return cfg


# name -> (seed, config dict)
MODELS = {
    "tiny-qwen2": (
        101,
        common(
            model_type="qwen2", architectures=["Qwen2ForCausalLM"],
            vocab_size=320, hidden_size=64, intermediate_size=160,
            num_attention_heads=4, num_key_value_heads=2,
            tie_word_embeddings=True, use_sliding_window=False,
            rope_parameters={"rope_type": "default", "rope_theta": 1000000.0},
            rms_norm_eps=1e-6),
    ),
    "tiny-qwen3": (
        202,
        common(
            model_type="qwen3", architectures=["Qwen3ForCausalLM"],
            vocab_size=256, hidden_size=64, intermediate_size=96, head_dim=32,
            num_attention_heads=4, num_key_value_heads=2,
            tie_word_embeddings=False, use_sliding_window=False, attention_bias=False,
            rope_parameters={"rope_type": "default", "rope_theta": 1000000.0},
            rms_norm_eps=1e-6),
    ),
    "tiny-mistral": (
        303,
        common(
            model_type="mistral", architectures=["MistralForCausalLM"],
            vocab_size=256, hidden_size=64, intermediate_size=96, head_dim=16,
            num_attention_heads=4, num_key_value_heads=1,
            tie_word_embeddings=False, sliding_window=8,
            rope_parameters={"rope_type": "default", "rope_theta": 10000.0}),
    ),
    "tiny-llama3": (
        404,
        common(
            model_type="llama", architectures=["LlamaForCausalLM"],
            vocab_size=384, hidden_size=64, intermediate_size=96, head_dim=16,
            num_attention_heads=4, num_key_value_heads=2, num_hidden_layers=3,
            tie_word_embeddings=False,
            rope_parameters={"rope_type": "llama3", "rope_theta": 10000.0, "factor": 8.0,
                             "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                             "original_max_position_embeddings": 32}),
    ),
    "tiny-llama-yarn": (
        505,
        common(
            model_type="llama", architectures=["LlamaForCausalLM"],
            vocab_size=256, hidden_size=64, intermediate_size=96, head_dim=16,
            num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128,
            tie_word_embeddings=False,
            rope_parameters={"rope_type": "yarn", "rope_theta": 10000.0, "factor": 4.0,
                             "original_max_position_embeddings": 32}),
    ),
    "tiny-llama-dynamic": (
        606,
        common(
            model_type="llama", architectures=["LlamaForCausalLM"],
            vocab_size=256, hidden_size=64, intermediate_size=96, head_dim=16,
            num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=32,
            tie_word_embeddings=False,
            rope_parameters={"rope_type": "dynamic", "rope_theta": 10000.0, "factor": 4.0}),
    ),
    "tiny-llama-linear": (
        707,
        common(
            model_type="llama", architectures=["LlamaForCausalLM"],
            vocab_size=256, hidden_size=64, intermediate_size=96, head_dim=16,
            num_attention_heads=4, num_key_value_heads=4,
            tie_word_embeddings=False, attention_bias=True, mlp_bias=True,
            rope_parameters={"rope_type": "linear", "rope_theta": 10000.0, "factor": 4.0}),
    ),
    "tiny-phi3": (
        808,
        common(
            model_type="phi3", architectures=["Phi3ForCausalLM"],
            vocab_size=256, hidden_size=64, intermediate_size=96,
            num_attention_heads=4, num_key_value_heads=2, original_max_position_embeddings=256,
            tie_word_embeddings=False, sliding_window=12,
            rope_parameters={"rope_type": "default", "rope_theta": 10000.0}),
    ),
    "tiny-phi3-longrope": (
        909,
        common(
            model_type="phi3", architectures=["Phi3ForCausalLM"],
            vocab_size=256, hidden_size=64, intermediate_size=96,
            num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512,
            original_max_position_embeddings=128, tie_word_embeddings=False,
            rope_parameters={"rope_type": "longrope", "rope_theta": 10000.0,
                             "short_factor": [1.0, 1.2, 1.5, 2.0, 2.6, 3.3, 4.0, 5.0],
                             "long_factor": [1.0, 1.5, 2.0, 3.0, 4.0, 5.5, 7.0, 8.0]}),
    ),
    "tiny-phi3-longrope-switch": (
        1313,
        common(
            model_type="phi3", architectures=["Phi3ForCausalLM"],
            vocab_size=256, hidden_size=64, intermediate_size=96,
            num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128,
            original_max_position_embeddings=32, tie_word_embeddings=False,
            rope_parameters={"rope_type": "longrope", "rope_theta": 10000.0,
                             "short_factor": [1.0, 1.0, 1.1, 1.2, 1.3, 1.5, 1.7, 2.0],
                             "long_factor": [2.0, 3.0, 4.0, 6.0, 8.0, 10.0, 12.0, 16.0]}),
    ),
    "tiny-smollm3": (
        1010,
        common(
            model_type="smollm3", architectures=["SmolLM3ForCausalLM"],
            vocab_size=256, hidden_size=64, intermediate_size=96, num_hidden_layers=3,
            num_attention_heads=4, num_key_value_heads=2, tie_word_embeddings=True,
            no_rope_layers=[1, 0, 1], use_sliding_window=True, sliding_window=8,
            rope_parameters={"rope_type": "default", "rope_theta": 10000.0}),
    ),
    "tiny-smollm3-nope4": (
        1111,
        common(
            model_type="smollm3", architectures=["SmolLM3ForCausalLM"],
            vocab_size=256, hidden_size=64, intermediate_size=96, num_hidden_layers=4,
            num_attention_heads=4, num_key_value_heads=2, tie_word_embeddings=False,
            rope_parameters={"rope_type": "default", "rope_theta": 10000.0}),
    ),
    "tiny-olmo2": (
        1212,
        common(
            model_type="olmo2", architectures=["Olmo2ForCausalLM"],
            vocab_size=256, hidden_size=64, intermediate_size=96,
            num_attention_heads=4, num_key_value_heads=2, tie_word_embeddings=False,
            rope_parameters={"rope_type": "default", "rope_theta": 500000.0}),
    ),
}

MATRIX_GAIN = 0.8     # std = gain / sqrt(fan_in) for the linear layers in the blocks
LOGIT_STD = 4.0       # target std of the logits: lm_head std = LOGIT_STD / sqrt(hidden)
EMBED_STD = 1.0
NORM_NOISE = 0.1
BIAS_STD = 0.1


def init_weights(model, seed):
    """Re-initialises every parameter from a seeded generator (order: sorted names)."""
    gen = torch.Generator().manual_seed(seed)
    cfg = model.config
    hidden = cfg.hidden_size
    params = dict(model.named_parameters())
    for name in sorted(params):
        p = params[name]
        with torch.no_grad():
            if name.endswith("embed_tokens.weight"):
                std = EMBED_STD
                if cfg.tie_word_embeddings:
                    # The same matrix is the lm_head: pick a std that serves both
                    # (the first RMSNorm removes the embedding scale anyway).
                    std = LOGIT_STD / math.sqrt(hidden)
                v = torch.randn(p.shape, generator=gen) * std
            elif name.endswith("lm_head.weight"):
                v = torch.randn(p.shape, generator=gen) * (LOGIT_STD / math.sqrt(hidden))
            elif name.endswith("norm.weight"):  # input/post-attention/final/q/k norms
                v = 1.0 + NORM_NOISE * torch.randn(p.shape, generator=gen)
                if name == "model.norm.weight" and cfg.tie_word_embeddings:
                    # Tied: logits = E . norm(h) and h holds the last token's own
                    # embedding row, so the model would just repeat its input token
                    # forever. Random signs on the final norm weight remove that
                    # self-match (E_x . (g * e_x) averages to 0).
                    signs = torch.where(torch.rand(p.shape, generator=gen) < 0.5, -1.0, 1.0)
                    v = v * signs
            elif name.endswith(".bias"):
                v = BIAS_STD * torch.randn(p.shape, generator=gen)
            elif p.dim() == 2:
                fan_in = p.shape[1]
                v = torch.randn(p.shape, generator=gen) * (MATRIX_GAIN / math.sqrt(fan_in))
            else:
                raise RuntimeError(f"no init rule for {name} {tuple(p.shape)}")
            p.copy_(v.to(p.dtype))


def build(name, out_dir):
    seed, cfg_dict = MODELS[name]
    cfg_dict = dict(cfg_dict)
    model_type = cfg_dict.pop("model_type")
    config = AutoConfig.for_model(model_type, **cfg_dict)
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    init_weights(model, seed)
    model = model.to(torch.bfloat16)
    model.config.dtype = "bfloat16"
    if os.path.exists(out_dir):
        shutil.rmtree(out_dir)
    os.makedirs(out_dir)
    model.save_pretrained(out_dir, safe_serialization=True)
    # generation_config.json is not needed (no EOS stop in the goldens) and only
    # adds noise; keep config.json + model.safetensors.
    gc = os.path.join(out_dir, "generation_config.json")
    if os.path.exists(gc):
        os.remove(gc)
    n_params = sum(p.numel() for p in model.parameters())
    size = os.path.getsize(os.path.join(out_dir, "model.safetensors"))
    print(f"{name:20s} seed {seed:4d}  {n_params/1e3:7.1f}k params  {size/1024:6.1f} KiB  -> {out_dir}")
    return size


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=os.path.join(HERE, "models"))
    ap.add_argument("--only", default="", help="comma-separated subset of: " + ",".join(MODELS))
    args = ap.parse_args()
    names = [n for n in args.only.split(",") if n] or list(MODELS)
    for n in names:
        if n not in MODELS:
            sys.exit(f"unknown model {n!r}; known: {', '.join(MODELS)}")
    print(f"torch {torch.__version__}, transformers {transformers.__version__}")
    total = 0
    for n in names:
        total += build(n, os.path.join(args.out, n))
    print(f"total safetensors size: {total/1024:.1f} KiB")


if __name__ == "__main__":
    main()
