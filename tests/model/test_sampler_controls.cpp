// Min-p and the repetition, frequency and presence penalties of the host Sampler
// (runtime/model/sampling.cpp), checked by hand on small logit vectors.
#include <doctest/doctest.h>

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
