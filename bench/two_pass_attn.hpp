// The "two-pass" differential attention baseline of `diffvk bench`: what a user of a runtime with
// only standard (single-softmax) attention would do, following the paper's own fallback —
//   O1 = flash(Q1, K1, V),  O2 = flash(Q2, K2, V)   (V at width 2D, both read from the same caches
//   as the fused kernel through column offsets), then one combine-and-norm pass
//   y = headwise_rmsnorm(O1 − λ·O2) ⊙ subln · (1 − λ_init).
// The flash passes are the attention op itself with one softmax (DiffAttnKernel, AttnSoftmax::single:
// the core shaders/attn_core.glsl compiled with NSM = 1, GQA folded into rows, register-resident online
// softmax, exact causal limits, live-length split-K for decode; tiles from choose_attn_tiles with nsm = 1).
#pragma once
#include <memory>

#include "ops/diff_attn.hpp"
#include "ops/kernel_options.hpp"

namespace diffvk {

// y = headwise_rmsnorm(o1 − λ·o2) ⊙ w · gain; o1, o2: rows x in_stride, y: rows x out_stride,
// head h at columns [h*width, (h+1)*width).
struct CombineNormParams {
  uint32_t rows = 0, heads = 0, width = 0, in_stride = 0, out_stride = 0;
  float lambda = 0.0f, gain = 1.0f, eps = 1e-5f;
};
class CombineNormKernel {
 public:
  CombineNormKernel(Device& device, KernelOptions options);
  ~CombineNormKernel();
  void record(Program& program, BufferRange o1, BufferRange o2, BufferRange w, BufferRange y,
              const CombineNormParams& params) const;

 private:
  bool fp16_;
  uint32_t wg_;
  std::unique_ptr<Pipeline> pipeline_;
};

// The whole two-pass baseline. Scratch: o1, o2 (storage type, S x H·2D each, see inter_bytes) and,
// for decode, one split scratch per pass (AttnSplitScratch: part_bytes / stat_bytes / sync_bytes).
class TwoPassDiffAttn {
 public:
  TwoPassDiffAttn(Device& device, KernelOptions options, uint32_t D, uint32_t n_rep, uint32_t max_decode_rows = 8);
  static uint64_t inter_bytes(const AttnCall& call, uint32_t D, bool fp16);
  // Split scratch of one flash pass (DiffAttnKernel's, with one softmax).
  static uint64_t part_bytes(const AttnCall& call, uint32_t D, uint32_t splits) {
    return DiffAttnKernel::part_bytes(call, D, splits, AttnSoftmax::single);
  }
  static uint64_t stat_bytes(const AttnCall& call, uint32_t splits) {
    return DiffAttnKernel::stat_bytes(call, splits, AttnSoftmax::single);
  }
  void record_prefill(Program& program, BufferRange q, BufferRange k, BufferRange v, BufferRange subln, BufferRange o,
                      BufferRange o1, BufferRange o2, const AttnCall& call, const AttnSplitScratch& s1 = {},
                      const AttnSplitScratch& s2 = {}) const;
  void record_decode(Program& program, BufferRange q, BufferRange k, BufferRange v, BufferRange subln, BufferRange o,
                     BufferRange o1, BufferRange o2, const AttnSplitScratch& s1, const AttnSplitScratch& s2,
                     const AttnCall& call, uint32_t splits, uint32_t split_len) const;
  // The single-softmax attention op of both passes (AttnCall::half selects the pass).
  const DiffAttnKernel& flash() const { return flash_; }

 private:
  void combine(Program& program, BufferRange o1, BufferRange o2, BufferRange subln, BufferRange o,
               const AttnCall& c) const;
  uint32_t D_;
  DiffAttnKernel flash_;
  CombineNormKernel combine_;
};

// The two-pass DIFF V2 baseline (docs/maths.md "DIFF V2"): what a runtime with only standard attention
// would run — plain attention over the H even query heads (oe), then over the H odd ones (oo), each a
// pass over the whole K/V cache (DiffAttnKernel, AttnSoftmax::v2_plain, n_rep = H / Hkv), then
//   out = oe − sigmoid(z)·oo   (v2_combine.comp; z: the λ logits after the 2H query heads of q).
// AttnCall as for the fused V2 kernel: H = 2H query heads, q_stride, o_stride = H·D.
class TwoPassV2Attn {
 public:
  TwoPassV2Attn(Device& device, KernelOptions options, uint32_t D, uint32_t n_rep_pairs, uint32_t max_decode_rows = 8);
  ~TwoPassV2Attn();
  static uint64_t inter_bytes(const AttnCall& call, uint32_t D, bool fp16);  // oe and oo, each
  // The plain pass's call (half 0 / 1) and its split scratch.
  static AttnCall pass_call(const AttnCall& call, uint32_t D, uint32_t half);
  void record_prefill(Program& program, BufferRange q, BufferRange k, BufferRange v, BufferRange o, BufferRange oe,
                      BufferRange oo, const AttnCall& call, const AttnSplitScratch& s1 = {},
                      const AttnSplitScratch& s2 = {}) const;
  void record_decode(Program& program, BufferRange q, BufferRange k, BufferRange v, BufferRange o, BufferRange oe,
                     BufferRange oo, const AttnSplitScratch& s1, const AttnSplitScratch& s2, const AttnCall& call,
                     uint32_t splits, uint32_t split_len) const;
  const DiffAttnKernel& plain() const { return plain_; }  // plain attention over H of the 2H query heads

 private:
  void combine(Program& program, BufferRange oe, BufferRange oo, BufferRange q, BufferRange o, const AttnCall& c) const;
  uint32_t D_, wg_;
  bool fp16_;
  DiffAttnKernel plain_;
  std::unique_ptr<Pipeline> combine_;
};

}  // namespace diffvk
