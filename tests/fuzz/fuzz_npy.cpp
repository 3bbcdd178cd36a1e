// libFuzzer harness for the .npy reader/writer (runtime/io/npy.cpp).
// Any input must either parse or throw diffvk::Error(format_error). A parsed array must convert
// (npy_as_float / npy_as_int64 by dtype) to exactly numel() elements, and float arrays must survive
// encode_npy_f32 -> parse_npy bit-exactly (for '<f4').
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "diffvk/npy.hpp"

using namespace diffvk;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  NpyArray a;
  try {
    a = parse_npy(std::vector<uint8_t>(data, data + size), "fuzz.npy");
  } catch (const Error& e) {
    if (e.status() != Status::format_error) {
      std::fprintf(stderr, "fuzz_npy: rejected with status %d, not format_error: %s\n", int(e.status()), e.what());
      std::abort();
    }
    return 0;
  }
  const uint64_t n = a.numel();
  if (n * npy_itemsize(a.dtype) != a.data.size()) {
    std::fprintf(stderr, "fuzz_npy: data size does not match the shape\n");
    std::abort();
  }
  if (a.dtype[1] == 'i') {
    if (npy_as_int64(a).size() != n) std::abort();
    return 0;
  }
  const std::vector<float> v = npy_as_float(a);
  if (v.size() != n) std::abort();
  const std::vector<uint8_t> enc = encode_npy_f32(a.shape, v.data());
  NpyArray b = parse_npy(enc, "fuzz-roundtrip.npy");  // must not throw
  if (b.dtype != "<f4" || b.shape != a.shape || b.data.size() != n * 4 ||
      (n && std::memcmp(b.data.data(), v.data(), n * 4) != 0)) {
    std::fprintf(stderr, "fuzz_npy: encode_npy_f32 -> parse_npy round trip differs\n");
    std::abort();
  }
  if (a.dtype == "<f4" && b.data != a.data) std::abort();
  return 0;
}
