// The docs/maths.md tolerances (test::within_spec) catch the subtle faults they exist for.
// Each fault is simulated on the CPU next to a correct computation of the same arithmetic, both
// compared with the float64 reference from the same storage-rounded inputs: the correct result must
// pass the bound and the planted fault must fail it.
//  - a linear kernel that accumulates in fp16 instead of fp32 (fp16-storage bound);
//  - online softmax that skips rescaling the accumulator when the running maximum grows (fp32 bound);
//  - a split-K attention merge that drops one split (fp32 bound);
//  - the chunked selective scan (shaders/selective_scan.comp's passes, in float): a carry that forgets the earlier
//    chunks' decay, and a state kept in fp16 between chunks (fp32 bound with the scan's factor);
//  - a LayerNorm whose variance is one-pass E[x²] − E[x]² in fp32, at a large mean (fp32 bound);
//  - the op case tables (bench/op_cases.hpp): a wrong value and an op that writes nothing fail
//    the table's check on the GPU, for the first case of every op with a table.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "bench/check.hpp"
#include "bench/op_cases.hpp"
#include "gpu_test.hpp"
#include "io/half.hpp"
#include "reference/ssm_ref.hpp"

using namespace diffvk;

namespace {
float h(float x) { return half_to_float(float_to_half(x)); }  // round to fp16 storage
}  // namespace

TEST_CASE("tolerances: an fp16 accumulator in a linear kernel fails the fp16 bound") {
  std::mt19937_64 rng(11);
  std::uniform_real_distribution<float> d(-1.0f, 1.0f);
  const int K = 384, N = 96, M = 4;  // the tiny models' sizes: E 64, qkv 128, I 96 (2I 192)
  std::vector<float> x(M * K), w(N * K);
  for (auto& v : x) v = h(d(rng));
  for (auto& v : w) v = h(d(rng));
  std::vector<double> ref, good, bad;
  for (int m = 0; m < M; ++m)
    for (int n = 0; n < N; ++n) {
      double r = 0;
      float acc32 = 0, acc16 = 0;
      for (int k = 0; k < K; ++k) {
        r += double(x[m * K + k]) * w[n * K + k];
        acc32 += x[m * K + k] * w[n * K + k];
        acc16 = h(acc16 + x[m * K + k] * w[n * K + k]);  // the fault: the running sum stored in fp16
      }
      ref.push_back(r);
      good.push_back(h(acc32));  // fp32 accumulation, fp16 output storage
      bad.push_back(h(acc16));
    }
  const auto cg = test::compare(good, ref), cb = test::compare(bad, ref);
  INFO("fp32 accumulation: " << cg.summary() << "; fp16 accumulation: " << cb.summary());
  CHECK(test::within_spec(cg, true));
  CHECK_FALSE(test::within_spec(cb, true));
}

TEST_CASE("tolerances: layer_norm with a one-pass variance at a large mean fails the fp32 bound") {
  // The arithmetic a one-pass kernel would do (fp32 sums of x and x², var = E[x²] − E[x]²) against the centred
  // two-pass one of shaders/layer_norm.comp, on float32 inputs of mean 1e4 and spread 1 at the real width.
  const int E = 2560;
  std::mt19937_64 rng(5);
  std::uniform_real_distribution<double> d(1e4 - 1, 1e4 + 1);
  std::vector<double> x(E), w(E, 1.0), b(E, 0.0);
  for (auto& v : x) v = float(d(rng));
  const auto expect = ref::layer_norm(x, 1, E, w, b, 1e-5);
  float s1 = 0, s2 = 0;
  for (double v : x) s1 += float(v), s2 += float(v) * float(v);
  const float mean1 = s1 / E, var1 = s2 / E - mean1 * mean1;
  const float sh = float(x[0]);
  float sd = 0, ss = 0;
  for (double v : x) sd += float(v) - sh;
  const float dm = sd / E;
  for (double v : x) ss += (float(v) - sh - dm) * (float(v) - sh - dm);
  const float rstd = 1.0f / std::sqrt(ss / E + 1e-5f);
  std::vector<double> one_pass(E), centred(E);
  for (int i = 0; i < E; ++i) {
    one_pass[i] = (float(x[i]) - mean1) / std::sqrt(std::max(var1, 0.0f) + 1e-5f);
    centred[i] = ((float(x[i]) - sh) - dm) * rstd;
  }
  const auto cg = test::compare(centred, expect), cb = test::compare(one_pass, expect);
  INFO("centred: " << cg.summary() << "; one pass: " << cb.summary());
  CHECK(test::within_spec(cg, false));
  CHECK_FALSE(test::within_spec(cb, false));
}

