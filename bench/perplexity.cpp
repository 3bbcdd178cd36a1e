// Perplexity and KL divergence against a base model (include/diffvk/perplexity.hpp: the windowing rule).
#include "diffvk/perplexity.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <memory>

#include "diffvk/error.hpp"
#include "diffvk/model.hpp"

namespace diffvk::bench {

namespace {
// log Σ exp(l_i) in float64, shifted by the maximum.
double log_sum_exp(const float* l, uint32_t vocab) {
  double m = l[0];
  for (uint32_t i = 1; i < vocab; ++i) m = std::max(m, double(l[i]));
  double s = 0;
  for (uint32_t i = 0; i < vocab; ++i) s += std::exp(double(l[i]) - m);
  return m + std::log(s);
}
}  // namespace

double nll_of(const float* logits, uint32_t vocab, int32_t target) {
  if (vocab == 0 || target < 0 || uint32_t(target) >= vocab)
    throw Error(Status::invalid_argument,
                "nll_of: target " + std::to_string(target) + " outside the vocabulary of " + std::to_string(vocab));
  return log_sum_exp(logits, vocab) - double(logits[target]);
}

double kl_divergence(const float* base_logits, const float* logits, uint32_t vocab) {
  if (vocab == 0) return 0;
  const double lb = log_sum_exp(base_logits, vocab), lq = log_sum_exp(logits, vocab);
  double kl = 0;
  for (uint32_t i = 0; i < vocab; ++i) {
    const double log_pb = double(base_logits[i]) - lb, log_pq = double(logits[i]) - lq;
    kl += std::exp(log_pb) * (log_pb - log_pq);
  }
  return std::max(kl, 0.0);  // rounding can leave a tiny negative sum for identical distributions
}

uint32_t argmax_of(const float* logits, uint32_t vocab) {
  uint32_t best = 0;
  for (uint32_t i = 1; i < vocab; ++i)
    if (logits[i] > logits[best]) best = i;
  return best;
}

double percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  q = std::clamp(q, 0.0, 1.0);
  std::sort(v.begin(), v.end());
  const double pos = q * double(v.size() - 1);
  const size_t lo = size_t(std::floor(pos));
  const size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (pos - double(lo)) * (v[hi] - v[lo]);
}

void MeanAccumulator::add(double x) {
  ++n_;
  const double d = x - mean_;
  mean_ += d / double(n_);
  m2_ += d * (x - mean_);
}

double MeanAccumulator::standard_error() const {
  if (n_ < 2) return 0;
  return std::sqrt(m2_ / double(n_ - 1) / double(n_));
}

uint32_t scored_per_window(uint32_t context) { return context < 2 ? 0 : context - 1 - context / 2; }

PerplexityResult perplexity(Model& model, const std::vector<int32_t>& tokens, const PerplexityOptions& options,
                            Model* base) {
  const auto t0 = std::chrono::steady_clock::now();
  const ModelConfig& cfg = model.config();
  const uint32_t V = cfg.vocab_size;
  if (base && base->config().vocab_size != V)
    throw Error(Status::invalid_argument, "perplexity: the base model's vocabulary (" +
                                              std::to_string(base->config().vocab_size) +
                                              ") differs from the model's (" + std::to_string(V) + ")");
  const uint32_t C = options.context ? options.context : default_perplexity_window(cfg.max_position_embeddings);
  if (C < 8 || C > cfg.max_position_embeddings)
    throw Error(Status::invalid_argument, "perplexity: context " + std::to_string(C) + " (--context) must be in [8, " +
                                              std::to_string(cfg.max_position_embeddings) +
                                              "] (max_position_embeddings)");
  const uint64_t windows = tokens.size() / C;
  if (windows == 0)
    throw Error(Status::invalid_argument, "perplexity: the text is " + std::to_string(tokens.size()) +
                                              " tokens, shorter than one window of " + std::to_string(C) +
                                              " (--context); give a longer text or a smaller context");
  for (size_t i = 0; i < windows * C; ++i)
    if (tokens[i] < 0 || uint32_t(tokens[i]) >= V)
      throw Error(Status::invalid_argument, "perplexity: token id " + std::to_string(tokens[i]) + " at index " +
                                                std::to_string(i) + " is outside the vocabulary [0, " +
                                                std::to_string(V) + ")");

  const SessionOptions so{C, options.chunk, false, {}};
  auto session = Session::create(model, so);
  std::unique_ptr<Session> base_session = base ? Session::create(*base, so) : nullptr;
  const uint32_t half = C / 2;
  // Fresh session, first half (its logits are not scored), then the second half with every row's logits:
  // row r of the result is position half + r.
  auto run_window = [&](Session& s, const std::vector<int32_t>& w) {
    s.reset();
    s.prefill(std::vector<int32_t>(w.begin(), w.begin() + half));
    return s.prefill(std::vector<int32_t>(w.begin() + half, w.end()), true);
  };

  MeanAccumulator nll, base_nll, kl;
  std::vector<double> kls;
  uint64_t agree = 0;
  double kl_max = 0;
  for (uint64_t k = 0; k < windows; ++k) {
    std::vector<int32_t> w(tokens.begin() + k * C, tokens.begin() + (k + 1) * C);
    if (cfg.bos_token_id >= 0 && cfg.bos_token_id < int64_t(V)) w[0] = int32_t(cfg.bos_token_id);
    const std::vector<float> lq = run_window(*session, w);
    std::vector<float> lb;
    if (base) lb = run_window(*base_session, w);
    for (uint32_t j = half; j + 1 < C; ++j) {
      const float* q = lq.data() + size_t(j - half) * V;
      nll.add(nll_of(q, V, w[j + 1]));
      if (!base) continue;
      const float* b = lb.data() + size_t(j - half) * V;
      base_nll.add(nll_of(b, V, w[j + 1]));
      const double d = kl_divergence(b, q, V);
      kl.add(d);
      kls.push_back(d);
      kl_max = std::max(kl_max, d);
      agree += argmax_of(b, V) == argmax_of(q, V);
    }
    if (options.progress) options.progress(uint32_t(k + 1), uint32_t(windows));
  }

  PerplexityResult r;
  r.context = C;
  r.windows = uint32_t(windows);
  r.tokens = tokens.size();
  r.scored = nll.count();
  r.mean_nll = nll.mean();
  r.nll_se = nll.standard_error();
  r.ppl = std::exp(r.mean_nll);
  r.ppl_se = r.ppl * r.nll_se;
  if (base) {
    r.has_base = true;
    r.base_mean_nll = base_nll.mean();
    r.base_ppl = std::exp(r.base_mean_nll);
    r.base_ppl_se = r.base_ppl * base_nll.standard_error();
    r.kl_mean = kl.mean();
    r.kl_se = kl.standard_error();
    r.kl_p99 = percentile(std::move(kls), 0.99);
    r.kl_max = kl_max;
    r.top1 = r.scored ? double(agree) / double(r.scored) : 0;
  }
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

}  // namespace diffvk::bench
