// libFuzzer harness for the safetensors reader (runtime/io/safetensors.cpp).
// Any input must either parse or throw diffvk::Error(format_error); a parsed file must be
// self-consistent: every tensor lies inside the data section, covers product(shape) * dtype size
// bytes, and converts to floats (float dtypes) without reading out of bounds.
#include <cstdint>
#include <cstdlib>
#include <cstdio>
#include <vector>

#include "fuzz_parse.hpp"
#include "io/safetensors.hpp"

using namespace diffvk;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  SafetensorsFile f;
  if (!parse_or_format_error("fuzz_safetensors", f, [&] {
        return SafetensorsFile::from_bytes(std::vector<uint8_t>(data, data + size), "fuzz.safetensors");
      }))
    return 0;
  uint64_t covered = 0;
  for (const TensorInfo& t : f.tensors()) {
    const uint64_t n = t.numel();  // validated by the parser: must not throw
    if (t.begin > t.end || t.end > f.data_size() || t.nbytes() != n * dtype_size(t.dtype)) {
      std::fprintf(stderr, "fuzz_safetensors: inconsistent tensor accepted\n");
      std::abort();
    }
    covered += t.nbytes();
    if (f.find(t.name) != &t) std::abort();
    const TensorInfo& r = f.require(t.name, t.shape);
    if (&r != &t) std::abort();
    volatile uint8_t sink = 0;
    const uint8_t* p = f.data(t);
    for (uint64_t i = 0; i < t.nbytes(); ++i) sink = sink ^ p[i];
    if (t.dtype == DType::F32 || t.dtype == DType::F16 || t.dtype == DType::BF16) {
      const std::vector<float> v = f.to_float(t);
      if (v.size() != n) std::abort();
    } else {
      try {
        (void)f.to_float(t);
        std::abort();  // integer tensors are not convertible
      } catch (const Error&) {}
    }
  }
  if (covered != f.data_size()) {
    std::fprintf(stderr, "fuzz_safetensors: data section not covered exactly (%llu of %llu bytes)\n",
                 (unsigned long long)covered, (unsigned long long)f.data_size());
    std::abort();
  }
  (void)f.metadata();
  return 0;
}
