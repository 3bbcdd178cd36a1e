// Min-p and the repetition, frequency and presence penalties of the host Sampler
// (runtime/model/sampling.cpp), checked by hand on small logit vectors.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <set>
#include <vector>

#include "diffvk/model.hpp"

using namespace diffvk;

namespace {
int32_t greedy(SamplingOptions o, const std::vector<float>& logits, const std::vector<int32_t>& seen) {
  Sampler s(o);
  for (int32_t t : seen) s.accept(t);
  return s.sample(logits.data(), uint32_t(logits.size()));
}
}  // namespace

TEST_CASE("sampling: repetition, frequency and presence penalties change the greedy choice as stated") {
  const std::vector<float> l{2.0f, 1.9f, -1.0f, -1.2f};
  SamplingOptions o;
  CHECK(greedy(o, l, {0, 0}) == 0);  // no penalty
  o.repeat_penalty = 2.0f;           // 2 / 2 = 1 < 1.9
  CHECK(greedy(o, l, {0}) == 1);
  o.repeat_penalty = 1.0f;
  o.frequency_penalty = 0.3f;  // 2 - 2 x 0.3 = 1.4 < 1.9, but one occurrence: 1.7 < 1.9 too
  CHECK(greedy(o, l, {0, 0}) == 1);
  o.frequency_penalty = 0.05f;  // 2 - 0.05 = 1.95 > 1.9; twice: 1.9, a tie resolved to the lower index
  CHECK(greedy(o, l, {0}) == 0);
  o.frequency_penalty = 0.0f;
  o.presence_penalty = 0.2f;  // 1.8 < 1.9 however often it was seen
  CHECK(greedy(o, l, {0, 0, 0}) == 1);
  o.presence_penalty = -1.0f;  // a negative presence penalty favours seen tokens
  CHECK(greedy(o, l, {1}) == 1);
  // A negative logit is multiplied by the repeat penalty: -1 x 0.5 = -0.5 > -1.2, and the others are out.
  SamplingOptions r;
  r.repeat_penalty = 0.5f;
  CHECK(greedy(r, {-1.0f, -0.8f}, {0}) == 0);
  // The penalties look back penalty_last_n tokens only.
  o = SamplingOptions{};
  o.repeat_penalty = 2.0f;
  o.penalty_last_n = 1;
  CHECK(greedy(o, l, {0, 3}) == 0);
  CHECK(greedy(o, l, {3, 0}) == 1);
  o.penalty_last_n = 0;
  CHECK(greedy(o, l, {0}) == 0);
  // A token of another vocabulary is ignored, not an error.
  o.penalty_last_n = 64;
  CHECK(greedy(o, l, {99, -5}) == 0);
  // Neither min-p nor a penalty can run on the device.
  CHECK(Sampler(SamplingOptions{}).device_capable());
  CHECK_FALSE(Sampler(o).device_capable());
  SamplingOptions m;
  m.min_p = 0.1f;
  CHECK_FALSE(Sampler(m).device_capable());
}

TEST_CASE("sampling: min-p keeps the tokens within min_p of the most likely one, and a seed repeats") {
  // Probabilities at temperature 1: token 0 has weight 1, tokens 1-3 exp(-1) = 0.37, token 4 exp(-3) = 0.05.
  const std::vector<float> l{0.0f, -1.0f, -1.0f, -1.0f, -3.0f};
  SamplingOptions o;
  o.temperature = 1.0f;
  o.min_p = 0.3f;  // keeps 0-3, never 4
  std::set<int32_t> seen;
  for (uint64_t seed = 0; seed < 200; ++seed) {
    o.seed = seed;
    Sampler s(o);
    seen.insert(s.sample(l.data(), uint32_t(l.size())));
  }
  CHECK(seen == std::set<int32_t>{0, 1, 2, 3});
  o.min_p = 0.5f;  // 0.37 < 0.5: only token 0
  for (uint64_t seed = 0; seed < 50; ++seed) {
    o.seed = seed;
    Sampler s(o);
    CHECK(s.sample(l.data(), uint32_t(l.size())) == 0);
  }
  // A fixed seed gives the same sequence.
  o.min_p = 0.01f;
  o.seed = 7;
  Sampler a(o), b(o);
  for (int i = 0; i < 32; ++i) CHECK(a.sample(l.data(), 5) == b.sample(l.data(), 5));
}

