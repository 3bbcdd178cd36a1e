#!/usr/bin/python3
"""Regenerates the GGUF seed corpus (tests/fuzz/corpus/gguf/*.gguf) for fuzz_gguf.

    /usr/bin/python3 tests/fuzz/make_gguf_corpus.py

Standard library only, deterministic. ok_* files are valid, bad_* files must be refused with a
format error; tests/io/test_fuzz_corpus.cpp ("io: fuzz seed corpus") checks exactly that.
Layout: docs/gguf.md (GGUF v3, little endian).
"""
import json
import os
import struct

DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus", "gguf")


def s(text):
    b = text.encode()
    return struct.pack("<Q", len(b)) + b


def kv_u32(key, v):
    return s(key) + struct.pack("<II", 4, v)


def kv_str(key, v):
    return s(key) + struct.pack("<I", 8) + s(v)


def kv_arr(key, elem, items):
    out = s(key) + struct.pack("<IIQ", 9, elem, len(items))
    for it in items:
        out += s(it) if elem == 8 else struct.pack("<f" if elem == 6 else "<i", it)
    return out


def tinfo(name, dims, typ, off):
    return s(name) + struct.pack("<I", len(dims)) + b"".join(struct.pack("<Q", d) for d in dims) + struct.pack("<IQ", typ, off)


def byte_chars():
    """GPT-2's byte-level alphabet: the character standing for each byte 0..255, in byte order."""
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    out, n = {}, 0
    for b in range(256):
        if b in keep:
            out[b] = chr(b)
        else:
            out[b] = chr(256 + n)
            n += 1
    return [out[b] for b in range(256)]


def pad(b, a=32):
    return b + b"\0" * ((-len(b)) % a)


def gguf(kvs, tensors, data, version=3, align=32):
    head = b"GGUF" + struct.pack("<IQQ", version, len(tensors), len(kvs)) + b"".join(kvs) + b"".join(tensors)
    return pad(head, align) + data


def main():
    os.makedirs(DIR, exist_ok=True)
    for n in os.listdir(DIR):
        if n.endswith(".gguf"):
            os.remove(os.path.join(DIR, n))
    kvs = [kv_str("general.architecture", "diffllama"), kv_u32("diffllama.block_count", 1),
           kv_arr("tokenizer.ggml.tokens", 8, ["a", "b"]), kv_arr("x.f", 6, [1.5, 2.0]), kv_arr("x.i", 5, [1, -2])]
    q8 = struct.pack("<e", 0.5) + bytes(range(32))
    q4 = struct.pack("<e", 0.25) + bytes(range(16))
    f32 = struct.pack("<4f", 1, 2, 3, 4)
    files = {
        "ok_empty": gguf([], [], b""),
        "ok_metadata": gguf(kvs, [], b""),
        "ok_tensors": gguf(kvs, [tinfo("a", [4], 0, 0), tinfo("b", [32], 8, 32), tinfo("c", [32], 2, 96),
                                 tinfo("d", [2, 2], 1, 128)],
                           pad(f32) + pad(q8) + pad(q4) + struct.pack("<4e", 1, 2, 3, 4)),
        "ok_align64": gguf([kv_u32("general.alignment", 64)], [tinfo("a", [4], 0, 0), tinfo("b", [4], 30, 64)],
                           pad(f32, 64) + b"\0" * 8, align=64),
        # Tokenizers (runtime/model/gguf_tokenizer.cpp, which fuzz_gguf runs on every parsed file): SentencePiece
        # arrays, and a byte-level BPE with its tokenizer.huggingface.json.
        "ok_tokenizer_spm": gguf([kv_str("general.architecture", "diffllama"), kv_u32("diffllama.vocab_size", 300),
                                  kv_str("tokenizer.ggml.model", "llama"),
                                  kv_arr("tokenizer.ggml.tokens", 8, ["<unk>", "<s>", "</s>", "\u2581a", "b"]),
                                  kv_arr("tokenizer.ggml.scores", 6, [0, 0, 0, -1, -2]),
                                  kv_arr("tokenizer.ggml.token_type", 5, [2, 3, 3, 1, 1]),
                                  kv_u32("tokenizer.ggml.unknown_token_id", 0), kv_u32("tokenizer.ggml.bos_token_id", 1)], [], b""),
        "ok_tokenizer_bpe": gguf([kv_str("general.architecture", "diffllama"), kv_u32("diffllama.vocab_size", 300),
                                  kv_str("tokenizer.ggml.model", "gpt2"),
                                  kv_str("tokenizer.huggingface.json", json.dumps(
                                      {"model": {"type": "BPE", "vocab": dict({c: i for i, c in enumerate(byte_chars())}, ab=256),
                                                 "merges": ["a b"]},
                                       "pre_tokenizer": {"type": "ByteLevel"}, "decoder": {"type": "ByteLevel"}}))], [], b""),
        "bad_magic": b"GGUX" + gguf([], [], b"")[4:],
        "bad_version": gguf([], [], b"", version=4),
        "bad_huge_count": b"GGUF" + struct.pack("<IQQ", 3, 1 << 40, 0),
        "bad_string_past_eof": b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + struct.pack("<Q", 1000) + b"key",
        "bad_alignment": gguf([kv_u32("general.alignment", 48)], [], b""),
        "bad_n_dims": gguf([], [tinfo("a", [1, 1, 1, 1, 1], 0, 0)], pad(f32)),
        "bad_zero_dim": gguf([], [tinfo("a", [4, 0], 0, 0)], pad(f32)),
        "bad_type": gguf([], [tinfo("a", [32], 3, 0)], pad(q8)),
        "bad_misaligned": gguf([], [tinfo("a", [4], 0, 4)], pad(f32) + pad(f32)),
        "bad_out_of_bounds": gguf([], [tinfo("a", [4], 0, 64)], pad(f32)),
        "bad_overlap": gguf([], [tinfo("a", [16], 0, 0), tinfo("b", [4], 0, 32)], b"\0" * 64),
        "bad_duplicate": gguf([], [tinfo("a", [4], 0, 0), tinfo("a", [4], 0, 32)], b"\0" * 64),
        "bad_nested_array": gguf([s("k") + struct.pack("<IIQIQ", 9, 9, 1, 4, 0)], [], b""),
    }
    for name, data in files.items():
        with open(os.path.join(DIR, name + ".gguf"), "wb") as f:
            f.write(data)


if __name__ == "__main__":
    main()
