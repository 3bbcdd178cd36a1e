// Issue 13 item 5: the attention-map debug path. shaders/attn_probs.comp against the float64
// reference (ref::attention_probs) at docs/maths.md kernel tolerances, outputs poisoned, chunks at static
// and dynamic positions, a head subset, rows outside the chunk left untouched; then
// Session::attention_maps on a tiny model against the reference model's layer (docs/maths.md layer scope),
// and its argument errors.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "gpu_test.hpp"
#include "model_fixture.hpp"
#include "ops/attn_probs.hpp"

using namespace diffvk;

namespace {

struct PShape {
  uint32_t H, Hkv, D, T, head0, heads;
  std::vector<std::pair<uint32_t, uint32_t>> chunks;  // (pos0, rows), one program each
  bool dynamic;                                       // pos0 through the dynamic-position buffer
};

void probs_case(Context& ctx, const AttnProbsKernel& kernel, const PShape& s, uint64_t seed) {
  Device& dev = ctx.device();
  const bool fp16 = dev.fp16();
  const size_t es = storage_bytes(fp16);
  std::mt19937_64 rng(seed);
  auto round = [&](std::vector<double> v) { return fp16 ? ref::round_to_f16(v) : ref::round_to_f32(v); };
  const uint32_t cap = s.T + 5, qw = 2 * s.H * s.D, kw = 2 * s.Hkv * s.D;
  const auto q = round(test::random_vector(rng, size_t(s.T) * qw, -2.0, 2.0));
  const auto cache = round(test::random_vector(rng, size_t(s.Hkv) * cap * 2 * s.D, -2.0, 2.0));
  std::vector<double> k(size_t(s.T) * kw);  // the reference's layout: T x 2Hkv·D
  for (uint32_t j = 0; j < s.T; ++j)
    for (uint32_t g = 0; g < s.Hkv; ++g)
      for (uint32_t e = 0; e < 2 * s.D; ++e) k[size_t(j) * kw + g * 2 * s.D + e] = cache[(size_t(g) * cap + j) * 2 * s.D + e];
  const auto want = ref::attention_probs(q, k, int(s.T), int(s.T), int(s.H), int(s.Hkv), int(s.D), 0);

  Buffer kc(dev, cache.size() * es, MemoryDomain::device, "k cache");
  kc.upload(0, test::pack(cache, fp16).data(), cache.size() * es);
  const uint64_t out_bytes = uint64_t(s.heads) * 2 * s.T * s.T * 4;
  Buffer out(dev, out_bytes, MemoryDomain::device, "maps");
  out.fill(0, out_bytes, test::kPoison);
  std::vector<bool> written(s.T, false);
  for (auto [pos0, rows] : s.chunks) {
    Buffer qb(dev, size_t(rows) * qw * es, MemoryDomain::device, "q chunk"), dyn(dev, 16, MemoryDomain::device, "position");
    const std::vector<double> qc(q.begin() + size_t(pos0) * qw, q.begin() + size_t(pos0 + rows) * qw);
    qb.upload(0, test::pack(qc, fp16).data(), qc.size() * es);
    const uint32_t d[4] = {s.dynamic ? pos0 : 0u, 0, 0, 0};
    dyn.upload(0, d, sizeof d);
    Program prog(dev, "attn_probs test");
    kernel.record(prog, qb.range(0, qc.size() * es), kc.range(0, cache.size() * es), dyn.range(0, 4), out.range(0, out_bytes),
                  {rows, s.H, s.Hkv, s.D, cap, s.T, s.dynamic ? 0u : pos0, s.head0, s.heads});
    prog.run();
    for (uint32_t r = pos0; r < pos0 + rows; ++r) written[r] = true;
  }
  std::vector<uint32_t> bits(out_bytes / 4);
  out.download(0, bits.data(), out_bytes);
  std::vector<double> got, ref_rows;
  size_t untouched = 0, untouched_ok = 0;
  for (uint32_t hh = 0; hh < s.heads; ++hh)
    for (uint32_t m = 0; m < 2; ++m)
      for (uint32_t i = 0; i < s.T; ++i)
        for (uint32_t j = 0; j < s.T; ++j) {
          const uint32_t b = bits[((size_t(hh) * 2 + m) * s.T + i) * s.T + j];
          if (!written[i]) {  // rows outside every chunk: still the poison, bit for bit
            ++untouched;
            untouched_ok += b == test::kPoison;
            continue;
          }
          float f;
          std::memcpy(&f, &b, 4);
          got.push_back(f);
          ref_rows.push_back((m == 0 ? want.p1 : want.p2)[((size_t(s.head0) + hh) * s.T + i) * s.T + j]);
        }
  const auto c = test::compare(got, ref_rows);
  INFO("H=" << s.H << " Hkv=" << s.Hkv << " D=" << s.D << " T=" << s.T << " heads " << s.head0 << "+" << s.heads << ": "
            << c.summary());
  CHECK(test::within_spec(c, fp16, test::Scope::kernel));
  CHECK(untouched_ok == untouched);
}

void sweep_probs(Precision precision) {
  auto ctx = test::make_context_or_skip(precision);
  if (!ctx) return;
  AttnProbsKernel kernel(ctx->device(), KernelOptions::for_device(ctx->device()));
  const PShape shapes[] = {
      {2, 1, 16, 37, 0, 2, {{0, 20}, {20, 17}}, true},  // every row, dynamic positions, GQA
      {4, 2, 32, 9, 1, 2, {{3, 4}}, false},             // a head subset; rows 0-2 and 7-8 untouched
      {2, 2, 8, 100, 1, 1, {{0, 100}}, false},          // more keys than invocations per workgroup
  };
  uint64_t seed = 7;
  for (const auto& s : shapes) probs_case(*ctx, kernel, s, seed++);
}

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

TEST_CASE("attn_probs: softmax maps match the float64 reference fp32") { sweep_probs(Precision::fp32); }
TEST_CASE("attn_probs: softmax maps match the float64 reference fp16") { sweep_probs(Precision::fp16); }
TEST_CASE("attn_probs: Session attention_maps match the reference model fp32") { session_maps(Precision::fp32); }
TEST_CASE("attn_probs: Session attention_maps match the reference model fp16") { session_maps(Precision::fp16); }
