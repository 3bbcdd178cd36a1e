#include "bench/check.hpp"

#include <algorithm>
#include <numeric>
#include <cmath>
#include <cstring>

#include "io/half.hpp"
#include "reference/diff_attn_ref.hpp"

namespace diffvk::bench {

HostTensor make_tensor(size_t n, bool fp16, Rng& rng, float lo, float hi) {
  HostTensor t;
  t.values.resize(n);
  t.bytes.resize(n * (fp16 ? 2 : 4));
  for (size_t i = 0; i < n; ++i) {
    float x = hi > lo ? lo + (hi - lo) * float(rng.next()) * (1.0f / 4294967296.0f) : rng.normal();
    if (fp16) {
      const uint16_t h = float_to_half(x);
      x = half_to_float(h);
      std::memcpy(&t.bytes[i * 2], &h, 2);
    } else {
      std::memcpy(&t.bytes[i * 4], &x, 4);
    }
    t.values[i] = x;
  }
  return t;
}
std::vector<float> unpack(const std::vector<uint8_t>& b, bool fp16) {
  std::vector<float> v(b.size() / (fp16 ? 2 : 4));
  for (size_t i = 0; i < v.size(); ++i) {
    if (fp16) {
      uint16_t h;
      std::memcpy(&h, &b[i * 2], 2);
      v[i] = half_to_float(h);
    } else {
      std::memcpy(&v[i], &b[i * 4], 4);
    }
  }
  return v;
}

Check compare(const std::string& against, const std::vector<float>& got, const std::vector<double>& ref, bool fp16,
              double factor) {
  Check c;
  c.against = against;
  c.tolerance_factor = factor;
  c.values = got.size();
  double num = 0, den = 0;
  for (size_t i = 0; i < got.size() && i < ref.size(); ++i) {
    if (!std::isfinite(got[i])) {
      ++c.nonfinite;
      continue;
    }
    const double e = std::fabs(double(got[i]) - ref[i]);
    c.max_abs = std::max(c.max_abs, e);
    c.max_ref = std::max(c.max_ref, std::fabs(ref[i]));
    num += e * e;
    den += ref[i] * ref[i];
  }
  c.nmse = den > 0 ? num / den : (num > 0 ? 1 : 0);
  c.ok = c.nonfinite == 0 && got.size() == ref.size() && (!fp16 || c.nmse <= 1e-6 * factor) &&
         c.max_abs <= tolerance_bound(fp16, c.max_ref, factor);
  return c;
}

double tolerance_bound(bool fp16, double max_ref, double factor) {
  return (fp16 ? 4e-3 : 2e-5) * std::max(1.0, max_ref) * factor;
}

double scan_tolerance_factor(uint32_t T) { return std::max(1.0, double(T) / 256.0); }

bool sample_draw_near_edge(const std::vector<float>& logits, float temperature, uint32_t k, float u, double rel) {
  std::vector<uint32_t> idx(logits.size());
  std::iota(idx.begin(), idx.end(), 0u);
  std::stable_sort(idx.begin(), idx.end(), [&](uint32_t a, uint32_t b) { return logits[a] > logits[b]; });
  k = std::min<uint32_t>(k, uint32_t(logits.size()));
  std::vector<double> w(k);
  double total = 0;
  for (uint32_t j = 0; j < k; ++j) total += w[j] = std::exp((double(logits[idx[j]]) - logits[idx[0]]) / temperature);
  double acc = 0;
  for (uint32_t j = 0; j < k; ++j) {
    acc += w[j];
    if (std::fabs(double(u) * total - acc) <= rel * total) return true;
  }
  return false;
}

std::vector<double> cpu_row(const HostTensor& q, const HostTensor& kc, const HostTensor& vc, const HostTensor& subln,
                            const AttnCall& c, uint32_t D, uint32_t i, uint32_t h) {
  // The one float64 reference (runtime/reference/), on the cache layout [Hkv][capacity][2D].
  const uint32_t DV = 2 * D, g = h / (c.H / c.Hkv);
  const size_t kv0 = size_t(g) * c.capacity * DV;
  std::vector<double> o(DV);
  ref::diff_attention_row(&q.values[size_t(i) * c.q_stride + size_t(h) * DV], &kc.values[kv0], DV, &vc.values[kv0], DV,
                          int(c.pos0 + i + 1), int(D), double(c.lambda), o.data());
  const std::vector<double> w(subln.values.begin(), subln.values.begin() + DV);
  ref::head_rmsnorm_row(o.data(), int(D), w.data(), double(c.gain), double(c.eps));
  return o;
}

}  // namespace diffvk::bench
