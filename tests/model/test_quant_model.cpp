// Quantized weights (LoadOptions::weights = q8_0 / q4_0) against the float64 reference
// (runtime/reference/model_ref) run on the *dequantized* weights: every linear weight the loader
// quantizes is quantized and dequantized on the host with io/quant.hpp (GGUF's blocks, bit for bit what
// the loader uploads), the rest (norms, λ, the embedding, a tied lm_head, a matrix whose input width is not
// a multiple of 32) rounded to the storage type as the device sees it. Prefill (the dequantize-then-matmul
// path), then decode steps (the quantized one-row kernel), fp16 and fp32 storage, within docs/maths.md's
// whole-model bounds (test::within_spec, Scope::layer). Also: the quantized weights' real byte counts.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstring>
#include <memory>

#include "diffvk/model.hpp"
#include "diffvk/npy.hpp"
#include "gpu_test.hpp"
#include "io/half.hpp"
#include "io/quant.hpp"
#include "model_fixture.hpp"
#include "model_parity.hpp"
#include "reference/model_ref.hpp"

using namespace diffvk;

namespace {

const std::string kBundled = std::string(DIFFVK_TEST_DATA_DIR) + "/../../examples/models/tiny-diff";
const std::string kFixture = std::string(DIFFVK_TEST_DATA_DIR) + "/model_fixture";

// A tensor of the checkpoint as float32 (F32 or F16 files).
std::vector<float> tensor_f32(const test::Tensors& ts, const std::string& name) {
  const test::RawTensor& t = ts.at(name);
  std::vector<float> f;
  if (t.dtype == "F32") {
    f.resize(t.bytes.size() / 4);
    std::memcpy(f.data(), t.bytes.data(), t.bytes.size());
  } else {
    REQUIRE(t.dtype == "F16");
    f.resize(t.bytes.size() / 2);
    for (size_t i = 0; i < f.size(); ++i) f[i] = half_to_float(uint16_t(t.bytes[2 * i] | t.bytes[2 * i + 1] << 8));
  }
  return f;
}

// What the device holds for a weight: quantized blocks (dequantized here, exactly), or storage-type values.
std::vector<double> device_values(const std::vector<float>& f, size_t cols, QuantType q, bool fp16) {
  std::vector<double> d(f.size());
  if (q == QuantType::f16 || cols % kQuantBlockWeights != 0) {  // the loader keeps the storage type then
    for (size_t i = 0; i < f.size(); ++i) d[i] = f[i];
    return fp16 ? ref::round_to_f16(d) : d;
  }
  std::vector<uint8_t> blocks(quant_row_bytes(q, cols));
  std::vector<float> row(cols);
  for (size_t r = 0; r < f.size() / cols; ++r) {
    quantize_row(q, f.data() + r * cols, cols, blocks.data());
    dequantize_row(q, blocks.data(), cols, row.data());
    for (size_t k = 0; k < cols; ++k) d[r * cols + k] = row[k];
  }
  return d;
}

// The float64 reference's weights of a native checkpoint as a model loaded with `weights` holds them.
ref::ModelWeights quantized_reference(const std::string& dir, const ModelConfig& c, QuantType q, bool fp16) {
  const test::Tensors ts = test::read_tensors(dir + "/model.safetensors");
  const size_t E = c.hidden_size, I = c.intermediate_size;
  auto plain = [&](const std::string& n) { return device_values(tensor_f32(ts, n), 1, QuantType::f16, fp16); };
  auto lin = [&](const std::string& n, size_t cols, QuantType t) {
    return device_values(tensor_f32(ts, n), cols, t, fp16);
  };
  ref::ModelWeights m;
  m.shape = ref::make_shape(int(E), int(c.num_heads), int(c.num_kv_heads));
  m.vocab = int(c.vocab_size);
  m.I = int(I);
  m.eps = c.rms_norm_eps;
  m.rope_theta = c.rope_theta;
  // lm_head: Q8_0 when the linears are Q4_0; the embedding like the linears, or like the head when tied.
  const QuantType head_q = q == QuantType::q4_0 ? QuantType::q8_0 : q;
  m.embed = lin("embed_tokens.weight", E, c.tie_word_embeddings ? head_q : q);
  m.norm = plain("norm.weight");
  m.lm_head = c.tie_word_embeddings ? m.embed : lin("lm_head.weight", E, head_q);
  for (uint32_t l = 0; l < c.num_layers; ++l) {
    const std::string p = "layers." + std::to_string(l) + ".";
    auto lam = [&](const std::string& n) {  // λ from the file's values (model_load.cpp), whatever the storage type
      const auto f = tensor_f32(ts, n);
      return std::vector<double>(f.begin(), f.end());
    };
    m.layers.push_back(test::reference_layer(
        p, E, I, plain, [&](const std::string& n, size_t cols) { return lin(n, cols, q); }, lam));
  }
  return m;
}

// The same for a DIFF V2 checkpoint (test::reference_weights_v2_dir's names): the fused projection [Wq; Wλ; Wk; Wv]
// is quantized as one weight of input width E, so each of its parts is quantized by rows like the others.
ref::ModelWeights quantized_reference_v2(const std::string& dir, const ModelConfig& c, QuantType q, bool fp16) {
  ref::ModelWeights m = test::reference_weights_v2_dir(dir, false);  // the file's float32 values, unrounded
  auto as = [&](std::vector<double>& v, size_t cols, QuantType t) {
    v = device_values(std::vector<float>(v.begin(), v.end()), cols, t, fp16);
  };
  const size_t E = c.hidden_size, I = c.intermediate_size, HD = size_t(c.num_heads) * c.head_dim();
  const QuantType head_q = q == QuantType::q4_0 ? QuantType::q8_0 : q;
  as(m.embed, E, c.tie_word_embeddings ? head_q : q);
  m.lm_head = c.tie_word_embeddings ? m.embed : (as(m.lm_head, E, head_q), m.lm_head);
  as(m.norm, 1, QuantType::f16);
  for (ref::ModelLayerWeights& L : m.layers) {
    for (auto* v : {&L.attn_norm, &L.ffn_norm}) as(*v, 1, QuantType::f16);
    for (auto* v : {&L.attn_v2.wq, &L.attn_v2.wl, &L.attn_v2.wk, &L.attn_v2.wv, &L.gate, &L.up}) as(*v, E, q);
    as(L.attn_v2.wo, HD, q);
    as(L.down, I, q);
  }
  return m;
}
ref::ModelWeights reference_for(const std::string& dir, const ModelConfig& c, QuantType q, bool fp16) {
  return c.v2() ? quantized_reference_v2(dir, c, q, fp16) : quantized_reference(dir, c, q, fp16);
}

// Prefill `prompt` tokens, then decode the rest one at a time; every logit against the reference.
void check_quantized(const std::string& dir, Precision precision, QuantType q, const std::vector<int32_t>& toks,
                     size_t prompt) {
  auto ctx = test::make_context_or_skip(precision);
  if (!ctx) return;
  const bool fp16 = ctx->precision() == Precision::fp16;
  LoadOptions o;
  o.weights = static_cast<QuantKind>(q);
  // The reference multiplies unrounded activations: the dequantizing decode path. The int8 path (chosen by
  // default where the device accelerates integer dot products) is checked op by op against a reference on
  // its own int8 activations (the linear_row case table), and as a whole model below.
  o.quant_decode = LoadOptions::QuantDecode::dequant;
  o.quant_prefill = LoadOptions::QuantDecode::dequant;
  auto model = Model::load(*ctx, dir, o);
  const ModelConfig& c = model->config();
  const auto ref =
      ref::model_forward(reference_for(dir, c, q, fp16), std::vector<int>(toks.begin(), toks.end())).logits;
  auto s = Session::create(*model, SessionOptions{uint32_t(toks.size() + 4), 16});
  const auto got = test::teacher_forced(*s, toks, prompt);
  REQUIRE(got.size() == ref.size());
  const test::Compare cmp = test::compare(std::vector<double>(got.begin(), got.end()), ref);
  MESSAGE(std::string(quant_type_name(q))
          << " " << std::string(precision_name(ctx->precision())) << " " << dir << ": " << cmp.summary());
  CHECK(test::within_spec(cmp, fp16, test::Scope::layer));
  // The same weights without quantization are further from this reference than the bound: the check sees
  // the quantization (a load that silently kept the storage type would fail it).
  if (q == QuantType::q4_0) {
    auto plain = Model::load(*ctx, dir);
    auto s2 = Session::create(*plain, SessionOptions{uint32_t(toks.size() + 4), 16});
    const auto un = test::teacher_forced(*s2, toks, prompt);
    const test::Compare c2 = test::compare(std::vector<double>(un.begin(), un.end()), ref);
    INFO("unquantized weights against the q4_0 reference: " << c2.summary());
    CHECK_FALSE(test::within_spec(c2, fp16, test::Scope::layer));
  }
}

std::vector<int32_t> bundled_tokens(size_t n) {
  auto t = test::load_tokens(kFixture + "/tokens_1.npy");
  if (t.size() > n) t.resize(n);
  return t;
}

}  // namespace