namespace {
// One query row of attention over n keys (D values each), scores given; online softmax over blocks.
std::vector<double> online_softmax(const std::vector<float>& s, const std::vector<float>& v, int D, int block,
                                   bool skip_rescale, int drop_split = -1, int splits = 1) {
  const int n = static_cast<int>(s.size());
  const int per = (n + splits - 1) / splits;
  std::vector<float> m_s(splits, -INFINITY), l_s(splits, 0.0f);
  std::vector<std::vector<float>> acc_s(splits, std::vector<float>(D, 0.0f));
  for (int sp = 0; sp < splits; ++sp) {
    float m = -INFINITY, l = 0;
    std::vector<float> acc(D, 0.0f);
    for (int b0 = sp * per; b0 < std::min(n, (sp + 1) * per); b0 += block) {
      const int b1 = std::min({n, b0 + block, (sp + 1) * per});
      float bm = -INFINITY;
      for (int j = b0; j < b1; ++j) bm = std::max(bm, s[j]);
      const float mn = std::max(m, bm), corr = std::exp(m - mn);
      l *= corr;
      if (!skip_rescale)
        for (auto& a : acc) a *= corr;  // the fault leaves the accumulator at the old scale
      for (int j = b0; j < b1; ++j) {
        const float p = std::exp(s[j] - mn);
        l += p;
        for (int c = 0; c < D; ++c) acc[c] += p * v[size_t(j) * D + c];
      }
      m = mn;
    }
    m_s[sp] = m;
    l_s[sp] = l;
    acc_s[sp] = acc;
  }
  // Merge of the splits (split-K): rescale each to the global maximum.
  float M = -INFINITY;
  for (int sp = 0; sp < splits; ++sp)
    if (sp != drop_split) M = std::max(M, m_s[sp]);
  float L = 0;
  std::vector<float> out(D, 0.0f);
  for (int sp = 0; sp < splits; ++sp) {
    if (sp == drop_split) continue;  // the fault: one split's partial result never merged
    const float c = std::exp(m_s[sp] - M);
    L += l_s[sp] * c;
    for (int k = 0; k < D; ++k) out[k] += acc_s[sp][k] * c;
  }
  std::vector<double> r(D);
  for (int k = 0; k < D; ++k) r[k] = out[k] / L;
  return r;
}
std::vector<double> exact(const std::vector<float>& s, const std::vector<float>& v, int D) {
  double m = -INFINITY, l = 0;
  for (float x : s) m = std::max(m, double(x));
  std::vector<double> acc(D, 0.0);
  for (size_t j = 0; j < s.size(); ++j) {
    const double p = std::exp(double(s[j]) - m);
    l += p;
    for (int c = 0; c < D; ++c) acc[c] += p * v[j * D + c];
  }
  for (auto& a : acc) a /= l;
  return acc;
}
// Scores that rise along the sequence (the running maximum changes in most blocks), values in [-1, 1].
void attention_inputs(int n, int D, std::vector<float>& s, std::vector<float>& v, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> d(-1.0f, 1.0f);
  s.resize(n);
  v.resize(size_t(n) * D);
  for (int j = 0; j < n; ++j) s[j] = 0.01f * j + 0.5f * d(rng);
  for (auto& x : v) x = d(rng);
}
}  // namespace

TEST_CASE("tolerances: a skipped online-softmax rescale fails the fp32 bound") {
  const int n = 300, D = 64;
  std::vector<float> s, v;
  attention_inputs(n, D, s, v, 21);
  const auto ref = exact(s, v, D);
  const auto cg = test::compare(online_softmax(s, v, D, 32, false), ref);
  const auto cb = test::compare(online_softmax(s, v, D, 32, true), ref);
  INFO("correct: " << cg.summary() << "; skipped rescale: " << cb.summary());
  CHECK(test::within_spec(cg, false));
  CHECK_FALSE(test::within_spec(cb, false));
}

