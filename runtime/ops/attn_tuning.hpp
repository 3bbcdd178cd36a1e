// Tile choice for the attention kernels (shaders/attn_core.glsl): a pure function of (DeviceCaps,
// shape), unit-tested with simulated devices (16/32/48 KiB shared memory, subgroups 4..128, no fp16).
// The same function serves the fused differential kernel (2 softmaxes) and the single-softmax
// baseline (1 softmax), so both get the same policy and register budget.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "diffvk/device.hpp"

namespace diffvk {

enum class AttnPhase { prefill, decode };

struct AttnTiles {
  uint32_t wg = 0;        // invocations per workgroup = lanes across the head dimensions (one subgroup)
  uint32_t subgroup = 0;  // nonzero: the pipeline requires this subgroup size (= wg; size control)
  uint32_t br = 0;        // row slots per workgroup (query-major (query, head) pairs of one K/V group)
  uint32_t bc = 0;        // split-K granularity: a split holds a multiple of bc keys
  uint32_t tc = 0;        // lanes across the output columns (= wg: every lane owns a slice of every row)
  uint32_t qb = 0;        // whole queries per workgroup (br / n_rep, at least 1)
  uint32_t chunk = 0;     // elements per K/V load: 8 (16 bytes of halves), 4 (vec4), 0 (element-wise: D % 4 != 0)
  uint32_t nsm = 2;       // softmaxes (2: differential, 1: the single-softmax baseline and DIFF V2)
  bool v2 = false;        // DIFF V2: V rows D wide (not 2D) ...
  bool paired = false;    // ... and br even (slot pairs are a head's two softmaxes; false: the bench's plain baselines)
  uint32_t blocks = 0;    // 1: the key-block core (attn_core.glsl attend_blocks: keys in blocks of wg, one per lane,
                          // for the subgroup variant), 0: one key at a time (quirk per_key_attention, or no subgroups)
  bool kv_halves = false;  // K/V hold halves (fp16 storage and not a Q8_0 cache): what a staged block holds
  uint32_t nsg =
      1;  // subgroups per workgroup (each with its br slots); > 1 (prefill, key-block core, not on CPU drivers:
          // quirk no_kv_staging): each block of K/V rows is staged once in shared memory for all nsg·br slots
  uint32_t qh = 0;  // 1 (staged, fp16 storage): Q in shared memory as halves, where fp32 Q would keep fewer queries
  uint32_t shared_bytes = 0;  // shared memory of the larger variant: the no-subgroup one's lane sums, or the key-block
                              // core's Q and probabilities (the per-key subgroup variant uses none)
  uint32_t accumulators = 0;  // fp32 accumulator registers per invocation (nsm x br x 2D / wg, rounded to chunks)
};

// Register budget (fp32 accumulators per invocation): 32 on GPUs (phone register files: Mali has 64
// registers per thread at full occupancy), 16 where subgroups are at least 64 wide (GCN: >= 4 subgroups
// per SIMD need <= 64 VGPRs), 256 on CPU drivers (their "registers" are cache-resident).
uint32_t attn_accumulator_budget(const DeviceCaps& caps);

// Shared memory the core declares for these tiles without subgroup arithmetic (lane sums).
uint32_t attn_shared_bytes(uint32_t nsm, uint32_t wg, uint32_t br);
// Shared memory of the key-block core for these tiles (Q, the block's probabilities; see attn_core.glsl).
uint32_t attn_block_shared_bytes(const AttnTiles& t, uint32_t D);

// decode_rows: queries per decode call the tiles should cover in one workgroup (1..8).
// Throws Error(unsupported) when no legal tiling exists.
// v2: DIFF V2 tiles (nsm must be 1; n_rep counts query heads per KV head and, when paired, must be even).
// v2 && !paired: plain attention over D-wide heads (the bench's DIFF V2 baselines).
// kv_q8: the caches hold Q8_0 blocks (a staged block then holds their dequantized floats).
AttnTiles choose_attn_tiles(const DeviceCaps& caps, bool fp16, uint32_t D, uint32_t n_rep, AttnPhase phase,
                            uint32_t decode_rows = 1, uint32_t nsm = 2, bool v2 = false, bool paired = true,
                            bool kv_q8 = false);

// "" when legal on `caps`, else the reason (invocations, shared memory, consistency).
std::string check_attn_tiles(const DeviceCaps& caps, bool fp16, uint32_t D, uint32_t n_rep, const AttnTiles& t,
                             bool fused_epilogue = false);

// Keys one invocation of the attention core may stream on this device: unlimited (UINT32_MAX) unless
// the device has the loop_iteration_limit quirk, then what fits its per-invocation loop budget (the
// core's loop iterations per key, for the subgroup or the shared-memory variant, plus fixed work),
// a multiple of bc. Throws Error(unsupported) where not even one block of bc keys fits that budget (the driver would
// end the loops early and the rows be wrong).
uint32_t attn_max_keys_per_invocation(const DeviceCaps& caps, uint32_t D, const AttnTiles& t, bool subgroup = false);

// Fewest keys a split takes at run time (the split kernels size splits from the live length).
constexpr uint32_t kAttnMinSplitKeys = 64;

// Split-K count: enough workgroups to fill the device (4 per compute unit when the driver reports
// them, else 16 in total), never more splits than bc-key blocks, each split a whole number of
// blocks and at most max_split_len keys. Returns the largest keys per split through split_len (the
// shaders shrink splits to the live length: ceil(T / splits), at least kAttnMinSplitKeys).
uint32_t choose_splits(const DeviceCaps& caps, uint32_t keys, uint32_t bc, uint32_t workgroups_per_split,
                       uint32_t* split_len, uint32_t max_split_len = UINT32_MAX);

// Push constants of shaders/attn_core.glsl (fused, split and single-softmax kernels alike): one layout,
// shared by every variant of DiffAttnKernel (AttnSoftmax).
struct AttnCorePush {
  uint32_t S = 0, pos0 = 0, H = 0, n_rep = 0, capacity = 0, q_stride = 0, o_stride = 0, qk_off = 0, min_split = 0,
           max_split = 0;
  float scale = 0.0f, lambda = 0.0f, gain = 0.0f, eps = 0.0f;
  uint32_t q_hstride = 0;  // 0: heads DV apart in a row of q
  // AttnCall::window (0: full causal) and ring; diff_attn_coopmat reads neither (windowed calls never take it).
  uint32_t window = 0, ring = 0;
};
static_assert(sizeof(AttnCorePush) == 68, "attn_core.glsl's push block");
// Workgroups along x: blocks of br row slots over the n_rep x S (query, head) rows of one group.
inline uint32_t attn_row_blocks(uint32_t S, uint32_t n_rep, const AttnTiles& t) {
  return (n_rep * S + t.br * t.nsg - 1) / (t.br * t.nsg);
}
// Queries whose every head one workgroup holds (nsg·br / n_rep, at least 1): how many queries share each K/V load.
inline uint32_t attn_queries_per_workgroup(const AttnTiles& t, uint32_t n_rep) {
  return t.nsg * t.br / n_rep > 0 ? t.nsg * t.br / n_rep : 1;
}
// Queries per workgroup the prefill tiles aim for, staging K/V (where shared memory and invocations allow).
constexpr uint32_t kAttnStagedQueries = 16;

// The same tiles with one subgroup per workgroup (no staged K/V): what the chooser had before staging.
AttnTiles attn_unstaged(const AttnTiles& t, uint32_t D);

// The cooperative-matrix prefill (shaders/coopmat/diff_attn_coopmat.comp): a workgroup of nsg subgroups
// of sg invocations (pinned to sg where the device's sizes vary) owns br = cm row slots of one K/V group and takes
// the keys in blocks of bc (a multiple of cn and ck): S = Q·Kᵀ and O += P·V on cm x cn x ck matrices, the driver's
// shape (DeviceCaps::coopmat_m/n/k). The differential softmax over fp16 K/V rows only (DIFF V2, the single-softmax
// baselines and the Q8_0 cache keep the scalar kernels).
struct AttnCoopTiles {
  uint32_t sg = 0, pin = 0, nsg = 0, wg = 0;
  uint32_t cm = 0, cn = 0, ck = 0;
  uint32_t br = 0, bc = 0;
  uint32_t shared_bytes = 0;
};
// Shared memory diff_attn_coopmat.comp declares for D, br and bc.
uint32_t attn_coop_shared_bytes(uint32_t D, uint32_t br, uint32_t bc);
// The cooperative-matrix tiles for this kernel on `caps`, or false and why not (no usable shape, fp32 storage, not
// the differential softmax, a Q8_0 cache, D not a multiple of the shape, the device's limits). Ignores quirks.
bool fit_attn_coop(const DeviceCaps& caps, bool fp16, uint32_t D, uint32_t nsm, bool v2, bool kv_q8, AttnCoopTiles* out,
                   std::string* why_not = nullptr);
// Whether the prefill takes the cooperative-matrix kernel: fit_attn_coop, and no quirk coopmat_emulated (CPU
// drivers; the tuning overrides coopmat=on and attn_core=coopmat drop it). The same policy as linear_uses_coopmat.
bool attn_uses_coopmat(const DeviceCaps& caps, bool fp16, uint32_t D, uint32_t nsm, bool v2, bool kv_q8,
                       AttnCoopTiles* out, std::string* why_not = nullptr);
// Keys one invocation of the cooperative-matrix kernel may stream (quirk loop_iteration_limit; else unlimited):
// a conservative count of its loop iterations per block of bc keys, as if nothing were unrolled.
uint32_t attn_coop_max_keys(const DeviceCaps& caps, uint32_t D, const AttnCoopTiles& t);
// Its specialization constants: {WG, NSG, D, CM, CN, CK, BC}.
std::vector<uint32_t> attn_coop_spec_constants(const AttnCoopTiles& t, uint32_t D);

// Specialization constants of attn_core.glsl for these tiles: {WG (= nsg · L lanes), HD, RB, CHUNK} (ids 0-3; the
// kernel adds KVQ8 (4), KB (5) = t.blocks, NSG (6) = t.nsg and QH (7) = t.qh).
std::vector<uint32_t> attn_spec_constants(const AttnTiles& t, uint32_t D);

}  // namespace diffvk
