// Hostile model files: Model::load must refuse every malformed checkpoint with an error
// naming the problem, never crash, and leave nothing behind (no device memory; host leaks are
// caught by the sanitize build). The variants are made in a temporary directory from
// tests/data/model_tiny when it exists, else from a synthesized tiny checkpoint.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "diffvk/diffvk.h"
#include "diffvk/model.hpp"
#include "vk/gpu.hpp"
#include "gpu_test.hpp"
#include "model_fixture.hpp"

using namespace diffvk;
using nlohmann::json;

namespace {

struct Base {
  std::string config_text;
  test::Tensors tensors;
  std::vector<uint8_t> file;  // model.safetensors as is
};

// The checkpoint the hostile variants are made from.
Base base_checkpoint(const test::TempDir& tmp) {
  std::string dir = test::shared_tiny_model_dir();
  if (dir.empty()) {
    dir = tmp / "base";
    test::write_tiny_model(dir);
    MESSAGE("tests/data/model_tiny not found: variants made from a synthesized 2-layer model");
  }
  const auto cfg = test::read_bytes(dir + "/config.json");
  return Base{std::string(cfg.begin(), cfg.end()), test::read_tensors(dir + "/model.safetensors"),
              test::read_bytes(dir + "/model.safetensors")};
}

// Loads `dir`; expects an Error with `status` whose message contains every phrase, and no device
// memory left allocated.
void expect_refused(Context& ctx, const std::string& dir, Status status, std::vector<std::string> phrases) {
  const uint64_t before = device_bytes_allocated();
  try {
    auto m = Model::load(ctx, dir);
    FAIL_CHECK("accepted: " << dir);
  } catch (const Error& e) {
    const std::string what = e.what();
    INFO("message: " << what);
    CHECK_MESSAGE(e.status() == status, "status " << status_name(e.status()) << ", expected " << status_name(status));
    for (const auto& p : phrases) CHECK_MESSAGE(what.find(p) != std::string::npos, "message lacks '" << p << "'");
  } catch (const std::exception& e) {
    FAIL_CHECK("not a diffvk::Error: " << e.what());
  }
  CHECK(device_bytes_allocated() == before);
}

void put_f32(test::RawTensor& t, size_t i, float v) {
  REQUIRE(t.dtype == "F32");
  REQUIRE((i + 1) * 4 <= t.bytes.size());
  std::memcpy(&t.bytes[i * 4], &v, 4);
}
// The same values as F32 (converting F16/BF16 checkpoints, so that single values can be poked).
test::RawTensor as_f32(const test::RawTensor& t) {
  if (t.dtype == "F32") return t;
  auto f = SafetensorsFile::from_bytes(test::encode_safetensors({{"t", t}}), "t");
  return test::f32_tensor(t.shape, f.to_float(f.tensors()[0]));
}

}  // namespace

TEST_CASE("hostile: truncated and corrupt model.safetensors are refused") {
  test::TempDir tmp("diffvk-hostile");
  const Base base = base_checkpoint(tmp);
  auto ctx = test::make_context();
  const std::string dir = tmp / "m";
  test::fs::create_directories(dir);
  test::write_text(dir + "/config.json", base.config_text);

  SUBCASE("the unmodified copy loads") {
    test::write_bytes(dir + "/model.safetensors", base.file.data(), base.file.size());
    auto m = Model::load(*ctx, dir);
    CHECK(m->config().vocab_size >= 256);
  }
  SUBCASE("truncated at every 1/16th of its length") {
    for (size_t k = 0; k < 16; ++k) {
      const size_t len = base.file.size() * k / 16;
      CAPTURE(len);
      test::write_bytes(dir + "/model.safetensors", base.file.data(), len);
      expect_refused(*ctx, dir, Status::format_error, {"model.safetensors"});
    }
  }
  SUBCASE("one byte short") {
    test::write_bytes(dir + "/model.safetensors", base.file.data(), base.file.size() - 1);
    expect_refused(*ctx, dir, Status::format_error, {"model.safetensors"});
  }
  SUBCASE("trailing bytes") {
    auto f = base.file;
    f.push_back(0);
    test::write_bytes(dir + "/model.safetensors", f.data(), f.size());
    expect_refused(*ctx, dir, Status::format_error, {"model.safetensors"});
  }
  SUBCASE("absurd header length") {
    for (uint64_t n : {uint64_t(1) << 62, ~uint64_t(0), uint64_t(100000001), uint64_t(0)}) {
      auto f = base.file;
      for (int i = 0; i < 8; ++i) f[i] = uint8_t(n >> (8 * i));
      test::write_bytes(dir + "/model.safetensors", f.data(), f.size());
      expect_refused(*ctx, dir, Status::format_error, {"header length"});
    }
  }
  SUBCASE("header JSON garbage") {
    auto f = base.file;
    f[8] = '[';
    test::write_bytes(dir + "/model.safetensors", f.data(), f.size());
    expect_refused(*ctx, dir, Status::format_error, {"model.safetensors", "header"});
  }
  SUBCASE("not a file") {
    test::fs::create_directories(dir + "/model.safetensors");
    expect_refused(*ctx, dir, Status::io_error, {"model.safetensors"});
  }
  SUBCASE("missing files") {
    expect_refused(*ctx, dir, Status::io_error, {"model.safetensors"});
    expect_refused(*ctx, tmp / "nonexistent", Status::io_error, {"config.json"});
  }
}

