// diffvk — Model::load of a .gguf written by diffvk quantize (runtime/model/checkpoint_gguf.cpp): an F16 file gives
// the logits of the checkpoint it came from (bit for bit on fp16 storage, where both hold the same fp16 weights);
// Q8_0/Q4_0 files are refused with a clear error until the quantized kernels exist.
#include <doctest/doctest.h>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "diffvk/gguf.hpp"
#include "diffvk/model.hpp"
#include "gpu_test.hpp"

using namespace diffvk;

TEST_CASE("model: an f16 GGUF from diffvk quantize loads and matches its checkpoint and q8_0 or q4_0 files are refused") {
  const std::string dir = std::string(DIFFVK_TEST_DATA_DIR) + "/model_tiny";
  const std::string base = (std::filesystem::temp_directory_path() / ("diffvk_test_gguf_model_" + std::to_string(::getpid()))).string();
  auto ctx = test::make_context();
  const std::vector<int32_t> tokens = {2, 72, 101, 108, 108, 111, 44, 32, 119, 111, 114, 108, 100};

  quantize_model(dir, base + "-f16.gguf", QuantKind::f16);
  auto ref = Model::load(*ctx, dir);
  auto g = Model::load(*ctx, base + "-f16.gguf");
  CHECK(g->load_stats().format == "gguf");
  auto sr = Session::create(*ref, SessionOptions{32, 8});
  auto sg = Session::create(*g, SessionOptions{32, 8});
  const std::vector<float> a = sr->prefill(tokens, true), b = sg->prefill(tokens, true);
  REQUIRE(a.size() == b.size());
  if (ctx->precision() == Precision::fp16) {
    CHECK(a == b);
  } else {
    double amax = 0, diff = 0;
    for (size_t i = 0; i < a.size(); ++i) {
      amax = std::max(amax, double(std::fabs(a[i])));
      diff = std::max(diff, double(std::fabs(a[i] - b[i])));
    }
    CHECK(diff <= 0.02 * (1 + amax));  // the weights differ by their fp16 rounding
  }
  std::remove((base + "-f16.gguf").c_str());

  for (QuantKind k : {QuantKind::q8_0, QuantKind::q4_0}) {
    const std::string p = base + "-" + quant_kind_name(k) + ".gguf";
    quantize_model(dir, p, k);
    try {
      (void)Model::load(*ctx, p);
      FAIL("a quantized GGUF loaded");
    } catch (const Error& e) {
      CHECK(e.status() == Status::invalid_argument);
      CHECK(std::string(e.what()).find("quantized GGUF weights cannot be loaded yet") != std::string::npos);
    }
    std::remove(p.c_str());
  }
}
