// SwiGLU activation op and the Gated Memory Unit's gate (shaders/silu_mul.comp).
#pragma once
#include <memory>

#include "ops/kernel_options.hpp"

namespace diffvk {

// The GMU gate's operands (docs/maths.md, Phi-4-mini-flash): g and m each rows of I values at
// row * stride + off + j (elements, storage type), the output a dense rows x I.
struct GmuGateParams {
  uint32_t rows = 0, I = 0;
  uint32_t g_stride = 0, g_off = 0;  // g: the GMU's in_proj output
  uint32_t m_stride = 0, m_off = 0;  // m: the memory (the layer-L/2 scan output, T x d_inner)
};

class SiluMulKernel {
 public:
  SiluMulKernel(Device& device, KernelOptions options);
  // SwiGLU: a = silu(gate) * up, gu = [gate | up] (rows x 2I), a rows x I.
  void record(Program& program, BufferRange gu, BufferRange a, uint32_t rows, uint32_t I) const;
  // The Gated Memory Unit's gate: a[r][j] = silu(g[r][j]) · m[r][j] (the same pipeline as record: record is
  // this with g = m = gu, strides 2I, offsets 0 and I). a must not overlap g or m.
  void record_gmu(Program& program, BufferRange g, BufferRange m, BufferRange a, const GmuGateParams& params) const;
  // Test hook: cap the dispatched workgroup counts (0 = the device limit) to exercise the grid-stride loops.
  void limit_workgroups_for_testing(uint32_t x, uint32_t y) { test_limit_[0] = x, test_limit_[1] = y; }

 private:
  Device& device_;
  uint32_t wg_;
  uint32_t test_limit_[2] = {0, 0};
  std::unique_ptr<LazyPipeline> pipeline_;
};

}  // namespace diffvk
