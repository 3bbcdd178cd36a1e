#!/usr/bin/python3
"""Writes the single-layer fixture of diffvk's tests into tests/data/layer_fixture/.

Deterministic (fixed seed, torch's CPU generator). Files:

  layer.safetensors      the 9 tensors of one MultiheadDiffAttn layer, F32
  layer_f16.safetensors  the same tensors rounded to F16
  x.npy                  float32 (S, E)     input at positions 0 .. S-1
  x_batched.npy          float32 (B, S, E)  B independent sequences
  y.npy                  float32 (S, E)     layer(x) with the F32 weights, computed in float64
  y_batched.npy          float32 (B, S, E)  layer(x_batched), same weights
  y_f16w.npy             float32 (S, E)     layer(x) with the F16-rounded weights, in float64
  meta.json              shape, depth, rope_theta, λ values, file list

Usage:  /usr/bin/python3 tests/python/make_layer_fixture.py [--out DIR]
"""

import argparse
import json
import math
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from diffattn import MultiheadDiffAttn, load_safetensors, save_safetensors  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# Small but non-trivial: GQA with 2 groups of 2 heads (so "group = h // n_rep"
# differs from "h % Hkv"), an odd sequence length, depth > 0. E = 64 keeps all
# files together near 140 KB.
DEFAULTS = dict(E=64, H=4, Hkv=2, depth=3, S=37, B=2, rope_theta=10000.0, seed=20241007)


def make_params(E, H, Hkv, seed):
    """The 9 tensors, float32. Projections ~ normal(0, 1/sqrt(in)); λ vectors
    ~ normal(0, 0.3) (wider than the reference init so that λ is visibly not
    λ_init); subln ~ 1 + normal(0, 0.2)."""
    D = E // H // 2
    g = torch.Generator().manual_seed(seed)

    def normal(shape, std, mean=0.0):
        return (mean + std * torch.randn(*shape, generator=g, dtype=torch.float64)).float()

    return {
        "q_proj.weight": normal((2 * H * D, E), 1 / math.sqrt(E)),
        "k_proj.weight": normal((2 * Hkv * D, E), 1 / math.sqrt(E)),
        "v_proj.weight": normal((Hkv * 2 * D, E), 1 / math.sqrt(E)),
        "out_proj.weight": normal((E, H * 2 * D), 1 / math.sqrt(H * 2 * D)),
        "lambda_q1": normal((D,), 0.3),
        "lambda_k1": normal((D,), 0.3),
        "lambda_q2": normal((D,), 0.3),
        "lambda_k2": normal((D,), 0.3),
        "subln.weight": normal((2 * D,), 0.2, mean=1.0),
    }


def module_from(params, cfg, dtype=torch.float64):
    m = MultiheadDiffAttn(cfg["E"], cfg["depth"], cfg["H"], cfg["Hkv"], cfg["rope_theta"])
    m.load_state_dict({k: v.to(torch.float64) for k, v in params.items()}, strict=True)
    return m.to(dtype).eval()


def max_abs(a, b):
    return float((a - b).abs().max())


def self_checks(m64, params, cfg, x, y):
    """Consistency checks of the module itself (the C++ reference test is the
    independent check of the maths)."""
    S = cfg["S"]
    with torch.no_grad():
        # Prefill 20 tokens, then decode the rest one at a time with the KV cache.
        xb = x.to(torch.float64).unsqueeze(0)
        y0, kv = m64(xb[:, :20], return_kv=True)
        rows = [y0[0]]
        for t in range(20, S):
            yt, kv = m64(xb[:, t:t + 1], past_kv=kv, return_kv=True)
            rows.append(yt[0])
        err = max_abs(torch.cat(rows), y.to(torch.float64))
        assert err < 1e-6, f"prefill+decode differs from one prefill by {err}"  # y is float32
        # A float32 run stays within docs/maths.md's float32 tolerance.
        m32 = module_from(params, cfg, torch.float32)
        err = max_abs(m32(x).to(torch.float64), y.to(torch.float64))
        assert err < 1e-4 * max(1.0, float(y.abs().max())), f"float32 run off by {err}"


