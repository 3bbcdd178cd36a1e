#!/usr/bin/python3
"""Writes diffvk's whole-model parity fixtures (checkpoint format: diffmodel.py).

1. tests/data/model_fixture/ — from the bundled F16 checkpoint
   examples/models/tiny-diff/ (tied embeddings), weights read as float64 (exact):
     tokens_<k>.npy   int64 (N_k,)      prompt k + greedy continuation
     logits_<k>.npy   float32 (N_k, V)  logits of every position, full causal
                                        forward from position 0 in float64
     meta.json        prompts, prompt lengths, N, top-1/top-2 margins of the
                      greedy steps, file list, sha256 of the checkpoint
   Prompts: k=0 BOS + "The " (5 tokens), k=1 BOS + 22 bytes (23 tokens), k=2 64
   text bytes without BOS (position 0 is then an ordinary byte), k=3 BOS + 159
   bytes (160 tokens; N = 192 covers multi-tile attention past position 128).

2. tests/data/model_tiny/ — a small random-weight model for fast tests
   (vocab 256, E=64, 2 layers, H=2, Hkv=1 (so D=16, n_rep=2), I=96, max
   positions 64, UNTIED lm_head), F32:
     config.json, model.safetensors   the checkpoint
     tokens.npy   int64 (25,)     9 prompt tokens + 16 greedy decode tokens
     logits.npy   float32 (25, 256) every position, float64 full forward
     meta.json

The greedy continuations are argmax of the float64 logits (ties: lowest id);
meta.json records the smallest top-1/top-2 gap so that a test comparing its own
greedy tokens knows how close the closest call was.

Self-checks run before anything is written (exit 1 on failure): causality (the
logits of every prefix equal the first rows of the longer sequence), KV-cache
decode == full recompute, checkpoint save/load round trip.

Usage:  /usr/bin/python3 tests/python/make_model_fixture.py [--model DIR] [--out-fixture DIR] [--out-tiny DIR]
"""

import argparse
import hashlib
import json
import math
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from diffmodel import DiffTransformer, ModelConfig, load_checkpoint, save_checkpoint  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

BOS = 2
PROMPTS = [
    bytes([BOS]) + b"The ",                                                     # 5 tokens
    bytes([BOS]) + b"To install a package, ",                                   # 23 tokens
    b"Debian is a free operating system. The administrator can use apt",  # 64 tokens, no BOS
    bytes([BOS]) + b"The package manager keeps a list of the files installed by each package. "
    b"When a new version is available, the administrators can upgrade the whole system with ",  # 160
]
N_NEW = 32          # greedy continuation of each tiny-diff prompt
TINY_SEED = 20241011   # chosen: λ = -0.18 and 1.30 (negative and > 1), greedy margins >= 0.05
TINY_PROMPT_LEN, TINY_NEW = 9, 16


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        h.update(f.read())
    return h.hexdigest()


@torch.no_grad()
def greedy_full(model, prompt, n_new):
    """Greedy continuation with the full causal recompute at every step. Returns
    (tokens, logits of the final full sequence, margins of the greedy steps)."""
    toks = list(prompt)
    margins = []
    for _ in range(n_new):
        last = model(torch.tensor(toks))[-1]
        top2 = torch.topk(last, 2).values
        margins.append(float(top2[0] - top2[1]))
        toks.append(int(torch.argmax(last)))
    logits = model(torch.tensor(toks))
    return toks, logits, margins


