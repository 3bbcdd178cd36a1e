#include "ops/attn_tuning.hpp"

#include <algorithm>
#include <vector>

namespace diffvk {

namespace {
uint32_t pow2_floor(uint32_t v) {
  uint32_t p = 1;
  while (p * 2 <= v) p *= 2;
  return p;
}
uint32_t cdiv(uint32_t a, uint32_t b) { return (a + b - 1) / b; }
// Elements per K/V load (spec constant CHUNK of shaders/attn_core.glsl): 16-byte loads of 8 halves
// when every lane still gets one, else 4 elements; element-wise when the halves do not split.
// dv: width of a V row (2D, or D for DIFF V2).
uint32_t chunk_of(bool fp16, uint32_t D, uint32_t dv, uint32_t wg) {
  if (fp16 && D % 8 == 0 && cdiv(dv, 8) >= wg) return 8;
  return D % 4 == 0 ? 4 : 0;
}
// Per-lane chunk counts of the core (the constants at the top of shaders/attn_core.glsl).
struct CoreShape {
  uint32_t nkv, nvv, cw;
};
CoreShape core_shape(uint32_t chunk, uint32_t D, uint32_t wg, uint32_t nsm, uint32_t dv) {
  const uint32_t cw = chunk == 8 ? 8 : 4;
  return {cdiv(nsm * cdiv(D, cw), wg), cdiv(cdiv(dv, cw), wg), cw};
}
// The narrowest subgroup the device may run: its minimum where the size can be chosen, else its only size.
uint32_t narrowest_subgroup(const DeviceCaps& caps) {
  return caps.subgroup_size_control && caps.subgroup_min_size ? caps.subgroup_min_size : caps.subgroup_size;
}
uint32_t accumulators(uint32_t chunk, uint32_t D, uint32_t wg, uint32_t br, uint32_t nsm, uint32_t dv) {
  const CoreShape c = core_shape(chunk, D, wg, nsm, dv);
  return nsm * br * c.nvv * c.cw;
}
}  // namespace

uint32_t attn_accumulator_budget(const DeviceCaps& caps) {
  // CPU drivers: 256 (their "registers" are cache-resident; at D = 128 with n_rep = 4 a budget of 128 halved the
  // fused kernel's slots to 2, and it read K/V twice as often as the two-pass baseline: 0.79x of it on lavapipe).
  if (caps.kind == DeviceKind::cpu) return 256;
  // Wave64 at the least (GCN: raven, renoir): 16, so that the attention kernels stay within 64 VGPRs, i.e. >= 4
  // subgroups per SIMD (radv raven, key-block core: 32 accumulators = 4 slots took 84 VGPRs and 3 subgroups,
  // 24 = 3 slots still 84 at D = 64; 16 = 2 slots take 48 VGPRs and 5 subgroups, at half the K/V reuse).
  return narrowest_subgroup(caps) >= 64 ? 16 : 32;
}

uint32_t attn_shared_bytes(uint32_t nsm, uint32_t wg, uint32_t br) { return 4 * nsm * br * wg; }

uint32_t attn_block_shared_bytes(const AttnTiles& t, uint32_t D) {
  const uint32_t dv = t.v2 ? D : 2 * D;
  const CoreShape c = core_shape(t.chunk, D, t.wg, t.nsm, dv);
  const uint32_t vpc = c.cw / 4, nqt = t.nsm * cdiv(D, c.cw), nvt = cdiv(dv, c.cw);
  uint32_t lg = 1;
  while (lg < nvt) lg *= 2;
  lg = std::min(lg, t.wg);
  const uint32_t nst = t.nsm * t.br;
  const uint32_t q = t.br * nqt * vpc, fold = (t.wg - lg) * nst * c.nvv * vpc;  // vec4s (QSZ, CSZ)
  const uint32_t probs = 16 * cdiv(nst * t.wg, 4);
  // The shader declares every array; those of the other mode take one element (kUnused bytes in all).
  constexpr uint32_t kUnusedStaging = 16 + 8 + 8;  // sKV4[1], sKV2[1] and sQh[1]
  if (t.nsg <= 1) return 16 * std::max(q, fold) + probs + kUnusedStaging;
  // Per subgroup: Q (fp32 in sQ, or halves in sQh) and the probabilities, later the fold in their place.
  const uint32_t per_subgroup = t.qh ? 8 * q + std::max(probs, 16 * fold) : std::max(16 * q + probs, 16 * fold);
  // The staged block (SMODE of attn_core.glsl): L rows of K, later L rows of V in the same place, each row an odd
  // number of units; 8-byte units for 4-element chunks of halves, else 16-byte ones (floats take VPC units per chunk).
  const bool halves = t.kv_halves;
  const uint32_t unit = halves && c.cw == 4 ? 8 : 16, upc = halves ? 1 : vpc;
  const uint32_t staged = t.wg * std::max((nqt * upc) | 1, (nvt * upc) | 1) * unit;
  return t.nsg * per_subgroup + staged + 16 /* sP[1] */ + (unit == 8 ? 16 : 8) /* the other staging array */ +
         (t.qh ? 0 : 8) /* sQh[1] */;
}

namespace {
uint32_t tile_shared_bytes(const AttnTiles& t, uint32_t D) {
  return std::max(attn_shared_bytes(t.nsm, t.wg, t.br), t.blocks ? attn_block_shared_bytes(t, D) : 0u);
}
}  // namespace

AttnTiles attn_unstaged(const AttnTiles& t, uint32_t D) {
  AttnTiles u = t;
  u.nsg = 1;
  u.qh = 0;
  u.shared_bytes = tile_shared_bytes(u, D);
  return u;
}

std::vector<uint32_t> attn_spec_constants(const AttnTiles& t, uint32_t D) { return {t.wg * t.nsg, D, t.br, t.chunk}; }

std::string check_attn_tiles(const DeviceCaps& caps, bool fp16, uint32_t D, uint32_t n_rep, const AttnTiles& t, bool) {
  auto pow2 = [](uint32_t v) { return v && !(v & (v - 1)); };
  if (D == 0 || D % 2) return "D must be even";
  if (!pow2(t.wg) || t.wg > caps.max_workgroup_invocations || t.wg > caps.max_workgroup_size[0])
    return "workgroup size " + std::to_string(t.wg) + " illegal";
  if (t.tc != t.wg) return "every lane must own a slice of every row (tc == wg)";
  if (t.subgroup && (t.subgroup != t.wg || !caps.subgroup_size_control || t.subgroup < caps.subgroup_min_size ||
                     t.subgroup > caps.subgroup_max_size))
    return "required subgroup size must equal the workgroup and lie in the device's range";
  if (t.nsm != 1 && t.nsm != 2) return "nsm must be 1 or 2";
  if (!t.br) return "br is zero";
  if (t.v2 && t.nsm != 1) return "DIFF V2 tiles need nsm 1";
  if (t.paired && (!t.v2 || t.br % 2 || n_rep % 2)) return "paired DIFF V2 tiles need even br and even n_rep";
  const uint32_t dv = t.v2 ? D : 2 * D;
  if (!t.bc) return "bc is zero";
  if (t.qb != std::max(1u, t.br / n_rep)) return "qb must be br / n_rep (at least 1)";
  if (t.chunk != chunk_of(fp16, D, dv, t.wg)) return "chunk does not match the storage type, D and the lanes";
  if (t.accumulators != accumulators(t.chunk, D, t.wg, t.br, t.nsm, dv)) return "accumulators do not match the tiles";
  if (t.br > (t.paired ? 2u : 1u) && t.accumulators > attn_accumulator_budget(caps))
    return "too many accumulators per invocation";
  if (t.blocks > 1 || (t.blocks && !caps.subgroup_arithmetic_compute))
    return "the key-block core needs subgroup arithmetic";
  if (t.nsg == 0) return "nsg is zero";
  if (uint64_t(t.nsg) * t.wg > std::min(caps.max_workgroup_invocations, caps.max_workgroup_size[0]))
    return std::to_string(t.nsg) + " subgroups of " + std::to_string(t.wg) + " exceed the workgroup limits";
  if (t.nsg > 1 && (!t.blocks || t.chunk == 0)) return "staged K/V (nsg > 1) needs the key-block core and chunked rows";
  if (t.qh > 1 || (t.qh && (t.nsg < 2 || !fp16))) return "Q in halves (qh) needs staged K/V and fp16 storage";
  if (t.shared_bytes != tile_shared_bytes(t, D)) return "shared_bytes does not match the tiles";
  if (t.shared_bytes > caps.max_shared_memory)
    return "shared memory " + std::to_string(t.shared_bytes) + " > " + std::to_string(caps.max_shared_memory);
  return "";
}

AttnTiles choose_attn_tiles(const DeviceCaps& caps, bool fp16, uint32_t D, uint32_t n_rep, AttnPhase phase,
                            uint32_t decode_rows, uint32_t nsm, bool v2, bool paired, bool kv_q8) {
  paired = paired && v2;
  if (D == 0 || n_rep == 0) throw Error(Status::invalid_argument, "attention tiles: D and n_rep must be positive");
  if (v2 && (nsm != 1 || (paired && n_rep % 2)))
    throw Error(Status::invalid_argument,
                "attention tiles: DIFF V2 needs one softmax and an even n_rep (query heads per KV head)");
  const uint32_t dv = v2 ? D : 2 * D;
  const uint32_t max_inv = std::min(caps.max_workgroup_invocations, caps.max_workgroup_size[0]);
  // One subgroup per workgroup: the lanes that split the head dimensions sum with subgroupAdd.
  const uint32_t sg = caps.subgroup_size ? caps.subgroup_size : 32;
  AttnTiles t;
  t.wg = pow2_floor(std::max(1u, std::min(sg, max_inv)));
  // With subgroup size control, narrow the subgroup to the 4-element chunks of a V row, so that no
  // lane idles (radv: 32 instead of its default 64 at D = 64).
  if (caps.subgroup_size_control && caps.subgroup_min_size) {
    const uint32_t chunks = std::max(1u, cdiv(dv, 4));
    uint32_t want = t.wg;
    while (want > caps.subgroup_min_size && want / 2 >= 1 && chunks < want) want /= 2;
    if (want != t.wg) {
      t.wg = want;
      t.subgroup = want;
    }
  }
  t.tc = t.wg;
  t.bc = 16;
  t.nsm = nsm;
  t.v2 = v2;
  t.paired = paired;
  t.kv_halves = fp16 && !kv_q8;
  t.chunk = chunk_of(fp16, D, dv, t.wg);
  // Row slots: decode covers every head of the group for all its rows; prefill every head of one or
  // two queries (query-major slots: the heads of one query share their causal limit). Both shrink to
  // the register budget, down to one slot (which is always legal, whatever its accumulators; DIFF V2:
  // down to the two slots of one pair, and always an even count).
  const uint32_t want =
      phase == AttnPhase::decode ? n_rep * std::clamp(decode_rows, 1u, 8u) : n_rep * (n_rep == 1 ? 2 : 1);
  // The key-block core runs on a CPU driver only when forced (tests: tuning attn_core=blocks); it keeps 128
  // accumulators there: its unrolled loops at 256 took LLVM 10x as long to compile (88 s against 8 s for the test).
  const bool blocks_wanted = caps.subgroup_arithmetic_compute && !caps.has_quirk("per_key_attention");
  const uint32_t budget = blocks_wanted && caps.kind == DeviceKind::cpu ? 128u : attn_accumulator_budget(caps);
  const uint32_t step = paired ? 2 : 1;
  // At most 64 slots; 16 on CPU drivers, whose compile time grows with the unrolled slot loops (with 32 slots
  // at D = 8 the conformance table took 2.3x as long) while their speed comes from a group's heads (<= 16 here).
  // Their decode of several rows keeps one row's heads, the one-row tile's slots: the rows then take workgroups of
  // their own, and the several-row decode is the one-row decode's pipeline, not one more for LLVM to compile at its
  // first dispatch. Every model records it (a prompt of 2-8 tokens, a speculative verify, the self-test), and LLVM
  // took 5.2 s to compile 16 slots at D = 32, 3.3 s for 4 slots at D = 64 (lavapipe 22.3; the one-row tile 0.6 s).
  uint32_t max_slots = caps.kind == DeviceKind::cpu ? 16u : 64u;
  if (caps.kind == DeviceKind::cpu && phase == AttnPhase::decode) max_slots = std::clamp(n_rep, 1u, 16u);
  t.br = std::max(step, std::min(want, max_slots) / step * step);
  // DIFF V2 holds a Q slice per slot for a single softmax, so its Q registers grow with br as fast as its
  // accumulators: it counts both, against 1.5x the budget, the registers V1 holds at its usual n_rep = 4
  // (e.g. D = 64 on wave64: V1 br 4 = 32 accumulators + 16 Q floats; V2 br 6 = 24 + 24; radv raven: 72 VGPRs).
  auto over = [&](uint32_t br) {
    const uint32_t acc = accumulators(t.chunk, D, t.wg, br, nsm, dv);
    if (!v2) return acc > budget;
    return acc + br * core_shape(t.chunk, D, t.wg, nsm, dv).nkv * (t.chunk == 8 ? 8 : 4) > budget * 3 / 2;
  };
  while (t.br > step && over(t.br)) t.br -= step;
  // The key-block core wherever the subgroup variant runs, unless the driver is better served one key at a
  // time (quirk per_key_attention), and while its shared memory fits.
  // The slots shrink until the shared memory fits; the per-key core is taken when the key-block core does not
  // fit even with the fewest slots.
  const uint32_t br_regs = t.br;
  auto fit = [&](uint32_t blocks) {
    t.blocks = blocks;
    t.br = br_regs;
    for (;;) {
      t.qb = std::max(1u, t.br / n_rep);
      t.accumulators = accumulators(t.chunk, D, t.wg, t.br, nsm, dv);
      t.shared_bytes = tile_shared_bytes(t, D);
      if (t.shared_bytes <= caps.max_shared_memory || t.br <= step) return t.shared_bytes <= caps.max_shared_memory;
      t.br -= step;
    }
  };
  if (!(blocks_wanted && fit(1))) fit(0);
  // Prefill on GPUs: stage each block of K/V rows once in shared memory for several subgroups (Br x Bc), enough for
  // kAttnStagedQueries queries where the workgroup limits and shared memory allow (fewer subgroups otherwise; none
  // below 2). Not on CPU drivers (quirk no_kv_staging), where shared memory is ordinary memory and each barrier a
  // coroutine switch; not for element-wise rows (chunk 0).
  if (phase == AttnPhase::prefill && t.blocks && t.chunk != 0 && !caps.has_quirk("no_kv_staging")) {
    const AttnTiles single = t;
    // Wave64-only devices (GCN: 4 SIMD16s per compute unit, whose shared memory is the workgroup maximum): the
    // resident workgroups must keep >= 16 subgroups per compute unit, the >= 4 per SIMD the unstaged kernels have.
    auto resident = [&](const AttnTiles& x) {
      return narrowest_subgroup(caps) < 64 || (caps.max_shared_memory / x.shared_bytes) * x.nsg * (x.wg / 64) >= 16;
    };
    auto most_subgroups = [&](AttnTiles x) {
      x.nsg = std::min(cdiv(kAttnStagedQueries * n_rep, x.br), max_inv / x.wg);
      for (; x.nsg >= 2; --x.nsg) {
        x.shared_bytes = tile_shared_bytes(x, D);
        if (x.shared_bytes <= caps.max_shared_memory && resident(x)) break;
      }
      return x;
    };
    t = most_subgroups(t);
    // With fp16 storage, Q can sit in shared memory as halves (q is fp16: exact), which leaves room for more
    // subgroups; taken only where fp32 Q keeps fewer than kAttnStagedQueries queries and halves keep more: the
    // conversions cost VALU instructions (radv gfx1100, D = 64: 1.26 -> 1.43 VALU per FMA; navi21 fuses them into
    // v_fma_mix: 1.17 -> 1.18).
    if (fp16 && attn_queries_per_workgroup(t, n_rep) < kAttnStagedQueries) {
      AttnTiles h = single;
      h.qh = 1;
      h = most_subgroups(h);
      if (h.nsg >= 2 && attn_queries_per_workgroup(h, n_rep) > attn_queries_per_workgroup(t, n_rep)) t = h;
    }
    if (t.nsg < 2) t = single;
  }
  const std::string why = check_attn_tiles(caps, fp16, D, n_rep, t);
  if (!why.empty())
    throw Error(Status::unsupported, "no legal attention tiling for D=" + std::to_string(D) +
                                         ", n_rep=" + std::to_string(n_rep) + ": " + why);
  return t;
}

uint32_t attn_max_keys_per_invocation(const DeviceCaps& caps, uint32_t D, const AttnTiles& t, bool subgroup) {
  if (!caps.has_quirk("loop_iteration_limit")) return UINT32_MAX;
  constexpr uint64_t kBudget = 60000;                                   // llvmpipe stops at 65535; keep a margin
  const CoreShape c = core_shape(4, D, t.wg, t.nsm, t.v2 ? D : 2 * D);  // 4-element chunks: the larger counts
  const uint64_t nst = uint64_t(t.nsm) * t.br;
  // Back-edges per key in shaders/attn_core.glsl: every constant-trip loop there carries [[unroll]]
  // (the test "one invocation streams the device's whole per-invocation key budget" fails if one
  // stays a loop), so the key loop itself, plus the shared-memory lane sums of the no-subgroup
  // variant, whose loop over the L lanes is not unrolled.
  const uint64_t per_key = 2 + (subgroup ? 0 : nst * (t.wg + 1));
  // Once per invocation (initialisation, Q load, epilogue or partial writes), counted as loops.
  const uint64_t fixed =
      256 + nst * (2 + 2 * c.nvv) + t.br * (1 + c.nkv * 10) + t.br * (1 + c.nvv * 10) + nst * (1 + t.wg);
  // One block of keys is the least an invocation streams: where even that passes the budget, the driver would end
  // the loops early and the rows would be silently wrong (wide lane groups without subgroup arithmetic, e.g.
  // ContextOptions::simulate_subgroup_size 128 on llvmpipe: 129 shared-memory sums per key and slot).
  if (fixed + per_key * t.bc > kBudget)
    throw Error(Status::unsupported,
                "attention: one block of " + std::to_string(t.bc) + " keys with " + std::to_string(t.wg) +
                    " lanes and " + std::to_string(t.br) + " row slots (D=" + std::to_string(D) +
                    (subgroup ? "" : ", shared-memory lane sums") + ") takes " +
                    std::to_string(fixed + per_key * t.bc) + " loop iterations, past the " + std::to_string(kBudget) +
                    " one invocation may run on this device (quirk loop_iteration_limit)");
  const uint64_t keys = (kBudget - fixed) / per_key;
  return static_cast<uint32_t>(std::max<uint64_t>(1, keys / t.bc) * t.bc);
}

uint32_t choose_splits(const DeviceCaps& caps, uint32_t keys, uint32_t bc, uint32_t workgroups_per_split,
                       uint32_t* split_len, uint32_t max_split_len) {
  keys = std::max(keys, 1u);
  bc = std::max(bc, 1u);
  const uint32_t target = caps.compute_units ? 4 * caps.compute_units : 16;
  const uint32_t blocks = cdiv(keys, bc);
  uint32_t splits = cdiv(target, std::max(1u, workgroups_per_split));
  splits = std::clamp(splits, 1u, std::min(blocks, caps.max_workgroup_count[2] ? caps.max_workgroup_count[2] : 1u));
  uint32_t blocks_per_split = cdiv(blocks, splits);
  blocks_per_split = std::min(blocks_per_split, std::max(1u, max_split_len / bc));
  *split_len = blocks_per_split * bc;
  return cdiv(keys, *split_len);
}

uint32_t attn_coop_shared_bytes(uint32_t D, uint32_t br, uint32_t bc) {
  const uint32_t dv = 2 * D;
  // sQ, sKV (fp16 rows of dv + 8 halves), sP (rows of bc + 8 halves, two softmaxes), sS (fp32), sO (fp32 rows of
  // dv + 4), sM, sL, sA (2·br floats each) and sF (br floats).
  return 2 * (br + bc) * (dv + 8) + 2 * 2 * br * (bc + 8) + 4 * 2 * br * bc + 4 * 2 * br * (dv + 4) + 4 * 7 * br;
}

bool fit_attn_coop(const DeviceCaps& c, bool fp16, uint32_t D, uint32_t nsm, bool v2, bool kv_q8, AttnCoopTiles* out,
                   std::string* why_not) {
  auto no = [&](const std::string& why) {
    if (why_not) *why_not = why;
    return false;
  };
  if (c.coopmat_m == 0) return no(c.coopmat_note.empty() ? "no VK_KHR_cooperative_matrix" : c.coopmat_note);
  if (!fp16) return no("fp32 precision (the cooperative-matrix shader takes fp16)");
  if (nsm != 2 || v2)
    return no(
        "only the differential softmax has a cooperative-matrix kernel (DIFF V2 and the single-softmax "
        "baselines keep the scalar one)");
  if (kv_q8) return no("the Q8_0 KV cache keeps the scalar kernel (the cooperative-matrix one reads fp16 rows)");
  const uint32_t cm = c.coopmat_m, cn = c.coopmat_n, ck = c.coopmat_k;
  if (D % ck != 0 || (2 * D) % cn != 0 || cn % 8 != 0)
    return no("D=" + std::to_string(D) + " is not a multiple of the cooperative-matrix shape " + c.coopmat_shape() +
              " (D % K and 2D % N must be 0)");
  if (std::max(cn, ck) % std::min(cn, ck) != 0)
    return no("the shape's N and K do not divide one another (" + c.coopmat_shape() + ")");
  if (c.subgroup_size == 0) return no("the subgroup size is unknown");
  const bool varies = c.subgroup_min_size != c.subgroup_max_size;
  if (varies && !c.subgroup_size_control) return no("the subgroup size varies and cannot be pinned");
  const uint32_t limit = std::min(c.max_workgroup_invocations, c.max_workgroup_size[0]);
  AttnCoopTiles t;
  t.sg = c.subgroup_size;
  t.pin = varies ? c.subgroup_size : 0u;
  t.cm = cm, t.cn = cn, t.ck = ck;
  t.br = cm;
  t.bc = std::max(cn, ck);
  t.shared_bytes = attn_coop_shared_bytes(D, t.br, t.bc);
  if (t.shared_bytes > c.max_shared_memory)
    return no("shared memory " + std::to_string(t.shared_bytes) + " > " + std::to_string(c.max_shared_memory) +
              " at D=" + std::to_string(D));
  for (const uint32_t nsg : {4u, 2u, 1u}) {
    if (nsg * t.sg > limit) continue;
    t.nsg = nsg;
    t.wg = nsg * t.sg;
    if (out) *out = t;
    return true;
  }
  return no("one subgroup of " + std::to_string(t.sg) + " exceeds the workgroup limit");
}

bool attn_uses_coopmat(const DeviceCaps& c, bool fp16, uint32_t D, uint32_t nsm, bool v2, bool kv_q8,
                       AttnCoopTiles* out, std::string* why_not) {
  if (!fit_attn_coop(c, fp16, D, nsm, v2, kv_q8, out, why_not)) return false;
  if (c.has_quirk("coopmat_emulated")) {
    if (why_not) *why_not = "quirk coopmat_emulated";
    return false;
  }
  return true;
}

uint32_t attn_coop_max_keys(const DeviceCaps& caps, uint32_t D, const AttnCoopTiles& t) {
  if (!caps.has_quirk("loop_iteration_limit")) return UINT32_MAX;
  constexpr uint64_t kBudget = 60000;  // llvmpipe stops at 65535; keep a margin
  const uint64_t dv = 2ull * D, wg = std::max(1u, t.wg), nsg = std::max(1u, t.nsg), sg = std::max(1u, t.sg);
  auto per = [](uint64_t n, uint64_t k) { return (n + k - 1) / k; };
  // Per block, in the loops of one invocation (diff_attn_coopmat.comp): the K and V staging, the Q·Kᵀ tasks with
  // their steps along D, the softmax rows (two passes over the block), the P·V tasks with their rescale and steps.
  const uint64_t per_block = 1 + 2 * per(uint64_t(t.bc) * dv / 8, wg) + per(2ull * t.bc / t.cn, nsg) * (1 + D / t.ck) +
                             per(2ull * t.br, wg) * (1 + 2ull * t.bc) +
                             per(2ull * dv / t.cn, nsg) * (2 + per(uint64_t(t.cm) * t.cn, sg) + t.bc / t.ck);
  // Once: Q, O and the statistics, the epilogue (its sums run over a whole row).
  const uint64_t fixed =
      64 + per(t.br * dv / 4, wg) + per(2ull * t.br * (dv + 4), wg) + 2 * per(t.br * dv, wg) + dv + 16;
  // Twice the count: a margin for loops the driver's lowering of the matrix operations may add.
  const uint64_t blocks = kBudget > 2 * fixed ? (kBudget - 2 * fixed) / (2 * per_block) : 0;
  return static_cast<uint32_t>(std::max<uint64_t>(1, blocks) * t.bc);
}

std::vector<uint32_t> attn_coop_spec_constants(const AttnCoopTiles& t, uint32_t D) {
  return {t.wg, t.nsg, D, t.cm, t.cn, t.ck, t.bc};
}

}  // namespace diffvk
