// diffvk_bench: what the preparations of OpRunner (op_run.cpp, op_prepare.cpp) share: seeded inputs in the
// storage type, one arena buffer per case, and the Prepared case the common run checks, replays and times.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <memory>
#include <random>

#include "bench/op_cases.hpp"
#include "io/half.hpp"
#include "ops/attn_probs.hpp"
#include "ops/diff_attn.hpp"
#include "ops/embed.hpp"
#include "ops/head_rmsnorm.hpp"
#include "ops/rope_kv.hpp"
#include "ops/kv_shift.hpp"
#include "ops/silu_mul.hpp"
#include "reference/diff_attn_ref.hpp"
#include "vk/gpu.hpp"

namespace diffvk::bench::op_detail {

constexpr uint32_t kPoison = 0x7fc07fc0u;  // quiet NaN in fp16 and (high half) fp32

inline std::vector<double> uniform(std::mt19937_64& rng, size_t n, double lo, double hi) {
  std::uniform_real_distribution<double> d(lo, hi);
  std::vector<double> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}
inline std::vector<double> rounded(std::vector<double> v, bool f16) { return f16 ? ref::round_to_f16(v) : ref::round_to_f32(v); }

inline std::vector<uint8_t> pack(const std::vector<double>& v, bool f16) {
  std::vector<uint8_t> out(v.size() * (f16 ? 2 : 4));
  for (size_t i = 0; i < v.size(); ++i) {
    if (f16) {
      const uint16_t h = float_to_half(float(v[i]));
      std::memcpy(&out[i * 2], &h, 2);
    } else {
      const float f = float(v[i]);
      std::memcpy(&out[i * 4], &f, 4);
    }
  }
  return out;
}

// One device buffer cut into aligned sub-ranges (non-zero binding offsets are part of every case).
struct Arena {
  VkDeviceSize align, size = 0;
  std::unique_ptr<Buffer> buf;
  explicit Arena(const Device& dev) : align(std::max<VkDeviceSize>(dev.caps().min_storage_buffer_offset_alignment, 16)) {}
  VkDeviceSize take(VkDeviceSize bytes, VkDeviceSize extra_offset = 0) {
    const VkDeviceSize off = size + extra_offset;
    size = (off + bytes + align - 1) / align * align;
    return off;
  }
  void create(Device& dev, const char* what) { buf = std::make_unique<Buffer>(dev, std::max<VkDeviceSize>(size, 16), MemoryDomain::device, what); }
  BufferRange range(VkDeviceSize off, VkDeviceSize bytes) const { return buf->range(off, bytes); }
};

// What an op's preparation hands to the common run: the program, how to reset its outputs before a run
// (poison, in-place residual), how to read the outputs, and the values to check.
struct Prepared {
  Arena arena;
  bool timestamps = false;  // bench mode on a device with timestamp queries: the program records them
  std::unique_ptr<Program> prog;
  std::function<void()> reset;
  VkDeviceSize out_off = 0, out_bytes = 0;  // the bytes compared across replays
  // From the downloaded output bytes: the checked values (same order as expect) and the count of
  // padding elements that no longer hold the poison.
  std::function<std::vector<float>(const std::vector<uint8_t>&, size_t&)> extract;
  std::vector<double> expect;
  uint64_t bytes = 0;
  double flops = 0;
  std::string detail;
  explicit Prepared(const Device& dev) : arena(dev) {}
};

// Values of `count` elements of `elem_bytes` each (2: fp16 bits, 4: float32).
inline float value_at(const std::vector<uint8_t>& b, size_t i, size_t es) {
  if (es == 2) {
    uint16_t h;
    std::memcpy(&h, &b[i * 2], 2);
    return half_to_float(h);
  }
  float f;
  std::memcpy(&f, &b[i * 4], 4);
  return f;
}
inline bool poisoned(const std::vector<uint8_t>& b, size_t i, size_t es) {
  const uint32_t p = kPoison;
  return std::memcmp(&b[i * es], &p, es) == 0;
}

// A dense output of n elements of es bytes at off: poisoned before each run, every element checked.
inline void dense_output(Prepared& p, VkDeviceSize off, VkDeviceSize bytes, size_t n, size_t es) {
  Buffer* buf = p.arena.buf.get();
  p.reset = [=] { buf->fill(off, bytes, kPoison); };
  p.out_off = off, p.out_bytes = bytes;
  p.extract = [=](const std::vector<uint8_t>& b, size_t&) {
    std::vector<float> got(n);
    for (size_t i = 0; i < n; ++i) got[i] = value_at(b, i, es);
    return got;
  };
}

void prepare_head_rmsnorm(Device& dev, const HeadRmsNormKernel& kernel, const OpCase& c, Prepared& p);
void prepare_silu_mul(Device& dev, const SiluMulKernel& kernel, const OpCase& c, Prepared& p);
void prepare_embed(Device& dev, const EmbedKernel& kernel, const OpCase& c, Prepared& p);
// A Q8_0 KV cache image (ops/kv_format.hpp: quants, then the padded fp16 scales) of `groups` x `cap` rows of
// `width`: row (g, j < T) is x[j·stride + g·width …], which is rounded in place through GGUF's Q8_0 (the
// reference then sees the dequantized values); rows T … cap − 1 are poisoned (quants 127, scale 1024).
std::vector<uint8_t> q8_cache(std::vector<double>& x, size_t stride, uint32_t groups, uint32_t cap, uint32_t T, uint32_t width);
// The values of a Q8_0 cache image, [groups][cap][width].
std::vector<double> q8_cache_values(const uint8_t* img, uint32_t groups, uint32_t cap, uint32_t width);
void prepare_rope_kv(Device& dev, RopeKvKernel& kernel, const OpCase& c, Prepared& p);
void prepare_kv_shift(Device& dev, KvShiftKernel& kernel, const OpCase& c, Prepared& p);
void prepare_diff_attn(Device& dev, const DiffAttnKernel& kernel, const OpCase& c, Prepared& p);
void prepare_diff_v2_attn(Device& dev, const DiffAttnKernel& kernel, const OpCase& c, Prepared& p);
void prepare_attn_probs(Device& dev, const AttnProbsKernel& kernel, const OpCase& c, Prepared& p);

}  // namespace diffvk::bench::op_detail
