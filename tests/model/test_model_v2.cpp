// DIFF V2 models (docs/maths.md "DIFF V2 models"): the tiny V2 model against its PyTorch
// fixture (tests/python/make_v2_model_fixture.py), synthesized V2 models of other shapes against the float64
// reference (runtime/reference/model_ref: model_forward with ModelWeights::v2), prefill-then-decode equal to one
// prefill, a GGUF of a V2 model equal to its checkpoint, saved state, the C ABI, and the errors of mixed or
// inconsistent files. Tolerances: docs/maths.md, a whole model (test::within_spec, Scope::layer).
#include <doctest/doctest.h>

#include <cmath>
#include <string>
#include <vector>

#include "diffvk/diffvk.h"
#include "diffvk/gguf.hpp"
#include "diffvk/model.hpp"
#include "diffvk/npy.hpp"
#include "gpu_test.hpp"
#include "model_fixture.hpp"
#include "cli_run.hpp"
#include "model_parity.hpp"
#include "reference/model_ref.hpp"

using namespace diffvk;

namespace {
const std::string kTinyV2 = std::string(DIFFVK_TEST_DATA_DIR) + "/model_tiny_v2";

std::vector<int32_t> some_tokens(size_t n, int32_t salt) { return test::pattern_tokens(n, salt, 41, 13, 7); }

struct Failure {
  Status status = Status::ok;
  std::string message;
};
template <class F>
Failure failure_of(F&& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return {e.status(), e.what()};
  }
  return {};
}

test::Compare against(const std::vector<float>& got, const std::vector<double>& ref) {
  REQUIRE(got.size() == ref.size());
  return test::compare(std::vector<double>(got.begin(), got.end()), ref);
}

void fixture_parity(Precision precision) {
  auto ctx = test::make_context_or_skip(precision);
  if (!ctx) return;
  const bool fp16 = ctx->precision() == Precision::fp16;
  auto model = Model::load(*ctx, kTinyV2);
  const ModelConfig& c = model->config();
  REQUIRE(c.v2());
  CHECK(c.head_dim() == 32);
  CHECK(c.kv_row() == 32);
  CHECK(c.num_heads * c.head_dim() != c.hidden_size);  // E != H·D
  const uint32_t V = c.vocab_size;
  const auto toks = test::load_tokens(kTinyV2 + "/tokens.npy");
  const auto ref = npy_as_float(read_npy(kTinyV2 + "/logits.npy"));
  REQUIRE(ref.size() == toks.size() * V);
  auto s = Session::create(*model, SessionOptions{0, 16});
  const auto got = test::teacher_forced(*s, toks, 9);
  const test::Parity p = test::parity(got, ref, V);
  INFO(precision_name(ctx->precision()) << ": max_abs=" << p.max_abs << " max_ref=" << p.max_ref << " nmse=" << p.nmse
                                        << " top1=" << p.top1);
  CHECK(test::ok(p, fp16));
  // The float64 reference (weights rounded to the storage type) agrees too.
  const auto r =
      ref::model_forward(test::reference_weights_v2_dir(kTinyV2, fp16), std::vector<int>(toks.begin(), toks.end()));
  const test::Compare cmp = against(got, r.logits);
  MESSAGE("tiny V2 " << std::string(precision_name(ctx->precision()))
                     << " against the float64 reference: " << cmp.summary());
  CHECK(test::within_spec(cmp, fp16, test::Scope::layer));
}

// One prefill of everything, and chunks of 4 (split-K decode kernels for every chunk), meet the float64 reference
// as prefill-then-decode does (a test of its own: .ci/aarch64 runs fixture_parity only, its qemu time).
void fixture_prefill_chunks(Precision precision) {
  auto ctx = test::make_context_or_skip(precision);
  if (!ctx) return;
  const bool fp16 = ctx->precision() == Precision::fp16;
  auto model = Model::load(*ctx, kTinyV2);
  const auto toks = test::load_tokens(kTinyV2 + "/tokens.npy");
  const auto r =
      ref::model_forward(test::reference_weights_v2_dir(kTinyV2, fp16), std::vector<int>(toks.begin(), toks.end()));
  auto s = Session::create(*model, SessionOptions{0, 16});
  const auto whole = s->prefill(toks, true);
  CHECK(test::within_spec(against(whole, r.logits), fp16, test::Scope::layer));
  auto chunked = Session::create(*model, SessionOptions{0, 4});
  CHECK(test::within_spec(against(chunked->prefill(toks, true), r.logits), fp16, test::Scope::layer));
  s->reset();
  CHECK(s->prefill(toks, true) == whole);  // replays are deterministic
}

