#include "attn_tuning.hpp"

#include <algorithm>

namespace diffvk {

namespace {
constexpr uint32_t kMaxAccumulators = 128;  // acc1 + acc2 floats per invocation (register budget)

uint32_t pow2_floor(uint32_t v) {
  uint32_t p = 1;
  while (p * 2 <= v) p *= 2;
  return p;
}
uint32_t largest_pow2_divisor(uint32_t v, uint32_t cap) {
  uint32_t p = 1;
  while (p * 2 <= cap && v % (p * 2) == 0) p *= 2;
  return p;
}
}  // namespace

uint32_t attn_shared_bytes(bool fp16, uint32_t D, uint32_t br, uint32_t bc, uint32_t tc, bool fused) {
  const uint32_t es = fp16 ? 2 : 4, dv = 2 * D;
  return es * (br * dv + bc * dv) + 4 * (2 * br * bc) + 4 * 6 * br + (fused ? 4 * br * tc : 0);
}

std::string check_attn_tiles(const DeviceCaps& caps, bool fp16, uint32_t D, uint32_t n_rep, const AttnTiles& t,
                             bool fused) {
  const uint32_t dv = 2 * D;
  auto pow2 = [](uint32_t v) { return v && !(v & (v - 1)); };
  if (!pow2(t.wg) || t.wg > caps.max_workgroup_invocations || t.wg > caps.max_workgroup_size[0])
    return "workgroup size " + std::to_string(t.wg) + " illegal";
  if (!t.tc || t.wg % t.tc || dv % t.tc) return "tc must divide both 2D and the workgroup size";
  const uint32_t tr = t.wg / t.tc;
  if (!t.br || t.br % tr) return "br must be a multiple of wg/tc";
  if (!t.bc) return "bc is zero";
  if (!t.qb || t.qb * n_rep > t.br) return "br must hold n_rep x qb row slots";
  if ((t.br / tr) * (dv / t.tc) * 2 > kMaxAccumulators) return "too many accumulators per invocation";
  const uint32_t bytes = attn_shared_bytes(fp16, D, t.br, t.bc, t.tc, fused);
  if (bytes != t.shared_bytes) return "shared_bytes does not match the tiles";
  if (bytes > caps.max_shared_memory)
    return "shared memory " + std::to_string(bytes) + " > " + std::to_string(caps.max_shared_memory);
  return "";
}

AttnTiles choose_attn_tiles(const DeviceCaps& caps, bool fp16, uint32_t D, uint32_t n_rep, AttnPhase phase,
                            uint32_t decode_rows) {
  if (D == 0 || n_rep == 0) throw Error(Status::invalid_argument, "attention tiles: D and n_rep must be positive");
  const uint32_t dv = 2 * D;
  const uint32_t max_inv = std::min(caps.max_workgroup_invocations, caps.max_workgroup_size[0]);
  const uint32_t wg0 = pow2_floor(std::min<uint32_t>(64, max_inv));
  const uint32_t tc = largest_pow2_divisor(dv, wg0);
  const bool fused = phase == AttnPhase::prefill;
  // Row slots: prefill prefers 16-32 rows (K/V reuse across queries); decode covers n_rep x rows.
  uint32_t want_br = 32;
  if (phase == AttnPhase::decode) {
    want_br = 1;
    while (want_br < n_rep * std::max(1u, decode_rows) && want_br < 64) want_br *= 2;
  }
  const uint32_t bcs[] = {64, 32, 16, 8, 4};
  for (uint32_t br = want_br; br >= 1; br /= 2) {
    if (br < n_rep) break;  // a workgroup must hold every head of its group for at least one query
    const uint32_t wg = std::min(wg0, tc * br);  // never more invocation rows than row slots
    AttnTiles t;
    t.wg = wg;
    t.tc = tc;
    t.br = br;
    t.qb = br / n_rep;
    if (phase == AttnPhase::decode) t.qb = std::min(t.qb, std::max(1u, decode_rows));
    for (uint32_t bc : bcs) {
      if (phase == AttnPhase::prefill && bc > 2 * br && br >= 16) continue;  // keep tiles roughly square
      t.bc = bc;
      t.shared_bytes = attn_shared_bytes(fp16, D, br, bc, tc, fused);
      if (check_attn_tiles(caps, fp16, D, n_rep, t, fused).empty()) return t;
    }
  }
  throw Error(Status::unsupported, "no legal attention tiling for D=" + std::to_string(D) + ", n_rep=" +
                                       std::to_string(n_rep) + " within " + std::to_string(caps.max_shared_memory) +
                                       " bytes of shared memory");
}

uint32_t attn_max_keys_per_invocation(const DeviceCaps& caps, uint32_t D, const AttnTiles& t) {
  if (!caps.has_quirk("loop_iteration_limit")) return UINT32_MAX;
  constexpr uint64_t kBudget = 60000;  // llvmpipe stops at 65535; keep a margin
  const uint64_t dv = 2ull * D, tr = t.wg / t.tc, rpt = t.br / tr, cpt = dv / t.tc;
  auto cdiv = [](uint64_t a, uint64_t b) { return (a + b - 1) / b; };
  // Back-edges per key tile in shaders/diff_attn_core.glsl: K and V loads, scores (with the D loop),
  // the softmax statistics (shared-memory path, the longer one) and the P.V accumulation.
  const uint64_t per_tile = 1 + 2 * cdiv(t.bc * dv, t.wg) + cdiv(uint64_t(t.br) * t.bc, t.wg) * (D + 1) +
                            cdiv(2ull * t.br, t.wg) * (2ull * t.bc + 1) + rpt * (2 * cpt + 1 + t.bc * (cpt + 1));
  // Once per invocation: initialisation, the Q load and the epilogue.
  const uint64_t fixed = 3 * rpt * cpt + cdiv(uint64_t(t.br) * dv, t.wg) + cdiv(t.br, t.wg) + rpt * (t.tc + 2 * cpt) + 64;
  const uint64_t tiles = kBudget > fixed ? (kBudget - fixed) / per_tile : 0;
  return static_cast<uint32_t>(std::max<uint64_t>(1, tiles) * t.bc);
}

uint32_t choose_splits(const DeviceCaps& caps, uint32_t keys, uint32_t bc, uint32_t workgroups_per_split,
                       uint32_t* split_len, uint32_t max_split_len) {
  keys = std::max(keys, 1u);
  const uint32_t target = caps.compute_units ? 2 * caps.compute_units : 16;
  const uint32_t tiles = (keys + bc - 1) / bc;
  uint32_t splits = (target + std::max(1u, workgroups_per_split) - 1) / std::max(1u, workgroups_per_split);
  splits = std::clamp(splits, 1u, std::min(tiles, caps.max_workgroup_count[2] ? caps.max_workgroup_count[2] : 1u));
  uint32_t tiles_per_split = (tiles + splits - 1) / splits;
  tiles_per_split = std::min(tiles_per_split, std::max(1u, max_split_len / bc));
  *split_len = tiles_per_split * bc;
  return (keys + *split_len - 1) / *split_len;
}

}  // namespace diffvk
