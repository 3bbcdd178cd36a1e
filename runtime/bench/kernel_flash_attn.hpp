// The "two-pass" differential attention baseline of `diffvk bench`: what a user of a runtime with
// only standard (single-softmax) attention would do, following the paper's own fallback —
//   O1 = flash(Q1, K1, V),  O2 = flash(Q2, K2, V)   (V at width 2D, both read from the same caches
//   as the fused kernel through column offsets), then one combine-and-norm pass
//   y = headwise_rmsnorm(O1 − λ·O2) ⊙ subln · (1 − λ_init).
// The flash kernel is the fused kernel's own core (shaders/attn_core.glsl) compiled with one softmax
// (GQA folded into rows, register-resident online softmax, exact causal limits, live-length split-K
// for decode), and its tiles come from the same function (choose_attn_tiles with nsm = 1).
#pragma once
#include <memory>
#include <string>

#include "ops/attn_tuning.hpp"
#include "ops/diff_attn.hpp"
#include "ops/kernel_options.hpp"

namespace diffvk {

// Single-softmax attention of one half: half 0 = Q1·K1ᵀ, half 1 = Q2·K2ᵀ, with V (2D wide).
// Uses AttnCall's S, pos0, H, Hkv, capacity, q_stride (o_stride: rows of the 2D-wide-per-head output).
class FlashAttnKernel {
 public:
  FlashAttnKernel(Device& device, KernelOptions options, uint32_t D, uint32_t n_rep, uint32_t max_decode_rows = 8);
  ~FlashAttnKernel();

  // q: S x q_stride (heads of 2D: Q1|Q2); k, v: Hkv x capacity x 2D; o: S x o_stride, head h at h*2D.
  // Like DiffAttnKernel: on a loop-limited device a long prefill runs through split-K and needs
  // part/stat scratch for prefill_splits() splits (same per-invocation key cap as the fused kernel).
  void record_prefill(Program& program, BufferRange q, BufferRange k, BufferRange v, BufferRange o,
                      const AttnCall& call, uint32_t half, BufferRange part = {}, BufferRange stat = {}) const;
  uint32_t prefill_splits(const AttnCall& call, uint32_t* split_len) const;

  uint32_t decode_splits(const AttnCall& call, uint32_t* split_len) const;
  static uint64_t part_bytes(const AttnCall& call, uint32_t D, uint32_t splits);
  static uint64_t stat_bytes(const AttnCall& call, uint32_t splits);
  void record_decode(Program& program, BufferRange q, BufferRange k, BufferRange v, BufferRange o, BufferRange part,
                     BufferRange stat, const AttnCall& call, uint32_t half, uint32_t splits, uint32_t split_len) const;

  const AttnTiles& prefill_tiles() const { return prefill_tiles_; }
  const AttnTiles& decode_tiles(uint32_t S) const;
  uint32_t max_decode_rows() const { return max_decode_rows_; }
  // Keys one invocation of these tiles may stream on this device (attn_max_keys_per_invocation).
  uint32_t max_keys_per_invocation(const AttnTiles& t) const {
    return attn_max_keys_per_invocation(device_.caps(), D_, t, subgroup_);
  }

 private:
  void record_split(Program& program, const AttnTiles& t, BufferRange q, BufferRange k, BufferRange v, BufferRange o,
                    BufferRange part, BufferRange stat, const AttnCall& c, uint32_t half, uint32_t splits,
                    uint32_t split_len) const;
  void validate(const AttnCall& c, BufferRange q, BufferRange k, BufferRange v, BufferRange o, uint32_t half) const;
  Device& device_;
  bool fp16_, subgroup_;
  uint32_t D_, n_rep_, max_decode_rows_;
  AttnTiles prefill_tiles_, decode1_tiles_, decodeN_tiles_;
  uint32_t reduce_wg_;
  std::unique_ptr<Pipeline> prefill_, decode1_, decodeN_, reduce_;
};

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
// for decode, one part/stat pair per pass (fp32, FlashAttnKernel::part_bytes / stat_bytes).
class TwoPassDiffAttn {
 public:
  TwoPassDiffAttn(Device& device, KernelOptions options, uint32_t D, uint32_t n_rep, uint32_t max_decode_rows = 8);
  static uint64_t inter_bytes(const AttnCall& call, uint32_t D, bool fp16);
  void record_prefill(Program& program, BufferRange q, BufferRange k, BufferRange v, BufferRange subln, BufferRange o,
                      BufferRange o1, BufferRange o2, const AttnCall& call, BufferRange part1 = {},
                      BufferRange stat1 = {}, BufferRange part2 = {}, BufferRange stat2 = {}) const;
  void record_decode(Program& program, BufferRange q, BufferRange k, BufferRange v, BufferRange subln, BufferRange o,
                     BufferRange o1, BufferRange o2, BufferRange part1, BufferRange stat1, BufferRange part2,
                     BufferRange stat2, const AttnCall& call, uint32_t splits, uint32_t split_len) const;
  const FlashAttnKernel& flash() const { return flash_; }

 private:
  void combine(Program& program, BufferRange o1, BufferRange o2, BufferRange subln, BufferRange o, const AttnCall& c) const;
  uint32_t D_;
  FlashAttnKernel flash_;
  CombineNormKernel combine_;
};

}  // namespace diffvk
