#include "model/model_kernels.hpp"

namespace diffvk {

ModelKernels build_model_kernels(Device& dev, const ModelConfig& c, const std::vector<QuantType>& quant, const QuantRowPath* quant_path) {
  const KernelOptions ko = KernelOptions::for_device(dev);
  ModelKernels k;
  {
    PipelineGroup g(dev, "linear");
    k.linear = std::make_unique<LinearKernel>(dev, ko, quant);
  }
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
    k.attn = std::make_unique<DiffAttnKernel>(dev, ko, c.head_dim(), c.num_heads / c.num_kv_heads);
  }
  {
    PipelineGroup g(dev, "head_rmsnorm");
    k.norm = std::make_unique<HeadRmsNormKernel>(dev, ko);
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
    k.probs = std::make_unique<AttnProbsKernel>(dev, ko);
  }
  if (!quant.empty()) {
    PipelineGroup g(dev, "linear_quant");
    k.qrow = std::make_unique<QuantRowKernel>(dev, ko, quant, quant_path);
  }
  return k;
}

}  // namespace diffvk
