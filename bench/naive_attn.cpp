#include "bench/naive_attn.hpp"

#include <cmath>
#include <tuple>

#include "bench/shaders.hpp"

namespace diffvk {

namespace {
// The fields every naive pass's push block starts with.
struct NaiveShape {
  uint32_t S = 0, keys = 0, pos0 = 0, H = 0, n_rep = 0, capacity = 0;
};
// H: the heads a pass runs (V2: output heads); keys: pos0 + S.
NaiveShape naive_shape(const AttnCall& c, uint32_t H, uint32_t n_rep) {
  NaiveShape s;
  std::tie(s.S, s.pos0, s.capacity) = std::tie(c.S, c.pos0, c.capacity);
  s.keys = c.pos0 + c.S;
  s.H = H;
  s.n_rep = n_rep;
  return s;
}
struct ScoresPush {
  NaiveShape shape;
  uint32_t q_stride = 0, q_head_stride = 0, q_col = 0, k_stride = 0, k_col = 0;
  float scale = 0.0f;
};
static_assert(sizeof(ScoresPush) == 48, "naive_scores.comp's push block");
struct SoftmaxPush {
  uint32_t S = 0, keys = 0;
};
static_assert(sizeof(SoftmaxPush) == 8, "naive_softmax.comp's push block");
struct PvPush {
  NaiveShape shape;
  uint32_t o_stride = 0;
  float lambda = 0.0f;
};
static_assert(sizeof(PvPush) == 32, "naive_pv.comp's push block");

// The score and softmax passes both naive attentions share, and the P·V pass (shader pv, `pv_bindings` buffers,
// `pv_push` bytes); returns their workgroup size.
uint32_t make_passes(Device& device, const KernelOptions& o, uint32_t D, std::unique_ptr<Pipeline>& scores,
                     std::unique_ptr<Pipeline>& softmax, std::unique_ptr<Pipeline>& pv, const char* pv_shader,
                     uint32_t pv_bindings, uint32_t pv_push) {
  bench::register_bench_shaders();
  const uint32_t wg = pick_pow2_workgroup(device.caps(), 64);
  scores = std::make_unique<Pipeline>(device, PipelineDesc{"naive_scores"}
                                                  .with_bindings(3)
                                                  .with_push(sizeof(ScoresPush))
                                                  .with_spec({wg, D})
                                                  .with_subgroup(false)
                                                  .with_fp16(o.fp16));
  softmax = std::make_unique<Pipeline>(
      device, kernel_desc("naive_softmax", o).with_bindings(1).with_push(sizeof(SoftmaxPush)).with_spec({wg}));
  pv = std::make_unique<Pipeline>(device, PipelineDesc{pv_shader}
                                              .with_bindings(pv_bindings)
                                              .with_push(pv_push)
                                              .with_spec({wg, D})
                                              .with_subgroup(false)
                                              .with_fp16(o.fp16));
  return wg;
}

// Records both score passes (pass t reads q's columns from q_col[t], k's from k_col[t], into s1 then s2) and the
// softmax of each. `p` holds the shape; its q_col and k_col are set here. labels: scores 1, scores 2, softmax 1, 2.
void record_score_passes(Program& program, const Pipeline& scores, const Pipeline& softmax, uint32_t wg, ScoresPush p,
                         const uint32_t (&q_col)[2], const uint32_t (&k_col)[2], BufferRange q, BufferRange k,
                         BufferRange s1, BufferRange s2, const char* const (&labels)[4]) {
  for (uint32_t t = 0; t < 2; ++t) {
    p.q_col = q_col[t];
    p.k_col = k_col[t];
    program.dispatch(scores, {{q, Access::read}, {k, Access::read}, {t ? s2 : s1, Access::write}}, &p, sizeof p,
                     {(p.shape.keys + wg - 1) / wg, p.shape.S, p.shape.H}, labels[t]);
  }
  SoftmaxPush sp;
  sp.S = p.shape.S;
  sp.keys = p.shape.keys;
  for (uint32_t t = 0; t < 2; ++t)
    program.dispatch(softmax, {{t ? s2 : s1, Access::read_write}}, &sp, sizeof sp, {p.shape.S, p.shape.H, 1},
                     labels[2 + t]);
}
}  // namespace

NaiveDiffAttn::NaiveDiffAttn(Device& device, KernelOptions o, uint32_t D, uint32_t n_rep)
    : device_(device), fp16_(o.fp16), D_(D), n_rep_(n_rep), norm_(device, o) {
  if (D == 0 || D % 2 || n_rep == 0) throw Error(Status::invalid_argument, "naive attention: bad D or n_rep");
  wg_ = make_passes(device, o, D, scores_, softmax_, pv_, "naive_pv", 4, sizeof(PvPush));
}

NaiveDiffAttn::~NaiveDiffAttn() = default;

uint64_t NaiveDiffAttn::score_bytes(const AttnCall& c) { return uint64_t(c.H) * c.S * (uint64_t(c.pos0) + c.S) * 4; }
uint64_t NaiveDiffAttn::inter_bytes(const AttnCall& c, uint32_t D, bool fp16) {
  return ((uint64_t(c.S) - 1) * c.o_stride + uint64_t(c.H) * 2 * D) * storage_bytes(fp16);
}

std::string NaiveDiffAttn::unsupported_reason(const DeviceCaps& caps, const AttnCall& c, uint32_t D, bool fp16,
                                              uint64_t budget) {
  const uint64_t sb = score_bytes(c);
  auto mib = [](uint64_t b) { return std::to_string((b + (1 << 20) - 1) >> 20) + " MiB"; };
  if (sb > caps.max_storage_buffer_range)
    return "a score matrix (" + mib(sb) + ") exceeds maxStorageBufferRange (" + mib(caps.max_storage_buffer_range) +
           ")";
  if (caps.max_memory_allocation_size && sb > caps.max_memory_allocation_size)
    return "a score matrix (" + mib(sb) + ") exceeds maxMemoryAllocationSize";
  if (sb > 0xffffffffull) return "a score matrix exceeds 2^32 bytes (32-bit indexing)";
  const uint64_t total = 2 * sb + inter_bytes(c, D, fp16);
  if (total > budget) return "scratch " + mib(total) + " exceeds the memory budget " + mib(budget);
  return "";
}

void NaiveDiffAttn::record(Program& program, BufferRange q, BufferRange k, BufferRange v, BufferRange subln,
                           BufferRange o, BufferRange s1, BufferRange s2, BufferRange otmp, const AttnCall& c) const {
  const uint64_t es = storage_bytes(fp16_), dv = 2ull * D_;
  if (c.S == 0 || c.H == 0 || c.Hkv == 0 || c.H % c.Hkv || c.H / c.Hkv != n_rep_)
    throw Error(Status::invalid_argument, "naive attention: H/Hkv do not match this kernel's n_rep");
  if (uint64_t(c.pos0) + c.S > c.capacity)
    throw Error(Status::context_overflow, "naive attention: positions exceed the KV cache");
  if (c.q_stride < c.H * dv || c.o_stride < c.H * dv)
    throw Error(Status::invalid_argument, "naive attention: row strides too small");
  const uint64_t qn = (uint64_t(c.S) - 1) * c.q_stride + c.H * dv, on = (uint64_t(c.S) - 1) * c.o_stride + c.H * dv;
  const uint64_t kv = uint64_t(c.Hkv) * c.capacity * dv;
  if (q.size < qn * es || o.size < on * es || k.size < kv * es || v.size < kv * es || subln.size < dv * es ||
      s1.size < score_bytes(c) || s2.size < score_bytes(c) || otmp.size < inter_bytes(c, D_, fp16_))
    throw Error(Status::invalid_argument, "naive attention: a buffer is smaller than the shape needs");
  const DeviceCaps& caps = device_.caps();
  if (c.S > caps.max_workgroup_count[1] || c.H > caps.max_workgroup_count[2])
    throw Error(Status::unsupported, "naive attention: S or H exceeds the device's workgroup-count limit");
  const float scale = static_cast<float>(1.0 / std::sqrt(double(D_)));
  ScoresPush p;  // half h: columns h·D of q and k (Q1·K1ᵀ, then Q2·K2ᵀ)
  p.shape = naive_shape(c, c.H, n_rep_);
  p.q_stride = c.q_stride;
  p.q_head_stride = uint32_t(dv);
  p.k_stride = uint32_t(dv);
  p.scale = scale;
  record_score_passes(program, *scores_, *softmax_, wg_, p, {0, D_}, {0, D_}, q, k, s1, s2,
                      {"naive scores 1", "naive scores 2", "naive softmax 1", "naive softmax 2"});
  PvPush pv;
  pv.shape = p.shape;
  pv.o_stride = c.o_stride;
  pv.lambda = c.lambda;
  program.dispatch(*pv_, {{s1, Access::read}, {s2, Access::read}, {v, Access::read}, {otmp, Access::write}}, &pv,
                   sizeof pv, {uint32_t((dv + wg_ - 1) / wg_), c.S, c.H}, "naive pv");
  HeadRmsNormParams np;
  np.rows = c.S;
  np.heads = c.H;
  np.width = uint32_t(dv);
  np.row_stride = c.o_stride;
  np.gain = c.gain;
  np.eps = c.eps;
  norm_.record(program, otmp, subln, o, np);
}

// ---------------------------------------------------------------------------------------------------
namespace {
struct PvV2Push {
  NaiveShape shape;
  uint32_t o_stride = 0, q_stride = 0, q_off = 0;
};
static_assert(sizeof(PvV2Push) == 36, "naive_v2_pv.comp's push block");
}  // namespace

NaiveV2Attn::NaiveV2Attn(Device& device, KernelOptions o, uint32_t D, uint32_t n_rep_pairs)
    : device_(device), fp16_(o.fp16), D_(D), n_rep_(n_rep_pairs) {
  if (D == 0 || D % 2 || n_rep_pairs == 0)
    throw Error(Status::invalid_argument, "naive DIFF V2 attention: bad D or n_rep");
  wg_ = make_passes(device, o, D, scores_, softmax_, pv_, "naive_v2_pv", 5, sizeof(PvV2Push));
}

NaiveV2Attn::~NaiveV2Attn() = default;

uint64_t NaiveV2Attn::score_bytes(const AttnCall& c) { return uint64_t(c.H / 2) * c.S * (uint64_t(c.pos0) + c.S) * 4; }

std::string NaiveV2Attn::unsupported_reason(const DeviceCaps& caps, const AttnCall& c, uint64_t budget) {
  AttnCall half = c;
  half.H = c.H / 2;
  return NaiveDiffAttn::unsupported_reason(caps, half, 0, false,
                                           budget);  // the same two score matrices (no intermediate)
}

void NaiveV2Attn::record(Program& program, BufferRange q, BufferRange k, BufferRange v, BufferRange o, BufferRange s1,
                         BufferRange s2, const AttnCall& c) const {
  const uint64_t es = storage_bytes(fp16_);
  const uint32_t H = c.H / 2;  // output heads
  if (c.S == 0 || c.H % 2 || c.Hkv == 0 || H % c.Hkv || H / c.Hkv != n_rep_)
    throw Error(Status::invalid_argument, "naive DIFF V2 attention: H/Hkv do not match this kernel's n_rep");
  if (uint64_t(c.pos0) + c.S > c.capacity)
    throw Error(Status::context_overflow, "naive DIFF V2 attention: positions exceed the KV cache");
  const uint64_t qw = uint64_t(c.H) * D_ + H, ow = uint64_t(H) * D_;
  if (c.q_stride < qw || c.o_stride < ow)
    throw Error(Status::invalid_argument, "naive DIFF V2 attention: row strides too small");
  const uint64_t kv = uint64_t(c.Hkv) * c.capacity * D_;
  if (q.size < ((uint64_t(c.S) - 1) * c.q_stride + qw) * es || o.size < ((uint64_t(c.S) - 1) * c.o_stride + ow) * es ||
      k.size < kv * es || v.size < kv * es || s1.size < score_bytes(c) || s2.size < score_bytes(c))
    throw Error(Status::invalid_argument, "naive DIFF V2 attention: a buffer is smaller than the shape needs");
  const DeviceCaps& caps = device_.caps();
  if (c.S > caps.max_workgroup_count[1] || H > caps.max_workgroup_count[2])
    throw Error(Status::unsupported, "naive DIFF V2 attention: S or H exceeds the device's workgroup-count limit");
  const float scale = static_cast<float>(1.0 / std::sqrt(double(D_)));
  ScoresPush p;  // even query heads (2h: column 0 of each 2D pair), then odd ones (column D), over the same K
  p.shape = naive_shape(c, H, n_rep_);
  p.q_stride = c.q_stride;
  p.q_head_stride = 2 * D_;
  p.k_stride = D_;
  p.scale = scale;
  record_score_passes(program, *scores_, *softmax_, wg_, p, {0, D_}, {0, 0}, q, k, s1, s2,
                      {"naive scores even", "naive scores odd", "naive softmax even", "naive softmax odd"});
  PvV2Push pv;
  pv.shape = p.shape;
  pv.o_stride = c.o_stride;
  pv.q_stride = c.q_stride;
  pv.q_off = c.H * D_;
  program.dispatch(*pv_,
                   {{s1, Access::read}, {s2, Access::read}, {v, Access::read}, {q, Access::read}, {o, Access::write}},
                   &pv, sizeof pv, {(D_ + wg_ - 1) / wg_, c.S, H}, "naive v2 pv");
}

}  // namespace diffvk
