#!/usr/bin/python3
"""Regenerates the model.safetensors.index.json seed corpus for tests/fuzz/fuzz_shard_index.cpp.

    /usr/bin/python3 tests/fuzz/make_shard_index_corpus.py

Writes tests/fuzz/corpus/shard_index/*.json (standard library only, deterministic): ok_* files are
accepted by parse_shard_index, bad_* files are refused with a format error. Only *.json files written
by this script are replaced; other files (fuzzer finds, regressions) are kept.
"""
import json
import os

from corpus_io import write_corpus

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "corpus", "shard_index")


def index(wm, **extra):
    d = {"metadata": {"total_size": 1234}, "weight_map": wm}
    d.update(extra)
    return json.dumps(d, indent=2).encode()


TWO = {
    "model.embed_tokens.weight": "model-00001-of-00002.safetensors",
    "model.layers.0.self_attn.q_proj.weight": "model-00001-of-00002.safetensors",
    "model.layers.0.self_attn.k_proj.weight": "model-00002-of-00002.safetensors",
    "lm_head.weight": "model-00002-of-00002.safetensors",
}

FILES = {
    "ok_two_shards.json": index(TWO),
    "ok_one_shard.json": index({"model.norm.weight": "model.safetensors"}),
    "ok_no_metadata.json": json.dumps({"weight_map": {"a": "x.safetensors"}}).encode(),
    "ok_unicode_names.json": index({"t\u00e9nsor.\u6771": "sh\u00e4rd.safetensors"}),
    "bad_not_object.json": b'["weight_map"]',
    "bad_no_weight_map.json": json.dumps({"metadata": {}}).encode(),
    "bad_weight_map_array.json": json.dumps({"weight_map": ["a", "b"]}).encode(),
    "bad_empty_map.json": index({}),
    "bad_non_string.json": index({"a": 3}),
    "bad_slash.json": index({"a": "../model.safetensors"}),
    "bad_backslash.json": index({"a": "sub\\model.safetensors"}),
    "bad_dotdot.json": index({"a": ".."}),
    "bad_empty_name.json": index({"a": ""}),
    "bad_truncated.json": index(TWO)[:60],
    "bad_nul.json": index(TWO)[:30] + b"\x00" + index(TWO)[30:],
}


def main():
    write_corpus(OUT, FILES)


if __name__ == "__main__":
    main()
