// diffvk — perplexity of a model on a token stream, and the divergence of a quantized model from its f16
// base (`diffvk perplexity`). Part of diffvk_bench (bench/perplexity*.cpp).
//
// The rule (llama-perplexity's): the tokens are cut into floor(N / context) non-overlapping windows of
// `context` tokens (a tail shorter than a window is not used); the first token of each window is replaced
// by BOS when the model has one. Each window runs in a fresh session (reset), and only its second half is
// scored: the logits at positions j = context/2 … context − 2 predict token j + 1, so a window scores
// context − 1 − context/2 tokens (every scored token sees at least context/2 tokens before it).
// −log p(next) comes from a float64 log-softmax (max-shifted); everything accumulates in float64.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace diffvk {
class Model;
}

namespace diffvk::bench {

// ---- the maths (pure, no device) ----

// −log softmax(logits)[target] in float64: log Σ exp(l_i − max) + max − l_target. target must be < vocab.
double nll_of(const float* logits, uint32_t vocab, int32_t target);

// KL(p_base ‖ p) = Σ p_base,i · (log p_base,i − log p_i) in float64 (both log-softmaxed, max-shifted); ≥ 0.
double kl_divergence(const float* base_logits, const float* logits, uint32_t vocab);

// Index of the first maximum.
uint32_t argmax_of(const float* logits, uint32_t vocab);

// The q-quantile (q in [0, 1]) by linear interpolation between the closest ranks (numpy's default:
// position q·(n − 1) in the sorted values). 0 for an empty input.
double percentile(std::vector<double> values, double q);

// Running mean and standard error of the mean (Welford, float64): se = sample standard deviation / √n
// (llama-perplexity's sqrt((⟨x²⟩ − ⟨x⟩²) / (n − 1))); 0 while n < 2.
class MeanAccumulator {
 public:
  void add(double x);
  uint64_t count() const { return n_; }
  double mean() const { return mean_; }
  double standard_error() const;

 private:
  uint64_t n_ = 0;
  double mean_ = 0, m2_ = 0;
};

// Tokens a window of `context` tokens scores: context − 1 − context/2.
uint32_t scored_per_window(uint32_t context);

// ---- the evaluation ----

// The window of PerplexityOptions::context = 0: min(512, max_position_embeddings).
inline uint32_t default_perplexity_window(uint32_t max_position_embeddings) {
  return max_position_embeddings < 512 ? max_position_embeddings : 512;
}

struct PerplexityOptions {
  uint32_t context = 0;  // window in tokens; 0 = default_perplexity_window(max_position_embeddings)
  uint32_t chunk = 0;    // SessionOptions::chunk
  // Called after each window (done, total) — progress and cancellation (throw to stop).
  std::function<void(uint32_t, uint32_t)> progress;
};

struct PerplexityResult {
  uint32_t context = 0, windows = 0;
  uint64_t tokens = 0, scored = 0;  // tokens given, tokens scored
  double mean_nll = 0, nll_se = 0;  // nats per scored token
  double ppl = 0, ppl_se = 0;       // exp(mean_nll), ppl · nll_se
  double seconds = 0;
  // With a base model only:
  bool has_base = false;
  double base_mean_nll = 0, base_ppl = 0, base_ppl_se = 0;
  double kl_mean = 0, kl_se = 0, kl_p99 = 0, kl_max = 0;  // KL(p_base ‖ p) per scored token, nats
  double top1 = 0;                                        // fraction of scored positions whose argmax agrees
};

// Scores `tokens` with `model` (and, when `base` is given, the same windows with `base`: KL and top-1 of
// `model` against it; both must have the same vocabulary). Per window the logits of the scored half only
// are held (prefill of the first half, then of the second half with every row's logits), never more.
// Errors (invalid_argument): context < 8 or above max_position_embeddings, fewer tokens than one window,
// a token outside the vocabulary, vocabularies that differ.
PerplexityResult perplexity(Model& model, const std::vector<int32_t>& tokens, const PerplexityOptions& options = {},
                            Model* base = nullptr);

}  // namespace diffvk::bench
