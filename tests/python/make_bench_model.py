#!/usr/bin/python3
"""Writes a random-weight checkpoint for benchmarks, in diffvk's native format (config.json +
model.safetensors, the names of diffmodel.py's docstring), with numpy only (no torch needed).

The default is the model the issues' side-by-side figures use: hidden 768, 12 layers, 12 heads
(D = 32), vocabulary 32000, intermediate 2048, untied lm_head: 134M parameters, 268 MB in F16.
Linear weights ~ N(0, 0.02²), embeddings ~ N(0, 1), norm gains 1, λ vectors ~ N(0, 0.1²), from a
fixed seed. The model is for speed (and quantization error), not for text.

    tests/python/make_bench_model.py OUT_DIR [--hidden 768] [--layers 12] [--heads 12]
        [--kv-heads 12] [--vocab 32000] [--intermediate 2048] [--dtype f16|f32]
        [--diff-version 2 --head-dim D]

--diff-version 2 writes a DIFF V2 model instead (docs/maths.md "DIFF V2 models": Llama names outside
attention, q_proj (2H*D, E), k/v_proj (Hkv*D, E), lambda_proj (H, E) ~ N(0, 0.02²), o_proj (E, H*D)); e.g.
--heads 12 --head-dim 64: 24 query heads over 12 KV heads of 64, the V1 default's q/o sizes and half its KV cache.
"""
import argparse
import json
import os
import struct

import numpy as np


def v1_shapes(layers, E, Hkv, D, I, V):
    """(name, shape, scale) of a DIFF V1 checkpoint in diffvk's native names; scale None = ones (a norm gain)."""
    shapes = [("embed_tokens.weight", (V, E), 1.0)]
    for i in range(layers):
        p = "layers.%d." % i
        shapes += [(p + "attn_norm.weight", (E,), None), (p + "attn.q_proj.weight", (E, E), 0.02),
                   (p + "attn.k_proj.weight", (2 * Hkv * D, E), 0.02), (p + "attn.v_proj.weight", (Hkv * 2 * D, E), 0.02),
                   (p + "attn.out_proj.weight", (E, E), 0.02)]
        shapes += [(p + "attn.lambda_%s" % n, (D,), 0.1) for n in ("q1", "k1", "q2", "k2")]
        shapes += [(p + "attn.subln.weight", (2 * D,), None), (p + "ffn_norm.weight", (E,), None),
                   (p + "ffn.gate_proj.weight", (I, E), 0.02), (p + "ffn.up_proj.weight", (I, E), 0.02),
                   (p + "ffn.down_proj.weight", (E, I), 0.02)]
    return shapes + [("norm.weight", (E,), None), ("lm_head.weight", (V, E), 0.02)]


def v2_shapes(layers, E, H, Hkv, D, I, V):
    """The same for a DIFF V2 checkpoint (Llama names outside attention, the authors' inside self_attn)."""
    shapes = [("model.embed_tokens.weight", (V, E), 1.0)]
    for i in range(layers):
        p = "model.layers.%d." % i
        shapes += [(p + "input_layernorm.weight", (E,), None), (p + "self_attn.q_proj.weight", (2 * H * D, E), 0.02),
                   (p + "self_attn.k_proj.weight", (Hkv * D, E), 0.02), (p + "self_attn.v_proj.weight", (Hkv * D, E), 0.02),
                   (p + "self_attn.lambda_proj.weight", (H, E), 0.02), (p + "self_attn.o_proj.weight", (E, H * D), 0.02),
                   (p + "post_attention_layernorm.weight", (E,), None), (p + "mlp.gate_proj.weight", (I, E), 0.02),
                   (p + "mlp.up_proj.weight", (I, E), 0.02), (p + "mlp.down_proj.weight", (E, I), 0.02)]
    return shapes + [("model.norm.weight", (E,), None), ("lm_head.weight", (V, E), 0.02)]


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
    ap.add_argument("--diff-version", type=int, choices=[1, 2], default=1)
    ap.add_argument("--head-dim", type=int, default=0, help="D (DIFF V2 only; required there)")
    a = ap.parse_args()
    E, H, Hkv, I, V = a.hidden, a.heads, a.kv_heads, a.intermediate, a.vocab
    v2 = a.diff_version == 2
    if H % Hkv or (not v2 and E % (2 * H)) or (v2 and (a.head_dim <= 0 or a.head_dim % 2)):
        raise SystemExit("heads must be a multiple of kv-heads; V1: hidden a multiple of 2*heads; V2: an even --head-dim")
    D = a.head_dim if v2 else E // H // 2
    rng = np.random.default_rng(0)
    dt, st = (np.float16, "F16") if a.dtype == "f16" else (np.float32, "F32")

    shapes = v2_shapes(a.layers, E, H, Hkv, D, I, V) if v2 else v1_shapes(a.layers, E, Hkv, D, I, V)

    os.makedirs(a.out, exist_ok=True)
    cfg = {"vocab_size": V, "hidden_size": E, "num_layers": a.layers, "num_heads": H, "num_kv_heads": Hkv,
           "intermediate_size": I, "rope_theta": 10000.0, "rms_norm_eps": 1e-5,
           "max_position_embeddings": a.max_positions, "tie_word_embeddings": False, "bos_token_id": 1,
           "eos_token_id": 2, "tokenizer": "bytes"}
    if v2:
        cfg.update({"diff_version": 2, "head_dim": D})
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
