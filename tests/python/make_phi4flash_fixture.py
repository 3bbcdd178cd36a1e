#!/usr/bin/python3
"""Writes a tiny random Phi-4-mini-flash (model_type "phi4flash", SambaY) checkpoint and its float64 logits.

An independent PyTorch implementation of the whole model, written from the public ports (Microsoft's remote
code modeling_phi4flash.py as copied into several repositories, NVIDIA TensorRT-LLM's auto_deploy
modeling_phi4flash.py, onnxruntime/mobius's models/phi4flash.py and components, microsoft/ArchScale's
lit_gpt/gated_memory_unit.py and diff_attn.py), NOT from diffvk's C++ reference (runtime/reference/phi4flash_ref.cpp).
Where the ports disagree this follows the remote code and ArchScale (docs/maths.md "Phi-4-mini-flash (SambaY)"):
  - the gates are SiLU (swiglu(z, y) = silu(z)·y, swiglu(in_proj(h), m) = silu(in_proj(h))·m), not sigmoid;
  - A_log is [d_inner, d_state] (the original Mamba-1 scan), not averaged over the state dimension.

Layers (L = num_hidden_layers, a multiple of 4, mb_per_layer = 2):
  i even, i < L/2     Mamba-1: in_proj -> [x | z], causal depthwise conv1d (K = mamba_d_conv, bias) + SiLU,
                      x_proj -> [dt (dt_rank) | B (d_state) | C (d_state)], dt = softplus(dt_proj(dt) + bias),
                      h = exp(dt·A)·h + dt·B·x, y = C·h + D·x, out_proj(y · silu(z)), A = -exp(A_log)
  i = L/2             the same Mamba; its y (before the gate, D skip included) is the memory m
  i even, i > L/2     GMU: out_proj(silu(in_proj(h)) · m), m of the same position
  i odd, i < L/2      differential attention over a sliding window (query i sees keys i-W+1 .. i)
  i = L/2 + 1         full causal differential attention; its K and V are every later attention layer's
  i odd, i > L/2 + 1  cross-decoder: Wqkv projects queries only, attends over layer L/2+1's K and V
Differential attention (no RoPE): q, k, v heads split in stripes (even head: softmax 1, odd: softmax 2), GQA
over the stripes, attn1 = [A(q1,k1)·v1 | A(q1,k1)·v2], attn2 = [A(q2,k2)·v1 | A(q2,k2)·v2],
o = RMSNorm_{2D}(attn1 - λ·attn2)·subln·(1 - λ_init), λ = exp(λq1·λk1) - exp(λq2·λk2) + λ_init(layer index),
λ_init(d) = 0.8 - 0.6·exp(-0.3·d). Blocks: x += mixer(LN1(x)); x += fc2(up·silu(gate)), [gate|up] = fc1(LN2(x));
LayerNorm with bias everywhere; final_layernorm; tied lm_head.

Output directory tests/data/phi4flash_tiny/: config.json (only the keys the real checkpoint's config.json gives,
plus mamba_d_state for the tiny size: mb_per_layer, mamba_d_conv, mamba_expand, mamba_dt_rank, mamba_conv_bias,
mamba_proj_bias are left to the config class's defaults as in the real one), model.safetensors (BF16, as the
real checkpoint; lm_head.weight absent: tied), tokens.npy (int64, N), logits.npy (float64, N x vocab: every
position of one full causal forward from position 0, computed from the BF16 values), meta.json.

Usage:  /usr/bin/python3 tests/python/make_phi4flash_fixture.py [--out DIR]   (default tests/data)
"""

import argparse
import json
import math
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from diffattn import save_safetensors  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

CONFIG = dict(model_type="phi4flash", architectures=["Phi4FlashForCausalLM"], vocab_size=97, hidden_size=32,
              intermediate_size=48, num_hidden_layers=8, num_attention_heads=8, num_key_value_heads=4,
              max_position_embeddings=64, sliding_window=5, hidden_act="silu", layer_norm_eps=1e-5,
              tie_word_embeddings=True, torch_dtype="bfloat16", pad_token_id=0, bos_token_id=1, eos_token_id=2,
              mamba_d_state=4)
