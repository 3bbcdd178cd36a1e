// The element count of a tensor shape read from a file, without overflow: one helper for the npy and
// safetensors readers (their shapes are hostile input).
#pragma once
#include <cstdint>
#include <limits>
#include <vector>

namespace diffvk {

// product(shape) into *out; false on a negative dimension or when the product exceeds 2^64 - 1.
inline bool checked_numel(const std::vector<int64_t>& shape, uint64_t* out) {
  uint64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0) return false;
    const uint64_t u = uint64_t(d);
    if (u != 0 && n > std::numeric_limits<uint64_t>::max() / u) return false;
    n *= u;
  }
  *out = n;
  return true;
}

}  // namespace diffvk
