// Mamba-1 causal depthwise conv1d with its rolling state, SiLU fused (shaders/conv1d_state.comp; docs/maths.md
// "Mamba-1 conv1d and selective scan"). Prefill (any T) and decode (T = 1) record the same dispatch.
#pragma once
#include <array>
#include <memory>

#include "ops/kernel_options.hpp"

namespace diffvk {

// x: row t of the input is x[x_offset + t·x_stride, + C) (the first C columns of in_proj's [x | z] rows: stride
// 2C, offset 0), storage type. w: C x K, bias: C (storage type). state: (K − 1) x C float32 in every precision,
// oldest input first, read and updated in place. out: T x C, storage type.
struct Conv1dStateParams {
  uint32_t T = 0, C = 0;
  uint32_t x_stride = 0;        // elements between rows of x; 0: C
  uint32_t x_offset = 0;        // elements before row 0 of x
  bool silu = true;             // out = silu(conv) (Mamba-1), else the conv itself
  uint32_t rows_per_block = 0;  // rows one invocation walks (>= K - 1 where it splits T); 0: conv1d_rows_per_block
};

// Rows per block of a call of T rows (pure): the whole call up to 64 rows (decode, short prefills), else 32 (T = 512
// on C = 5120: 16 blocks x 80 workgroups of 64 channels). Blocks after the first read their K - 1 previous inputs
// from x; only the first touches the state.
uint32_t conv1d_rows_per_block(uint32_t T);

class Conv1dStateKernel : public Pow2WorkgroupKernel {
 public:
  static constexpr uint32_t kMaxWidth = 8;
  // K: the kernel width, 2..kMaxWidth (a specialization constant: one pipeline per width).
  Conv1dStateKernel(Device& device, KernelOptions options, uint32_t K);
  // bias.buffer == VK_NULL_HANDLE: no bias. One dispatch.
  void record(Program& program, const Conv1dStateParams& params, BufferRange x, BufferRange w, BufferRange bias,
              BufferRange state, BufferRange out) const;
  uint32_t width() const { return K_; }
  // limit_workgroups_for_testing: x caps the workgroups over channels, y those over row blocks.

 private:
  uint32_t K_;
};

}  // namespace diffvk
