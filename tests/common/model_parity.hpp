// Whole-model logits parity helpers (tests/model/test_model.cpp, tests/model/test_hf_model.cpp): docs/maths.md's bounds
// for a whole model, teacher forcing, token files.
#pragma once
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "diffvk/model.hpp"
#include "diffvk/npy.hpp"

namespace diffvk::test {

struct Parity {
  double max_abs = 0, max_ref = 0, nmse = 0, top1 = 0;
};
inline Parity parity(const std::vector<float>& got, const std::vector<float>& ref, size_t vocab) {
  Parity p;
  double se = 0, sr = 0;
  size_t agree = 0, rows = ref.size() / vocab;
  for (size_t i = 0; i < ref.size(); ++i) {
    const double e = std::isfinite(got[i]) ? std::fabs(double(got[i]) - ref[i]) : INFINITY;
    p.max_abs = std::max(p.max_abs, e);
    p.max_ref = std::max(p.max_ref, std::fabs(double(ref[i])));
    se += e * e;
    sr += double(ref[i]) * ref[i];
  }
  // Top-1: a row agrees when the arg-max is the same, or when the reference logit at the device's arg-max
  // is within twice that row's largest error of the reference maximum: a near tie in the reference that
  // any rounding inside the error bounds may flip (the bounds themselves are checked on max_abs/nmse).
  for (size_t r = 0; r < rows; ++r) {
    auto g = got.begin() + r * vocab, f = ref.begin() + r * vocab;
    const size_t ga = std::max_element(g, g + vocab) - g, fa = std::max_element(f, f + vocab) - f;
    double row_err = 0;
    for (size_t i = 0; i < vocab; ++i) row_err = std::max(row_err, std::fabs(double(g[i]) - f[i]));
    agree += ga == fa || double(f[fa]) - f[ga] <= 2 * row_err;
  }
  p.nmse = se / sr;
  p.top1 = double(agree) / rows;
  return p;
}
inline bool ok(const Parity& p, bool fp16) {
  // docs/maths.md, a whole model (logits): fp32 max abs <= 1e-4·scale; fp16 max abs <= 1e-2·scale,
  // nmse <= 5e-6 and top-1 agreement >= 99%.
  if (fp16) return p.nmse <= 5e-6 && p.max_abs <= 1e-2 * std::max(1.0, p.max_ref) && p.top1 >= 0.99;
  return p.max_abs <= 1e-4 * std::max(1.0, p.max_ref);
}

// Teacher forcing: prefill the prompt (all logits), then decode the given tokens one at a time.
inline std::vector<float> teacher_forced(Session& s, const std::vector<int32_t>& toks, size_t prompt) {
  auto out = s.prefill(std::vector<int32_t>(toks.begin(), toks.begin() + prompt), true);
  for (size_t i = prompt; i < toks.size(); ++i) {
    auto lg = s.decode(toks[i]);
    out.insert(out.end(), lg.begin(), lg.end());
  }
  return out;
}

inline std::vector<int32_t> load_tokens(const std::string& path) {
  auto v = npy_as_int64(read_npy(path));
  return std::vector<int32_t>(v.begin(), v.end());
}

}  // namespace diffvk::test