// A synthesized V2 model against the float64 reference: prefill `prompt` tokens in chunks of `chunk`, then decode.
void synthesized(Precision precision, const test::TinyV2Spec& spec, uint32_t chunk, size_t n, size_t prompt) {
  auto ctx = test::make_context_or_skip(precision);
  if (!ctx) return;
  const bool fp16 = ctx->precision() == Precision::fp16;
  test::TempDir dir("diffvk-v2-model");
  const test::Tensors ts = test::tiny_v2_tensors(spec, 7 + spec.head_dim);
  test::write_checkpoint(dir.path(), test::tiny_v2_config_json(spec).dump(), ts);
  auto model = Model::load(*ctx, dir.path());
  const auto toks = some_tokens(n, int32_t(spec.heads));
  const auto ref =
      ref::model_forward(test::reference_weights_v2(spec, ts, fp16), std::vector<int>(toks.begin(), toks.end()));
  auto s = Session::create(*model, SessionOptions{uint32_t(n + 3), chunk});
  const auto got = test::teacher_forced(*s, toks, prompt);
  const test::Compare cmp = against(got, ref.logits);
  MESSAGE("V2 E=" << spec.hidden << " H=" << spec.heads << "/" << spec.kv_heads << " D=" << spec.head_dim << " chunk "
                  << chunk << " " << std::string(precision_name(ctx->precision())) << ": " << cmp.summary());
  CHECK(test::within_spec(cmp, fp16, test::Scope::layer));
}

void synthesized_shapes(Precision precision) {
  // E != H·D throughout; 1, 2 and 4 output heads (pairs) per KV head; D = 16, 64, 128; prefill through the
  // fused kernel (chunks of 16 > 8 rows) and through split-K decode (chunks of 5), odd prompts, S = 1 prompts.
  synthesized(precision, {256, 40, 2, 3, 3, 16, 48, 40, false}, 16, 23, 17);   // MHA, odd H
  synthesized(precision, {256, 72, 1, 4, 2, 64, 64, 40, true}, 5, 19, 11);     // 2 pairs per KV head, tied head
  synthesized(precision, {256, 64, 1, 4, 1, 16, 32, 40, false}, 16, 21, 1);    // 4 pairs per KV head, S = 1 prompt
  synthesized(precision, {256, 96, 1, 2, 1, 128, 64, 24, false}, 16, 18, 13);  // D = 128
}
}  // namespace

TEST_CASE("model v2: the tiny V2 model matches PyTorch and the float64 reference, fp32") {
  fixture_parity(Precision::fp32);
}
TEST_CASE("model v2: the tiny V2 model matches PyTorch and the float64 reference, fp16") {
  fixture_parity(Precision::fp16);
}
TEST_CASE("model v2: one prefill and chunks of 4 of the tiny V2 model meet the float64 reference, fp32") {
  fixture_prefill_chunks(Precision::fp32);
}
TEST_CASE("model v2: one prefill and chunks of 4 of the tiny V2 model meet the float64 reference, fp16") {
  fixture_prefill_chunks(Precision::fp16);
}
TEST_CASE("model v2: synthesized V2 models (GQA 1/2/4 pairs, D 16-128, E != H·D) match the reference, fp32") {
  synthesized_shapes(Precision::fp32);
}
TEST_CASE("model v2: synthesized V2 models (GQA 1/2/4 pairs, D 16-128, E != H·D) match the reference, fp16") {
  synthesized_shapes(Precision::fp16);
}

