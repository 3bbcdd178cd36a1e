#!/usr/bin/python3
"""What fp16 activation storage costs the tiny Phi-4-mini-flash fixture (tests/data/phi4flash_tiny), point by point.

A float64 forward of the fixture (NumPy only: the maths of make_phi4flash_fixture.py, on the weights as an fp16
device holds them: every tensor rounded to fp16 but the biases of Wqkv, out_proj and dt_proj, A_log, D and the λ
vectors) that rounds an activation to fp16 at the chosen storage points, against the same forward with none
rounded: the logits' nmse (docs/maths.md) over all rows, of the last row, and of the worst single row. Points:

  ln_mamba, ln_gmu, ln_attn, ln_mlp, ln_final   the LayerNorms' outputs (each mixer's, the MLP's, the final one)
  m_xz, m_u, m_dbc, m_delta, m_y, m_mem          Mamba: in_proj's [x | z], the conv, x_proj's [dt | B | C],
                                                 dt_proj's output, the gated scan output, the memory (layer L/2)
  g_in, g_gated                                  GMU: in_proj's output, the gate silu(g)·m
  a_q, a_kv, a_o                                 attention: q, k and v (the caches), the attention output
  f_gu, f_act                                    MLP: fc1's [gate | up], the SwiGLU

The device (runtime/model/recipe_sambay.*) stores every one of them in fp16 storage (a one-row pass fuses the
SwiGLU into fc2 and stores no f_act); the residual stream, the recurrent states and the logits are float32.
The prompts are the forward test's (the fixture's 13 tokens, then ids from std::mt19937_64(7): 41 and 23 tokens)
and the session test's 30 ids of std::mt19937_64(11); then `--random N` prompts of 30 random ids (the tail of the
single-row nmse). The findings are in docs/phi4flash.md ("fp16 storage").

Usage:  /usr/bin/python3 tests/python/phi4flash_fp16_storage.py [--random N]
"""

import argparse
import json
import math
import os
import struct

import numpy as np

FIXTURE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data", "phi4flash_tiny")
POINTS = ["ln_mamba", "ln_gmu", "ln_attn", "ln_mlp", "ln_final", "m_xz", "m_u", "m_dbc", "m_delta", "m_y", "m_mem",
          "g_in", "g_gated", "a_q", "a_kv", "a_o", "f_gu", "f_act"]
FLOAT32 = ("Wqkv.bias", "attn.out_proj.bias", "dt_proj.bias", "A_log", "attn.D", "lambda_q1", "lambda_k1",
           "lambda_q2", "lambda_k2")


def half(a):
    return np.asarray(a).astype(np.float16).astype(np.float64)


def load_weights():
    with open(os.path.join(FIXTURE, "model.safetensors"), "rb") as f:
        raw = f.read()
    n = struct.unpack("<Q", raw[:8])[0]
    header, base, W = json.loads(raw[8:8 + n]), 8 + n, {}
    for name, t in header.items():
        if name == "__metadata__":
            continue
        assert t["dtype"] == "BF16", name
        b0, b1 = t["data_offsets"]
        bits = np.frombuffer(raw[base + b0:base + b1], dtype=np.uint16).astype(np.uint32) << 16
        v = bits.view(np.float32).astype(np.float64).reshape(t["shape"])
        W[name] = v if name.endswith(FLOAT32) else half(v)
    return W


def shape_of(c):
    E = c["hidden_size"]
    return dict(E=E, L=c["num_hidden_layers"], nah=c["num_attention_heads"], nkv=c["num_key_value_heads"],
                D=E // c["num_attention_heads"], I=c["intermediate_size"], V=c["vocab_size"], W=c["sliding_window"],
                eps=c["layer_norm_eps"], S=c["mamba_d_state"], K=4, din=2 * E, R=math.ceil(E / 16))


def kind(s, i):
    half_l = s["L"] // 2
    if i % 2 == 0:
        return "mamba" if i < half_l else ("memory_mamba" if i == half_l else "gmu")
    return "swa" if i < half_l else ("full" if i == half_l + 1 else "cross")


def silu(x):
    return x / (1 + np.exp(-x))


def softplus(x):
    return np.where(x > 20, x, np.log1p(np.exp(np.minimum(x, 20))))


def layer_norm(x, w, b, eps):
    m = x.mean(-1, keepdims=True)
    return (x - m) / np.sqrt(((x - m) ** 2).mean(-1, keepdims=True) + eps) * w + b


def attend(q, k, v, mask):
    rep = q.shape[1] // k.shape[1]
    k, v = np.repeat(k, rep, axis=1), np.repeat(v, rep, axis=1)
    a = np.einsum("ihd,jhd->hij", q, k) / math.sqrt(q.shape[-1]) + mask
    a = np.exp(a - a.max(-1, keepdims=True))
    return np.einsum("hij,jhd->ihd", a / a.sum(-1, keepdims=True), v)


