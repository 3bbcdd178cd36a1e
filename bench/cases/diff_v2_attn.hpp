// diffvk_bench: the diff_v2_attn op's case class (cases/diff_v2_attn.cpp): DIFF V2 attention (docs/maths.md
// "DIFF V2") over a KV cache. Declared here for the tests that pick cases by their parameters.
#pragma once
#include "bench/op_run_impl.hpp"

namespace diffvk::bench {

// H output heads (2H query heads), Hkv dividing H, head width D; S query rows at pos0 .. pos0 + S - 1, the
// cache as for diff_attn.
struct DiffV2AttnCaseParams {
  uint32_t H = 0, Hkv = 0, D = 0, S = 1, pos0 = 0;
  double z_std = 1.0;       // the standard deviation of the λ logits (50: saturated, λ at 0 or 1)
  bool decode = false;      // the split-K decode kernels + merge (else the prefill)
  bool max_splits = false;  // decode: one tile per split
  bool kv_q8 = false;       // a Q8_0 KV cache, against the reference on the dequantized cache
  bool subgroup = true;     // false: the shared-memory lane sums even where subgroup arithmetic exists
  // A model's case (attn_model_cases): the most keys that model's decode calls may see (max_position_embeddings), and
  // the decode then takes the kernel the model's does (DiffAttnKernel::decode_on_prefill: the prefill kernel where the
  // tuning's attn_decode and that many keys allow; the self-test runs what the model records). 0: the split-K decode.
  uint32_t model_keys = 0;
};

class DiffV2AttnCase final : public op_detail::CaseOf<DiffV2AttnCase, DiffV2AttnCaseParams> {
 public:
  const char* op() const override { return "diff_v2_attn"; }
  std::string describe() const override;
  bool subgroup() const override { return p.subgroup; }
  void prepare(Device& dev, op_detail::KernelCache& kernels, bool subgroup, op_detail::Prepared& out) const override;
  RowShape row_shape() const override { return {p.S, p.H, p.D}; }
};

}  // namespace diffvk::bench
