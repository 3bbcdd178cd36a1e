// parse_model_config (include/diffvk/model.hpp): config.json text -> validated ModelConfig.
// Kept apart from runtime/model/model_load.cpp so that it builds without Vulkan (tests/fuzz/fuzz_config.cpp).
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>

#include <nlohmann/json.hpp>

#include "diffvk/model.hpp"
#include "io/bounded_json.hpp"
#include "io/printable.hpp"

namespace diffvk {

namespace {
// %g: "1e+300", not std::to_string's 300 digits.
std::string number(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", x);
  return buf;
}
}  // namespace

// ---- config ----------------------------------------------------------------------------
ModelConfig parse_model_config(const std::string& text, const std::string& name) {
  const nlohmann::json j = parse_json(text, name, kJsonConfigMaxBytes);
  if (!j.is_object()) throw Error(Status::format_error, name + ": top level must be an object");
  auto bad = [&](const std::string& key, const std::string& why) {
    return Error(Status::format_error, name + ": '" + key + "' " + why);
  };
  auto u32 = [&](const char* key, uint64_t lo, uint64_t hi, bool required, uint32_t def) -> uint32_t {
    if (!j.contains(key)) {
      if (required) throw bad(key, "is missing");
      return def;
    }
    return json_uint_in_range(j[key], name, key, lo, hi);
  };
  auto real = [&](const char* key, double def, double lo, double hi) -> double {
    if (!j.contains(key) || j[key].is_null()) return def;
    if (!j[key].is_number()) throw bad(key, "must be a number");
    const double x = j[key].get<double>();
    if (!std::isfinite(x) || x <= lo || x >= hi)
      throw bad(key, "= " + number(x) + " is out of range (" + number(lo) + ", " + number(hi) + ")");
    return x;
  };
  ModelConfig c;
  c.vocab_size = u32("vocab_size", 1, 1u << 20, true, 0);
  c.hidden_size = u32("hidden_size", 2, 65536, true, 0);
  c.num_layers = u32("num_layers", 1, 1024, true, 0);
  c.num_heads = u32("num_heads", 1, 4096, true, 0);
  c.num_kv_heads = u32("num_kv_heads", 1, 4096, false, c.num_heads);
  c.intermediate_size = u32("intermediate_size", 1, 1u << 20, true, 0);
  c.max_position_embeddings = u32("max_position_embeddings", 1, 1u << 20, true, 0);
  c.rope_theta = real("rope_theta", 10000.0, 0.0, 1e12);
  c.rms_norm_eps = real("rms_norm_eps", 1e-5, 0.0, 1.0);
  if (j.contains("tie_word_embeddings")) {
    if (!j["tie_word_embeddings"].is_boolean()) throw bad("tie_word_embeddings", "must be true or false");
    c.tie_word_embeddings = j["tie_word_embeddings"].get<bool>();
  }
  for (auto [key, field] :
       {std::pair<const char*, int64_t*>{"bos_token_id", &c.bos_token_id}, {"eos_token_id", &c.eos_token_id}}) {
    if (!j.contains(key) || j[key].is_null()) continue;
    if (!j[key].is_number_integer()) throw bad(key, "must be an integer");
    *field = j[key].get<int64_t>();
    if (*field < 0 || *field >= int64_t(c.vocab_size)) throw bad(key, "is not a token id below vocab_size");
  }
  if (j.contains("tokenizer")) {
    if (!j["tokenizer"].is_string()) throw bad("tokenizer", "must be a string");
    c.tokenizer = j["tokenizer"].get<std::string>();
  }
  if (c.tokenizer != "bytes" && c.tokenizer != "none")
    throw bad("tokenizer",
              "= '" + printable(c.tokenizer) + "' is not supported (\"bytes\", or \"none\" for token ids only)");
  if (c.tokenizer == "bytes" && c.vocab_size < 256) throw bad("vocab_size", "must be >= 256 for the bytes tokenizer");
  c.diff_version = u32("diff_version", 1, 2, false, 1);
  c.head_dim_key = u32("head_dim", 2, 4096, c.v2(), 0);
  if (c.num_heads % c.num_kv_heads)
    throw bad("num_kv_heads", "= " + std::to_string(c.num_kv_heads) +
                                  " does not divide num_heads = " + std::to_string(c.num_heads) +
                                  (c.v2() ? " (the two query heads of an output head must read one KV head)" : ""));
  if (c.v2()) {  // DIFF V2: head_dim is free, E need not equal H·D
    if (c.head_dim() % 2) throw bad("head_dim", "= " + std::to_string(c.head_dim()) + " is odd (RoPE rotates pairs)");
    if (uint64_t(c.num_heads) * 2 * c.head_dim() > (1u << 20))
      throw bad("head_dim", "x 2 x num_heads = " + std::to_string(uint64_t(c.num_heads) * 2 * c.head_dim()) +
                                " is more than 2^20 query columns");
    return c;
  }
  if (c.hidden_size % (2 * c.num_heads))
    throw bad("hidden_size", "= " + std::to_string(c.hidden_size) +
                                 " is not divisible by 2 x num_heads = " + std::to_string(2 * c.num_heads));
  if (c.head_dim_key && c.head_dim_key != c.hidden_size / c.num_heads / 2)
    throw bad("head_dim", "= " + std::to_string(c.head_dim_key) +
                              " but DIFF V1 has head_dim = hidden_size / num_heads / 2 = " +
                              std::to_string(c.hidden_size / c.num_heads / 2));
  if (c.head_dim() % 2)
    throw bad("hidden_size", "gives an odd head_dim " + std::to_string(c.head_dim()) + " (RoPE rotates pairs)");
  return c;
}

}  // namespace diffvk
