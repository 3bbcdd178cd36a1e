// Host sampling (include/diffvk/model.hpp): top-k with a given draw, and the seeded Sampler (penalties,
// top-k, top-p, min-p).
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
    throw Error(Status::invalid_argument,
                "temperature " + std::to_string(o.temperature) + " must be a finite number >= 0 (0 = greedy)");
  if (!std::isfinite(o.top_p) || !(o.top_p > 0.0f && o.top_p <= 1.0f))
    throw Error(Status::invalid_argument,
                "top_p " + std::to_string(o.top_p) + " must be a finite number in (0, 1] (1 = off)");
  if (!std::isfinite(o.min_p) || !(o.min_p >= 0.0f && o.min_p <= 1.0f))
    throw Error(Status::invalid_argument,
                "min_p " + std::to_string(o.min_p) + " must be a finite number in [0, 1] (0 = off)");
  if (!std::isfinite(o.repeat_penalty) || !(o.repeat_penalty > 0.0f && o.repeat_penalty <= 100.0f))
    throw Error(Status::invalid_argument, "repeat_penalty " + std::to_string(o.repeat_penalty) +
                                              " must be a finite number in (0, 100] (1 = off)");
  for (auto [name, v] : {std::pair{"frequency_penalty", o.frequency_penalty}, {"presence_penalty", o.presence_penalty}})
    if (!std::isfinite(v) || !(v >= -2.0f && v <= 2.0f))
      throw Error(Status::invalid_argument,
                  std::string(name) + " " + std::to_string(v) + " must be a finite number in [-2, 2] (0 = off)");
  if (o.penalty_last_n > (1u << 20))
    throw Error(Status::invalid_argument,
                "penalty_last_n " + std::to_string(o.penalty_last_n) + " must be at most 1048576");
}

Sampler::Sampler(const SamplingOptions& o) : o_(o), rng_(o.seed) { validate_sampling(o); }

bool Sampler::penalties_active() const {
  return o_.penalty_last_n > 0 &&
         (o_.repeat_penalty != 1.0f || o_.frequency_penalty != 0.0f || o_.presence_penalty != 0.0f);
}

bool Sampler::device_capable() const {
  if (penalties_active() || o_.min_p > 0.0f) return false;
  return o_.temperature <= 0.0f || (o_.top_k >= 1 && o_.top_k <= kDeviceTopKMax && o_.top_p >= 1.0f);
}

void Sampler::accept(int32_t token) {
  if (o_.penalty_last_n == 0) return;
  if (recent_.size() < o_.penalty_last_n) {
    recent_.push_back(token);
  } else {
    recent_[next_] = token;
    next_ = (next_ + 1) % recent_.size();
  }
}

float Sampler::draw() {
  float u = std::generate_canonical<float, 24>(rng_);
  return u < 1.0f ? u : 0.0f;  // generate_canonical may round up to 1
}

// The distribution sample() draws from: `ids` (most likely first) and their weights (not normalized); greedy: the
// first maximum alone.
void Sampler::distribution(const float* in, uint32_t vocab, std::vector<uint32_t>& ids, std::vector<double>& p) const {
  if (vocab == 0) throw Error(Status::invalid_argument, "sample: empty vocabulary");
  for (uint32_t i = 0; i < vocab; ++i)  // NaN would also break the ordering the sort below relies on
    if (!std::isfinite(in[i]))
      throw Error(Status::invalid_argument, "sample: logit " + std::to_string(i) + " is not finite");
  const float* logits = in;
  std::vector<float> penalized;
  if (penalties_active() && !recent_.empty()) {
    penalized.assign(in, in + vocab);
    std::vector<std::pair<int32_t, uint32_t>> counts;  // (token, count), small: at most penalty_last_n entries
    std::vector<int32_t> sorted(recent_);
    std::sort(sorted.begin(), sorted.end());
    for (size_t i = 0; i < sorted.size();) {
      size_t j = i;
      while (j < sorted.size() && sorted[j] == sorted[i]) ++j;
      counts.push_back({sorted[i], uint32_t(j - i)});
      i = j;
    }
    for (auto [t, c] : counts) {
      if (t < 0 || uint32_t(t) >= vocab) continue;  // a token of another vocabulary cannot be penalized here
      float& l = penalized[t];
      l = l > 0.0f ? l / o_.repeat_penalty : l * o_.repeat_penalty;
      l -= float(c) * o_.frequency_penalty + o_.presence_penalty;
    }
    logits = penalized.data();
  }
  if (o_.temperature <= 0.0f) {
    ids.assign(1, static_cast<uint32_t>(std::max_element(logits, logits + vocab) - logits));
    p.assign(1, 1.0);
    return;
  }
  ids.resize(vocab);
  std::iota(ids.begin(), ids.end(), 0u);
  std::sort(ids.begin(), ids.end(), [&](uint32_t a, uint32_t b) { return logits[a] > logits[b]; });
  uint32_t n = o_.top_k ? std::min(o_.top_k, vocab) : vocab;
  p.assign(n, 0.0);
  const double mx = logits[ids[0]];
  double sum = 0;
  for (uint32_t i = 0; i < n; ++i) sum += p[i] = std::exp((double(logits[ids[i]]) - mx) / o_.temperature);
  if (o_.top_p < 1.0f) {
    double acc = 0;
    uint32_t keep = 0;
    while (keep < n && acc < o_.top_p * sum) acc += p[keep++];
    n = std::max(1u, keep);
  }
  if (o_.min_p > 0.0f) {  // p[0] is the most likely token's weight (the order is descending)
    uint32_t keep = 1;
    while (keep < n && p[keep] >= double(o_.min_p) * p[0]) ++keep;
    n = keep;
  }
  p.resize(n);
  ids.resize(n);
}

int32_t Sampler::sample(const float* logits, uint32_t vocab) {
  std::vector<uint32_t> ids;
  std::vector<double> p;
  distribution(logits, vocab, ids, p);
  if (o_.temperature <= 0.0f) return static_cast<int32_t>(ids[0]);  // greedy: no draw
  std::discrete_distribution<uint32_t> dist(p.begin(), p.end());
  return static_cast<int32_t>(ids[dist(rng_)]);
}

int32_t Sampler::sample_draft(const float* logits, uint32_t vocab, int32_t draft) {
  std::vector<uint32_t> ids;
  std::vector<double> p;
  distribution(logits, vocab, ids, p);
  if (o_.temperature <= 0.0f) return static_cast<int32_t>(ids[0]);  // greedy: the draft is kept when it is the pick
  const double total = std::accumulate(p.begin(), p.end(), 0.0);
  double pd = 0;
  for (size_t i = 0; i < ids.size(); ++i)
    if (int64_t(ids[i]) == int64_t(draft)) {
      pd = p[i] / total;
      p[i] = 0;  // the residual distribution, should the draft be rejected: p without the draft, renormalized
    }
  if (pd > 0 && double(draw()) < pd) return draft;
  if (pd >= 1) return draft;  // nothing else is possible (a draw of 1 - 2^-24 may exceed a pd within rounding of 1)
  std::discrete_distribution<uint32_t> dist(p.begin(), p.end());
  return static_cast<int32_t>(ids[dist(rng_)]);
}

}  // namespace diffvk