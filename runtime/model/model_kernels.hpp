// The kernels a Model builds (and so every pipeline a model needs), apart from its weights: Model::load
// uses this, and `diffvk shader-stats` builds the same set on a device that allocates nothing.
#pragma once
#include <memory>

#include "diffvk/model.hpp"
#include "model/phi4flash_config.hpp"
#include "ops/attn_probs.hpp"
#include "ops/conv1d_state.hpp"
#include "ops/diff_attn.hpp"
#include "ops/embed.hpp"
#include "ops/head_rmsnorm.hpp"
#include "ops/kv_shift.hpp"
#include "ops/layer_norm.hpp"
#include "ops/linear.hpp"
#include "ops/linear_quant.hpp"
#include "ops/rope_kv.hpp"
#include "ops/sample.hpp"
#include "ops/selective_scan.hpp"
#include "ops/silu_mul.hpp"

namespace diffvk {
static_assert(kAttentionMapMaxTokens == kAttnProbsMaxTokens, "the public attention-map limit is the kernel's");

struct ModelKernels {
  std::unique_ptr<LinearKernel> linear;
  std::unique_ptr<RopeKvKernel> rope;
  std::unique_ptr<KvShiftKernel> shift;  // context shift (Session::shift)
  std::unique_ptr<DiffAttnKernel> attn;
  std::unique_ptr<HeadRmsNormKernel> norm;
  std::unique_ptr<EmbedKernel> embed;
  std::unique_ptr<SiluMulKernel> silu;
  std::unique_ptr<SampleKernel> sample;    // greedy / top-k on the device
  std::unique_ptr<AttnProbsKernel> probs;  // debug: attention maps (Session::attention_maps)
  // Quantized weights, built only for the formats the model's weights use (null otherwise).
  std::unique_ptr<QuantRowKernel> qrow;  // decode: the one-row linear over Q8_0 / Q4_0 blocks
  // The Q8_0 KV cache: the append and the attention over Q8_0 blocks, built by
  // build_kv_q8_kernels when the first session asks for one (null until then).
  std::unique_ptr<RopeKvKernel> rope_q8;
  std::unique_ptr<DiffAttnKernel> attn_q8;
  std::unique_ptr<KvShiftKernel> shift_q8;
  const KvShiftKernel& shift_for(KvFormat f) const { return f == KvFormat::q8_0 ? *shift_q8 : *shift; }
  const RopeKvKernel& rope_for(KvFormat f) const { return f == KvFormat::q8_0 ? *rope_q8 : *rope; }
  const DiffAttnKernel& attn_for(KvFormat f) const { return f == KvFormat::q8_0 ? *attn_q8 : *attn; }
  // SambaY (Phi-4-mini-flash, docs/phi4flash.md) only, built by build_sambay_kernels (null for DIFF Transformer
  // models): the Mamba-1 causal conv1d with its rolling state, the selective scan, the LayerNorm with bias. The GMU
  // gate is silu's record_gmu, the sliding-window and cross-decoder attention are attn's windowed calls.
  std::unique_ptr<Conv1dStateKernel> conv;
  std::unique_ptr<SelectiveScanKernel> scan;
  std::unique_ptr<LayerNormKernel> layer_norm;
};

// Creates every kernel (pipelines only: no buffer) for a validated config (parse_model_config) on
// `device`, with the device's precision and subgroup options. Pipelines are labelled (PipelineGroup)
// by kernel: "linear", "rope_kv", "kv_shift", "attention", "head_rmsnorm", "embed", "silu_mul", "sample", "attn_probs",
// and, for each block-quantized format in `quant` (q8_0 / q4_0), "linear_quant" (and the quantized
// pipelines of "linear").
// quant_path: the quantized one-row kernel's path (nullptr: choose_quant_row_path's choice for the device);
// prefill_path: the quantized matmul's (LinearKernel::record_quant; nullptr: choose_quant_matmul_path's choice).
ModelKernels build_model_kernels(Device& device, const ModelConfig& config, const std::vector<QuantType>& quant = {},
                                 const QuantRowPath* quant_path = nullptr, const QuantRowPath* prefill_path = nullptr);
// Adds the Q8_0 KV-cache kernels ("rope_kv q8_0", "attention q8_0") to k, once; invalid_argument when the
// config's cache rows cannot hold Q8_0 blocks (kv_format_problem).
void build_kv_q8_kernels(Device& device, const ModelConfig& config, ModelKernels& k);
// The same for a Phi-4-mini-flash model (its rings and shared cache; no context shift, so no "kv_shift q8_0").
void build_kv_q8_kernels(Device& device, const Phi4FlashConfig& config, ModelKernels& k);
// Adds SambaY's own kernels to k, once: "conv1d_state" (kernel width conv_width), "selective_scan" (d_state states),
// "layer_norm". invalid_argument (the kernels' message) for a width or state count they do not support.
void build_sambay_kernels(Device& device, uint32_t conv_width, uint32_t d_state, ModelKernels& k);
// The kernels of a Phi-4-mini-flash (SambaY) forward pass (model/phi4flash_forward.hpp): "linear", "rope_kv" (its
// no-rotation append), "attention" (DIFF V1, D = head_dim, n_rep = num_attention_heads / num_key_value_heads),
// "embed", "silu_mul" (SwiGLU and the GMU gate), and build_sambay_kernels' conv1d_state, selective_scan and
// layer_norm. No RMSNorm kernel: every norm of the model is a LayerNorm with bias.
// quant, quant_path, prefill_path: as build_model_kernels' (the quantized linears' kernels, "linear_quant").
ModelKernels build_phi4flash_kernels(Device& device, const Phi4FlashConfig& config,
                                     const std::vector<QuantType>& quant = {}, const QuantRowPath* quant_path = nullptr,
                                     const QuantRowPath* prefill_path = nullptr);

}  // namespace diffvk
