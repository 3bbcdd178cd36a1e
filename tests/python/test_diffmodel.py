#!/usr/bin/python3
"""Self-consistency tests of the PyTorch reference model (tests/python/diffmodel.py)
and of the whole-model fixtures. Plain unittest (Debian's python3 has no pytest):

    /usr/bin/python3 tests/python/test_diffmodel.py -v

Checks: config round trip; checkpoint save/load in F32/F16/BF16 (names, shapes,
tied vs untied); causality of the float64 forward (a prefix's logits are the first
rows of the longer sequence's); KV-cache decode == full recompute; batch
independence; the block formula against an explicit re-derivation; the bundled
fixtures reproduce from their checkpoints.
"""

import json
import math
import os
import sys
import tempfile
import unittest

import numpy as np
import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from diffattn import load_safetensors  # noqa: E402
from diffmodel import (DiffTransformer, ModelConfig, generate, load_checkpoint,  # noqa: E402
                       save_checkpoint)

REPO = os.path.dirname(os.path.dirname(HERE))
TINY = os.path.join(REPO, "tests", "data", "model_tiny")
FIXTURE = os.path.join(REPO, "tests", "data", "model_fixture")
EXAMPLE = os.path.join(REPO, "examples", "models", "tiny-diff")


def random_model(tied, seed=0, dtype=torch.float64):
    cfg = ModelConfig(vocab_size=256, hidden_size=32, num_layers=3, num_heads=2, num_kv_heads=1,
                      intermediate_size=48, max_position_embeddings=40, tie_word_embeddings=tied,
                      bos_token_id=2, eos_token_id=3)
    torch.manual_seed(seed)
    m = DiffTransformer(cfg)
    with torch.no_grad():
        for n, p in m.named_parameters():
            if n.endswith("norm.weight") or n.endswith("subln.weight"):
                p.copy_(1 + 0.2 * torch.randn(p.shape))
            elif ".lambda_" in n:
                p.copy_(0.3 * torch.randn(p.shape))
    return m.to(dtype).eval()


class TestConfigAndCheckpoint(unittest.TestCase):
    def test_config_round_trip(self):
        cfg = ModelConfig(vocab_size=300, hidden_size=64, num_layers=2, num_heads=2, num_kv_heads=1,
                          intermediate_size=96, rope_theta=500.0, tie_word_embeddings=True,
                          bos_token_id=1, eos_token_id=0)
        with tempfile.TemporaryDirectory() as d:
            cfg.save(d)
            self.assertEqual(ModelConfig.load(d).to_dict(), cfg.to_dict())

    def test_config_defaults(self):
        cfg = ModelConfig.from_dict({"vocab_size": 256, "hidden_size": 64, "num_layers": 1,
                                     "num_heads": 2, "intermediate_size": 10})
        self.assertEqual(cfg.rope_theta, 10000.0)
        self.assertEqual(cfg.rms_norm_eps, 1e-5)
        self.assertEqual(cfg.num_kv_heads, 2)
        self.assertEqual(cfg.head_dim, 16)

    def test_checkpoint_names_and_dtypes(self):
        for tied in (True, False):
            m = random_model(tied)
            for dtype, name in ((torch.float32, "F32"), (torch.float16, "F16"), (torch.bfloat16, "BF16")):
                with tempfile.TemporaryDirectory() as d:
                    save_checkpoint(m, d, dtype=dtype)
                    tensors, _ = load_safetensors(os.path.join(d, "model.safetensors"))
                    self.assertEqual("lm_head.weight" in tensors, not tied)
                    expect = {"embed_tokens.weight", "norm.weight"}
                    for i in range(3):
                        expect |= {"layers.%d.%s" % (i, s) for s in (
                            "attn_norm.weight", "ffn_norm.weight", "ffn.gate_proj.weight",
                            "ffn.up_proj.weight", "ffn.down_proj.weight", "attn.q_proj.weight",
                            "attn.k_proj.weight", "attn.v_proj.weight", "attn.out_proj.weight",
                            "attn.lambda_q1", "attn.lambda_k1", "attn.lambda_q2", "attn.lambda_k2",
                            "attn.subln.weight")}
                    if not tied:
                        expect.add("lm_head.weight")
                    self.assertEqual(set(tensors), expect)
                    with open(os.path.join(d, "model.safetensors"), "rb") as f:
                        n = int.from_bytes(f.read(8), "little")
                        hdr = json.loads(f.read(n))
                    self.assertTrue(all(v["dtype"] == name for k, v in hdr.items() if k != "__metadata__"))
                    self.assertEqual(hdr["layers.1.attn.k_proj.weight"]["shape"], [2 * 1 * 8, 32])
                    self.assertEqual(hdr["layers.1.attn.v_proj.weight"]["shape"], [1 * 2 * 8, 32])
                    self.assertEqual(hdr["layers.1.ffn.down_proj.weight"]["shape"], [32, 48])
                    back = load_checkpoint(d, dtype=torch.float64)
                    for k, v in m.checkpoint_tensors().items():
                        self.assertTrue(torch.equal(back.checkpoint_tensors()[k], v.to(dtype).double()), k)


