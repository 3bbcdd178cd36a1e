// The "naive" differential attention baseline of `diffvk bench`: materialise both fp32 score
// matrices (shaders/bench/naive_scores.comp, once per softmax), softmax each row in place
// (naive_softmax.comp), O = (P1 − λ·P2)·V (naive_pv.comp), then the runtime's head_rmsnorm.
// Scratch: two score matrices of score_bytes() each (each bound whole, so each must fit
// maxStorageBufferRange) and one unnormalised output O (storage type, S rows of o_stride).
#pragma once
#include <memory>
#include <string>

#include "ops/diff_attn.hpp"
#include "ops/head_rmsnorm.hpp"

namespace diffvk {

class NaiveDiffAttn {
 public:
  NaiveDiffAttn(Device& device, KernelOptions options, uint32_t D, uint32_t n_rep);
  ~NaiveDiffAttn();
  // One score matrix: H x S x (pos0 + S) floats.
  static uint64_t score_bytes(const AttnCall& call);
  static uint64_t inter_bytes(const AttnCall& call, uint32_t D, bool fp16);
  // "" when the scratch fits the device (binding range, allocation size) and `budget` bytes, else why not.
  static std::string unsupported_reason(const DeviceCaps& caps, const AttnCall& call, uint32_t D, bool fp16,
                                        uint64_t budget);
  // q: S x q_stride; k, v: Hkv x capacity x 2D; subln: 2D; o: S x o_stride;
  // s1, s2: score_bytes each; otmp: inter_bytes.
  void record(Program& program, BufferRange q, BufferRange k, BufferRange v, BufferRange subln, BufferRange o,
              BufferRange s1, BufferRange s2, BufferRange otmp, const AttnCall& call) const;

 private:
  Device& device_;
  bool fp16_;
  uint32_t D_, n_rep_, wg_;
  std::unique_ptr<Pipeline> scores_, softmax_, pv_;
  HeadRmsNormKernel norm_;
};

// The naive DIFF V2 baseline (docs/maths.md "DIFF V2"): the score matrices of the even and of the odd query
// heads (naive_scores.comp with a 2D head stride), each row softmaxed in place, then
// O = (P_even − λ·P_odd)·V (naive_v2_pv.comp, λ = sigmoid of the logits after the 2H query heads in q).
// AttnCall as for the fused V2 kernel (H = 2H query heads, o_stride = H·D); scratch: two score matrices of
// score_bytes() each (H/2 heads each). No norm: the output is final.
class NaiveV2Attn {
 public:
  NaiveV2Attn(Device& device, KernelOptions options, uint32_t D, uint32_t n_rep_pairs);
  ~NaiveV2Attn();
  static uint64_t score_bytes(const AttnCall& call);
  static std::string unsupported_reason(const DeviceCaps& caps, const AttnCall& call, uint64_t budget);
  void record(Program& program, BufferRange q, BufferRange k, BufferRange v, BufferRange o, BufferRange s1,
              BufferRange s2, const AttnCall& call) const;

 private:
  Device& device_;
  bool fp16_;
  uint32_t D_, n_rep_, wg_;
  std::unique_ptr<Pipeline> scores_, softmax_, pv_;
};

}  // namespace diffvk
