// Device sampling (shaders/sample_topk.comp) against the host reference diffvk::sample_top_k on the same
// logits: the op's case table (greedy identical, top-k identical given the same random draw, ties); and at the model
// level: Session::decode_sample against decode() + the host samplers (draws within 1e-5 of a bucket edge, where fp32
// and float64 weights may legitimately disagree, are counted and skipped), and prefill's last-row logits against the
// all-rows logits.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

#include "reference/diff_attn_ref.hpp"
#include "diffvk/model.hpp"
#include "gpu_test.hpp"
#include "decode_sample_check.hpp"
#include "op_table.hpp"
#include "ops/sample.hpp"

using namespace diffvk;

// The kernel against the host reference: the op's case table (bench/cases/sample.cpp; greedy, top-k, ties, odd
// vocabularies, eight draws per case, exact ids).
TEST_CASE("sample: case table fp32") { test::run_op_table("sample", Precision::fp32); }
TEST_CASE("sample: case table fp16") { test::run_op_table("sample", Precision::fp16); }

TEST_CASE("sample: host reference sample_top_k") {
  const std::vector<float> lg{1.0f, 3.0f, 3.0f, -2.0f, 0.5f};
  CHECK(sample_top_k(lg.data(), 5, 0.0f, 0, 0.9f) == 1);  // greedy: the first maximum
  CHECK(sample_top_k(lg.data(), 5, 1.0f, 1, 0.9f) == 1);
  CHECK(sample_top_k(lg.data(), 5, 1.0f, 2, 0.25f) == 1);  // two equal weights: halves
  CHECK(sample_top_k(lg.data(), 5, 1.0f, 2, 0.75f) == 2);
  CHECK(sample_top_k(lg.data(), 5, 1.0f, 3, 0.9999f) == 0);
  Sampler greedy(SamplingOptions{});
  CHECK(greedy.device_capable());
  CHECK(Sampler(SamplingOptions{0.8f, 40, 1.0f, 1}).device_capable());
  CHECK_FALSE(Sampler(SamplingOptions{0.8f, 40, 0.9f, 1}).device_capable());
  CHECK_FALSE(Sampler(SamplingOptions{0.8f, 0, 1.0f, 1}).device_capable());
  CHECK_FALSE(Sampler(SamplingOptions{0.8f, kDeviceTopKMax + 1, 1.0f, 1}).device_capable());
  Sampler s(SamplingOptions{0.8f, 40, 1.0f, 7});
  for (int i = 0; i < 1000; ++i) {
    const float u = s.draw();
    CHECK(u >= 0.0f);
    CHECK(u < 1.0f);
  }
}

namespace {
void model_sampling(Precision precision) {
  if (precision == Precision::fp16 && !test::device_has_fp16()) {
    MESSAGE("device has no fp16 path; not run");
    return;
  }
  auto ctx = test::make_context(precision);
  const bool fp16 = ctx->precision() == Precision::fp16;
  auto model = Model::load(*ctx, std::string(DIFFVK_TEST_DATA_DIR) + "/model_tiny");
  const uint32_t V = model->config().vocab_size;
  std::vector<int32_t> prompt;
  for (int i = 0; i < 11; ++i) prompt.push_back((i * 37 + 5) % int(V));

  // Prefill's last-row logits (linear_row with the final norm fused) against the all-rows path, in one
  // chunk and in chunks of 4 (the earlier chunks then compute no logits at all).
  auto a = Session::create(*model, SessionOptions{64, 64});
  const auto all = a->prefill(prompt, true);
  const std::vector<float> want(all.end() - V, all.end());
  for (uint32_t chunk : {64u, 4u}) {
    auto b = Session::create(*model, SessionOptions{64, chunk});
    const auto got = b->prefill(prompt);
    REQUIRE(got.size() == V);
    double max_abs = 0, max_ref = 0;
    for (uint32_t i = 0; i < V; ++i) {
      max_abs = std::max(max_abs, std::fabs(double(got[i]) - want[i]));
      max_ref = std::max(max_ref, std::fabs(double(want[i])));
    }
    INFO("chunk " << chunk << ": last-row logits vs all rows max_abs=" << max_abs << " max_ref=" << max_ref);
    CHECK(max_abs <= (fp16 ? 2e-2 : 1e-4) * std::max(1.0, max_ref));
  }

  // Device sampling against decode() and the host sampler.
  test::check_decode_sample(*model, prompt, SessionOptions{64, 64});
}
}  // namespace

TEST_CASE("sample: model decode_sample fp32") { model_sampling(Precision::fp32); }
TEST_CASE("sample: model decode_sample fp16") { model_sampling(Precision::fp16); }

TEST_CASE("sample: decode profile groups GPU time by op") {
  auto ctx = test::make_context();
  auto model = Model::load(*ctx, std::string(DIFFVK_TEST_DATA_DIR) + "/model_tiny");
  auto s = Session::create(*model, SessionOptions{32, 16, true});
  s->prefill({1, 2, 3});
  s->decode_sample(4);
  const auto prof = s->last_profile();
  if (!ctx->caps().timestamps) {
    CHECK(prof.empty());
    return;
  }
  const auto& c = model->config();
  // Per token: embed, 5 per layer (qkv with RoPE and the KV append, the attention, out_proj, gate_up, down),
  // lm_head with the norm, sampling; where the tuning splits the one-row prologues (row_prologue: CPU drivers), each
  // layer's two norms and SwiGLU and the final norm are dispatches of their own.
  const bool split = ctx->device().tuning().row_prologue_split;
  CHECK(prof.size() == 3 + 5 * c.num_layers + (split ? 3 * c.num_layers + 1 : 0));
  size_t rows = 0, samples = 0;
  for (const auto& d : prof) {
    CHECK(d.us >= 0);
    rows += d.op.rfind("linear_row", 0) == 0;
    samples += d.op == "sample_topk";
  }
  CHECK(rows == 4 * c.num_layers + 1);
  CHECK(samples == 1);
}