// The bundled model (E = 256, I = 704: every linear quantizes; lm_head is tied to the embedding and stays).
TEST_CASE("quant model: bundled model q8_0 fp32") {
  check_quantized(kBundled, Precision::fp32, QuantType::q8_0, bundled_tokens(28), 23);
}
TEST_CASE("quant model: bundled model q8_0 fp16") {
  check_quantized(kBundled, Precision::fp16, QuantType::q8_0, bundled_tokens(28), 23);
}
TEST_CASE("quant model: bundled model q4_0 fp32") {
  check_quantized(kBundled, Precision::fp32, QuantType::q4_0, bundled_tokens(28), 23);
}
TEST_CASE("quant model: bundled model q4_0 fp16") {
  check_quantized(kBundled, Precision::fp16, QuantType::q4_0, bundled_tokens(28), 23);
}

// The tiny DIFF V2 model (E = 96, D = 32, H·D = 64, I = 128: every linear quantizes, the λ rows with q).
TEST_CASE("quant model: the tiny DIFF V2 model, q8_0 and q4_0") {
  const std::string dir = test::shared_tiny_v2_model_dir();
  REQUIRE(!dir.empty());
  const auto toks = test::load_tokens(dir + "/tokens.npy");
  for (Precision p : test::supported_precisions())
    for (QuantType q : {QuantType::q8_0, QuantType::q4_0}) check_quantized(dir, p, q, toks, 9);
}