TEST_CASE("hostile: tensors that do not match the config are refused naming the tensor") {
  test::TempDir tmp("diffvk-hostile");
  const Base base = base_checkpoint(tmp);
  const json cfg = json::parse(base.config_text);
  const bool tied = cfg.value("tie_word_embeddings", false);
  auto ctx = test::make_context();
  const std::string dir = tmp / "m";
  auto load_with = [&](const test::Tensors& ts, Status st, std::vector<std::string> phrases) {
    test::write_checkpoint(dir, base.config_text, ts);
    expect_refused(*ctx, dir, st, std::move(phrases));
  };

  SUBCASE("wrong dtype (I64)") {
    auto ts = base.tensors;
    auto& t = ts.at("norm.weight");
    t.dtype = "I64";
    t.bytes.assign(size_t(t.shape.at(0)) * 8, 0);  // same shape, 8-byte elements
    load_with(ts, Status::format_error, {"'norm.weight'", "F32, F16 or BF16"});
  }
  SUBCASE("wrong dtype (I32)") {
    auto ts = base.tensors;
    auto& t = ts.at("layers.0.attn.q_proj.weight");
    t.dtype = "I32";
    t.bytes.assign(size_t(t.shape[0] * t.shape[1]) * 4, 0);
    load_with(ts, Status::format_error, {"'layers.0.attn.q_proj.weight'", "F32, F16 or BF16"});
  }
  SUBCASE("missing tensor") {
    for (const char* name : {"layers.0.ffn.up_proj.weight", "embed_tokens.weight", "layers.0.attn.lambda_k2"}) {
      auto ts = base.tensors;
      REQUIRE(ts.erase(name) == 1);
      load_with(ts, Status::format_error, {"missing tensor", std::string("'") + name + "'"});
    }
  }
  SUBCASE("unexpected tensor") {
    auto ts = base.tensors;
    ts["layers.0.attn.extra_bias"] = test::f32_tensor({4}, {0, 0, 0, 0});
    load_with(ts, Status::format_error, {"unexpected tensor", "'layers.0.attn.extra_bias'"});
    ts = base.tensors;
    ts["layers.999.attn_norm.weight"] = ts.at("norm.weight");  // a layer past num_layers
    load_with(ts, Status::format_error, {"unexpected tensor", "'layers.999.attn_norm.weight'"});
  }
  SUBCASE("lm_head against tie_word_embeddings") {
    auto ts = base.tensors;
    if (tied) {
      ts["lm_head.weight"] = ts.at("embed_tokens.weight");
      load_with(ts, Status::format_error, {"unexpected tensor", "'lm_head.weight'", "tie_word_embeddings"});
    } else {
      ts.erase("lm_head.weight");
      load_with(ts, Status::format_error, {"missing tensor", "'lm_head.weight'"});
    }
  }
  SUBCASE("shape mismatch vs config") {
    for (const char* name : {"layers.1.attn.k_proj.weight", "norm.weight", "layers.0.attn.subln.weight"}) {
      if (!base.tensors.count(name)) continue;  // a 1-layer shared model
      auto ts = base.tensors;
      auto& t = ts.at(name);
      // Same element count, other shape: transposed / flattened.
      if (t.shape.size() == 2)
        std::swap(t.shape[0], t.shape[1]);
      else
        t.shape = {1, t.shape[0]};
      if (t.shape.size() == 2 && t.shape[0] == t.shape[1]) t.shape = {t.shape[0] * t.shape[1]};
      load_with(ts, Status::format_error, {std::string("'") + name + "'", "shape"});
    }
    auto ts = base.tensors;  // one row too few
    auto& e = ts.at("embed_tokens.weight");
    const size_t row = e.bytes.size() / size_t(e.shape[0]);
    e.shape[0] -= 1;
    e.bytes.resize(e.bytes.size() - row);
    load_with(ts, Status::format_error, {"'embed_tokens.weight'", "shape"});
  }
  SUBCASE("non-finite lambda vector or norm weight") {
    const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
    for (const char* name : {"layers.0.attn.lambda_q1", "layers.0.attn.lambda_k2", "norm.weight",
                             "layers.0.attn_norm.weight", "layers.0.ffn_norm.weight", "layers.0.attn.subln.weight"}) {
      for (float bad : {nan, inf, -inf}) {
        auto ts = base.tensors;
        auto& t = ts.at(name);
        t = as_f32(t);
        put_f32(t, 1, bad);
        load_with(ts, Status::format_error, {"non-finite", std::string("'") + name + "'"});
      }
    }
  }
  SUBCASE("finite lambda vectors whose lambda overflows") {
    auto ts = base.tensors;
    for (const char* n : {"lambda_q1", "lambda_k1"}) {
      auto& t = ts.at(std::string("layers.0.attn.") + n);
      t = as_f32(t);
      for (size_t i = 0; i < t.bytes.size() / 4; ++i) put_f32(t, i, 1e4f);  // exp(D * 1e8) = inf
    }
    load_with(ts, Status::format_error, {"lambda", "layer 0", "not finite"});
  }
}

