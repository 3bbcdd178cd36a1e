#!/usr/bin/python3
"""Trains diffvk's bundled example model examples/models/tiny-diff/ on 2 CPU cores.

Corpus: the English edition of "The Debian Administrator's Handbook", Debian
package `debian-handbook` (section doc, main). Its /usr/share/doc/debian-handbook/
copyright says: Copyright 2003-2015 Raphaël Hertzog, Roland Mas, Freexian SARL;
License: GPL-2.0+ or CC-BY-SA-3.0. Install it with

    apt-get update && apt-get install -y debian-handbook

The script reads the HTML pages of /usr/share/doc/debian-handbook/html/en-US/
(sorted by file name), keeps the text of the prose paragraphs (<div class="para">,
without <pre> blocks), normalises whitespace and a few typographic characters to
ASCII (curly quotes, dashes, ellipsis, no-break space), and frames each page as
BOS + text + EOS. The model is byte-level: token = byte value (vocab 256);
bos_token_id = 2 (STX) and eos_token_id = 3 (ETX), control bytes that never occur
in the text. The last 5% of the pages are held out for the validation loss.

Model (defaults): E=256, 4 layers, H=4 differential heads (D=32), Hkv=2 (GQA),
I=704 SwiGLU, rope_theta 10000, max_position_embeddings 512, tied embeddings.
Training: fp32, AdamW (0.9, 0.95, wd 0.1 on matrices), linear warm-up then
cosine decay, grad-clip 1.0, fixed seed; 2 CPU cores: torch.set_num_threads(1)
with a 2-thread OpenBLAS doing the matrix products (see below). The weights
are saved as F16 safetensors with config.json (format: tests/python/diffmodel.py).

Speed: Debian's python3-torch calls the system libblas.so.3, which by default
is the slow reference BLAS (~7 GFLOP/s here). Install `libopenblas0-pthread`
(it becomes the libblas.so.3 alternative), or, to leave the system alternative
alone, unpack it and point the loader at it:

    apt-get download libopenblas0-pthread && dpkg-deb -x libopenblas0-pthread_*.deb /tmp/openblas
    export LD_LIBRARY_PATH=/tmp/openblas/usr/lib/x86_64-linux-gnu/openblas-pthread

Usage (the bundled model = phase 1 then phase 2; results match closely, not bit
for bit, across BLAS libraries):
    # phase 1: 2000 steps of 16 x 128 bytes, lr 3e-3 -> 1e-4
    /usr/bin/python3 tests/python/train_model.py
    # phase 2: context 128 -> 512: 400 steps of 4 x 512 bytes from the phase-1 F16 weights
    /usr/bin/python3 tests/python/train_model.py --init-from examples/models/tiny-diff \
        --steps 400 --seq 512 --batch 4 --lr 5e-4 --min-lr 5e-5 --warmup 20 --eval-every 100
    /usr/bin/python3 tests/python/train_model.py --corpus-stats  # only describe the corpus

Each run overwrites --out (default examples/models/tiny-diff/) with config.json,
model.safetensors (F16) and training_summary.json (losses, λ, samples).
"""

import argparse
import html.parser
import json
import math
import os
import re
import sys
import time

# Threads: on 2 cores, OpenBLAS with 2 threads doing the matrix products and
# torch's own intra-op pool at 1 thread is ~2.5x faster than
# torch.set_num_threads(2) (whose OpenMP workers fight the BLAS threads). Must be
# set before torch loads the BLAS library.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "2")

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from diffmodel import DiffTransformer, ModelConfig, generate, load_checkpoint, save_checkpoint  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CORPUS_DIR = "/usr/share/doc/debian-handbook/html/en-US"
CORPUS_PACKAGE = "debian-handbook"
CORPUS_LICENSE = "GPL-2.0+ or CC-BY-SA-3.0"
BOS, EOS = 2, 3

