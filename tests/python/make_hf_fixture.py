#!/usr/bin/python3
"""Writes tiny random Hugging Face DiffLlama checkpoints and their reference logits.

The reference (hf_forward below) is written from the semantics of transformers'
models/diffllama/modeling_diffllama.py (DiffLlamaAttention, eager path), in
float64, independently of the runtime's conversion (runtime/model/hf_loader.cpp):
  - num_attention_heads counts sub-heads; q/k/v are viewed as (heads, head_dim);
  - NeoX RoPE: x*cos + rotate_half(x)*sin, cos/sin of cat(freqs, freqs);
    inv_freq = theta^(-2i/D), optionally llama3-scaled (rope_scaling);
  - repeat_kv by n_rep = num_attention_heads / num_key_value_heads;
  - V = cat(chunk(v, 2, heads), -1), repeated twice over the heads;
  - out = chunk(A·V, 2, heads): o1 - lambda*o2, lambda = exp(q1·k1) - exp(q2·k2)
    + 0.8 - 0.6*exp(-0.3*layer);
  - weightless RMSNorm over 2*head_dim with rms_norm_eps, times (1 - lambda_init);
  - Llama blocks: input_layernorm, post_attention_layernorm, SwiGLU MLP, final norm.

Each fixture directory tests/data/hf_<name>/ holds config.json, the weights
(model.safetensors, or model-0000k-of-0000n.safetensors + model.safetensors.index.json),
tokens.npy (int64, N), logits.npy (float32, N x vocab: every position, full causal
forward from position 0) and meta.json (prompt_len, description).

Usage:  /usr/bin/python3 tests/python/make_hf_fixture.py [--out DIR]   (default tests/data)
"""

import argparse
import json
import math
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from diffattn import save_safetensors  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

CONFIGS = {
    # MHA (num_key_value_heads == num_attention_heads), untied, no rope scaling, F32, one file.
    "mha": dict(desc="MHA untied F32 single file", heads=4, kv=4, tied=False, dtype=torch.float32, shards=1,
                rope=dict(rope_theta=10000.0, rope_scaling=None)),
    # GQA (2 kv sub-heads -> one runtime group), tied, llama3 scaling, BF16, two shards.
    "gqa_llama3": dict(desc="GQA tied llama3 BF16 two shards", heads=4, kv=2, tied=True, dtype=torch.bfloat16, shards=2,
                       rope=dict(rope_theta=100.0, rope_scaling=dict(rope_type="llama3", factor=8.0, low_freq_factor=1.0,
                                                                      high_freq_factor=4.0, original_max_position_embeddings=16))),
    # Odd kv count (3 kv sub-heads for 6 sub-heads: every head its own K pair), F16, rope_parameters.
    "kv3_f16": dict(desc="odd kv heads F16 rope_parameters", heads=6, kv=3, tied=False, dtype=torch.float16, shards=1,
                    rope=dict(rope_parameters=dict(rope_type="default", rope_theta=500.0))),
    # With a real tokenizer (the Llama-3 style byte-level BPE of tests/data/tokenizer/llama3-bpe, 660 ids),
    # so that `diffvk run --prompt` works on a Hugging Face directory. GQA, untied, F16, one file.
    "tok": dict(desc="GQA untied F16 with a Llama-3 style tokenizer.json", heads=4, kv=2, tied=False, dtype=torch.float16,
                shards=1, vocab=660, bos=656, eos=657, tokenizer="llama3-bpe",
                rope=dict(rope_theta=10000.0, rope_scaling=None)),
}
HIDDEN_PER_HEAD = 8   # head_dim
LAYERS, INTER, VOCAB, MAX_POS = 2, 40, 80, 32
N_TOKENS, PROMPT_LEN = 12, 5
EPS = 1e-5


def config_json(spec):
    c = dict(model_type="diffllama", architectures=["DiffLlamaForCausalLM"], vocab_size=spec.get("vocab", VOCAB),
             hidden_size=spec["heads"] * HIDDEN_PER_HEAD, intermediate_size=INTER, num_hidden_layers=LAYERS,
             num_attention_heads=spec["heads"], num_key_value_heads=spec["kv"], hidden_act="silu",
             max_position_embeddings=MAX_POS, rms_norm_eps=EPS, tie_word_embeddings=spec["tied"],
             attention_bias=False, bos_token_id=spec.get("bos", 1), eos_token_id=spec.get("eos", 2), torch_dtype=str(spec["dtype"]).split(".")[1])
    c.update(spec["rope"])
    return c


