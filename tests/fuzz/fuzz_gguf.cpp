// libFuzzer harness for the GGUF reader (runtime/io/gguf.cpp).
// Any input must either parse or throw diffvk::Error(format_error); a parsed file must be self-consistent:
// every tensor lies inside the data section at an aligned offset, no two overlap, every value and string
// view lies inside the input, and lookups by name find the same entries. Its tokenizer keys then build a
// tokenizer or a clear error.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "fuzz_parse.hpp"
#include "io/gguf.hpp"
#include "model/gguf_tokenizer.hpp"

using namespace diffvk;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  GgufFile f;
  if (!parse_or_format_error(
          "fuzz_gguf", f, [&] { return GgufFile::from_bytes(std::vector<uint8_t>(data, data + size), "fuzz.gguf"); }))
    return 0;
  volatile uint64_t sink = 0;
  for (const GgufKV& kv : f.metadata()) {
    if (f.find_value(kv.key) != &kv.value) std::abort();
    const GgufValue& v = kv.value;
    for (char c : kv.key) sink = sink + uint8_t(c);
    if (v.type == GgufType::string) {
      for (char c : v.str) sink = sink + uint8_t(c);
    } else if (v.type == GgufType::array) {
      if (v.elem == GgufType::string) {
        if (v.strings.size() != v.count) std::abort();
        for (auto s : v.strings)
          for (char c : s) sink = sink + uint8_t(c);
      } else {
        for (uint64_t i = 0; i < v.count; ++i) sink = sink + uint64_t(v.number_at(i) != 0) + uint64_t(v.integer_at(i));
      }
    } else {
      try {
        sink = sink + uint64_t(v.as_f64("v") != 0);
      } catch (const Error&) {
        if (v.type != GgufType::boolean) std::abort();
      }
    }
  }
  std::vector<std::pair<uint64_t, uint64_t>> ranges;
  for (const GgufTensorInfo& t : f.tensors()) {
    if (f.find_tensor(t.name) != &t) std::abort();
    if (t.offset % f.alignment() != 0 || t.offset > f.data_size() || t.nbytes > f.data_size() - t.offset) {
      std::fprintf(stderr, "fuzz_gguf: inconsistent tensor accepted\n");
      std::abort();
    }
    const uint8_t* p = f.data(t);
    for (uint64_t i = 0; i < t.nbytes; ++i) sink = sink ^ p[i];
    ranges.push_back({t.offset, t.offset + t.nbytes});
  }
  std::sort(ranges.begin(), ranges.end());
  for (size_t i = 1; i < ranges.size(); ++i)
    if (ranges[i].first < ranges[i - 1].second) std::abort();

  // The tokenizer keys (runtime/model/gguf_tokenizer.cpp): a tokenizer, none, or a diffvk::Error that is not an
  // internal one; a tokenizer encodes and decodes.
  try {
    std::string why;
    if (auto t = gguf_tokenizer(f, &why)) {
      const std::vector<int32_t> ids = t->encode("Hello w\xc3\xb6rld <s> \xff 123", true);
      sink = sink + t->decode(ids.data(), ids.size()).size();
    }
  } catch (const Error& e) {
    if (e.status() == Status::internal || e.status() == Status::ok) {
      std::fprintf(stderr, "fuzz_gguf: tokenizer error with status %d: %s\n", int(e.status()), e.what());
      std::abort();
    }
  }
  return 0;
}
