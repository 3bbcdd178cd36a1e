// bench::perplexity (include/diffvk/perplexity.hpp): the maths against hand-computed values, and the
// windowed evaluation against a direct computation from whole-window prefills on a synthesized tiny model.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <vector>

#include "diffvk/perplexity.hpp"
#include "gpu_test.hpp"
#include "model_fixture.hpp"

using namespace diffvk;
using doctest::Approx;

TEST_CASE("perplexity: log-softmax NLL by hand") {
  const float two[] = {0.0f, 0.0f};
  CHECK(bench::nll_of(two, 2, 0) == Approx(std::log(2.0)).epsilon(1e-15));
  const float three[] = {1.0f, 2.0f, 3.0f};
  // log(e + e² + e³) − 3 = log(1 + e⁻¹ + e⁻²)
  CHECK(bench::nll_of(three, 3, 2) == Approx(0.40760596444438).epsilon(1e-12));
  CHECK(bench::nll_of(three, 3, 0) == Approx(2.40760596444438).epsilon(1e-12));
  // Max-shifted: no overflow at large logits.
  const float big[] = {1000.0f, 1000.0f};
  CHECK(bench::nll_of(big, 2, 1) == Approx(std::log(2.0)).epsilon(1e-12));  // (1000 + ln 2) − 1000 keeps ~13 digits
  CHECK_THROWS_AS(bench::nll_of(three, 3, 3), Error);
  CHECK_THROWS_AS(bench::nll_of(three, 3, -1), Error);
}

TEST_CASE("perplexity: KL divergence and argmax by hand") {
  // p_base = (1/2, 1/2), p = (1/4, 3/4): KL = ½ ln 2 + ½ ln(2/3) = ½ ln(4/3).
  const float base[] = {0.0f, 0.0f};
  const float q[] = {0.0f, float(std::log(3.0))};
  CHECK(bench::kl_divergence(base, q, 2) == Approx(0.5 * std::log(4.0 / 3.0)).epsilon(1e-7));
  // KL(p ‖ q) is not symmetric: KL(q ‖ p_base) = ¼ ln(1/2) + ¾ ln(3/2).
  CHECK(bench::kl_divergence(q, base, 2) == Approx(0.25 * std::log(0.5) + 0.75 * std::log(1.5)).epsilon(1e-7));
  // Identical distributions (up to a shift of the logits): 0, never negative.
  const float a[] = {1.0f, 2.0f, 3.0f}, b[] = {11.0f, 12.0f, 13.0f};
  CHECK(bench::kl_divergence(a, a, 3) == 0.0);
  CHECK(bench::kl_divergence(a, b, 3) == Approx(0.0).epsilon(1e-12));
  CHECK(bench::kl_divergence(a, b, 3) >= 0.0);
  const float m[] = {1.0f, 3.0f, 3.0f, 2.0f};
  CHECK(bench::argmax_of(m, 4) == 1);  // the first maximum
}

TEST_CASE("perplexity: percentile and the standard error of the mean") {
  CHECK(bench::percentile({}, 0.99) == 0.0);
  CHECK(bench::percentile({7.0}, 0.99) == 7.0);
  CHECK(bench::percentile({4.0, 1.0, 3.0, 2.0}, 0.5) == Approx(2.5));
  CHECK(bench::percentile({4.0, 1.0, 3.0, 2.0}, 0.0) == 1.0);
  CHECK(bench::percentile({4.0, 1.0, 3.0, 2.0}, 1.0) == 4.0);
  std::vector<double> v(100);
  std::iota(v.begin(), v.end(), 1.0);
  std::shuffle(v.begin(), v.end(), std::mt19937(3));
  CHECK(bench::percentile(v, 0.99) == Approx(99.01));  // position 0.99 · 99 = 98.01: 99 + 0.01 · (100 − 99)
  bench::MeanAccumulator acc;
  CHECK(acc.standard_error() == 0.0);
  for (double x : {1.0, 2.0, 3.0, 4.0}) acc.add(x);
  CHECK(acc.count() == 4);
  CHECK(acc.mean() == Approx(2.5));
  CHECK(acc.standard_error() == Approx(std::sqrt(5.0 / 3.0 / 4.0)).epsilon(1e-14));  // sample variance 5/3, n = 4
  CHECK(bench::scored_per_window(512) == 255);
  CHECK(bench::scored_per_window(9) == 4);
  CHECK(bench::scored_per_window(8) == 3);
}