TEST_CASE("tolerances: a split-K merge that drops a split fails the fp32 bound") {
  const int n = 300, D = 64, splits = 4;
  std::vector<float> s, v;
  attention_inputs(n, D, s, v, 31);
  const auto ref = exact(s, v, D);
  const auto cg = test::compare(online_softmax(s, v, D, 32, false, -1, splits), ref);
  INFO("correct merge: " << cg.summary());
  CHECK(test::within_spec(cg, false));
  for (int drop = 0; drop < splits; ++drop) {
    const auto cb = test::compare(online_softmax(s, v, D, 32, false, drop, splits), ref);
    INFO("split " << drop << " dropped: " << cb.summary());
    CHECK_FALSE(test::within_spec(cb, false));
  }
}

TEST_CASE("tolerances: a non-finite value (NaN, +inf, -inf) fails the check in both precisions") {
  const std::vector<double> ref = {1.0, -2.0, 0.5, 3.0};
  for (bool fp16 : {false, true}) {
    std::vector<float> got(ref.begin(), ref.end());
    CHECK(bench::compare("ref", got, ref, fp16, 1).ok);
    for (float bad : {std::nanf(""), INFINITY, -INFINITY}) {
      got[2] = bad;
      const bench::Check k = bench::compare("ref", got, ref, fp16, 1);
      INFO((fp16 ? "fp16 " : "fp32 ") << bad);
      CHECK_FALSE(k.ok);
      CHECK(k.nonfinite == 1);
    }
  }
}

namespace {
// The first case of every op's table in `precision`: correct, it passes; each planted fault fails it.
void planted_faults_fail(Precision precision) {
  auto ctx = test::make_context_or_skip(precision);
  if (!ctx) return;
  const bool fp16 = precision == Precision::fp16;
  bench::OpRunner runner(ctx->device());
  using Plant = bench::OpRunner::Plant;
  for (const std::string& op : bench::table_ops()) {
    const auto cases = bench::op_cases(op, bench::OpMode::conformance);
    const auto first = std::find_if(cases.begin(), cases.end(), [&](const auto& c) { return c->fp16 == fp16; });
    REQUIRE(first != cases.end());
    const bench::OpCase& c = **first;
    INFO(op << " case " << c.name);
    runner.plant_for_testing(Plant::none);
    const auto good = runner.run(c);
    INFO("correct: " << good.summary());
    CHECK(good.ok());
    // Output faults, planted in the downloaded bytes of both runs: the check alone must catch them.
    for (Plant plant : {Plant::wrong_value, Plant::nan, Plant::stale, Plant::fp16_overflow}) {
      runner.plant_for_testing(plant);
      if (plant == Plant::fp16_overflow && (!fp16 || op == "embed" || op == "attn_probs" || op == "sample")) {
        // No fp16 element to overflow (fp32 storage; embed writes the float32 residual stream, attn_probs float32
        // probabilities, sample a token id): the hook says so instead of planting something else.
        CHECK_THROWS_WITH_AS(runner.run(c), doctest::Contains("no fp16 output element"), bench::OpRunner::PlantError);
        continue;
      }
      const auto r = runner.run(c);
      INFO("planted fault " << int(plant) << ": " << r.summary());
      CHECK_FALSE(r.check.ok);
      CHECK(r.replay_identical);
      CHECK(r.padding_changed == 0);
      CHECK(r.check.nonfinite == (plant == Plant::wrong_value ? 0u : plant == Plant::stale ? r.check.nonfinite : 1u));
      if (plant == Plant::stale) CHECK(r.check.nonfinite >= 1);
    }
    runner.plant_for_testing(Plant::no_dispatch);
    const auto none = runner.run(c);
    INFO("nothing written: " << none.summary());
    CHECK_FALSE(none.check.ok);
    CHECK(none.check.nonfinite > 0);
  }
}
}  // namespace

TEST_CASE("tolerances: a planted fault fails the check of every op case table fp32") {
  planted_faults_fail(Precision::fp32);
}
TEST_CASE("tolerances: a planted fault fails the check of every op case table fp16") {
  planted_faults_fail(Precision::fp16);
}

