// RoPE of the fused QKV projection + KV-cache append (shaders/rope_kv.comp), and its cos/sin table.
#include <algorithm>
#include <cmath>

#include "ops/rope_kv.hpp"

namespace diffvk {

std::vector<float> rope_table(uint32_t max_positions, uint32_t D, double theta) {
  if (D == 0 || D % 2 != 0) throw Error(Status::invalid_argument, "rope_table: D must be even and positive");
  if (!(theta > 0)) throw Error(Status::invalid_argument, "rope_table: theta must be positive");
  std::vector<double> inv_freq(D / 2);
  for (uint32_t i = 0; i < D / 2; ++i) inv_freq[i] = std::pow(theta, -2.0 * i / D);
  return rope_table(max_positions, inv_freq);
}

std::vector<float> rope_table(uint32_t max_positions, const std::vector<double>& inv_freq) {
  if (inv_freq.empty()) throw Error(Status::invalid_argument, "rope_table: no frequencies");
  const size_t half = inv_freq.size();
  std::vector<float> t(size_t(max_positions) * half * 2);
  for (size_t i = 0; i < half; ++i) {
    for (uint32_t pos = 0; pos < max_positions; ++pos) {
      const double a = pos * inv_freq[i];
      const size_t o = (size_t(pos) * half + i) * 2;
      t[o] = static_cast<float>(std::cos(a));
      t[o + 1] = static_cast<float>(std::sin(a));
    }
  }
  return t;
}

static_assert(sizeof(RopeKvParams) == 40, "rope_kv.comp's push block (RopeKvParams is pushed as is)");

RopeKvKernel::RopeKvKernel(Device& device, KernelOptions o, KvFormat kv) : Pow2WorkgroupKernel(device), kv_(kv) {
  const uint32_t q8 = kv == KvFormat::q8_0 ? 1 : 0;
  declare(PipelineDesc{"rope_kv"}.with_bindings(6).with_push(sizeof(RopeKvParams)).with_spec({wg_, q8}), o);
}

void RopeKvKernel::record(Program& program, BufferRange qkv, BufferRange table, BufferRange q_out, BufferRange k_cache,
                          BufferRange v_cache, const RopeKvParams& params, BufferRange dyn_pos) const {
  RopeKvParams p = params;
  if (p.kheads == 0) p.kheads = 2 * p.Hkv;
  const bool dynamic = dyn_pos.buffer != VK_NULL_HANDLE;
  if (!dynamic) dyn_pos = device_.zero_range();
  if (p.rows == 0 || p.H == 0 || p.Hkv == 0 || p.D == 0 || p.capacity == 0)
    throw Error(Status::invalid_argument, "rope_kv: zero size");
  if (p.D % 2 != 0) throw Error(Status::invalid_argument, "rope_kv: head_dim D must be even for RoPE");
  if (p.H % p.Hkv != 0) throw Error(Status::invalid_argument, "rope_kv: H must be a multiple of Hkv");
  if (p.kheads % p.Hkv != 0) throw Error(Status::invalid_argument, "rope_kv: k sub-heads must be a multiple of Hkv");
  if (p.ring > 1 || p.rope > 1) throw Error(Status::invalid_argument, "rope_kv: ring and rope are 0 or 1");
  if (p.ring && p.rows > p.capacity)
    throw Error(Status::invalid_argument, "rope_kv: " + std::to_string(p.rows) + " rows do not fit a ring of " +
                                              std::to_string(p.capacity) + " rows");
  if (p.ring && uint64_t(p.pos0) + p.rows > UINT32_MAX)
    throw Error(Status::context_overflow, "rope_kv: positions past 2^32 - 1");
  if (!dynamic && !p.ring && uint64_t(p.pos0) + p.rows > p.capacity)
    throw Error(Status::context_overflow, "rope_kv: positions " + std::to_string(p.pos0) + ".." +
                                              std::to_string(uint64_t(p.pos0) + p.rows - 1) +
                                              " exceed the KV cache capacity " + std::to_string(p.capacity));
  const uint64_t es = storage_bytes(pipeline_->desc().fp16);
  const uint64_t pairs = (uint64_t(p.H) + p.kheads) * p.D;  // per row: q, then k and v of kheads·D/2 pairs each
  const uint64_t qkv_elems = uint64_t(p.rows) * (2 * pairs + p.lam);
  const uint64_t q_elems = uint64_t(p.rows) * (2ull * p.H * p.D + p.lam);
  const uint64_t cache_elems = uint64_t(p.kheads) * p.capacity * p.D;
  const uint32_t kw = p.kheads / p.Hkv * p.D;  // cache row width
  const std::string kv_problem = kv_format_problem(kv_, kw);
  if (!kv_problem.empty()) throw Error(Status::invalid_argument, "rope_kv: " + kv_problem);
  const uint64_t cache_bytes = kv_cache_bytes(kv_, es == 2, p.Hkv, p.capacity, kw);
  // With a dynamic position every position below the capacity may be used (a ring: the recorded ones; the host keeps
  // the table as long as the positions it replays). Without RoPE there is no table.
  const uint64_t table_entries =
      p.rope ? (dynamic && !p.ring ? uint64_t(p.capacity) : uint64_t(p.pos0) + p.rows) * (p.D / 2) : 0;
  if (!p.rope && !table.buffer) table = device_.zero_range();
  if (std::max({qkv_elems, cache_elems, table_entries * 2}) > UINT32_MAX)
    throw Error(Status::invalid_argument, "rope_kv: tensor too large for 32-bit element indices");
  if (qkv.size < qkv_elems * es || q_out.size < q_elems * es || k_cache.size < cache_bytes ||
      v_cache.size < cache_bytes)
    throw Error(Status::invalid_argument, "rope_kv: buffer too small for the shape");
  if (table.size < table_entries * 8)
    throw Error(Status::invalid_argument, "rope_kv: cos/sin table does not cover positions < pos0 + rows");
  for (const BufferRange* o : {&q_out, &k_cache, &v_cache})
    if (ranges_overlap(*o, qkv) || ranges_overlap(*o, table))
      throw Error(Status::invalid_argument, "rope_kv: an output overlaps an input");
  if (ranges_overlap(q_out, k_cache) || ranges_overlap(q_out, v_cache) || ranges_overlap(k_cache, v_cache))
    throw Error(Status::invalid_argument, "rope_kv: outputs overlap");

  const auto& maxc = device_.caps().max_workgroup_count;
  auto clamp = [&](uint64_t n, int d) {
    uint32_t lim = maxc[d];
    if (test_limit_[d]) lim = std::min(lim, test_limit_[d]);
    return static_cast<uint32_t>(std::max<uint64_t>(1, std::min<uint64_t>(n, lim)));
  };
  // Q8_0: the q pairs, the λ columns, then one invocation per scale word (64 columns) of each K and V row.
  const uint64_t items =
      kv_ == KvFormat::q8_0 ? uint64_t(p.H) * p.D + p.lam + 2ull * p.Hkv * kv_q8_scale_words(kw) : pairs + p.lam;
  const std::array<uint32_t, 3> groups{clamp((items + wg_ - 1) / wg_, 0), clamp(p.rows, 1), 1};
  program.dispatch(*pipeline_,
                   {{qkv, Access::read},
                    {table, Access::read},
                    {q_out, Access::write},
                    {k_cache, Access::write},
                    {v_cache, Access::write},
                    {dyn_pos, Access::read}},
                   &p, sizeof p, groups, "rope_kv");
}

}  // namespace diffvk