TEST_CASE("hostile: bad config.json values are refused naming the key") {
  test::TempDir tmp("diffvk-hostile");
  const Base base = base_checkpoint(tmp);
  const json cfg = json::parse(base.config_text);
  auto ctx = test::make_context();
  const std::string dir = tmp / "m";
  test::fs::create_directories(dir);
  test::write_bytes(dir + "/model.safetensors", base.file.data(), base.file.size());
  auto with = [&](const std::string& key, const json& value) {
    json c = cfg;
    if (value.is_discarded())
      c.erase(key);
    else
      c[key] = value;
    test::write_text(dir + "/config.json", c.dump());
  };
  const json gone(json::value_t::discarded);
  const uint32_t H = cfg.at("num_heads").get<uint32_t>();
  struct Case {
    const char* key;
    json value;
    const char* phrase;
  };
  const std::vector<Case> cases = {
      {"vocab_size", 0, "'vocab_size'"},
      {"hidden_size", 0, "'hidden_size'"},
      {"num_layers", 0, "'num_layers'"},
      {"num_heads", 0, "'num_heads'"},
      {"num_kv_heads", 0, "'num_kv_heads'"},
      {"intermediate_size", 0, "'intermediate_size'"},
      {"max_position_embeddings", 0, "'max_position_embeddings'"},
      {"hidden_size", 2 * H * 8 + 1, "not divisible by 2 x num_heads"},  // E not divisible by 2H
      {"num_kv_heads", H + 1, "does not divide num_heads"},              // H not divisible by Hkv
      {"vocab_size", uint64_t(1) << 40, "'vocab_size'"},                 // huge vocab
      {"vocab_size", 4294967296ull + 256, "'vocab_size'"},               // wraps to 256 in 32 bits
      {"vocab_size", -1, "'vocab_size'"},
      {"vocab_size", gone, "'vocab_size' is missing"},
      {"num_layers", 1.5, "'num_layers' must be an integer"},
      {"num_layers", "2", "'num_layers' must be an integer"},
      {"rope_theta", -1.0, "'rope_theta'"},
      {"rms_norm_eps", 0.0, "'rms_norm_eps'"},
      {"tie_word_embeddings", 1, "'tie_word_embeddings'"},
      {"bos_token_id", 1 << 20, "'bos_token_id'"},
      {"tokenizer", "sentencepiece", "'tokenizer'"},
      {"tokenizer", json::array({"bytes"}), "'tokenizer'"},
  };
  SUBCASE("out-of-range and malformed values") {
    for (const auto& c : cases) {
      CAPTURE(c.key);
      CAPTURE(c.value.dump());
      with(c.key, c.value);
      expect_refused(*ctx, dir, Status::format_error, {"config.json", c.phrase});
    }
  }
  SUBCASE("valid config, other shapes than the weights") {
    json c = cfg;
    c["intermediate_size"] = cfg.at("intermediate_size").get<uint32_t>() + 2;
    test::write_text(dir + "/config.json", c.dump());
    expect_refused(*ctx, dir, Status::format_error, {"model.safetensors", "ffn", "shape"});
  }
  SUBCASE("invalid JSON") {
    for (std::string text :
         {std::string("{\"vocab_size\": 256,"), std::string(""), std::string("[]"), base.config_text + "}",
          std::string("{\"vocab_size\": 2\0 56}", 20), std::string(100000, '[')}) {
      test::write_text(dir + "/config.json", text);
      expect_refused(*ctx, dir, Status::format_error, {"config.json"});
    }
  }
  SUBCASE("config.json larger than 1 MiB") {
    std::string big = base.config_text;
    big.insert(big.find('{') + 1, "\"pad\": \"" + std::string(1 << 20, 'x') + "\",");
    test::write_text(dir + "/config.json", big);
    expect_refused(*ctx, dir, Status::format_error, {"config.json"});
  }
}

