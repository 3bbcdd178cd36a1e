#!/usr/bin/python3
"""Writes tests/data/tokenizer/{gpt2,gpt2-prefix,llama3,o200k}-bpe/: a tiny byte-level BPE trained here
(tokenizer.json, tokenizer_config.json) and cases.json = the ids and decoded text of the Hugging Face `tokenizers`
npm package (the reference), for TEXTS (+ special tokens inside text), with and without specials.
o200k-bpe has the structure of Phi-4-mini's tokenizer.json (the o200k split pattern in Split(Removed, invert) then
ByteLevel without regex, as meta-pytorch/tokenizers pull request 38 quotes microsoft/Phi-4-mini-instruct's; Phi-4's
added tokens with their rstrip flags, as its tokenizer_config.json gives them) and also encodes O200K_TEXTS.

Run (needs node and `npm install tokenizers` in a scratch directory; CI needs neither); names write those only:
  (mkdir -p /tmp/tok-npm && cd /tmp/tok-npm && npm install tokenizers)
  NODE_PATH=/tmp/tok-npm/node_modules /usr/bin/python3 tests/python/tokenizer/make_hf_fixtures.py [o200k-bpe ...]
"""
import collections
import json
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(__file__))
from texts import TEXTS, INVALID_UTF8, O200K_TEXTS, o200k_random_texts, random_texts  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "..", "data", "tokenizer")

GPT2_PATTERN = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
LLAMA3_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
                  r"|\s*[\r\n]+|\s+(?!\S)|\s+")
# OpenAI's o200k_base (tiktoken), as Phi-4-mini's tokenizer.json writes it.
O200K_PATTERN = (r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+"
                 r"(?i:'s|'t|'re|'ve|'m|'ll|'d)?"
                 r"|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*"
                 r"(?i:'s|'t|'re|'ve|'m|'ll|'d)?"
                 r"|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+")


def bytes_to_unicode():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, map(chr, cs)))


def train_bpe(corpus, n_merges):
    """Plain BPE on roughly pre-split words (the split only shapes which merges exist; the reference
    library does the exact encoding)."""
    b2u = bytes_to_unicode()
    words = collections.Counter(re.findall(r"'\w+| ?[^\W\d_]+| ?\d{1,3}| ?[^\s\w]+|\s+", corpus))
    seqs = {w: [b2u[b] for b in w.encode()] for w in words}
    merges = []
    for _ in range(n_merges):
        pairs = collections.Counter()
        for w, f in words.items():
            s = seqs[w]
            for a, b in zip(s, s[1:]):
                pairs[a, b] += f
        if not pairs:
            break
        (a, b), f = max(pairs.items(), key=lambda kv: (kv[1], kv[0]))
        if f < 2:
            break
        merges.append((a, b))
        for w in words:
            s, i, out = seqs[w], 0, []
            while i < len(s):
                if i + 1 < len(s) and s[i] == a and s[i + 1] == b:
                    out.append(a + b)
                    i += 2
                else:
                    out.append(s[i])
                    i += 1
            seqs[w] = out
    vocab = {}
    for b in range(256):
        vocab[b2u[b]] = len(vocab)
    for a, b in merges:
        if a + b not in vocab:
            vocab[a + b] = len(vocab)
    return vocab, merges


def added(i, content, special=True, lstrip=False, rstrip=False):
    return {"id": i, "content": content, "single_word": False, "lstrip": lstrip, "rstrip": rstrip,
            "normalized": False, "special": special}


def byte_level(use_regex):
    return {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": use_regex}


def model(vocab, merges, ignore_merges, pair_merges):
    return {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
            "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False, "ignore_merges": ignore_merges,
            "vocab": vocab, "merges": [[a, b] for a, b in merges] if pair_merges else [f"{a} {b}" for a, b in merges]}


def gpt2(vocab, merges):
    eot = len(vocab)
    tj = {"version": "1.0", "truncation": None, "padding": None,
          "added_tokens": [added(eot, "<|endoftext|>")], "normalizer": None,
          "pre_tokenizer": byte_level(True), "post_processor": byte_level(True), "decoder": byte_level(True),
          "model": model(vocab, merges, False, False)}
    cfg = {"bos_token": "<|endoftext|>", "eos_token": "<|endoftext|>", "add_bos_token": False}
    specials = [("special_inside", "Hello<|endoftext|>world <|endoftext|> again<|endoftext|>"),
                ("special_partial", "<|endoftext| <|endof")]
    return tj, cfg, specials


def gpt2_prefix(vocab, merges):
    """GPT-2 with ByteLevel add_prefix_space (as RoBERTa-style tokenizers set it)."""
    tj, cfg, specials = gpt2(vocab, merges)
    tj["pre_tokenizer"]["add_prefix_space"] = True
    return tj, cfg, specials


def llama3(vocab, merges):
    n = len(vocab)
    names = ["<|begin_of_text|>", "<|end_of_text|>", "<|eot_id|>"]
    toks = [added(n + i, c) for i, c in enumerate(names)] + [added(n + 3, "[MASK]", special=False, lstrip=True, rstrip=True)]
    bos = {"SpecialToken": {"id": names[0], "type_id": 0}}
    tj = {"version": "1.0", "truncation": None, "padding": None, "added_tokens": toks, "normalizer": None,
          "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
              {"type": "Split", "pattern": {"Regex": LLAMA3_PATTERN}, "behavior": "Isolated", "invert": False},
              byte_level(False)]},
          "post_processor": {"type": "Sequence", "processors": [
              {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": False, "use_regex": True},
              {"type": "TemplateProcessing",
               "single": [bos, {"Sequence": {"id": "A", "type_id": 0}}],
               "pair": [bos, {"Sequence": {"id": "A", "type_id": 0}}, bos, {"Sequence": {"id": "B", "type_id": 1}}],
               "special_tokens": {names[0]: {"id": names[0], "ids": [n], "tokens": [names[0]]}}}]},
          "decoder": byte_level(True), "model": model(vocab, merges, True, True)}
    cfg = {"bos_token": names[0], "eos_token": names[2], "add_bos_token": True}
    specials = [("special_inside", "<|begin_of_text|>Hi<|eot_id|> there<|end_of_text|>x"),
                ("added_strip", "fill   [MASK]   here [MASK]x[MASK]")]
    return tj, cfg, specials