TEST_CASE("perplexity: windows of a tiny model match whole-window prefills") {
  auto ctx = test::make_context();
  test::TempDir tmp("diffvk-ppl");
  const std::string dir = tmp / "model";
  test::write_tiny_model(dir);  // max_pos 64, bos 2
  auto model = Model::load(*ctx, dir);
  const uint32_t V = model->config().vocab_size, C = 16;
  std::mt19937 rng(7);
  std::vector<int32_t> tokens(2 * C + 5);  // two windows and a tail that is not used
  for (auto& t : tokens) t = int32_t(rng() % V);
  bench::PerplexityOptions po;
  po.context = C;
  uint32_t calls = 0;
  po.progress = [&](uint32_t done, uint32_t total) {
    ++calls;
    CHECK(total == 2);
    CHECK(done == calls);
  };
  const bench::PerplexityResult r = bench::perplexity(*model, tokens, po);
  CHECK(calls == 2);
  CHECK(r.windows == 2);
  CHECK(r.context == C);
  REQUIRE(r.scored == 2 * bench::scored_per_window(C));
  // Direct: one prefill of each whole window (BOS first) with every row's logits.
  auto s = Session::create(*model, SessionOptions{C, 0, false, {}});
  bench::MeanAccumulator nll;
  for (uint32_t k = 0; k < 2; ++k) {
    std::vector<int32_t> w(tokens.begin() + k * C, tokens.begin() + (k + 1) * C);
    w[0] = 2;
    s->reset();
    const auto lg = s->prefill(w, true);
    for (uint32_t j = C / 2; j + 1 < C; ++j) nll.add(bench::nll_of(lg.data() + size_t(j) * V, V, w[j + 1]));
  }
  CHECK(r.mean_nll == Approx(nll.mean()).epsilon(1e-4));
  CHECK(r.nll_se == Approx(nll.standard_error()).epsilon(1e-3));
  CHECK(r.ppl == Approx(std::exp(nll.mean())).epsilon(1e-4));
  CHECK(r.ppl_se == Approx(r.ppl * r.nll_se));
  CHECK_FALSE(r.has_base);

  // The same weights as the base: no divergence, every argmax agrees.
  auto same = Model::load(*ctx, dir);
  const bench::PerplexityResult rb = bench::perplexity(*model, tokens, {C, 0, {}}, same.get());
  REQUIRE(rb.has_base);
  CHECK(rb.kl_mean == Approx(0.0).epsilon(1e-9));
  CHECK(rb.kl_p99 <= 1e-9);
  CHECK(rb.top1 == 1.0);
  CHECK(rb.base_ppl == Approx(rb.ppl).epsilon(1e-9));

  // Q8_0 weights against the f16 base: a small, positive divergence.
  LoadOptions lo;
  lo.weights = QuantKind::q8_0;
  auto q8 = Model::load(*ctx, dir, lo);
  const bench::PerplexityResult rq = bench::perplexity(*q8, tokens, {C, 0, {}}, model.get());
  CHECK(rq.kl_mean > 0.0);
  CHECK(rq.kl_mean < 0.05);
  CHECK(rq.kl_p99 >= rq.kl_mean * 0.5);
  CHECK(rq.kl_max >= rq.kl_p99);
  CHECK(rq.base_ppl == Approx(r.ppl).epsilon(1e-6));

  // Errors name the problem.
  CHECK_THROWS_WITH_AS(bench::perplexity(*model, std::vector<int32_t>(C - 1, 65), po),
                       doctest::Contains("shorter than one window"), Error);
  CHECK_THROWS_WITH_AS(bench::perplexity(*model, tokens, {4, 0, {}}), doctest::Contains("context 4"), Error);
  CHECK_THROWS_WITH_AS(bench::perplexity(*model, tokens, {128, 0, {}}), doctest::Contains("max_position_embeddings"),
                       Error);
  std::vector<int32_t> bad = tokens;
  bad[3] = int32_t(V);
  CHECK_THROWS_WITH_AS(bench::perplexity(*model, bad, po), doctest::Contains("outside the vocabulary"), Error);
}
