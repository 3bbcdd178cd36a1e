#!/usr/bin/python3
"""Regenerates the config.json seed corpus for tests/fuzz/fuzz_config.cpp.

    /usr/bin/python3 tests/fuzz/make_config_corpus.py

Writes tests/fuzz/corpus/config/*.json (standard library only, deterministic). As in
make_corpus.py, ok_* files must be accepted by parse_model_config and bad_* files must be
refused with a format error naming the problem; tests/io/test_hostile_model.cpp checks that.
Only *.json files written by this script are replaced; other files (fuzzer finds) are kept.
"""
import json
import os

from corpus_io import write_corpus

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "corpus", "config")

BASE = {
    "vocab_size": 256, "hidden_size": 64, "num_layers": 2, "num_heads": 2, "num_kv_heads": 1,
    "intermediate_size": 96, "rope_theta": 10000.0, "rms_norm_eps": 1e-5,
    "max_position_embeddings": 64, "tie_word_embeddings": False,
    "bos_token_id": 2, "eos_token_id": 3, "tokenizer": "bytes",
}


def cfg(**kw):
    d = dict(BASE)
    for k, v in kw.items():
        if v is KeyError:
            d.pop(k, None)
        else:
            d[k] = v
    return json.dumps(d, indent=2).encode()


FILES = {
    # accepted
    "ok_full.json": cfg(),
    "ok_minimal.json": json.dumps({k: BASE[k] for k in (
        "vocab_size", "hidden_size", "num_layers", "num_heads", "intermediate_size",
        "max_position_embeddings")}).encode(),
    "ok_tied_mha.json": cfg(tie_word_embeddings=True, num_kv_heads=2, bos_token_id=None, eos_token_id=None),
    "ok_big_vocab.json": cfg(vocab_size=1 << 20, hidden_size=4096, num_heads=32, num_kv_heads=8),
    "ok_unknown_key.json": cfg(torch_dtype="float16"),
    "ok_whitespace.json": b"\n\t " + cfg() + b" \r\n",
    # refused
    "bad_invalid_json.json": b'{"vocab_size": 256, "hidden_size": 64,',
    "bad_trailing_garbage.json": cfg() + b"}",
    "bad_not_object.json": b"[256, 64, 2]",
    "bad_empty.json": b"",
    "bad_nul_byte.json": cfg()[:20] + b"\x00" + cfg()[20:],
    "bad_not_utf8.json": cfg(tokenizer="by\u00e9tes").replace(b"\\u00e9", b"\xe9"),
    "bad_missing_vocab.json": cfg(vocab_size=KeyError),
    "bad_zero_hidden.json": cfg(hidden_size=0),
    "bad_zero_layers.json": cfg(num_layers=0),
    "bad_zero_heads.json": cfg(num_heads=0),
    "bad_zero_kv_heads.json": cfg(num_kv_heads=0),
    "bad_zero_intermediate.json": cfg(intermediate_size=0),
    "bad_zero_context.json": cfg(max_position_embeddings=0),
    "bad_negative_vocab.json": cfg(vocab_size=-256),
    "bad_huge_vocab.json": cfg(vocab_size=1 << 40),
    "bad_u64_vocab.json": cfg().replace(b'"vocab_size": 256', b'"vocab_size": 18446744073709551615'),
    "bad_small_vocab.json": cfg(vocab_size=100, bos_token_id=None, eos_token_id=None),
    "bad_float_hidden.json": cfg(hidden_size=64.5),
    "bad_string_layers.json": cfg(num_layers="2"),
    "bad_hidden_not_div_2h.json": cfg(hidden_size=66, num_heads=4, num_kv_heads=2),
    "bad_heads_not_div_kv.json": cfg(num_heads=4, num_kv_heads=3, hidden_size=96),
    "bad_odd_head_dim.json": cfg(hidden_size=12, num_heads=2),
    "bad_rope_theta_zero.json": cfg(rope_theta=0),
    "bad_rope_theta_nan.json": cfg().replace(b'"rope_theta": 10000.0', b'"rope_theta": NaN'),
    "bad_rope_theta_huge.json": cfg(rope_theta=1e300),
    "bad_eps_one.json": cfg(rms_norm_eps=1.0),
    "bad_eps_negative.json": cfg(rms_norm_eps=-1e-5),
    "bad_tie_string.json": cfg(tie_word_embeddings="yes"),
    "bad_bos_out_of_range.json": cfg(bos_token_id=256),
    "bad_eos_negative.json": cfg(eos_token_id=-1),
    "bad_tokenizer.json": cfg(tokenizer="sentencepiece"),
    "bad_tokenizer_type.json": cfg(tokenizer=["bytes"]),
    "bad_deep_nesting.json": b'{"vocab_size": ' + b"[" * 2000 + b"]" * 2000 + b"}",
}


def main():
    write_corpus(OUT, FILES)


if __name__ == "__main__":
    main()
