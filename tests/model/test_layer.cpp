// A whole MultiheadDiffAttn layer on the GPU against the PyTorch fixture (tests/data/layer_fixture,
// made by tests/python/make_layer_fixture.py in float64), in both precisions; chunked prefill and
// decode through the KV cache; errors; and the `diffvk layer` command end to end.
#include <doctest/doctest.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>

#include <unistd.h>

#include "cli_run.hpp"
#include "diffvk/layer.hpp"
#include "gpu_test.hpp"
#include "diffvk/npy.hpp"

using namespace diffvk;

namespace {
const std::string kDir = std::string(DIFFVK_TEST_DATA_DIR) + "/layer_fixture/";

std::vector<double> to_d(const std::vector<float>& v) { return std::vector<double>(v.begin(), v.end()); }

LayerOptions fixture_options(uint32_t capacity, uint32_t chunk = 128) {
  LayerOptions o;
  o.num_heads = 4;
  o.num_kv_heads = 2;
  o.depth = 3;
  o.max_positions = capacity;
  o.chunk = chunk;
  return o;
}

void check_fixture(Precision precision, const char* weights, const char* expected, double lambda) {
  auto ctx = test::make_context_or_skip(precision);
  if (!ctx) return;
  const bool fp16 = ctx->precision() == Precision::fp16;
  const auto x = npy_as_float(read_npy(kDir + "x.npy"));
  const auto y = to_d(npy_as_float(read_npy(kDir + expected)));
  const uint32_t S = 37;
  auto layer = DiffAttnLayer::load(*ctx, kDir + weights, fixture_options(64));
  CHECK(layer->lambda() == doctest::Approx(lambda).epsilon(1e-6));  // computed in double from the stored vectors
  const auto got = layer->forward(x.data(), S);
  auto c = test::compare(to_d(got), y);
  INFO(weights << " " << precision_name(ctx->precision()) << ": " << c.summary());
  CHECK(test::within_spec(c, fp16, test::Scope::layer));

  // Same sequence fed as prefill 20 (in chunks of 6), then single-token decode steps, then 4 rows:
  // causal attention makes the result independent of the split.
  auto layer2 = DiffAttnLayer::load(*ctx, kDir + weights, fixture_options(40, 6));
  std::vector<float> pieces;
  for (auto [start, n] : {std::pair<uint32_t, uint32_t>{0, 20}, {20, 1}, {21, 1}, {22, 1}, {23, 10}, {33, 4}}) {
    auto part = layer2->forward(x.data() + size_t(start) * 64, n);
    pieces.insert(pieces.end(), part.begin(), part.end());
  }
  CHECK(layer2->position() == S);
  auto c2 = test::compare(to_d(pieces), y);
  INFO("chunked + decode: " << c2.summary());
  CHECK(test::within_spec(c2, fp16, test::Scope::layer));

  // Context overflow: clear error, state untouched, still usable afterwards.
  try {
    layer2->forward(x.data(), 4);
    FAIL("no error");
  } catch (const Error& e) {
    CHECK(e.status() == Status::context_overflow);
  }
  CHECK(layer2->position() == S);
  layer2->reset();
  auto again = layer2->forward(x.data(), 5);
  CHECK(test::within_spec(test::compare(to_d(again), std::vector<double>(y.begin(), y.begin() + 5 * 64)), fp16,
                          test::Scope::layer));
}

int run_cli(const std::string& args, std::string* output = nullptr) {
  test::TempDir tmp("diffvk-layer-cli");
  const auto r = test::run_cli(tmp, args);
  if (output) *output = r.out;
  return r.exit_code;
}
}  // namespace

TEST_CASE("layer: matches the PyTorch fixture fp32") {
  check_fixture(Precision::fp32, "layer.safetensors", "y.npy", 0.3318043752740104);
}
TEST_CASE("layer: matches the PyTorch fixture fp16") {
  check_fixture(Precision::fp16, "layer.safetensors", "y.npy", 0.3318043752740104);
}
TEST_CASE("layer: F16 weights file matches its fixture fp32") {
  check_fixture(Precision::fp32, "layer_f16.safetensors", "y_f16w.npy", 0.33173072223221767);
}
TEST_CASE("layer: F16 weights file matches its fixture fp16") {
  check_fixture(Precision::fp16, "layer_f16.safetensors", "y_f16w.npy", 0.33173072223221767);
}

