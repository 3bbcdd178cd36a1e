#!/usr/bin/python3
"""Writes a random-weight checkpoint for benchmarks, in diffvk's native format (config.json +
model.safetensors, the names of diffmodel.py's docstring), with numpy only (no torch needed).

The default is the model the issues' side-by-side figures use: hidden 768, 12 layers, 12 heads
(D = 32), vocabulary 32000, intermediate 2048, untied lm_head: 134M parameters, 268 MB in F16.
Linear weights ~ N(0, 0.02²), embeddings ~ N(0, 1), norm gains 1, λ vectors ~ N(0, 0.1²), from a
fixed seed. The model is for speed (and quantization error), not for text.

    tests/python/make_bench_model.py OUT_DIR [--hidden 768] [--layers 12] [--heads 12]
        [--kv-heads 12] [--vocab 32000] [--intermediate 2048] [--dtype f16|f32]
"""
import argparse
import json
import os
import struct

import numpy as np


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--hidden", type=int, default=768)
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--heads", type=int, default=12)
    ap.add_argument("--kv-heads", type=int, default=12)
    ap.add_argument("--vocab", type=int, default=32000)
    ap.add_argument("--intermediate", type=int, default=2048)
    ap.add_argument("--max-positions", type=int, default=2048)
    ap.add_argument("--dtype", choices=["f16", "f32"], default="f16")
    a = ap.parse_args()
    E, H, Hkv, I, V = a.hidden, a.heads, a.kv_heads, a.intermediate, a.vocab
    if E % (2 * H) or H % Hkv:
        raise SystemExit("hidden must be a multiple of 2*heads and heads a multiple of kv-heads")
    D = E // H // 2
    rng = np.random.default_rng(0)
    dt, st = (np.float16, "F16") if a.dtype == "f16" else (np.float32, "F32")

    shapes = [("embed_tokens.weight", (V, E), 1.0)]
    for i in range(a.layers):
        p = "layers.%d." % i
        shapes += [(p + "attn_norm.weight", (E,), None), (p + "attn.q_proj.weight", (E, E), 0.02),
                   (p + "attn.k_proj.weight", (2 * Hkv * D, E), 0.02), (p + "attn.v_proj.weight", (Hkv * 2 * D, E), 0.02),
                   (p + "attn.out_proj.weight", (E, E), 0.02)]
        shapes += [(p + "attn.lambda_%s" % n, (D,), 0.1) for n in ("q1", "k1", "q2", "k2")]
        shapes += [(p + "attn.subln.weight", (2 * D,), None), (p + "ffn_norm.weight", (E,), None),
                   (p + "ffn.gate_proj.weight", (I, E), 0.02), (p + "ffn.up_proj.weight", (I, E), 0.02),
                   (p + "ffn.down_proj.weight", (E, I), 0.02)]
    shapes += [("norm.weight", (E,), None), ("lm_head.weight", (V, E), 0.02)]

    os.makedirs(a.out, exist_ok=True)
    cfg = {"vocab_size": V, "hidden_size": E, "num_layers": a.layers, "num_heads": H, "num_kv_heads": Hkv,
           "intermediate_size": I, "rope_theta": 10000.0, "rms_norm_eps": 1e-5,
           "max_position_embeddings": a.max_positions, "tie_word_embeddings": False, "bos_token_id": 1,
           "eos_token_id": 2, "tokenizer": "bytes"}
    with open(os.path.join(a.out, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
        f.write("\n")

    header, off = {"__metadata__": {"format": "pt", "generator": "tests/python/make_bench_model.py"}}, 0
    esz = np.dtype(dt).itemsize
    for name, shape, _ in shapes:
        n = int(np.prod(shape)) * esz
        header[name] = {"dtype": st, "shape": list(shape), "data_offsets": [off, off + n]}
        off += n
    hj = json.dumps(header).encode()
    hj += b" " * (-len(hj) % 8)
    params = 0
    with open(os.path.join(a.out, "model.safetensors"), "wb") as f:
        f.write(struct.pack("<Q", len(hj)))
        f.write(hj)
        for name, shape, scale in shapes:
            t = np.ones(shape, np.float32) if scale is None else rng.standard_normal(shape, np.float32) * scale
            f.write(t.astype(dt).tobytes())
            params += t.size
    print("%s: %.1fM parameters, %s" % (a.out, params / 1e6, a.dtype))


if __name__ == "__main__":
    main()
