// diffvk_bench: the helpers more than one op's cases use (op_run_impl.hpp): quantized weights and int8
// activations (linear, linear_row), Q8_0 KV-cache images and the cache checks (rope_kv, kv_shift, diff_attn,
// diff_v2_attn).
#include "bench/op_run_impl.hpp"
#include "ops/kv_format.hpp"
#include "ops/linear_quant.hpp"

namespace diffvk::bench::op_detail {

std::vector<uint8_t> weight_bytes(QuantType weights, uint32_t in, uint32_t out, bool f16, std::vector<double>& w) {
  if (weights == QuantType::f16) return pack(w, f16);
  const size_t rb = quant_row_bytes(weights, in);
  std::vector<uint8_t> blocks(size_t(out) * rb);
  std::vector<float> row(in);
  for (uint32_t n = 0; n < out; ++n) {
    for (uint32_t k = 0; k < in; ++k) row[k] = float(w[size_t(n) * in + k]);
    quantize_row(weights, row.data(), in, blocks.data() + n * rb);
    dequantize_row(weights, blocks.data() + n * rb, in, row.data());
    for (uint32_t k = 0; k < in; ++k) w[size_t(n) * in + k] = row[k];
  }
  return pack_quant_matrix(weights, out, in, blocks.data());
}

// The int8 paths' activations (int8_dot): Q8_0's rule per block of 32 of v[off, off + n) (d = amax / 127,
// q = round half away; the shaders' q8_0.glsl), the values replaced by q·d. In fp32 as the shaders compute it
// (d, 1/d and v·(1/d) rounded to float): a rounding in double put values that lie within an ulp of a half-step
// on the other side, one quantum off (seen in the 20 x 16384 matmul case, 9.5e-5 against the fp32 bound).
// Vulkan lets a device's division be 2.5 ulp off (and a prologue computed in fp32 differs from the reference's
// by a few ulp): `ties` (when given, sized like v) gets d for each value whose v·(1/d) lies within
// kInt8TieWindow (relative) of a half-step, which a device may round either way, and 0 for the others.
void int8_round_blocks(std::vector<double>& v, size_t off, uint32_t n, std::vector<double>* ties) {
  constexpr double kInt8TieWindow = 2e-6;  // 16 ulp of float
  for (size_t b0 = off; b0 < off + n; b0 += 32) {
    float amax = 0;
    for (size_t k = b0; k < b0 + 32; ++k) amax = std::max(amax, std::fabs(float(v[k])));
    const float d = amax / 127.0f, id = d != 0 ? 1.0f / d : 0.0f;
    for (size_t k = b0; k < b0 + 32; ++k) {
      const float s = float(v[k]) * id;
      if (ties) {
        const double a = std::fabs(double(s)), half = std::floor(a) + 0.5;
        (*ties)[k] = std::fabs(a - half) <= kInt8TieWindow * a ? double(d) : 0.0;
      }
      v[k] = double(std::round(s)) * double(d);
    }
  }
}

double int8_tie_factor(const std::vector<double>& ties, uint32_t rows, uint32_t in, const std::vector<double>& w,
                       uint32_t out, const std::vector<double>& expect, bool fp16) {
  double slack = 0, max_ref = 0;
  for (double e : expect) max_ref = std::max(max_ref, std::fabs(e));
  for (uint32_t i = 0; i < rows; ++i)
    for (uint32_t o = 0; o < out; ++o) {
      double s = 0;
      for (uint32_t k = 0; k < in; ++k)
        if (ties[size_t(i) * in + k] != 0) s += ties[size_t(i) * in + k] * std::fabs(w[size_t(o) * in + k]);
      slack = std::max(slack, s);
    }
  const double base = tolerance_bound(fp16, max_ref, 1.0);
  return 1.0 + slack / base;
}

std::vector<uint8_t> q8_cache(std::vector<double>& x, size_t stride, uint32_t groups, uint32_t cap, uint32_t T,
                              uint32_t width, bool ring) {
  const uint64_t rows = uint64_t(groups) * cap, slots = kv_q8_scale_slots(width);
  std::vector<uint8_t> img(kv_cache_bytes(KvFormat::q8_0, true, groups, cap, width), 0x7f);
  for (uint64_t s = 0; s < rows * slots; ++s)
    img[rows * width + 2 * s] = 0x00, img[rows * width + 2 * s + 1] = 0x64;  // 1024
  std::vector<float> f(width), y(width);
  std::vector<uint8_t> blocks(quant_row_bytes(QuantType::q8_0, width));
  for (uint32_t g = 0; g < groups; ++g)
    for (uint32_t j = 0; j < T; ++j) {
      double* row = &x[size_t(j) * stride + size_t(g) * width];
      for (uint32_t e = 0; e < width; ++e) f[e] = static_cast<float>(row[e]);
      quantize_row(QuantType::q8_0, f.data(), width, blocks.data());
      dequantize_row(QuantType::q8_0, blocks.data(), width, y.data());
      for (uint32_t e = 0; e < width; ++e) row[e] = y[e];
      if (ring && uint64_t(j) + cap < T) continue;  // overwritten by a later position
      const uint64_t r = uint64_t(g) * cap + (ring ? j % cap : j);
      for (uint32_t b = 0; b < width / 32; ++b) {
        std::memcpy(&img[r * width + 32 * b], &blocks[b * kQ8_0BlockBytes + 2], 32);
        std::memcpy(&img[rows * width + (r * slots + b) * 2], &blocks[b * kQ8_0BlockBytes], 2);
      }
    }
  return img;
}

std::vector<double> q8_cache_values(const uint8_t* img, uint32_t groups, uint32_t cap, uint32_t width) {
  const uint64_t rows = uint64_t(groups) * cap, slots = kv_q8_scale_slots(width);
  std::vector<double> out(rows * width);
  for (uint64_t r = 0; r < rows; ++r)
    for (uint32_t e = 0; e < width; ++e) {
      const uint8_t* s = &img[rows * width + (r * slots + e / 32) * 2];
      out[r * width + e] = double(int8_t(img[r * width + e])) * half_to_float(uint16_t(s[0] | s[1] << 8));
    }
  return out;
}

void check_cache(const std::vector<uint8_t>& b, VkDeviceSize off, const std::vector<uint8_t>& pattern,
                 const std::vector<bool>& written, size_t es, std::vector<float>& got, size_t& pad) {
  for (size_t i = 0; i < written.size(); ++i) {
    if (written[i])
      got.push_back(value_at(b, off / es + i, es));
    else
      pad += std::memcmp(&b[off + i * es], pattern.data() + i * es, es) != 0;
  }
}

void check_q8_cache(const std::vector<uint8_t>& b, VkDeviceSize off, const std::vector<uint8_t>& pattern,
                    const std::vector<bool>& written, uint32_t rows, uint32_t width, std::vector<float>& got,
                    size_t& pad) {
  const std::vector<double> vals = q8_cache_values(&b[off], 1, rows, width);
  const uint64_t sb = uint64_t(kv_q8_scale_slots(width)) * 2, qb = uint64_t(rows) * width;
  for (uint64_t r = 0; r < rows; ++r) {
    for (uint64_t e = r * width; e < (r + 1) * width; ++e) {
      if (written[e])
        got.push_back(static_cast<float>(vals[e]));
      else
        pad += b[off + e] != pattern[e];
    }
    if (!written[r * width]) pad += std::memcmp(&b[off + qb + r * sb], &pattern[qb + r * sb], sb) != 0;
  }
}

std::vector<float> q8_boundary_steps(const std::vector<double>& exact, const std::vector<bool>& written,
                                     uint32_t width) {
  std::vector<float> steps;
  for (size_t b0 = 0; b0 < exact.size(); b0 += 32) {
    float amax = 0;
    for (size_t i = b0; i < b0 + 32; ++i) amax = std::max(amax, std::fabs(static_cast<float>(exact[i])));
    const float d = amax / 127.0f, id = d != 0 ? 1.0f / d : 0.0f;
    for (size_t i = b0; i < b0 + 32; ++i) {
      if (!written[i]) continue;
      const float t = std::fabs(static_cast<float>(exact[i]) * id);
      steps.push_back(std::fabs(t - std::floor(t) - 0.5f) < 1e-3f ? half_to_float(float_to_half(d)) : 0.0f);
    }
  }
  (void)width;
  return steps;
}
void accept_boundary_flips(std::vector<float>& got, const std::vector<double>& expect, size_t first,
                           const std::vector<float>& steps) {
  for (size_t j = 0; j < steps.size() && first + j < got.size() && first + j < expect.size(); ++j)
    if (steps[j] > 0 && std::fabs(got[first + j] - expect[first + j]) <= steps[j] * 1.001)
      got[first + j] = static_cast<float>(expect[first + j]);
}

}  // namespace diffvk::bench::op_detail
