#include "ops/attn_probs.hpp"

#include <algorithm>

namespace diffvk {

namespace {
struct Push {
  uint32_t rows = 0, H = 0, Hkv = 0, D = 0, capacity = 0, T = 0, pos0 = 0, head0 = 0, q_stride = 0, heads = 0;
};
static_assert(sizeof(Push) == 40, "attn_probs.comp's push block");
}  // namespace

AttnProbsKernel::AttnProbsKernel(Device& device, KernelOptions o) : device_(device) {
  wg_ = pick_pow2_workgroup(device.caps(), 64);
  pipeline_ = std::make_unique<LazyPipeline>(
      device, kernel_desc("attn_probs", o).with_bindings(4).with_push(sizeof(Push)).with_spec({wg_}), false);
  // Only a V2 model's maps need it: compiled on first record, like the attention variants.
  v2_ = std::make_unique<LazyPipeline>(
      device, kernel_desc("attn_probs", o).with_bindings(4).with_push(sizeof(Push)).with_spec({wg_, 1}), false);
}

AttnProbsKernel::~AttnProbsKernel() = default;

uint64_t AttnProbsKernel::out_bytes(uint32_t heads, uint32_t T, bool v2) {
  return (uint64_t(heads) * 2 * T * T + (v2 ? uint64_t(heads) * T : 0)) * 4;
}

void AttnProbsKernel::record(Program& program, BufferRange q, BufferRange k_cache, BufferRange dyn_pos, BufferRange out,
                             const AttnProbsParams& a) const {
  if (a.rows == 0 || a.H == 0 || a.Hkv == 0 || a.D == 0 || a.T == 0 || a.heads == 0 || a.H % a.Hkv != 0)
    throw Error(Status::invalid_argument, "attn_probs: bad shape (zero size or H not a multiple of Hkv)");
  if (a.T > kAttnProbsMaxTokens)
    throw Error(Status::invalid_argument, "attn_probs: " + std::to_string(a.T) +
                                              " tokens exceed the attention-map limit of " +
                                              std::to_string(kAttnProbsMaxTokens));
  if (a.T > a.capacity || uint64_t(a.head0) + a.heads > a.H)
    throw Error(Status::invalid_argument, "attn_probs: map size over the cache capacity or heads outside [0, H)");
  const uint64_t es = storage_bytes(pipeline_->desc().fp16);
  const uint64_t q_stride = 2ull * a.H * a.D + (a.v2 ? a.H : 0), k_row = a.v2 ? a.D : 2ull * a.D;
  if (q.size < a.rows * q_stride * es || k_cache.size < uint64_t(a.Hkv) * a.capacity * k_row * es || dyn_pos.size < 4 ||
      out.size < out_bytes(a.heads, a.T, a.v2))
    throw Error(Status::invalid_argument, "attn_probs: buffer too small for the shape");
  if (ranges_overlap(out, q) || ranges_overlap(out, k_cache) || ranges_overlap(out, dyn_pos))
    throw Error(Status::invalid_argument, "attn_probs: the output overlaps an input");
  Push push;
  push.rows = a.rows;
  push.H = a.H;
  push.Hkv = a.Hkv;
  push.D = a.D;
  push.capacity = a.capacity;
  push.T = a.T;
  push.pos0 = a.pos0;
  push.head0 = a.head0;
  push.q_stride = uint32_t(q_stride);
  push.heads = a.heads;
  const auto& maxc = device_.caps().max_workgroup_count;
  if (a.rows > maxc[0] || a.heads > maxc[1])
    throw Error(Status::invalid_argument, "attn_probs: too many rows or heads for one dispatch");
  program.dispatch(a.v2 ? *v2_ : *pipeline_,
                   {{q, Access::read}, {k_cache, Access::read}, {dyn_pos, Access::read}, {out, Access::read_write}},
                   &push, sizeof push, {a.rows, a.heads, 1}, a.v2 ? "attn_probs v2" : "attn_probs");
}

}  // namespace diffvk
