// Differential attention kernels (docs/maths.md: differential attention + headwise RMSNorm): fused prefill with the
// headwise norm in the epilogue, and split-K decode in one dispatch (diff_attn_split: the last split of each tile to
// finish merges the partial states and runs the same epilogue). All pipelines are created in the constructor (load
// time). The same op with AttnSoftmax::single is the benchmark's two-pass baseline: one softmax of one query/key half,
// no norm (the core shaders/attn_core.glsl with NSM = 1; bench variants flash_attn*).
#pragma once
#include <memory>

#include "ops/attn_tuning.hpp"
#include "ops/kernel_options.hpp"
#include "ops/kv_format.hpp"

namespace diffvk {

struct AttnCall {
  uint32_t S = 0;  // query rows (positions pos0 .. pos0+S-1); keys 0 .. pos0+S-1
  uint32_t pos0 = 0;
  uint32_t H = 0, Hkv = 0;
  uint32_t capacity = 0;  // KV-cache rows per group (with a ring: the ring's rows)
  uint32_t q_stride = 0;  // elements between query rows (>= 2HD)
  uint32_t o_stride = 0;  // elements between output rows (>= 2HD)
  float lambda = 0.0f;
  float gain = 1.0f;  // 1 - lambda_init
  float eps = 1e-5f;
  // Optional 4-byte uint added to pos0 at run time, so a program recorded once can be replayed at
  // every decode position. With it, the caller keeps pos0 + dyn + S <= capacity, and decode splits
  // must cover the whole capacity (use decode_splits_for_capacity).
  BufferRange dyn_pos{};
  // AttnSoftmax::single only: which half attends, 0 = softmax(Q1·K1ᵀ/√D)·V, 1 = softmax(Q2·K2ᵀ/√D)·V.
  // AttnSoftmax::v2_plain: 0 even query heads, 1 odd ones, 2 every one.
  uint32_t half = 0;
  // Sliding window: a query at position t sees keys max(0, t − window + 1) .. t (itself included); 0 = every key
  // up to t (full causal). Push constants only: no pipeline of its own. The cooperative-matrix prefill does not
  // mask a window: windowed prefills always take the scalar kernels (prefill_uses_coopmat is false for them).
  uint32_t window = 0;
  // Ring KV cache (needs window > 0): key position j lives at row j mod capacity, and positions may pass the
  // capacity (validate checks only pos0 + S < 2^32). The rule that keeps every key a query needs in the ring:
  // the call's own S rows are appended BEFORE the call (rope_kv with RopeKvParams::ring, at row pos mod
  // capacity), overwriting positions up to pos0 + S − 1 − capacity, while the call's first query needs keys from
  // pos0 − window + 1: so capacity >= window + S − 1 (a ring for decode and prefill chunks of up to S_max rows:
  // window + S_max − 1 rows). A call that breaks it is invalid_argument. With dyn_pos the host keeps the same rule
  // and needs no capacity bound on the position.
  bool ring = false;
};

// What the attention op computes.
//   differential: per head O = (A1 − λ·A2)·V, then the headwise RMSNorm ⊙ subln · gain (the model's op).
//   single:       per head O = softmax(Q_half·K_halfᵀ/√D)·V (AttnCall::half), no norm, subln unused:
//                 what a runtime with only standard attention runs twice (the benchmark's two-pass
//                 baseline). Its pipelines are the bench variants flash_attn* of attn.comp, which are not in
//                 the core library: the caller registers them first (bench/shaders.hpp).
//   v2:           DIFF V2 (docs/maths.md "DIFF V2"): one softmax per query head over AttnCall::H query
//                 heads (2 per output head) of width D, K/V rows D wide ([Hkv][capacity][D]); output head
//                 h = O_2h − sigmoid(z_h)·O_2h+1 with z_h = q[i·q_stride + H·D + h] (the λ logits follow
//                 the query heads in q); o: S x o_stride, head h at h·D; no norm, subln unused.
//   v2_plain:     the bench's DIFF V2 baselines: plain attention over D-wide query heads (one softmax each,
//                 normalised, o head h at h·D), of AttnCall::H heads; AttnCall::half 0 = the even query heads of
//                 a V2 q row (heads 2h), 1 = the odd ones, 2 = every query head. Pipelines from
//                 the bench variants flash_v2* of shaders/attn.comp (registered by the caller, like single).
enum class AttnSoftmax : uint32_t { single = 1, differential = 2, v2 = 3, v2_plain = 4 };

// What the split-K kernel needs besides its operands (sizes: DiffAttnKernel::part_bytes, stat_bytes, sync_bytes).
//   part, stat: fp32 scratch (any memory: every live split writes its state before the merge reads it);
//   sync: the arrival counters, memory that is ZERO before the first dispatch and kept for this purpose (not
//         aliased with anything else); every dispatch leaves it zero again. Dispatches that share a sync range
//         are ordered by the barrier planner (it is read-write).
struct AttnSplitScratch {
  BufferRange part, stat, sync;
};

class DiffAttnKernel {
 public:
  // D: head half width (DIFF V2: head width); n_rep = H / Hkv (DIFF V2: query heads per KV head, even);
  // decode calls take up to max_decode_rows queries; kv: the caches' format (KvFormat::q8_0: Q8_0 blocks,
  // ops/kv_format.hpp, dequantized in registers; the k and v ranges then hold quants and scales).
  DiffAttnKernel(Device& device, KernelOptions options, uint32_t D, uint32_t n_rep, uint32_t max_decode_rows = 8,
                 AttnSoftmax softmax = AttnSoftmax::differential, KvFormat kv = KvFormat::storage);
  ~DiffAttnKernel();