// An untied synthesized model: a quantized lm_head (Q8_0 under q4_0) and a down projection whose input
// width (I = 48) is not a multiple of 32, which stays in the storage type.
TEST_CASE("quant model: untied lm_head and a width that stays in the storage type") {
  test::TempDir tmp("diffvk-quant-model");
  test::TinySpec spec;
  spec.hidden = 64, spec.heads = 2, spec.kv_heads = 1, spec.intermediate = 48;
  test::write_tiny_model(tmp.path(), spec, 7);
  const std::vector<int32_t> toks{2, 72, 101, 108, 108, 111, 32, 119, 111, 114, 108, 100};
  for (Precision p : test::supported_precisions())
    for (QuantType q : {QuantType::q8_0, QuantType::q4_0}) check_quantized(tmp.path(), p, q, toks, 9);
}

namespace {
// One int8 run of the bundled model against the float64 reference on the dequantized weights: the int8 path on
// decode (int8_decode) or on prefill, the other path dequantizing; teacher-forced logits of every position.
struct Int8Run {
  std::vector<float> got;
  std::vector<double> ref;
  size_t V = 0;
};
Int8Run int8_run(Context& ctx, QuantType q, bool int8_decode, const std::vector<int32_t>& toks, size_t prompt,
                 uint32_t chunk) {
  LoadOptions o;
  o.weights = static_cast<QuantKind>(q);
  o.quant_decode = int8_decode ? LoadOptions::QuantDecode::int8_dot : LoadOptions::QuantDecode::dequant;
  o.quant_prefill = int8_decode ? LoadOptions::QuantDecode::dequant : LoadOptions::QuantDecode::int8_dot;
  auto model = Model::load(ctx, kBundled, o);
  CHECK(model->load_stats().quant_decode == (int8_decode ? "int8_dot" : "dequant"));
  CHECK(model->load_stats().quant_prefill == (int8_decode ? "dequant" : "int8_dot"));
  Int8Run r;
  r.ref = ref::model_forward(quantized_reference(kBundled, model->config(), q, false),
                             std::vector<int>(toks.begin(), toks.end()))
              .logits;
  auto s = Session::create(*model, SessionOptions{uint32_t(toks.size() + 4), chunk});
  r.got = test::teacher_forced(*s, toks, prompt);
  r.V = model->config().vocab_size;
  REQUIRE(r.got.size() == r.ref.size());
  const test::Compare cmp = test::compare(std::vector<double>(r.got.begin(), r.got.end()), r.ref);
  MESSAGE(quant_type_name(q) << (int8_decode ? " int8 decode" : " int8 prefill")
                             << " vs the dequantized reference: " << cmp.summary());
  CHECK(cmp.nmse < 1e-4);  // measured 8.6e-6 (decode) and 1.3e-5 (prefill) on the bundled model (lavapipe, fp32)
  CHECK(cmp.nmse > 1e-9);  // the activations were rounded: this is not the dequantizing path
  return r;
}

// An fp32 context with shaderIntegerDotProduct, or null (the test is skipped).
std::unique_ptr<Context> int8_context_or_skip() {
  auto ctx = test::make_context_or_skip(Precision::fp32);
  if (ctx && !ctx->device().caps().integer_dot_product) {
    test::skip("the device has no shaderIntegerDotProduct");
    ctx.reset();
  }
  return ctx;
}
}  // namespace

