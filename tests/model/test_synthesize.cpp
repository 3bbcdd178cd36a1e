// Model::synthesize (`diffvk bench --shape`): a model of a config's exact shape with seeded random weights, no file.
// Its shape must be the checkpoint's (same device bytes per token as loading the real files), its weights a pure
// function of the seed, and the published shapes' configs must parse to the published dimensions.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>

#include "bench/shapes.hpp"
#include "diffvk/model.hpp"
#include "gpu_test.hpp"
#include "model/checkpoint.hpp"
#include "model_fixture.hpp"

using namespace diffvk;

namespace {
std::string read_text(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}
}  // namespace

TEST_CASE("synthesize: the published shapes parse to their published dimensions, and unknown ones are refused") {
  const ModelConfig c = parse_hf_config(bench::published_shape("diffllama-1b").config, "diffllama-1b");
  CHECK(c.num_layers == 16);
  CHECK(c.hidden_size == 2048);
  CHECK(c.num_heads == 16);  // 32 query heads = 16 differential heads of 2 x 64
  CHECK(c.num_kv_heads == 4);
  CHECK(c.head_dim() == 64);
  CHECK(c.intermediate_size == 8192);
  CHECK(c.vocab_size == 128256);
  CHECK(c.tie_word_embeddings);
  // 16 layers x (q, k, v, o, gate, up, down) + the tied embedding: about 1.3 G weights.
  const double E = 2048, kv = 4 * 2 * 64 * 2, I = 8192;
  CHECK(16 * (2 * E * E + E * kv + 3 * E * I) + 128256 * E == doctest::Approx(1.3e9).epsilon(0.05));
  CHECK_THROWS_WITH_AS(bench::published_shape("gpt-2"), doctest::Contains("unknown shape 'gpt-2' (known: diffllama-1b"),
                       Error);
  // Phi-4-mini-flash: its published config.json (test_phi4flash_config.cpp checks every dimension of it).
  const Phi4FlashConfig p = parse_phi4flash_config(bench::published_shape("phi4-mini-flash").config, "phi4");
  CHECK((p.num_layers == 32 && p.hidden_size == 2560 && p.vocab_size == 200064 && p.mamba_dt_rank == 160));
}

// A synthesized phi4flash model (every tensor of its table, by its real name) loads and runs a session.
TEST_CASE("synthesize: a phi4flash config gives a model of its shape that runs") {
  auto ctx = test::make_context();
  const std::string config = R"({"model_type": "phi4flash", "vocab_size": 300, "hidden_size": 32,
    "intermediate_size": 48, "num_hidden_layers": 8, "num_attention_heads": 8, "num_key_value_heads": 4,
    "max_position_embeddings": 64, "sliding_window": 5, "hidden_act": "silu", "layer_norm_eps": 1e-05,
    "tie_word_embeddings": true, "mamba_d_state": 4})";
  auto m = Model::synthesize(*ctx, config, LoadOptions{}, 3, "tiny phi4flash");
  CHECK(m->config().format == "phi4flash");
  auto s = Session::create(*m);
  const std::vector<float> a = s->prefill({1, 2, 3, 4, 5, 6, 7});
  REQUIRE(a.size() == 300);
  CHECK(std::all_of(a.begin(), a.end(), [](float v) { return std::isfinite(v); }));
  // The same seed gives the same model.
  auto m2 = Model::synthesize(*ctx, config, LoadOptions{}, 3, "tiny phi4flash");
  CHECK(Session::create(*m2)->prefill({1, 2, 3, 4, 5, 6, 7}) == a);
}

TEST_CASE("synthesize: a model of the tiny checkpoint's shape has its bytes, and its weights follow the seed") {
  const std::string dir = test::shared_tiny_model_dir();
  if (dir.empty()) return test::skip("tests/data/model_tiny is not in the tree");
  auto ctx = test::make_context();
  const std::string config = read_text(dir + "/config.json");
  auto real = Model::load(*ctx, dir);
  auto a = Model::synthesize(*ctx, config, LoadOptions{}, 7);
  auto b = Model::synthesize(*ctx, config, LoadOptions{}, 7);
  auto other = Model::synthesize(*ctx, config, LoadOptions{}, 8);
  CHECK(a->weight_bytes() == real->weight_bytes());
  CHECK(a->config().num_layers == real->config().num_layers);
  const std::vector<int32_t> prompt = {1, 5, 9, 200, 3};
  auto run = [&](Model& m) {
    auto s = Session::create(m, SessionOptions{});
    auto logits = s->prefill(prompt);
    auto next = s->decode(int32_t(3));
    logits.insert(logits.end(), next.begin(), next.end());
    return logits;
  };
  const auto la = run(*a), lb = run(*b), lo = run(*other);
  REQUIRE(la.size() == 2 * size_t(a->config().vocab_size));
  bool finite = true;
  for (float v : la) finite = finite && std::isfinite(v);
  CHECK(finite);
  CHECK(la == lb);  // the same seed: the same weights, bit for bit
  CHECK(la != lo);  // another seed: other weights
  // Quantized at load like a file's weights.
  LoadOptions q4;
  q4.weights = QuantKind::q4_0;
  auto q = Model::synthesize(*ctx, config, q4, 7);
  CHECK(q->weight_bytes() < a->weight_bytes());
  CHECK(test::validation_message_count() == 0);
}

TEST_CASE("synthesize: a config that does not parse is refused naming the key") {
  auto ctx = test::make_context();
  CHECK_THROWS_AS(Model::synthesize(*ctx, "{\"model_type\": \"diffllama\"}", LoadOptions{}), Error);
  CHECK_THROWS_AS(Model::synthesize(*ctx, "not json", LoadOptions{}), Error);
}
