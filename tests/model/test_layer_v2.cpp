// The DIFF V2 layer (the authors' MultiheadFlashDiffV2, docs/maths.md "DIFF V2") on the GPU: against the
// PyTorch fixtures (tests/data/v2_layer, float64) and against the float64 reference
// (runtime/reference/diff_v2_ref) on fresh random weights, in both precisions: odd S, S = 1, GQA with 2 and
// 4 pairs per KV head, D in {16, 32, 64, 128}, E != H·D, saturated λ; chunked prefill then decode through
// the KV cache (fused and split-K kernels); refusals naming the tensor; the `diffvk layer` command.
#include <doctest/doctest.h>

#include <cstdio>
#include <string>
#include <vector>

#include <unistd.h>

#include "cli_run.hpp"
#include "diffvk/layer.hpp"
#include "diffvk/npy.hpp"
#include "gpu_test.hpp"
#include "model_fixture.hpp"
#include "reference/diff_attn_ref.hpp"
#include "reference/diff_v2_ref.hpp"

using namespace diffvk;
namespace ref = diffvk::ref;

namespace {
const std::string kDir = std::string(DIFFVK_TEST_DATA_DIR) + "/v2_layer/";

std::vector<float> to_f(const std::vector<double>& v) { return std::vector<float>(v.begin(), v.end()); }
std::vector<double> to_d(const std::vector<float>& v) { return std::vector<double>(v.begin(), v.end()); }
// v rounded as the GPU stores it (fp32, or fp16 on the fp16 path).
std::vector<double> stored(const std::vector<double>& v, bool fp16) {
  return test::unpack(test::pack(to_d(to_f(v)), fp16), fp16);
}

// Writes the layer's five tensors (F32) to a temporary safetensors file; returns its path.
std::string write_v2(const test::TempDir& dir, const ref::V2Shape& s, const ref::V2Weights& w,
                     const test::Tensors& extra = {}) {
  test::Tensors ts = extra;
  const int64_t E = s.E, H = s.H, Hkv = s.Hkv, D = s.D;
  ts["q_proj.weight"] = test::f32_tensor({2 * H * D, E}, to_f(w.wq));
  ts["k_proj.weight"] = test::f32_tensor({Hkv * D, E}, to_f(w.wk));
  ts["v_proj.weight"] = test::f32_tensor({Hkv * D, E}, to_f(w.wv));
  ts["o_proj.weight"] = test::f32_tensor({E, H * D}, to_f(w.wo));
  ts["lambda_proj.weight"] = test::f32_tensor({H, E}, to_f(w.wl));
  const std::string path = dir.path() + "/v2_layer.safetensors";
  const auto bytes = test::encode_safetensors(ts);
  test::write_bytes(path, bytes.data(), bytes.size());
  return path;
}

LayerOptions options(const ref::V2Shape& s, uint32_t capacity, uint32_t chunk, double theta = 10000.0) {
  LayerOptions o;
  o.num_heads = static_cast<uint32_t>(s.H);
  o.num_kv_heads = static_cast<uint32_t>(s.Hkv);
  o.rope_theta = theta;
  o.max_positions = capacity;
  o.chunk = chunk;
  return o;
}

// The layer on x (S rows) in one call, then again as prefill pieces and single-row decode steps, against
// the float64 reference of the storage-rounded weights and input.
void check_layer(Precision precision, const ref::V2Shape& s, int S, uint64_t seed, double lambda_std,
                 double theta = 10000.0) {
  auto ctx = test::make_context_or_skip(precision);
  if (!ctx) return;
  const bool fp16 = ctx->precision() == Precision::fp16;
  const ref::V2Weights w = ref::random_v2_weights(s, seed, lambda_std);
  const std::vector<double> x = ref::random_normal(size_t(S) * s.E, seed + 17);
  ref::V2Weights wr{stored(w.wq, fp16), stored(w.wk, fp16), stored(w.wv, fp16), stored(w.wo, fp16), stored(w.wl, fp16)};
  const std::vector<double> want = ref::diff_v2_layer(stored(x, fp16), S, 0, s, wr, theta);
  test::TempDir dir("diffvk-v2-layer");
  const std::string path = write_v2(dir, s, w);
  const std::vector<float> xf = to_f(x);
  INFO("E=" << s.E << " H=" << s.H << " Hkv=" << s.Hkv << " D=" << s.D << " S=" << S << " "
            << precision_name(ctx->precision()));

  auto layer = DiffAttnLayer::load(*ctx, path, options(s, uint32_t(S), 128, theta));
  CHECK(layer->is_v2());
  CHECK(layer->head_dim() == uint32_t(s.D));
  const auto c = test::compare(to_d(layer->forward(xf.data(), uint32_t(S))), want);
  INFO("one call: " << c.summary());
  CHECK(test::within_spec(c, fp16, test::Scope::layer));

  // Prefill in chunks of 5 (the fused kernel for more than 8 rows, split-K below), then decode steps.
  auto layer2 = DiffAttnLayer::load(*ctx, path, options(s, uint32_t(S), 5, theta));
  std::vector<float> got;
  const uint32_t first = uint32_t(S) / 2;
  if (first) {
    const auto a = layer2->forward(xf.data(), first);
    got.insert(got.end(), a.begin(), a.end());
  }
  for (uint32_t r = first; r < uint32_t(S); ++r) {
    const auto b = layer2->forward(xf.data() + size_t(r) * s.E, 1);
    got.insert(got.end(), b.begin(), b.end());
  }
  const auto c2 = test::compare(to_d(got), want);
  INFO("prefill + decode: " << c2.summary());
  CHECK(test::within_spec(c2, fp16, test::Scope::layer));
}

struct V2Case {
  int E, H, Hkv, D, S;
  double lambda_std;
};
// D in {16, 32, 64, 128}; 1, 2 and 4 pairs per KV head; E != H·D; odd S, S = 1; λ logits of ±50.
const V2Case kCases[] = {
    {48, 2, 2, 16, 13, 1.0},   // MHA, E > H·D
    {40, 4, 2, 32, 11, 1.0},   // 2 pairs per KV head, E < H·D
    {64, 4, 1, 16, 9, 1.0},    // 4 pairs per KV head
    {72, 2, 1, 64, 7, 1.0},    // D = 64
    {96, 1, 1, 128, 10, 1.0},  // D = 128
    {32, 2, 1, 16, 1, 1.0},    // S = 1
    {24, 3, 3, 8, 17, 50.0},   // saturated λ: logits of about ±50
};
}  // namespace

