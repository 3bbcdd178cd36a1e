// Tests of the float64 reference of a whole DIFF V2 model (runtime/reference/model_ref.hpp, ModelWeights::v2):
// the PyTorch transcription's logits stored in tests/data/model_tiny_v2/ (tests/python/make_v2_model_fixture.py),
// the cached V2 layer against diff_v2_ref.hpp's, the checkpoint readers of tests/common/model_fixture.hpp, and
// kv_round on the D-wide cache rows. Pure CPU.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "diffvk/npy.hpp"
#include "io/half.hpp"
#include "model_fixture.hpp"
#include "ref_compare.hpp"
#include "reference/diff_attn_ref.hpp"
#include "reference/diff_v2_ref.hpp"
#include "reference/model_ref.hpp"

namespace ref = diffvk::ref;
namespace test = diffvk::test;
using Vec = std::vector<double>;

namespace {

using test::max_abs;
using test::max_abs_diff;

std::string fixture_dir() {
  const std::string dir = test::shared_tiny_v2_model_dir();
  REQUIRE_MESSAGE(!dir.empty(), "tests/data/model_tiny_v2 is missing (tests/python/make_v2_model_fixture.py)");
  return dir;
}
std::vector<int> fixture_tokens(const std::string& dir) {
  const diffvk::NpyArray a = diffvk::read_npy(dir + "/tokens.npy");
  REQUIRE(a.dtype == "<i4");
  REQUIRE(a.shape.size() == 1);
  const std::vector<int64_t> t = diffvk::npy_as_int64(a);
  return std::vector<int>(t.begin(), t.end());
}
Vec fixture_logits(const std::string& dir, std::size_t rows, std::size_t V) {
  const diffvk::NpyArray a = diffvk::read_npy(dir + "/logits.npy");
  REQUIRE(a.dtype == "<f8");
  REQUIRE(a.shape == std::vector<int64_t>{int64_t(rows), int64_t(V)});
  Vec v(a.numel());
  REQUIRE(a.data.size() == v.size() * sizeof(double));
  std::memcpy(v.data(), a.data.data(), a.data.size());
  return v;
}

// Zeroes the low 16 bits of each double's mantissa's top 24 (keeps 8 mantissa bits): a coarse rounding.
void chop_row(double* row, int n) {
  for (int i = 0; i < n; ++i) {
    const float f = static_cast<float>(row[i]);
    uint32_t u;
    std::memcpy(&u, &f, 4);
    u &= 0xFFFF8000u;
    float g;
    std::memcpy(&g, &u, 4);
    row[i] = g;
  }
}

}  // namespace

TEST_CASE("reference: DIFF V2 model reproduces the PyTorch fixture (tests/data/model_tiny_v2)") {
  const std::string dir = fixture_dir();
  const std::vector<uint8_t> meta_text = test::read_bytes(dir + "/meta.json");
  const nlohmann::json meta = nlohmann::json::parse(meta_text.begin(), meta_text.end());
  const ref::ModelWeights m = test::reference_weights_v2_dir(dir, false);
  CHECK(m.v2);
  CHECK(m.v2_shape.E == 96);
  CHECK(m.v2_shape.o_width() == 64);  // H·D != E
  CHECK(m.v2_shape.group() == 4);     // 2 output heads' pairs on one KV head
  CHECK(m.rope_theta == 1000.0);
  CHECK(m.eps == 1e-6);
  CHECK(m.lm_head != m.embed);  // untied

  const std::vector<int> tokens = fixture_tokens(dir);
  REQUIRE(tokens.size() == meta.at("N").get<std::size_t>());
  const Vec want = fixture_logits(dir, tokens.size(), std::size_t(m.vocab));
  const ref::ModelRun run = ref::model_forward(m, tokens);
  const double scale = std::max(1.0, max_abs(want));
  const double err = max_abs_diff(run.logits, want);
  MESSAGE("model_tiny_v2: max |logit| " << scale << ", max abs error " << err);
  CHECK(err <= 1e-9 * scale);
  CHECK(run.hidden.size() == m.layers.size() + 1);

  // The tokens after the prompt are the greedy continuation: the argmax of the previous row, by the
  // margin meta.json records.
  const std::size_t V = std::size_t(m.vocab), prompt = meta.at("prompt_len").get<std::size_t>();
  double min_margin = INFINITY;
  for (std::size_t i = prompt; i < tokens.size(); ++i) {
    const double* row = &run.logits[(i - 1) * V];
    const std::size_t top = std::size_t(std::max_element(row, row + V) - row);
    CHECK(int(top) == tokens[i]);
    double second = -INFINITY;
    for (std::size_t c = 0; c < V; ++c)
      if (c != top) second = std::max(second, row[c]);
    min_margin = std::min(min_margin, row[top] - second);
  }
  CHECK(min_margin == doctest::Approx(meta.at("min_greedy_margin").get<double>()).epsilon(1e-9));
  CHECK(min_margin > 0.05);
}

