#!/usr/bin/env python3
"""Quality of the quantization core (passes/quant) on a Hugging Face Llama
checkpoint: calibration statistics, quantization by quant_model (QuantModel.cpp)
for several methods and formats, per-tensor sensitivity, bit allocation, and
scoring. Runs on the GPU machine with PyTorch:

  eval_model.py <model> <calib.txt> <heldout.txt> <work> <quant_model binary>

Calibration: H = X^T X (f64) and mean |x| of every linear layer's input over
512-token chunks of the calibration text. Sensitivity: KL divergence on 48
calibration chunks when only one tensor is quantized (q3_g64), divided by its
relative output error. Scoring (llama.cpp's method): perplexity and KL
divergence against the unquantized model over 512-token chunks of the held-out
text, BOS first, the second half of each chunk scored. bpw counts every weight
(norms as 16 bit) over all parameters. The held-out text is only scored.

Environment (defaults in brackets): QM_METHODS [rtn,gptq,gptq-act,awq-gptq],
QM_FORMATS [q2_g32,...,q8_g64] (candidates), QM_UNIFORM [q4_g128,...,q2_g32]
(formats scored for every tensor), QM_MIXED [gptq,awq-gptq] (methods given to
the allocator), QM_SENS [q3_g64] (formats the sensitivity is measured at),
QM_TARGETS [4.5,3.6,2.8] (bpw).
"""
import os
import sys

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

CTX = 512


def load(model_dir):
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).cuda().eval()
    tok = AutoTokenizer.from_pretrained(model_dir)
    return model, tok


def chunks(tok, model, path, limit=None):
    ids = tok(open(path, encoding="utf-8").read(), add_special_tokens=False)["input_ids"]
    n = len(ids) // CTX
    if limit:
        n = min(n, limit)
    x = torch.tensor(ids[: n * CTX], dtype=torch.long).view(n, CTX)
    x[:, 0] = model.config.bos_token_id
    return x.cuda()


def linears(model):
    """(name, module, input group) of every linear layer, and the embedding."""
    out = [("embed", model.model.embed_tokens, "-")]
    for i, layer in enumerate(model.model.layers):
        a, m = layer.self_attn, layer.mlp
        out += [(f"l{i}.q", a.q_proj, f"l{i}.attn_in"), (f"l{i}.k", a.k_proj, f"l{i}.attn_in"),
                (f"l{i}.v", a.v_proj, f"l{i}.attn_in"), (f"l{i}.o", a.o_proj, f"l{i}.o_in"),
                (f"l{i}.gate", m.gate_proj, f"l{i}.mlp_in"),
                (f"l{i}.up", m.up_proj, f"l{i}.mlp_in"),
                (f"l{i}.down", m.down_proj, f"l{i}.down_in")]
    out.append(("lm_head", model.lm_head, "lm_in"))
    return out


@torch.no_grad()
def calib(model_dir, text, work):
    model, tok = load(model_dir)
    x = chunks(tok, model, text)
    stats, hooks = {}, []
    for name, mod, group in linears(model):
        if group == "-" or group in stats:
            continue
        k = mod.in_features
        stats[group] = [torch.zeros(k, k, dtype=torch.float64, device="cuda"),
                        torch.zeros(k, dtype=torch.float64, device="cuda"), 0]

        def hook(_, inputs, group=group):
            v = inputs[0].reshape(-1, inputs[0].shape[-1]).double()
            s = stats[group]
            s[0] += v.T @ v
            s[1] += v.abs().sum(0)
            s[2] += v.shape[0]
        hooks.append(mod.register_forward_pre_hook(hook))
    for b in range(0, x.shape[0], 16):
        model(x[b:b + 16])
    for h in hooks:
        h.remove()
    os.makedirs(work, exist_ok=True)
    with open(os.path.join(work, "manifest.txt"), "w") as m:
        for group, (h, a, n) in stats.items():
            h.cpu().numpy().tofile(f"{work}/{group}.h.f64")
            (a / n).float().cpu().numpy().tofile(f"{work}/{group}.absmean.f32")
            m.write(f"input {group} {h.shape[0]} {work}/{group}.h.f64 {work}/{group}.absmean.f32\n")
        for name, mod, group in linears(model):
            w = mod.weight.detach().float().cpu().numpy()
            w.tofile(f"{work}/{name}.w.f32")
            m.write(f"tensor {name} {w.shape[0]} {w.shape[1]} {work}/{name}.w.f32 {group}\n")
    print(f"calib: {x.shape[0]} chunks of {CTX} tokens, {len(stats)} input groups")


def read_errors(cand_dir):
    err = {}
    for line in open(os.path.join(cand_dir, "errors.tsv")):
        name, fmt, nbytes, rel = line.split()
        err[(name, fmt)] = (int(nbytes), float(rel))
    return err


def set_weight(mod, path):
    w = torch.from_numpy(__import__("numpy").fromfile(path, dtype="float32"))
    mod.weight.data.copy_(w.view_as(mod.weight).cuda())


