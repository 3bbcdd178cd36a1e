// LayerNorm with bias op (shaders/layer_norm.comp).
#pragma once
#include <memory>

#include "ops/kernel_options.hpp"

namespace diffvk {

// LayerNorm with bias (docs/maths.md, LayerNorm; torch.nn.LayerNorm): each of `rows` rows of `width` values,
//   y = (x − mean) / sqrt(var + eps) ⊙ w + b,   var the biased variance,
// statistics in fp32 (two centred passes, so a large mean loses no precision). x: rows x x_stride, y: rows x
// y_stride (elements; stride >= width), w and b: width values.
struct LayerNormParams {
  uint32_t rows = 0, width = 0, x_stride = 0, y_stride = 0;
  float eps = 1e-5f;
};
class LayerNormKernel {
 public:
  LayerNormKernel(Device& device, KernelOptions options);
  // x_elem: x's element type (Elem::f32 for the model's residual stream); w, b and y are storage type.
  // b.buffer == VK_NULL_HANDLE: no bias. y must not overlap x, w or b.
  void record(Program& program, BufferRange x, BufferRange w, BufferRange b, BufferRange y,
              const LayerNormParams& params, Elem x_elem = Elem::storage) const;
  uint32_t workgroup_size() const { return wg_; }
  // Test hook: cap the dispatched workgroup count (0 = the device limit) to exercise the rows' grid-stride loop.
  void limit_workgroups_for_testing(uint32_t x) { test_limit_ = x; }

 private:
  const Device& device_;
  uint32_t wg_;
  uint32_t test_limit_ = 0;
  std::unique_ptr<LazyPipeline> pipeline_[2];  // [x float32] (fp16 devices only; [1] is [0] otherwise)
};

}  // namespace diffvk
