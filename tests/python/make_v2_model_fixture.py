#!/usr/bin/python3
"""Writes tests/data/model_tiny_v2/: a small random-weight DIFF V2 model (docs/maths.md, "DIFF V2") in
diffvk's V2 checkpoint layout, with the float64 logits of one causal pass.

Checkpoint (config.json with diffvk's native keys plus "head_dim" and "diff_version": 2; model.safetensors,
F32, no biases; Hugging Face Llama names outside attention, the authors' MultiheadFlashDiffV2 names inside):

    model.embed_tokens.weight                        (V, E)
    model.layers.{i}.input_layernorm.weight          (E)
    model.layers.{i}.self_attn.q_proj.weight         (2H·D, E)
    model.layers.{i}.self_attn.k_proj.weight         (Hkv·D, E)
    model.layers.{i}.self_attn.v_proj.weight         (Hkv·D, E)
    model.layers.{i}.self_attn.lambda_proj.weight    (H, E)
    model.layers.{i}.self_attn.o_proj.weight         (E, H·D)
    model.layers.{i}.post_attention_layernorm.weight (E)
    model.layers.{i}.mlp.gate_proj.weight            (I, E)
    model.layers.{i}.mlp.up_proj.weight              (I, E)
    model.layers.{i}.mlp.down_proj.weight            (E, I)
    model.norm.weight                                (E)
    lm_head.weight                                   (V, E)   absent when tie_word_embeddings

Block: h = x + AttnV2(RMSNorm(x; input_layernorm)), y = h + down(silu(gate(n)) ⊙ up(n)) with
n = RMSNorm(h; post_attention_layernorm); logits = lm_head(RMSNorm(y; model.norm)).
RMSNorm(x) = x / sqrt(mean(x²) + rms_norm_eps) ⊙ w. AttnV2 = diffv2.MultiheadDiffV2 (interleaved GPT-J
RoPE with rope_theta, positions from 0, causal).

The model: vocab 256, E = 96, 2 layers, H = 2 (4 query heads), Hkv = 1, D = 32 (H·D = 64 ≠ E; cache rows
of 32 values, one Q8_0 block), I = 128, 64 positions, rope_theta 1000, rms_norm_eps 1e-6, UNTIED lm_head,
BOS 2, EOS 3. Files:

    config.json, model.safetensors   the checkpoint (F32; written with numpy + json)
    tokens.npy   int32 (20,)         9 prompt tokens (BOS first) + 11 greedy tokens
    logits.npy   float64 (20, 256)   logits of every position, one float64 causal pass
    meta.json    config, seed, λ logit range, greedy margins, self-check errors, how it was made

The greedy tokens are argmax of the float64 logits of the full recompute (ties: lowest id); meta.json's
min_greedy_margin is the smallest top-1/top-2 gap of those steps. Checked by
tests/reference/test_model_ref_v2.cpp against runtime/reference/model_ref.cpp. Deterministic (fixed
seed, torch's CPU generator, one thread): a rerun writes identical files.

Usage:  /usr/bin/python3 tests/python/make_v2_model_fixture.py [--out DIR]
"""

import argparse
import json
import math
import os
import struct
import sys

import numpy as np
import torch
from torch import nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from diffmodel import RMSNorm, SwiGLU  # noqa: E402
from diffv2 import MultiheadDiffV2  # noqa: E402
from make_model_fixture import greedy_full  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

CONFIG = {
    "vocab_size": 256, "hidden_size": 96, "num_layers": 2, "num_heads": 2, "num_kv_heads": 1,
    "head_dim": 32, "intermediate_size": 128, "max_position_embeddings": 64, "rope_theta": 1000.0,
    "rms_norm_eps": 1e-6, "tie_word_embeddings": False, "bos_token_id": 2, "eos_token_id": 3,
    "tokenizer": "bytes", "diff_version": 2,
}
SEED = 20260307        # chosen: min greedy margin 0.145, λ logits in [-4.9, 3.5] (both signs, not saturated)
PROMPT_LEN, N_NEW = 9, 11
LAMBDA_STD = 2.0       # lambda_proj ~ N(0, (LAMBDA_STD/√E)²): λ logits of a few units, not ±50


