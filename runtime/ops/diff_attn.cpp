#include "ops/diff_attn.hpp"

#include <algorithm>
#include <cmath>

namespace diffvk {

namespace {
std::vector<uint32_t> spec(const AttnTiles& t, uint32_t D) { return attn_spec_constants(t, D); }
}  // namespace

DiffAttnKernel::DiffAttnKernel(Device& device, KernelOptions o, uint32_t D, uint32_t n_rep, uint32_t max_decode_rows)
    : device_(device), fp16_(o.fp16), subgroup_(o.subgroup), D_(D), n_rep_(n_rep), max_decode_rows_(max_decode_rows) {
  if (D == 0 || D % 2) throw Error(Status::invalid_argument, "attention: D must be even and positive");
  if (max_decode_rows == 0 || max_decode_rows > 8)
    throw Error(Status::invalid_argument, "attention: decode handles 1..8 query rows per call");
  const DeviceCaps& caps = device.caps();
  prefill_tiles_ = choose_attn_tiles(caps, fp16_, D, n_rep, AttnPhase::prefill);
  decode1_tiles_ = choose_attn_tiles(caps, fp16_, D, n_rep, AttnPhase::decode, 1);
  decodeN_tiles_ = choose_attn_tiles(caps, fp16_, D, n_rep, AttnPhase::decode, max_decode_rows);
  const uint32_t push = sizeof(AttnCorePush);
  prefill_ = std::make_unique<Pipeline>(device, PipelineDesc{"diff_attn", 6, push, spec(prefill_tiles_, D), o.subgroup, fp16_, prefill_tiles_.subgroup});
  decode1_ = std::make_unique<Pipeline>(device, PipelineDesc{"diff_attn_split", 6, push, spec(decode1_tiles_, D), o.subgroup, fp16_, decode1_tiles_.subgroup});
  if (decodeN_tiles_.br != decode1_tiles_.br)
    decodeN_ = std::make_unique<Pipeline>(device, PipelineDesc{"diff_attn_split", 6, push, spec(decodeN_tiles_, D), o.subgroup, fp16_, decodeN_tiles_.subgroup});
  reduce_wg_ = pick_pow2_workgroup(caps, 64);
  reduce_ = std::make_unique<Pipeline>(device, PipelineDesc{"diff_attn_reduce", 5, sizeof(AttnMergePush), {reduce_wg_, D}, o.subgroup, fp16_});
}

DiffAttnKernel::~DiffAttnKernel() = default;

const AttnTiles& DiffAttnKernel::decode_tiles(uint32_t S) const {
  return S <= 1 ? decode1_tiles_ : decodeN_tiles_;
}

BufferRange DiffAttnKernel::dyn(const AttnCall& c) const { return c.dyn_pos.buffer ? c.dyn_pos : device_.zero_range(); }

void DiffAttnKernel::validate(const AttnCall& c, BufferRange q, BufferRange k, BufferRange v, BufferRange subln,
                              BufferRange o) const {
  const uint64_t es = storage_bytes(fp16_), dv = 2ull * D_;
  if (c.S == 0 || c.H == 0 || c.Hkv == 0 || c.H % c.Hkv || c.H / c.Hkv != n_rep_)
    throw Error(Status::invalid_argument, "attention: H=" + std::to_string(c.H) + ", Hkv=" + std::to_string(c.Hkv) +
                                              " does not match this kernel's n_rep=" + std::to_string(n_rep_));
  if (uint64_t(c.pos0) + c.S > c.capacity && !c.dyn_pos.buffer)
    throw Error(Status::context_overflow, "attention: positions up to " + std::to_string(uint64_t(c.pos0) + c.S) +
                                              " exceed the KV cache capacity " + std::to_string(c.capacity));
  if (c.q_stride < c.H * dv || c.o_stride < c.H * dv)
    throw Error(Status::invalid_argument, "attention: row strides smaller than H x 2D");
  const uint64_t qn = (uint64_t(c.S) - 1) * c.q_stride + c.H * dv, on = (uint64_t(c.S) - 1) * c.o_stride + c.H * dv;
  const uint64_t kv = uint64_t(c.Hkv) * c.capacity * dv;
  if (q.size < qn * es || o.size < on * es || k.size < kv * es || v.size < kv * es || subln.size < dv * es)
    throw Error(Status::invalid_argument, "attention: a buffer is smaller than the shape needs");
}

void DiffAttnKernel::record_prefill(Program& program, BufferRange q, BufferRange k, BufferRange v, BufferRange subln,
                                    BufferRange o, const AttnCall& c, BufferRange part, BufferRange stat) const {
  validate(c, q, k, v, subln, o);
  uint32_t split_len = 0;
  if (const uint32_t splits = prefill_splits(c, &split_len)) {
    if (!part.buffer || !stat.buffer)
      throw Error(Status::invalid_argument, "attention prefill: this device needs split-K scratch for " +
                                                std::to_string(splits) + " splits (prefill_splits)");
    record_split(program, split_pipeline(decodeN_tiles_), decodeN_tiles_, q, k, v, subln, o, part, stat, c, splits, split_len,
                 "diff_attn prefill split");
    return;
  }
  const AttnTiles& t = prefill_tiles_;
  AttnCorePush p{c.S, c.pos0, c.H, n_rep_, c.capacity, c.q_stride, c.o_stride, 0, c.capacity, c.capacity,
         static_cast<float>(1.0 / std::sqrt(double(D_))), c.lambda, c.gain, c.eps};
  program.dispatch(*prefill_, {{q, Access::read}, {k, Access::read}, {v, Access::read}, {subln, Access::read}, {o, Access::write},
                    {dyn(c), Access::read}},
                   &p, sizeof p, {attn_row_blocks(c.S, n_rep_, t), c.Hkv, 1}, "diff_attn prefill");
}

uint32_t DiffAttnKernel::prefill_splits(const AttnCall& c, uint32_t* split_len) const {
  return prefill_splits_for_keys(c.dyn_pos.buffer ? c.capacity : uint64_t(c.pos0) + c.S, split_len);
}

uint32_t DiffAttnKernel::prefill_splits_for_keys(uint64_t keys, uint32_t* split_len) const {
  *split_len = 0;
  const DeviceCaps& caps = device_.caps();
  if (keys <= attn_max_keys_per_invocation(caps, D_, prefill_tiles_, subgroup_)) return 0;
  *split_len = attn_max_keys_per_invocation(caps, D_, decodeN_tiles_, subgroup_);
  return static_cast<uint32_t>((keys + *split_len - 1) / *split_len);
}

uint32_t DiffAttnKernel::decode_splits(const AttnCall& c, uint32_t* split_len) const {
  const AttnTiles& t = decode_tiles(c.S);
  const uint32_t per_split = attn_row_blocks(c.S, n_rep_, t) * c.Hkv;
  return choose_splits(device_.caps(), c.pos0 + c.S, t.bc, per_split, split_len,
                       attn_max_keys_per_invocation(device_.caps(), D_, t, subgroup_));
}

uint32_t DiffAttnKernel::decode_splits_for_capacity(const AttnCall& c, uint32_t* split_len) const {
  AttnCall full = c;
  full.pos0 = c.capacity - std::min(c.S, c.capacity);
  full.dyn_pos = {};
  return decode_splits(full, split_len);
}

uint64_t DiffAttnKernel::part_bytes(const AttnCall& c, uint32_t D, uint32_t splits) {
  return uint64_t(splits) * c.H * c.S * 2 * 2 * D * 4;
}
uint64_t DiffAttnKernel::stat_bytes(const AttnCall& c, uint32_t splits) { return uint64_t(splits) * c.H * c.S * 4 * 4; }

void DiffAttnKernel::record_decode(Program& program, BufferRange q, BufferRange k, BufferRange v, BufferRange subln,
                                   BufferRange o, BufferRange part, BufferRange stat, const AttnCall& c, uint32_t splits,
                                   uint32_t split_len) const {
  validate(c, q, k, v, subln, o);
  if (c.S > max_decode_rows_)
    throw Error(Status::invalid_argument, "attention decode: " + std::to_string(c.S) + " rows > " +
                                              std::to_string(max_decode_rows_) + " (use prefill)");
  const AttnTiles& t = decode_tiles(c.S);
  record_split(program, split_pipeline(t), t, q, k, v, subln, o, part, stat, c, splits, split_len, "diff_attn split");
}

const Pipeline& DiffAttnKernel::split_pipeline(const AttnTiles& t) const {
  return (&t == &decode1_tiles_ || !decodeN_) ? *decode1_ : *decodeN_;
}

void DiffAttnKernel::record_split(Program& program, const Pipeline& pipe, const AttnTiles& t, BufferRange q, BufferRange k,
                                  BufferRange v, BufferRange subln, BufferRange o, BufferRange part, BufferRange stat,
                                  const AttnCall& c, uint32_t splits, uint32_t split_len, const char* label) const {
  const uint64_t keys = c.dyn_pos.buffer ? c.capacity : uint64_t(c.pos0) + c.S;
  if (splits == 0 || split_len == 0 || split_len % t.bc || uint64_t(splits) * split_len < keys)
    throw Error(Status::invalid_argument, "attention: splits do not cover the keys");
  if (split_len > attn_max_keys_per_invocation(device_.caps(), D_, t, subgroup_))
    throw Error(Status::invalid_argument, "attention: split of " + std::to_string(split_len) +
                                              " keys exceeds what one invocation may stream on this device");
  if (part.size < part_bytes(c, D_, splits) || stat.size < stat_bytes(c, splits))
    throw Error(Status::invalid_argument, "attention: split scratch too small");
  const uint32_t min_split = std::min(kAttnMinSplitKeys, split_len);
  AttnCorePush p{c.S, c.pos0, c.H, n_rep_, c.capacity, c.q_stride, c.o_stride, 0, min_split, split_len,
         static_cast<float>(1.0 / std::sqrt(double(D_))), c.lambda, c.gain, c.eps};
  program.dispatch(pipe, {{q, Access::read}, {k, Access::read}, {v, Access::read}, {part, Access::write}, {stat, Access::write},
                    {dyn(c), Access::read}},
                   &p, sizeof p, {attn_row_blocks(c.S, n_rep_, t), c.Hkv, splits}, label);
  AttnMergePush r{c.S, c.H, splits, c.o_stride, c.pos0, c.capacity, min_split, split_len, c.lambda, c.gain, c.eps};
  program.dispatch(*reduce_, {{part, Access::read}, {stat, Access::read}, {subln, Access::read}, {o, Access::write},
                    {dyn(c), Access::read}},
                   &r, sizeof r, {c.H, c.S, 1}, "diff_attn reduce");
}

}  // namespace diffvk
