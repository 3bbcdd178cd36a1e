#include "ops/head_rmsnorm.hpp"

#include <algorithm>

namespace diffvk {

static_assert(sizeof(HeadRmsNormParams) == 24, "head_rmsnorm.comp's push block (the params are pushed as is)");

HeadRmsNormKernel::HeadRmsNormKernel(Device& device, KernelOptions o) {
  // 64 lanes cover 2D <= 128 in two passes; shared memory use is WG floats.
  wg_ = pick_pow2_workgroup(device.caps(), 64);
  for (uint32_t x32 = 0; x32 < (o.fp16 ? 2u : 1u); ++x32)
    pipeline_[x32] = std::make_unique<LazyPipeline>(
        device,
        kernel_desc("head_rmsnorm", o).with_bindings(3).with_push(sizeof(HeadRmsNormParams)).with_spec({wg_, x32}),
        false);
}

void HeadRmsNormKernel::record(Program& program, BufferRange x, BufferRange w, BufferRange y,
                               const HeadRmsNormParams& p, Elem x_elem) const {
  if (p.rows == 0 || p.heads == 0 || p.width == 0 || p.row_stride < p.heads * p.width)
    throw Error(Status::invalid_argument, "head_rmsnorm: bad shape");
  const bool fp16 = pipeline_[0]->desc().fp16;
  const size_t es = storage_bytes(fp16), xs = elem_bytes(x_elem, fp16);
  const uint64_t elems = uint64_t(p.rows - 1) * p.row_stride + uint64_t(p.heads) * p.width;
  if (x.size < elems * xs || y.size < elems * es || w.size < p.width * es)
    throw Error(Status::invalid_argument, "head_rmsnorm: buffer too small for the shape");
  const LazyPipeline& pl = *pipeline_[fp16 && x_elem == Elem::f32 ? 1 : 0];
  program.dispatch(pl, {{x, Access::read}, {w, Access::read}, {y, Access::write}}, &p, sizeof p, {p.heads, p.rows, 1},
                   "head_rmsnorm");
}

}  // namespace diffvk