TEST_CASE("layer: wrong head counts and foreign tensors are clear errors") {
  auto ctx = test::make_context(Precision::fp32);
  LayerOptions o = fixture_options(64);
  o.num_heads = 5;
  CHECK_THROWS_WITH_AS(DiffAttnLayer::load(*ctx, kDir + "layer.safetensors", o), doctest::Contains("num_heads=5"),
                       Error);
  o = fixture_options(64);
  o.num_kv_heads = 3;
  CHECK_THROWS_WITH_AS(DiffAttnLayer::load(*ctx, kDir + "layer.safetensors", o), doctest::Contains("num_kv_heads=3"),
                       Error);
  o = fixture_options(64);
  o.num_heads = 2;  // D = 16: k_proj shape no longer matches
  CHECK_THROWS_WITH_AS(DiffAttnLayer::load(*ctx, kDir + "layer.safetensors", o), doctest::Contains("k_proj.weight"),
                       Error);
  // Rename one tensor inside the header (same length, still valid JSON).
  std::ifstream in(kDir + "layer.safetensors", std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), {});
  const auto at = bytes.find("subln.weight");
  REQUIRE(at != std::string::npos);
  bytes.replace(at, 12, "subln.wexght");
  const std::string path = "/tmp/diffvk_test_renamed_" + std::to_string(::getpid()) + ".safetensors";
  std::ofstream(path, std::ios::binary) << bytes;
  CHECK_THROWS_WITH_AS(DiffAttnLayer::load(*ctx, path, fixture_options(64)), doctest::Contains("subln.wexght"), Error);
  std::remove(path.c_str());
}

TEST_CASE("layer: the diffvk layer command matches the fixture (batched input)") {
  const std::string out = "/tmp/diffvk_layer_out_" + std::to_string(::getpid()) + ".npy";
  std::string log;
  const int rc =
      run_cli("layer --weights " + kDir + "layer.safetensors --num-heads 4 --num-kv-heads 2 --depth 3 --input " + kDir +
                  "x_batched.npy --output " + out + " --precision fp32 --validation",
              &log);
  INFO(log);
  REQUIRE(rc == 0);
  CHECK(log.find("validation:") == std::string::npos);
  const NpyArray y = read_npy(out);
  CHECK(y.shape == std::vector<int64_t>{2, 37, 64});
  const auto c = test::compare(to_d(npy_as_float(y)), to_d(npy_as_float(read_npy(kDir + "y_batched.npy"))));
  INFO(c.summary());
  CHECK(test::within_spec(c, false, test::Scope::layer));
  std::remove(out.c_str());
}

TEST_CASE("layer: the diffvk layer command rejects bad input with a message and no output") {
  const std::string out = "/tmp/diffvk_layer_bad_" + std::to_string(::getpid()) + ".npy";
  std::string log;
  CHECK(run_cli("layer --weights " + kDir + "layer.safetensors --num-heads 3 --depth 3 --input " + kDir +
                    "x.npy --output " + out,
                &log) != 0);
  CHECK(log.find("num_heads=3") != std::string::npos);
  CHECK(run_cli("layer --weights " + kDir + "layer.safetensors --num-heads 4 --depth 3 --input " + kDir +
                    "meta.json --output " + out,
                &log) != 0);
  CHECK(log.find("error") != std::string::npos);
  CHECK(run_cli("layer --weights /nonexistent.safetensors --num-heads 4 --depth 3 --input x --output " + out, &log) !=
        0);
  CHECK(run_cli("layer --bogus-flag", &log) != 0);
  std::ifstream f(out);
  CHECK_FALSE(f.good());  // nothing written on failure
}