# The config class's defaults (Phi4FlashConfig.__init__) for the keys the real config.json omits.
DEFAULTS = dict(mb_per_layer=2, mamba_d_conv=4, mamba_expand=2, mamba_dt_rank="auto", mamba_conv_bias=True,
                mamba_proj_bias=False)
N_TOKENS = 13


def shape_of(c):
    c = dict(DEFAULTS, **c)
    E, nah, nkv = c["hidden_size"], c["num_attention_heads"], c["num_key_value_heads"]
    s = dict(E=E, L=c["num_hidden_layers"], nah=nah, nkv=nkv, D=E // nah, I=c["intermediate_size"],
             V=c["vocab_size"], W=c["sliding_window"], eps=c["layer_norm_eps"], S=c["mamba_d_state"],
             K=c["mamba_d_conv"], din=c["mamba_expand"] * E)
    s["R"] = math.ceil(E / 16) if c["mamba_dt_rank"] == "auto" else c["mamba_dt_rank"]
    return s


def kind(s, i):
    """The ports' layer kinds (remote code _SambaDecoderLayer: yoco_mb, yoco_kv, yoco_cross)."""
    half = s["L"] // 2
    if i % 2 == 0:
        return "mamba" if i < half else ("memory_mamba" if i == half else "gmu")
    return "swa" if i < half else ("full" if i == half + 1 else "cross")


def random_weights(s, gen):
    E, L, nah, nkv, D, I, V = (s[k] for k in ("E", "L", "nah", "nkv", "D", "I", "V"))
    S, K, din, R = (s[k] for k in ("S", "K", "din", "R"))

    def rnd(*shape, std=1.0):
        return torch.randn(*shape, generator=gen, dtype=torch.float64) * std

    def uni(*shape, lo, hi):
        return lo + (hi - lo) * torch.rand(*shape, generator=gen, dtype=torch.float64)

    W = {"model.embed_tokens.weight": rnd(V, E), "model.final_layernorm.weight": 1 + rnd(E, std=0.1),
         "model.final_layernorm.bias": rnd(E, std=0.1)}
    for i in range(L):
        p = f"model.layers.{i}."
        a = p + "attn."
        for n in ("input_layernorm", "post_attention_layernorm"):
            W[p + n + ".weight"] = 1 + rnd(E, std=0.1)
            W[p + n + ".bias"] = rnd(E, std=0.1)
        W[p + "mlp.fc1.weight"] = rnd(2 * I, E, std=E ** -0.5)
        W[p + "mlp.fc2.weight"] = rnd(E, I, std=I ** -0.5)
        k = kind(s, i)
        if k in ("mamba", "memory_mamba"):
            W[a + "in_proj.weight"] = rnd(2 * din, E, std=E ** -0.5)
            W[a + "conv1d.weight"] = rnd(din, 1, K, std=0.5)
            W[a + "conv1d.bias"] = rnd(din, std=0.1)
            W[a + "x_proj.weight"] = rnd(R + 2 * S, din, std=din ** -0.5)
            W[a + "dt_proj.weight"] = rnd(din, R, std=R ** -0.5)
            dt = torch.exp(uni(din, lo=math.log(1e-3), hi=math.log(0.5)))  # Mamba's dt init: softplus^-1 of it
            W[a + "dt_proj.bias"] = dt + torch.log(-torch.expm1(-dt))
            # S4D-real A = 1..S per channel, perturbed so that no two channels share a spectrum.
            s4d = torch.log(torch.arange(1, S + 1, dtype=torch.float64)).repeat(din, 1)
            W[a + "A_log"] = s4d + rnd(din, S, std=0.3)
            W[a + "D"] = 1 + rnd(din, std=0.3)
            W[a + "out_proj.weight"] = rnd(E, din, std=din ** -0.5)
        elif k == "gmu":
            W[a + "in_proj.weight"] = rnd(din, E, std=E ** -0.5)
            W[a + "out_proj.weight"] = rnd(E, din, std=din ** -0.5)
        else:
            rows = nah * D if k == "cross" else (nah + 2 * nkv) * D
            W[a + "Wqkv.weight"] = rnd(rows, E, std=E ** -0.5 * 2)
            W[a + "Wqkv.bias"] = rnd(rows, std=0.1)
            W[a + "out_proj.weight"] = rnd(E, nah * D, std=(nah * D) ** -0.5)
            W[a + "out_proj.bias"] = rnd(E, std=0.1)
            c = a + "inner_cross_attn."
            for n in ("lambda_q1", "lambda_k1", "lambda_q2", "lambda_k2"):
                W[c + n] = rnd(D, std=0.3)
            W[c + "subln.weight"] = 1 + rnd(2 * D, std=0.1)
    return W


