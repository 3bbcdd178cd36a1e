// diffvk — Model::load of a .gguf written by diffvk quantize (runtime/model/checkpoint_gguf.cpp): an F16 file gives
// the logits of the checkpoint it came from (bit for bit on fp16 storage, where both hold the same fp16 weights);
// a Q8_0/Q4_0 file puts its blocks on the device unchanged: byte for byte the weights of the same checkpoint
// quantized at load (LoadOptions::weights), its embedding's blocks too, and a mismatched kind refused.
#include <doctest/doctest.h>

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "diffvk/gguf.hpp"
#include "diffvk/model.hpp"
#include "gpu_test.hpp"
#include "io/gguf.hpp"
#include "io/half.hpp"
#include "io/quant.hpp"
#include "model/model_impl.hpp"
#include "model/weight_store.hpp"

using namespace diffvk;

TEST_CASE("model: an f16 GGUF from diffvk quantize loads and matches its checkpoint") {
  const std::string dir = std::string(DIFFVK_TEST_DATA_DIR) + "/model_tiny";
  const std::string base =
      (std::filesystem::temp_directory_path() / ("diffvk_test_gguf_model_" + std::to_string(::getpid()))).string();
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

  // The same file from memory and from a descriptor range (with no config.json: a .gguf carries its own), as
  // an app embeds it: the same logits, bit for bit. A .gguf with a config, or no config
  // and no .gguf, is refused naming the problem.
  std::ifstream in(base + "-f16.gguf", std::ios::binary);
  const std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), {});
  auto m = Model::load_memory(*ctx, nullptr, 0, bytes.data(), bytes.size(), "app gguf");
  CHECK(m->load_stats().format == "gguf");
  CHECK(Session::create(*m, SessionOptions{32, 8})->prefill(tokens, true) == b);
  {
    // A packed file (like an APK): 100 bytes of something else, then the .gguf.
    const std::string packed = base + "-packed.bin";
    {
      std::ofstream out(packed, std::ios::binary);
      out << std::string(100, 'x');
      out.write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
    }
    const int fd = ::open(packed.c_str(), O_RDONLY);
    REQUIRE(fd >= 0);
    auto f = Model::load_fd(*ctx, {-1, 0, 0}, {fd, 100, int64_t(bytes.size())});
    CHECK(Session::create(*f, SessionOptions{32, 8})->prefill(tokens, true) == b);
    ::close(fd);
    std::remove(packed.c_str());
  }
  const std::string cfg = "{}";
  CHECK_THROWS_WITH_AS(Model::load_memory(*ctx, cfg.data(), cfg.size(), bytes.data(), bytes.size(), "x"),
                       doctest::Contains("carries its own configuration"), Error);
  const std::string not_gguf = "not a gguf file";
  CHECK_THROWS_WITH_AS(Model::load_memory(*ctx, nullptr, 0, not_gguf.data(), not_gguf.size(), "x"),
                       doctest::Contains("config.json buffer is NULL"), Error);
  std::remove((base + "-f16.gguf").c_str());
}

namespace {
std::vector<float> logits_of(Model& m, const std::vector<int32_t>& tokens) {
  auto s = Session::create(m, SessionOptions{32, 8});
  return s->prefill(tokens, true);
}
}  // namespace