def inv_freq_of(c):
    D = c["hidden_size"] // c["num_attention_heads"]
    rp = c.get("rope_parameters") or {}
    theta = rp.get("rope_theta", c.get("rope_theta", 10000.0))
    rs = c.get("rope_parameters") or c.get("rope_scaling") or {}
    f = theta ** (-torch.arange(0, D, 2, dtype=torch.float64) / D)
    if rs.get("rope_type", rs.get("type", "default")) == "llama3":
        factor, lo, hi = rs["factor"], rs["low_freq_factor"], rs["high_freq_factor"]
        orig = rs["original_max_position_embeddings"]
        wavelen = 2 * math.pi / f
        scaled = torch.where(wavelen > orig / lo, f / factor, f)
        smooth = (orig / wavelen - lo) / (hi - lo)
        smoothed = (1 - smooth) * scaled / factor + smooth * scaled
        medium = ~(wavelen < orig / hi) & ~(wavelen > orig / lo)
        f = torch.where(medium, smoothed, scaled)
    return f


def rms(x, w, eps):
    y = x / torch.sqrt((x * x).mean(-1, keepdim=True) + eps)
    return y * w if w is not None else y


def rotate_half(x):
    h = x.shape[-1] // 2
    return torch.cat((-x[..., h:], x[..., :h]), dim=-1)


def hf_forward(c, W, tokens):
    """Logits (T, vocab) in float64 of the whole sequence, causal, from position 0."""
    E, nah, kv = c["hidden_size"], c["num_attention_heads"], c["num_key_value_heads"]
    D, eps, T = E // nah, c["rms_norm_eps"], len(tokens)
    f = inv_freq_of(c)
    freqs = torch.arange(T, dtype=torch.float64)[:, None] * f[None, :]
    emb = torch.cat((freqs, freqs), dim=-1)
    cos, sin = emb.cos(), emb.sin()
    mask = torch.full((T, T), float("-inf"), dtype=torch.float64).triu(1)
    x = W["model.embed_tokens.weight"][torch.tensor(tokens)]
    for l in range(c["num_hidden_layers"]):
        p = f"model.layers.{l}."
        a = p + "self_attn."
        h = rms(x, W[p + "input_layernorm.weight"], eps)
        q = (h @ W[a + "q_proj.weight"].T).view(T, nah, D).transpose(0, 1)
        k = (h @ W[a + "k_proj.weight"].T).view(T, kv, D).transpose(0, 1)
        v = (h @ W[a + "v_proj.weight"].T).view(T, kv, D).transpose(0, 1)
        q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
        n_rep = nah // kv
        k, v = k.repeat_interleave(n_rep, 0), v.repeat_interleave(n_rep, 0)
        v = torch.cat(torch.chunk(v, 2, dim=0), dim=-1).repeat(2, 1, 1)
        att = torch.softmax(q @ k.transpose(1, 2) / math.sqrt(D) + mask, dim=-1)
        lam_init = 0.8 - 0.6 * math.exp(-0.3 * l)
        lam = (torch.exp((W[a + "lambda_q1"] * W[a + "lambda_k1"]).sum()) -
               torch.exp((W[a + "lambda_q2"] * W[a + "lambda_k2"]).sum()) + lam_init)
        o1, o2 = torch.chunk(att @ v, 2, dim=0)
        o = (1 - lam_init) * rms(o1 - lam * o2, None, eps)
        x = x + o.transpose(0, 1).reshape(T, -1) @ W[a + "o_proj.weight"].T
        h = rms(x, W[p + "post_attention_layernorm.weight"], eps)
        m = p + "mlp."
        g = h @ W[m + "gate_proj.weight"].T
        x = x + (torch.nn.functional.silu(g) * (h @ W[m + "up_proj.weight"].T)) @ W[m + "down_proj.weight"].T
    x = rms(x, W["model.norm.weight"], eps)
    out = W["model.embed_tokens.weight"] if c["tie_word_embeddings"] else W["lm_head.weight"]
    return x @ out.T


