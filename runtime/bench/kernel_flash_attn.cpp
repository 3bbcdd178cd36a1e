#include "bench/kernel_flash_attn.hpp"

#include <algorithm>
#include <cmath>

#include "bench/shaders.hpp"

namespace diffvk {

namespace {
std::vector<uint32_t> spec(const AttnTiles& t, uint32_t D) { return attn_spec_constants(t, D); }
}  // namespace

// ---------------------------------------------------------------------------------------------------

FlashAttnKernel::FlashAttnKernel(Device& device, KernelOptions o, uint32_t D, uint32_t n_rep, uint32_t max_decode_rows)
    : device_(device), fp16_(o.fp16), subgroup_(o.subgroup), D_(D), n_rep_(n_rep), max_decode_rows_(max_decode_rows) {
  if (D == 0 || D % 2) throw Error(Status::invalid_argument, "flash attention: D must be even and positive");
  if (n_rep == 0) throw Error(Status::invalid_argument, "flash attention: n_rep must be positive");
  if (max_decode_rows == 0 || max_decode_rows > 8)
    throw Error(Status::invalid_argument, "flash attention: decode handles 1..8 query rows per call");
  bench::register_bench_shaders();
  const DeviceCaps& caps = device.caps();
  prefill_tiles_ = choose_attn_tiles(caps, fp16_, D, n_rep, AttnPhase::prefill, 1, 1);
  decode1_tiles_ = choose_attn_tiles(caps, fp16_, D, n_rep, AttnPhase::decode, 1, 1);
  decodeN_tiles_ = choose_attn_tiles(caps, fp16_, D, n_rep, AttnPhase::decode, max_decode_rows, 1);
  const uint32_t push = sizeof(AttnCorePush);
  // Bindings as in the fused kernel: 0 q, 1 k, 2 v, 3 o (or part), 4 unused (or stat), 5 dynamic position.
  prefill_ = std::make_unique<Pipeline>(device, PipelineDesc{"flash_attn", 6, push, spec(prefill_tiles_, D), o.subgroup, fp16_, prefill_tiles_.subgroup});
  decode1_ = std::make_unique<Pipeline>(device, PipelineDesc{"flash_attn_split", 6, push, spec(decode1_tiles_, D), o.subgroup, fp16_, decode1_tiles_.subgroup});
  if (decodeN_tiles_.br != decode1_tiles_.br)
    decodeN_ = std::make_unique<Pipeline>(device, PipelineDesc{"flash_attn_split", 6, push, spec(decodeN_tiles_, D), o.subgroup, fp16_, decodeN_tiles_.subgroup});
  reduce_wg_ = pick_pow2_workgroup(caps, 64);
  reduce_ = std::make_unique<Pipeline>(device, PipelineDesc{"flash_attn_reduce", 4, sizeof(AttnMergePush), {reduce_wg_, D}, false, fp16_});
}

FlashAttnKernel::~FlashAttnKernel() = default;

const AttnTiles& FlashAttnKernel::decode_tiles(uint32_t S) const {
  return S <= 1 ? decode1_tiles_ : decodeN_tiles_;
}

void FlashAttnKernel::validate(const AttnCall& c, BufferRange q, BufferRange k, BufferRange v, BufferRange o,
                               uint32_t half) const {
  const uint64_t es = storage_bytes(fp16_), dv = 2ull * D_;
  if (half > 1) throw Error(Status::invalid_argument, "flash attention: half must be 0 (Q1/K1) or 1 (Q2/K2)");
  if (c.S == 0 || c.H == 0 || c.Hkv == 0 || c.H % c.Hkv || c.H / c.Hkv != n_rep_)
    throw Error(Status::invalid_argument, "flash attention: H=" + std::to_string(c.H) + ", Hkv=" + std::to_string(c.Hkv) +
                                              " does not match this kernel's n_rep=" + std::to_string(n_rep_));
  if (uint64_t(c.pos0) + c.S > c.capacity)
    throw Error(Status::context_overflow, "flash attention: positions up to " + std::to_string(uint64_t(c.pos0) + c.S) +
                                              " exceed the KV cache capacity " + std::to_string(c.capacity));
  if (c.q_stride < c.H * dv || c.o_stride < c.H * dv)
    throw Error(Status::invalid_argument, "flash attention: row strides smaller than H x 2D");
  const uint64_t qn = (uint64_t(c.S) - 1) * c.q_stride + c.H * dv, on = (uint64_t(c.S) - 1) * c.o_stride + c.H * dv;
  const uint64_t kv = uint64_t(c.Hkv) * c.capacity * dv;
  if (q.size < qn * es || o.size < on * es || k.size < kv * es || v.size < kv * es)
    throw Error(Status::invalid_argument, "flash attention: a buffer is smaller than the shape needs");
}

void FlashAttnKernel::record_prefill(Program& program, BufferRange q, BufferRange k, BufferRange v, BufferRange o,
                                     const AttnCall& c, uint32_t half, BufferRange part, BufferRange stat) const {
  validate(c, q, k, v, o, half);
  uint32_t split_len = 0;
  if (const uint32_t splits = prefill_splits(c, &split_len)) {
    if (!part.buffer || !stat.buffer)
      throw Error(Status::invalid_argument, "flash attention prefill: this device needs split-K scratch");
    record_split(program, decodeN_tiles_, q, k, v, o, part, stat, c, half, splits, split_len);
    return;
  }
  const AttnTiles& t = prefill_tiles_;
  const BufferRange zero = device_.zero_range();
  AttnCorePush p{c.S, c.pos0, c.H, n_rep_, c.capacity, c.q_stride, c.o_stride, half * D_, c.capacity, c.capacity,
         static_cast<float>(1.0 / std::sqrt(double(D_))), 0.0f, 1.0f, 0.0f};
  program.dispatch(*prefill_, {{q, Access::read}, {k, Access::read}, {v, Access::read}, {o, Access::write}, {zero, Access::read},
                    {zero, Access::read}},
                   &p, sizeof p, {attn_row_blocks(c.S, n_rep_, t), c.Hkv, 1}, half ? "flash Q2K2" : "flash Q1K1");
}

uint32_t FlashAttnKernel::prefill_splits(const AttnCall& c, uint32_t* split_len) const {
  *split_len = 0;
  const uint64_t keys = uint64_t(c.pos0) + c.S;
  // The fused core's loop estimate bounds this single-softmax core's (it does less per tile).
  if (keys <= attn_max_keys_per_invocation(device_.caps(), D_, prefill_tiles_, subgroup_)) return 0;
  *split_len = attn_max_keys_per_invocation(device_.caps(), D_, decodeN_tiles_, subgroup_);
  return static_cast<uint32_t>((keys + *split_len - 1) / *split_len);
}

uint32_t FlashAttnKernel::decode_splits(const AttnCall& c, uint32_t* split_len) const {
  const AttnTiles& t = decode_tiles(c.S);
  const uint32_t per_split = attn_row_blocks(c.S, n_rep_, t) * c.Hkv;
  return choose_splits(device_.caps(), c.pos0 + c.S, t.bc, per_split, split_len,
                       attn_max_keys_per_invocation(device_.caps(), D_, t, subgroup_));
}

uint64_t FlashAttnKernel::part_bytes(const AttnCall& c, uint32_t D, uint32_t splits) {
  return uint64_t(splits) * c.H * c.S * 2 * D * 4;
}
uint64_t FlashAttnKernel::stat_bytes(const AttnCall& c, uint32_t splits) { return uint64_t(splits) * c.H * c.S * 2 * 4; }

void FlashAttnKernel::record_decode(Program& program, BufferRange q, BufferRange k, BufferRange v, BufferRange o,
                                    BufferRange part, BufferRange stat, const AttnCall& c, uint32_t half,
                                    uint32_t splits, uint32_t split_len) const {
  validate(c, q, k, v, o, half);
  if (c.S > max_decode_rows_)
    throw Error(Status::invalid_argument, "flash attention decode: " + std::to_string(c.S) + " rows > " +
                                              std::to_string(max_decode_rows_) + " (use prefill)");
  record_split(program, decode_tiles(c.S), q, k, v, o, part, stat, c, half, splits, split_len);
}

void FlashAttnKernel::record_split(Program& program, const AttnTiles& t, BufferRange q, BufferRange k, BufferRange v,
                                   BufferRange o, BufferRange part, BufferRange stat, const AttnCall& c, uint32_t half,
                                   uint32_t splits, uint32_t split_len) const {
  if (splits == 0 || split_len == 0 || split_len % t.bc || uint64_t(splits) * split_len < uint64_t(c.pos0) + c.S)
    throw Error(Status::invalid_argument, "flash attention: splits do not cover the keys");
  if (part.size < part_bytes(c, D_, splits) || stat.size < stat_bytes(c, splits))
    throw Error(Status::invalid_argument, "flash attention decode: split scratch too small");
  const Pipeline& pipe = (&t == &decode1_tiles_ || !decodeN_) ? *decode1_ : *decodeN_;
  if (split_len > attn_max_keys_per_invocation(device_.caps(), D_, t, subgroup_))
    throw Error(Status::invalid_argument, "flash attention: split of " + std::to_string(split_len) +
                                              " keys exceeds what one invocation may stream on this device");
  const BufferRange zero = device_.zero_range();
  const uint32_t min_split = std::min(kAttnMinSplitKeys, split_len);
  AttnCorePush p{c.S, c.pos0, c.H, n_rep_, c.capacity, c.q_stride, c.o_stride, half * D_, min_split, split_len,
         static_cast<float>(1.0 / std::sqrt(double(D_))), 0.0f, 1.0f, 0.0f};
  program.dispatch(pipe, {{q, Access::read}, {k, Access::read}, {v, Access::read}, {part, Access::write}, {stat, Access::write},
                    {zero, Access::read}},
                   &p, sizeof p, {attn_row_blocks(c.S, n_rep_, t), c.Hkv, splits}, half ? "flash split Q2K2" : "flash split Q1K1");
  AttnMergePush r{c.S, c.H, splits, c.o_stride, c.pos0, c.capacity, min_split, split_len, 0.0f, 1.0f, 0.0f};
  program.dispatch(*reduce_, {{part, Access::read}, {stat, Access::read}, {o, Access::write}, {zero, Access::read}}, &r, sizeof r,
                   {c.H, c.S, 1}, half ? "flash reduce Q2K2" : "flash reduce Q1K1");
}

// ---------------------------------------------------------------------------------------------------
CombineNormKernel::CombineNormKernel(Device& device, KernelOptions o) : fp16_(o.fp16) {
  wg_ = pick_pow2_workgroup(device.caps(), 64);
  pipeline_ = std::make_unique<Pipeline>(device, PipelineDesc{"combine_norm", 4, sizeof(CombineNormParams), {wg_}, o.subgroup, o.fp16});
}
CombineNormKernel::~CombineNormKernel() = default;

void CombineNormKernel::record(Program& program, BufferRange o1, BufferRange o2, BufferRange w, BufferRange y,
                               const CombineNormParams& p) const {
  if (p.rows == 0 || p.heads == 0 || p.width == 0 || p.in_stride < p.heads * p.width || p.out_stride < p.heads * p.width)
    throw Error(Status::invalid_argument, "combine_norm: bad shape");
  const uint64_t es = storage_bytes(fp16_);
  const uint64_t in = (uint64_t(p.rows - 1) * p.in_stride + uint64_t(p.heads) * p.width) * es;
  const uint64_t out = (uint64_t(p.rows - 1) * p.out_stride + uint64_t(p.heads) * p.width) * es;
  if (o1.size < in || o2.size < in || y.size < out || w.size < p.width * es)
    throw Error(Status::invalid_argument, "combine_norm: buffer too small for the shape");
  program.dispatch(*pipeline_, {{o1, Access::read}, {o2, Access::read}, {w, Access::read}, {y, Access::write}}, &p, sizeof p,
                   {p.heads, p.rows, 1}, "combine_norm");
}

// ---------------------------------------------------------------------------------------------------
TwoPassDiffAttn::TwoPassDiffAttn(Device& device, KernelOptions o, uint32_t D, uint32_t n_rep, uint32_t max_decode_rows)
    : D_(D), flash_(device, o, D, n_rep, max_decode_rows), combine_(device, o) {}

uint64_t TwoPassDiffAttn::inter_bytes(const AttnCall& c, uint32_t D, bool fp16) {
  return uint64_t(c.S) * c.H * 2 * D * storage_bytes(fp16);
}

void TwoPassDiffAttn::combine(Program& program, BufferRange o1, BufferRange o2, BufferRange subln, BufferRange o,
                              const AttnCall& c) const {
  CombineNormParams p{c.S, c.H, 2 * D_, c.H * 2 * D_, c.o_stride, c.lambda, c.gain, c.eps};
  combine_.record(program, o1, o2, subln, o, p);
}

void TwoPassDiffAttn::record_prefill(Program& program, BufferRange q, BufferRange k, BufferRange v, BufferRange subln,
                                     BufferRange o, BufferRange o1, BufferRange o2, const AttnCall& c, BufferRange part1,
                                     BufferRange stat1, BufferRange part2, BufferRange stat2) const {
  AttnCall inter = c;
  inter.o_stride = c.H * 2 * D_;
  flash_.record_prefill(program, q, k, v, o1, inter, 0, part1, stat1);
  flash_.record_prefill(program, q, k, v, o2, inter, 1, part2, stat2);
  combine(program, o1, o2, subln, o, c);
}

void TwoPassDiffAttn::record_decode(Program& program, BufferRange q, BufferRange k, BufferRange v, BufferRange subln,
                                    BufferRange o, BufferRange o1, BufferRange o2, BufferRange part1, BufferRange stat1,
                                    BufferRange part2, BufferRange stat2, const AttnCall& c, uint32_t splits,
                                    uint32_t split_len) const {
  AttnCall inter = c;
  inter.o_stride = c.H * 2 * D_;
  flash_.record_decode(program, q, k, v, o1, part1, stat1, inter, 0, splits, split_len);
  flash_.record_decode(program, q, k, v, o2, part2, stat2, inter, 1, splits, split_len);
  combine(program, o1, o2, subln, o, c);
}

}  // namespace diffvk
