#include "ops/conv1d_state.hpp"

#include <algorithm>
#include <string>

namespace diffvk {

namespace {
struct ConvPush {
  uint32_t T = 0, C = 0, x_stride = 0, x_off = 0, has_bias = 0, silu = 0, L = 0, blocks = 0;
};
static_assert(sizeof(ConvPush) == 32, "conv1d_state.comp's push block");
}  // namespace

uint32_t conv1d_rows_per_block(uint32_t T) { return T <= 64 ? T : 32; }

Conv1dStateKernel::Conv1dStateKernel(Device& device, KernelOptions o, uint32_t K) : Pow2WorkgroupKernel(device), K_(K) {
  if (K < 2 || K > kMaxWidth)
    throw Error(Status::invalid_argument,
                "conv1d_state: kernel width " + std::to_string(K) + " outside 2.." + std::to_string(kMaxWidth));
  declare(PipelineDesc{"conv1d_state"}.with_bindings(5).with_push(sizeof(ConvPush)).with_spec({wg_, K}), o);
}

void Conv1dStateKernel::record(Program& program, const Conv1dStateParams& p, BufferRange x, BufferRange w,
                               BufferRange bias, BufferRange state, BufferRange out) const {
  const uint64_t es = storage_bytes(pipeline_->desc().fp16);
  const uint64_t stride = p.x_stride ? p.x_stride : p.C;
  if (p.T == 0 || p.C == 0) throw Error(Status::invalid_argument, "conv1d_state: zero size");
  if (stride < p.C) throw Error(Status::invalid_argument, "conv1d_state: x_stride smaller than C");
  const uint64_t x_elems = p.x_offset + (uint64_t(p.T) - 1) * stride + p.C;
  if (x_elems > UINT32_MAX || uint64_t(p.T) * p.C > UINT32_MAX)
    throw Error(Status::invalid_argument, "conv1d_state: more than 2^32 elements");
  const bool has_bias = bias.buffer != VK_NULL_HANDLE;
  if (x.size < x_elems * es || w.size < uint64_t(p.C) * K_ * es || (has_bias && bias.size < uint64_t(p.C) * es) ||
      state.size < uint64_t(K_ - 1) * p.C * 4 || out.size < uint64_t(p.T) * p.C * es)
    throw Error(Status::invalid_argument, "conv1d_state: buffer too small for the shape");
  const uint32_t L = std::min(p.T, p.rows_per_block ? p.rows_per_block : conv1d_rows_per_block(p.T));
  if (L < p.T && L < K_ - 1)
    throw Error(Status::invalid_argument, "conv1d_state: rows_per_block " + std::to_string(L) +
                                              " below K - 1 (the blocks after the first read K - 1 rows before them)");
  const uint32_t blocks = (p.T + L - 1) / L;
  ConvPush push;
  push.T = p.T;
  push.C = p.C;
  push.x_stride = uint32_t(stride);
  push.x_off = p.x_offset;
  push.has_bias = has_bias ? 1u : 0u;
  push.silu = p.silu ? 1u : 0u;
  push.L = L;
  push.blocks = blocks;
  auto grid = elementwise_grid(device_.caps(), p.C, wg_, blocks);
  if (test_limit_[0]) grid[0] = std::min(grid[0], test_limit_[0]);
  if (test_limit_[1]) grid[1] = std::min(grid[1], test_limit_[1]);
  program.dispatch(*pipeline_,
                   {{x, Access::read},
                    {w, Access::read},
                    {has_bias ? bias : device_.zero_range(), Access::read},
                    {state, Access::read_write},
                    {out, Access::write}},
                   &push, sizeof push, grid, "conv1d_state");
}

}  // namespace diffvk
