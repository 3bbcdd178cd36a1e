#!/usr/bin/python3
"""Writes tests/data/tokenizer/spm-{unigram,bpe,unigram-nobytes}/: tiny SentencePiece models trained here (tokenizer.model,
byte_fallback on but in spm-unigram-nobytes, identity normalizer, one user-defined symbol) and cases.json = the ids and decoded bytes
of the reference (Debian python3-sentencepiece) for TEXTS, the invalid-UTF-8 texts, and user/control
symbols inside text.

Run (CI needs neither this script nor sentencepiece):
  apt-get install python3-sentencepiece
  /usr/bin/python3 tests/python/tokenizer/make_spm_fixtures.py
"""
import io
import os
import sys

import sentencepiece as spm

sys.path.insert(0, os.path.dirname(__file__))
from make_hf_fixtures import write_cases  # noqa: E402
from texts import TEXTS, INVALID_UTF8, random_texts  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "..", "data", "tokenizer")

MODELS = {
    # unigram with SentencePiece's default whitespace handling (runs collapsed, ends stripped)
    "spm-unigram": dict(model_type="unigram", vocab_size=800, remove_extra_whitespaces=True),
    # BPE as Llama 2 configures it (whitespace kept as is)
    "spm-bpe": dict(model_type="bpe", vocab_size=800, remove_extra_whitespaces=False),
    # no byte fallback: unknown characters become <unk> (runs of them one <unk>), decoded as " \u2047 "
    "spm-unigram-nobytes": dict(model_type="unigram", vocab_size=400, remove_extra_whitespaces=True, byte_fallback=False),
}
EXTRA = [("user_symbol_inside", "left<sep>right <sep> both"), ("control_not_matched", "<s> and </s> stay text")]


def main():
    with open(os.path.join(HERE, "corpus.txt"), encoding="utf-8") as f:
        corpus = f.read().splitlines() + [t for _, t in TEXTS if t.strip()]
    for name, opts in MODELS.items():
        model = io.BytesIO()
        opts = {"byte_fallback": True, **opts}
        spm.SentencePieceTrainer.train(sentence_iterator=iter(corpus * 4), model_writer=model,
                                       normalization_rule_name="identity", user_defined_symbols=["<sep>"],
                                       character_coverage=0.98, hard_vocab_limit=False, minloglevel=2, **opts)
        d = os.path.join(OUT, name)
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, "tokenizer.model"), "wb") as f:
            f.write(model.getvalue())
        sp = spm.SentencePieceProcessor(model_proto=model.getvalue())
        cases = []
        for n, text in [(n, t.encode()) for n, t in TEXTS + EXTRA + random_texts()] + INVALID_UTF8:
            for add_special in (False, True):
                ids = sp.encode(text, add_bos=add_special)
                decoded = sp.decode_ids(ids)
                cases.append({"name": n, "text_hex": text.hex(), "add_special": add_special, "ids": ids,
                              "decoded_hex": decoded.encode("utf-8", "surrogateescape").hex()})
        write_cases(os.path.join(d, "cases.json"), "sentencepiece (python3-sentencepiece) " + spm.__version__, cases)
        print(name, sp.get_piece_size(), "pieces,", len(cases), "cases")


if __name__ == "__main__":
    main()
