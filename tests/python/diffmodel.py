"""A whole Differential Transformer decoder in plain PyTorch: the reference model
of diffvk's checkpoint format. Float64-capable; no flash-attn, no apex.

Checkpoint = a directory with

  config.json         vocab_size, hidden_size (E), num_layers, num_heads (H,
                      differential heads), num_kv_heads, intermediate_size (I),
                      rope_theta (default 10000), rms_norm_eps (block norms,
                      default 1e-5; the per-head subln eps stays 1e-5),
                      max_position_embeddings, tie_word_embeddings,
                      bos_token_id, eos_token_id, tokenizer ("bytes")
  model.safetensors   F32, F16 or BF16 tensors:
      embed_tokens.weight                   (vocab, E)
      layers.{i}.attn_norm.weight           (E)
      layers.{i}.attn.q_proj.weight         (E, E)
      layers.{i}.attn.k_proj.weight         (2*Hkv*D, E)
      layers.{i}.attn.v_proj.weight         (Hkv*2D, E)
      layers.{i}.attn.out_proj.weight       (E, E)
      layers.{i}.attn.lambda_q1/_k1/_q2/_k2 (D)
      layers.{i}.attn.subln.weight          (2D)
      layers.{i}.ffn_norm.weight            (E)
      layers.{i}.ffn.gate_proj.weight       (I, E)
      layers.{i}.ffn.up_proj.weight         (I, E)
      layers.{i}.ffn.down_proj.weight       (E, I)
      norm.weight                           (E)
      lm_head.weight                        (vocab, E)  absent when tie_word_embeddings

Block i (depth i, 0-based):
    h = x + Attn_i(RMSNorm(x))                  Attn = diffattn.MultiheadDiffAttn, causal,
                                                positions from 0, λ_init(depth = i)
    y = h + down(silu(gate(RMSNorm(h))) ⊙ up(RMSNorm(h)))
    logits = lm_head(RMSNorm(y of the last layer))       (lm_head = embed_tokens if tied)
RMSNorm(x) = x / sqrt(mean(x²) + eps) ⊙ w, the statistic in float32 or better.

Importable:
    from diffmodel import ModelConfig, DiffTransformer, load_checkpoint, save_checkpoint
    model = load_checkpoint("examples/models/tiny-diff", dtype=torch.float64)
    logits = model(torch.tensor([2, 72, 105]))        # (3, vocab)
"""

import json
import os
import sys

import torch
from torch import nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from diffattn import HeadRMSNorm, MultiheadDiffAttn, load_safetensors, save_safetensors  # noqa: E402

__all__ = [
    "ModelConfig",
    "RMSNorm",
    "SwiGLU",
    "DiffBlock",
    "DiffTransformer",
    "save_checkpoint",
    "load_checkpoint",
    "generate",
]

CONFIG_NAME = "config.json"
WEIGHTS_NAME = "model.safetensors"

_CONFIG_KEYS = [
    "vocab_size", "hidden_size", "num_layers", "num_heads", "num_kv_heads",
    "intermediate_size", "rope_theta", "rms_norm_eps", "max_position_embeddings",
    "tie_word_embeddings", "bos_token_id", "eos_token_id", "tokenizer",
]


