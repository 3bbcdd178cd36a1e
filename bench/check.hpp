// diffvk_bench: seeded inputs in the storage type, the float64 CPU reference (runtime/reference/, shared
// with the tests) for sampled rows and the docs/maths.md tolerance check every implementation passes
// before it is timed.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "ops/diff_attn.hpp"

namespace diffvk::bench {

// Fast deterministic approximately-normal numbers (Irwin-Hall of 4 uniforms, unit variance).
struct Rng {
  uint64_t s;
  explicit Rng(uint64_t seed) : s(seed * 0x9E3779B97F4A7C15ull + 1) {}
  uint32_t next() {
    s ^= s << 13;
    s ^= s >> 7;
    s ^= s << 17;
    return uint32_t(s >> 32);
  }
  float normal() {
    float u = 0;
    for (int i = 0; i < 4; ++i) u += float(next()) * (1.0f / 4294967296.0f);
    return (u - 2.0f) * 1.7320508f;
  }
};

// Host tensor in the storage type, with the exactly stored values as floats (for the CPU check).
struct HostTensor {
  std::vector<float> values;
  std::vector<uint8_t> bytes;
};
// Normal values, or uniform in [lo, hi) when hi > lo; rounded to fp16 when `fp16`.
HostTensor make_tensor(size_t n, bool fp16, Rng& rng, float lo = 0, float hi = 0);
std::vector<float> unpack(const std::vector<uint8_t>& bytes, bool fp16);

struct Check {
  std::string against;
  double max_abs = 0, max_ref = 0, nmse = 0;
  size_t nonfinite = 0, values = 0;
  double tolerance_factor = 1;
  bool ok = false;
};
// docs/maths.md tolerances for one kernel (fp32: max abs <= 2e-5 * max(1, max|ref|); fp16 storage: nmse <= 1e-6
// and max abs <= 4e-3 * max(1, max|ref|)), times `factor` (2 when both sides are GPU results).
// A non-finite value in `got` (NaN, ±inf) counts in `nonfinite` and fails the check.
Check compare(const std::string& against, const std::vector<float>& got, const std::vector<double>& ref, bool fp16,
              double factor);
// compare's bound on the max abs error: (fp16 ? 4e-3 : 2e-5) * max(1, max_ref) * factor.
double tolerance_bound(bool fp16, double max_ref, double factor);

// Whether the draw u lies within rel·total of a cumulative edge of the top-k weights exp((l - l_max) / temperature)
// (float64), where device sampling's float32 weights may legitimately choose the neighbouring token.
bool sample_draw_near_edge(const std::vector<float>& logits, float temperature, uint32_t k, float u, double rel);

// The selective scan's factor on the one-kernel tolerance for a call of T rows (docs/maths.md "How close is
// close enough": the state's rounding errors accumulate along the rows): max(1, T / 256).
double scan_tolerance_factor(uint32_t T);

// Double-precision differential attention + head norm for one (query row i, head h) of the KV caches
// kc, vc ([Hkv][capacity][2D]): the float64 reference's row (reference/diff_attn_ref.hpp) and head norm.
std::vector<double> cpu_row(const HostTensor& q, const HostTensor& kc, const HostTensor& vc, const HostTensor& subln,
                            const AttnCall& c, uint32_t D, uint32_t i, uint32_t h);

}  // namespace diffvk::bench
