#!/usr/bin/python3
"""Writes the DIFF V2 layer fixtures of diffvk's tests into tests/data/v2_layer/ (checked by
tests/reference/test_v2_reference.cpp against runtime/reference/diff_v2_ref.cpp).

Deterministic (fixed seeds, torch's CPU generator). One folder per case:

  x.npy                                 float32 (S, E)   input at positions pos0 .. pos0+S-1
  q_proj.npy k_proj.npy v_proj.npy      float32          the weights, (out, in) like nn.Linear
  o_proj.npy lambda_proj.npy
  y.npy                                 float64 (S, E)   layer(x), computed in float64 (diffv2.py)
  lambda.npy                            float64 (S, H)   sigmoid(x·lambda_projᵀ)
  a1.npy a2.npy                         float64 (S, S)   softmax maps of query heads 2h, 2h+1, h = map_head

and meta.json: every case's E, H, Hkv, D, S, pos0, rope_theta, map_head. Inputs are float32 so that
they are exact in float64; everything computed is float64.

Usage:  /usr/bin/python3 tests/python/make_v2_fixture.py [--out DIR]
"""

import argparse
import json
import math
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from diffv2 import MultiheadDiffV2  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# name: E, H, Hkv (None = H), D, S, pos0, rope_theta, map_head, lambda logit scale (None = plain init)
CASES = {
    "mha_s7": (32, 2, None, 16, 7, 0, 10000.0, 1, None),       # E == H·D, one pair per KV head
    "s1_pos5": (24, 2, 2, 8, 1, 5, 10000.0, 0, None),          # one token at position 5
    "gqa2_e40": (40, 4, 2, 8, 9, 3, 500000.0, 2, None),        # 2 pairs per KV head, E != H·D
    "gqa4_d6": (20, 4, 1, 6, 7, 0, 10000.0, 3, None),          # 4 pairs per KV head, D = 6
    "saturated": (24, 3, 3, 8, 7, 0, 10000.0, 1, 50.0),        # λ logits around ±50
}


def build(case, seed):
    E, H, Hkv, D, S, pos0, theta, map_head, sat = case
    g = torch.Generator().manual_seed(seed)

    def normal(shape, std):
        return (std * torch.randn(*shape, generator=g, dtype=torch.float64)).float().double()

    m = MultiheadDiffV2(E, H, Hkv, D, theta).double()
    Hkv = m.Hkv
    x = normal((S, E), 1.0)
    sd = {
        "q_proj.weight": normal((2 * H * D, E), 1 / math.sqrt(E)),
        "k_proj.weight": normal((Hkv * D, E), 1 / math.sqrt(E)),
        "v_proj.weight": normal((Hkv * D, E), 1 / math.sqrt(E)),
        "o_proj.weight": normal((E, H * D), 1 / math.sqrt(H * D)),
        "lambda_proj.weight": normal((H, E), 1 / math.sqrt(E)),
    }
    if sat is not None:  # scale so that the mean |logit| is `sat`, then round to float32 again
        logits = x @ sd["lambda_proj.weight"].T
        sd["lambda_proj.weight"] = (sd["lambda_proj.weight"] * (sat / logits.abs().mean())).float().double()
    m.load_state_dict(sd, strict=True)
    return m.eval(), x


def self_checks(m, x, pos0, y):
    """Consistency of the module itself; the C++ reference is the independent check of the maths."""
    with torch.no_grad():
        # A batch row is an independent sequence.
        yb = m(torch.stack((x, x.flip(0))), pos0)
        assert torch.equal(yb[0], y) or (yb[0] - y).abs().max() < 1e-13
        # RoPE is relative: shifting every position changes only rounding.
        assert (m(x, pos0 + 11) - y).abs().max() < 1e-10 * max(1.0, float(y.abs().max()))
        # The first row sees only key 0: its head i is (1 − λ_i)·v_g(0).
        p = m.probs(x, pos0)
        assert torch.allclose(p[..., 0, 0], torch.ones(2 * m.H, dtype=torch.float64))
        assert torch.allclose(p.sum(-1), torch.ones_like(p.sum(-1)))


def save(path, t, dtype):
    np.save(path, np.ascontiguousarray(t.detach().numpy().astype(dtype)))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=os.path.join(REPO, "tests", "data", "v2_layer"))
    ap.add_argument("--seed", type=int, default=20260122)
    args = ap.parse_args()
    meta = {"generator": "tests/python/make_v2_fixture.py", "cases": {}}
    total = 0
    for n, (name, case) in enumerate(CASES.items()):
        m, x = build(case, args.seed + n)
        E, H, _, D, S, pos0, theta, map_head, sat = case
        with torch.no_grad():
            y = m(x, pos0)
            lam = m.lambdas(x)
            p = m.probs(x, pos0)
        self_checks(m, x, pos0, y)
        d = os.path.join(args.out, name)
        os.makedirs(d, exist_ok=True)
        save(os.path.join(d, "x.npy"), x, "<f4")
        for key in ("q_proj", "k_proj", "v_proj", "o_proj", "lambda_proj"):
            save(os.path.join(d, key + ".npy"), getattr(m, key).weight, "<f4")
        save(os.path.join(d, "y.npy"), y, "<f8")
        save(os.path.join(d, "lambda.npy"), lam, "<f8")
        save(os.path.join(d, "a1.npy"), p[2 * map_head], "<f8")
        save(os.path.join(d, "a2.npy"), p[2 * map_head + 1], "<f8")
        meta["cases"][name] = {"E": E, "H": H, "Hkv": m.Hkv, "D": D, "S": S, "pos0": pos0,
                               "rope_theta": theta, "map_head": map_head}
        size = sum(os.path.getsize(os.path.join(d, f)) for f in os.listdir(d))
        total += size
        z = x @ m.lambda_proj.weight.T
        print(f"{name}: E={E} H={H} Hkv={m.Hkv} D={D} S={S} pos0={pos0} theta={theta} "
              f"max|y|={float(y.abs().max()):.4f} lambda logits in [{float(z.min()):.1f}, {float(z.max()):.1f}] "
              f"{size} bytes")
    with open(os.path.join(args.out, "meta.json"), "w") as f:
        json.dump(meta, f, indent=2)
        f.write("\n")
    print(f"wrote {args.out}: {len(CASES)} cases, {total} bytes of .npy")


if __name__ == "__main__":
    main()