# ---- the forward pass (float64) -------------------------------------------------------------------------------

def rmsnorm(x, w, eps=1e-5):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


def split_heads(x):
    """(T, 2n, D) -> the two stripes (T, n, D): heads 0, 2, 4, ... and 1, 3, 5, ... (rearrange '(H two) D')."""
    x = x.view(x.shape[0], x.shape[1] // 2, 2, x.shape[2])
    return x[:, :, 0, :], x[:, :, 1, :]


def attend(q, k, v, mask):
    """Softmax attention with GQA (flash-attn's mapping: query head h reads kv head h // (nq / nkv))."""
    rep = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)
    scores = torch.einsum("ihd,jhd->hij", q, k) / math.sqrt(q.shape[-1]) + mask
    return torch.einsum("hij,jhd->ihd", torch.softmax(scores, dim=-1), v)


def diff_attention(W, c, q, k, v, mask, depth):
    q1, q2 = split_heads(q)
    k1, k2 = split_heads(k)
    v1, v2 = split_heads(v)
    attn1 = torch.cat([attend(q1, k1, v1, mask), attend(q1, k1, v2, mask)], dim=-1)
    attn2 = torch.cat([attend(q2, k2, v1, mask), attend(q2, k2, v2, mask)], dim=-1)
    lam_init = 0.8 - 0.6 * math.exp(-0.3 * depth)
    lam = (torch.exp((W[c + "lambda_q1"] * W[c + "lambda_k1"]).sum()) -
           torch.exp((W[c + "lambda_q2"] * W[c + "lambda_k2"]).sum()) + lam_init)
    o = rmsnorm(attn1 - lam * attn2, W[c + "subln.weight"]) * (1 - lam_init)
    return o.reshape(o.shape[0], -1)  # '(H (two D))' = '((H two) D)'


def mamba(W, a, s, h):
    """Returns (the layer's output, y before the gate)."""
    T, din, S, K, R = h.shape[0], s["din"], s["S"], s["K"], s["R"]
    x, z = (h @ W[a + "in_proj.weight"].T).chunk(2, dim=-1)
    x = F.conv1d(x.T.unsqueeze(0), W[a + "conv1d.weight"], W[a + "conv1d.bias"], padding=K - 1, groups=din)
    x = F.silu(x[0, :, :T].T)  # (T, din)
    dt, B, C = torch.split(x @ W[a + "x_proj.weight"].T, [R, S, S], dim=-1)
    dt = F.softplus(dt @ W[a + "dt_proj.weight"].T + W[a + "dt_proj.bias"])
    A = -torch.exp(W[a + "A_log"])  # (din, S)
    state = torch.zeros(din, S, dtype=torch.float64)
    ys = []
    for t in range(T):
        state = torch.exp(dt[t][:, None] * A) * state + (dt[t] * x[t])[:, None] * B[t][None, :]
        ys.append(state @ C[t] + W[a + "D"] * x[t])
    y = torch.stack(ys)
    return (y * F.silu(z)) @ W[a + "out_proj.weight"].T, y


