"""DIFF V2 attention (the authors' MultiheadFlashDiffV2, microsoft/unilm Diff-Transformer-V2) as
diffvk's docs/maths.md ("DIFF V2") describes it, in plain PyTorch: no flash-attn, no fused rotary
kernel. Written from the maths, for float64 fixtures (tests/python/make_v2_fixture.py).

    q = x·Wqᵀ -> 2H query heads of width D;  k = x·Wkᵀ, v = x·Wvᵀ -> Hkv heads of width D
    interleaved (GPT-J) RoPE on q and k (diffattn.rope_interleaved), positions pos0, pos0+1, ...
    O_j = softmax(q_j·k_gᵀ/√D, causal)·v_g,  g = j // (2H/Hkv)   (what flash_attn_func does for GQA)
    λ = sigmoid(x·Wλᵀ)              one value per token and output head, no λ_init
    head_i = O_2i − λ_i·O_2i+1      no RMSNorm, no (1 − λ_init) gain
    y = concat_i(head_i)·Woᵀ

State-dict names are the authors': q_proj.weight, k_proj.weight, v_proj.weight, o_proj.weight,
lambda_proj.weight.
"""

import os
import sys

import torch
from torch import nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from diffattn import rope_interleaved  # noqa: E402

__all__ = ["MultiheadDiffV2"]


class MultiheadDiffV2(nn.Module):
    """d_model = E, num_heads = H (output heads; 2H query heads), num_kv_heads = Hkv (None -> H),
    head_dim = D (free: E need not equal H·D)."""

    def __init__(self, d_model, num_heads, num_kv_heads, head_dim, rope_theta=10000.0):
        super().__init__()
        H, D = num_heads, head_dim
        Hkv = H if num_kv_heads is None else num_kv_heads
        if min(d_model, H, Hkv, D) <= 0 or D % 2 or (2 * H) % Hkv or H % Hkv:
            raise ValueError(f"bad DIFF V2 shape E={d_model} H={H} Hkv={Hkv} D={D}")
        self.E, self.H, self.Hkv, self.D = d_model, H, Hkv, D
        self.rope_theta = float(rope_theta)
        self.q_proj = nn.Linear(d_model, 2 * H * D, bias=False)
        self.k_proj = nn.Linear(d_model, Hkv * D, bias=False)
        self.v_proj = nn.Linear(d_model, Hkv * D, bias=False)
        self.o_proj = nn.Linear(H * D, d_model, bias=False)
        self.lambda_proj = nn.Linear(d_model, H, bias=False)

    def lambdas(self, x):
        """λ = sigmoid(x·Wλᵀ): (..., S, H)."""
        return torch.sigmoid(self.lambda_proj(x))

    def probs(self, x, pos0=0):
        """Causal softmax maps of the 2H query heads: (..., 2H, S, S)."""
        S = x.shape[-2]
        pos = torch.arange(pos0, pos0 + S)
        q = rope_interleaved(self.q_proj(x).unflatten(-1, (2 * self.H, self.D)), pos, self.rope_theta)
        k = rope_interleaved(self.k_proj(x).unflatten(-1, (self.Hkv, self.D)), pos, self.rope_theta)
        k = k.repeat_interleave(2 * self.H // self.Hkv, dim=-2)  # query head j reads KV head j // group
        scores = torch.einsum("...ijd,...tjd->...jit", q, k) / self.D ** 0.5
        causal = torch.ones(S, S, dtype=torch.bool).tril()
        return torch.softmax(scores.masked_fill(~causal, float("-inf")), dim=-1)

    def forward(self, x, pos0=0):
        """x: (..., S, E) at positions pos0 .. pos0+S-1 -> (..., S, E)."""
        v = self.v_proj(x).unflatten(-1, (self.Hkv, self.D))
        v = v.repeat_interleave(2 * self.H // self.Hkv, dim=-2)
        o = torch.einsum("...jit,...tjd->...ijd", self.probs(x, pos0), v)  # (..., S, 2H, D)
        lam = self.lambdas(x).unsqueeze(-1)  # (..., S, H, 1)
        heads = o[..., 0::2, :] - lam * o[..., 1::2, :]
        return self.o_proj(heads.flatten(-2))
