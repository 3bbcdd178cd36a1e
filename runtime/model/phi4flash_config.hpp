// Phi-4-mini-flash (Hugging Face model_type "phi4flash", the SambaY architecture): its config.json, validated,
// and the layer plan it implies (docs/phi4flash.md). Pure functions: no device, tested in
// tests/model/test_phi4flash_config.cpp. The checkpoint's tensors: model/phi4flash_checkpoint.hpp; its forward pass:
// model/phi4flash_forward.hpp, which Model::load and Session run.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace diffvk {

// The architecture keys of a phi4flash config.json. Required (the published checkpoint gives them, and the
// config class's defaults for them are not the checkpoint's: vocab 51200, intermediate 9216, 4 KV heads,
// window 2047): vocab_size, hidden_size, intermediate_size, num_hidden_layers, num_attention_heads,
// num_key_value_heads, max_position_embeddings, sliding_window, hidden_act, layer_norm_eps, tie_word_embeddings.
// Taken at the config class's defaults when absent, because the published config.json omits them and relies on
// those defaults: mb_per_layer (2), mamba_d_state (16), mamba_d_conv (4), mamba_expand (2), mamba_dt_rank
// ("auto" = ceil(hidden_size / 16)), mamba_conv_bias (true), mamba_proj_bias (false); and mlp_bias /
// lm_head_bias (false; TensorRT-LLM's config class only). Every other key is ignored (dropouts, rope_theta:
// the model has no RoPE).
struct Phi4FlashConfig {
  uint32_t vocab_size = 0;
  uint32_t hidden_size = 0;          // E
  uint32_t intermediate_size = 0;    // I: mlp.fc1 is (2I, E) = [gate | up]
  uint32_t num_layers = 0;           // num_hidden_layers, a multiple of 4
  uint32_t num_attention_heads = 0;  // query heads of head_dim (2 per differential head)
  uint32_t num_key_value_heads = 0;  // KV heads of head_dim (2 per differential KV group)
  uint32_t head_dim = 0;             // hidden_size / num_attention_heads
  uint32_t max_position_embeddings = 0;
  uint32_t sliding_window = 0;  // keys a sliding-window query sees, itself included
  double layer_norm_eps = 1e-5;
  bool tie_word_embeddings = true;
  uint32_t mamba_d_state = 16;
  uint32_t mamba_d_conv = 4;
  uint32_t mamba_expand = 2;
  uint32_t mamba_dt_rank = 0;  // resolved ("auto" = ceil(hidden_size / 16))
  int64_t bos_token_id = -1, eos_token_id = -1, pad_token_id = -1;
  std::string torch_dtype;  // informational: "bfloat16" in the published checkpoint; tensors carry their own dtype

  uint32_t d_inner() const { return mamba_expand * hidden_size; }
  uint32_t diff_heads() const { return num_attention_heads / 2; }  // H of docs/maths.md
  uint32_t kv_groups() const { return num_key_value_heads / 2; }   // Hkv
};

// Parses and validates config.json text of model_type "phi4flash". Errors: Error(format_error,
// "<name>: '<key>' <what is wrong>"); a key whose value the runtime cannot run (a hidden_act other than silu,
// mb_per_layer other than 2, biases the checkpoint does not have) Error(unsupported) naming it too.
Phi4FlashConfig parse_phi4flash_config(const std::string& json_text, const std::string& name = "config.json");
// True when config.json text is a JSON object whose "model_type" is "phi4flash"; false otherwise (not JSON
// included: the format's own parser says why). The load paths' dispatch.
bool is_phi4flash_config(const std::string& json_text);

enum class SambaYLayerKind {
  mamba,              // even i < L/2: Mamba-1 (conv1d + selective scan), its states kept
  memory_mamba,       // i = L/2: the same Mamba; its pre-gate output is the memory of the GMUs
  sliding_attention,  // odd i < L/2: differential attention over the last sliding_window positions
  full_attention,     // i = L/2 + 1: full differential attention; its K/V cache is shared
  gated_memory,       // even i > L/2: GMU out_proj(silu(in_proj(h)) · m), no state
  cross_attention,    // odd i > L/2 + 1: queries only, over layer L/2 + 1's cache, no cache of its own
};
const char* to_string(SambaYLayerKind kind);

// The SambaY layer plan of a config (the ports' rules: remote code _SambaDecoderLayer, TensorRT-LLM
// layers_block_type, mobius layer_types).
struct SambaYPlan {
  std::vector<SambaYLayerKind> kinds;  // per layer
  std::vector<uint32_t> window;        // per layer: sliding_window for sliding_attention layers, else 0
  uint32_t memory_layer = 0;           // L/2
  uint32_t shared_kv_layer = 0;        // L/2 + 1
  uint32_t first_cross_layer = 0;      // L/2 + 2: the cross-decoder (GMU and cross-attention layers) starts here
  uint32_t count(SambaYLayerKind kind) const;
};
SambaYPlan sambay_plan(const Phi4FlashConfig& config);

// The bytes a session's state needs at `tokens` positions, with `elem_bytes` per stored value (2: fp16): the
// full-attention layer's K and V of every position, a window-capped K/V cache per sliding layer, the conv
// state ((d_conv - 1) x d_inner) and the scan state (d_inner x d_state) of each Mamba layer, nothing for the
// cross-decoder (docs/phi4flash.md: the lower bound of the session memory).
struct SambaYStateBytes {
  uint64_t full_kv = 0, sliding_kv = 0, mamba = 0;
  uint64_t total() const { return full_kv + sliding_kv + mamba; }
};
SambaYStateBytes sambay_state_bytes(const Phi4FlashConfig& config, uint64_t tokens, uint32_t elem_bytes);

}  // namespace diffvk
