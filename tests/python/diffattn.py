"""MultiheadDiffAttn exactly as diffvk's docs/maths.md ("Differential attention: the
exact computation") describes it, in plain PyTorch (no flash-attn, no apex).

    q = x·Wqᵀ  -> 2H sub-heads of width D; head h owns sub-heads 2h (Q1), 2h+1 (Q2)
    k = x·Wkᵀ  -> 2Hkv sub-heads; group g owns 2g (K1), 2g+1 (K2)
    v = x·Wvᵀ  -> Hkv blocks of width 2D
    head h uses group g = h // (H // Hkv) for K1, K2 and V
    interleaved (GPT-J) RoPE on every q/k sub-head, absolute positions from 0
    λ = exp(λq1·λk1) − exp(λq2·λk2) + λ_init,  λ_init = 0.8 − 0.6·exp(−0.3·depth)
    O = (softmax(Q1K1ᵀ/√D) − λ·softmax(Q2K2ᵀ/√D))·V      (causal)
    Ô = (1 − λ_init) · RMSNorm_{2D, eps=1e-5}(O) ⊙ subln.weight
    y = concat_h(Ô)·out_projᵀ

Works in float64 (use `.double()`), float32 and 16-bit types (softmax and the
norm statistic then run in float32; on the CPU, Debian's torch 1.13 has bfloat16
but no float16 matmul). Importable by other scripts:

    from diffattn import MultiheadDiffAttn, save_safetensors, load_safetensors

The state_dict names are those of the authors' reference code: q_proj.weight,
k_proj.weight, v_proj.weight, out_proj.weight, lambda_q1, lambda_k1, lambda_q2,
lambda_k2, subln.weight.

Debian's torch ships without the `safetensors` package, so a minimal reader and
writer for that format (F64/F32/F16/BF16) live at the end of this file.
"""

import json
import math
import struct

import numpy as np
import torch
from torch import nn

__all__ = [
    "lambda_init_fn",
    "rope_interleaved",
    "HeadRMSNorm",
    "MultiheadDiffAttn",
    "save_safetensors",
    "load_safetensors",
]


def lambda_init_fn(depth):
    """λ_init = 0.8 − 0.6·exp(−0.3·depth), depth = 0-based layer index."""
    return 0.8 - 0.6 * math.exp(-0.3 * depth)


def rope_interleaved(x, positions, theta=10000.0):
    """Interleaved (GPT-J) rotary embedding.

    x: (..., S, n_sub, D) with D even; positions: (S,) integer tensor of absolute
    positions. Pair (2i, 2i+1) is rotated by the angle pos·θ^(−2i/D). The tables
    are computed in float64 and cast to x's dtype.
    """
    D = x.shape[-1]
    inv_freq = theta ** (-torch.arange(0, D, 2, dtype=torch.float64) / D)  # (D/2,)
    angle = positions.to(torch.float64)[:, None] * inv_freq[None, :]  # (S, D/2)
    c = torch.cos(angle).to(x.dtype)[:, None, :]  # (S, 1, D/2): same for every sub-head
    s = torch.sin(angle).to(x.dtype)[:, None, :]
    x0 = x[..., 0::2]
    x1 = x[..., 1::2]
    return torch.stack((x0 * c - x1 * s, x0 * s + x1 * c), dim=-1).flatten(-2)


