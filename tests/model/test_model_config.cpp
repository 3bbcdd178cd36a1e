// Model config parsing (pure) and sampling.
#include <doctest/doctest.h>

#include <cmath>
#include <map>

#include "diffvk/model.hpp"

using namespace diffvk;

namespace {
std::string cfg(const std::string& override_key = "", const std::string& value = "") {
  std::map<std::string, std::string> kv = {{"vocab_size", "256"},
                                           {"hidden_size", "64"},
                                           {"num_layers", "2"},
                                           {"num_heads", "2"},
                                           {"num_kv_heads", "1"},
                                           {"intermediate_size", "96"},
                                           {"max_position_embeddings", "64"},
                                           {"tokenizer", "\"bytes\""}};
  if (!override_key.empty()) {
    if (value.empty())
      kv.erase(override_key);
    else
      kv[override_key] = value;
  }
  std::string s = "{";
  for (auto& [k, v] : kv) s += (s.size() > 1 ? "," : "") + ("\"" + k + "\":" + v);
  return s + "}";
}
void rejects(const std::string& text, const std::string& phrase) {
  INFO(text);
  try {
    parse_model_config(text);
    FAIL("accepted");
  } catch (const Error& e) {
    CHECK(e.status() == Status::format_error);
    INFO(e.what());
    CHECK(std::string(e.what()).find(phrase) != std::string::npos);
  }
}
}  // namespace

TEST_CASE("model config: a valid config parses with defaults") {
  const ModelConfig c = parse_model_config(cfg());
  CHECK(c.head_dim() == 16);
  CHECK(c.rope_theta == 10000.0);
  CHECK(c.rms_norm_eps == 1e-5);
  CHECK(c.bos_token_id == -1);
  CHECK_FALSE(c.tie_word_embeddings);
}

TEST_CASE("model config: bad values are rejected naming the key") {
  rejects("{not json", "invalid JSON");
  rejects("[1, 2]", "object");
  // One key set to a bad value ("": the key left out) in an otherwise valid config.
  const struct {
    const char* key;
    const char* value;
    const char* phrase;
  } bad[] = {
      {"vocab_size", "", "'vocab_size' is missing"},
      {"vocab_size", "0", "'vocab_size'"},
      {"vocab_size", "100000000", "'vocab_size'"},
      {"vocab_size", "100", "'vocab_size' must be >= 256"},
      {"hidden_size", "-64", "'hidden_size'"},
      {"hidden_size", "\"64\"", "'hidden_size' must be an integer"},
      {"hidden_size", "66", "'hidden_size'"},  // not divisible by 2H = 4
      {"hidden_size", "68", "odd head_dim"},   // 68 / (2 x 2) = 17
      {"num_kv_heads", "3", "'num_kv_heads'"},
      {"num_layers", "0", "'num_layers'"},
      {"max_position_embeddings", "99999999", "'max_position_embeddings'"},
      {"rope_theta", "-1", "'rope_theta'"},
      {"rms_norm_eps", "0", "'rms_norm_eps'"},
      {"tokenizer", "\"sentencepiece\"", "'tokenizer'"},
      {"bos_token_id", "256", "'bos_token_id'"},
      {"tie_word_embeddings", "1", "'tie_word_embeddings'"},
  };
  for (const auto& b : bad) {
    CAPTURE(b.key);
    CAPTURE(b.value);
    rejects(cfg(b.key, b.value), b.phrase);
  }
}

// DIFF V2 (docs/maths.md "DIFF V2 models"): "diff_version": 2 with an explicit, even head_dim; E need not be
// 2·H·D; Hkv must divide H. DIFF V1 may state head_dim only as E / H / 2.
TEST_CASE("model config: diff_version and head_dim") {
  const ModelConfig v1 = parse_model_config(cfg());
  CHECK(v1.diff_version == 1);
  CHECK_FALSE(v1.v2());
  CHECK(v1.kv_row() == 32);
  CHECK(parse_model_config(cfg("head_dim", "16")).head_dim() == 16);
  rejects(cfg("head_dim", "8"), "'head_dim' = 8 but DIFF V1 has head_dim = hidden_size / num_heads / 2 = 16");
  auto v2 = [&](const std::string& head_dim, const std::string& extra_key = "", const std::string& extra = "") {
    std::string t = cfg(extra_key, extra);
    t.pop_back();
    t += ",\"diff_version\":2";
    if (!head_dim.empty()) t += ",\"head_dim\":" + head_dim;
    return t + "}";
  };
  const ModelConfig c = parse_model_config(v2("24", "hidden_size", "40"));  // E = 40 != H·D = 48
  CHECK(c.v2());
  CHECK(c.head_dim() == 24);
  CHECK(c.kv_row() == 24);
  rejects(v2(""), "'head_dim' is missing");
  rejects(v2("7"), "'head_dim' = 7 is odd");
  rejects(v2("16", "num_kv_heads", "3"), "num_kv_heads");
  rejects(cfg("diff_version", "3"), "'diff_version' = 3 is out of range [1, 2]");
}

TEST_CASE("sampling: greedy, temperature, top-k and top-p") {
  std::vector<float> logits = {0.1f, 3.0f, 2.9f, -1.0f, 0.0f};
  CHECK(Sampler({}).sample(logits.data(), 5) == 1);
  // top-k 1 is greedy whatever the temperature.
  Sampler k1({5.0f, 1, 1.0f, 3});
  for (int i = 0; i < 50; ++i) CHECK(k1.sample(logits.data(), 5) == 1);
  // top-k 2: only the two best tokens ever appear, both do.
  Sampler k2({1.0f, 2, 1.0f, 3});
  int seen[5] = {0};
  for (int i = 0; i < 400; ++i) ++seen[k2.sample(logits.data(), 5)];
  CHECK(seen[1] > 0);
  CHECK(seen[2] > 0);
  CHECK(seen[0] + seen[3] + seen[4] == 0);
  // top-p small keeps only the most likely token.
  Sampler p({1.0f, 0, 0.3f, 3});
  for (int i = 0; i < 50; ++i) CHECK(p.sample(logits.data(), 5) == 1);
  // Same seed, same sequence; high temperature reaches every token.
  Sampler a({2.0f, 0, 1.0f, 42}), b({2.0f, 0, 1.0f, 42});
  int all[5] = {0};
  for (int i = 0; i < 2000; ++i) {
    const int x = a.sample(logits.data(), 5);
    CHECK(x == b.sample(logits.data(), 5));
    ++all[x];
  }
  for (int c : all) CHECK(c > 0);
}