TEST_CASE("model v2: an f16 and a q8_0 GGUF of a V2 model load and equal the checkpoint") {
  auto ctx = test::make_context_or_skip(Precision::automatic);
  if (!ctx) return;
  test::TempDir dir("diffvk-v2-gguf");
  const auto toks = some_tokens(14, 3);
  auto logits = [&](const std::string& path, const LoadOptions& o) {
    auto model = Model::load(*ctx, path, o);
    auto s = Session::create(*model, SessionOptions{0, 16});
    return test::teacher_forced(*s, toks, 9);
  };
  const std::string f16 = dir / "v2.f16.gguf", q8 = dir / "v2.q8_0.gguf";
  quantize_model(kTinyV2, f16, QuantKind::f16);
  quantize_model(kTinyV2, q8, QuantKind::q8_0);
  auto g = Model::load(*ctx, q8);
  CHECK(g->config().v2());
  CHECK(g->config().head_dim() == 32);
  CHECK(g->config().num_kv_heads == 1);
  CHECK(g->load_stats().format == "gguf");
  LoadOptions q8o;
  q8o.weights = QuantKind::q8_0;
  q8o.quant_decode = LoadOptions::QuantDecode::dequant;
  q8o.quant_prefill = LoadOptions::QuantDecode::dequant;
  LoadOptions file_o;
  file_o.quant_decode = LoadOptions::QuantDecode::dequant;
  file_o.quant_prefill = LoadOptions::QuantDecode::dequant;
  // The q8_0 file's blocks are the blocks quantize-at-load makes: the same logits, bit for bit.
  CHECK(logits(q8, file_o) == logits(kTinyV2, q8o));
  // The f16 file holds the weights rounded to fp16 (norms in f32): on an fp16 device that is what a load of the
  // checkpoint holds, so the logits are the same bits; on fp32 they differ by that rounding.
  const auto a = logits(f16, {}), b = logits(kTinyV2, {});
  if (ctx->precision() == Precision::fp16) {
    CHECK(a == b);
  } else {
    const test::Compare cmp =
        test::compare(std::vector<double>(a.begin(), a.end()), std::vector<double>(b.begin(), b.end()));
    CHECK(test::within_spec(cmp, true, test::Scope::layer));
  }
}

TEST_CASE("model v2: saved state, rewind and the C ABI") {
  auto ctx = test::make_context_or_skip(Precision::automatic);
  if (!ctx) return;
  auto model = Model::load(*ctx, kTinyV2);
  const auto toks = some_tokens(12, 5);
  auto s = Session::create(*model, SessionOptions{40, 16});
  s->prefill(toks);
  const std::vector<uint8_t> state = s->save_state();
  const auto next = s->decode(17);
  auto r = Session::create(*model, SessionOptions{40, 16});
  r->restore_state(state.data(), state.size());
  CHECK(r->decode(17) == next);  // bit for bit
  r->rewind(5);
  CHECK(r->position() == 5);
  auto fresh = Session::create(*model, SessionOptions{40, 16});
  fresh->prefill(std::vector<int32_t>(toks.begin(), toks.begin() + 5));
  CHECK(r->decode(toks[5]) == fresh->decode(toks[5]));

  // The C ABI loads and runs a V2 model like any other.
  diffvk_context* cctx = nullptr;
  REQUIRE(diffvk_context_create(nullptr, &cctx) == DIFFVK_OK);
  diffvk_model* cm = nullptr;
  REQUIRE(diffvk_model_load(cctx, kTinyV2.c_str(), &cm) == DIFFVK_OK);
  diffvk_session* cs = nullptr;
  REQUIRE(diffvk_session_create(cm, 40, 16, &cs) == DIFFVK_OK);
  std::vector<float> cl(model->config().vocab_size);
  REQUIRE(diffvk_session_prefill(cs, toks.data(), toks.size(), cl.data(), cl.size()) == DIFFVK_OK);
  auto cpp = Session::create(*model, SessionOptions{40, 0});
  const auto want = cpp->prefill(toks);
  const test::Compare cmp =
      test::compare(std::vector<double>(cl.begin(), cl.end()), std::vector<double>(want.begin(), want.end()));
  CHECK(test::within_spec(cmp, true, test::Scope::layer));
  diffvk_session_destroy(cs);
  diffvk_model_destroy(cm);
  diffvk_context_destroy(cctx);
}

