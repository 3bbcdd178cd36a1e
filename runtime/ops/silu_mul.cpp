#include "ops/silu_mul.hpp"

#include <algorithm>
#include <string>

namespace diffvk {

namespace {
struct SiluPush {
  uint32_t rows = 0, I = 0, g_stride = 0, g_off = 0, m_stride = 0, m_off = 0;
};
static_assert(sizeof(SiluPush) == 24, "silu_mul.comp's push block");
}  // namespace

SiluMulKernel::SiluMulKernel(Device& device, KernelOptions o) : device_(device) {
  wg_ = pick_pow2_workgroup(device.caps(), 64);
  pipeline_ = std::make_unique<LazyPipeline>(device,
                                             PipelineDesc{"silu_mul"}
                                                 .with_bindings(3)
                                                 .with_push(sizeof(SiluPush))
                                                 .with_spec({wg_})
                                                 .with_subgroup(false)
                                                 .with_fp16(o.fp16),
                                             false);
}

void SiluMulKernel::record(Program& program, BufferRange gu, BufferRange a, uint32_t rows, uint32_t I) const {
  const uint64_t es = storage_bytes(pipeline_->desc().fp16);
  if (rows == 0 || I == 0) throw Error(Status::invalid_argument, "silu_mul: zero size");
  if (gu.size < uint64_t(rows) * 2 * I * es || a.size < uint64_t(rows) * I * es)
    throw Error(Status::invalid_argument, "silu_mul: buffer too small for the shape");
  if (uint64_t(rows) * 2 * I > UINT32_MAX)
    throw Error(Status::invalid_argument, "silu_mul: tensor too large for 32-bit element indices");
  GmuGateParams gate;
  gate.rows = rows;
  gate.I = I;
  gate.g_stride = 2 * I;
  gate.g_off = 0;
  gate.m_stride = 2 * I;
  gate.m_off = I;
  record_gmu(program, gu, gu, a, gate);
}

void SiluMulKernel::record_gmu(Program& program, BufferRange g, BufferRange m, BufferRange a,
                               const GmuGateParams& p) const {
  const uint64_t es = storage_bytes(pipeline_->desc().fp16);
  if (p.rows == 0 || p.I == 0) throw Error(Status::invalid_argument, "silu_mul: zero size");
  if (p.g_stride < p.I || p.m_stride < p.I)
    throw Error(Status::invalid_argument, "silu_mul: row stride below the row width");
  const uint64_t g_elems = uint64_t(p.rows - 1) * p.g_stride + p.g_off + p.I;
  const uint64_t m_elems = uint64_t(p.rows - 1) * p.m_stride + p.m_off + p.I;
  const uint64_t a_elems = uint64_t(p.rows) * p.I;
  if (std::max({g_elems, m_elems, a_elems}) > UINT32_MAX)
    throw Error(Status::invalid_argument, "silu_mul: tensor too large for 32-bit element indices");
  if (g.size < g_elems * es || m.size < m_elems * es || a.size < a_elems * es)
    throw Error(Status::invalid_argument, "silu_mul: buffer too small for the shape");
  if (ranges_overlap(a, g) || ranges_overlap(a, m))
    throw Error(Status::invalid_argument, "silu_mul: the output overlaps an input");
  SiluPush push;
  push.rows = p.rows;
  push.I = p.I;
  push.g_stride = p.g_stride;
  push.g_off = p.g_off;
  push.m_stride = p.m_stride;
  push.m_off = p.m_off;
  std::array<uint32_t, 3> grid = elementwise_grid(device_.caps(), p.I, wg_, p.rows);
  if (test_limit_[0]) grid[0] = std::min(grid[0], test_limit_[0]);
  if (test_limit_[1]) grid[1] = std::min(grid[1], test_limit_[1]);
  program.dispatch(*pipeline_, {{g, Access::read}, {m, Access::read}, {a, Access::write}}, &push, sizeof push, grid,
                   "silu_mul");
}

}  // namespace diffvk
