// SwiGLU activation op (shaders/silu_mul.comp).
#pragma once
#include <memory>

#include "ops/kernel_options.hpp"

namespace diffvk {

// a = silu(gate) * up, gu = [gate | up] (rows x 2I), a rows x I.
class SiluMulKernel {
 public:
  SiluMulKernel(Device& device, KernelOptions options);
  void record(Program& program, BufferRange gu, BufferRange a, uint32_t rows, uint32_t I) const;

 private:
  Device& device_;
  uint32_t wg_;
  std::unique_ptr<Pipeline> pipeline_;
};

}  // namespace diffvk