def diff_attention(W, c, q, k, v, mask, depth):
    def stripes(x):
        x = x.reshape(x.shape[0], x.shape[1] // 2, 2, x.shape[2])
        return x[:, :, 0, :], x[:, :, 1, :]
    (q1, q2), (k1, k2), (v1, v2) = stripes(q), stripes(k), stripes(v)
    a1 = np.concatenate([attend(q1, k1, v1, mask), attend(q1, k1, v2, mask)], -1)
    a2 = np.concatenate([attend(q2, k2, v1, mask), attend(q2, k2, v2, mask)], -1)
    li = 0.8 - 0.6 * math.exp(-0.3 * depth)
    lam = (math.exp((W[c + "lambda_q1"] * W[c + "lambda_k1"]).sum()) -
           math.exp((W[c + "lambda_q2"] * W[c + "lambda_k2"]).sum()) + li)
    o = a1 - lam * a2
    o = o / np.sqrt((o ** 2).mean(-1, keepdims=True) + 1e-5) * W[c + "subln.weight"] * (1 - li)
    return o.reshape(o.shape[0], -1)


def forward(s, W, tokens, points, layers=None):
    """Logits of every row; the activations at `points` rounded to fp16 (in `layers` only, when given; the final
    norm counts as layer L)."""
    E, L, nah, nkv, D, eps, T = s["E"], s["L"], s["nah"], s["nkv"], s["D"], s["eps"], len(tokens)
    din, S, K, R = s["din"], s["S"], s["K"], s["R"]
    layer = [0]

    def r(point, v):
        return half(v) if point in points and (layers is None or layer[0] in layers) else v
    i_pos, j_pos = np.arange(T)[:, None], np.arange(T)[None, :]
    causal = np.where(j_pos <= i_pos, 0.0, -np.inf)
    window = np.where((j_pos <= i_pos) & (i_pos - j_pos < s["W"]), 0.0, -np.inf)
    x = W["model.embed_tokens.weight"][np.array(tokens)]
    memory = shared = None
    for i in range(L):
        layer[0] = i
        p = f"model.layers.{i}."
        a, k = p + "attn.", kind(s, i)
        h = layer_norm(x, W[p + "input_layernorm.weight"], W[p + "input_layernorm.bias"], eps)
        h = r("ln_mamba" if "mamba" in k else "ln_gmu" if k == "gmu" else "ln_attn", h)
        if "mamba" in k:
            xz = r("m_xz", h @ W[a + "in_proj.weight"].T)
            xi, z = xz[:, :din], xz[:, din:]
            padded, u = np.concatenate([np.zeros((K - 1, din)), xi]), np.tile(W[a + "conv1d.bias"], (T, 1))
            for j in range(K):
                u = u + W[a + "conv1d.weight"][:, 0, j] * padded[j:j + T]
            u = r("m_u", silu(u))
            dbc = r("m_dbc", u @ W[a + "x_proj.weight"].T)
            dt = softplus(r("m_delta", dbc[:, :R] @ W[a + "dt_proj.weight"].T + W[a + "dt_proj.bias"]))
            B, C, A = dbc[:, R:R + S], dbc[:, R + S:], -np.exp(W[a + "A_log"])
            state, ys = np.zeros((din, S)), []
            for t in range(T):
                state = np.exp(dt[t][:, None] * A) * state + (dt[t] * u[t])[:, None] * B[t][None, :]
                ys.append(state @ C[t] + W[a + "D"] * u[t])
            y = np.stack(ys)
            if k == "memory_mamba":
                memory = r("m_mem", y)
            out = r("m_y", y * silu(z)) @ W[a + "out_proj.weight"].T
        elif k == "gmu":
            g = r("g_in", h @ W[a + "in_proj.weight"].T)
            out = r("g_gated", silu(g) * memory) @ W[a + "out_proj.weight"].T
        else:
            qkv = h @ W[a + "Wqkv.weight"].T + W[a + "Wqkv.bias"]
            q = r("a_q", qkv[:, :nah * D]).reshape(T, nah, D)
            if k == "cross":
                kk, vv = shared
            else:
                kk = r("a_kv", qkv[:, nah * D:(nah + nkv) * D]).reshape(T, nkv, D)
                vv = r("a_kv", qkv[:, (nah + nkv) * D:]).reshape(T, nkv, D)
                if k == "full":
                    shared = (kk, vv)
            o = diff_attention(W, a + "inner_cross_attn.", q, kk, vv, window if k == "swa" else causal, i)
            out = r("a_o", o) @ W[a + "out_proj.weight"].T + W[a + "out_proj.bias"]
        x = x + out
        h = r("ln_mlp", layer_norm(x, W[p + "post_attention_layernorm.weight"], W[p + "post_attention_layernorm.bias"],
                                   eps))
        gu = r("f_gu", h @ W[p + "mlp.fc1.weight"].T)
        x = x + r("f_act", gu[:, s["I"]:] * silu(gu[:, :s["I"]])) @ W[p + "mlp.fc2.weight"].T
    layer[0] = L
    x = r("ln_final", layer_norm(x, W["model.final_layernorm.weight"], W["model.final_layernorm.bias"], eps))
    return x @ W["model.embed_tokens.weight"].T


def mt19937_64(seed):
    """std::mt19937_64's outputs."""
    n, m, mt, i = 312, 156, [seed & (2 ** 64 - 1)], 312
    for k in range(1, n):
        mt.append((6364136223846793005 * (mt[-1] ^ (mt[-1] >> 62)) + k) & (2 ** 64 - 1))
    while True:
        if i >= n:
            for k in range(n):
                v = (mt[k] & 0xFFFFFFFF80000000) | (mt[(k + 1) % n] & 0x7FFFFFFF)
                mt[k] = mt[(k + m) % n] ^ (v >> 1) ^ (0xB5026F5AA96619E9 if v & 1 else 0)
            i = 0
        v, i = mt[i], i + 1
        v ^= (v >> 29) & 0x5555555555555555
        v ^= (v << 17) & 0x71D67FFFEDA60000
        v ^= (v << 37) & 0xFFF7EEE000000000
        yield (v ^ (v >> 43)) & (2 ** 64 - 1)


def nmse(got, want):
    return float(((got - want) ** 2).sum() / (want ** 2).sum())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--random", type=int, default=12, help="random 30-token prompts for the tail statistics")
    args = ap.parse_args()
    with open(os.path.join(FIXTURE, "config.json")) as f:
        s = shape_of(json.load(f))
    W, V = load_weights(), s["V"]
    fixture = [int(t) for t in np.load(os.path.join(FIXTURE, "tokens.npy"))]

    def prompt_of(n):
        g = mt19937_64(7)
        return (fixture + [next(g) % V for _ in range(n)])[:n]
    g11 = mt19937_64(11)
    session = [next(g11) % V for _ in range(30)]
    tests = {"13": prompt_of(13), "41": prompt_of(41), "23": prompt_of(23), "session 30": session}
    rng = np.random.default_rng(3)
    randoms = [[int(t) for t in rng.integers(0, V, 30)] for _ in range(args.random)]
    exact = {n: forward(s, W, t, set()) for n, t in tests.items()}
    exact_random = [forward(s, W, t, set()) for t in randoms]

    def row(label, points, layers=None):
        cells = []
        for n, t in tests.items():
            got, want = forward(s, W, t, points, layers), exact[n]
            worst = max(nmse(got[j:j + 1], want[j:j + 1]) for j in range(len(t)))
            cells.append(f"{nmse(got, want):.1e} {nmse(got[-1:], want[-1:]):.1e} {worst:.1e}")
        rows = []
        for t, want in zip(randoms, exact_random):
            got = forward(s, W, t, points, layers)
            rows += [nmse(got[j:j + 1], want[j:j + 1]) for j in range(len(t))]
        tail = (f" | {np.median(rows):.1e} {np.quantile(rows, 0.99):.1e} {max(rows):.1e} "
                f"{100 * np.mean(np.array(rows) > 5e-6):4.1f}%") if rows else ""
        print(f"{label:34s} " + " | ".join(cells) + tail, flush=True)
    print("nmse of the logits against no rounding. Per test prompt (" + ", ".join(tests) + "): all rows, last row,"
          " worst row;\nover the random prompts' rows: median, 99th percentile, worst, share above 5e-6.")
    everything = set(POINTS)
    row("all", everything)
    for p in POINTS:
        row("only " + p, {p})
    for p in POINTS:
        row("all but " + p, everything - {p})
    for keep in (["m_xz", "f_gu"], ["ln_mamba", "ln_gmu", "ln_attn", "ln_mlp", "ln_final"],
                 ["ln_mamba", "ln_gmu", "ln_attn", "ln_mlp", "ln_final", "m_xz", "f_gu"],
                 [p for p in POINTS if not p.startswith("a_")]):
        row("all but " + ",".join(keep), everything - set(keep))
    for i in range(s["L"] + 1):
        row(f"all, in layer {i} only" if i < s["L"] else "all, in the final norm only", everything, {i})


if __name__ == "__main__":
    main()
