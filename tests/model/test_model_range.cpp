// The residual stream and the logits are float32 in every precision (fp16 storage is
// for the weights, the KV cache and the activations between kernels). A tiny model whose residual
// stream and logits grow past fp16's largest value (65504) must still match the float64 reference at
// docs/maths.md's whole-model tolerances, through every path: the tiled prefill (> 8 rows), the
// matrix-vector prefill (<= 8 rows), the one-row decode step and device sampling (greedy).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "diffvk/model.hpp"
#include "gpu_test.hpp"
#include "model_fixture.hpp"

using namespace diffvk;

namespace {

// Scales a tensor's values and clamps them to ±60000, so that fp16 weight storage stays finite.
void scale(test::Tensors& ts, const std::string& name, float k) {
  test::RawTensor& t = ts.at(name);
  std::vector<float> v(t.bytes.size() / 4);
  std::memcpy(v.data(), t.bytes.data(), t.bytes.size());
  for (float& x : v) x = std::clamp(x * k, -60000.0f, 60000.0f);
  std::memcpy(t.bytes.data(), v.data(), t.bytes.size());
}

void beyond_fp16_range(Precision precision) {
  if (precision == Precision::fp16 && !test::device_has_fp16()) {
    test::skip("device has no fp16 path; not run");
    return;
  }
  test::TinySpec spec;  // 2 layers, E = 32, H = 2, Hkv = 1, I = 48, vocab 256, context 64
  test::Tensors ts = test::tiny_tensors(spec, 13);
  scale(ts, "embed_tokens.weight", 4e4f);  // embeddings ~2e4 (weights ~0.5 · N(0, 1))
  for (uint32_t l = 0; l < spec.layers; ++l) {
    const std::string p = "layers." + std::to_string(l) + ".";
    scale(ts, p + "attn.out_proj.weight", 2e4f);
    scale(ts, p + "ffn.down_proj.weight", 2e5f);
  }
  scale(ts, "lm_head.weight", 2e5f);
  test::TempDir tmp("diffvk-range");
  test::write_checkpoint(tmp.path(), test::tiny_config_json(spec).dump(2), ts);

  auto ctx = test::make_context(precision);
  const bool fp16 = ctx->precision() == Precision::fp16;
  auto model = Model::load(*ctx, tmp.path());
  const std::vector<int32_t> toks = {2, 83, 111, 97, 107, 32, 116, 104, 101, 32, 114, 97, 105, 110, 44, 10};
  const ref::ModelRun want =
      ref::model_forward(test::reference_weights(spec, ts, fp16), std::vector<int>(toks.begin(), toks.end()));
  double max_logit = 0;
  for (double v : want.logits) max_logit = std::max(max_logit, std::fabs(v));
  INFO("reference: max |residual| = " << want.max_abs_residual << ", max |logit| = " << max_logit);
  REQUIRE(want.max_abs_residual > 1e5);  // the premise: both beyond fp16's 65504
  REQUIRE(max_logit > 1e5);

  const uint32_t V = spec.vocab;
  auto s = Session::create(*model, SessionOptions{0, 64});
  std::vector<float> got = s->prefill(std::vector<int32_t>(toks.begin(), toks.begin() + 10), true);  // tiled
  auto more = s->prefill(std::vector<int32_t>(toks.begin() + 10, toks.begin() + 14), true);          // <= 8 rows
  got.insert(got.end(), more.begin(), more.end());
  for (size_t i = 14; i < toks.size(); ++i) {  // one-row decode steps
    auto lg = s->decode(toks[i]);
    got.insert(got.end(), lg.begin(), lg.end());
  }
  const auto c = test::compare(std::vector<double>(got.begin(), got.end()), want.logits);
  size_t agree = 0;
  for (size_t r = 0; r < toks.size(); ++r) {
    auto g = got.begin() + r * V;
    auto w = want.logits.begin() + r * V;
    agree += std::max_element(g, g + V) - g == std::max_element(w, w + V) - w;
  }
  INFO(std::string(precision_name(ctx->precision()))
       << ": " << c.summary() << " top-1 " << agree << "/" << toks.size());
  CHECK(test::within_spec(c, fp16, test::Scope::layer));
  CHECK(double(agree) >= 0.99 * toks.size());

  // Device sampling reads the same float32 logits: greedy picks the reference's first maximum.
  s->reset();
  s->prefill(std::vector<int32_t>(toks.begin(), toks.end() - 1));
  const int32_t picked = s->decode_sample(toks.back());
  auto last = want.logits.end() - V;
  CHECK(picked == std::max_element(last, want.logits.end()) - last);
}

}  // namespace

TEST_CASE("model: residual stream and logits beyond 65504 match the float64 reference fp32") {
  beyond_fp16_range(Precision::fp32);
}
TEST_CASE("model: residual stream and logits beyond 65504 match the float64 reference fp16") {
  beyond_fp16_range(Precision::fp16);
}
