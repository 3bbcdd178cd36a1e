// A Phi-4-mini-flash (model_type "phi4flash", SambaY) checkpoint as row sources of every tensor its layers need
// (io/weight_source.hpp: nothing is converted until upload). Two formats, one table of tensors:
//  - the Hugging Face directory as published: config.json + model.safetensors, or shards named by
//    model.safetensors.index.json (the remote code's tensor names, docs/checkpoints.md); also one safetensors file
//    in memory or behind a descriptor, with the config.json text;
//  - a phi4flash GGUF file written by diffvk quantize (docs/gguf.md), F32/F16/BF16 and Q8_0/Q4_0 tensors.
// Every expected tensor must be present with its exact shape and a float dtype (each tensor its own), nothing else
// may be: errors name the file and the tensor. Every load path returns it in Checkpoint::phi4flash
// (model/checkpoint.hpp); Model::load uploads it and its sessions run it (model/phi4flash_forward.hpp).
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "io/gguf.hpp"
#include "io/safetensors.hpp"
#include "io/weight_source.hpp"
#include "model/phi4flash_config.hpp"

namespace diffvk {

// One layer's sources. A field that the layer's kind does not have has no spans (rows() == 0). A vector is rows of 1
// element (WeightSource's convention for norms); a matrix is [rows, cols] row-major as the checkpoint stores it.
// C = d_inner, S = d_state, R = dt_rank, K = d_conv, D = head_dim, q = num_attention_heads·D,
// kv = num_key_value_heads·D.
struct Phi4FlashLayer {
  SambaYLayerKind kind = SambaYLayerKind::mamba;
  // Every layer: LayerNorm with bias before the mixer and before the MLP, the MLP (fc2(up · silu(gate))).
  WeightSource ln1_w, ln1_b;  // input_layernorm (E)
  WeightSource ln2_w, ln2_b;  // post_attention_layernorm (E)
  WeightSource fc1;           // (2I, E) = [gate; up], no bias
  WeightSource fc2;           // (E, I), no bias
  // Mamba (mamba, memory_mamba): in_proj (2C, E) = [x; z]; GMU (gated_memory): in_proj (C, E).
  WeightSource in_proj;
  WeightSource conv_w;  // (C, K): conv1d.weight [C, 1, K], one depthwise filter per channel (rows of K)
  WeightSource conv_b;  // (C)
  WeightSource x_proj;  // (R + 2S, C) = [dt; B; C]
  WeightSource dt_w;    // dt_proj.weight (C, R)
  WeightSource dt_b;    // dt_proj.bias (C)
  WeightSource A_log;   // (C, S): the full matrix (original Mamba-1 scan; A = -exp(A_log))
  WeightSource D;       // (C): the skip
  // Mamba and GMU: out_proj (E, C), no bias. Attention: out_proj (E, q) with out_b (E).
  WeightSource out_proj, out_b;
  // Attention (sliding, full): Wqkv (q + 2kv, E) = [q; k; v] with its bias; cross-attention: (q, E), queries only.
  WeightSource wqkv, wqkv_b;
  WeightSource lambda_q1, lambda_k1, lambda_q2, lambda_k2;  // (D) each
  WeightSource subln;                                       // (2D): the headwise RMSNorm's gain
};

struct Phi4FlashCheckpoint {
  Phi4FlashConfig config;
  SambaYPlan plan;                                      // sambay_plan(config): layers[i].kind == plan.kinds[i]
  std::vector<std::unique_ptr<SafetensorsFile>> files;  // mapped; the sources point into them
  std::unique_ptr<GgufFile> gguf;                       // or a .gguf (mapped or in memory)
  WeightSource embed;                                   // (vocab, E); also the LM head when tied
  WeightSource final_w, final_b;                        // final_layernorm (E)
  WeightSource lm_head;                                 // (vocab, E) when untied; no rows when tied
  std::vector<Phi4FlashLayer> layers;
  size_t tensors = 0;  // tensors read (for messages)
};

// How a tensor is stored in a GGUF file (docs/gguf.md): the linears in the asked type (F16, Q8_0, Q4_0; F16 where
// the input width is not a multiple of 32), the LM head (and a tied embedding) Q8_0 under Q4_0, the small linears
// (x_proj, dt_proj) F16, every vector and the conv filters F32.
enum class Phi4FlashStore { f32, f16, linear, head };

// One tensor of the format: its names, its shapes and its source in a checkpoint.
struct Phi4FlashTensor {
  std::string hf, gguf;           // "model.layers.0.attn.in_proj.weight", "blk.0.ssm_in.weight"
  std::vector<int64_t> hf_shape;  // as safetensors stores it (conv1d.weight: [C, 1, K])
  std::vector<int64_t> shape;     // rows-major [rows, cols] or [n]: the source's and the GGUF tensor's shape
  int layer = -1;                 // -1: not a layer's
  WeightSource Phi4FlashLayer::*field = nullptr;     // a layer's source
  WeightSource Phi4FlashCheckpoint::*top = nullptr;  // or the checkpoint's
  Phi4FlashStore store = Phi4FlashStore::f32;
  WeightSource& source(Phi4FlashCheckpoint& ck) const;
};
// Every tensor of a config, in file order (embedding, layers in order, final norm, lm_head when untied).
std::vector<Phi4FlashTensor> phi4flash_tensors(const Phi4FlashConfig& config);

// <dir>/config.json (parse_phi4flash_config) and its safetensors (single or sharded).
Phi4FlashCheckpoint open_phi4flash_checkpoint(const std::string& dir);
// One safetensors file (memory, descriptors) with its parsed config: the checkpoint keeps the file alive.
Phi4FlashCheckpoint open_phi4flash_checkpoint(std::unique_ptr<SafetensorsFile> file, Phi4FlashConfig config);
// A phi4flash GGUF file (general.architecture "phi4flash"; keys and names: docs/gguf.md).
Phi4FlashCheckpoint open_phi4flash_gguf(const std::string& path);
Phi4FlashCheckpoint open_phi4flash_gguf(std::unique_ptr<GgufFile> file);
// The config.json its phi4flash.* keys stand for (parse_phi4flash_config checks it; open_phi4flash_gguf renames the
// keys in its messages).
std::string phi4flash_gguf_config_json(const GgufFile& f);

// True when `path` is a phi4flash checkpoint: a .gguf whose general.architecture is "phi4flash", or a directory
// whose config.json has model_type "phi4flash". False when it is anything else or cannot be read (the format's
// own reader then says why).
bool is_phi4flash_path(const std::string& path);

// All rows of a source as fp32 (exact from F32/F16/BF16; Q8_0/Q4_0 dequantized): the host's view of a vector
// (λ, for the layer's scalar λ) or of a small tensor.
std::vector<float> source_floats(const WeightSource& w);

}  // namespace diffvk