TEST_CASE("reference: DIFF V2 cached layer equals the uncached one and prefill then decode equals one pass") {
  const ref::V2Shape s = ref::make_v2_shape(40, 4, 2, 8);
  const ref::V2Weights w = ref::random_v2_weights(s, 71, 3.0);
  const int S = 7;
  const Vec x = ref::random_normal(std::size_t(S) * s.E, 72);
  const Vec y = ref::diff_v2_layer(x, S, 0, s, w, 500000.0);
  CHECK(max_abs_diff(ref::v2_layer_forward(s, w, 500000.0, x, S), y) <= 1e-12 * std::max(1.0, max_abs(y)));

  // Prefill 3 rows, then 1, then 3, through one cache.
  ref::KVCache cache;
  Vec got;
  for (auto [pos0, n] : {std::pair{0, 3}, std::pair{3, 1}, std::pair{4, 3}}) {
    const Vec part(x.begin() + std::ptrdiff_t(pos0) * s.E, x.begin() + std::ptrdiff_t(pos0 + n) * s.E);
    const Vec out = ref::v2_layer_forward(s, w, 500000.0, part, n, pos0, &cache);
    got.insert(got.end(), out.begin(), out.end());
  }
  CHECK(cache.len == S);
  CHECK(cache.k.size() == std::size_t(S) * s.kv_width());
  CHECK(max_abs_diff(got, y) <= 1e-12 * std::max(1.0, max_abs(y)));

  CHECK_THROWS_AS(ref::v2_layer_forward(s, w, 500000.0, x, S, 2), std::invalid_argument);  // pos0 without a cache
  ref::KVCache wrong;
  wrong.len = 1;
  CHECK_THROWS_AS(ref::v2_layer_forward(s, w, 500000.0, x, S, 1, &wrong), std::invalid_argument);  // rows missing
}

TEST_CASE("reference: DIFF V2 synthesized checkpoint round-trips through the reader") {
  test::TempDir tmp("diffvk-v2ref");
  for (const bool tie : {false, true}) {
    CAPTURE(tie);
    test::TinyV2Spec spec;
    spec.tie = tie;
    const test::Tensors ts = test::tiny_v2_tensors(spec, 5);
    CHECK((ts.count("lm_head.weight") == 0) == tie);
    const std::string dir = tmp / (tie ? "tied" : "untied");
    test::write_checkpoint(dir, test::tiny_v2_config_json(spec).dump(2), ts);

    auto floats = [&](const std::string& name) {
      const test::RawTensor& t = ts.at(name);
      std::vector<float> f(t.bytes.size() / 4);
      std::memcpy(f.data(), t.bytes.data(), t.bytes.size());
      return Vec(f.begin(), f.end());
    };
    for (const bool fp16 : {false, true}) {
      CAPTURE(fp16);
      const ref::ModelWeights m = test::reference_weights_v2_dir(dir, fp16);
      auto want = [&](const std::string& name) { return fp16 ? ref::round_to_f16(floats(name)) : floats(name); };
      CHECK(m.v2);
      CHECK(m.v2_shape.E == int(spec.hidden));
      CHECK(m.v2_shape.H == int(spec.heads));
      CHECK(m.v2_shape.Hkv == int(spec.kv_heads));
      CHECK(m.v2_shape.D == int(spec.head_dim));
      CHECK(m.vocab == int(spec.vocab));
      CHECK(m.I == int(spec.intermediate));
      CHECK(m.rope_theta == 10000.0);
      CHECK(m.eps == 1e-5);
      CHECK(m.embed == want("model.embed_tokens.weight"));
      CHECK(m.norm == want("model.norm.weight"));
      CHECK(m.lm_head == want(tie ? "model.embed_tokens.weight" : "lm_head.weight"));
      REQUIRE(m.layers.size() == spec.layers);
      for (uint32_t l = 0; l < spec.layers; ++l) {
        const std::string p = "model.layers." + std::to_string(l) + ".";
        const ref::ModelLayerWeights& L = m.layers[l];
        CHECK(L.attn_norm == want(p + "input_layernorm.weight"));
        CHECK(L.attn_v2.wq == want(p + "self_attn.q_proj.weight"));
        CHECK(L.attn_v2.wk == want(p + "self_attn.k_proj.weight"));
        CHECK(L.attn_v2.wv == want(p + "self_attn.v_proj.weight"));
        CHECK(L.attn_v2.wl == want(p + "self_attn.lambda_proj.weight"));
        CHECK(L.attn_v2.wo == want(p + "self_attn.o_proj.weight"));
        CHECK(L.ffn_norm == want(p + "post_attention_layernorm.weight"));
        CHECK(L.gate == want(p + "mlp.gate_proj.weight"));
        CHECK(L.up == want(p + "mlp.up_proj.weight"));
        CHECK(L.down == want(p + "mlp.down_proj.weight"));
      }
      // The in-memory reader gives the same weights, and they run.
      const ref::ModelWeights mem = test::reference_weights_v2(spec, ts, fp16);
      CHECK(mem.embed == m.embed);
      CHECK(mem.layers.back().attn_v2.wo == m.layers.back().attn_v2.wo);
      const ref::ModelRun run = ref::model_forward(m, {2, 72, 105, 33});
      CHECK(run.logits.size() == 4 * std::size_t(spec.vocab));
      CHECK(std::all_of(run.logits.begin(), run.logits.end(), [](double v) { return std::isfinite(v); }));
    }
  }

  // F16 tensors are read exactly: the same values as the F32 file rounded to fp16.
  test::TinyV2Spec spec;
  test::Tensors ts = test::tiny_v2_tensors(spec, 6);
  const ref::ModelWeights want = test::reference_weights_v2(spec, ts, true);
  for (auto& [name, t] : ts) {
    std::vector<float> f(t.bytes.size() / 4);
    std::memcpy(f.data(), t.bytes.data(), t.bytes.size());
    std::vector<uint16_t> h(f.size());
    for (std::size_t i = 0; i < f.size(); ++i) h[i] = diffvk::float_to_half(f[i]);
    t.dtype = "F16";
    t.bytes.assign(reinterpret_cast<const uint8_t*>(h.data()), reinterpret_cast<const uint8_t*>(h.data() + h.size()));
  }
  const ref::ModelWeights got = test::reference_weights_v2(spec, ts, false);
  CHECK(got.embed == want.embed);
  CHECK(got.layers[1].attn_v2.wq == want.layers[1].attn_v2.wq);
  CHECK(got.layers[0].down == want.layers[0].down);

  // A misshapen tensor is refused by the reader, naming it.
  test::Tensors bad = test::tiny_v2_tensors(spec, 6);
  bad["model.layers.1.self_attn.lambda_proj.weight"].shape = {int64_t(spec.hidden), int64_t(spec.heads)};
  CHECK_THROWS_WITH(test::reference_weights_v2(spec, bad, false), doctest::Contains("lambda_proj"));
}

