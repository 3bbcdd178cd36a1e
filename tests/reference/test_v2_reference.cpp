// Tests of the float64 DIFF V2 reference (runtime/reference/diff_v2_ref.hpp): shape checks, the
// attention maps' properties, independent re-derivations, and the PyTorch transcription's output
// stored in tests/data/v2_layer/ (tests/python/make_v2_fixture.py).
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include "diffvk/npy.hpp"
#include "ref_compare.hpp"
#include "reference/diff_attn_ref.hpp"
#include "reference/diff_v2_ref.hpp"

namespace ref = diffvk::ref;
using Vec = std::vector<double>;

namespace {

using diffvk::test::max_abs;
using diffvk::test::max_abs_diff;

// The invalid_argument message `fn` throws, or "" if it throws nothing.
std::string refusal(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

// A fixture array as doubles: '<f4' widened exactly, '<f8' as stored.
Vec load(const std::string& path, std::vector<std::int64_t> shape) {
  const diffvk::NpyArray a = diffvk::read_npy(path);
  INFO(path);
  REQUIRE(a.shape == shape);
  if (a.dtype == "<f4") return ref::to_double(diffvk::npy_as_float(a));
  REQUIRE(a.dtype == "<f8");
  Vec v(a.numel());
  REQUIRE(a.data.size() == v.size() * sizeof(double));
  std::memcpy(v.data(), a.data.data(), a.data.size());
  return v;
}

// A random input x, S rows of width E.
Vec random_x(int S, int E, std::uint64_t seed) { return ref::random_normal(static_cast<std::size_t>(S) * E, seed); }

}  // namespace

TEST_CASE("reference: DIFF V2 shapes are validated and bad ones refused with a message") {
  const ref::V2Shape s = ref::make_v2_shape(40, 4, 2, 8);
  CHECK(s.q_width() == 64);
  CHECK(s.kv_width() == 16);
  CHECK(s.o_width() == 32);
  CHECK(s.group() == 4);
  CHECK(ref::make_v2_shape(32, 4, 0, 8).Hkv == 4);  // num_kv_heads = None
  CHECK(ref::make_v2_shape(20, 4, 1, 6).group() == 8);

  // H = 3, Hkv = 2: 2H/Hkv = 3 query heads per KV head, so output head 1's pair (2, 3) straddles.
  std::string msg = refusal([] { ref::make_v2_shape(24, 3, 2, 8); });
  CHECK(msg.find("H=3") != std::string::npos);
  CHECK(msg.find("Hkv=2") != std::string::npos);
  CHECK(msg.find("straddle") != std::string::npos);
  // Hkv = 2H: every query head its own KV head, every pair straddles.
  msg = refusal([] { ref::make_v2_shape(32, 2, 4, 8); });
  CHECK(msg.find("straddle") != std::string::npos);
  CHECK(msg.find("Hkv=4") != std::string::npos);
  // 2H not divisible by Hkv.
  msg = refusal([] { ref::make_v2_shape(32, 4, 3, 8); });
  CHECK(msg.find("Hkv must divide") != std::string::npos);
  CHECK(msg.find("Hkv=3") != std::string::npos);
  // Odd D, non-positive sizes.
  CHECK(refusal([] { ref::make_v2_shape(32, 2, 2, 7); }).find("even") != std::string::npos);
  CHECK(refusal([] { ref::make_v2_shape(0, 2, 2, 8); }).find("positive") != std::string::npos);
  CHECK(refusal([] { ref::make_v2_shape(32, 0, 1, 8); }).find("positive") != std::string::npos);
  CHECK(refusal([] { ref::make_v2_shape(32, 2, 2, 0); }).find("positive") != std::string::npos);
  ref::V2Shape bad = s;
  bad.Hkv = 0;
  CHECK_THROWS_AS(ref::validate(bad), std::invalid_argument);
  bad.Hkv = 8;
  CHECK_THROWS_AS(ref::validate(bad), std::invalid_argument);

  ref::V2Weights w = ref::random_v2_weights(s, 3);
  CHECK_NOTHROW(ref::validate(s, w));
  CHECK(w.wq.size() == 64u * 40);
  CHECK(w.wl.size() == 4u * 40);
  CHECK(ref::random_v2_weights(s, 3).wo == w.wo);  // deterministic
  w.wv.resize(2 * 16 * 40);                        // V 2D wide per KV head, as in V1: wrong here
  CHECK(refusal([&] { ref::validate(s, w); }).find("v_proj.weight") != std::string::npos);
  w = ref::random_v2_weights(s, 3);
  const Vec x = random_x(5, 40, 4);
  CHECK_THROWS_AS(ref::diff_v2_layer(x, 4, 0, s, w, 10000.0), std::invalid_argument);    // x has 5 rows
  CHECK_THROWS_AS(ref::diff_v2_maps(x, 5, 0, s, w, 10000.0, 4), std::invalid_argument);  // head 4 of 4
}

TEST_CASE("reference: DIFF V2 maps: rows of A1 and A2 sum to 1, causal zeros, diff = A1 - lambda A2") {
  const ref::V2Shape s = ref::make_v2_shape(40, 4, 2, 8);
  const ref::V2Weights w = ref::random_v2_weights(s, 11, 4.0);
  const int S = 9;
  const Vec x = random_x(S, s.E, 12);
  const Vec lam = ref::diff_v2_lambda(s, w, x, S);
  for (int h = 0; h < s.H; ++h) {
    CAPTURE(h);
    const ref::V2Maps m = ref::diff_v2_maps(x, S, 2, s, w, 10000.0, h);
    REQUIRE(m.a1.size() == static_cast<std::size_t>(S * S));
    REQUIRE(m.lambda.size() == static_cast<std::size_t>(S));
    for (int i = 0; i < S; ++i) {
      CAPTURE(i);
      double r1 = 0.0, r2 = 0.0;
      for (int j = 0; j < S; ++j) {
        const std::size_t at = static_cast<std::size_t>(i) * S + j;
        if (j > i) {  // causal: exactly zero
          CHECK(m.a1[at] == 0.0);
          CHECK(m.a2[at] == 0.0);
          CHECK(m.diff[at] == 0.0);
        } else {
          CHECK(m.a1[at] > 0.0);
          CHECK(m.a2[at] > 0.0);
        }
        r1 += m.a1[at];
        r2 += m.a2[at];
        CHECK(m.diff[at] == doctest::Approx(m.a1[at] - m.lambda[i] * m.a2[at]).epsilon(1e-15));
      }
      CHECK(std::fabs(r1 - 1.0) < 1e-14);
      CHECK(std::fabs(r2 - 1.0) < 1e-14);
      CHECK(m.lambda[i] == lam[static_cast<std::size_t>(i) * s.H + h]);
      CHECK(m.lambda[i] > 0.0);
      CHECK(m.lambda[i] < 1.0);
    }
    CHECK(m.a1[0] == 1.0);  // the first query sees only key 0
  }
}

TEST_CASE("reference: DIFF V2 layer equals heads rebuilt from the maps") {
  // y = concat_h(diff_h · v_g)·Woᵀ with v_g from a separate projection: ties the layer to the maps.
  const ref::V2Shape s = ref::make_v2_shape(20, 4, 1, 6);
  const ref::V2Weights w = ref::random_v2_weights(s, 21);
  const int S = 7;
  const Vec x = random_x(S, s.E, 22);
  const Vec v = ref::linear(x, S, s.E, w.wv, s.kv_width());
  Vec heads(static_cast<std::size_t>(S) * s.o_width(), 0.0);
  for (int h = 0; h < s.H; ++h) {
    const ref::V2Maps m = ref::diff_v2_maps(x, S, 0, s, w, 10000.0, h);
    const int g = 2 * h / s.group();
    for (int i = 0; i < S; ++i)
      for (int j = 0; j < S; ++j)
        for (int c = 0; c < s.D; ++c)
          heads[static_cast<std::size_t>(i) * s.o_width() + h * s.D + c] +=
              m.diff[static_cast<std::size_t>(i) * S + j] * v[static_cast<std::size_t>(j) * s.kv_width() + g * s.D + c];
  }
  const Vec y = ref::diff_v2_layer(x, S, 0, s, w, 10000.0);
  CHECK(max_abs_diff(y, ref::linear(heads, S, s.o_width(), w.wo, s.E)) < 1e-13 * std::max(1.0, max_abs(y)));
}

TEST_CASE("reference: DIFF V2 maps from roped inputs equal the layer's maps and rebuild the attention") {
  // diff_v2_probs (what the attention-map kernel computes, on q/k/z as the device holds them) against
  // diff_v2_maps of the layer (pos0 = 0: the keys are the call's own rows), then with cached keys (pos0 > 0)
  // against diff_v2_attention: head h = diff_h · v_g.
  const ref::V2Shape s = ref::make_v2_shape(24, 4, 2, 8);
  const ref::V2Weights w = ref::random_v2_weights(s, 41, 4.0);
  const int S = 7, pos0 = 3, T = pos0 + S;
  const Vec x = random_x(S, s.E, 42);
  Vec q = ref::linear(x, S, s.E, w.wq, s.q_width()), k = ref::linear(x, S, s.E, w.wk, s.kv_width());
  ref::rope_rows(q, S, 2 * s.H, s.D, 0, 10000.0);
  ref::rope_rows(k, S, s.Hkv, s.D, 0, 10000.0);
  const Vec z = ref::linear(x, S, s.E, w.wl, s.H);
  const ref::V2Maps all = ref::diff_v2_probs(q, k, z, S, S, s.H, s.Hkv, s.D, 0);
  const std::size_t plane = static_cast<std::size_t>(S) * S;
  for (int h = 0; h < s.H; ++h) {
    CAPTURE(h);
    const ref::V2Maps m = ref::diff_v2_maps(x, S, 0, s, w, 10000.0, h);
    auto part = [&](const Vec& v, std::size_t n) { return Vec(v.begin() + h * n, v.begin() + (h + 1) * n); };
    CHECK(max_abs_diff(part(all.a1, plane), m.a1) < 1e-14);
    CHECK(max_abs_diff(part(all.a2, plane), m.a2) < 1e-14);
    CHECK(max_abs_diff(part(all.diff, plane), m.diff) < 1e-14);
    CHECK(max_abs_diff(part(all.lambda, S), m.lambda) < 1e-15);
  }
  const Vec qc = ref::random_normal(static_cast<std::size_t>(S) * s.q_width(), 43),
            kc = ref::random_normal(T * s.kv_width(), 44), vc = ref::random_normal(T * s.kv_width(), 45),
            zc = ref::random_normal(S * s.H, 46, 3.0);
  const ref::V2Maps mc = ref::diff_v2_probs(qc, kc, zc, S, T, s.H, s.Hkv, s.D, pos0);
  Vec heads(static_cast<std::size_t>(S) * s.o_width(), 0.0);
  for (int h = 0; h < s.H; ++h)
    for (int i = 0; i < S; ++i)
      for (int j = 0; j < T; ++j) {
        const double d = mc.diff[(static_cast<std::size_t>(h) * S + i) * T + j];
        if (j > pos0 + i) CHECK(d == 0.0);
        for (int c = 0; c < s.D; ++c)
          heads[static_cast<std::size_t>(i) * s.o_width() + h * s.D + c] +=
              d * vc[static_cast<std::size_t>(j) * s.kv_width() + (2 * h / s.group()) * s.D + c];
      }
  const Vec want = ref::diff_v2_attention(qc, kc, vc, zc, S, T, s.H, s.Hkv, s.D, pos0);
  CHECK(max_abs_diff(heads, want) < 1e-13 * std::max(1.0, max_abs(want)));
}

TEST_CASE("reference: DIFF V2 GQA equals the layer with K and V heads repeated") {
  // Hkv = 1 with H = 4: every query head reads KV head 0. Repeating k_proj/v_proj's rows H times
  // gives Hkv = H (query head j reads KV head j / 2), which must give the same output.
  for (int Hkv : {1, 2}) {
    CAPTURE(Hkv);
    const ref::V2Shape s = ref::make_v2_shape(24, 4, Hkv, 8);
    const ref::V2Weights w = ref::random_v2_weights(s, 31);
    const ref::V2Shape full = ref::make_v2_shape(24, 4, 4, 8);
    ref::V2Weights wf = w;
    wf.wk.clear();
    wf.wv.clear();
    const std::size_t rows = static_cast<std::size_t>(s.D) * s.E;  // one KV head's rows
    for (int h = 0; h < full.Hkv; ++h) {
      const std::size_t g = static_cast<std::size_t>(h / (s.H / s.Hkv));
      wf.wk.insert(wf.wk.end(), w.wk.begin() + g * rows, w.wk.begin() + (g + 1) * rows);
      wf.wv.insert(wf.wv.end(), w.wv.begin() + g * rows, w.wv.begin() + (g + 1) * rows);
    }
    const Vec x = random_x(6, s.E, 32);
    const Vec y = ref::diff_v2_layer(x, 6, 1, s, w, 10000.0);
    CHECK(max_abs_diff(y, ref::diff_v2_layer(x, 6, 1, full, wf, 10000.0)) == 0.0);
  }
}

TEST_CASE("reference: DIFF V2 reproduces the PyTorch fixtures (tests/data/v2_layer)") {
  const std::string dir = std::string(DIFFVK_TEST_DATA_DIR) + "/v2_layer/";
  INFO("fixture directory " << dir << " (regenerate with tests/python/make_v2_fixture.py)");
  std::ifstream f(dir + "meta.json");
  REQUIRE(f);
  const nlohmann::json meta = nlohmann::json::parse(f);
  REQUIRE(meta.at("cases").size() >= 5);
  bool saw_saturated = false;
  for (const auto& item : meta.at("cases").items()) {
    const std::string name = item.key();
    const auto& c = item.value();
    CAPTURE(name);
    const ref::V2Shape s = ref::make_v2_shape(c.at("E"), c.at("H"), c.at("Hkv"), c.at("D"));
    const int S = c.at("S"), pos0 = c.at("pos0"), head = c.at("map_head");
    const double theta = c.at("rope_theta");
    const std::string d = dir + name + "/";
    const std::int64_t E = s.E, H = s.H;
    ref::V2Weights w;
    w.wq = load(d + "q_proj.npy", {s.q_width(), E});
    w.wk = load(d + "k_proj.npy", {s.kv_width(), E});
    w.wv = load(d + "v_proj.npy", {s.kv_width(), E});
    w.wo = load(d + "o_proj.npy", {E, s.o_width()});
    w.wl = load(d + "lambda_proj.npy", {H, E});
    const Vec x = load(d + "x.npy", {S, E});
    const Vec y = load(d + "y.npy", {S, E});
    const Vec lam = load(d + "lambda.npy", {S, H});
    const Vec a1 = load(d + "a1.npy", {S, S});
    const Vec a2 = load(d + "a2.npy", {S, S});

    const Vec got = ref::diff_v2_layer(x, S, pos0, s, w, theta);
    const double err = max_abs_diff(got, y);
    MESSAGE(name << ": max |y| " << max_abs(y) << ", max abs error " << err);
    CHECK(err <= 1e-10 * std::max(1.0, max_abs(y)));
    CHECK(max_abs_diff(ref::diff_v2_lambda(s, w, x, S), lam) <= 1e-14);
    const ref::V2Maps m = ref::diff_v2_maps(x, S, pos0, s, w, theta, head);
    CHECK(max_abs_diff(m.a1, a1) <= 1e-12);
    CHECK(max_abs_diff(m.a2, a2) <= 1e-12);

    // The saturated case drives λ to 0 and 1 (logits around ±50).
    const auto [lo, hi] = std::minmax_element(lam.begin(), lam.end());
    if (*lo < 1e-15 && *hi > 1.0 - 1e-15) saw_saturated = true;
  }
  CHECK(saw_saturated);
}
