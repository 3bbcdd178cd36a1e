// Headwise RMSNorm op (shaders/head_rmsnorm.comp).
#pragma once
#include <memory>

#include "ops/kernel_options.hpp"

namespace diffvk {

// Headwise RMSNorm (docs/maths.md, headwise RMSNorm): x, y: rows x row_stride, head h at columns [h*width,
// (h+1)*width); w: width.
struct HeadRmsNormParams {
  uint32_t rows = 0, heads = 0, width = 0, row_stride = 0;
  float gain = 1.0f;  // 1 - lambda_init
  float eps = 1e-5f;
};
class HeadRmsNormKernel {
 public:
  HeadRmsNormKernel(Device& device, KernelOptions options);
  // x_elem: x's element type (Elem::f32 for the model's residual stream); w and y are storage type.
  void record(Program& program, BufferRange x, BufferRange w, BufferRange y, const HeadRmsNormParams& params,
              Elem x_elem = Elem::storage) const;
  uint32_t workgroup_size() const { return wg_; }

 private:
  uint32_t wg_;
  std::unique_ptr<LazyPipeline> pipeline_[2];  // [x float32] (fp16 devices only; [1] is [0] otherwise)
};

}  // namespace diffvk
