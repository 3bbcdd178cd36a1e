#!/usr/bin/python3
"""Writes a random-weight phi4flash (SambaY) checkpoint for benchmarks, with numpy only: Phi-4-mini-flash's layer
plan (32 layers: Mamba, sliding-window differential attention, the memory layer, the full-attention layer, GMUs and
cross-decoder attention; window 512; Mamba d_state 16, d_conv 4, expand 2) at a width lavapipe's 2 GiB heap holds:
hidden 1024, 16 query heads of 64 over 8 KV heads, intermediate 4096, vocabulary 32064, tied: 568M parameters
(1.14 GB in fp16). The real tensor names and shapes (docs/checkpoints.md); LayerNorm gains 1, everything else
N(0, 0.02²) from a fixed seed, stored F32. The model is for speed (YOCO's saving, decode across contexts), not text.

    tests/python/make_sambay_bench_model.py OUT_DIR [--hidden 1024] [--layers 32] [--vocab 32064]
"""
import argparse
import json
import os
import struct

import numpy as np

ap = argparse.ArgumentParser()
ap.add_argument("out")
ap.add_argument("--hidden", type=int, default=1024)
ap.add_argument("--layers", type=int, default=32)
ap.add_argument("--vocab", type=int, default=32064)
a = ap.parse_args()
E, L, V, D = a.hidden, a.layers, a.vocab, 64
H, KV, I = E // D, E // D // 2, 4 * E
C, S, K, R = 2 * E, 16, 4, (E + 15) // 16
q, kv = H * D, KV * D
os.makedirs(a.out, exist_ok=True)
cfg = {"model_type": "phi4flash", "architectures": ["Phi4FlashForCausalLM"], "vocab_size": V, "hidden_size": E,
       "intermediate_size": I, "num_hidden_layers": L, "num_attention_heads": H, "num_key_value_heads": KV,
       "max_position_embeddings": 8192, "sliding_window": 512, "hidden_act": "silu", "layer_norm_eps": 1e-05,
       "tie_word_embeddings": True, "torch_dtype": "float32", "pad_token_id": 0, "bos_token_id": 1, "eos_token_id": 2}
with open(os.path.join(a.out, "config.json"), "w") as f:
    json.dump(cfg, f, indent=1)
rng = np.random.default_rng(1)
T = {}


def w(name, shape, ones=False):
    T[name] = np.ones(shape, np.float32) if ones else rng.standard_normal(shape, dtype=np.float32) * 0.02


w("model.embed_tokens.weight", (V, E))
w("model.final_layernorm.weight", (E,), True)
w("model.final_layernorm.bias", (E,))
for l in range(L):
    p = f"model.layers.{l}."
    at = p + "attn."
    w(p + "input_layernorm.weight", (E,), True)
    w(p + "input_layernorm.bias", (E,))
    w(p + "post_attention_layernorm.weight", (E,), True)
    w(p + "post_attention_layernorm.bias", (E,))
    w(p + "mlp.fc1.weight", (2 * I, E))
    w(p + "mlp.fc2.weight", (E, I))
    if l % 2 == 0 and l <= L // 2:  # Mamba (layer L/2: the memory layer)
        w(at + "in_proj.weight", (2 * C, E))
        w(at + "conv1d.weight", (C, 1, K))
        w(at + "conv1d.bias", (C,))
        w(at + "x_proj.weight", (R + 2 * S, C))
        w(at + "dt_proj.weight", (C, R))
        w(at + "dt_proj.bias", (C,))
        w(at + "A_log", (C, S))
        w(at + "D", (C,))
        w(at + "out_proj.weight", (E, C))
    elif l % 2 == 0:  # GMU
        w(at + "in_proj.weight", (C, E))
        w(at + "out_proj.weight", (E, C))
    else:  # attention: sliding, full (L/2 + 1), cross (queries only)
        rows = q if l > L // 2 + 1 else q + 2 * kv
        w(at + "Wqkv.weight", (rows, E))
        w(at + "Wqkv.bias", (rows,))
        w(at + "out_proj.weight", (E, q))
        w(at + "out_proj.bias", (E,))
        c = at + "inner_cross_attn."
        for n in ("lambda_q1", "lambda_k1", "lambda_q2", "lambda_k2"):
            w(c + n, (D,))
        w(c + "subln.weight", (2 * D,), True)
header, off = {}, 0
for n in sorted(T):
    header[n] = {"dtype": "F32", "shape": list(T[n].shape), "data_offsets": [off, off + T[n].nbytes]}
    off += T[n].nbytes
h = json.dumps(header).encode()
h += b" " * ((8 - len(h) % 8) % 8)
with open(os.path.join(a.out, "model.safetensors"), "wb") as f:
    f.write(struct.pack("<Q", len(h)))
    f.write(h)
    for n in sorted(T):
        f.write(T[n].tobytes())
print(f"{a.out}: {sum(t.size for t in T.values())} parameters")