def o200k(vocab, merges):
    """Phi-4-mini's structure: its added tokens (ids after this vocabulary, in Phi-4-mini's order and flags:
    the chat markers strip the whitespace after them), no normalizer, Split(o200k, Removed, invert) then ByteLevel
    without regex, ByteLevel post-processor and decoder, bos = eos = <|endoftext|> not added."""
    n = len(vocab)
    names = [("<|endoftext|>", True, False), ("<|endofprompt|>", True, False), ("<|assistant|>", True, True),
             ("<|end|>", True, True), ("<|user|>", True, True), ("<|system|>", True, True), ("<|tool|>", False, True),
             ("<|/tool|>", False, True), ("<|tool_call|>", False, True), ("<|/tool_call|>", False, True),
             ("<|tool_response|>", False, True), ("<|tag|>", True, True)]
    toks = [added(n + i, c, special=sp, rstrip=rs) for i, (c, sp, rs) in enumerate(names)]
    tj = {"version": "1.0", "truncation": None, "padding": None, "added_tokens": toks, "normalizer": None,
          "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
              {"type": "Split", "pattern": {"Regex": O200K_PATTERN}, "behavior": "Removed", "invert": True},
              {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False}]},
          "post_processor": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False,
                             "use_regex": False},
          "decoder": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False},
          "model": model(vocab, merges, False, True)}
    cfg = {"bos_token": "<|endoftext|>", "eos_token": "<|endoftext|>", "add_bos_token": False,
           "add_eos_token": False}
    specials = [("chat_phi4", "<|system|>You are Phi.<|end|><|user|>  How's 3*x^2 = 12?\n<|end|><|assistant|>\n x"),
                ("special_inside", "Hello<|endoftext|>world <|tool|> [1]<|/tool|>  <|tag|>\tend<|endofprompt|>")]
    return tj, cfg, specials + O200K_TEXTS + o200k_random_texts()


def reference(path, texts):
    req = json.dumps({"file": path, "texts": [{"name": n, "text": t} for n, t in texts]})
    out = subprocess.run(["node", os.path.join(HERE, "hf_reference.js")], input=req.encode(), check=True,
                         capture_output=True).stdout
    return json.loads(out)


def write_cases(path, reference_name, cases):
    """One case per line, so that a fixture diff reads case by case."""
    with open(path, "w") as f:
        f.write('{"reference": %s, "cases": [\n' % json.dumps(reference_name))
        f.write(",\n".join(json.dumps(c, separators=(",", ":")) for c in cases))
        f.write("\n]}\n")


def main():
    corpus = "\n".join(t for _, t in TEXTS) * 3
    with open(os.path.join(HERE, "corpus.txt"), encoding="utf-8") as f:
        corpus += f.read()
    vocab, merges = train_bpe(corpus, 400)
    # o200k-bpe: also trained on its own texts, so that they tokenize into pieces of several bytes.
    vocab_o, merges_o = train_bpe(corpus + "\n".join(t for _, t in O200K_TEXTS) * 3, 600)
    only = sys.argv[1:]
    for name, make in (("gpt2-bpe", gpt2), ("gpt2-prefix-bpe", gpt2_prefix), ("llama3-bpe", llama3),
                       ("o200k-bpe", o200k)):
        if only and name not in only:
            continue
        v, m = (vocab_o, merges_o) if name == "o200k-bpe" else (vocab, merges)
        tj, cfg, specials = make(dict(v), m)
        d = os.path.join(OUT, name)
        os.makedirs(d, exist_ok=True)
        path = os.path.join(d, "tokenizer.json")
        with open(path, "w", encoding="utf-8") as f:
            json.dump(tj, f, ensure_ascii=False, indent=1)
        with open(os.path.join(d, "tokenizer_config.json"), "w") as f:
            json.dump(cfg, f, indent=1)
        texts = TEXTS + specials + random_texts()
        u2b = {c: b for b, c in bytes_to_unicode().items()}
        cases = [{"name": r["name"], "text_hex": dict(texts)[r["name"]].encode().hex(), "add_special": r["add_special"],
                  "ids": r["ids"], "decoded_hex": r["decoded"].encode().hex(),
                  **({"pieces_hex": [bytes(u2b[c] for c in p).hex() for p in r["pieces"]]} if "pieces" in r else {})}
                 for r in reference(path, texts)]
        # Not valid UTF-8: the reference takes strings only, so these are round-trip cases (decode(encode(x)) == x,
        # with add_prefix_space's space).
        prefix = b" " if tj["pre_tokenizer"].get("add_prefix_space") else b""
        cases += [{"name": n, "text_hex": b.hex(), "add_special": False, "ids": None,
                   "decoded_hex": (b if b.startswith(b" ") else prefix + b).hex()} for n, b in INVALID_UTF8]
        version = subprocess.run(["node", "-p", "require('tokenizers/package.json').version"], capture_output=True,
                                 text=True, check=True).stdout.strip()
        write_cases(os.path.join(d, "cases.json"), "tokenizers (npm) " + version, cases)
        print(name, len(tj["model"]["vocab"]), "tokens,", len(m), "merges,", len(cases), "cases")


if __name__ == "__main__":
    main()
