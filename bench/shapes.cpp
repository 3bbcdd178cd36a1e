// diffvk_bench: the published shapes of `diffvk bench --shape` (bench/shapes.hpp).
#include "bench/shapes.hpp"

#include "diffvk/error.hpp"

namespace diffvk::bench {

const std::vector<PublishedShape>& published_shapes() {
  static const std::vector<PublishedShape> shapes = {
      // Hugging Face DiffLlama (model_type "diffllama"): 16 layers, hidden 2048, 32 query heads of 64 (16
      // differential heads of 2 x 64), 8 KV heads, intermediate 8192, vocabulary 128256, tied, Llama 3 RoPE scaling.
      {"diffllama-1b", "kajuma/DiffLlama-0.3B-handcut (config.json)",
       R"({"model_type": "diffllama", "architectures": ["DiffLlamaForCausalLM"], "hidden_size": 2048,
           "intermediate_size": 8192, "num_hidden_layers": 16, "num_attention_heads": 32, "num_key_value_heads": 8,
           "head_dim": 64, "vocab_size": 128256, "max_position_embeddings": 131072, "rms_norm_eps": 1e-05,
           "rope_theta": 500000.0, "tie_word_embeddings": true, "hidden_act": "silu", "attention_bias": false,
           "lambda_std_dev": 0.1, "torch_dtype": "bfloat16", "bos_token_id": 128000, "eos_token_id": 128001,
           "rope_scaling": {"factor": 32.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
                            "original_max_position_embeddings": 8192, "rope_type": "llama3"}})",
       ""},
      // microsoft/Phi-4-mini-flash-reasoning (model_type "phi4flash", SambaY): the published config.json's keys; the
      // Mamba sizes it omits take the config class's defaults (docs/phi4flash.md).
      {"phi4-mini-flash", "microsoft/Phi-4-mini-flash-reasoning (config.json)",
       R"({"architectures": ["Phi4FlashForCausalLM"], "model_type": "phi4flash", "vocab_size": 200064,
           "hidden_size": 2560, "intermediate_size": 10240, "num_hidden_layers": 32, "num_attention_heads": 40,
           "num_key_value_heads": 20, "max_position_embeddings": 262144, "sliding_window": 512,
           "hidden_act": "silu", "layer_norm_eps": 1e-05, "tie_word_embeddings": true, "torch_dtype": "bfloat16",
           "pad_token_id": 0, "bos_token_id": 1, "eos_token_id": 2})",
       ""},
  };
  return shapes;
}

const PublishedShape& published_shape(const std::string& name) {
  std::string known;
  for (const auto& s : published_shapes()) {
    if (s.name == name) {
      if (!s.refusal.empty()) throw Error(Status::unsupported, "bench --shape " + name + ": " + s.refusal);
      return s;
    }
    known += (known.empty() ? "" : ", ") + s.name;
  }
  throw Error(Status::invalid_argument, "bench: unknown shape '" + name + "' (known: " + known + ")");
}

}  // namespace diffvk::bench