class HeadRMSNorm(nn.Module):
    """RMSNorm over the last dimension with an elementwise weight (the reference's
    `subln`). The statistic runs in float32 or better."""

    def __init__(self, dim, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        xf = x if x.dtype in (torch.float32, torch.float64) else x.float()
        out = xf * torch.rsqrt(xf.pow(2).mean(dim=-1, keepdim=True) + self.eps)
        return (out * self.weight.to(out.dtype)).to(x.dtype)


class MultiheadDiffAttn(nn.Module):
    """One differential-attention layer (causal, no biases, interleaved RoPE, GQA).

    embed_dim = E, num_heads = H (differential heads), num_kv_heads = Hkv
    (default H), head_dim D = E / H / 2, depth = 0-based layer index.
    """

    def __init__(self, embed_dim, depth, num_heads, num_kv_heads=None, rope_theta=10000.0):
        super().__init__()
        num_kv_heads = num_heads if num_kv_heads is None else num_kv_heads
        if embed_dim % (2 * num_heads) != 0:
            raise ValueError("embed_dim must be a multiple of 2*num_heads")
        if num_heads % num_kv_heads != 0:
            raise ValueError("num_heads must be a multiple of num_kv_heads")
        self.embed_dim = embed_dim
        self.depth = depth
        self.num_heads = num_heads
        self.num_kv_heads = num_kv_heads
        self.n_rep = num_heads // num_kv_heads
        self.head_dim = embed_dim // num_heads // 2
        if self.head_dim % 2 != 0:
            raise ValueError("head_dim = embed_dim / num_heads / 2 must be even")
        self.rope_theta = float(rope_theta)
        self.lambda_init = lambda_init_fn(depth)

        E, H, Hkv, D = embed_dim, num_heads, num_kv_heads, self.head_dim
        self.q_proj = nn.Linear(E, 2 * H * D, bias=False)
        self.k_proj = nn.Linear(E, 2 * Hkv * D, bias=False)
        self.v_proj = nn.Linear(E, Hkv * 2 * D, bias=False)  # V is 2D wide per group
        self.out_proj = nn.Linear(H * 2 * D, E, bias=False)
        self.lambda_q1 = nn.Parameter(torch.zeros(D).normal_(mean=0.0, std=0.1))
        self.lambda_k1 = nn.Parameter(torch.zeros(D).normal_(mean=0.0, std=0.1))
        self.lambda_q2 = nn.Parameter(torch.zeros(D).normal_(mean=0.0, std=0.1))
        self.lambda_k2 = nn.Parameter(torch.zeros(D).normal_(mean=0.0, std=0.1))
        self.subln = HeadRMSNorm(2 * D, eps=1e-5)

    def lambda_full(self):
        """The scalar λ of this layer (a 0-d tensor)."""
        l1 = torch.exp(torch.sum(self.lambda_q1 * self.lambda_k1))
        l2 = torch.exp(torch.sum(self.lambda_q2 * self.lambda_k2))
        return l1 - l2 + self.lambda_init

    def forward(self, x, past_kv=None, return_kv=False):
        """x: (B, S, E) or (S, E).

        past_kv: None, or (k, v) returned by an earlier call: k (B, T0, 2Hkv, D)
        already roped, v (B, T0, Hkv, 2D). The new tokens then sit at positions
        T0 .. T0+S-1. With return_kv=True the result is (y, (k, v)) with the new
        rows appended.
        """
        unbatched = x.dim() == 2
        if unbatched:
            x = x.unsqueeze(0)
            if past_kv is not None:
                raise ValueError("past_kv needs batched input")
        B, S, _ = x.shape
        H, Hkv, D = self.num_heads, self.num_kv_heads, self.head_dim
        pos0 = 0 if past_kv is None else past_kv[0].shape[1]
        positions = torch.arange(pos0, pos0 + S)

        q = self.q_proj(x).view(B, S, 2 * H, D)
        k = self.k_proj(x).view(B, S, 2 * Hkv, D)
        v = self.v_proj(x).view(B, S, Hkv, 2 * D)
        q = rope_interleaved(q, positions, self.rope_theta)
        k = rope_interleaved(k, positions, self.rope_theta)
        if past_kv is not None:
            k = torch.cat([past_kv[0], k], dim=1)
            v = torch.cat([past_kv[1], v], dim=1)
        T = k.shape[1]

        # (B, H, 2, S, D): [:, h, 0] is Q1 = sub-head 2h, [:, h, 1] is Q2 = sub-head 2h+1.
        qh = q.view(B, S, H, 2, D).permute(0, 2, 3, 1, 4)
        # (B, Hkv, 2, T, D) and (B, Hkv, T, 2D), then each head picks its group.
        kg = k.view(B, T, Hkv, 2, D).permute(0, 2, 3, 1, 4)
        vg = v.permute(0, 2, 1, 3)
        group = torch.arange(H) // self.n_rep  # head h -> group h // n_rep
        kh = kg[:, group]  # (B, H, 2, T, D)
        vh = vg[:, group]  # (B, H, T, 2D)

        scores = torch.matmul(qh, kh.transpose(-1, -2)) / math.sqrt(D)  # (B, H, 2, S, T)
        masked = torch.arange(T)[None, :] > positions[:, None]  # key j after query's position
        scores = scores.masked_fill(masked, float("-inf"))
        sdt = scores.dtype if scores.dtype in (torch.float32, torch.float64) else torch.float32
        attn = torch.softmax(scores.to(sdt), dim=-1).to(q.dtype)
        a1, a2 = attn[:, :, 0], attn[:, :, 1]  # (B, H, S, T) each

        lam = self.lambda_full().to(q.dtype)
        o = torch.matmul(a1 - lam * a2, vh)  # (B, H, S, 2D)
        o = self.subln(o) * (1.0 - self.lambda_init)
        o = o.transpose(1, 2).reshape(B, S, H * 2 * D)
        y = self.out_proj(o)
        if unbatched:
            y = y.squeeze(0)
        if return_kv:
            return y, (k, v)
        return y


# ---------------------------------------------------------------------------
# safetensors without the safetensors package.
#
# Layout: u64 little-endian header length N, then N bytes of JSON
# {"name": {"dtype": "F32", "shape": [...], "data_offsets": [begin, end]}, ...,
#  "__metadata__": {str: str}} padded with spaces so the data starts at a
# multiple of 8, then the raw little-endian data (offsets relative to its start).

_ST_DTYPES = {
    torch.float64: ("F64", "<f8"),
    torch.float32: ("F32", "<f4"),
    torch.float16: ("F16", "<f2"),
    torch.bfloat16: ("BF16", "<i2"),  # raw 16-bit patterns
}
_ST_NAMES = {name: (dt, np_dt) for dt, (name, np_dt) in _ST_DTYPES.items()}


def _tensor_bytes(t):
    t = t.detach().contiguous().cpu()
    name, np_dt = _ST_DTYPES[t.dtype]
    if t.dtype == torch.bfloat16:
        arr = t.view(torch.int16).numpy()
    else:
        arr = t.numpy()
    return name, arr.astype(np_dt, copy=False).tobytes()


def save_safetensors(path, tensors, metadata=None):
    """Writes a dict name -> tensor (dtypes F64/F32/F16/BF16), data in sorted name order."""
    header = {}
    blobs = []
    offset = 0
    for name in sorted(tensors):
        t = tensors[name]
        dtype, blob = _tensor_bytes(t)
        header[name] = {"dtype": dtype, "shape": list(t.shape),
                        "data_offsets": [offset, offset + len(blob)]}
        blobs.append(blob)
        offset += len(blob)
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * ((-(8 + len(text))) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for blob in blobs:
            f.write(blob)


def load_safetensors(path):
    """Returns (dict name -> tensor, metadata dict)."""
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack_from("<Q", data, 0)
    header = json.loads(data[8:8 + n].decode("utf-8"))
    metadata = header.pop("__metadata__", {})
    base = 8 + n
    out = {}
    for name, info in header.items():
        dt, np_dt = _ST_NAMES[info["dtype"]]
        begin, end = info["data_offsets"]
        arr = np.frombuffer(data[base + begin:base + end], dtype=np_dt).reshape(info["shape"])
        t = torch.from_numpy(arr.copy())
        out[name] = t.view(torch.bfloat16) if dt == torch.bfloat16 else t
    return out, metadata