class V2Block(nn.Module):
    def __init__(self, c):
        super().__init__()
        E = c["hidden_size"]
        self.input_layernorm = RMSNorm(E, c["rms_norm_eps"])
        self.self_attn = MultiheadDiffV2(E, c["num_heads"], c["num_kv_heads"], c["head_dim"], c["rope_theta"])
        self.post_attention_layernorm = RMSNorm(E, c["rms_norm_eps"])
        self.mlp = SwiGLU(E, c["intermediate_size"])

    def forward(self, x):
        h = x + self.self_attn(self.input_layernorm(x))
        return h + self.mlp(self.post_attention_layernorm(h))


class V2Decoder(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.embed_tokens = nn.Embedding(c["vocab_size"], c["hidden_size"])
        self.layers = nn.ModuleList([V2Block(c) for _ in range(c["num_layers"])])
        self.norm = RMSNorm(c["hidden_size"], c["rms_norm_eps"])


class V2Model(nn.Module):
    """state_dict names = the checkpoint names (lm_head dropped when tied)."""

    def __init__(self, c):
        super().__init__()
        self.config = dict(c)
        self.model = V2Decoder(c)
        self.lm_head = None if c["tie_word_embeddings"] else nn.Linear(c["hidden_size"], c["vocab_size"], bias=False)

    def forward(self, tokens):
        """tokens: (S,) or (B, S) at positions 0 .. S-1 -> logits (..., S, V)."""
        x = self.model.embed_tokens(tokens)
        for layer in self.model.layers:
            x = layer(x)
        w = self.model.embed_tokens.weight if self.lm_head is None else self.lm_head.weight
        return torch.nn.functional.linear(self.model.norm(x), w)

    def lambda_logits(self, tokens):
        """λ logits x·Wλᵀ of every layer: (layers, S, H)."""
        out = []
        x = self.model.embed_tokens(tokens)
        for layer in self.model.layers:
            out.append(layer.self_attn.lambda_proj(layer.input_layernorm(x)))
            x = layer(x)
        return torch.stack(out)

    def checkpoint_tensors(self):
        sd = self.state_dict()
        if self.lm_head is None:
            sd.pop("lm_head.weight", None)
        return sd


def make_model(seed):
    model = V2Model(CONFIG).double()
    g = torch.Generator().manual_seed(seed)
    E = CONFIG["hidden_size"]
    with torch.no_grad():
        for name, p in model.named_parameters():
            r = torch.randn(p.shape, generator=g, dtype=torch.float64)
            if name.endswith("norm.weight"):
                v = 1.0 + 0.2 * r
            elif name == "model.embed_tokens.weight":
                v = r
            elif name == "lm_head.weight":
                v = 2.0 / math.sqrt(E) * r
            elif name.endswith("lambda_proj.weight"):
                v = LAMBDA_STD / math.sqrt(E) * r
            else:  # projections (out, in)
                v = r / math.sqrt(p.shape[1])
            p.copy_(v.float().double())  # the F32 values are the model
    return model.eval()


def write_safetensors(path, tensors, metadata):
    """tensors: name -> float64 tensor holding F32 values; written F32 in this order."""
    header, off, blobs = {"__metadata__": metadata}, 0, []
    for name, t in tensors.items():
        b = np.ascontiguousarray(t.detach().numpy().astype("<f4")).tobytes()
        header[name] = {"dtype": "F32", "shape": list(t.shape), "data_offsets": [off, off + len(b)]}
        off += len(b)
        blobs.append(b)
    hj = json.dumps(header).encode()
    hj += b" " * (-len(hj) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(hj)))
        f.write(hj)
        for b in blobs:
            f.write(b)


def read_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, h in header.items():
        if name == "__metadata__":
            continue
        assert h["dtype"] == "F32"
        a, b = h["data_offsets"]
        out[name] = torch.from_numpy(np.frombuffer(data[a:b], dtype="<f4").astype(np.float64).reshape(h["shape"]))
    return out