@torch.no_grad()
def reference(model, x):
    """fp log-probs of the scored positions (second half of each chunk)."""
    out = []
    for b in range(0, x.shape[0], 16):
        logits = model(x[b:b + 16]).logits[:, CTX // 2:-1].float()
        out.append(torch.log_softmax(logits, -1))
    return torch.cat(out)


@torch.no_grad()
def score(model, x, ref):
    kld = nll = same = 0.0
    count = 0
    for b in range(0, x.shape[0], 16):
        logits = model(x[b:b + 16]).logits[:, CTX // 2:-1].float()
        lq = torch.log_softmax(logits, -1)
        lp = ref[b:b + 16]
        kld += (lp.exp() * (lp - lq)).sum(-1).sum().item()
        target = x[b:b + 16, CTX // 2 + 1:]
        nll += -lq.gather(-1, target.unsqueeze(-1)).sum().item()
        same += (lq.argmax(-1) == lp.argmax(-1)).sum().item()
        count += target.numel()
    return kld / count, float(torch.exp(torch.tensor(nll / count))), same / count


@torch.no_grad()
def sensitivity(model, x, ref, cand_dir, fmt, path):
    err = read_errors(cand_dir)
    with open(path, "w") as out:
        for name, mod, _ in linears(model):
            saved = mod.weight.data.clone()
            set_weight(mod, f"{cand_dir}/{name}.{fmt}.f32")
            kld, _, _ = score(model, x, ref)
            mod.weight.data.copy_(saved)
            out.write(f"{name}\t{kld / max(err[(name, fmt)][1], 1e-30):.6g}\n")
            print(f"  sensitivity {name:10s} kld {kld:.5f} relerr {err[(name, fmt)][1]:.4g}")


@torch.no_grad()
def evaluate(model, x, ref, label, cand_dir, choice, log):
    """choice: format name for every tensor, or {tensor: format}."""
    saved = {name: mod.weight.data.clone() for name, mod, _ in linears(model)}
    params = sum(p.numel() for p in model.parameters())
    err = read_errors(cand_dir)
    bits = quantized = 0
    for name, mod, _ in linears(model):
        fmt = choice if isinstance(choice, str) else choice[name]
        set_weight(mod, f"{cand_dir}/{name}.{fmt}.f32")
        bits += 8 * err[(name, fmt)][0]
        quantized += mod.weight.numel()
    bits += 16 * (params - quantized)  # norms
    kld, ppl, same = score(model, x, ref)
    for name, mod, _ in linears(model):
        mod.weight.data.copy_(saved[name])
    line = (f"{label:34s} bpw {bits / params:6.3f}  ppl {ppl:.4f}  kld {kld:.5f}  "
            f"same-top {100 * same:.1f}%")
    print(line, flush=True)
    log.write(line + "\n")
    log.flush()


def main(model_dir, calib_text, heldout_text, work, quant_model):
    import subprocess
    import time
    out_dir = os.environ.get("OUT", work)
    log = open(os.path.join(out_dir, "results.txt"), "w")
    t0 = time.time()
    calib(model_dir, calib_text, work)
    model, tok = load(model_dir)
    params = sum(p.numel() for p in model.parameters())
    norm_params = params - sum(m.weight.numel() for _, m, _ in linears(model))
    env = os.environ.get
    formats = env("QM_FORMATS", "q2_g32,q2_g64,q3_g32,q3_g64,q3_g128,q4_g32,q4_g64,q4_g128,q8_g64")
    how = {"rtn": ["rtn"], "gptq": ["gptq"], "gptq-act": ["gptq-act"], "awq-gptq": ["gptq", "awq"]}
    methods = {m: how[m] for m in env("QM_METHODS", "rtn,gptq,gptq-act,awq-gptq").split(",")}
    uniform = env("QM_UNIFORM", "q4_g128,q4_g64,q4_g32,q3_g64,q3_g32,q2_g32").split(",")
    mixed = env("QM_MIXED", "gptq,awq-gptq").split(",")
    sens_formats = env("QM_SENS", "q3_g64").split(",")
    targets = [float(t) for t in env("QM_TARGETS", "4.5,3.6,2.8").split(",")]
    for label, how in methods.items():
        cand = f"{work}/{label}"
        os.makedirs(cand, exist_ok=True)
        t = time.time()
        subprocess.run([quant_model, "candidates", f"{work}/manifest.txt", cand, how[0], formats]
                       + how[1:], check=True)
        print(f"quantized {label}: {time.time() - t:.1f} s", flush=True)

    held = chunks(tok, model, heldout_text)
    ref = reference(model, held)
    kld, ppl, same = score(model, held, ref)
    line = (f"{'bf16 (reference)':34s} bpw 16.000  ppl {ppl:.4f}  kld {kld:.5f}  "
            f"same-top {100 * same:.1f}%")
    print(line)
    log.write(f"held-out: {held.shape[0]} chunks; params {params}\n{line}\n")
    for label in methods:
        for fmt in filter(None, uniform):
            evaluate(model, held, ref, f"{label} {fmt}", f"{work}/{label}", fmt, log)

    cal = chunks(tok, model, calib_text, limit=48)
    cal_ref = reference(model, cal)
    for label in filter(None, mixed):
        cand = f"{work}/{label}"
        weightings = ["flat"]
        for fmt in sens_formats:
            sensitivity(model, cal, cal_ref, cand, fmt, f"{cand}/sens-{fmt}.tsv")
            weightings.insert(0, f"sens-{fmt}")
        with open(f"{cand}/flat.tsv", "w") as flat:
            for name, _, _ in linears(model):
                flat.write(f"{name}\t1\n")
        for target in targets:
            budget = int(target * params) - 16 * norm_params
            for weights in weightings:
                choice_path = f"{cand}/choice-{target}-{weights}.tsv"
                subprocess.run([quant_model, "allocate", f"{cand}/errors.tsv",
                                f"{cand}/{weights}.tsv", str(budget), choice_path], check=True)
                choice = dict(line.split() for line in open(choice_path))
                evaluate(model, held, ref, f"{label} mixed {target} ({weights})", cand, choice, log)
                if weights != "flat":
                    counts = {}
                    for fmt in choice.values():
                        counts[fmt] = counts.get(fmt, 0) + 1
                    log.write(f"  formats: {sorted(counts.items())}\n")
    log.write(f"total {time.time() - t0:.0f} s\n")


if __name__ == "__main__":
    if len(sys.argv) != 6:
        sys.exit(__doc__)
    main(*sys.argv[1:])