def random_weights(c, gen):
    E, nah, kv, I, V = (c["hidden_size"], c["num_attention_heads"], c["num_key_value_heads"],
                        c["intermediate_size"], c["vocab_size"])
    D = E // nah

    def rnd(*shape, std):
        return torch.randn(*shape, generator=gen, dtype=torch.float64) * std

    W = {"model.embed_tokens.weight": rnd(V, E, std=1.0), "model.norm.weight": 1 + rnd(E, std=0.1)}
    if not c["tie_word_embeddings"]:
        W["lm_head.weight"] = rnd(V, E, std=E ** -0.5)
    for l in range(c["num_hidden_layers"]):
        p = f"model.layers.{l}."
        a = p + "self_attn."
        W[p + "input_layernorm.weight"] = 1 + rnd(E, std=0.1)
        W[p + "post_attention_layernorm.weight"] = 1 + rnd(E, std=0.1)
        W[a + "q_proj.weight"] = rnd(nah * D, E, std=E ** -0.5 * 2)
        W[a + "k_proj.weight"] = rnd(kv * D, E, std=E ** -0.5 * 2)
        W[a + "v_proj.weight"] = rnd(kv * D, E, std=E ** -0.5)
        W[a + "o_proj.weight"] = rnd(E, nah * D, std=(nah * D) ** -0.5)
        for n in ("lambda_q1", "lambda_k1", "lambda_q2", "lambda_k2"):
            W[a + n] = rnd(D, std=0.3)
        W[p + "mlp.gate_proj.weight"] = rnd(I, E, std=E ** -0.5)
        W[p + "mlp.up_proj.weight"] = rnd(I, E, std=E ** -0.5)
        W[p + "mlp.down_proj.weight"] = rnd(E, I, std=I ** -0.5)
    return W


def write_fixture(name, spec, out_dir, seed):
    c = config_json(spec)
    gen = torch.Generator().manual_seed(seed)
    W = random_weights(c, gen)
    # The checkpoint holds the weights in spec["dtype"]; the reference uses exactly those values.
    stored = {k: v.to(spec["dtype"]) for k, v in W.items()}
    W = {k: v.to(torch.float64) for k, v in stored.items()}
    tokens = torch.randint(3, c["vocab_size"], (N_TOKENS,), generator=gen).tolist()
    logits = hf_forward(c, W, tokens)
    # Self-check: causality (a prefix's logits are the first rows of the longer sequence).
    assert torch.allclose(hf_forward(c, W, tokens[:PROMPT_LEN]), logits[:PROMPT_LEN], atol=1e-12)
    d = os.path.join(out_dir, "hf_" + name)
    os.makedirs(d, exist_ok=True)
    for f in os.listdir(d):
        os.remove(os.path.join(d, f))
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(c, f, indent=2)
    names = sorted(stored)
    if spec["shards"] == 1:
        save_safetensors(os.path.join(d, "model.safetensors"), stored, {"format": "pt"})
    else:
        n = spec["shards"]
        weight_map = {}
        for s in range(n):
            fname = f"model-{s + 1:05d}-of-{n:05d}.safetensors"
            part = {k: stored[k] for k in names[s::n]}
            save_safetensors(os.path.join(d, fname), part, {"format": "pt"})
            weight_map.update({k: fname for k in part})
        with open(os.path.join(d, "model.safetensors.index.json"), "w") as f:
            json.dump({"metadata": {"total_size": 0}, "weight_map": weight_map}, f, indent=1)
    if spec.get("tokenizer"):
        src = os.path.join(REPO, "tests", "data", "tokenizer", spec["tokenizer"])
        for f in ("tokenizer.json", "tokenizer_config.json"):
            with open(os.path.join(src, f), "rb") as i, open(os.path.join(d, f), "wb") as o:
                o.write(i.read())
    np.save(os.path.join(d, "tokens.npy"), np.array(tokens, dtype=np.int64))
    np.save(os.path.join(d, "logits.npy"), logits.numpy().astype(np.float32))
    lam = []
    for l in range(LAYERS):
        a = f"model.layers.{l}.self_attn."
        lam.append(float(torch.exp((W[a + "lambda_q1"] * W[a + "lambda_k1"]).sum()) -
                         torch.exp((W[a + "lambda_q2"] * W[a + "lambda_k2"]).sum()) + 0.8 - 0.6 * math.exp(-0.3 * l)))
    with open(os.path.join(d, "meta.json"), "w") as f:
        json.dump({"description": spec["desc"], "prompt_len": PROMPT_LEN, "seed": seed, "lambda": lam,
                   "generator": "tests/python/make_hf_fixture.py"}, f, indent=1)
    print(f"{d}: {spec['desc']}, lambda {['%.3f' % x for x in lam]}, max|logit| {logits.abs().max():.3f}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(REPO, "tests", "data"))
    args = ap.parse_args()
    for i, (name, spec) in enumerate(CONFIGS.items()):
        write_fixture(name, spec, args.out, 1000 + i)


if __name__ == "__main__":
    main()