// The int8 dot-product decode path on a whole model: it rounds each linear's input to int8 blocks, so it is
// not held to the dequantized reference's bound; it must agree with it on the next token, stay close in
// nmse, and differ from the dequantizing path (it really ran). Skipped without shaderIntegerDotProduct.
TEST_CASE("quant model: int8 dot-product decode agrees with the dequantized reference") {
  auto ctx = int8_context_or_skip();
  if (!ctx) return;
  const auto toks = bundled_tokens(28);
  for (QuantType q : {QuantType::q8_0, QuantType::q4_0}) {
    // Most positions through decode (the path under test): a 4-token prompt.
    const Int8Run r = int8_run(*ctx, q, /*int8_decode=*/true, toks, 4, 16);
    size_t agree = 0;
    for (size_t t = 0; t < toks.size(); ++t) {
      const auto g0 = r.got.begin() + t * r.V;
      const auto r0 = r.ref.begin() + t * r.V;
      agree += std::max_element(g0, g0 + r.V) - g0 == std::max_element(r0, r0 + r.V) - r0;
    }
    CHECK(agree == toks.size());
  }
}

// The int8 dot-product prefill matmul (LoadOptions::quant_prefill, linear_reg_dot.comp) on a whole model, as the
// decode test above: every position but the last through prefill (one chunk of 27 rows: past one 16-row tile),
// decode dequantizing. Skipped without shaderIntegerDotProduct.
TEST_CASE("quant model: int8 dot-product prefill agrees with the dequantized reference") {
  auto ctx = int8_context_or_skip();
  if (!ctx) return;
  const auto toks = bundled_tokens(28);
  for (QuantType q : {QuantType::q8_0, QuantType::q4_0}) {
    const Int8Run r = int8_run(*ctx, q, /*int8_decode=*/false, toks, toks.size() - 1, 32);
    // The next token agrees wherever the reference's best logit leads the second by more than 0.5 (the
    // rounding moves logits by up to ~0.17 here: a near-tie may flip, and is only counted).
    size_t clear = 0, agree = 0, near_ties = 0;
    for (size_t t = 0; t < toks.size(); ++t) {
      const auto g0 = r.got.begin() + t * r.V;
      const auto r0 = r.ref.begin() + t * r.V;
      const size_t best = std::max_element(r0, r0 + r.V) - r0;
      double second = -1e300;
      for (size_t v = 0; v < r.V; ++v)
        if (v != best) second = std::max(second, double(r0[v]));
      if (r0[best] - second <= 0.5) {
        ++near_ties;
        continue;
      }
      ++clear;
      agree += size_t(std::max_element(g0, g0 + r.V) - g0) == best;
    }
    MESSAGE(clear << " positions with a clear next token, " << near_ties << " near-ties");
    CHECK(clear >= toks.size() / 2);
    CHECK(agree == clear);
  }
}

