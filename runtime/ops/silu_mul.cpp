#include "ops/silu_mul.hpp"

namespace diffvk {

namespace {
struct SiluPush {
  uint32_t rows, I;
};
}  // namespace

SiluMulKernel::SiluMulKernel(Device& device, KernelOptions o) : device_(device) {
  wg_ = pick_pow2_workgroup(device.caps(), 64);
  pipeline_ = std::make_unique<Pipeline>(device, PipelineDesc{"silu_mul", 2, sizeof(SiluPush), {wg_}, false, o.fp16});
}

void SiluMulKernel::record(Program& program, BufferRange gu, BufferRange a, uint32_t rows, uint32_t I) const {
  const uint64_t es = storage_bytes(pipeline_->desc().fp16);
  if (rows == 0 || I == 0) throw Error(Status::invalid_argument, "silu_mul: zero size");
  if (gu.size < uint64_t(rows) * 2 * I * es || a.size < uint64_t(rows) * I * es)
    throw Error(Status::invalid_argument, "silu_mul: buffer too small for the shape");
  SiluPush p{rows, I};
  program.dispatch(*pipeline_, {{gu, Access::read}, {a, Access::write}}, &p, sizeof p,
                   elementwise_grid(device_.caps(), I, wg_, rows), "silu_mul");
}

}  // namespace diffvk