@torch.no_grad()
def self_checks(model, tokens, logits):
    """Causality and batching of the transcription itself (the C++ reference is the independent check)."""
    n = len(tokens)
    t = torch.tensor(tokens)
    scale = max(1.0, float(logits.abs().max()))
    caus = 0.0
    for m in sorted({1, 2, 3, n // 3, n // 2, n - 1}):
        caus = max(caus, float((model(t[:m]) - logits[:m]).abs().max()))
    m = n // 2
    both = model(torch.stack([t[:m], t[n - m:]]))
    batch = max(float((both[0] - logits[:m]).abs().max()), float((both[1] - model(t[n - m:])).abs().max()))
    errs = {"causality_max_abs": caus, "batched_max_abs": batch}
    for k, v in errs.items():
        if not v <= 1e-10 * scale:
            raise AssertionError("%s = %g" % (k, v))
    return errs


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=os.path.join(REPO, "tests", "data", "model_tiny_v2"))
    ap.add_argument("--seed", type=int, default=SEED)
    args = ap.parse_args()
    torch.set_num_threads(1)

    model = make_model(args.seed)
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "config.json"), "w") as f:
        json.dump(CONFIG, f, indent=2)
        f.write("\n")
    st_path = os.path.join(args.out, "model.safetensors")
    tensors = model.checkpoint_tensors()
    write_safetensors(st_path, tensors, {"format": "pt", "generator": "tests/python/make_v2_model_fixture.py",
                                         "seed": str(args.seed)})
    # Round trip: the F32 file holds exactly the values the forward uses.
    back = read_safetensors(st_path)
    if sorted(back) != sorted(tensors) or any(not torch.equal(back[k], tensors[k]) for k in tensors):
        raise AssertionError("safetensors round trip changed the weights")

    g = torch.Generator().manual_seed(args.seed + 1)
    prompt = [CONFIG["bos_token_id"]] + torch.randint(32, 127, (PROMPT_LEN - 1,), generator=g).tolist()
    toks, logits, margins = greedy_full(model, prompt, N_NEW)
    errs = self_checks(model, toks, logits)
    with torch.no_grad():
        z = model.lambda_logits(torch.tensor(toks))
    np.save(os.path.join(args.out, "tokens.npy"), np.array(toks, dtype="<i4"))
    np.save(os.path.join(args.out, "logits.npy"), logits.numpy().astype("<f8"))

    meta = {
        "config": CONFIG,
        "seed": args.seed,
        "weights": "random, F32 in model.safetensors (untied lm_head): embeddings N(0, 1), norm gains "
                   "1 + N(0, 0.2^2), projections N(0, 1/in), lambda_proj N(0, (%g/sqrt(E))^2), lm_head "
                   "N(0, (2/sqrt(E))^2); "
                   "forward in float64 (PyTorch transcription, diffv2.MultiheadDiffV2)" % LAMBDA_STD,
        "lambda_logits": {"min": float(z.min()), "max": float(z.max()), "mean_abs": float(z.abs().mean()),
                          "per_layer_min": [float(v) for v in z.flatten(1).min(1).values],
                          "per_layer_max": [float(v) for v in z.flatten(1).max(1).values]},
        "prompt_len": PROMPT_LEN,
        "n_decode": N_NEW,
        "N": len(toks),
        "max_abs_logit": float(logits.abs().max()),
        "min_greedy_margin": min(margins),
        "greedy_margins": margins,
        "self_check": errs,
        "files": {
            "config.json": "checkpoint config (diff_version 2, head_dim)",
            "model.safetensors": "checkpoint weights, F32",
            "tokens.npy": "int32 (%d,): %d prompt tokens (BOS first) + %d greedy tokens" % (len(toks), PROMPT_LEN, N_NEW),
            "logits.npy": "float64 (%d, %d): logits of every position, one float64 causal pass"
                          % (len(toks), CONFIG["vocab_size"]),
        },
        "generator": "tests/python/make_v2_model_fixture.py",
    }
    with open(os.path.join(args.out, "meta.json"), "w") as f:
        json.dump(meta, f, indent=2)
        f.write("\n")
    print("%s: tokens %s" % (args.out, toks))
    print("  min greedy margin %.4f, max|logit| %.3f, lambda logits in [%.2f, %.2f] (mean |z| %.2f), %d bytes of weights"
          % (min(margins), float(logits.abs().max()), float(z.min()), float(z.max()), float(z.abs().mean()),
             os.path.getsize(st_path)))


if __name__ == "__main__":
    main()