_TRANSLATE = {
    "\u201c": '"', "\u201d": '"', "\u201e": '"', "\u2018": "'", "\u2019": "'",
    "\u2014": "--", "\u2013": "-", "\u2026": "...", "\u00a0": " ", "\u202f": " ",
    "\u2009": " ", "\u00ab": '"', "\u00bb": '"', "\u2022": "*", "\u2192": "->",
}


class _ParaExtractor(html.parser.HTMLParser):
    """Collects the text of <div class="para"> elements, skipping <pre> content."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.paras = []
        self._div_depth = 0      # depth of nested <div>s inside the current para
        self._in_para = False
        self._pre = 0
        self._buf = []

    def handle_starttag(self, tag, attrs):
        if tag == "div":
            if self._in_para:
                self._div_depth += 1
            elif "para" in (dict(attrs).get("class") or "").split():
                self._in_para = True
                self._div_depth = 1
                self._buf = []
        elif tag == "pre" and self._in_para:
            self._pre += 1

    def handle_endtag(self, tag):
        if tag == "pre" and self._pre:
            self._pre -= 1
        elif tag == "div" and self._in_para:
            self._div_depth -= 1
            if self._div_depth == 0:
                self._in_para = False
                self.paras.append("".join(self._buf))

    def handle_data(self, data):
        if self._in_para and not self._pre:
            self._buf.append(data)


def clean_text(s):
    for a, b in _TRANSLATE.items():
        s = s.replace(a, b)
    return re.sub(r"\s+", " ", s).strip()


def load_corpus(corpus_dir=CORPUS_DIR):
    """Returns the list of page texts (str), pages sorted by file name."""
    if not os.path.isdir(corpus_dir):
        sys.exit("corpus not found: %s\ninstall it with: apt-get install -y %s"
                 % (corpus_dir, CORPUS_PACKAGE))
    pages = []
    for name in sorted(os.listdir(corpus_dir)):
        if not name.endswith(".html"):
            continue
        with open(os.path.join(corpus_dir, name), encoding="utf-8") as f:
            p = _ParaExtractor()
            p.feed(f.read())
        paras = [clean_text(x) for x in p.paras]
        text = "\n".join(x for x in paras if len(x) >= 20)
        if text:
            pages.append(text)
    return pages


def encode_pages(pages):
    out = []
    for t in pages:
        out.append(BOS)
        out.extend(t.encode("utf-8"))
        out.append(EOS)
    return np.array(out, dtype=np.int64)


def init_weights(model, num_layers, std=0.02):
    g = torch.Generator().manual_seed(1234)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith(("norm.weight", "subln.weight")):
                p.fill_(1.0)
            elif ".lambda_" in name:
                p.copy_(torch.randn(p.shape, generator=g) * 0.1)   # reference init N(0, 0.1)
            elif name.endswith(("out_proj.weight", "down_proj.weight")):
                p.copy_(torch.randn(p.shape, generator=g) * std / math.sqrt(2 * num_layers))
            else:
                p.copy_(torch.randn(p.shape, generator=g) * std)


def batches(data, batch, seq, rng):
    hi = len(data) - seq - 1
    while True:
        starts = rng.integers(0, hi, size=batch)
        x = np.stack([data[s:s + seq + 1] for s in starts])
        t = torch.from_numpy(x)
        yield t[:, :-1], t[:, 1:]


@torch.no_grad()
def position_profile(model, data, seq, n_windows=32, edges=(0, 128, 256, 384, 512)):
    """Mean val loss of positions [edges[i], edges[i+1]) over windows of length seq."""
    model.eval()
    step = max(1, (len(data) - seq - 1) // n_windows)
    starts = list(range(0, len(data) - seq - 1, step))[:n_windows]
    tot = torch.zeros(seq, dtype=torch.float64)
    for i in range(0, len(starts), 4):
        xb = torch.from_numpy(np.stack([data[s:s + seq + 1] for s in starts[i:i + 4]]))
        logits = model(xb[:, :-1])
        tot += F.cross_entropy(logits.transpose(1, 2), xb[:, 1:], reduction="none").double().sum(0)
    model.train()
    tot /= len(starts)
    return {"%d-%d" % (a, b): round(float(tot[a:b].mean()), 4)
            for a, b in zip(edges[:-1], edges[1:]) if b <= seq}


@torch.no_grad()
def evaluate(model, data, seq, n_windows=64):
    model.eval()
    step = max(1, (len(data) - seq - 1) // n_windows)
    starts = list(range(0, len(data) - seq - 1, step))[:n_windows]
    x = torch.from_numpy(np.stack([data[s:s + seq + 1] for s in starts]))
    losses = []
    for i in range(0, len(starts), 16):
        xb = x[i:i + 16]
        logits = model(xb[:, :-1])
        losses.append(F.cross_entropy(logits.reshape(-1, logits.shape[-1]), xb[:, 1:].reshape(-1),
                                      reduction="sum").item())
    model.train()
    return sum(losses) / (len(starts) * seq)


def lr_at(step, total, peak, warmup, floor):
    if step < warmup:
        return peak * (step + 1) / warmup
    t = (step - warmup) / max(1, total - warmup)
    return floor + 0.5 * (peak - floor) * (1 + math.cos(math.pi * min(1.0, t)))


def sample_texts(model, prompts, n_new, temperature, seed):
    out = []
    for i, p in enumerate(prompts):
        toks = [BOS] + list(p.encode("utf-8"))
        res = generate(model, toks, n_new, temperature=temperature, seed=seed + i)
        out.append(bytes(t for t in res[1:]).decode("utf-8", errors="replace"))
    return out


SAMPLE_PROMPTS = ["The ", "Debian ", "To install a package, "]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=os.path.join(REPO, "examples", "models", "tiny-diff"))
    ap.add_argument("--steps", type=int, default=2000)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--min-lr", type=float, default=1e-4)
    ap.add_argument("--warmup", type=int, default=100)
    ap.add_argument("--weight-decay", type=float, default=0.1)
    ap.add_argument("--seed", type=int, default=20241007)
    ap.add_argument("--torch-threads", type=int, default=1,
                    help="torch.set_num_threads (BLAS threads: OPENBLAS_NUM_THREADS, default 2)")
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--kv-heads", type=int, default=2)
    ap.add_argument("--intermediate", type=int, default=704)
    ap.add_argument("--untied", action="store_true", help="separate lm_head (default: tied)")
    ap.add_argument("--eval-every", type=int, default=250)
    ap.add_argument("--init-from", default=None,
                    help="start from this checkpoint directory (its config wins) instead of random init")
    ap.add_argument("--log", default=None, help="also append the log lines to this file")
    ap.add_argument("--corpus-stats", action="store_true")
    args = ap.parse_args()

    torch.set_num_threads(args.torch_threads)
    torch.manual_seed(args.seed)
    logf = open(args.log, "a") if args.log else None

    def log(msg):
        print(msg, flush=True)
        if logf:
            logf.write(msg + "\n")
            logf.flush()

    pages = load_corpus()
    n_val = max(1, len(pages) // 20)
    train = encode_pages(pages[:-n_val])
    val = encode_pages(pages[-n_val:])
    log("corpus: %s (%s), %d pages, %d train bytes, %d val bytes"
        % (CORPUS_PACKAGE, CORPUS_LICENSE, len(pages), len(train), len(val)))
    if args.corpus_stats:
        print(pages[0][:1500])
        return

    cfg = ModelConfig(vocab_size=256, hidden_size=args.hidden, num_layers=args.layers,
                      num_heads=args.heads, num_kv_heads=args.kv_heads,
                      intermediate_size=args.intermediate, rope_theta=10000.0, rms_norm_eps=1e-5,
                      max_position_embeddings=512, tie_word_embeddings=not args.untied,
                      bos_token_id=BOS, eos_token_id=EOS, tokenizer="bytes")
    if args.init_from:
        model = load_checkpoint(args.init_from, dtype=torch.float32).train()
        cfg = model.config
        log("initialised from %s" % args.init_from)
    else:
        model = DiffTransformer(cfg)
        init_weights(model, cfg.num_layers)
    n_params = sum(p.numel() for p in model.parameters())
    log("config: %s" % json.dumps(cfg.to_dict()))
    log("parameters: %d" % n_params)

    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": args.weight_decay},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=args.lr, betas=(0.9, 0.95), eps=1e-8)
    rng = np.random.default_rng(args.seed)
    it = batches(train, args.batch, args.seq, rng)
    model.train()
    t0 = time.time()
    c0 = time.process_time()
    ema = None
    for step in range(args.steps):
        lr = lr_at(step, args.steps, args.lr, args.warmup, args.min_lr)
        for gp in opt.param_groups:
            gp["lr"] = lr
        x, y = next(it)
        logits = model(x)
        loss = F.cross_entropy(logits.reshape(-1, 256), y.reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        ema = loss.item() if ema is None else 0.98 * ema + 0.02 * loss.item()
        if step % 50 == 0 or step == args.steps - 1:
            log("step %5d  lr %.2e  loss %.4f  ema %.4f  %.1fs" % (step, lr, loss.item(), ema, time.time() - t0))
        if (step + 1) % args.eval_every == 0 or step == args.steps - 1:
            log("step %5d  val loss %.4f nats/byte" % (step, evaluate(model, val, args.seq)))
    train_s = time.time() - t0
    train_cpu_s = time.process_time() - c0

    final_train = evaluate(model, train, args.seq, n_windows=256)
    final_val = evaluate(model, val, args.seq, n_windows=256)
    log("training time %.1f s wall, %.1f s CPU; final loss (fp32 weights): train %.4f, val %.4f nats/byte"
        % (train_s, train_cpu_s, final_train, final_val))

    profile = position_profile(model, val, cfg.max_position_embeddings)
    log("val loss by position (windows of %d): %s" % (cfg.max_position_embeddings, profile))
    lambdas = [float(l.attn.lambda_full()) for l in model.layers]
    save_checkpoint(model, args.out, dtype=torch.float16, metadata={
        "corpus": "%s (%s)" % (CORPUS_PACKAGE, CORPUS_LICENSE),
        "train_steps": args.steps, "final_val_loss_fp32": "%.4f" % final_val})
    m16 = load_checkpoint(args.out, dtype=torch.float32)
    val16 = evaluate(m16, val, args.seq, n_windows=256)
    train16 = evaluate(m16, train, args.seq, n_windows=256)
    log("saved %s (%d bytes); F16 weights: train %.4f, val %.4f nats/byte"
        % (args.out, os.path.getsize(os.path.join(args.out, "model.safetensors")), train16, val16))
    log("lambda per layer: %s" % ", ".join("%.4f" % l for l in lambdas))

    m64 = load_checkpoint(args.out, dtype=torch.float64)
    samples = {"greedy": sample_texts(m64, SAMPLE_PROMPTS, 200, 0.0, 0),
               "temperature_0.8": sample_texts(m64, SAMPLE_PROMPTS, 200, 0.8, 1)}
    for kind, texts in samples.items():
        for p, t in zip(SAMPLE_PROMPTS, texts):
            log("[%s] %r" % (kind, t))
    summary = {"steps": args.steps, "batch": args.batch, "seq": args.seq, "lr": args.lr,
               "seed": args.seed, "torch_threads": args.torch_threads,
               "openblas_threads": os.environ.get("OPENBLAS_NUM_THREADS"), "parameters": n_params,
               "train_seconds": round(train_s, 1), "train_cpu_seconds": round(train_cpu_s, 1),
               "final_train_loss_fp32": round(final_train, 4), "final_val_loss_fp32": round(final_val, 4),
               "final_train_loss_f16": round(train16, 4), "final_val_loss_f16": round(val16, 4),
               "init_from": args.init_from, "val_loss_by_position": profile,
               "lambda": lambdas, "samples": samples}
    with open(os.path.join(args.out, "training_summary.json"), "w") as f:
        json.dump(summary, f, indent=2)
        f.write("\n")


if __name__ == "__main__":
    main()
