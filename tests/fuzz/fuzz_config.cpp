// libFuzzer harness for parse_model_config (runtime/model/model_config.cpp): config.json text.
// Any input must either parse or throw diffvk::Error(format_error); an accepted config must satisfy
// every invariant the model loader relies on.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "diffvk/model.hpp"

using namespace diffvk;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  ModelConfig c;
  try {
    c = parse_model_config(std::string(reinterpret_cast<const char*>(data), size), "fuzz/config.json");
  } catch (const Error& e) {
    if (e.status() != Status::format_error) {
      std::fprintf(stderr, "fuzz_config: rejected with status %d, not format_error: %s\n", int(e.status()), e.what());
      std::abort();
    }
    return 0;
  }
  const bool ok = c.vocab_size >= 256 && c.hidden_size >= 2 && c.num_layers >= 1 && c.num_heads >= 1 &&
                  c.num_kv_heads >= 1 && c.intermediate_size >= 1 && c.max_position_embeddings >= 1 &&
                  c.hidden_size % (2 * c.num_heads) == 0 && c.num_heads % c.num_kv_heads == 0 &&
                  c.head_dim() >= 2 && c.head_dim() % 2 == 0 && c.rope_theta > 0 && c.rms_norm_eps > 0 &&
                  c.rms_norm_eps < 1 && c.tokenizer == "bytes" && c.bos_token_id >= -1 &&
                  c.bos_token_id < int64_t(c.vocab_size) && c.eos_token_id >= -1 && c.eos_token_id < int64_t(c.vocab_size);
  if (!ok) {
    std::fprintf(stderr, "fuzz_config: accepted a config that breaks an invariant\n");
    std::abort();
  }
  return 0;
}
