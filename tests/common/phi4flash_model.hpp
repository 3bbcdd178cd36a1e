// A tiny Phi-4-mini-flash (phi4flash) checkpoint written by the test itself: the tiny fixture's shape
// (tests/data/phi4flash_tiny: 8 layers, every kind, window 5) with another vocabulary and context, every tensor by
// its real name and shape (phi4flash_tensors), seeded uniform F32 values (LayerNorm gains ones). With the o200k-bpe
// tokenizer fixture (vocabulary 868: Phi-4-mini's tokenizer.json structure) it is a model `diffvk chat` can talk to.
#pragma once
#include <cstdint>
#include <random>
#include <string>

#include "model/phi4flash_checkpoint.hpp"
#include "model_fixture.hpp"

namespace diffvk::test {

// The tiny fixture's sizes by default; others (e.g. head_dim 16, whose cache rows of 32 hold Q8_0 blocks) by hand.
struct TinyPhi4FlashShape {
  uint32_t hidden = 32, heads = 8, kv_heads = 4, intermediate = 48;
};

inline std::string tiny_phi4flash_config(uint32_t vocab, uint32_t positions, const TinyPhi4FlashShape& sh = {}) {
  return R"({"model_type": "phi4flash", "architectures": ["Phi4FlashForCausalLM"], "vocab_size": )" +
         std::to_string(vocab) + R"(, "hidden_size": )" + std::to_string(sh.hidden) + R"(, "intermediate_size": )" +
         std::to_string(sh.intermediate) + R"(, "num_hidden_layers": 8, "num_attention_heads": )" +
         std::to_string(sh.heads) + R"(, "num_key_value_heads": )" + std::to_string(sh.kv_heads) +
         R"(, "max_position_embeddings": )" + std::to_string(positions) +
         R"(, "sliding_window": 5, "hidden_act": "silu", "layer_norm_eps": 1e-05,
  "tie_word_embeddings": true, "torch_dtype": "float32", "pad_token_id": 0, "bos_token_id": 1,
  "eos_token_id": 2, "mamba_d_state": 4})";
}

// Writes <dir>/config.json and <dir>/model.safetensors (and copies tokenizer_dir's tokenizer files when given).
inline void write_tiny_phi4flash(const std::string& dir, uint32_t vocab, uint32_t positions, uint64_t seed = 1,
                                 const std::string& tokenizer_dir = "", const TinyPhi4FlashShape& shape = {}) {
  const std::string config = tiny_phi4flash_config(vocab, positions, shape);
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(-0.3f, 0.3f);
  Tensors ts;
  for (const Phi4FlashTensor& t : phi4flash_tensors(parse_phi4flash_config(config))) {
    int64_t n = 1;
    for (int64_t d : t.hf_shape) n *= d;
    std::vector<float> v(size_t(n), 1.0f);
    if (t.hf.find("layernorm.weight") == std::string::npos)
      for (float& x : v) x = u(rng);
    ts[t.hf] = f32_tensor(t.hf_shape, v);
  }
  write_checkpoint(dir, config, ts);
  for (const char* f : {"tokenizer.json", "tokenizer_config.json"})
    if (!tokenizer_dir.empty()) {
      const auto b = read_bytes(tokenizer_dir + "/" + f);
      write_bytes(dir + "/" + f, b.data(), b.size());
    }
}

}  // namespace diffvk::test
