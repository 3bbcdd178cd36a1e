#include "model/model_kernels.hpp"

namespace diffvk {

namespace {
// The attention of the config's DIFF variant: V1's differential softmax pair per head (H heads, n_rep =
// H / Hkv), or V2's one softmax per query head (2H query heads, 2H / Hkv per KV head).
std::unique_ptr<DiffAttnKernel> model_attention(Device& dev, const ModelConfig& c, KvFormat kv) {
  const KernelOptions ko = KernelOptions::for_op(dev, "attention");
  if (c.v2())
    return std::make_unique<DiffAttnKernel>(dev, ko, c.head_dim(), 2 * c.num_heads / c.num_kv_heads, 8, AttnSoftmax::v2,
                                            kv);
  return std::make_unique<DiffAttnKernel>(dev, ko, c.head_dim(), c.num_heads / c.num_kv_heads, 8,
                                          AttnSoftmax::differential, kv);
}
// Phi-4-mini-flash's attention: DIFF V1, D = head_dim, n_rep = num_attention_heads / num_key_value_heads.
std::unique_ptr<DiffAttnKernel> phi4flash_attention(Device& dev, const Phi4FlashConfig& c, KvFormat kv) {
  return std::make_unique<DiffAttnKernel>(dev, KernelOptions::for_op(dev, "attention"), c.head_dim,
                                          c.num_attention_heads / c.num_key_value_heads, 8, AttnSoftmax::differential,
                                          kv);
}
// "linear": the matmul and one-row kernels, with the block formats' pipelines (prefill_path: their matmul's path).
std::unique_ptr<LinearKernel> linear_kernel(Device& dev, const std::vector<QuantType>& quant,
                                            const QuantRowPath* prefill_path) {
  PipelineGroup g(dev, "linear");
  return std::make_unique<LinearKernel>(dev, KernelOptions::for_op(dev, "linear"), quant, false,
                                        quant.empty() ? nullptr : prefill_path);
}
// "linear_quant": the quantized one-row kernel (null without block formats).
std::unique_ptr<QuantRowKernel> quant_row_kernel(Device& dev, const std::vector<QuantType>& quant,
                                                 const QuantRowPath* quant_path) {
  if (quant.empty()) return nullptr;
  PipelineGroup g(dev, "linear_quant");
  return std::make_unique<QuantRowKernel>(dev, KernelOptions::for_op(dev, "linear"), quant, quant_path);
}
}  // namespace

ModelKernels build_model_kernels(Device& dev, const ModelConfig& c, const std::vector<QuantType>& quant,
                                 const QuantRowPath* quant_path, const QuantRowPath* prefill_path) {
  const KernelOptions ko = KernelOptions::for_device(dev);  // the kernels without subgroup variants; the others: for_op
  ModelKernels k;
  k.linear = linear_kernel(dev, quant, prefill_path);
  k.linear->declare_row_widths({c.hidden_size, c.intermediate_size});  // the one-row paths' lane groups (E, I)
  {
    PipelineGroup g(dev, "rope_kv");
    k.rope = std::make_unique<RopeKvKernel>(dev, ko);
  }
  {
    PipelineGroup g(dev, "kv_shift");
    k.shift = std::make_unique<KvShiftKernel>(dev, ko);
  }
  {
    PipelineGroup g(dev, "attention");
    k.attn = model_attention(dev, c, KvFormat::storage);
  }
  {
    PipelineGroup g(dev, "head_rmsnorm");
    k.norm = std::make_unique<HeadRmsNormKernel>(dev, KernelOptions::for_op(dev, "head_rmsnorm"));
  }
  {
    PipelineGroup g(dev, "embed");
    k.embed = std::make_unique<EmbedKernel>(dev, ko, quant);
  }
  {
    PipelineGroup g(dev, "silu_mul");
    k.silu = std::make_unique<SiluMulKernel>(dev, ko);
  }
  {
    PipelineGroup g(dev, "sample");
    k.sample = std::make_unique<SampleKernel>(dev, ko);
  }
  {
    PipelineGroup g(dev, "attn_probs");
    k.probs = std::make_unique<AttnProbsKernel>(dev, KernelOptions::for_op(dev, "attn_probs"));
  }
  k.qrow = quant_row_kernel(dev, quant, quant_path);
  if (k.qrow) k.qrow->declare_row_widths({c.hidden_size, c.intermediate_size});
  return k;
}

void build_kv_q8_kernels(Device& dev, const ModelConfig& c, ModelKernels& k) {
  if (k.attn_q8) return;
  const std::string problem = kv_format_problem(KvFormat::q8_0, c.kv_row());
  if (!problem.empty()) throw Error(Status::invalid_argument, "session: " + problem + " (use the f16 KV cache)");
  const KernelOptions ko = KernelOptions::for_device(dev);
  {
    PipelineGroup g(dev, "rope_kv q8_0");
    k.rope_q8 = std::make_unique<RopeKvKernel>(dev, ko, KvFormat::q8_0);
  }
  {
    PipelineGroup g(dev, "kv_shift q8_0");
    k.shift_q8 = std::make_unique<KvShiftKernel>(dev, ko, KvFormat::q8_0);
  }
  PipelineGroup g(dev, "attention q8_0");
  k.attn_q8 = model_attention(dev, c, KvFormat::q8_0);
}

void build_kv_q8_kernels(Device& dev, const Phi4FlashConfig& c, ModelKernels& k) {
  if (k.attn_q8) return;
  const std::string problem = kv_format_problem(KvFormat::q8_0, 2 * c.head_dim);
  if (!problem.empty()) throw Error(Status::invalid_argument, "phi4flash: " + problem + " (use the f16 KV cache)");
  {
    PipelineGroup g(dev, "rope_kv q8_0");
    k.rope_q8 = std::make_unique<RopeKvKernel>(dev, KernelOptions::for_device(dev), KvFormat::q8_0);
  }
  PipelineGroup g(dev, "attention q8_0");
  k.attn_q8 = phi4flash_attention(dev, c, KvFormat::q8_0);
}

void build_sambay_kernels(Device& dev, uint32_t conv_width, uint32_t d_state, ModelKernels& k) {
  if (k.scan) return;
  const KernelOptions ko = KernelOptions::for_device(dev);
  {
    PipelineGroup g(dev, "conv1d_state");
    k.conv = std::make_unique<Conv1dStateKernel>(dev, ko, conv_width);
  }
  {
    PipelineGroup g(dev, "selective_scan");
    k.scan = std::make_unique<SelectiveScanKernel>(dev, ko, d_state);
  }
  PipelineGroup g(dev, "layer_norm");
  k.layer_norm = std::make_unique<LayerNormKernel>(dev, KernelOptions::for_op(dev, "layer_norm"));
}

ModelKernels build_phi4flash_kernels(Device& dev, const Phi4FlashConfig& c, const std::vector<QuantType>& quant,
                                     const QuantRowPath* quant_path, const QuantRowPath* prefill_path) {
  const KernelOptions ko = KernelOptions::for_device(dev);
  ModelKernels k;
  k.linear = linear_kernel(dev, quant, prefill_path);
  k.qrow = quant_row_kernel(dev, quant, quant_path);  // one-row passes (decode, YOCO's last row)
  {
    PipelineGroup g(dev, "rope_kv");
    k.rope = std::make_unique<RopeKvKernel>(dev, ko);
  }
  {
    PipelineGroup g(dev, "attention");
    k.attn = phi4flash_attention(dev, c, KvFormat::storage);
  }
  {
    PipelineGroup g(dev, "embed");
    k.embed = std::make_unique<EmbedKernel>(dev, ko, quant);
  }
  {
    PipelineGroup g(dev, "silu_mul");
    k.silu = std::make_unique<SiluMulKernel>(dev, ko);
  }
  {
    PipelineGroup g(dev, "sample");
    k.sample = std::make_unique<SampleKernel>(dev, ko);  // Session::decode_sample (after the head's LayerNorm)
  }
  build_sambay_kernels(dev, c.mamba_d_conv, c.mamba_d_state, k);
  return k;
}

}  // namespace diffvk