TEST_CASE("reference: DIFF V2 kv_round rounds each D-wide K row after RoPE and V row") {
  const std::string dir = fixture_dir();
  ref::ModelWeights m = test::reference_weights_v2_dir(dir, false);
  const std::vector<int> tokens = fixture_tokens(dir);
  const int S = int(tokens.size()), E = m.width(), D = m.v2_shape.D, Hkv = m.v2_shape.Hkv;
  const Vec exact = ref::model_forward(m, tokens).logits;

  // An identity rounding sees every row once, D values each, and changes nothing.
  std::vector<Vec> rows;
  m.kv_round = [&](double* row, int n) {
    CHECK(n == D);
    rows.emplace_back(row, row + n);
  };
  CHECK(ref::model_forward(m, tokens).logits == exact);
  REQUIRE(rows.size() == m.layers.size() * 2 * std::size_t(S) * Hkv);

  // Layer 0's first S·Hkv rows are K after RoPE: rebuilt here from the embeddings.
  Vec x(std::size_t(S) * E);
  for (int r = 0; r < S; ++r) std::copy_n(&m.embed[std::size_t(tokens[r]) * E], E, &x[std::size_t(r) * E]);
  const Vec n0 = ref::rms_norm(x, S, E, m.layers[0].attn_norm, m.eps);
  Vec k = ref::linear(n0, S, E, m.layers[0].attn_v2.wk, m.v2_shape.kv_width());
  const Vec v = ref::linear(n0, S, E, m.layers[0].attn_v2.wv, m.v2_shape.kv_width());
  ref::rope_rows(k, S, Hkv, D, 0, m.rope_theta);
  double err = 0.0;
  for (std::size_t r = 0; r < std::size_t(S) * Hkv; ++r) {
    for (int c = 0; c < D; ++c) {
      err = std::max(err, std::fabs(rows[r][c] - k[r * D + c]));
      err = std::max(err, std::fabs(rows[std::size_t(S) * Hkv + r][c] - v[r * D + c]));
    }
  }
  CHECK(err <= 1e-12);

  // A coarse rounding changes the logits, a little.
  m.kv_round = chop_row;
  const Vec chopped = ref::model_forward(m, tokens).logits;
  const double d = max_abs_diff(chopped, exact);
  MESSAGE("8-bit mantissa cache rows: max |logit change| " << d);
  CHECK(d > 1e-4);
  CHECK(d < 0.5);
}

TEST_CASE("reference: DIFF V2 model refuses weights of the wrong size") {
  test::TinyV2Spec spec;
  ref::ModelWeights m = test::reference_weights_v2(spec, test::tiny_v2_tensors(spec, 7), false);
  m.layers[1].attn_v2.wl.pop_back();
  CHECK_THROWS_AS(ref::model_forward(m, {2, 3}), std::invalid_argument);
  m = test::reference_weights_v2(spec, test::tiny_v2_tensors(spec, 7), false);
  CHECK_THROWS_AS(ref::model_forward(m, {2, int(spec.vocab)}), std::invalid_argument);  // token outside
}