class ModelConfig:
    """The keys of config.json, with the defaults of the format."""

    def __init__(self, vocab_size=256, hidden_size=256, num_layers=4, num_heads=4,
                 num_kv_heads=None, intermediate_size=704, rope_theta=10000.0,
                 rms_norm_eps=1e-5, max_position_embeddings=512, tie_word_embeddings=False,
                 bos_token_id=None, eos_token_id=None, tokenizer="bytes"):
        self.vocab_size = int(vocab_size)
        self.hidden_size = int(hidden_size)
        self.num_layers = int(num_layers)
        self.num_heads = int(num_heads)
        self.num_kv_heads = int(num_heads if num_kv_heads is None else num_kv_heads)
        self.intermediate_size = int(intermediate_size)
        self.rope_theta = float(rope_theta)
        self.rms_norm_eps = float(rms_norm_eps)
        self.max_position_embeddings = int(max_position_embeddings)
        self.tie_word_embeddings = bool(tie_word_embeddings)
        self.bos_token_id = bos_token_id
        self.eos_token_id = eos_token_id
        self.tokenizer = tokenizer
        if self.hidden_size % (2 * self.num_heads) != 0:
            raise ValueError("hidden_size must be a multiple of 2*num_heads")
        if self.num_heads % self.num_kv_heads != 0:
            raise ValueError("num_heads must be a multiple of num_kv_heads")

    @property
    def head_dim(self):
        """D: the width of one of the two query/key halves of a head."""
        return self.hidden_size // self.num_heads // 2

    def to_dict(self):
        return {k: getattr(self, k) for k in _CONFIG_KEYS}

    @classmethod
    def from_dict(cls, d):
        known = {k: d[k] for k in _CONFIG_KEYS if k in d}
        for k in ("vocab_size", "hidden_size", "num_layers", "num_heads", "intermediate_size"):
            if k not in known:
                raise KeyError("config.json lacks required key %r" % k)
        return cls(**known)

    def save(self, path):
        """path: a directory (config.json is written inside) or a .json file."""
        if os.path.isdir(path):
            path = os.path.join(path, CONFIG_NAME)
        with open(path, "w") as f:
            json.dump(self.to_dict(), f, indent=2)
            f.write("\n")

    @classmethod
    def load(cls, path):
        if os.path.isdir(path):
            path = os.path.join(path, CONFIG_NAME)
        with open(path) as f:
            return cls.from_dict(json.load(f))

    def __repr__(self):
        return "ModelConfig(%s)" % ", ".join("%s=%r" % kv for kv in self.to_dict().items())


class RMSNorm(HeadRMSNorm):
    """x / sqrt(mean(x²) + eps) ⊙ w over the last dimension; statistic in fp32 or better.
    The same operation as the attention's per-head norm (diffattn.HeadRMSNorm), on the block's width."""