def forward(c, W, tokens):
    s = shape_of(c)
    E, L, nah, nkv, D, eps, T = s["E"], s["L"], s["nah"], s["nkv"], s["D"], s["eps"], len(tokens)
    i_pos = torch.arange(T)[:, None]
    j_pos = torch.arange(T)[None, :]
    neg = torch.tensor(float("-inf"), dtype=torch.float64)
    zero = torch.tensor(0.0, dtype=torch.float64)
    causal = torch.where(j_pos <= i_pos, zero, neg)
    window = torch.where((j_pos <= i_pos) & (i_pos - j_pos < s["W"]), zero, neg)
    x = W["model.embed_tokens.weight"][torch.tensor(tokens)]
    memory, shared_kv = None, None
    for i in range(L):
        p = f"model.layers.{i}."
        a = p + "attn."
        h = F.layer_norm(x, (E,), W[p + "input_layernorm.weight"], W[p + "input_layernorm.bias"], eps)
        k = kind(s, i)
        if k in ("mamba", "memory_mamba"):
            out, y = mamba(W, a, s, h)
            if k == "memory_mamba":
                memory = y
        elif k == "gmu":
            out = (F.silu(h @ W[a + "in_proj.weight"].T) * memory) @ W[a + "out_proj.weight"].T
        else:
            qkv = h @ W[a + "Wqkv.weight"].T + W[a + "Wqkv.bias"]
            q = qkv[:, :nah * D].reshape(T, nah, D)
            if k == "cross":
                kk, vv = shared_kv
            else:
                kk = qkv[:, nah * D:(nah + nkv) * D].reshape(T, nkv, D)
                vv = qkv[:, (nah + nkv) * D:].reshape(T, nkv, D)
                if k == "full":
                    shared_kv = (kk, vv)
            o = diff_attention(W, a + "inner_cross_attn.", q, kk, vv, window if k == "swa" else causal, i)
            out = o @ W[a + "out_proj.weight"].T + W[a + "out_proj.bias"]
        x = x + out
        h = F.layer_norm(x, (E,), W[p + "post_attention_layernorm.weight"], W[p + "post_attention_layernorm.bias"], eps)
        gate, up = (h @ W[p + "mlp.fc1.weight"].T).chunk(2, dim=-1)
        x = x + (up * F.silu(gate)) @ W[p + "mlp.fc2.weight"].T
    x = F.layer_norm(x, (E,), W["model.final_layernorm.weight"], W["model.final_layernorm.bias"], eps)
    return x @ W["model.embed_tokens.weight"].T


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(REPO, "tests", "data"))
    args = ap.parse_args()
    c = CONFIG
    s = shape_of(c)
    assert s["L"] % 4 == 0 and N_TOKENS > s["W"] + s["K"]
    gen = torch.Generator().manual_seed(4242)
    W = random_weights(s, gen)
    stored = {k: v.to(torch.bfloat16) for k, v in W.items()}  # the real checkpoint is BF16
    W = {k: v.to(torch.float64) for k, v in stored.items()}
    tokens = torch.randint(3, s["V"], (N_TOKENS,), generator=gen).tolist()
    logits = forward(c, W, tokens)
    # Self-checks: causality (a prefix's logits are the first rows of the longer sequence), and the sliding
    # window matters (the same model with an unbounded window differs after position W).
    for n in (1, s["W"], s["W"] + 1):
        assert torch.allclose(forward(c, W, tokens[:n]), logits[:n], rtol=0, atol=1e-12)
    wide = forward(dict(c, sliding_window=N_TOKENS), W, tokens)
    assert torch.allclose(wide[:s["W"]], logits[:s["W"]], rtol=0, atol=1e-12)
    assert (wide[s["W"]:] - logits[s["W"]:]).abs().max() > 1e-3
    d = os.path.join(args.out, "phi4flash_tiny")
    os.makedirs(d, exist_ok=True)
    for f in os.listdir(d):
        os.remove(os.path.join(d, f))
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(c, f, indent=2)
    save_safetensors(os.path.join(d, "model.safetensors"), stored, {"format": "pt"})
    np.save(os.path.join(d, "tokens.npy"), np.array(tokens, dtype=np.int64))
    np.save(os.path.join(d, "logits.npy"), logits.numpy().astype(np.float64))
    with open(os.path.join(d, "meta.json"), "w") as f:
        json.dump({"description": "tiny random phi4flash (SambaY), BF16, tied; logits float64 of the full forward",
                   "layer_kinds": [kind(s, i) for i in range(s["L"])], "seed": 4242,
                   "generator": "tests/python/make_phi4flash_fixture.py"}, f, indent=1)
    print(f"{d}: kinds {[kind(s, i) for i in range(s['L'])]}, max|logit| {logits.abs().max():.3f}, "
          f"{os.path.getsize(os.path.join(d, 'model.safetensors'))} bytes of weights")


if __name__ == "__main__":
    main()