class TestForward(unittest.TestCase):
    def setUp(self):
        torch.set_num_threads(1)
        self.toks = torch.randint(0, 256, (37,), generator=torch.Generator().manual_seed(5))

    def test_causality(self):
        for tied in (True, False):
            m = random_model(tied, seed=1)
            with torch.no_grad():
                full = m(self.toks)
                for n in (1, 2, 7, 20, 36):
                    err = float((m(self.toks[:n]) - full[:n]).abs().max())
                    self.assertLess(err, 1e-12, (tied, n))
                # ...and the last rows DO depend on what came before.
                other = self.toks.clone()
                other[0] = (other[0] + 1) % 256
                self.assertGreater(float((m(other)[-1] - full[-1]).abs().max()), 1e-6)

    def test_kv_cache_and_batch(self):
        m = random_model(False, seed=2)
        with torch.no_grad():
            full = m(self.toks)
            out, kvs = m(self.toks[None, :10], return_kv=True)
            rows = [out[0]]
            for i in range(10, 37):
                o, kvs = m(self.toks[None, i:i + 1], past_kvs=kvs, return_kv=True)
                rows.append(o[0])
            self.assertLess(float((torch.cat(rows) - full).abs().max()), 1e-12)
            b = m(torch.stack([self.toks[:20], self.toks[17:]]))
            self.assertLess(float((b[0] - full[:20]).abs().max()), 1e-12)
            self.assertLess(float((b[1] - m(self.toks[17:])).abs().max()), 1e-12)
        self.assertEqual(generate(m, [2, 65], 8, use_cache=True), generate(m, [2, 65], 8, use_cache=False))

    def test_block_formula(self):
        """Re-derives the forward from the checkpoint tensors with explicit formulas
        (the attention itself via the layer module, checked elsewhere)."""
        m = random_model(True, seed=3)
        sd = m.checkpoint_tensors()
        cfg = m.config

        def rms(x, w, eps):
            return x / torch.sqrt((x * x).mean(-1, keepdim=True) + eps) * w

        with torch.no_grad():
            x = sd["embed_tokens.weight"][self.toks]
            for i, layer in enumerate(m.layers):
                p = "layers.%d." % i
                self.assertAlmostEqual(layer.attn.lambda_init, 0.8 - 0.6 * math.exp(-0.3 * i))
                h = x + layer.attn(rms(x, sd[p + "attn_norm.weight"], cfg.rms_norm_eps))
                u = rms(h, sd[p + "ffn_norm.weight"], cfg.rms_norm_eps)
                x = h + F.silu(u @ sd[p + "ffn.gate_proj.weight"].T) * (u @ sd[p + "ffn.up_proj.weight"].T) \
                    @ sd[p + "ffn.down_proj.weight"].T
            logits = rms(x, sd["norm.weight"], cfg.rms_norm_eps) @ sd["embed_tokens.weight"].T
            self.assertLess(float((logits - m(self.toks)).abs().max()), 1e-12)

    def test_position_limit(self):
        m = random_model(True)
        with self.assertRaises(ValueError):
            m(torch.zeros(41, dtype=torch.long))


class TestFixtures(unittest.TestCase):
    def check_dir(self, model_dir, pairs):
        m = load_checkpoint(model_dir, dtype=torch.float64)
        with torch.no_grad():
            for tok_file, logit_file in pairs:
                toks = torch.from_numpy(np.load(tok_file))
                ref = torch.from_numpy(np.load(logit_file)).double()
                self.assertEqual(toks.dtype, torch.int64)
                self.assertEqual(tuple(ref.shape), (len(toks), m.config.vocab_size))
                got = m(toks)
                scale = max(1.0, float(ref.abs().max()))
                self.assertLess(float((got - ref).abs().max()), 1e-6 * scale, tok_file)

    @unittest.skipUnless(os.path.isdir(TINY), "no tests/data/model_tiny")
    def test_tiny(self):
        with open(os.path.join(TINY, "meta.json")) as f:
            meta = json.load(f)
        self.assertFalse(meta["config"]["tie_word_embeddings"])
        toks = np.load(os.path.join(TINY, "tokens.npy"))
        self.assertEqual(len(toks), meta["prompt_len"] + meta["n_decode"])
        self.check_dir(TINY, [(os.path.join(TINY, "tokens.npy"), os.path.join(TINY, "logits.npy"))])

    @unittest.skipUnless(os.path.isdir(FIXTURE) and os.path.isdir(EXAMPLE), "no model fixture")
    def test_model_fixture(self):
        with open(os.path.join(FIXTURE, "meta.json")) as f:
            meta = json.load(f)
        self.assertTrue(meta["config"]["tie_word_embeddings"])
        pairs = [(os.path.join(FIXTURE, "tokens_%d.npy" % k), os.path.join(FIXTURE, "logits_%d.npy" % k))
                 for k in range(len(meta["N"]))]
        self.check_dir(EXAMPLE, pairs)
        # The stored continuations are greedy under the stored logits.
        for k, (tf, lf) in enumerate(pairs):
            toks, lg = np.load(tf), np.load(lf)
            p = meta["prompt_lens"][k]
            self.assertTrue(np.array_equal(lg[p - 1:-1].argmax(-1), toks[p:]), k)


if __name__ == "__main__":
    unittest.main()
