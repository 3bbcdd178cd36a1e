// Issue 13 item 5: the attention-map debug path. shaders/attn_probs.comp against the float64
// reference (ref::attention_probs) through the op's case table at docs/maths.md kernel tolerances, outputs poisoned, chunks at static
// and dynamic positions, a head subset, rows outside the chunk left untouched; then
// Session::attention_maps on a tiny model against the reference model's layer (docs/maths.md layer scope),
// and its argument errors.
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
    std::vector<double> got(maps.a1.begin(), maps.a1.end()), ref_all(want.p1.begin() + off, want.p1.begin() + off + maps.heads * plane);
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
  expect_error([&] { s->attention_maps(std::vector<int32_t>(kAttentionMapMaxTokens + 1, 65), 0, -1); }, "too many tokens");
  expect_error([&] { s->attention_maps({}, 0, -1); }, "no tokens");
  expect_error([&] { s->attention_maps({65, 999}, 0, -1); }, "a token outside the vocabulary");
  CHECK(s->position() == toks.size() + 1);  // bad arguments leave the session as it was
}

}  // namespace

// The kernel's shapes (chunks at static and dynamic positions, a head subset, rows outside the chunks left
// poisoned, more keys than invocations per workgroup) come from the op's one case table
// (runtime/bench/op_cases.cpp, op "attn_probs").
TEST_CASE("attn_probs: case table fp32") { test::run_op_table("attn_probs", Precision::fp32); }
TEST_CASE("attn_probs: case table fp16") { test::run_op_table("attn_probs", Precision::fp16); }
TEST_CASE("attn_probs: Session attention_maps match the reference model fp32") { session_maps(Precision::fp32); }
TEST_CASE("attn_probs: Session attention_maps match the reference model fp16") { session_maps(Precision::fp16); }