TEST_CASE("sampling: out-of-range controls are refused naming the field") {
  auto refused = [](SamplingOptions o, const char* name) {
    CAPTURE(name);
    CHECK_THROWS_WITH_AS(Sampler{o}, doctest::Contains(name), Error);
  };
  SamplingOptions o;
  o.min_p = 1.5f;
  refused(o, "min_p");
  o = {};
  o.repeat_penalty = 0.0f;
  refused(o, "repeat_penalty");
  o = {};
  o.frequency_penalty = 3.0f;
  refused(o, "frequency_penalty");
  o = {};
  o.presence_penalty = -2.5f;
  refused(o, "presence_penalty");
  o = {};
  o.penalty_last_n = (1u << 20) + 1;
  refused(o, "penalty_last_n");
}

// Sampler::sample_draft (speculative decoding's rule for a draft proposed with certainty): the draft is kept with
// probability p(draft), else a token is drawn from p without it, so every token's frequency is p's. Seeded draws, so
// the counts are the same on every run (the bounds, 6 standard deviations, cannot flake); a rule that drew the
// replacement from the whole of p would give the draft p(2 - p), and is caught.
TEST_CASE("sampling: the speculative rule for a drafted token leaves each token's frequency that of plain sampling") {
  const std::vector<float> l{1.2f, 0.4f, 0.3f, -0.5f, -2.0f, 0.9f};
  const uint32_t V = uint32_t(l.size());
  constexpr int kDraws = 40000;
  auto counts = [&](Sampler& s, int32_t draft) {
    std::vector<double> f(V, 0.0);
    for (int i = 0; i < kDraws; ++i) {
      const int32_t t = draft < 0 ? s.sample(l.data(), V) : s.sample_draft(l.data(), V, draft);
      REQUIRE((t >= 0 && uint32_t(t) < V));
      f[t] += 1.0 / kDraws;
    }
    return f;
  };
  // Temperature alone: p is the softmax of l / T, exactly.
  SamplingOptions o;
  o.temperature = 0.8f;
  o.seed = 11;
  std::vector<double> p(V);
  double z = 0;
  for (uint32_t i = 0; i < V; ++i) z += p[i] = std::exp(double(l[i]) / 0.8);
  for (double& x : p) x /= z;
  for (int32_t draft : {0, 1, 4}) {
    Sampler s(o);
    const std::vector<double> f = counts(s, draft);
    for (uint32_t i = 0; i < V; ++i) {
      CAPTURE(draft);
      CAPTURE(i);
      CHECK(std::fabs(f[i] - p[i]) <= 6 * std::sqrt(p[i] * (1 - p[i]) / kDraws) + 1e-12);
    }
  }
  // Top-k, top-p, min-p and a penalty (the draft may be outside what they keep): the same frequencies as plain
  // sample()'s, within the bound of two independent counts.
  for (int config = 0; config < 4; ++config) {
    SamplingOptions c;
    c.temperature = 1.0f;
    if (config == 0) c.top_k = 3;
    if (config == 1) c.top_p = 0.8f;
    if (config == 2) c.min_p = 0.3f;
    if (config == 3) c.repeat_penalty = 1.5f;
    for (int32_t draft : {0, 2, 4}) {
      c.seed = 100 + config;
      Sampler plain(c);
      c.seed += 50;
      Sampler spec(c);
      spec.accept(0), plain.accept(0);  // the penalty's history (no effect on the other configurations)
      const std::vector<double> want = counts(plain, -1), got = counts(spec, draft);
      for (uint32_t i = 0; i < V; ++i) {
        CAPTURE(config);
        CAPTURE(draft);
        CAPTURE(i);
        const double q = std::max(want[i], 1.0 / kDraws);
        CHECK(std::fabs(got[i] - want[i]) <= 6 * std::sqrt(2 * q * (1 - q) / kDraws));
      }
    }
  }
  // Greedy: the first maximum, kept as the draft only when it is that.
  Sampler g(SamplingOptions{});
  CHECK(g.sample_draft(l.data(), V, 0) == 0);
  CHECK(g.sample_draft(l.data(), V, 5) == 0);
}