TEST_CASE("model v2: mixed, inconsistent and incomplete V2 checkpoints are refused, naming the key or tensor") {
  auto ctx = test::make_context_or_skip(Precision::automatic);
  if (!ctx) return;
  test::TempDir dir("diffvk-v2-bad");
  const test::TinyV2Spec spec;
  auto load_error = [&](const nlohmann::json& cfg, const test::Tensors& ts) {
    const std::string d = dir / "m";
    test::write_checkpoint(d, cfg.dump(), ts);
    return failure_of([&] { Model::load(*ctx, d); });
  };
  const nlohmann::json cfg = test::tiny_v2_config_json(spec);
  const test::Tensors ts = test::tiny_v2_tensors(spec);
  {
    nlohmann::json c = cfg;
    c.erase("head_dim");
    const auto e = load_error(c, ts);
    CHECK(e.status == Status::format_error);
    CHECK(e.message.find("'head_dim' is missing") != std::string::npos);
  }
  {
    nlohmann::json c = cfg;
    c["num_heads"] = 3;
    c["num_kv_heads"] = 2;  // pairs would straddle KV heads
    const auto e = load_error(c, ts);
    CHECK(e.status == Status::format_error);
    CHECK(e.message.find("num_kv_heads") != std::string::npos);
  }
  {
    test::Tensors bad = ts;  // a DIFF V1 tensor in a V2 file
    bad["model.layers.0.self_attn.subln.weight"] = test::f32_tensor({64}, std::vector<float>(64, 1.0f));
    const auto e = load_error(cfg, bad);
    CHECK(e.status == Status::format_error);
    CHECK(e.message.find("model.layers.0.self_attn.subln.weight") != std::string::npos);
    CHECK(e.message.find("DIFF V1") != std::string::npos);
  }
  {
    test::Tensors bad = ts;
    bad.erase("model.layers.1.self_attn.lambda_proj.weight");
    const auto e = load_error(cfg, bad);
    CHECK(e.status == Status::format_error);
    CHECK(e.message.find("missing tensor 'model.layers.1.self_attn.lambda_proj.weight'") != std::string::npos);
  }
  {
    test::Tensors bad = ts;  // o_proj of E x E, as if H·D were E
    bad["model.layers.0.self_attn.o_proj.weight"] = test::f32_tensor({48, 48}, std::vector<float>(48 * 48, 0.0f));
    const auto e = load_error(cfg, bad);
    CHECK(e.status == Status::format_error);
    CHECK(e.message.find("model.layers.0.self_attn.o_proj.weight") != std::string::npos);
  }
  {
    nlohmann::json c = cfg;  // a V2 file under a V1 config: the hint says what is missing
    c.erase("diff_version");
    c.erase("head_dim");
    const auto e = load_error(c, ts);
    CHECK(e.status == Status::format_error);
    CHECK(e.message.find("\"diff_version\": 2") != std::string::npos);
  }
}

// The commands that take a checkpoint take a V2 one: run, plan, quantize + logits of the .gguf, bench --model (JSON).
TEST_CASE("model v2: diffvk run, plan, quantize, logits and bench --model on a V2 model") {
  test::TempDir tmp("diffvk-v2-cli");
  auto cli = [&](const std::string& args) {
    const test::CliResult r = test::run_cli(tmp, args);
    INFO("diffvk " << args << "\n" << r.out);
    CHECK(r.exit_code == 0);
    CHECK(r.out.find("validation:") == std::string::npos);
    return r.out;
  };
  CHECK(cli("run --model " + kTinyV2 + " -p Hello -n 4 --precision fp32").find("decode:") != std::string::npos);
  CHECK(cli("plan --model " + kTinyV2 + " --context 32").find("layers.1.attn.out") != std::string::npos);
  cli("quantize --type q8_0 " + kTinyV2 + " " + (tmp / "v2.gguf"));
  cli("logits --model " + (tmp / "v2.gguf") + " --tokens " + kTinyV2 + "/tokens.npy --prompt-len 9 --output " +
      (tmp / "l.npy"));
  CHECK(read_npy(tmp / "l.npy").shape == std::vector<int64_t>{20, 256});
  cli("bench --model " + kTinyV2 + " --prompt-tokens 16 --decode-tokens 4 --runs 1 --json " + (tmp / "b.json"));
  const std::vector<uint8_t> text = test::read_bytes(tmp / "b.json");
  const nlohmann::json j = nlohmann::json::parse(text.begin(), text.end());
  CHECK(j["model"]["diff_version"] == 2);
  CHECK(j["model"]["head_dim"] == 32);
  CHECK(j["decode"]["tokens_per_s"].get<double>() > 0);
}