TEST_CASE("quant model: weight bytes are the quantized bytes") {
  auto ctx = test::make_context(Precision::fp32);
  const auto f16 = Model::load(*ctx, kBundled);
  LoadOptions o;
  o.weights = QuantKind::q8_0;
  const auto q8 = Model::load(*ctx, kBundled, o);
  o.weights = QuantKind::q4_0;
  const auto q4 = Model::load(*ctx, kBundled, o);
  const ModelConfig& c = f16->config();
  const uint64_t E = c.hidden_size, I = c.intermediate_size, D = c.head_dim(), Hkv = c.num_kv_heads;
  const uint64_t linear =
      c.num_layers * (E * (E + 4 * Hkv * D) + E * E + 2 * I * E + E * I);  // weights of the quantized linears
  REQUIRE(c.tie_word_embeddings);  // the embedding table is the head: Q8_0 in both modes, read whole, plus one row
  const uint64_t table = uint64_t(c.vocab_size) * E;
  const uint64_t rest = f16->weight_bytes() - linear * 4 - table * 4 - E * 4;  // fp32: everything else (norms)
  MESSAGE("bundled model weight bytes per token: fp32 " << f16->weight_bytes() << ", q8_0 " << q8->weight_bytes()
                                                        << ", q4_0 " << q4->weight_bytes());
  // Per 32 weights: 2 scale bytes + 32 (Q8_0) or 16 (Q4_0) quant bytes; each matrix's scale array padded to 16 bytes.
  const uint64_t head = (table + E) / 32 * 34, pad = 16 * (4 * c.num_layers + 1);
  CHECK(q8->weight_bytes() >= rest + linear / 32 * 34 + head);
  CHECK(q8->weight_bytes() <= rest + linear / 32 * 34 + head + pad);
  CHECK(q4->weight_bytes() >= rest + linear / 32 * 18 + head);
  CHECK(q4->weight_bytes() <= rest + linear / 32 * 18 + head + pad);
  // LoadOptions::q4_0_head: the tied table (the head) in Q4_0 too.
  o.q4_0_head = true;
  const auto q4h = Model::load(*ctx, kBundled, o);
  const uint64_t head4 = (table + E) / 32 * 18;
  CHECK(q4h->weight_bytes() >= rest + linear / 32 * 18 + head4);
  CHECK(q4h->weight_bytes() <= rest + linear / 32 * 18 + head4 + pad);
  CHECK(q8->load_stats().weight_bytes < f16->load_stats().weight_bytes);
}

TEST_CASE("quant model: an unknown weight format is rejected") {
  auto ctx = test::make_context(Precision::fp32);
  LoadOptions o;
  o.weights = static_cast<QuantKind>(7);
  try {
    Model::load(*ctx, kBundled, o);
    FAIL("no error");
  } catch (const Error& e) {
    CHECK(e.status() == Status::invalid_argument);
    CHECK(std::string(e.what()).find("weight format") != std::string::npos);
  }
}