class SwiGLU(nn.Module):
    """down(silu(gate(x)) ⊙ up(x)), no biases."""

    def __init__(self, dim, hidden):
        super().__init__()
        self.gate_proj = nn.Linear(dim, hidden, bias=False)
        self.up_proj = nn.Linear(dim, hidden, bias=False)
        self.down_proj = nn.Linear(hidden, dim, bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class DiffBlock(nn.Module):
    def __init__(self, cfg, depth):
        super().__init__()
        E = cfg.hidden_size
        self.attn_norm = RMSNorm(E, cfg.rms_norm_eps)
        self.attn = MultiheadDiffAttn(E, depth, cfg.num_heads, cfg.num_kv_heads, cfg.rope_theta)
        self.ffn_norm = RMSNorm(E, cfg.rms_norm_eps)
        self.ffn = SwiGLU(E, cfg.intermediate_size)

    def forward(self, x, past_kv=None, return_kv=False):
        if return_kv:
            a, kv = self.attn(self.attn_norm(x), past_kv=past_kv, return_kv=True)
        else:
            a, kv = self.attn(self.attn_norm(x), past_kv=past_kv), None
        h = x + a
        y = h + self.ffn(self.ffn_norm(h))
        return (y, kv) if return_kv else y


class DiffTransformer(nn.Module):
    """Decoder-only Differential Transformer; state_dict names = the checkpoint names."""

    def __init__(self, cfg):
        super().__init__()
        self.config = cfg
        self.embed_tokens = nn.Embedding(cfg.vocab_size, cfg.hidden_size)
        self.layers = nn.ModuleList([DiffBlock(cfg, i) for i in range(cfg.num_layers)])
        self.norm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        if cfg.tie_word_embeddings:
            self.lm_head = None
        else:
            self.lm_head = nn.Linear(cfg.hidden_size, cfg.vocab_size, bias=False)

    def output_weight(self):
        return self.embed_tokens.weight if self.lm_head is None else self.lm_head.weight

    def forward(self, tokens, past_kvs=None, return_kv=False):
        """tokens: (S,) or (B, S) int64. Returns logits (S, vocab) / (B, S, vocab) for
        every position, in the model's dtype.

        Without past_kvs this is the full causal recompute from position 0 (the
        reference path). past_kvs: a list (one per layer) of (k, v) as returned with
        return_kv=True, in which case the tokens sit after the cached ones.
        """
        unbatched = tokens.dim() == 1
        if unbatched:
            tokens = tokens.unsqueeze(0)
        T0 = 0 if past_kvs is None else past_kvs[0][0].shape[1]
        if T0 + tokens.shape[1] > self.config.max_position_embeddings:
            raise ValueError("sequence longer than max_position_embeddings")
        x = self.embed_tokens(tokens)
        new_kvs = []
        for i, layer in enumerate(self.layers):
            pkv = None if past_kvs is None else past_kvs[i]
            if return_kv:
                x, kv = layer(x, past_kv=pkv, return_kv=True)
                new_kvs.append(kv)
            else:
                x = layer(x, past_kv=pkv)
        logits = F.linear(self.norm(x), self.output_weight())
        if unbatched:
            logits = logits.squeeze(0)
        return (logits, new_kvs) if return_kv else logits

    def checkpoint_tensors(self):
        """name -> tensor in the checkpoint's naming (lm_head dropped when tied)."""
        sd = self.state_dict()
        if self.lm_head is None:
            sd.pop("lm_head.weight", None)
        return sd


def save_checkpoint(model, directory, dtype=torch.float16, metadata=None):
    """Writes config.json and model.safetensors (all tensors cast to dtype:
    torch.float32, torch.float16 or torch.bfloat16)."""
    os.makedirs(directory, exist_ok=True)
    model.config.save(os.path.join(directory, CONFIG_NAME))
    tensors = {k: v.detach().to(dtype) for k, v in model.checkpoint_tensors().items()}
    meta = {"format": "pt", "generator": "tests/python/diffmodel.py"}
    if metadata:
        meta.update(metadata)
    save_safetensors(os.path.join(directory, WEIGHTS_NAME), tensors, meta)


def load_checkpoint(directory, dtype=torch.float64):
    """Builds the model from a checkpoint directory; every tensor is converted
    exactly to dtype (F16/BF16 → float64 is exact). Strict: missing or unexpected
    tensors, or wrong shapes, raise."""
    cfg = ModelConfig.load(os.path.join(directory, CONFIG_NAME))
    tensors, _ = load_safetensors(os.path.join(directory, WEIGHTS_NAME))
    model = DiffTransformer(cfg)
    expected = model.checkpoint_tensors()
    missing = sorted(set(expected) - set(tensors))
    unexpected = sorted(set(tensors) - set(expected))
    if missing or unexpected:
        raise KeyError("checkpoint mismatch: missing %s, unexpected %s" % (missing, unexpected))
    for k, v in tensors.items():
        if tuple(v.shape) != tuple(expected[k].shape):
            raise ValueError("%s: shape %s, expected %s" % (k, tuple(v.shape), tuple(expected[k].shape)))
    model = model.to(dtype)
    model.load_state_dict({k: v.to(dtype) for k, v in tensors.items()}, strict=False)
    return model.eval()


@torch.no_grad()
def generate(model, prompt, n_new, temperature=0.0, top_k=None, seed=0, stop_at_eos=False,
             use_cache=True):
    """Continues the token list prompt by n_new tokens. temperature 0 = greedy
    (argmax, ties to the lowest id). Returns the full list (prompt + new).
    use_cache=False recomputes the whole sequence every step (reference path)."""
    g = torch.Generator().manual_seed(seed)
    toks = list(prompt)
    eos = model.config.eos_token_id
    kvs = None
    feed = toks
    for _ in range(n_new):
        if use_cache:
            logits, kvs = model(torch.tensor([feed]), past_kvs=kvs, return_kv=True)
            last = logits[0, -1]
        else:
            last = model(torch.tensor(toks))[-1]
        if temperature <= 0:
            nxt = int(torch.argmax(last))
        else:
            z = last.double() / temperature
            if top_k is not None:
                kth = torch.topk(z, top_k).values[-1]
                z = z.masked_fill(z < kth, float("-inf"))
            p = torch.softmax(z, dim=-1)
            nxt = int(torch.multinomial(p, 1, generator=g))
        toks.append(nxt)
        feed = [nxt]
        if stop_at_eos and eos is not None and nxt == eos:
            break
    return toks