  // q: S x q_stride; k, v: Hkv x capacity x 2D; subln: 2D; o: S x o_stride (normalised heads; head h at h*2D).
  // AttnSoftmax::single: subln is unused (may be empty) and o holds the unnormalised heads.
  // On a device whose invocations cannot stream every key (quirk loop_iteration_limit), a prefill
  // that may see more keys than attn_max_keys_per_invocation runs through the split-K kernels; it
  // then needs split scratch for prefill_splits() splits, else none.
  void record_prefill(Program& program, BufferRange q, BufferRange k, BufferRange v, BufferRange subln, BufferRange o,
                      const AttnCall& call, const AttnSplitScratch& scratch = {}) const;
  // 0 when the fused prefill kernel handles the call alone; else the split count (and split_len).
  uint32_t prefill_splits(const AttnCall& call, uint32_t* split_len) const;
  uint32_t prefill_splits_for_keys(uint64_t keys, uint32_t* split_len) const;  // keys a query may see
  // Keys a call streams across its splits: pos0 + S (every cache row with dyn_pos, unbounded with a ring),
  // at most window + S − 1 with a sliding window.
  static uint64_t call_keys(const AttnCall& call);

  // Whether a decode call of `rows` queries (at most max_decode_rows) that may see `keys` keys (call_keys) takes the
  // fused prefill kernel (record_prefill) instead of the split-K one (record_decode): the device tuning's attn_decode
  // (prefill on CPU drivers: docs/decisions/029), where one invocation may stream every key (no split).
  bool decode_on_prefill(uint32_t rows, uint64_t keys) const;
  bool decode_on_prefill(const AttnCall& call) const { return decode_on_prefill(call.S, call_keys(call)); }
  // Split-K decode for S <= max_decode_rows, in one dispatch (AttnSplitScratch).
  uint32_t decode_splits(const AttnCall& call, uint32_t* split_len) const;
  // Splits covering every key of the cache (for programs replayed at any position); with a sliding window, the
  // window + S − 1 keys a call may see (any position, ring or not).
  uint32_t decode_splits_for_capacity(const AttnCall& call, uint32_t* split_len) const;
  static uint64_t part_bytes(const AttnCall& call, uint32_t D, uint32_t splits,
                             AttnSoftmax softmax = AttnSoftmax::differential);
  static uint64_t stat_bytes(const AttnCall& call, uint32_t splits, AttnSoftmax softmax = AttnSoftmax::differential);
  // One uint32 per workgroup tile, bounded by one per (query, head) row: S·H·4 bytes.
  static uint64_t sync_bytes(const AttnCall& call) { return uint64_t(call.S) * call.H * 4; }
  void record_decode(Program& program, BufferRange q, BufferRange k, BufferRange v, BufferRange subln, BufferRange o,
                     const AttnSplitScratch& scratch, const AttnCall& call, uint32_t splits, uint32_t split_len) const;

