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
  // A model's case (attn_model_cases): the most keys that model's decode calls may see (max_position_embeddings), and
  // the decode then takes the kernel the model's does (DiffAttnKernel::decode_on_prefill: the prefill kernel where the
  // tuning's attn_decode and that many keys allow; the self-test runs what the model records). 0: the split-K decode.
  uint32_t model_keys = 0;
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
// Shared by cases/diff_attn.cpp and cases/diff_v2_attn.cpp: the DiffAttnKernel of head width D for H heads over
// Hkv KV heads (n_rep = H / Hkv query heads per KV head; 2H / Hkv for AttnSoftmax::v2) and `softmax`, from the
// cache (`op` starts its key). Throws invalid_argument when Hkv is 0 or does not divide H.
const DiffAttnKernel& cached_diff_attn_kernel(Device& dev, KernelCache& kernels, const char* op, uint32_t H,
                                              uint32_t Hkv, uint32_t D, bool sg, bool kv_q8, AttnSoftmax softmax);
// The parameters of a case of either table: H / Hkv heads of width D, S query rows from pos0, prefill or decode,
// `Mix` (diff_attn's lambda, diff_v2_attn's z_std) set to mix. A function object so that each table names it `attn`.
template <class P, double P::*Mix>
struct AttnCaseParams {
  P operator()(uint32_t H, uint32_t Hkv, uint32_t D, uint32_t S, uint32_t pos0, double mix, bool decode,
               bool max_splits = false) const {
    P c;
    c.H = H, c.Hkv = Hkv, c.D = D, c.S = S, c.pos0 = pos0, c.*Mix = mix, c.decode = decode, c.max_splits = max_splits;
    return c;
  }
};
// A case's name for either table, up to its Q8_0 cache flag: "<op-mode> H=../.. D=.. S=.. pos0=.. <mix_name>=<mix>",
// then " max-splits", `after_splits`, " shared-reduction" and " kv=q8_0" where they apply.
template <class P>
std::string describe_attn_case(bool fp16, const P& p, const char* mix_name, double mix, const char* after_splits) {
  std::string s = precision_prefix(fp16) + strf("%s H=%u/%u D=%u S=%u pos0=%u %s=%g", p.decode ? "decode" : "prefill",
                                                p.H, p.Hkv, p.D, p.S, p.pos0, mix_name, mix);
  if (p.max_splits) s += " max-splits";
  s += after_splits;
  if (!p.subgroup) s += " shared-reduction";
  if (p.kv_q8) s += " kv=q8_0";
  return s;
}
// The cases of either table at a model's attention (model_shape_cases): its head width and query heads per KV head
// (over at most two KV heads), so that the prefill, the one-row decode and the several-row decode are the model's own
// pipelines; the same with the shared-memory reduction (the subgroup fallback's retest) and, where `q8` (the head
// width and the model kind allow a Q8_0 KV cache: SessionOptions::kv_cache), with one. mix[i]: each case's mix.
template <class Case, class P, double P::*Mix>
OpCases attn_model_cases(const ModelShape& m, uint64_t first_seed, const AttnCaseParams<P, Mix>& attn,
                         const double (&mix)[3], bool q8) {
  CaseTable<Case> b(first_seed);
  if (m.kv_heads == 0 || m.heads % m.kv_heads || m.head_dim == 0) return b.take();
  const uint32_t hkv = std::min(m.kv_heads, 2u), h = m.heads / m.kv_heads * hkv, D = m.head_dim;
  for (bool sg : {true, false})
    for (bool kv_q8 : {false, true}) {
      if (kv_q8 && (!sg || !q8)) continue;
      for (P c : {attn(h, hkv, D, 5, 0, mix[0], false), attn(h, hkv, D, 1, 40, mix[1], true),
                  attn(h, hkv, D, 3, 65, mix[2], true)}) {
        c.subgroup = sg, c.kv_q8 = kv_q8, c.model_keys = c.decode ? m.max_positions : 0;
        b.add(c);
      }
    }
  return b.take();
}
// Records `kernel`: the split-K decode + merge (decode), else the prefill (split when splits > 0).
void record_diff_attn(const DiffAttnKernel& kernel, Program& prog, bool decode, const AttnCall& call, uint32_t splits,
                      uint32_t split_len, BufferRange q, BufferRange k, BufferRange v, BufferRange subln, BufferRange o,
                      const AttnSplitScratch& scratch);
}  // namespace op_detail

}  // namespace diffvk::bench
