// Phi-4-mini-flash (phi4flash) config.json -> Phi4FlashConfig, and the SambaY layer plan (phi4flash_config.hpp).
#include "model/phi4flash_config.hpp"

#include <algorithm>
#include <cmath>
#include <utility>

#include <nlohmann/json.hpp>

#include "diffvk/error.hpp"
#include "io/bounded_json.hpp"
#include "io/printable.hpp"

namespace diffvk {

Phi4FlashConfig parse_phi4flash_config(const std::string& text, const std::string& name) {
  const nlohmann::json j = parse_json(text, name, kJsonConfigMaxBytes);
  if (!j.is_object()) throw Error(Status::format_error, name + ": top level must be an object");
  auto bad = [&](const std::string& key, const std::string& why) {
    return Error(Status::format_error, name + ": '" + key + "' " + why);
  };
  auto unsupported = [&](const std::string& key, const std::string& why) {
    return Error(Status::unsupported, name + ": '" + key + "' " + why);
  };
  auto present = [&](const char* key) { return j.contains(key) && !j[key].is_null(); };
  auto uint_value = [&](const nlohmann::json& v, const std::string& key, uint64_t lo, uint64_t hi) {
    return json_uint_in_range(v, name, key, lo, hi);
  };
  // why_required: what the config class would put in the key's place, which the published checkpoint does not
  // rely on (so a config without the key is not the published model's).
  auto required = [&](const char* key, uint64_t lo, uint64_t hi, const char* why_required) {
    if (!present(key)) throw bad(key, std::string("is missing (") + why_required + ")");
    return uint_value(j[key], key, lo, hi);
  };
  auto optional = [&](const char* key, uint64_t lo, uint64_t hi, uint32_t def) {
    return present(key) ? uint_value(j[key], key, lo, hi) : def;
  };
  auto flag = [&](const char* key, bool def) {
    if (!present(key)) return def;
    if (!j[key].is_boolean()) throw bad(key, "must be true or false");
    return j[key].get<bool>();
  };

  if (!j.contains("model_type") || j["model_type"] != "phi4flash") throw bad("model_type", "must be \"phi4flash\"");
  Phi4FlashConfig c;
  c.vocab_size = required("vocab_size", 1, 1u << 20, "the config class's default 51200 is not the checkpoint's");
  c.hidden_size = required("hidden_size", 2, 65536, "the published config gives it");
  c.intermediate_size =
      required("intermediate_size", 1, 1u << 20, "the config class's default 9216 is not the checkpoint's");
  c.num_layers = required("num_hidden_layers", 4, 1024, "the published config gives it");
  if (c.num_layers % 4)
    throw bad("num_hidden_layers", "= " + std::to_string(c.num_layers) +
                                       " is not a multiple of 4 (SambaY + YOCO: two halves of Mamba/attention pairs)");
  c.num_attention_heads = required("num_attention_heads", 2, 4096, "the published config gives it");
  c.num_key_value_heads =
      required("num_key_value_heads", 2, 4096, "the config class's default 4 is not the checkpoint's 20");
  if (c.num_attention_heads % 2)
    throw bad("num_attention_heads",
              "= " + std::to_string(c.num_attention_heads) + " is odd (differential heads are pairs of query heads)");
  if (c.num_key_value_heads % 2)
    throw bad("num_key_value_heads", "= " + std::to_string(c.num_key_value_heads) +
                                         " is odd (the two softmaxes read alternate KV heads: pairs)");
  if (c.num_attention_heads % c.num_key_value_heads)
    throw bad("num_attention_heads",
              "= " + std::to_string(c.num_attention_heads) +
                  " is not a multiple of num_key_value_heads = " + std::to_string(c.num_key_value_heads));
  if (c.hidden_size % c.num_attention_heads)
    throw bad("hidden_size", "= " + std::to_string(c.hidden_size) + " is not a multiple of num_attention_heads = " +
                                 std::to_string(c.num_attention_heads));
  c.head_dim = c.hidden_size / c.num_attention_heads;
  if (present("head_dim") && uint_value(j["head_dim"], "head_dim", 1, 65536) != c.head_dim)
    throw bad("head_dim", "is not hidden_size / num_attention_heads = " + std::to_string(c.head_dim));
  c.max_position_embeddings = required("max_position_embeddings", 1, 1u << 20, "the published config gives it");

  // sliding_window: the published config.json holds a number; a config saved again by the config class holds
  // the per-layer list it builds (the number at odd layers below L/2, null elsewhere).
  if (!present("sliding_window"))
    throw bad("sliding_window", "is missing (the config class's default 2047 is not the checkpoint's 512)");
  const auto& sw = j["sliding_window"];
  if (sw.is_array()) {
    if (sw.size() != c.num_layers)
      throw bad("sliding_window", "is a list of " + std::to_string(sw.size()) +
                                      " entries, not num_hidden_layers = " + std::to_string(c.num_layers));
    for (uint32_t i = 0; i < c.num_layers; ++i) {
      const bool sliding = i % 2 == 1 && i < c.num_layers / 2;
      const std::string key = "sliding_window[" + std::to_string(i) + "]";
      if (!sliding) {
        if (!sw[i].is_null()) throw bad(key, "must be null (layer " + std::to_string(i) + " has no sliding window)");
        continue;
      }
      const uint32_t v = uint_value(sw[i], key, 1, 1u << 20);
      if (c.sliding_window && v != c.sliding_window)
        throw unsupported(key, "= " + std::to_string(v) + " differs from the first sliding layer's " +
                                   std::to_string(c.sliding_window) + " (one window for every layer)");
      c.sliding_window = v;
    }
  } else {
    c.sliding_window = uint_value(sw, "sliding_window", 1, 1u << 20);
  }

  if (!present("hidden_act")) throw bad("hidden_act", "is missing (the published config gives \"silu\")");
  if (j["hidden_act"] != "silu")
    throw unsupported("hidden_act", "= " + printable(j["hidden_act"].dump().substr(0, 64)) +
                                        " is not supported (\"silu\": fc2(up * silu(gate)))");
  if (!present("layer_norm_eps")) throw bad("layer_norm_eps", "is missing (the published config gives 1e-05)");
  if (!j["layer_norm_eps"].is_number()) throw bad("layer_norm_eps", "must be a number");
  c.layer_norm_eps = j["layer_norm_eps"].get<double>();
  if (!std::isfinite(c.layer_norm_eps) || !(c.layer_norm_eps > 0) || !(c.layer_norm_eps < 1))
    throw bad("layer_norm_eps", "must be in (0, 1)");
  if (!present("tie_word_embeddings")) throw bad("tie_word_embeddings", "is missing (the published config gives true)");
  c.tie_word_embeddings = flag("tie_word_embeddings", true);

  // The keys the published config.json leaves to the config class's defaults.
  const uint32_t mb = optional("mb_per_layer", 0, 1024, 2);
  if (mb != 2)
    throw unsupported("mb_per_layer", "= " + std::to_string(mb) + " is not supported (2: Mamba at even layers)");
  c.mamba_d_state = optional("mamba_d_state", 1, 1024, 16);
  c.mamba_d_conv = optional("mamba_d_conv", 2, 64, 4);
  c.mamba_expand = optional("mamba_expand", 1, 16, 2);
  if (uint64_t(c.mamba_expand) * c.hidden_size > (1u << 20))
    throw bad("mamba_expand", "x hidden_size is more than 2^20 channels");
  c.mamba_dt_rank = (c.hidden_size + 15) / 16;
  if (present("mamba_dt_rank") && j["mamba_dt_rank"] != "auto")
    c.mamba_dt_rank = uint_value(j["mamba_dt_rank"], "mamba_dt_rank", 1, 65536);
  if (!flag("mamba_conv_bias", true))
    throw unsupported("mamba_conv_bias", "= false is not supported (the published checkpoint has conv1d.bias)");
  for (const char* k : {"mamba_proj_bias", "mlp_bias", "lm_head_bias"})
    if (flag(k, false)) throw unsupported(k, "= true is not supported (the published checkpoint has no such bias)");
  if (present("rope_scaling"))
    throw unsupported("rope_scaling", "is set, but phi4flash has no rotary position embedding");

  for (auto [key, field] : {std::pair<const char*, int64_t*>{"bos_token_id", &c.bos_token_id},
                            {"eos_token_id", &c.eos_token_id},
                            {"pad_token_id", &c.pad_token_id}}) {
    if (!present(key)) continue;
    const auto& v = j[key].is_array() && !j[key].empty() ? j[key][0] : j[key];  // eos may be a list: the first
    *field = uint_value(v, key, 0, c.vocab_size - 1);
  }
  if (present("torch_dtype")) {
    const auto& d = j["torch_dtype"];
    if (!d.is_string() || (d != "bfloat16" && d != "float16" && d != "float32"))
      throw bad("torch_dtype", "= " + printable(d.dump().substr(0, 64)) + " is not bfloat16, float16 or float32");
    c.torch_dtype = d.get<std::string>();
  }
  return c;
}

bool is_phi4flash_config(const std::string& text) {
  try {
    const nlohmann::json j = parse_json(text, "config.json", kJsonConfigMaxBytes);
    return j.is_object() && j.contains("model_type") && j["model_type"] == "phi4flash";
  } catch (const Error&) {
    return false;
  }
}

const char* to_string(SambaYLayerKind kind) {
  switch (kind) {
    case SambaYLayerKind::mamba:
      return "mamba";
    case SambaYLayerKind::memory_mamba:
      return "memory_mamba";
    case SambaYLayerKind::sliding_attention:
      return "sliding_attention";
    case SambaYLayerKind::full_attention:
      return "full_attention";
    case SambaYLayerKind::gated_memory:
      return "gated_memory";
    case SambaYLayerKind::cross_attention:
      return "cross_attention";
  }
  return "?";
}

uint32_t SambaYPlan::count(SambaYLayerKind kind) const {
  uint32_t n = 0;
  for (auto k : kinds) n += k == kind;
  return n;
}

SambaYPlan sambay_plan(const Phi4FlashConfig& c) {
  if (c.num_layers < 4 || c.num_layers % 4 || c.sliding_window == 0)
    throw Error(Status::invalid_argument, "sambay_plan: not a validated phi4flash config");
  SambaYPlan p;
  const uint32_t half = c.num_layers / 2;
  p.memory_layer = half;
  p.shared_kv_layer = half + 1;
  p.first_cross_layer = half + 2;
  for (uint32_t i = 0; i < c.num_layers; ++i) {
    SambaYLayerKind k;
    if (i % 2 == 0)
      k = i < half ? SambaYLayerKind::mamba : i == half ? SambaYLayerKind::memory_mamba : SambaYLayerKind::gated_memory;
    else
      k = i < half        ? SambaYLayerKind::sliding_attention
          : i == half + 1 ? SambaYLayerKind::full_attention
                          : SambaYLayerKind::cross_attention;
    p.kinds.push_back(k);
    p.window.push_back(k == SambaYLayerKind::sliding_attention ? c.sliding_window : 0);
  }
  return p;
}

SambaYStateBytes sambay_state_bytes(const Phi4FlashConfig& c, uint64_t tokens, uint32_t elem_bytes) {
  const SambaYPlan p = sambay_plan(c);
  const uint64_t kv_row = 2ull * c.num_key_value_heads * c.head_dim * elem_bytes;  // K and V of one position
  const uint64_t window = std::min<uint64_t>(tokens, c.sliding_window);
  const uint64_t mamba = (uint64_t(c.mamba_d_conv - 1) + c.mamba_d_state) * c.d_inner() * elem_bytes;
  SambaYStateBytes b;
  b.full_kv = tokens * kv_row * p.count(SambaYLayerKind::full_attention);
  b.sliding_kv = window * kv_row * p.count(SambaYLayerKind::sliding_attention);
  b.mamba = mamba * (p.count(SambaYLayerKind::mamba) + p.count(SambaYLayerKind::memory_mamba));
  return b;
}

}  // namespace diffvk
