// diffvk_model_options.quant_decode / .quant_prefill and diffvk_model_quant_paths (since 1.1) against the C++ side:
// under DIFFVK_QUANT_PATH_AUTO the C ABI reports the paths Model::load_stats() gives for the same load, and a forced
// DIFFVK_QUANT_PATH_INT8_DOT loads where the device has shaderIntegerDotProduct (lavapipe has it) and is
// DIFFVK_UNSUPPORTED, naming it, where it has not (then the test case is skipped). The rest of the options (bad
// values, the struct of before 1.1, q4_0_head, every loader) is checked from C: c_api_v1_quant_paths.
#include <doctest/doctest.h>

#include <cmath>
#include <string>
#include <vector>

#include "diffvk/diffvk.h"
#include "diffvk/model.hpp"
#include "gpu_test.hpp"

using namespace diffvk;

namespace {

const std::string kTiny = std::string(DIFFVK_TEST_DATA_DIR) + "/model_tiny";  // every linear quantizable

// LoadStats' path name -> DIFFVK_QUANT_PATH_* ("" = no quantized weights = AUTO).
uint32_t code_of(const std::string& name) {
  if (name.empty()) return DIFFVK_QUANT_PATH_AUTO;
  REQUIRE_MESSAGE((name == "dequant" || name == "int8_dot"), "LoadStats path '" << name << "'");
  return name == "dequant" ? DIFFVK_QUANT_PATH_DEQUANT : DIFFVK_QUANT_PATH_INT8_DOT;
}

// A context (validation on) and a model loaded through the C ABI; destroyed (and checked) at scope exit.
struct CModel {
  diffvk_context* c = nullptr;
  diffvk_model* m = nullptr;
  diffvk_status load(uint32_t weights, uint32_t decode, uint32_t prefill) {
    diffvk_context_options co;
    diffvk_context_default_options(&co);
    co.validation = 1;
    REQUIRE(diffvk_context_create(&co, &c) == DIFFVK_OK);
    diffvk_model_options mo;
    diffvk_model_default_options(&mo);
    mo.weights = weights;
    mo.quant_decode = decode;
    mo.quant_prefill = prefill;
    return diffvk_model_load_with_options(c, kTiny.c_str(), &mo, &m);
  }
  std::pair<uint32_t, uint32_t> paths() const {
    uint32_t d = 99, p = 99;
    REQUIRE(diffvk_model_quant_paths(m, &d, &p) == DIFFVK_OK);
    return {d, p};
  }
  // The logits of a 5-token prefill (the prefill matmuls), then of one decode step (the one-row kernel).
  std::vector<float> logits() const {
    uint32_t vocab = 0;
    REQUIRE(diffvk_model_vocab_size(m, &vocab) == DIFFVK_OK);
    std::vector<float> lg(2 * size_t(vocab));
    const int32_t prompt[5] = {72, 101, 108, 108, 111};
    diffvk_session* s = nullptr;
    REQUIRE(diffvk_session_create(m, 0, 0, &s) == DIFFVK_OK);
    CHECK(diffvk_session_prefill(s, prompt, 5, lg.data(), vocab) == DIFFVK_OK);
    CHECK(diffvk_session_decode(s, 32, lg.data() + vocab, vocab) == DIFFVK_OK);
    CHECK(diffvk_session_destroy(s) == DIFFVK_OK);
    return lg;
  }
  ~CModel() {
    if (m) CHECK(diffvk_model_destroy(m) == DIFFVK_OK);
    if (c) CHECK(diffvk_context_destroy(c) == DIFFVK_OK);
  }
};

}  // namespace