def write_npy(path, t):
    np.save(path, np.ascontiguousarray(t.detach().numpy().astype("<f4")))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=os.path.join(REPO, "tests", "data", "layer_fixture"))
    for key, val in DEFAULTS.items():
        ap.add_argument("--" + key, type=type(val), default=val)
    cfg = vars(ap.parse_args())
    out = cfg.pop("out")
    os.makedirs(out, exist_ok=True)
    E, H, Hkv, S, B = cfg["E"], cfg["H"], cfg["Hkv"], cfg["S"], cfg["B"]
    D = E // H // 2

    params = make_params(E, H, Hkv, cfg["seed"])
    params_f16 = {k: v.half() for k, v in params.items()}
    g = torch.Generator().manual_seed(cfg["seed"] + 1)
    x = torch.randn(S, E, generator=g, dtype=torch.float64).float()
    x_batched = torch.randn(B, S, E, generator=g, dtype=torch.float64).float()

    m64 = module_from(params, cfg)
    m64_f16w = module_from(params_f16, cfg)
    with torch.no_grad():
        y = m64(x.to(torch.float64)).float()
        y_batched = m64(x_batched.to(torch.float64)).float()
        y_f16w = m64_f16w(x.to(torch.float64)).float()
        lam = float(m64.lambda_full())
        lam_f16w = float(m64_f16w.lambda_full())
        for b in range(B):  # batch rows are independent sequences
            err = max_abs(m64(x_batched[b].to(torch.float64)).float(), y_batched[b])
            assert err == 0.0 or err < 1e-6, f"batch row {b} differs by {err}"
    self_checks(m64, params, cfg, x, y)

    meta = {
        "E": E, "H": H, "Hkv": Hkv, "D": D, "depth": cfg["depth"],
        "rope_theta": cfg["rope_theta"], "eps": 1e-5, "S": S, "B": B, "seed": cfg["seed"],
        "lambda_init": m64.lambda_init, "lambda": lam, "lambda_f16w": lam_f16w,
        "files": {
            "layer.safetensors": "9 tensors, F32",
            "layer_f16.safetensors": "the same tensors rounded to F16",
            "x.npy": f"float32 ({S}, {E}), positions 0..{S - 1}",
            "x_batched.npy": f"float32 ({B}, {S}, {E}), independent sequences",
            "y.npy": "float32, layer(x) with layer.safetensors, computed in float64",
            "y_batched.npy": "float32, layer(x_batched) with layer.safetensors, computed in float64",
            "y_f16w.npy": "float32, layer(x) with layer_f16.safetensors, computed in float64",
        },
        "generator": "tests/python/make_layer_fixture.py",
    }
    st_meta = {"format": "pt", "E": E, "H": H, "Hkv": Hkv, "depth": cfg["depth"],
               "rope_theta": cfg["rope_theta"]}
    save_safetensors(os.path.join(out, "layer.safetensors"), params, st_meta)
    save_safetensors(os.path.join(out, "layer_f16.safetensors"), params_f16, st_meta)
    write_npy(os.path.join(out, "x.npy"), x)
    write_npy(os.path.join(out, "x_batched.npy"), x_batched)
    write_npy(os.path.join(out, "y.npy"), y)
    write_npy(os.path.join(out, "y_batched.npy"), y_batched)
    write_npy(os.path.join(out, "y_f16w.npy"), y_f16w)
    with open(os.path.join(out, "meta.json"), "w") as f:
        json.dump(meta, f, indent=2)
        f.write("\n")

    # Read everything back.
    for fname, ref in (("layer.safetensors", params), ("layer_f16.safetensors", params_f16)):
        got, _ = load_safetensors(os.path.join(out, fname))
        assert sorted(got) == sorted(ref), fname
        for k in ref:
            assert got[k].dtype == ref[k].dtype and torch.equal(got[k], ref[k]), (fname, k)
    assert np.array_equal(np.load(os.path.join(out, "y.npy")), y.numpy())

    total = sum(os.path.getsize(os.path.join(out, f)) for f in os.listdir(out))
    print(f"wrote {out}: E={E} H={H} Hkv={Hkv} D={D} depth={cfg['depth']} S={S} B={B} "
          f"lambda_init={m64.lambda_init:.6f} lambda={lam:.6f} lambda_f16w={lam_f16w:.6f} "
          f"max|y|={float(y.abs().max()):.4f} max|y_f16w-y|={max_abs(y_f16w, y):.2e} "
          f"total {total} bytes")


if __name__ == "__main__":
    main()