// ---- The Q8_0 KV cache (SessionOptions::kv_cache): against the float64 reference whose cache
// rows are rounded through GGUF's Q8_0 as they are appended (KVCache::round_row), i.e. the reference run on
// the dequantized cache. Weights unquantized. Prefill then decode steps, fp32 and fp16, within docs/maths.md's
// whole-model bounds; the f16-KV session's logits differ from the Q8_0 one's (the cache really was quantized).
namespace {
void q8_round(double* row, int n) {
  std::vector<float> f(row, row + n), y(n);
  std::vector<uint8_t> blocks(quant_row_bytes(QuantType::q8_0, n));
  quantize_row(QuantType::q8_0, f.data(), n, blocks.data());
  dequantize_row(QuantType::q8_0, blocks.data(), n, y.data());
  std::copy(y.begin(), y.end(), row);
}
}  // namespace

// model_tiny: E = 64, 2 heads of D = 16 over one KV head: cache rows of 32 (one block, a padded scale word).
const std::vector<int32_t> kTinyTokens{2,   72,  101, 108, 108, 111, 32,  119, 111, 114, 108, 100, 33,  10,
                                       84,  104, 101, 32,  113, 117, 105, 99,  107, 32,  98,  114, 111, 119,
                                       110, 32,  102, 111, 120, 32,  106, 117, 109, 112, 115, 46};

// Both variants: model_tiny (DIFF V1, rows of 2D = 32) and model_tiny_v2 (DIFF V2, rows of D = 32).
TEST_CASE("kv q8_0: a model against the reference on a Q8_0-rounded cache") {
  REQUIRE(!test::shared_tiny_model_dir().empty());
  REQUIRE(!test::shared_tiny_v2_model_dir().empty());
  const auto& toks = kTinyTokens;
  for (const std::string& dir : {test::shared_tiny_model_dir(), test::shared_tiny_v2_model_dir()})
    for (Precision precision : test::supported_precisions()) {
      auto ctx = test::make_context(precision);
      const bool fp16 = ctx->precision() == Precision::fp16;
      auto model = Model::load(*ctx, dir);
      ref::ModelWeights w = reference_for(dir, model->config(), QuantType::f16, fp16);
      w.kv_round = q8_round;
      const auto ref = ref::model_forward(w, std::vector<int>(toks.begin(), toks.end())).logits;
      SessionOptions so{uint32_t(toks.size() + 4), 16};
      so.kv_cache = KvCacheType::q8_0;
      auto s = Session::create(*model, so);
      const auto got = test::teacher_forced(*s, toks, 21);  // chunks of 16 and 5, then 19 decode steps
      REQUIRE(got.size() == ref.size());
      const test::Compare cmp = test::compare(std::vector<double>(got.begin(), got.end()), ref);
      MESSAGE("kv q8_0 " << dir << " " << std::string(precision_name(ctx->precision())) << ": " << cmp.summary());
      if (!fp16) {
        CHECK(test::within_spec(cmp, false, test::Scope::layer));  // fp32: the dequantized cache, exactly
      } else {
        // fp16 storage: the device quantizes K and V computed from fp16 activations, which differ from the
        // reference's by about an fp16 ulp; a value that close to a Q8_0 rounding boundary lands one step d
        // away (a few % of the quants). docs/maths.md "How close is close enough": nmse ≤ 2e-5 (4x the fp16
        // model bound), max error ≤ 1e-2·scale and top-1 agreement on ≥ 99% of rows.
        CHECK(cmp.nmse <= 2e-5);
        CHECK(cmp.max_abs <= 1e-2 * std::max(1.0, cmp.max_ref));
        const size_t V = model->config().vocab_size;
        size_t agree = 0;
        for (size_t t = 0; t < toks.size(); ++t)
          agree += std::max_element(got.begin() + t * V, got.begin() + (t + 1) * V) - (got.begin() + t * V) ==
                   std::max_element(ref.begin() + t * V, ref.begin() + (t + 1) * V) - (ref.begin() + t * V);
        CHECK(agree * 100 >= toks.size() * 99);
      }
      auto s16 = Session::create(*model, SessionOptions{uint32_t(toks.size() + 4), 16});
      const auto f16kv = test::teacher_forced(*s16, toks, 21);
      const test::Compare diff =
          test::compare(std::vector<double>(got.begin(), got.end()), std::vector<double>(f16kv.begin(), f16kv.end()));
      INFO("f16 KV against q8_0 KV: " << diff.summary());
      CHECK(diff.nmse > 1e-10);
    }
}

