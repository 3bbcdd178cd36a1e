#include "ops/layer_norm.hpp"

#include <algorithm>

namespace diffvk {

namespace {
struct LayerNormPush {
  uint32_t rows = 0, width = 0, x_stride = 0, y_stride = 0;
  float eps = 0.0f;
  uint32_t has_bias = 0;
};
static_assert(sizeof(LayerNormPush) == 24, "layer_norm.comp's push block");
}  // namespace

LayerNormKernel::LayerNormKernel(Device& device, KernelOptions o) : device_(device) {
  // 128 lanes: a 2560-wide row (Phi-4-mini-flash) is 20 loads per lane and pass; shared memory is WG floats.
  wg_ = pick_pow2_workgroup(device.caps(), 128);
  for (uint32_t x32 = 0; x32 < (o.fp16 ? 2u : 1u); ++x32)
    pipeline_[x32] = std::make_unique<LazyPipeline>(
        device, kernel_desc("layer_norm", o).with_bindings(4).with_push(sizeof(LayerNormPush)).with_spec({wg_, x32}),
        false);
}

void LayerNormKernel::record(Program& program, BufferRange x, BufferRange w, BufferRange b, BufferRange y,
                             const LayerNormParams& p, Elem x_elem) const {
  if (p.rows == 0 || p.width == 0 || p.x_stride < p.width || p.y_stride < p.width)
    throw Error(Status::invalid_argument, "layer_norm: bad shape (zero size or row stride below the width)");
  if (!(p.eps >= 0.0f)) throw Error(Status::invalid_argument, "layer_norm: eps must be a non-negative number");
  const bool fp16 = pipeline_[0]->desc().fp16, has_bias = b.buffer != VK_NULL_HANDLE;
  const uint64_t es = storage_bytes(fp16), xs = elem_bytes(x_elem, fp16);
  const uint64_t x_elems = uint64_t(p.rows - 1) * p.x_stride + p.width;
  const uint64_t y_elems = uint64_t(p.rows - 1) * p.y_stride + p.width;
  if (std::max(x_elems, y_elems) > UINT32_MAX)
    throw Error(Status::invalid_argument, "layer_norm: tensor too large for 32-bit element indices");
  if (x.size < x_elems * xs || y.size < y_elems * es || w.size < p.width * es || (has_bias && b.size < p.width * es))
    throw Error(Status::invalid_argument, "layer_norm: buffer too small for the shape");
  if (ranges_overlap(x, y) || ranges_overlap(w, y) || (has_bias && ranges_overlap(b, y)))
    throw Error(Status::invalid_argument, "layer_norm: the output overlaps an input");
  LayerNormPush push;
  push.rows = p.rows;
  push.width = p.width;
  push.x_stride = p.x_stride;
  push.y_stride = p.y_stride;
  push.eps = p.eps;
  push.has_bias = has_bias ? 1u : 0u;
  const LazyPipeline& pl = *pipeline_[fp16 && x_elem == Elem::f32 ? 1 : 0];
  uint32_t lim = device_.caps().max_workgroup_count[0];
  if (test_limit_) lim = std::min(lim, test_limit_);
  const uint32_t groups = std::clamp<uint32_t>(p.rows, 1, lim);
  // Without a bias, binding 2 is a dummy the shader never reads: w's range, already declared read.
  program.dispatch(pl, {{x, Access::read}, {w, Access::read}, {has_bias ? b : w, Access::read}, {y, Access::write}},
                   &push, sizeof push, {groups, 1, 1}, "layer_norm");
}

}  // namespace diffvk
