// Seeded inputs of one differential-attention call in the GPU's layouts, shared by the kernel's tests
// (tests/ops/test_diff_attn.cpp) and the benchmark baselines' (tests/bench/test_baselines.cpp).
#pragma once
#include <cstdint>
#include <random>
#include <vector>

#include "reference/diff_attn_ref.hpp"
#include "gpu_test.hpp"

namespace diffvk::test {

// K [T][2·Hkv·D] and V [T][Hkv·2D] (the projections' layouts) in the cache layout [g][cap][2D]: group g's
// K1|K2 are columns [2gD, 2gD + 2D) of k. Rows T..cap-1 hold `spare` (1000: reading one wrecks the result).
struct KvCache {
  std::vector<double> k, v;
};
inline KvCache to_cache_layout(const std::vector<double>& k, const std::vector<double>& v, uint32_t T, uint32_t Hkv,
                               uint32_t D, uint32_t cap, double spare = 1000.0) {
  const uint32_t DV = 2 * D;
  KvCache c{std::vector<double>(size_t(Hkv) * cap * DV, spare), std::vector<double>(size_t(Hkv) * cap * DV, spare)};
  for (uint32_t g = 0; g < Hkv; ++g)
    for (uint32_t j = 0; j < T; ++j)
      for (uint32_t d = 0; d < DV; ++d) {
        c.k[(size_t(g) * cap + j) * DV + d] = k[size_t(j) * 2 * Hkv * D + g * DV + d];
        c.v[(size_t(g) * cap + j) * DV + d] = v[size_t(j) * Hkv * DV + g * DV + d];
      }
  return c;
}

// One call's inputs from `seed`, rounded to the storage type (the float64 reference sees what the GPU
// reads): q [S][2·H·D], k and v for T = pos0 + S positions, the norm weight subln [2D], a layer depth
// (lambda_init(depth) and the norm gain 1 - lambda_init), and k, v in the cache layout with `cap` rows.
struct AttnInputs {
  std::vector<double> q, k, v, subln;
  int depth;
  double gain;
  KvCache cache;
};
inline AttnInputs make_attn_inputs(bool fp16, uint32_t H, uint32_t Hkv, uint32_t D, uint32_t S, uint32_t T,
                                   uint32_t cap, uint64_t seed) {
  auto round = [&](std::vector<double> v) { return fp16 ? ref::round_to_f16(v) : ref::round_to_f32(v); };
  AttnInputs in;
  in.q = round(ref::random_normal(size_t(S) * 2 * H * D, seed));
  in.k = round(ref::random_normal(size_t(T) * 2 * Hkv * D, seed + 1));
  in.v = round(ref::random_normal(size_t(T) * Hkv * 2 * D, seed + 2));
  std::mt19937_64 rng(seed + 3);
  in.subln = round(random_vector(rng, 2 * D, 0.7, 1.3));
  in.depth = static_cast<int>(seed % 12);
  in.gain = 1.0 - ref::lambda_init(in.depth);
  in.cache = to_cache_layout(in.k, in.v, T, Hkv, D, cap);
  return in;
}

}  // namespace diffvk::test