@torch.no_grad()
def self_checks(model, tokens, logits, name):
    """Causality, KV-cache consistency. Raises on failure; returns a dict of errors."""
    n = len(tokens)
    t = torch.tensor(tokens)
    scale = max(1.0, float(logits.abs().max()))
    # Causality: each prefix's logits are the first rows of the full sequence's.
    caus = 0.0
    for m in sorted({1, 2, 3, n // 3, n // 2, n - 1}):
        if 1 <= m < n:
            caus = max(caus, float((model(t[:m]) - logits[:m]).abs().max()))
    # Batched: two sequences in one call give the same rows as separate calls.
    m = n // 2
    both = model(torch.stack([t[:m], t[n - m:]]))
    batch_err = max(float((both[0] - logits[:m]).abs().max()),
                    float((both[1] - model(t[n - m:])).abs().max()))
    # KV cache: prefill half, then one token at a time.
    out, kvs = model(t[None, :m], return_kv=True)
    rows = [out[0]]
    for i in range(m, n):
        o, kvs = model(t[None, i:i + 1], past_kvs=kvs, return_kv=True)
        rows.append(o[0])
    kv_err = float((torch.cat(rows) - logits).abs().max())
    errs = {"causality_max_abs": caus, "batched_max_abs": batch_err, "kv_cache_max_abs": kv_err}
    print("  %s: %s (max|logit| %.3f)" % (name, ", ".join("%s %.2e" % kv for kv in errs.items()), scale))
    for k, v in errs.items():
        if not v <= 1e-10 * scale:
            raise AssertionError("%s: %s = %g" % (name, k, v))
    return errs


def make_tiny_model(seed):
    cfg = ModelConfig(vocab_size=256, hidden_size=64, num_layers=2, num_heads=2, num_kv_heads=1,
                      intermediate_size=96, rope_theta=1000.0, rms_norm_eps=1e-6,
                      max_position_embeddings=64, tie_word_embeddings=False,
                      bos_token_id=BOS, eos_token_id=3, tokenizer="bytes")
    model = DiffTransformer(cfg)
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight") or name.endswith("subln.weight"):
                v = 1.0 + 0.2 * torch.randn(p.shape, generator=g, dtype=torch.float64)
            elif ".lambda_" in name:
                v = 0.3 * torch.randn(p.shape, generator=g, dtype=torch.float64)  # λ visibly ≠ λ_init
            elif name == "embed_tokens.weight":
                v = torch.randn(p.shape, generator=g, dtype=torch.float64)
            elif name == "lm_head.weight":
                v = 2.0 / math.sqrt(p.shape[1]) * torch.randn(p.shape, generator=g, dtype=torch.float64)
            else:  # projections (out, in)
                v = torch.randn(p.shape, generator=g, dtype=torch.float64) / math.sqrt(p.shape[1])
            p.copy_(v.float())   # the F32 values are the model
    return model


def write_model_fixture(model_dir, out):
    print("model fixture from %s" % model_dir)
    model = load_checkpoint(model_dir, dtype=torch.float64)
    cfg = model.config
    os.makedirs(out, exist_ok=True)
    files = {}
    entries = []
    for k, p in enumerate(PROMPTS):
        toks, logits, margins = greedy_full(model, list(p), N_NEW)
        errs = self_checks(model, toks, logits, "prompt %d" % k)
        np.save(os.path.join(out, "tokens_%d.npy" % k), np.array(toks, dtype=np.int64))
        np.save(os.path.join(out, "logits_%d.npy" % k), logits.numpy().astype(np.float32))
        files["tokens_%d.npy" % k] = "int64 (%d,): prompt %d (%d tokens) + %d greedy tokens" % (
            len(toks), k, len(p), N_NEW)
        files["logits_%d.npy" % k] = "float32 (%d, %d): logits of every position, float64 forward" % (
            len(toks), cfg.vocab_size)
        cont = bytes(toks[len(p):]).decode("utf-8", errors="replace")
        entries.append({"k": k, "prompt_len": len(p), "N": len(toks),
                        "prompt_text": p.decode("utf-8", errors="replace").replace("\x02", "<BOS>"),
                        "starts_with_bos": p[0] == BOS, "continuation_text": cont,
                        "min_greedy_margin": min(margins), "greedy_margins": margins,
                        "self_check": errs})
        print("  prompt %d: %r -> %r (min margin %.4f)" % (k, p, cont, min(margins)))
    meta = {
        "model": os.path.relpath(model_dir, REPO),
        "model_sha256": sha256(os.path.join(model_dir, "model.safetensors")),
        "config": cfg.to_dict(),
        "weights": "F16 checkpoint read exactly into float64; forward in float64",
        "lambda": [float(l.attn.lambda_full()) for l in model.layers],
        "prompt_lens": [e["prompt_len"] for e in entries],
        "N": [e["N"] for e in entries],
        "n_new": N_NEW,
        "prompts": entries,
        "files": files,
        "generator": "tests/python/make_model_fixture.py",
    }
    with open(os.path.join(out, "meta.json"), "w") as f:
        json.dump(meta, f, indent=2)
        f.write("\n")


def write_tiny(out):
    print("tiny random model -> %s" % out)
    m32 = make_tiny_model(TINY_SEED)
    save_checkpoint(m32, out, dtype=torch.float32, metadata={"seed": TINY_SEED})
    model = load_checkpoint(out, dtype=torch.float64)
    # Round trip: the reloaded F32 values are the ones generated.
    for k, v in m32.checkpoint_tensors().items():
        if not torch.equal(model.checkpoint_tensors()[k], v.double()):
            raise AssertionError("round trip changed " + k)
    g = torch.Generator().manual_seed(TINY_SEED + 1)
    prompt = [BOS] + torch.randint(32, 127, (TINY_PROMPT_LEN - 1,), generator=g).tolist()
    toks, logits, margins = greedy_full(model, prompt, TINY_NEW)
    errs = self_checks(model, toks, logits, "tiny")
    np.save(os.path.join(out, "tokens.npy"), np.array(toks, dtype=np.int64))
    np.save(os.path.join(out, "logits.npy"), logits.numpy().astype(np.float32))
    meta = {
        "config": model.config.to_dict(),
        "seed": TINY_SEED,
        "weights": "random, F32 in model.safetensors (untied lm_head); forward in float64",
        "lambda": [float(l.attn.lambda_full()) for l in model.layers],
        "prompt_len": TINY_PROMPT_LEN,
        "n_decode": TINY_NEW,
        "N": len(toks),
        "min_greedy_margin": min(margins),
        "greedy_margins": margins,
        "self_check": errs,
        "files": {
            "config.json": "checkpoint config",
            "model.safetensors": "checkpoint weights, F32",
            "tokens.npy": "int64 (%d,): %d prompt tokens (BOS first) + %d greedy decode tokens"
                          % (len(toks), TINY_PROMPT_LEN, TINY_NEW),
            "logits.npy": "float32 (%d, 256): logits of every position, float64 full causal forward"
                          % len(toks),
        },
        "generator": "tests/python/make_model_fixture.py",
    }
    with open(os.path.join(out, "meta.json"), "w") as f:
        json.dump(meta, f, indent=2)
        f.write("\n")
    print("  tokens %s, min margin %.4f" % (toks, min(margins)))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default=os.path.join(REPO, "examples", "models", "tiny-diff"))
    ap.add_argument("--out-fixture", default=os.path.join(REPO, "tests", "data", "model_fixture"))
    ap.add_argument("--out-tiny", default=os.path.join(REPO, "tests", "data", "model_tiny"))
    ap.add_argument("--only", choices=["fixture", "tiny"], default=None)
    args = ap.parse_args()
    torch.set_num_threads(1)
    if args.only in (None, "tiny"):
        write_tiny(args.out_tiny)
    if args.only in (None, "fixture"):
        write_model_fixture(args.model, args.out_fixture)


if __name__ == "__main__":
    main()
