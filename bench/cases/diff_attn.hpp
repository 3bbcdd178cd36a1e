// diffvk_bench: the diff_attn op's case class (cases/diff_attn.cpp): differential attention + head norm over
// a KV cache, prefill (fused or split) and split-K decode. Declared here for the tests that pick cases by
// their parameters or build cases outside the table (tests/ops/test_diff_attn.cpp).
#pragma once
#include "bench/op_run_impl.hpp"
#include "ops/diff_attn.hpp"

namespace diffvk::bench {

// S query rows at positions pos0 .. pos0 + S - 1 against the pos0 + S cached keys (cache capacity pos0 + S + 3:
// spare rows hold 1000, so a read past the live length wrecks the result).
struct DiffAttnCaseParams {
  uint32_t H = 0, Hkv = 0, D = 0, S = 1, pos0 = 0;  // heads, key/value groups, half width
  double lambda = 0.5;
  bool decode = false;      // the split-K decode kernels + merge (else the prefill)
  bool max_splits = false;  // decode: one tile per split (some splits see only masked keys)
  bool one_split = false;   // decode: one split streams every key in one invocation
  bool kv_q8 = false;       // a Q8_0 KV cache, against the reference on the dequantized cache
  bool subgroup = true;     // false: the shared-memory reduction even where subgroup arithmetic exists
  uint32_t window = 0;      // sliding window (AttnCall::window; 0: full causal)
  uint32_t ring = 0;        // > 0: a ring KV cache of this many rows (AttnCall::ring; needs a window)
};

class DiffAttnCase final : public op_detail::CaseOf<DiffAttnCase, DiffAttnCaseParams> {
 public:
  const char* op() const override { return "diff_attn"; }
  std::string describe() const override;
  bool subgroup() const override { return p.subgroup; }
  void prepare(Device& dev, op_detail::KernelCache& kernels, bool subgroup, op_detail::Prepared& out) const override;
  RowShape row_shape() const override { return {p.S, p.H, p.D}; }
};

// One case (named and seeded like the table's), for tests whose shapes depend on the device (the
// per-invocation key budget) or that only run on request (the large shapes).
DiffAttnCase diff_attn_case(bool fp16, uint32_t H, uint32_t Hkv, uint32_t D, uint32_t S, uint32_t pos0, double lambda,
                            bool decode, uint64_t seed);

namespace op_detail {
// Shared by cases/diff_attn.cpp and cases/diff_v2_attn.cpp: the DiffAttnKernel of head width D, n_rep query
// heads per KV head and `softmax` from the cache (`op` starts its key).
const DiffAttnKernel& cached_diff_attn_kernel(Device& dev, KernelCache& kernels, const char* op, uint32_t D,
                                              uint32_t n_rep, bool sg, bool kv_q8, AttnSoftmax softmax);
// Records `kernel`: the split-K decode + merge (decode), else the prefill (split when splits > 0).
void record_diff_attn(const DiffAttnKernel& kernel, Program& prog, bool decode, const AttnCall& call, uint32_t splits,
                      uint32_t split_len, BufferRange q, BufferRange k, BufferRange v, BufferRange subln, BufferRange o,
                      const AttnSplitScratch& scratch);
}  // namespace op_detail

}  // namespace diffvk::bench
