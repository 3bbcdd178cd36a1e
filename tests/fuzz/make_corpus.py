#!/usr/bin/python3
"""Regenerates the seed corpus for fuzzing diffvk's file parsers.

    /usr/bin/python3 tests/fuzz/make_corpus.py

Writes tests/fuzz/corpus/safetensors/*.safetensors and tests/fuzz/corpus/npy/*.npy
(standard library only, deterministic output). File names say what the parser
must do: ok_* files are valid, bad_* files must be rejected with a format error;
tests/io/test_fuzz_corpus.cpp ("io: fuzz seed corpus") checks exactly that.
"""
import json
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))
ST_DIR = os.path.join(HERE, "corpus", "safetensors")
NPY_DIR = os.path.join(HERE, "corpus", "npy")


def clean(directory, suffix):
    os.makedirs(directory, exist_ok=True)
    for name in os.listdir(directory):
        if name.endswith(suffix):
            os.remove(os.path.join(directory, name))


def write(directory, name, data):
    with open(os.path.join(directory, name), "wb") as f:
        f.write(data)


# ---- safetensors ----------------------------------------------------------------

def st_raw(header, data=b""):
    if isinstance(header, str):
        header = header.encode("utf-8")
    return struct.pack("<Q", len(header)) + header + data


def st_file(tensors, metadata=None):
    """tensors: list of (name, dtype, shape, raw bytes), laid out contiguously."""
    header = {}
    if metadata is not None:
        header["__metadata__"] = metadata
    data = b""
    for name, dtype, shape, raw in tensors:
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    text = json.dumps(header, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    text += b" " * (-len(text) % 8)  # pad like the reference writer
    return st_raw(text, data)


def f32(*v):
    return struct.pack("<%df" % len(v), *v)


def f16(*v):
    return struct.pack("<%de" % len(v), *v)


def bf16(*v):
    # round-to-nearest-even truncation of the float32 bits
    out = b""
    for x in v:
        (u,) = struct.unpack("<I", struct.pack("<f", x))
        u = (u + 0x7FFF + ((u >> 16) & 1)) >> 16
        out += struct.pack("<H", u)
    return out


def make_safetensors():
    clean(ST_DIR, ".safetensors")
    w = lambda name, data: write(ST_DIR, name, data)
    w("ok_empty_header.safetensors", st_raw("{}"))
    w("ok_f32_2x3.safetensors", st_file([("weight", "F32", [2, 3], f32(1, 2, 3, 4, 5, 6))]))
    w("ok_mixed_dtypes.safetensors", st_file([
        ("a.f32", "F32", [2], f32(1.5, -2.0)),
        ("b.f16", "F16", [2, 2], f16(0.5, -1.0, 65504.0, 6e-8)),
        ("c.bf16", "BF16", [3], bf16(1.0, -3.25, 1e30)),
        ("d.i64", "I64", [2], struct.pack("<2q", -1, 1 << 40)),
        ("e.i32", "I32", [1, 2], struct.pack("<2i", 7, -8)),
        ("f.scalar", "F32", [], f32(42.0)),
    ], metadata={"format": "pt", "source": "make_corpus.py"}))
    w("ok_unicode_name.safetensors", st_file([("w\u00e9ight.\u00fc", "F16", [1], f16(2.0))]))
    w("ok_zero_size.safetensors", st_file([("empty", "F32", [0, 4], b""), ("x", "I32", [1], struct.pack("<i", 3))]))

    w("bad_short.safetensors", b"\x10\x00\x00\x00\x00")
    w("bad_header_len_huge.safetensors", struct.pack("<Q", 0xFFFFFFFFFFFFFFF0) + b"{}")
    w("bad_not_utf8.safetensors", st_raw(b'{"\xc0\x80":{}}'))
    w("bad_json_syntax.safetensors", st_raw('{"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]'))
    entry = lambda dtype, shape, b, e: {"dtype": dtype, "shape": shape, "data_offsets": [b, e]}
    w("bad_unknown_dtype.safetensors", st_raw(json.dumps({"w": entry("F64", [1], 0, 8)}), bytes(8)))
    w("bad_negative_dim.safetensors", st_raw(json.dumps({"w": entry("F32", [-1, 2], 0, 8)}), bytes(8)))
    w("bad_size_mismatch.safetensors", st_raw(json.dumps({"w": entry("F32", [3], 0, 8)}), bytes(8)))
    w("bad_overlap.safetensors",
      st_raw(json.dumps({"a": entry("F32", [2], 0, 8), "b": entry("F32", [2], 4, 12)}), bytes(12)))
    w("bad_hole.safetensors",
      st_raw(json.dumps({"a": entry("F32", [1], 0, 4), "b": entry("F32", [1], 8, 12)}), bytes(12)))
    # json.dumps cannot produce duplicate keys: write the header by hand.
    w("bad_duplicate_name.safetensors",
      st_raw('{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},'
             '"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}', bytes(8)))


# ---- npy --------------------------------------------------------------------------

def npy_raw(header, data, version=(1, 0), pad=True):
    if isinstance(header, str):
        header = header.encode("latin1")
    prefix_len = 10 if version[0] == 1 else 12
    if pad:
        header += b" " * (-(prefix_len + len(header) + 1) % 64) + b"\n"
    out = b"\x93NUMPY" + bytes(version)
    out += struct.pack("<H" if version[0] == 1 else "<I", len(header))
    return out + header + data


def npy_header(descr, shape, fortran="False"):
    return "{'descr': '%s', 'fortran_order': %s, 'shape': %s, }" % (descr, fortran, shape)


def make_npy():
    clean(NPY_DIR, ".npy")
    w = lambda name, data: write(NPY_DIR, name, data)
    w("ok_f4_2x3.npy", npy_raw(npy_header("<f4", "(2, 3)"), f32(1, 2, 3, 4, 5, 6)))
    w("ok_f8_scalar.npy", npy_raw(npy_header("<f8", "()"), struct.pack("<d", 0.1)))
    w("ok_f2_1d.npy", npy_raw(npy_header("<f2", "(3,)"), f16(1.0, -2.0, 6e-8)))
    w("ok_i8.npy", npy_raw(npy_header("<i8", "(2,)"), struct.pack("<2q", -5, 1 << 50)))
    w("ok_i4_v2.npy", npy_raw(npy_header("<i4", "(1, 2)"), struct.pack("<2i", 1, -1), version=(2, 0)))
    w("ok_v3_spacing.npy",
      npy_raw("{ \"shape\" : ( 2 , ) , \"descr\" : \"<f4\" , \"fortran_order\" : False }", f32(3, 4),
              version=(3, 0)))
    w("ok_empty.npy", npy_raw(npy_header("<f4", "(0, 3)"), b""))

    w("bad_magic.npy", b"\x93NUMPZ" + npy_raw(npy_header("<f4", "(1,)"), f32(1))[6:])
    w("bad_version.npy", npy_raw(npy_header("<f4", "(1,)"), f32(1), version=(9, 0)))
    w("bad_fortran.npy", npy_raw(npy_header("<f4", "(2, 2)", fortran="True"), f32(1, 2, 3, 4)))
    w("bad_big_endian.npy", npy_raw(npy_header(">f4", "(1,)"), struct.pack(">f", 1.0)))
    w("bad_truncated_data.npy", npy_raw(npy_header("<f4", "(4,)"), f32(1, 2, 3)))
    w("bad_header_len.npy", b"\x93NUMPY\x01\x00\xff\xff{'descr': '<f4'")
    w("bad_shape_syntax.npy", npy_raw(npy_header("<f4", "(2 2)"), f32(1, 2, 3, 4)))
    w("bad_missing_key.npy", npy_raw("{'descr': '<f4', 'shape': (1,), }", f32(1)))


if __name__ == "__main__":
    make_safetensors()
    make_npy()
    for d in (ST_DIR, NPY_DIR):
        print("%s: %d files" % (os.path.relpath(d, os.path.dirname(os.path.dirname(HERE))), len(os.listdir(d))))