namespace {
enum class ScanFault { none, carry_without_decay, fp16_state };
// The chunked selective scan in float, pass by pass as shaders/selective_scan.comp runs it (no gate): each chunk's
// end state from zero and its delta sum, the carry, the rerun from each chunk's initial state. Returns y, then h.
std::vector<double> chunked_scan(const std::vector<double>& u, const std::vector<double>& dr,
                                 const std::vector<double>& a_log, const std::vector<double>& B,
                                 const std::vector<double>& Cm, const std::vector<double>& D,
                                 const std::vector<double>& h0, int T, int C, int S, int L, ScanFault fault) {
  const int chunks = (T + L - 1) / L;
  std::vector<double> y(size_t(T) * C), h_end(size_t(C) * S);
  for (int c = 0; c < C; ++c) {
    std::vector<float> A(S), hc(S), hin(size_t(chunks) * S), end(size_t(chunks) * S), sum(chunks, 0.0f);
    for (int s = 0; s < S; ++s) A[s] = -std::exp(float(a_log[size_t(c) * S + s]));
    auto walk = [&](int k, std::vector<float>& hs, bool emit) {
      for (int t = k * L; t < std::min(T, (k + 1) * L); ++t) {
        const float x = float(u[size_t(t) * C + c]), d = float(ref::softplus(dr[size_t(t) * C + c]));
        float acc = float(D[c]) * x;
        sum[k] += d;
        for (int s = 0; s < S; ++s) {
          hs[s] = std::exp(d * A[s]) * hs[s] + d * x * float(B[size_t(t) * S + s]);
          acc += float(Cm[size_t(t) * S + s]) * hs[s];
        }
        if (emit) y[size_t(t) * C + c] = acc;
      }
    };
    for (int k = 0; k < chunks; ++k) {
      std::vector<float> hs(S, 0.0f);
      walk(k, hs, false);
      for (int s = 0; s < S; ++s) end[size_t(k) * S + s] = hs[s];
    }
    for (int s = 0; s < S; ++s) hc[s] = float(h0[size_t(c) * S + s]);
    for (int k = 0; k < chunks; ++k)
      for (int s = 0; s < S; ++s) {
        hin[size_t(k) * S + s] = fault == ScanFault::fp16_state ? h(hc[s]) : hc[s];
        const float decay = fault == ScanFault::carry_without_decay ? 1.0f : std::exp(A[s] * sum[k]);
        hc[s] = decay * hin[size_t(k) * S + s] + end[size_t(k) * S + s];
      }
    for (int s = 0; s < S; ++s) h_end[size_t(c) * S + s] = hc[s];
    for (int k = 0; k < chunks; ++k) {
      std::vector<float> hs(hin.begin() + size_t(k) * S, hin.begin() + size_t(k + 1) * S);
      std::fill(sum.begin(), sum.end(), 0.0f);
      walk(k, hs, true);
    }
  }
  y.insert(y.end(), h_end.begin(), h_end.end());
  return y;
}
}  // namespace

TEST_CASE("tolerances: a chunked scan with a faulty carry or an fp16 state fails the fp32 bound") {
  const int T = 256, C = 8, S = 16, L = 32;
  std::mt19937_64 rng(41);
  auto uni = [&](size_t n, double lo, double hi) {
    std::uniform_real_distribution<double> d(lo, hi);
    std::vector<double> v(n);
    for (auto& x : v) x = double(float(d(rng)));
    return v;
  };
  const auto u = uni(size_t(T) * C, -2, 2), dr = uni(size_t(T) * C, -6, 1), B = uni(size_t(T) * S, -1, 1),
             Cm = uni(size_t(T) * S, -1, 1), D = uni(C, -1, 1), h0 = uni(size_t(C) * S, -1, 1);
  auto a_log = uni(size_t(C) * S, 1, 16);
  for (double& v : a_log) v = double(float(std::log(v)));
  std::vector<double> h = h0;
  const ref::ScanResult r = ref::selective_scan(u, dr, a_log, B, Cm, D, nullptr, T, C, S, h);
  std::vector<double> expect = r.y;
  expect.insert(expect.end(), h.begin(), h.end());
  const double factor = bench::scan_tolerance_factor(T);
  auto check = [&](ScanFault f) {
    const auto got = chunked_scan(u, dr, a_log, B, Cm, D, h0, T, C, S, L, f);
    return bench::compare("float64 reference", std::vector<float>(got.begin(), got.end()), expect, false, factor);
  };
  const bench::Check good = check(ScanFault::none), no_decay = check(ScanFault::carry_without_decay),
                     f16 = check(ScanFault::fp16_state);
  INFO("correct: max_abs " << good.max_abs << " of max|ref| " << good.max_ref << "; carry without decay: max_abs "
                           << no_decay.max_abs << "; fp16 state: max_abs " << f16.max_abs);
  CHECK(good.ok);
  CHECK_FALSE(no_decay.ok);
  CHECK_FALSE(f16.ok);
}
