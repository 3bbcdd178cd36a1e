// Device sampling op (shaders/sample_topk.comp).
#pragma once
#include <memory>

#include "ops/kernel_options.hpp"

namespace diffvk {

// Device sampling (shaders/sample_topk.comp): token[0] = greedy or top-k choice from one logits row.
//   logits: vocab float32 values (in every precision); params: 4 uint32 = {position (unused), u (float bits),
//   temperature (float bits), top_k}; token: 4 bytes (uint32). Greedy when temperature <= 0 or top_k == 0.
class SampleKernel {
 public:
  SampleKernel(Device& device, KernelOptions options);
  void record(Program& program, BufferRange logits, BufferRange params, BufferRange token, uint32_t vocab) const;
  // Whether top_k (1 for greedy) fits the shader (<= kmax) and llvmpipe's loop budget for this vocabulary.
  bool supports(uint32_t vocab, uint32_t top_k) const;
  // The same, before a kernel exists (the workgroup size this device's kernel takes).
  static bool supports(const DeviceCaps& caps, uint32_t vocab, uint32_t top_k);
  static constexpr uint32_t kmax = 64;

 private:
  static bool fits(uint32_t wg, uint32_t vocab, uint32_t top_k);
  Device& device_;
  uint32_t wg_;
  std::unique_ptr<LazyPipeline> pipeline_;
};

}  // namespace diffvk