  // The cooperative-matrix prefill (shaders/coopmat/diff_attn_coopmat.comp; attn_uses_coopmat): taken by
  // record_prefill when the call's keys fit one invocation (attn_coop_max_keys) and it has no sliding window
  // (AttnCall::window), else the scalar or split-K path as before.
  bool prefill_coopmat() const { return coop_ != nullptr; }
  const AttnCoopTiles& coop_tiles() const { return coop_tiles_; }
  bool prefill_uses_coopmat(const AttnCall& call) const;
  const AttnTiles& prefill_tiles() const { return prefill_tiles_; }
  // The kernel a call of `rows` queries over at most `keys` keys takes (decode up to max_decode_rows unless
  // decode_on_prefill, else prefill; the recipe's choice), as `diffvk plan` shows it: the shader and its attention
  // core. window: AttnCall::window (keys then counts the keys one query may see at most, and the coopmat prefill is
  // never the choice).
  std::string choice(uint32_t rows, uint64_t keys, uint32_t window = 0) const;
  const AttnTiles& decode_tiles(uint32_t S) const;
  uint32_t max_decode_rows() const { return max_decode_rows_; }
  AttnSoftmax softmax() const { return softmax_; }
  KvFormat kv_format() const { return kv_; }
  // Keys one invocation of these tiles may stream on this device (attn_max_keys_per_invocation).
  uint32_t max_keys_per_invocation(const AttnTiles& t) const {
    return attn_max_keys_per_invocation(device_.caps(), D_, t, subgroup_);
  }

 private:
  BufferRange dyn(const AttnCall& c) const;
  AttnCorePush core_push(const AttnCall& c, uint32_t min_split, uint32_t max_split) const;
  AttnCorePush push(const AttnCall& c, uint32_t min_split, uint32_t max_split) const;  // core_push + window, ring
  void record_split(Program& program, const LazyPipeline& pipe, const AttnTiles& t, BufferRange q, BufferRange k,
                    BufferRange v, BufferRange subln, BufferRange o, const AttnSplitScratch& scratch,
                    const AttnCall& call, uint32_t splits, uint32_t split_len, const char* label) const;
  const LazyPipeline& split_pipeline(const AttnTiles& t) const;
  uint32_t scalar_prefill_splits(uint64_t keys, uint32_t* split_len) const;  // without the coopmat shortcut
  uint32_t decode_splits_for_keys(const AttnCall& call, uint64_t keys, uint32_t* split_len) const;
  void validate(const AttnCall& c, BufferRange q, BufferRange k, BufferRange v, BufferRange subln, BufferRange o) const;
  bool single() const { return softmax_ == AttnSoftmax::single; }
  bool v2() const { return softmax_ == AttnSoftmax::v2; }
  bool plain() const { return softmax_ == AttnSoftmax::v2_plain; }
  bool d_wide() const { return v2() || plain(); }  // V (and q heads) D wide
  Device& device_;
  AttnSoftmax softmax_;
  KvFormat kv_;
  bool fp16_, subgroup_;
  uint32_t D_, n_rep_, max_decode_rows_;
  AttnTiles prefill_tiles_, decode1_tiles_, decodeN_tiles_;
  std::unique_ptr<LazyPipeline> prefill_, decode1_, decodeN_;
  std::unique_ptr<LazyPipeline> prefill_vec_;  // CPU drivers: the epilogue's vector stores (OVEC)
  bool vector_store(BufferRange o, BufferRange subln,
                    const AttnCall& call) const;  // the dispatch may take prefill_vec_
  AttnCoopTiles coop_tiles_;
  uint32_t coop_max_keys_ = 0;
  std::unique_ptr<LazyPipeline> coop_;  // null: no cooperative-matrix prefill
};

}  // namespace diffvk