TEST_CASE("layer v2: the float64 reference on random weights, fp32 and fp16") {
  for (const V2Case& k : kCases)
    for (Precision p : {Precision::fp32, Precision::fp16}) {
      check_layer(p, ref::make_v2_shape(k.E, k.H, k.Hkv, k.D), k.S, 1000 + uint64_t(k.D) * 7 + k.S, k.lambda_std);
      if (test::g_skip_current) return;
    }
}

TEST_CASE("layer v2: matches the PyTorch fixtures (positions from 0), fp32 and fp16") {
  const auto meta_bytes = test::read_bytes(kDir + "meta.json");
  const nlohmann::json meta = nlohmann::json::parse(meta_bytes.begin(), meta_bytes.end());
  int checked = 0;
  for (const auto& item : meta["cases"].items()) {
    const std::string name = item.key();  // not structured bindings: INFO cannot capture those (clang 14)
    const auto& m = item.value();
    if (m["pos0"].get<int>() != 0) continue;  // a layer's positions start at 0
    const ref::V2Shape s = ref::make_v2_shape(m["E"], m["H"], m["Hkv"], m["D"]);
    const int S = m["S"];
    const std::string d = kDir + name + "/";
    auto arr = [&](const char* f) { return npy_as_float(read_npy(d + f)); };
    test::Tensors ts;
    ts["q_proj.weight"] = test::f32_tensor({2 * s.H * s.D, s.E}, arr("q_proj.npy"));
    ts["k_proj.weight"] = test::f32_tensor({s.Hkv * s.D, s.E}, arr("k_proj.npy"));
    ts["v_proj.weight"] = test::f32_tensor({s.Hkv * s.D, s.E}, arr("v_proj.npy"));
    ts["o_proj.weight"] = test::f32_tensor({s.E, s.H * s.D}, arr("o_proj.npy"));
    ts["lambda_proj.weight"] = test::f32_tensor({s.H, s.E}, arr("lambda_proj.npy"));
    test::TempDir dir("diffvk-v2-fixture");
    const std::string path = dir.path() + "/layer.safetensors";
    const auto bytes = test::encode_safetensors(ts);
    test::write_bytes(path, bytes.data(), bytes.size());
    const auto x = arr("x.npy");
    const auto y = to_d(arr("y.npy"));
    for (Precision p : test::supported_precisions()) {
      auto ctx = test::make_context(p);
      auto layer = DiffAttnLayer::load(*ctx, path, options(s, uint32_t(S), 128, m["rope_theta"].get<double>()));
      const auto c = test::compare(to_d(layer->forward(x.data(), uint32_t(S))), y);
      INFO(name << " " << precision_name(p) << ": " << c.summary());
      CHECK(test::within_spec(c, p == Precision::fp16, test::Scope::layer));
    }
    ++checked;
  }
  CHECK(checked >= 3);
}

