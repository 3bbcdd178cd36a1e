// Context shift of a KV cache (shaders/kv_shift.comp).
#include "ops/kv_shift.hpp"

#include <algorithm>

namespace diffvk {

namespace {
struct ShiftPush {
  uint32_t Hkv = 0, D = 0, capacity = 0, src0 = 0, rows = 0, d = 0, W = 0;
};
static_assert(sizeof(ShiftPush) == 28, "kv_shift.comp's push block");
}  // namespace

KvShiftKernel::KvShiftKernel(Device& device, KernelOptions o, KvFormat kv) : Pow2WorkgroupKernel(device), kv_(kv) {
  const uint32_t q8 = kv == KvFormat::q8_0 ? 1 : 0;
  declare(PipelineDesc{"kv_shift"}.with_bindings(3).with_push(sizeof(ShiftPush)).with_spec({wg_, q8}), o);
}

void KvShiftKernel::record(Program& program, BufferRange k_cache, BufferRange v_cache, BufferRange table,
                           const KvShiftParams& p) const {
  if (p.Hkv == 0 || p.D == 0 || p.capacity == 0) throw Error(Status::invalid_argument, "kv_shift: zero size");
  if (p.D % 2 != 0) throw Error(Status::invalid_argument, "kv_shift: head_dim D must be even for RoPE");
  const uint32_t W = p.row ? p.row : 2 * p.D;  // cache row width
  if (W != p.D && W != 2 * p.D)
    throw Error(Status::invalid_argument,
                "kv_shift: row width " + std::to_string(W) + " is neither D nor 2D (D = " + std::to_string(p.D) + ")");
  if (p.discard == 0) throw Error(Status::invalid_argument, "kv_shift: nothing to discard");
  if (p.end > p.capacity || uint64_t(p.keep) + p.discard > p.end)
    throw Error(Status::invalid_argument, "kv_shift: rows [" + std::to_string(p.keep) + ", " +
                                              std::to_string(uint64_t(p.keep) + p.discard) + ") are not within the " +
                                              std::to_string(p.end) + " held (capacity " + std::to_string(p.capacity) +
                                              ")");
  const uint64_t es = storage_bytes(pipeline_->desc().fp16);
  const uint64_t cache_elems = uint64_t(p.Hkv) * p.capacity * W;
  if (cache_elems > UINT32_MAX)
    throw Error(Status::invalid_argument, "kv_shift: cache too large for 32-bit element indices");
  const std::string kv_problem = kv_format_problem(kv_, W);
  if (!kv_problem.empty()) throw Error(Status::invalid_argument, "kv_shift: " + kv_problem);
  const uint64_t cache_bytes = kv_cache_bytes(kv_, es == 2, p.Hkv, p.capacity, W);
  if (k_cache.size < cache_bytes || v_cache.size < cache_bytes)
    throw Error(Status::invalid_argument, "kv_shift: buffer too small for the shape");
  if (table.size < (uint64_t(p.discard) + 1) * (p.D / 2) * 8)
    throw Error(Status::invalid_argument,
                "kv_shift: cos/sin table does not cover the shift " + std::to_string(p.discard));
  if (ranges_overlap(k_cache, v_cache) || ranges_overlap(k_cache, table) || ranges_overlap(v_cache, table))
    throw Error(Status::invalid_argument, "kv_shift: buffers overlap");
  // K and V pairs of a row (Q8_0: K and V scale words of a row, 64 columns each)
  const uint64_t pairs = kv_ == KvFormat::q8_0 ? 2ull * p.Hkv * kv_q8_scale_words(W) : uint64_t(p.Hkv) * W;
  auto groups = [&](uint64_t cols, uint32_t rows) {
    std::array<uint32_t, 3> g = elementwise_grid(device_.caps(), cols, wg_, rows);
    for (int d = 0; d < 2; ++d)
      if (test_limit_[d]) g[d] = std::min(g[d], test_limit_[d]);
    return g;
  };
  for (uint32_t src = p.keep + p.discard; src < p.end;) {
    const uint32_t rows = std::min(p.discard, p.end - src);
    ShiftPush push;
    push.Hkv = p.Hkv;
    push.D = p.D;
    push.capacity = p.capacity;
    push.src0 = src;
    push.rows = rows;
    push.d = p.discard;
    push.W = W;
    program.dispatch(*pipeline_, {{k_cache, Access::read_write}, {v_cache, Access::read_write}, {table, Access::read}},
                     &push, sizeof push, groups(pairs, rows), "kv_shift");
    src += rows;
  }
}

}  // namespace diffvk