TEST_CASE("hostile: a failed load through the C ABI returns no handle") {
  test::TempDir tmp("diffvk-hostile");
  const Base base = base_checkpoint(tmp);
  const std::string dir = tmp / "m";
  test::fs::create_directories(dir);
  test::write_text(dir + "/config.json", base.config_text);
  test::write_bytes(dir + "/model.safetensors", base.file.data(), base.file.size() / 2);
  diffvk_context_options o;
  diffvk_context_default_options(&o);
  o.validation = 1;
  diffvk_context* ctx = nullptr;
  REQUIRE(diffvk_context_create(&o, &ctx) == DIFFVK_OK);
  diffvk_model* m = reinterpret_cast<diffvk_model*>(&o);  // must be overwritten with NULL
  CHECK(diffvk_model_load(ctx, dir.c_str(), &m) == DIFFVK_FORMAT_ERROR);
  CHECK(m == nullptr);
  CHECK(std::string(diffvk_last_error()).find("model.safetensors") != std::string::npos);
  CHECK(diffvk_context_destroy(ctx) == DIFFVK_OK);  // no model was registered against it
}

// tests/fuzz/corpus/config (tests/fuzz/make_config_corpus.py): ok_* parse, bad_* are refused naming the file.
TEST_CASE("hostile: config seed corpus") {
  const auto root = test::fs::path(DIFFVK_FUZZ_CORPUS_DIR) / "config";
  REQUIRE_MESSAGE(test::fs::is_directory(root), "config seed corpus not found at " << root.string());
  size_t ok = 0, bad = 0;
  for (const auto& entry : test::fs::directory_iterator(root)) {
    const std::string name = entry.path().filename().string();
    const bool expect_ok = name.rfind("ok_", 0) == 0;
    if (!expect_ok && name.rfind("bad_", 0) != 0) continue;
    CAPTURE(name);
    const auto bytes = test::read_bytes(entry.path().string());
    try {
      parse_model_config(std::string(bytes.begin(), bytes.end()), name);
      CHECK_MESSAGE(expect_ok, "accepted a bad_ file");
      ++ok;
    } catch (const Error& e) {
      CHECK_MESSAGE(!expect_ok, "rejected: " << e.what());
      CHECK(e.status() == Status::format_error);
      CHECK(std::string(e.what()).find(name) != std::string::npos);
      ++bad;
    }
  }
  CHECK(ok >= 4);
  CHECK(bad >= 20);
}
