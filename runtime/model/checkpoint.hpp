// A checkpoint directory as row sources of the runtime's weights (nothing converted yet: the weights
// stream in at upload, runtime/model/weight_store.cpp). Two formats:
//  - native (docs/maths.md names, model.safetensors): runtime/model/checkpoint_native.cpp;
//  - Hugging Face DiffLlama (model_type "diffllama", single or sharded safetensors):
//    runtime/model/hf_loader.cpp maps the names and permutes rows into the runtime's head layout.
// Phi-4-mini-flash (model_type "phi4flash") has its own structure (model/phi4flash_checkpoint.hpp): every opener
// returns it in Checkpoint::phi4flash, and Model::load runs it through model/phi4flash_forward.hpp.
#pragma once
#include <array>
#include <memory>
#include <string>
#include <vector>

#include "diffvk/model.hpp"
#include "io/weight_source.hpp"
#include "model/phi4flash_checkpoint.hpp"

namespace diffvk {

struct CheckpointLayer {
  WeightSource attn_norm, wqkv, wo, subln, ffn_norm, wgu, wdown;
  std::array<std::vector<float>, 4> lambda;  // lambda_q1, lambda_k1, lambda_q2, lambda_k2 (D each)
};

struct Checkpoint {
  ModelConfig config;
  std::vector<std::unique_ptr<SafetensorsFile>> files;  // mapped; the sources point into them
  std::unique_ptr<GgufFile> gguf;                       // a .gguf checkpoint (mapped); the sources point into it
  WeightSource embed, norm, lm_head;                    // lm_head has no rows when tied
  std::vector<CheckpointLayer> layers;
  // A Phi-4-mini-flash checkpoint (everything above unused but config.format = "phi4flash").
  std::unique_ptr<Phi4FlashCheckpoint> phi4flash;
};
// Wraps a read and verified Phi-4-mini-flash checkpoint.
Checkpoint phi4flash_as_checkpoint(Phi4FlashCheckpoint ck);

// A path ending in ".gguf" is a GGUF file written by diffvk quantize (docs/gguf.md): open_gguf_checkpoint.
// Otherwise reads <dir>/config.json and opens the checkpoint in whichever format it declares (model_type).
Checkpoint open_checkpoint(const std::string& dir);

// A diffllama GGUF file: the config from its diffllama.* keys (checked by parse_model_config's rules), F32/F16/BF16
// tensors. Q8_0/Q4_0 tensors are refused (invalid_argument): the quantized kernels do not exist yet.
Checkpoint open_gguf_checkpoint(const std::string& path);
// The same from an open GGUF file (memory, descriptors): the checkpoint keeps it alive.
Checkpoint open_gguf_checkpoint(std::unique_ptr<GgufFile> file);
// The config.json a diffvk GGUF's metadata stands for (diffllama: the native format's keys; phi4flash: Hugging
// Face's), unchecked: what model_config_text gives for a .gguf. Refuses another general.architecture.
std::string gguf_config_json(const GgufFile& f);

// Native format: `config` parsed from config.json.
Checkpoint open_native_checkpoint(const std::string& dir, ModelConfig config);
// Native format from an open safetensors file (memory, descriptors): the checkpoint keeps it alive.
Checkpoint open_native_checkpoint(std::unique_ptr<SafetensorsFile> file, ModelConfig config);

// Hugging Face DiffLlama.
// True for a top-level "model_type" == "diffllama", false without model_type; unsupported for any other model_type.
bool is_hf_diffllama(const std::string& config_text);
// config.json of a DiffLlama checkpoint -> the runtime's config (H = num_attention_heads / 2; errors name
// the Hugging Face key). Pure: tested without a device, and by tests/fuzz if it is listed there.
ModelConfig parse_hf_config(const std::string& json_text, const std::string& name);
Checkpoint open_hf_checkpoint(const std::string& dir, ModelConfig config);

// Seeded random weights in the config's exact shape (DIFF V1 or V2; runtime/model/checkpoint_synthetic.cpp): row
// sources generated as they stream to the device, no file. The same seed gives the same weights.
Checkpoint synthetic_checkpoint(ModelConfig config, uint64_t seed);
// The same for a Phi-4-mini-flash config: every tensor of phi4flash_tensors, by its real name.
Phi4FlashCheckpoint synthetic_phi4flash_checkpoint(Phi4FlashConfig config, uint64_t seed);

// RoPE inverse frequencies theta^(-2i/D), i < D/2, after the config's frequency scaling (llama3).
std::vector<double> rope_inv_freq(const ModelConfig& config);

}  // namespace diffvk
