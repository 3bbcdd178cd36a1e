#include "bench/two_pass_attn.hpp"

#include "bench/shaders.hpp"

#include <algorithm>

namespace diffvk {

namespace {
// The single-softmax pipelines are built from shaders/bench/flash_attn*.comp, embedded in this library.
Device& with_bench_shaders(Device& device) {
  bench::register_bench_shaders();
  return device;
}
}  // namespace

// ---------------------------------------------------------------------------------------------------
static_assert(sizeof(CombineNormParams) == 32, "combine_norm.comp's push block (the params are pushed as is)");

CombineNormKernel::CombineNormKernel(Device& device, KernelOptions o) : fp16_(o.fp16) {
  wg_ = pick_pow2_workgroup(device.caps(), 64);
  pipeline_ = std::make_unique<Pipeline>(
      device, kernel_desc("combine_norm", o).with_bindings(4).with_push(sizeof(CombineNormParams)).with_spec({wg_}));
}
CombineNormKernel::~CombineNormKernel() = default;

void CombineNormKernel::record(Program& program, BufferRange o1, BufferRange o2, BufferRange w, BufferRange y,
                               const CombineNormParams& p) const {
  if (p.rows == 0 || p.heads == 0 || p.width == 0 || p.in_stride < p.heads * p.width ||
      p.out_stride < p.heads * p.width)
    throw Error(Status::invalid_argument, "combine_norm: bad shape");
  const uint64_t es = storage_bytes(fp16_);
  const uint64_t in = (uint64_t(p.rows - 1) * p.in_stride + uint64_t(p.heads) * p.width) * es;
  const uint64_t out = (uint64_t(p.rows - 1) * p.out_stride + uint64_t(p.heads) * p.width) * es;
  if (o1.size < in || o2.size < in || y.size < out || w.size < p.width * es)
    throw Error(Status::invalid_argument, "combine_norm: buffer too small for the shape");
  program.dispatch(*pipeline_, {{o1, Access::read}, {o2, Access::read}, {w, Access::read}, {y, Access::write}}, &p,
                   sizeof p, {p.heads, p.rows, 1}, "combine_norm");
}

// ---------------------------------------------------------------------------------------------------
TwoPassDiffAttn::TwoPassDiffAttn(Device& device, KernelOptions o, uint32_t D, uint32_t n_rep, uint32_t max_decode_rows)
    : D_(D),
      flash_(with_bench_shaders(device), o, D, n_rep, max_decode_rows, AttnSoftmax::single),
      combine_(device, o) {}

uint64_t TwoPassDiffAttn::inter_bytes(const AttnCall& c, uint32_t D, bool fp16) {
  return uint64_t(c.S) * c.H * 2 * D * storage_bytes(fp16);
}

void TwoPassDiffAttn::combine(Program& program, BufferRange o1, BufferRange o2, BufferRange subln, BufferRange o,
                              const AttnCall& c) const {
  CombineNormParams p;
  p.rows = c.S;
  p.heads = c.H;
  p.width = 2 * D_;
  p.in_stride = c.H * 2 * D_;
  p.out_stride = c.o_stride;
  p.lambda = c.lambda;
  p.gain = c.gain;
  p.eps = c.eps;
  combine_.record(program, o1, o2, subln, o, p);
}

void TwoPassDiffAttn::record_prefill(Program& program, BufferRange q, BufferRange k, BufferRange v, BufferRange subln,
                                     BufferRange o, BufferRange o1, BufferRange o2, const AttnCall& c,
                                     const AttnSplitScratch& s1, const AttnSplitScratch& s2) const {
  AttnCall inter = c;
  inter.o_stride = c.H * 2 * D_;
  inter.half = 0;
  flash_.record_prefill(program, q, k, v, {}, o1, inter, s1);
  inter.half = 1;
  flash_.record_prefill(program, q, k, v, {}, o2, inter, s2);
  combine(program, o1, o2, subln, o, c);
}

void TwoPassDiffAttn::record_decode(Program& program, BufferRange q, BufferRange k, BufferRange v, BufferRange subln,
                                    BufferRange o, BufferRange o1, BufferRange o2, const AttnSplitScratch& s1,
                                    const AttnSplitScratch& s2, const AttnCall& c, uint32_t splits,
                                    uint32_t split_len) const {
  AttnCall inter = c;
  inter.o_stride = c.H * 2 * D_;
  inter.half = 0;
  flash_.record_decode(program, q, k, v, {}, o1, s1, inter, splits, split_len);
  inter.half = 1;
  flash_.record_decode(program, q, k, v, {}, o2, s2, inter, splits, split_len);
  combine(program, o1, o2, subln, o, c);
}

// ---------------------------------------------------------------------------------------------------
TwoPassV2Attn::TwoPassV2Attn(Device& device, KernelOptions o, uint32_t D, uint32_t n_rep_pairs,
                             uint32_t max_decode_rows)
    : D_(D),
      fp16_(o.fp16),
      plain_(with_bench_shaders(device), o, D, n_rep_pairs, max_decode_rows, AttnSoftmax::v2_plain) {
  wg_ = pick_pow2_workgroup(device.caps(), 64);
  combine_ = std::make_unique<Pipeline>(device, PipelineDesc{"v2_combine"}
                                                    .with_bindings(4)
                                                    .with_push(5 * sizeof(uint32_t))
                                                    .with_spec({wg_})
                                                    .with_subgroup(false)
                                                    .with_fp16(o.fp16));
}
TwoPassV2Attn::~TwoPassV2Attn() = default;

uint64_t TwoPassV2Attn::inter_bytes(const AttnCall& c, uint32_t D, bool fp16) {
  return uint64_t(c.S) * (c.H / 2) * D * storage_bytes(fp16);
}

AttnCall TwoPassV2Attn::pass_call(const AttnCall& c, uint32_t D, uint32_t half) {
  AttnCall p = c;
  p.H = c.H / 2;  // the even (or odd) query heads
  p.o_stride = p.H * D;
  p.half = half;
  return p;
}

void TwoPassV2Attn::combine(Program& program, BufferRange oe, BufferRange oo, BufferRange q, BufferRange o,
                            const AttnCall& c) const {
  const uint32_t H = c.H / 2;
  const uint64_t n = uint64_t(c.S) * H * D_, es = storage_bytes(fp16_);
  if (oe.size < n * es || oo.size < n * es || o.size < n * es || c.o_stride != H * D_)
    throw Error(Status::invalid_argument, "v2_combine: buffers too small, or an output stride other than H·D");
  const uint32_t p[5] = {c.S, H, D_, c.q_stride, c.H * D_};
  const uint32_t groups = static_cast<uint32_t>(std::min<uint64_t>((n + wg_ - 1) / wg_, 65535));
  program.dispatch(*combine_, {{oe, Access::read}, {oo, Access::read}, {q, Access::read}, {o, Access::write}}, p,
                   sizeof p, {groups, 1, 1}, "v2_combine");
}

void TwoPassV2Attn::record_prefill(Program& program, BufferRange q, BufferRange k, BufferRange v, BufferRange o,
                                   BufferRange oe, BufferRange oo, const AttnCall& c, const AttnSplitScratch& s1,
                                   const AttnSplitScratch& s2) const {
  plain_.record_prefill(program, q, k, v, {}, oe, pass_call(c, D_, 0), s1);
  plain_.record_prefill(program, q, k, v, {}, oo, pass_call(c, D_, 1), s2);
  combine(program, oe, oo, q, o, c);
}

void TwoPassV2Attn::record_decode(Program& program, BufferRange q, BufferRange k, BufferRange v, BufferRange o,
                                  BufferRange oe, BufferRange oo, const AttnSplitScratch& s1,
                                  const AttnSplitScratch& s2, const AttnCall& c, uint32_t splits,
                                  uint32_t split_len) const {
  plain_.record_decode(program, q, k, v, {}, oe, s1, pass_call(c, D_, 0), splits, split_len);
  plain_.record_decode(program, q, k, v, {}, oo, s2, pass_call(c, D_, 1), splits, split_len);
  combine(program, oe, oo, q, o, c);
}

}  // namespace diffvk
