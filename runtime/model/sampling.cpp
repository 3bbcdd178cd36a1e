// Host sampling (include/diffvk/model.hpp): top-k with a given draw, and the seeded Sampler (top-k, top-p).
#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include "diffvk/model.hpp"

namespace diffvk {

int32_t sample_top_k(const float* logits, uint32_t vocab, float temperature, uint32_t top_k, float u) {
  if (vocab == 0) throw Error(Status::invalid_argument, "sample: empty vocabulary");
  const uint32_t k = temperature > 0.0f && top_k ? std::min(top_k, vocab) : 1u;
  std::vector<uint32_t> idx(vocab);
  std::iota(idx.begin(), idx.end(), 0u);
  auto before = [&](uint32_t a, uint32_t b) { return logits[a] > logits[b] || (logits[a] == logits[b] && a < b); };
  std::partial_sort(idx.begin(), idx.begin() + k, idx.end(), before);
  if (k == 1) return static_cast<int32_t>(idx[0]);
  std::vector<double> w(k);
  double total = 0;
  for (uint32_t j = 0; j < k; ++j) total += w[j] = std::exp((double(logits[idx[j]]) - logits[idx[0]]) / temperature);
  const double target = double(u) * total;
  double acc = 0;
  for (uint32_t j = 0; j < k; ++j)
    if (target < (acc += w[j])) return static_cast<int32_t>(idx[j]);
  return static_cast<int32_t>(idx[k - 1]);
}

void validate_sampling(const SamplingOptions& o) {
  if (!std::isfinite(o.temperature) || o.temperature < 0.0f)
    throw Error(Status::invalid_argument, "temperature " + std::to_string(o.temperature) + " must be a finite number >= 0 (0 = greedy)");
  if (!std::isfinite(o.top_p) || !(o.top_p > 0.0f && o.top_p <= 1.0f))
    throw Error(Status::invalid_argument, "top_p " + std::to_string(o.top_p) + " must be a finite number in (0, 1] (1 = off)");
}

Sampler::Sampler(const SamplingOptions& o) : o_(o), rng_(o.seed) { validate_sampling(o); }

bool Sampler::device_capable() const {
  return o_.temperature <= 0.0f || (o_.top_k >= 1 && o_.top_k <= kDeviceTopKMax && o_.top_p >= 1.0f);
}

float Sampler::draw() {
  float u = std::generate_canonical<float, 24>(rng_);
  return u < 1.0f ? u : 0.0f;  // generate_canonical may round up to 1
}

int32_t Sampler::sample(const float* logits, uint32_t vocab) {
  if (vocab == 0) throw Error(Status::invalid_argument, "sample: empty vocabulary");
  for (uint32_t i = 0; i < vocab; ++i)  // NaN would also break the ordering the sort below relies on
    if (!std::isfinite(logits[i]))
      throw Error(Status::invalid_argument, "sample: logit " + std::to_string(i) + " is not finite");
  if (o_.temperature <= 0.0f) return static_cast<int32_t>(std::max_element(logits, logits + vocab) - logits);
  std::vector<uint32_t> idx(vocab);
  std::iota(idx.begin(), idx.end(), 0u);
  std::sort(idx.begin(), idx.end(), [&](uint32_t a, uint32_t b) { return logits[a] > logits[b]; });
  uint32_t n = o_.top_k ? std::min(o_.top_k, vocab) : vocab;
  std::vector<double> p(n);
  const double mx = logits[idx[0]];
  double sum = 0;
  for (uint32_t i = 0; i < n; ++i) sum += p[i] = std::exp((double(logits[idx[i]]) - mx) / o_.temperature);
  if (o_.top_p < 1.0f) {
    double acc = 0;
    uint32_t keep = 0;
    while (keep < n && acc < o_.top_p * sum) acc += p[keep++];
    n = std::max(1u, keep);
    p.resize(n);
  }
  std::discrete_distribution<uint32_t> dist(p.begin(), p.end());
  return static_cast<int32_t>(idx[dist(rng_)]);
}

}  // namespace diffvk