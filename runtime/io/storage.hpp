// Host <-> device storage type conversion: fp16 bits (round to nearest even) or fp32 as is.
#pragma once
#include <cstdint>
#include <cstring>
#include <vector>

#include "io/half.hpp"

namespace diffvk {

inline std::vector<uint8_t> to_storage(const float* v, size_t n, bool fp16) {
  std::vector<uint8_t> out(n * (fp16 ? 2 : 4));
  if (!fp16) {
    if (n) std::memcpy(out.data(), v, out.size());
    return out;
  }
  for (size_t i = 0; i < n; ++i) {
    const uint16_t h = float_to_half(v[i]);
    std::memcpy(&out[i * 2], &h, 2);
  }
  return out;
}
inline std::vector<uint8_t> to_storage(const std::vector<float>& v, bool fp16) {
  return to_storage(v.data(), v.size(), fp16);
}

inline std::vector<float> from_storage(const std::vector<uint8_t>& b, bool fp16) {
  std::vector<float> out(b.size() / (fp16 ? 2 : 4));
  if (!fp16) {
    if (!out.empty()) std::memcpy(out.data(), b.data(), out.size() * 4);
    return out;
  }
  for (size_t i = 0; i < out.size(); ++i) {
    uint16_t h;
    std::memcpy(&h, &b[i * 2], 2);
    out[i] = half_to_float(h);
  }
  return out;
}

}  // namespace diffvk