TEST_CASE("kv q8_0: cache bytes, saved state, rewind and context shift") {
  auto ctx = test::make_context(Precision::fp32);
  auto model = Model::load(*ctx, test::shared_tiny_model_dir());
  const ModelConfig& c = model->config();
  const auto& toks = kTinyTokens;
  SessionOptions so{64, 16};
  so.kv_cache = KvCacheType::q8_0;
  auto s = Session::create(*model, so);
  // The plan's KV bytes: 2D = 32 wide rows of one byte plus a word of scales (one used), against 4 bytes per element.
  auto s32 = Session::create(*model, SessionOptions{64, 16});
  const uint64_t rows = uint64_t(c.num_layers) * 2 * c.num_kv_heads * 64, w = 2 * c.head_dim();
  CHECK(s->kv_cache_bytes() == rows * (w + 4));
  CHECK(s32->kv_cache_bytes() == rows * w * 4);
  // Saved state: a restored Q8_0 session continues bit for bit; an f32 session refuses the state, naming the type.
  s->prefill(std::vector<int32_t>(toks.begin(), toks.begin() + 20));
  const std::vector<uint8_t> state = s->save_state();
  const auto next = s->decode(toks[20]);
  auto r = Session::create(*model, so);
  r->restore_state(state.data(), state.size());
  CHECK(r->decode(toks[20]) == next);
  try {
    s32->restore_state(state.data(), state.size());
    FAIL("an f32-cache session accepted a q8_0 state");
  } catch (const Error& e) {
    CHECK(std::string(e.what()).find("q8_0") != std::string::npos);
  }
  // Rewind keeps the cache rows: decoding again from 20 gives the same logits.
  s->rewind(20);
  CHECK(s->decode(toks[20]) == next);
  // Context shift re-rotates the Q8_0 keys on the device: the session goes on, close to a fresh prefill of the
  // kept tokens (the shifted keys are requantized, and they attended to the dropped tokens).
  s->shift(4, 8);
  CHECK(s->position() == 13);
  const auto after = s->decode(toks[21]);
  CHECK(after.size() == c.vocab_size);
  for (float v : after) REQUIRE(std::isfinite(v));
}

TEST_CASE("kv q8_0: refused where the cache rows cannot hold Q8_0 blocks, and for attention maps") {
  auto ctx = test::make_context(Precision::fp32);
  test::TempDir tmp("diffvk-kvq8");
  test::TinySpec spec;
  spec.hidden = 48, spec.heads = 2, spec.kv_heads = 1, spec.intermediate = 64;  // D = 12: rows of 24
  test::write_tiny_model(tmp.path(), spec, 3);
  auto model = Model::load(*ctx, tmp.path());
  SessionOptions so{16, 0};
  so.kv_cache = KvCacheType::q8_0;
  try {
    Session::create(*model, so);
    FAIL("a Q8_0 cache of 24-wide rows was accepted");
  } catch (const Error& e) {
    CHECK(e.status() == Status::invalid_argument);
    CHECK(std::string(e.what()).find("24 wide") != std::string::npos);
  }
  so.kv_cache = static_cast<KvCacheType>(7);
  CHECK_THROWS_AS(Session::create(*model, so), Error);
  auto tiny = Model::load(*ctx, test::shared_tiny_model_dir());
  so.kv_cache = KvCacheType::q8_0;
  auto s = Session::create(*tiny, so);
  try {
    s->attention_maps(std::vector<int32_t>{2, 72, 101}, 0, 0);
    FAIL("attention maps ran over a Q8_0 cache");
  } catch (const Error& e) {
    CHECK(std::string(e.what()).find("Q8_0") != std::string::npos);
  }
}
