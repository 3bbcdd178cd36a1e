#include "bench/check.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "io/half.hpp"

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
  const double scale = std::max(1.0, c.max_ref);
  c.ok = c.nonfinite == 0 && got.size() == ref.size() &&
         (fp16 ? (c.nmse <= 1e-6 * factor && c.max_abs <= 4e-3 * factor * scale) : c.max_abs <= 2e-5 * factor * scale);
  return c;
}

std::vector<double> cpu_row(const HostTensor& q, const HostTensor& kc, const HostTensor& vc, const HostTensor& subln,
                            const AttnCall& c, uint32_t D, uint32_t i, uint32_t h) {
  const uint32_t DV = 2 * D, g = h / (c.H / c.Hkv), keys = c.pos0 + i + 1;
  const float* qr = &q.values[size_t(i) * c.q_stride + size_t(h) * DV];
  const double scale = 1.0 / std::sqrt(double(D));
  std::vector<double> s1(keys), s2(keys);
  double m1 = -1e300, m2 = -1e300;
  for (uint32_t j = 0; j < keys; ++j) {
    const float* kr = &kc.values[(size_t(g) * c.capacity + j) * DV];
    double d1 = 0, d2 = 0;
    for (uint32_t d = 0; d < D; ++d) {
      d1 += double(qr[d]) * kr[d];
      d2 += double(qr[D + d]) * kr[D + d];
    }
    s1[j] = d1 * scale;
    s2[j] = d2 * scale;
    m1 = std::max(m1, s1[j]);
    m2 = std::max(m2, s2[j]);
  }
  double l1 = 0, l2 = 0;
  for (uint32_t j = 0; j < keys; ++j) {
    s1[j] = std::exp(s1[j] - m1);
    s2[j] = std::exp(s2[j] - m2);
    l1 += s1[j];
    l2 += s2[j];
  }
  std::vector<double> o(DV, 0.0);
  for (uint32_t j = 0; j < keys; ++j) {
    const double w = s1[j] / l1 - double(c.lambda) * s2[j] / l2;
    const float* vr = &vc.values[(size_t(g) * c.capacity + j) * DV];
    for (uint32_t d = 0; d < DV; ++d) o[d] += w * vr[d];
  }
  double ss = 0;
  for (double x : o) ss += x * x;
  const double f = double(c.gain) / std::sqrt(ss / DV + double(c.eps));
  for (uint32_t d = 0; d < DV; ++d) o[d] *= f * subln.values[d];
  return o;
}

}  // namespace diffvk::bench
