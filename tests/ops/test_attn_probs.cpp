// The attention-map debug path. shaders/attn_probs.comp against the float64
// reference (ref::attention_probs; DIFF V2: ref::diff_v2_probs) through the op's case table at
// docs/maths.md kernel tolerances, outputs poisoned, chunks at static and dynamic positions, a head subset, rows
// outside the chunk left untouched; then Session::attention_maps on tiny DIFF V1 and V2 models against the
// reference model's layer (docs/maths.md layer scope), and its argument errors.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "gpu_test.hpp"
#include "model_fixture.hpp"
#include "op_table.hpp"
#include "ops/attn_probs.hpp"

using namespace diffvk;

namespace {

// The attention maps of a tiny model's layer against the reference model: the layer's input from
// ref::model_forward, its block norm, projections, RoPE and softmaxes.
void session_maps(Precision precision) {
  auto ctx = test::make_context_or_skip(precision);
  if (!ctx) return;
  const bool fp16 = ctx->precision() == Precision::fp16;
  test::TinySpec spec;  // 2 layers, E = 32, H = 2, Hkv = 1 (D = 8), context 64
  const test::Tensors ts = test::tiny_tensors(spec, 5);
  test::TempDir tmp("diffvk-maps");
  test::write_checkpoint(tmp.path(), test::tiny_config_json(spec).dump(2), ts);
  auto model = Model::load(*ctx, tmp.path());
  auto s = Session::create(*model, SessionOptions{0, 5});  // chunks of 5: the tap in every chunk
  const std::vector<int32_t> toks = {2, 72, 101, 108, 108, 111, 44, 32, 119, 111, 114, 108, 100};
  const int S = int(toks.size());

  const ref::ModelWeights w = test::reference_weights(spec, ts, fp16);
  const ref::ModelRun run = ref::model_forward(w, std::vector<int>(toks.begin(), toks.end()));
  for (int32_t head : {-1, 1}) {
    const uint32_t layer = 1;
    const AttentionMaps maps = s->attention_maps(toks, layer, head);
    CHECK(s->position() == toks.size());
    REQUIRE(maps.tokens == toks.size());
    REQUIRE(maps.heads == (head < 0 ? spec.heads : 1u));
    const auto n = ref::rms_norm(run.hidden[layer], S, w.shape.E, w.layers[layer].attn_norm, w.eps);
    const auto qkv = ref::project_qkv(w.shape, w.layers[layer].attn, w.rope_theta, n, S, 0);
    const auto want = ref::attention_probs(qkv.q, qkv.k, S, S, w.shape.H, w.shape.Hkv, w.shape.D, 0);
    const size_t plane = size_t(S) * S, off = size_t(maps.head0) * plane;
    std::vector<double> got(maps.a1.begin(), maps.a1.end()),
        ref_all(want.p1.begin() + off, want.p1.begin() + off + maps.heads * plane);
    got.insert(got.end(), maps.a2.begin(), maps.a2.end());
    ref_all.insert(ref_all.end(), want.p2.begin() + off, want.p2.begin() + off + maps.heads * plane);
    const auto c = test::compare(got, ref_all);
    INFO("head " << head << ": " << c.summary());
    CHECK(test::within_spec(c, fp16, test::Scope::layer));
    CHECK(std::fabs(maps.lambda - ref::lambda_value(w.layers[layer].attn, w.shape.D, int(layer))) <= 1e-6);
    CHECK(maps.lambda_init == doctest::Approx(ref::lambda_init(int(layer))));
  }
  // The session goes on from the prompt like after a prefill.
  const auto lg = s->decode(33);
  CHECK(lg.size() == spec.vocab);

  auto expect_error = [&](auto&& f, const char* what) {
    try {
      f();
      FAIL("no error for " << what);
    } catch (const Error& e) {
      CHECK(e.status() == Status::invalid_argument);
      INFO(e.what());
    }
  };
  expect_error([&] { s->attention_maps(toks, spec.layers, -1); }, "a layer past the last");
  expect_error([&] { s->attention_maps(toks, 0, int32_t(spec.heads)); }, "a head past the last");
  expect_error([&] { s->attention_maps(toks, 0, -2); }, "head -2");
  expect_error([&] { s->attention_maps(std::vector<int32_t>(kAttentionMapMaxTokens + 1, 65), 0, -1); },
               "too many tokens");
  expect_error([&] { s->attention_maps({}, 0, -1); }, "no tokens");
  expect_error([&] { s->attention_maps({65, 999}, 0, -1); }, "a token outside the vocabulary");
  CHECK(s->position() == toks.size() + 1);  // bad arguments leave the session as it was
}

// DIFF V2: Session::attention_maps of a V2 model against ref::diff_v2_maps on the layer's
// input from the float64 model reference (ref::model_forward with ModelWeights::v2): A1 and A2 (query heads 2h
// and 2h + 1) and λ of every query row, at the layer tolerance. Two models: the shared fixture
// tests/data/model_tiny_v2 (H = 2, Hkv = 1: 2 pairs per KV head, D = 32, E = 96) and a synthesized one with
// 3 heads of 1 pair per KV head (D = 16, E = 40: odd H, E != H·D).
void session_maps_v2(Precision precision) {
  const std::string fixture = test::shared_tiny_v2_model_dir();
  REQUIRE(!fixture.empty());
  auto ctx = test::make_context_or_skip(precision);
  if (!ctx) return;
  const bool fp16 = ctx->precision() == Precision::fp16;
  test::TempDir tmp("diffvk-maps-v2");
  test::TinyV2Spec odd;
  odd.heads = 3, odd.kv_heads = 3, odd.head_dim = 16, odd.hidden = 40;
  test::write_tiny_v2_model(tmp.path(), odd, 9);
  const std::vector<int32_t> toks = {2, 72, 101, 108, 108, 111, 44, 32, 119, 111, 114, 108, 100};
  const int S = int(toks.size());
  for (const std::string& dir : {fixture, tmp.path()}) {
    CAPTURE(dir);
    const std::unique_ptr<Model> model = Model::load(*ctx, dir);
    REQUIRE(model->config().v2());
    auto s = Session::create(*model, SessionOptions{0, 5});  // chunks of 5: the tap in every chunk
    const ref::ModelWeights w = test::reference_weights_v2_dir(dir, fp16);
    const ref::ModelRun run = ref::model_forward(w, std::vector<int>(toks.begin(), toks.end()));
    const int H = w.v2_shape.H;
    for (const uint32_t layer : {0u, 1u})
      for (int32_t head : {-1, H - 1}) {
        CAPTURE(layer);
        CAPTURE(head);
        const AttentionMaps maps = s->attention_maps(toks, layer, head);
        REQUIRE(maps.v2);
        REQUIRE(maps.tokens == toks.size());
        REQUIRE(maps.heads == (head < 0 ? uint32_t(H) : 1u));
        REQUIRE(maps.lambda_rows.size() == size_t(maps.heads) * S);
        CHECK(maps.lambda == 0);
        CHECK(maps.lambda_init == 0);
        const auto n = ref::rms_norm(run.hidden[layer], S, w.width(), w.layers[layer].attn_norm, w.eps);
        std::vector<double> got, want;
        for (uint32_t hh = 0; hh < maps.heads; ++hh) {
          const ref::V2Maps m =
              ref::diff_v2_maps(n, S, 0, w.v2_shape, w.layers[layer].attn_v2, w.rope_theta, int(maps.head0 + hh));
          const size_t plane = size_t(S) * S;
          got.insert(got.end(), maps.a1.begin() + hh * plane, maps.a1.begin() + (hh + 1) * plane);
          got.insert(got.end(), maps.a2.begin() + hh * plane, maps.a2.begin() + (hh + 1) * plane);
          got.insert(got.end(), maps.lambda_rows.begin() + hh * S, maps.lambda_rows.begin() + (hh + 1) * S);
          want.insert(want.end(), m.a1.begin(), m.a1.end());
          want.insert(want.end(), m.a2.begin(), m.a2.end());
          want.insert(want.end(), m.lambda.begin(), m.lambda.end());
          // The map the layer applies to V: A1 − λ_i·A2 (lambda_at), against the reference's difference.
          std::vector<double> d(plane), dref(m.diff.begin(), m.diff.end());
          for (size_t e = 0; e < plane; ++e)
            d[e] = maps.a1[hh * plane + e] - maps.lambda_at(hh, uint32_t(e / S)) * maps.a2[hh * plane + e];
          const auto cd = test::compare(d, dref);
          INFO("A1 - lambda_i*A2 of head " << maps.head0 + hh << ": " << cd.summary());
          CHECK(test::within_spec(cd, fp16, test::Scope::layer));
        }
        const auto c = test::compare(got, want);
        INFO("A1, A2, lambda rows: " << c.summary());
        CHECK(test::within_spec(c, fp16, test::Scope::layer));
      }
    CHECK(s->position() == toks.size());
    CHECK(s->decode(33).size() == size_t(w.vocab));  // the session goes on from the prompt like after a prefill
  }
}

}  // namespace

// The kernel's shapes (chunks at static and dynamic positions, a head subset, rows outside the chunks left
// poisoned, more keys than invocations per workgroup) come from the op's one case table
// (bench/cases/attn_probs.cpp).
TEST_CASE("attn_probs: case table fp32") { test::run_op_table("attn_probs", Precision::fp32); }
TEST_CASE("attn_probs: case table fp16") { test::run_op_table("attn_probs", Precision::fp16); }
TEST_CASE("attn_probs: Session attention_maps match the reference model fp32") { session_maps(Precision::fp32); }
TEST_CASE("attn_probs: Session attention_maps match the reference model fp16") { session_maps(Precision::fp16); }
TEST_CASE("attn_probs: DIFF V2 Session attention_maps match the reference model fp32") {
  session_maps_v2(Precision::fp32);
}
TEST_CASE("attn_probs: DIFF V2 Session attention_maps match the reference model fp16") {
  session_maps_v2(Precision::fp16);
}