TEST_CASE("layer v2: mixed and inconsistent files are refused naming the tensor") {
  auto ctx = test::make_context(Precision::fp32);
  const ref::V2Shape s = ref::make_v2_shape(32, 4, 2, 8);
  const ref::V2Weights w = ref::random_v2_weights(s, 7);
  test::TempDir dir("diffvk-v2-bad");
  auto refused = [&](const std::string& path, const LayerOptions& o) -> std::string {
    try {
      DiffAttnLayer::load(*ctx, path, o);
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  };
  // A DIFF V1 tensor in a V2 file.
  test::Tensors extra;
  extra["subln.weight"] = test::f32_tensor({16}, std::vector<float>(16, 1.0f));
  CHECK(refused(write_v2(dir, s, w, extra), options(s, 8, 8)).find("subln.weight") != std::string::npos);
  const std::string good = write_v2(dir, s, w);
  LayerOptions o = options(s, 8, 8);
  o.num_heads = 2;  // q_proj's 64 rows: D = 16, then lambda_proj (4 rows) no longer matches H
  o.num_kv_heads = 2;
  CHECK(refused(good, o).find("lambda_proj.weight") != std::string::npos);
  o = options(s, 8, 8);
  o.num_kv_heads = 3;
  CHECK(refused(good, o).find("num_kv_heads=3") != std::string::npos);
  o.num_heads = 4;
  o.num_kv_heads = 8;  // divides 2H = 8 but not H: the pair (2i, 2i+1) would read two KV heads
  CHECK(refused(good, o).find("num_kv_heads=8") != std::string::npos);
  o = options(s, 8, 8);
  o.num_heads = 3;
  CHECK(refused(good, o).find("num_heads=3") != std::string::npos);
  // A wrong o_proj shape.
  test::Tensors bad = test::read_tensors(good);
  bad["o_proj.weight"] =
      test::f32_tensor({int64_t(s.H) * s.D + 1, s.E}, std::vector<float>((s.H * s.D + 1) * s.E, 0.0f));
  const std::string bad_path = dir.path() + "/bad.safetensors";
  const auto bytes = test::encode_safetensors(bad);
  test::write_bytes(bad_path, bytes.data(), bytes.size());
  CHECK(refused(bad_path, options(s, 8, 8)).find("o_proj.weight") != std::string::npos);
}

TEST_CASE("layer v2: the diffvk layer command runs a V2 file (batch 2) and refuses --depth") {
  const ref::V2Shape s = ref::make_v2_shape(40, 4, 2, 8);
  const ref::V2Weights w = ref::random_v2_weights(s, 11);
  test::TempDir dir("diffvk-v2-cli");
  const std::string path = write_v2(dir, s, w);
  const int B = 2, S = 9;
  const std::vector<double> x = ref::random_normal(size_t(B) * S * s.E, 12);
  const std::string in = dir.path() + "/x.npy", out = dir.path() + "/y.npy";
  const std::vector<float> xf = to_f(x);
  write_npy_f32(in, {B, S, s.E}, xf.data());
  auto r = test::run_cli(dir, "layer --weights " + path + " --num-heads 4 --num-kv-heads 2 --input " + in +
                                  " --output " + out + " --precision fp32 --validation");
  INFO(r.out);
  REQUIRE(r.exit_code == 0);
  CHECK(r.out.find("validation:") == std::string::npos);
  CHECK(r.out.find("DIFF V2") != std::string::npos);
  const auto y = to_d(npy_as_float(read_npy(out)));
  REQUIRE(y.size() == x.size());
  for (int b = 0; b < B; ++b) {
    const std::vector<double> xb(x.begin() + b * S * s.E, x.begin() + (b + 1) * S * s.E);
    const auto want = ref::diff_v2_layer(stored(xb, false), S, 0, s, w, 10000.0);
    const auto c = test::compare(std::vector<double>(y.begin() + b * S * s.E, y.begin() + (b + 1) * S * s.E), want);
    INFO("batch " << b << ": " << c.summary());
    CHECK(test::within_spec(c, false, test::Scope::layer));
  }
  const std::string out2 = dir.path() + "/y2.npy";
  r = test::run_cli(
      dir, "layer --weights " + path + " --num-heads 4 --num-kv-heads 2 --depth 2 --input " + in + " --output " + out2);
  CHECK(r.exit_code != 0);
  CHECK(r.out.find("--depth") != std::string::npos);
  CHECK_FALSE(std::ifstream(out2).good());
}