TEST_CASE("C ABI: diffvk_model_quant_paths under DIFFVK_QUANT_PATH_AUTO reports Model::load_stats()'s paths") {
  test::FailOnLoggedValidation fail_on_validation;
  auto ctx = test::make_context();
  const std::pair<uint32_t, QuantKind> formats[] = {{DIFFVK_WEIGHTS_F16, QuantKind::f16},
                                                    {DIFFVK_WEIGHTS_Q8_0, QuantKind::q8_0},
                                                    {DIFFVK_WEIGHTS_Q4_0, QuantKind::q4_0}};
  for (const auto& format : formats) {
    const uint32_t weights = format.first;  // not a structured binding: CAPTURE's lambda cannot capture one (clang 14)
    const QuantKind kind = format.second;
    CAPTURE(weights);
    LoadOptions lo;
    lo.weights = kind;
    const auto model = Model::load(*ctx, kTiny, lo);
    const LoadStats& ls = model->load_stats();
    CModel cm;
    REQUIRE(cm.load(weights, DIFFVK_QUANT_PATH_AUTO, DIFFVK_QUANT_PATH_AUTO) == DIFFVK_OK);
    const auto [d, p] = cm.paths();
    MESSAGE("weights " << weights << ": LoadStats decode '" << ls.quant_decode << "', prefill '" << ls.quant_prefill
                       << "'; C ABI " << d << ", " << p);
    CHECK(d == code_of(ls.quant_decode));
    CHECK(p == code_of(ls.quant_prefill));
    CHECK((d == DIFFVK_QUANT_PATH_AUTO) == (kind == QuantKind::f16));  // AUTO only without quantized weights
    CHECK((p == DIFFVK_QUANT_PATH_AUTO) == (kind == QuantKind::f16));
  }
}

TEST_CASE("C ABI: DIFFVK_QUANT_PATH_INT8_DOT loads where the device has shaderIntegerDotProduct") {
  test::FailOnLoggedValidation fail_on_validation;
  const bool idot = test::make_context()->device().caps().integer_dot_product;
  CModel both;
  const diffvk_status st = both.load(DIFFVK_WEIGHTS_Q8_0, DIFFVK_QUANT_PATH_INT8_DOT, DIFFVK_QUANT_PATH_INT8_DOT);
  if (!idot) {
    CHECK(st == DIFFVK_UNSUPPORTED);
    CHECK(both.m == nullptr);
    CHECK(std::string(diffvk_last_error()).find("shaderIntegerDotProduct") != std::string::npos);
    test::skip("the device has no shaderIntegerDotProduct: DIFFVK_QUANT_PATH_INT8_DOT is refused (checked), not run");
    return;
  }
  REQUIRE(st == DIFFVK_OK);
  CHECK(both.paths() == std::make_pair(uint32_t(DIFFVK_QUANT_PATH_INT8_DOT), uint32_t(DIFFVK_QUANT_PATH_INT8_DOT)));
  // One-sided forcing: decode_only's reported paths show the two fields are not swapped (CI time: no fourth load
  // for the prefill-only case; `both` runs the int8 prefill).
  CModel decode_only, dequant;
  REQUIRE(decode_only.load(DIFFVK_WEIGHTS_Q8_0, DIFFVK_QUANT_PATH_INT8_DOT, DIFFVK_QUANT_PATH_DEQUANT) == DIFFVK_OK);
  CHECK(decode_only.paths() ==
        std::make_pair(uint32_t(DIFFVK_QUANT_PATH_INT8_DOT), uint32_t(DIFFVK_QUANT_PATH_DEQUANT)));
  REQUIRE(dequant.load(DIFFVK_WEIGHTS_Q8_0, DIFFVK_QUANT_PATH_DEQUANT, DIFFVK_QUANT_PATH_DEQUANT) == DIFFVK_OK);
  // The int8 paths ran: they round the activations, so the logits differ from the dequantizing path's: after the
  // prefill where its matmuls are int8 (both), after the decode step where the one-row kernel is (it also computes
  // the prefill's last-row lm_head, so that row is not compared for decode_only); each stays finite.
  const auto ref = dequant.logits(), lb = both.logits(), ld = decode_only.logits();
  const size_t V = ref.size() / 2;
  auto differs = [&](const std::vector<float>& x, size_t row) {
    bool any = false;
    for (size_t i = row * V; i < (row + 1) * V; ++i) {
      REQUIRE(std::isfinite(x[i]));
      any |= x[i] != ref[i];
    }
    return any;
  };
  CHECK(differs(lb, 0));
  CHECK(differs(lb, 1));
  CHECK(differs(ld, 1));
}
