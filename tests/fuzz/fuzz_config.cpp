// libFuzzer harness for parse_model_config (runtime/model/model_config.cpp), parse_hf_config
// (runtime/model/hf_config.cpp, Hugging Face DiffLlama) and parse_phi4flash_config
// (runtime/model/phi4flash_config.cpp, Phi-4-mini-flash): config.json text. Any input must either parse
// or throw diffvk::Error(format_error; the Hugging Face parsers also unsupported, for a value they do
// not implement); an accepted config must satisfy every invariant the model loader relies on, and a
// phi4flash config must give a layer plan.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "diffvk/model.hpp"
#include "model/checkpoint.hpp"
#include "model/phi4flash_config.hpp"

using namespace diffvk;

namespace {
bool invariants(const ModelConfig& c) {
  return c.hidden_size >= 2 && c.num_layers >= 1 && c.num_heads >= 1 && c.num_kv_heads >= 1 &&
         c.intermediate_size >= 1 && c.max_position_embeddings >= 1 && c.hidden_size % (2 * c.num_heads) == 0 &&
         c.num_heads % c.num_kv_heads == 0 && c.head_dim() >= 2 && c.head_dim() % 2 == 0 && c.rope_theta > 0 &&
         c.rms_norm_eps > 0 && c.rms_norm_eps < 1 && c.subln_eps > 0 && c.subln_eps < 1 &&
         (c.tokenizer == "bytes" ? c.vocab_size >= 256 : c.tokenizer == "none") && c.vocab_size >= 1 &&
         c.bos_token_id >= -1 && c.bos_token_id < int64_t(c.vocab_size) && c.eos_token_id >= -1 &&
         c.eos_token_id < int64_t(c.vocab_size) &&
         (c.rope_type == "default" ||
          (c.rope_type == "llama3" && c.rope_factor > 0 && c.rope_low_freq_factor > 0 &&
           c.rope_high_freq_factor > c.rope_low_freq_factor && c.rope_original_max_positions > 0));
}

bool invariants(const Phi4FlashConfig& c) {
  if (!(c.num_layers >= 4 && c.num_layers % 4 == 0 && c.num_attention_heads % 2 == 0 &&
        c.num_key_value_heads % 2 == 0 && c.num_key_value_heads >= 2 &&
        c.num_attention_heads % c.num_key_value_heads == 0 && c.head_dim >= 1 &&
        c.head_dim * c.num_attention_heads == c.hidden_size && c.sliding_window >= 1 && c.mamba_d_conv >= 2 &&
        c.mamba_d_state >= 1 && c.mamba_dt_rank >= 1 && c.d_inner() >= 1 && c.intermediate_size >= 1 &&
        c.layer_norm_eps > 0 && c.layer_norm_eps < 1 && c.vocab_size >= 1 && c.eos_token_id < int64_t(c.vocab_size)))
    return false;
  const SambaYPlan p = sambay_plan(c);
  return p.kinds.size() == c.num_layers && p.kinds[p.memory_layer] == SambaYLayerKind::memory_mamba &&
         p.kinds[p.shared_kv_layer] == SambaYLayerKind::full_attention;
}

template <class Config, class Parse>
void check(const char* what, Parse parse, bool unsupported_ok) {
  Config c;
  try {
    c = parse();
  } catch (const Error& e) {
    if (e.status() != Status::format_error && !(unsupported_ok && e.status() == Status::unsupported)) {
      std::fprintf(stderr, "fuzz_config: %s rejected with status %d: %s\n", what, int(e.status()), e.what());
      std::abort();
    }
    return;
  }
  if (!invariants(c)) {
    std::fprintf(stderr, "fuzz_config: %s accepted a config that breaks an invariant\n", what);
    std::abort();
  }
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  check<ModelConfig>(
      "parse_model_config", [&] { return parse_model_config(text, "fuzz/config.json"); }, false);
  check<ModelConfig>(
      "parse_hf_config", [&] { return parse_hf_config(text, "fuzz/config.json"); }, true);
  check<Phi4FlashConfig>(
      "parse_phi4flash_config", [&] { return parse_phi4flash_config(text, "fuzz/config.json"); }, true);
  return 0;
}