// model_tiny: an untied lm_head (output.weight); tiny-diff (bundled, trained): the head tied to token_embd.
// Two test cases, so that they run side by side (and .ci/sanitize can leave the larger one out).
static void gguf_blocks_unchanged(const std::string& dir) {
  const std::string base =
      (std::filesystem::temp_directory_path() / ("diffvk_test_gguf_q_" + std::to_string(::getpid()))).string();
  auto ctx = test::make_context();
  const bool fp16 = ctx->precision() == Precision::fp16;
  const std::vector<int32_t> tokens = {2, 72, 101, 108, 108, 111, 44, 32, 119, 111, 114, 108, 100};
  {
    for (QuantKind k : {QuantKind::q8_0, QuantKind::q4_0}) {
      CAPTURE(dir);
      const std::string kind = quant_kind_name(k);
      CAPTURE(kind);
      const QuantType q = static_cast<QuantType>(k);
      const std::string p = base + "-" + quant_kind_name(k) + ".gguf";
      quantize_model(dir, p, k);
      LoadOptions lo;
      lo.weights = k;
      auto g = Model::load(*ctx, p);          // default weights: the file's formats
      auto gk = Model::load(*ctx, p, lo);     // the kind it was written with: the same
      auto ref = Model::load(*ctx, dir, lo);  // the safetensors checkpoint quantized at load
      CHECK(g->load_stats().format == "gguf");
      const Model::Impl &G = g->impl(), &R = ref->impl();
      // Every linear weight: the same format and the same device bytes (the file's blocks, split_quant_rows).
      REQUIRE(G.layers.size() == R.layers.size());
      for (size_t l = 0; l < G.layers.size(); ++l) {
        const auto& a = G.layers[l];
        const auto& b = R.layers[l];
        for (auto [x, y] : {std::pair{a.wqkv, b.wqkv}, {a.wo, b.wo}, {a.wgu, b.wgu}, {a.wdown, b.wdown}}) {
          CHECK(G.weights->format(x) == q);
          CHECK(G.weights->format(x) == R.weights->format(y));
          CHECK(G.weights->download(x) == R.weights->download(y));
        }
      }
      if (!G.cfg.tie_word_embeddings) {
        CHECK(G.weights->format(G.lm_head) == (k == QuantKind::q4_0 ? QuantType::q8_0 : q));
        CHECK(G.weights->download(G.lm_head) == R.weights->download(R.lm_head));
      }
      // The embedding (quantized in the file): the file's blocks on the device, the same bytes as quantize-at-load
      // (tied: the head's format), so all three loads give the same logits bit for bit.
      {
        const GgufFile f = GgufFile::open(p);
        const GgufTensorInfo* t = f.find_tensor("token_embd.weight");
        REQUIRE(t);
        REQUIRE(t->type != GgmlType::f16);
        const QuantType et = t->type == GgmlType::q8_0 ? QuantType::q8_0 : QuantType::q4_0;
        CHECK(G.weights->format(G.embed) == et);
        CHECK(G.weights->format(G.embed) == R.weights->format(R.embed));
        CHECK(G.weights->download(G.embed) == R.weights->download(R.embed));
      }
      const std::vector<float> a = logits_of(*g, tokens), b = logits_of(*gk, tokens), c = logits_of(*ref, tokens);
      for (float v : a) REQUIRE(std::isfinite(v));
      CHECK(a == b);
      CHECK(a == c);
      // Another quantized kind than the file's is refused, naming the tensor and both kinds.
      LoadOptions other;
      other.weights = k == QuantKind::q8_0 ? QuantKind::q4_0 : QuantKind::q8_0;
      try {
        (void)Model::load(*ctx, p, other);
        FAIL("a mismatched weights kind loaded");
      } catch (const Error& e) {
        CHECK(e.status() == Status::invalid_argument);
        CHECK(std::string(e.what()).find("in the file but weights") != std::string::npos);
      }
      std::remove(p.c_str());
    }
  }
}

TEST_CASE(
    "model: q8_0 and q4_0 GGUF files load their blocks unchanged, untied head (the weights of quantize-at-load)") {
  gguf_blocks_unchanged(std::string(DIFFVK_TEST_DATA_DIR) + "/model_tiny");
}
TEST_CASE("model: q8_0 and q4_0 GGUF files load their blocks unchanged, tied head (the weights of quantize-at-load)") {
  gguf_blocks_unchanged(std::string(DIFFVK_TEST_DATA_DIR) + "/../../examples/models/tiny-diff");
}
