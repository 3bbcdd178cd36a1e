// Hugging Face DiffLlama config.json -> ModelConfig, and the RoPE frequencies of a config (llama3 scaling).
// Keys: vocab_size, hidden_size, intermediate_size, num_hidden_layers, num_attention_heads (sub-heads:
// H = half of it), num_key_value_heads (sub-heads), head_dim (must be hidden_size / num_attention_heads),
// hidden_act (silu), max_position_embeddings, rms_norm_eps (block norms and the weightless sub-norm),
// rope_theta + rope_scaling, or rope_parameters (newer transformers), tie_word_embeddings,
// attention_bias (must be false), bos/eos_token_id. The validated subset is handed to parse_model_config
// under the native names, so every range check is the native one.
#include <cmath>

#include <nlohmann/json.hpp>

#include "io/bounded_json.hpp"
#include "model/checkpoint.hpp"

namespace diffvk {

bool is_hf_diffllama(const std::string& text) {
  nlohmann::json j;
  try {
    j = parse_json(text, "config.json", kJsonConfigMaxBytes);
  } catch (const Error&) {
    return false;  // the native parser reads it again and says why, naming the file
  }
  if (!j.is_object() || !j.contains("model_type")) return false;  // native (or not JSON: the native parser says why)
  if (j["model_type"] == "diffllama") return true;
  const std::string type = j["model_type"].is_string() ? j["model_type"].get<std::string>() : j["model_type"].dump();
  throw Error(Status::unsupported, "config.json: model_type '" + type.substr(0, 64) +
                                       "' is not supported (\"diffllama\", or the native format without model_type)");
}

ModelConfig parse_hf_config(const std::string& text, const std::string& name) {
  const auto j = parse_json(text, name, kJsonConfigMaxBytes);
  if (!j.is_object()) throw Error(Status::format_error, name + ": invalid JSON or not an object");
  auto bad = [&](const std::string& key, const std::string& why) {
    return Error(Status::format_error, name + ": '" + key + "' " + why);
  };
  auto uint_of = [&](const nlohmann::json& o, const char* key) -> uint64_t {
    if (!o.contains(key)) throw bad(key, "is missing");
    if (!o[key].is_number_unsigned()) throw bad(key, "must be a non-negative integer");
    return o[key].get<uint64_t>();
  };
  auto num_of = [&](const nlohmann::json& o, const char* key, double def) -> double {
    if (!o.contains(key) || o[key].is_null()) return def;
    if (!o[key].is_number() || !std::isfinite(o[key].get<double>())) throw bad(key, "must be a finite number");
    return o[key].get<double>();
  };
  nlohmann::json n = nlohmann::json::object();  // the native config
  for (const char* k : {"vocab_size", "hidden_size", "intermediate_size", "max_position_embeddings"})
    n[k] = uint_of(j, k);
  n["num_layers"] = uint_of(j, "num_hidden_layers");
  const uint64_t sub = uint_of(j, "num_attention_heads");
  const uint64_t kv = j.contains("num_key_value_heads") && !j["num_key_value_heads"].is_null()
                          ? uint_of(j, "num_key_value_heads")
                          : sub;
  if (sub == 0 || sub % 2)
    throw bad("num_attention_heads",
              "= " + std::to_string(sub) + " must be even (it counts sub-heads: two per differential head)");
  if (kv == 0 || sub % kv)
    throw bad("num_key_value_heads",
              "= " + std::to_string(kv) + " must divide num_attention_heads = " + std::to_string(sub));
  const uint64_t E = n["hidden_size"];
  if (E % sub) throw bad("hidden_size", "is not divisible by num_attention_heads");
  if (j.contains("head_dim") && !j["head_dim"].is_null() && uint_of(j, "head_dim") != E / sub)
    throw bad("head_dim", "= " + std::to_string(uint_of(j, "head_dim")) +
                              " is not hidden_size / num_attention_heads = " + std::to_string(E / sub) +
                              " (the runtime needs num_attention_heads x head_dim = hidden_size)");
  n["num_heads"] = sub / 2;
  // K1/K2 and V halves of a head come from kv sub-heads h / n_rep and (h + H) / n_rep: with an even count
  // they pair up into kv / 2 groups; otherwise every head gets its own pair (hf_loader.cpp).
  n["num_kv_heads"] = kv % 2 == 0 ? kv / 2 : sub / 2;
  if (j.contains("hidden_act") && j["hidden_act"] != "silu") throw bad("hidden_act", "must be \"silu\" (SwiGLU)");
  for (const char* k : {"attention_bias", "mlp_bias"})
    if (j.contains(k) && j[k] != false) throw bad(k, "must be false (the runtime has no biases)");
  if (j.contains("pretraining_tp") && j["pretraining_tp"] != 1) throw bad("pretraining_tp", "must be 1");
  n["rms_norm_eps"] = num_of(j, "rms_norm_eps", 1e-5);
  if (j.contains("tie_word_embeddings")) n["tie_word_embeddings"] = j["tie_word_embeddings"];
  for (const char* k : {"bos_token_id", "eos_token_id"}) {
    if (!j.contains(k) || j[k].is_null()) continue;
    const auto& v = j[k].is_array() && !j[k].empty() ? j[k][0] : j[k];  // eos may be a list: the first one
    n[k] = v;
  }
  n["tokenizer"] = "none";
  // RoPE: rope_parameters {rope_type, rope_theta, ...} (newer) or rope_theta + rope_scaling {rope_type|type, ...}.
  nlohmann::json rs = nlohmann::json::object();
  std::string rs_key = "rope_scaling";
  double theta = num_of(j, "rope_theta", 10000.0);
  if (j.contains("rope_parameters") && !j["rope_parameters"].is_null()) {
    rs = j["rope_parameters"];
    rs_key = "rope_parameters";
    if (!rs.is_object()) throw bad(rs_key, "must be an object");
    theta = num_of(rs, "rope_theta", theta);
  } else if (j.contains("rope_scaling") && !j["rope_scaling"].is_null()) {
    rs = j["rope_scaling"];
    if (!rs.is_object()) throw bad(rs_key, "must be an object or null");
  }
  n["rope_theta"] = theta;
  ModelConfig c = parse_model_config(n.dump(), name + " (Hugging Face keys mapped to the native ones)");
  c.format = "diffllama";
  c.subln_eps = c.rms_norm_eps;
  const auto type_v = rs.contains("rope_type") ? rs["rope_type"]
                      : rs.contains("type")    ? rs["type"]
                                               : nlohmann::json("default");
  if (!type_v.is_string()) throw bad(rs_key + ".rope_type", "must be a string");
  c.rope_type = type_v.get<std::string>();
  if (c.rope_type == "llama3") {
    c.rope_factor = num_of(rs, "factor", 0);
    c.rope_low_freq_factor = num_of(rs, "low_freq_factor", 0);
    c.rope_high_freq_factor = num_of(rs, "high_freq_factor", 0);
    const uint64_t orig = uint_of(rs, "original_max_position_embeddings");
    if (!(c.rope_factor > 0)) throw bad(rs_key + ".factor", "must be > 0");
    if (!(c.rope_low_freq_factor > 0) || !(c.rope_high_freq_factor > c.rope_low_freq_factor))
      throw bad(rs_key, "needs 0 < low_freq_factor < high_freq_factor");
    if (orig == 0 || orig > (1u << 24)) throw bad(rs_key + ".original_max_position_embeddings", "must be in [1, 2^24]");
    c.rope_original_max_positions = static_cast<uint32_t>(orig);
  } else if (c.rope_type != "default") {
    throw Error(Status::unsupported,
                name + ": RoPE type '" + c.rope_type + "' (" + rs_key + ") is not supported (default, llama3)");
  }
  return c;
}

std::vector<double> rope_inv_freq(const ModelConfig& c) {
  const uint32_t D = c.head_dim();
  std::vector<double> f(D / 2);
  const double pi = 3.14159265358979323846;
  for (uint32_t i = 0; i < D / 2; ++i) {
    f[i] = std::pow(c.rope_theta, -2.0 * i / D);
    if (c.rope_type != "llama3") continue;
    const double orig = c.rope_original_max_positions, wavelen = 2 * pi / f[i];
    const double low_wl = orig / c.rope_low_freq_factor, high_wl = orig / c.rope_high_freq_factor;
    if (wavelen > low_wl) {
      f[i] /= c.rope_factor;
    } else if (wavelen >= high_wl) {  // between the bands: interpolate
      const double s = (orig / wavelen - c.rope_low_freq_factor) / (c.rope_high_freq_factor - c.rope_low_freq_factor);
      f[i] = (1 - s) * f[i] / c.rope_factor + s * f[i];
    }
  }
  return f;
}

}  // namespace diffvk
