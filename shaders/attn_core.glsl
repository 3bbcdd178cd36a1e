// Register-resident attention core shared by every variant of attn.comp (shaders/variants.cmake): the fused
// differential prefill (diff_attn, NSM = 2), its split-K kernel (diff_attn_split, attn_split.glsl), DIFF V2
// and the single-softmax baselines of `diffvk bench` (flash_attn*, NSM = 1); each ends in its
// variant's epilogue (attn_out.glsl).
//
// A subgroup of L invocations (L = the subgroup size, 4..128: the device's default, or a smaller one
// required through subgroup size control so no lane idles) owns RB "row slots" of one key/value group g.
// Slots are query-major: slot s of the group's n_rep*S rows is head g*n_rep + s % n_rep at query s / n_rep,
// so the n_rep heads that share K/V sit in the same subgroup and every K/V load serves all of them.
// A workgroup is one subgroup, except in the fused kernels' prefill on GPUs (Br x Bc, NSG > 1): NSG
// subgroups hold NSG*RB consecutive slots (up to 16 queries with all their heads), and each block of L keys
// is staged once in shared memory by the whole workgroup (coalesced 16/8-byte loads, rows an odd number of
// units apart so that one row per lane reads conflict-free): its K rows for Q·K, then its V rows in the
// same place for P·V. Every K/V byte is then read from memory once per NSG*RB slots.
//
// Two cores fill the same registers (so the epilogues and the split merge are shared): the key-block core
// (KB = 1, attend_blocks below: keys in blocks of L, one per lane for Q·K, Q and the probabilities in shared
// memory, one max and one rescale per block; what GPUs run) and the per-key core described next (KB = 0:
// CPU drivers, quirk per_key_attention, and the variant without subgroup arithmetic).
// The L lanes split the head dimensions: lane l reads the chunks l, l+L, l+2L, ... of a K or V row
// (adjacent lanes read adjacent 8/16 bytes: coalesced, vectorised) and keeps the matching part of
// every slot's Q (loaded once) and of every slot's output accumulator (fp32) in registers. Keys are
// streamed one at a time straight from the storage buffers: the partial dot products are summed
// across the lanes (subgroupAdd; a shared-memory sum when DVK_SUBGROUP=0), then each softmax updates
// its running max/sum with ONE exp per key and slot, rescaling only when the maximum moves:
//     s > m:  l = l*exp(m-s) + 1,  acc = acc*exp(m-s) + v,   m = s
//     else :  l = l + exp(s-m),    acc = acc + exp(s-m)*v
// No shared memory and no barrier inside the key loop. Every loop over slots/chunks has a trip
// count fixed by specialization constants and carries [[unroll]]: the register arrays are then
// indexed by constants only, and llvmpipe's per-invocation loop budget counts one iteration per key
// (attn_max_keys_per_invocation; a test fails if a loop stays rolled).
// Sliding window and ring (push constants window, ring: no pipeline of their own): a slot at position t sees keys
// max(0, t − window + 1) .. t; the fused kernel streams only its block's keys from block_begin, the split kernel
// splits the call's keys from call_begin; key j is read at cache row j mod capacity with a ring (ring_wrap).
// Numerics: fp32 scores, statistics and accumulators; NEG_BIG (finite) for "no key yet".
//
// Layouts (elements):  q[i*q_stride + h*2D + qk_off + c]    (c < NSM*D: Q1|Q2, or one half at qk_off)
//   K cache [g][capacity][2D] = K1|K2 (this pass reads columns qk_off .. qk_off + NSM*D - 1)
//   V cache [g][capacity][2D]
// Q8_0 KV cache (KVQ8 = 1; docs/maths.md "Q8_0 KV cache"): each cache buffer holds the int8 quants
// [g][capacity][DV] (one byte per element), then the fp16 scales, NSR per row (2·ceil(DV/64): a row's
// blocks of 32 elements, padded to whole 32-bit words so the appending invocations never share a word).
// A chunk (4 or 8 elements, aligned) lies inside one block; it is dequantized in registers: q·d.
// DIFF V2 (DVK_V2 = 1, NSM = 1; docs/maths.md "DIFF V2"): p.H counts the 2H query heads, each D wide
// (q[i*q_stride + j*D + c]), the cache rows are D wide, and the host makes RB even: with n_rep even,
// slots 2k and 2k+1 are query heads 2i and 2i+1 of the same query, the pair one output head combines.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
#extension GL_EXT_control_flow_attributes : require

#ifndef NSM
#define NSM 2  // softmaxes sharing the V stream: 2 = differential, 1 = standard attention
#endif
#ifndef DVK_V2
#define DVK_V2 0  // 1: DIFF V2 (NSM = 1 over 2H query heads; K, V and query heads D wide; slots paired)
#endif
#ifndef DVK_V2_PAIRS
#define DVK_V2_PAIRS DVK_V2  // 0 with DVK_V2: plain attention over D-wide heads (the bench's V2 baselines)
#endif

layout(constant_id = 0) const uint WG = 8;     // invocations = NSG · L (L: the lanes across the head dimensions)
layout(constant_id = 1) const uint HD = 64;    // D: width of one query/key half
layout(constant_id = 2) const uint RB = 4;     // row slots per workgroup
layout(constant_id = 3) const uint CHUNK = 8;  // elements per K/V load: 8 (16 bytes of halves), 4 (vec4), 0 (one at a time)
layout(constant_id = 4) const uint KVQ8 = 0;   // 1: the K/V caches hold Q8_0 blocks (see "Q8_0 KV cache" below)
layout(constant_id = 5) const uint KB = 0;     // 1: the key-block core (attend_blocks; needs DVK_SUBGROUP), 0: one key at a time
layout(constant_id = 6) const uint NSG = 1;    // subgroups per workgroup; > 1 (key-block core, fused kernels only): each
                                               // block of K/V rows is staged once in shared memory for all of them
layout(constant_id = 7) const uint QH = 0;     // 1 (staged, fp16 storage): Q in shared memory as halves (exact: q
                                               // is fp16), unscaled; the scale multiplies each score instead
layout(local_size_x_id = 0) in;

// K/V rows are read in chunks of CW elements (VPC vec4 registers): 16-byte loads of 8 halves where
// every lane still gets a chunk, else 4-element loads (8 bytes of halves, 16 of floats); rows whose
// halves do not split into chunks (D % CW != 0) are read one element at a time (CHUNK = 0).
const uint L = WG / NSG;
const uint CW = CHUNK == 8 ? 8 : 4;
const uint VPC = CW / 4;
const uint DV = DVK_V2 != 0 ? HD : 2 * HD;  // V width (and the head stride of q and of the cache rows)
const uint HQ = (HD + CW - 1) / CW;  // chunks per query/key half (the last one padded when D % CW != 0)
const uint NQT = NSM * HQ;           // chunks of the Q/K part of a row
const uint NKV = (NQT + L - 1) / L;  // ... per lane
const uint NVT = (DV + CW - 1) / CW; // chunks of a V row
const uint NVV = (NVT + L - 1) / L;  // ... per lane
// V_WHOLE: every V chunk is whole (DV % CW == 0), so a lane's chunk is all inside the row or all past it: one guard
// per chunk (vi < NVT) instead of one per element, and vec4 accesses. FULL_V: moreover every lane's NVV chunks lie
// inside the row (D = 64, 128 on 4-64 lanes), so there is no guard at all. Both fold away after specialization. Kept
// per element, the guards are masks on every element of the unrolled loops, where LLVM (lavapipe) spends most of a
// decode kernel's compile. (Macros: a global bool of spec constants breaks spirv-opt.)
#define V_WHOLE (DV % CW == 0)
#define FULL_V (V_WHOLE && NVT % L == 0)
const uint NST = NSM * RB;           // (softmax, slot) pairs
// Key-block core: P·V splits the lanes into KG key groups of LG lanes (LG = NVT rounded up to a power of
// two, at most L), so no lane idles when a V row has fewer chunks than the subgroup has lanes (wave64 at
// D = 64, any subgroup at D = 32). Ternaries, not min/max: these size shared arrays (OpSpecConstantOp).
const uint P2NVT = NVT <= 1 ? 1 : NVT <= 2 ? 2 : NVT <= 4 ? 4 : NVT <= 8 ? 8 : NVT <= 16 ? 16 : NVT <= 32 ? 32 : NVT <= 64 ? 64 : 128;
const uint LG = P2NVT < L ? P2NVT : L;  // lanes per key group (each owns V chunks vi0, vi0 + L, ...)
const uint KG = L / LG;                 // key groups; each takes NKB consecutive keys of a block of L
const uint NKB = LG;
const uint QSZ = RB * NQT * VPC;                   // vec4s of the subgroup's scaled Q
const uint CSZ = (L - LG) * NST * NVV * VPC;       // vec4s of the key groups' partial P·V (after the loop)
const uint PA = (NST * L + 3) / 4;                 // vec4s of the subgroup's block probabilities
// Per subgroup in sQ: its Q (QSZ vec4s); with staging (below) then its block probabilities (PA, else in sP). After the
// key loop the fold of the key groups reuses that space (CSZ).
// Staged K/V (NSG > 1): a block of L keys, every row's chunks in 16-byte (uvec4) or 8-byte (uvec2) units. SMODE 0:
// 8 halves per uvec4 (fp16, CW = 8); 1: 4 halves per uvec2 (fp16, CW = 4); 2: floats, VPC uvec4s per chunk (fp32
// storage, or a Q8_0 cache dequantized while staged: q·d rounded to fp16 would not be the reference's value).
// Rows are an odd number of units apart, so lanes reading one row each (Q·K: lane = key) hit distinct banks.
const uint STG = NSG > 1 ? 1 : 0;
#if DVK_FP16
const uint SMODE = KVQ8 != 0 ? 2 : CW == 8 ? 0 : 1;
#else
const uint SMODE = 2;
#endif
const uint UPC = SMODE == 2 ? VPC : 1;             // units per chunk
const uint KSTR = (NQT * UPC) | 1, VSTR = (NVT * UPC) | 1;
const uint SKN = STG != 0 ? L * (KSTR > VSTR ? KSTR : VSTR) : 1;  // units of the staged block: its K rows, later its V rows
const uint QF = QH != 0 ? 0 : QSZ;                 // vec4s of Q in sQ (none when Q is in sQh)
const uint QA = STG != 0 ? (QF + PA > CSZ ? QF + PA : CSZ) : (QSZ > CSZ ? QSZ : CSZ);

layout(std430, binding = 0) readonly buffer Qbuf { STYPE q[]; };
layout(std430, binding = 1) readonly buffer Kbuf { STYPE kc[]; };
layout(std430, binding = 1) readonly buffer Kbuf16 { uvec4 kc16[]; };
layout(std430, binding = 1) readonly buffer Kbuf8 { uvec2 kc8[]; };
layout(std430, binding = 2) readonly buffer Vbuf { STYPE vc[]; };
layout(std430, binding = 2) readonly buffer Vbuf16 { uvec4 vc16[]; };
layout(std430, binding = 2) readonly buffer Vbuf8 { uvec2 vc8[]; };
layout(std430, binding = 1) readonly buffer Kbuf4 { uint kc4[]; };  // Q8_0: quants (4 per word), then scales
layout(std430, binding = 2) readonly buffer Vbuf4 { uint vc4[]; };
// Dynamic part of pos0 (host-written before a replay; 0 when recorded with a fixed position).
layout(std430, binding = 5) readonly buffer Dyn { uint dyn_pos; };

layout(push_constant) uniform Params {
  uint S;          // query rows in this call
  uint pos0;       // static part of the absolute position of query row 0
  uint H;
  uint n_rep;      // H / Hkv
  uint capacity;   // KV-cache rows per group
  uint q_stride;
  uint o_stride;
  uint qk_off;     // first Q/K column this pass reads (0, or D for the second single-softmax half)
  uint min_split;  // split-K: fewest keys per split
  uint max_split;  // split-K: most keys per split (host: splits * max_split covers every key)
  float scale;     // 1/sqrt(D)
  float lambda;
  float gain;      // 1 - lambda_init
  float eps;
  uint q_hstride;  // elements between query heads in a row of q; 0 = DV (the bench's V2 baselines: 2D, every other head)
  uint window;     // > 0: a query at position t sees keys t − window + 1 .. t only (a sliding window); 0: every key
  uint ring;       // 1: key position j lives at cache row j mod capacity (a ring; positions pass the capacity)
} p;

vec4 qr[RB * NKV * VPC];    // this lane's chunks of each slot's (scaled) Q
vec4 acc[NST * NVV * VPC];  // this lane's chunks of each (softmax, slot) output accumulator
float m_run[NST], l_run[NST];

uint g_group, g_block, g_pos0;
const uint NSR = (DV + 63) / 64 * 2;  // Q8_0: fp16 scale slots per cache row

uint n_slots() { return p.n_rep * p.S; }
uint sg_index() { return NSG == 1 ? 0 : gl_LocalInvocationIndex / L; }  // the subgroup within the workgroup
uint slot_index(uint r) { return (g_block * NSG + sg_index()) * RB + r; }
bool slot_valid(uint r) { return slot_index(r) < n_slots(); }
uint slot_head(uint r) { return g_group * p.n_rep + slot_index(r) % p.n_rep; }
uint slot_query(uint r) { return slot_index(r) / p.n_rep; }
uint lane() { return NSG == 1 ? gl_LocalInvocationIndex : gl_LocalInvocationIndex % L; }

#if !DVK_SUBGROUP
shared float sSum[NST * L];
#else
shared vec4 sQ[NSG * QA];  // key-block core, per subgroup: Q, read by every lane at one address (a broadcast), and
                           // with staging the block's probabilities, [softmax, slot][key]
shared vec4 sP[STG != 0 ? 1 : PA];  // the probabilities without staging (one subgroup)
shared uvec2 sQh[QH != 0 ? NSG * QSZ : 1];  // QH: each subgroup's Q, 4 halves per vec4 of sQ's layout
shared uvec4 sKV4[SMODE != 1 ? SKN : 1];  // staged K/V block (NSG > 1), SMODE 0 and 2
shared uvec2 sKV2[SMODE == 1 ? SKN : 1];  // ... SMODE 1
#endif

// Sums v[0..NST) over the L lanes (every lane gets every total). Uniform control flow only.
void lane_sums(inout float v[NST]) {
#if DVK_SUBGROUP
  [[unroll]] for (uint i = 0; i < NST; ++i) v[i] = subgroupAdd(v[i]);
#else
  [[unroll]] for (uint i = 0; i < NST; ++i) sSum[i * L + lane()] = v[i];
  barrier();
  [[unroll]] for (uint i = 0; i < NST; ++i) {
    float s = 0.0;
    for (uint k = 0; k < L; ++k) s += sSum[i * L + k];
    v[i] = s;
  }
  barrier();
#endif
}

// Key positions are absolute (0 .. g_pos0 + S − 1). Without a ring they are cache rows and stop at the capacity;
// with one (p.ring) they go on and row j mod capacity holds key j (the host keeps capacity >= window + S − 1).
uint key_cap(uint end) { return p.ring != 0 ? end : min(end, p.capacity); }
// First key (inclusive) a query at position t may see: t − window + 1 with a window, else 0.
uint key_lo(uint t) { return p.window != 0 && t >= p.window ? t + 1 - p.window : 0; }
// Keys of this workgroup: from what its first slot may see (inclusive) to what its last valid slot (of every
// subgroup of it) may see (exclusive); and the call's first key and key count.
uint block_begin() { return key_lo(g_pos0 + g_block * NSG * RB / p.n_rep); }
uint block_end() {
  const uint last = min((g_block + 1) * NSG * RB - 1, n_slots() - 1);
  return key_cap(g_pos0 + last / p.n_rep + 1);
}
uint call_begin() { return key_lo(g_pos0); }
uint call_keys() {
  const uint e = key_cap(g_pos0 + p.S), b = call_begin();
  return e > b ? e - b : 0;
}
// The cache rows of keys [b, e) of one attend call (e − b <= capacity): contiguous without a ring; with one (key j
// at row j mod capacity) they wrap to row 0 at most once, at key `wrap`. So the key loops run over two segments,
// [b, wrap) and [wrap, e) (empty without a ring), in each of which key j is at cache row seg_base + j (uint
// arithmetic wraps): the loop bodies address rows exactly as without a ring, with no division or test per key.
uint ring_wrap(uint b, uint e, out uint r0) {
  r0 = p.ring != 0 ? b % p.capacity : b;  // the row of key b
  return p.ring != 0 ? min(e, b + (p.capacity - r0)) : e;
}
// Key j is visible to a slot whose last key is `limit` (0xffffffff: an invalid slot) iff limit − j < min(wc, limit + 1)
// (unsigned: a key past the limit wraps to a huge difference); wc = the window, or 0xffffffff without one.
uint window_cap() { return p.window != 0 ? p.window : 0xffffffffu; }
bool key_visible(uint limit, uint j, uint wc) { return limit - j < min(wc, limit + 1u); }
// Keys per split of the split-K kernels (attn_split.glsl) from the LIVE key count (not the capacity), so a
// program recorded once does only the current length's work: ceil(keys / splits), at least min_split (fewer,
// longer splits when the keys are few), at most max_split (the host guarantees splits * max_split >= every
// key, and max_split fits llvmpipe's per-invocation loop budget).
uint split_length(uint splits) {
  return min(p.max_split, max(min(p.min_split, p.max_split), (call_keys() + splits - 1) / splits));
}

// The chunk at element `elem` as floats: one 16- or 8-byte load when CHUNK says the layout allows,
// else element by element with zeros past `valid`.
vec4 i8x4(uint u) { return vec4(ivec4(int(u << 24), int(u << 16), int(u << 8), int(u)) >> 24); }
// The chunk at column `col` (a multiple of CW unless CHUNK = 0) of cache row `row` (group·capacity + key),
// as floats. Indices are formed as row · (chunks per row) + col / CW, so a uniform row (P·V) or column (Q·K)
// stays in scalar registers and a lane's loads differ by constant offsets.
// fast_scale: the scale's word converted by unpackHalf2x16 and its half chosen by a select (the key-block core);
// else the half shifted into place first (half_at; by hand under quirk half_select_crash, common.glsl).
void load_chunk(bool k, uint row, uint col, uint valid, out vec4 r[VPC], bool fast_scale) {
  if (KVQ8 != 0) {  // one scale, then 4 or 8 int8 quants (the chunk never crosses a block of 32)
    const uint sw = (p.H / p.n_rep) * p.capacity * (DV / 4) + row * (NSR / 2) + col / 64;
    const uint word = k ? kc4[sw] : vc4[sw];
    float d;
    if (fast_scale && !DVK_HALF_BY_HAND) {  // constants at every call: the other branch is never compiled
      const vec2 both = unpackHalf2x16(word);
      d = (col & 32u) != 0u ? both.y : both.x;
    } else {
      d = half_at(word, (col & 32u) >> 1);
    }
    if (VPC == 2) {
      const uvec2 u = k ? kc8[row * (DV / 8) + col / 8] : vc8[row * (DV / 8) + col / 8];
      r[0] = d * i8x4(u.x);
      r[VPC - 1] = d * i8x4(u.y);
    } else {
      r[0] = d * i8x4(k ? kc4[row * (DV / 4) + col / 4] : vc4[row * (DV / 4) + col / 4]);
    }
    return;
  }
#if DVK_FP16
  if (CHUNK == 8) {
    const uvec4 u = k ? kc16[row * (DV / 8) + col / 8] : vc16[row * (DV / 8) + col / 8];
    r[0] = vec4(unpackHalf2x16(u.x), unpackHalf2x16(u.y));
    r[VPC - 1] = vec4(unpackHalf2x16(u.z), unpackHalf2x16(u.w));
    return;
  }
  if (CHUNK == 4) {
    const uvec2 u = k ? kc8[row * (DV / 4) + col / 4] : vc8[row * (DV / 4) + col / 4];
    r[0] = vec4(unpackHalf2x16(u.x), unpackHalf2x16(u.y));
    return;
  }
#else
  if (CHUNK != 0) {
    r[0] = uintBitsToFloat(k ? kc16[row * (DV / 4) + col / 4] : vc16[row * (DV / 4) + col / 4]);
    return;
  }
#endif
  const uint elem = row * DV + col;
  [[unroll]] for (uint c = 0; c < VPC; ++c)
    [[unroll]] for (uint e = 0; e < 4; ++e) {
      const uint x = c * 4 + e;
      r[c][e] = x < valid ? float(k ? kc[elem + x] : vc[elem + x]) : 0.0;
    }
}

// The last key (inclusive) slot r may see; 0xffffffff marks an invalid slot (key_visible).
uint slot_limit(uint r) { return slot_valid(r) ? g_pos0 + slot_query(r) : 0xffffffffu; }
// vec4 c (of VPC) of Q chunk li (of NQT: softmax li / HQ) of slot r, unscaled; zeros past the row or slot.
vec4 q_raw(uint r, uint li, uint c) {
  const bool ok = slot_valid(r);
  const uint qbase = ok ? slot_query(r) * p.q_stride + slot_head(r) * (p.q_hstride != 0 ? p.q_hstride : DV) + p.qk_off : 0;
  const uint s = li / HQ, c0 = (li % HQ) * CW;
  vec4 v = vec4(0.0);
  [[unroll]] for (uint e = 0; e < 4; ++e) {
    const uint x = c0 + c * 4 + e;
    if (ok && li < NQT && x < HD) v[e] = float(q[qbase + s * HD + x]);
  }
  return v;
}
vec4 q_part(uint r, uint li, uint c) { return q_raw(r, li, c) * p.scale; }  // scaled

#if DVK_SUBGROUP
// The key-block core (KB = 1): keys in blocks of L, each lane one key of the block.
//  1. Q·K: lane b computes every (softmax, slot) score of key jb + b from its own K row (16- or 8-byte
//     loads) and Q in shared memory, read at one address by every lane (a broadcast): no cross-lane sum.
//  2. Softmax: per (softmax, slot) ONE subgroupMax per block, one rescale of the accumulators per block
//     (no branch per key), one exp per lane; each lane keeps its own share of l (summed once at the end).
//  3. P·V: the probabilities go through shared memory (4 keys per 16-byte read); key group g (of KG) takes
//     keys g·NKB .. g·NKB + NKB − 1 of the block, its LG lanes the V row's chunks, as in the per-key core.
// The tail block clamps its loads to the last key (a probability of 0 keeps them out). At the end the key
// groups' partial P·V are folded into group 0 through shared memory, so the registers hold what the
// per-key core leaves: the same epilogues and split merge follow.
// Staging (NSG > 1): every invocation of the workgroup copies chunks of the block's K rows (the columns this pass
// reads) and V rows, consecutive invocations along a row (coalesced 16- or 8-byte loads). Rows past key_end repeat
// the last key, as the unstaged loads do.
void stage_chunk(bool k, uint row, uint col, uint dst) {
  if (SMODE == 0) {
    sKV4[dst] = k ? kc16[row * (DV / 8) + col / 8] : vc16[row * (DV / 8) + col / 8];
  } else if (SMODE == 1) {
    sKV2[dst] = k ? kc8[row * (DV / 4) + col / 4] : vc8[row * (DV / 4) + col / 4];
  } else if (KVQ8 != 0) {
    vec4 r[VPC];
    load_chunk(k, row, col, CW, r, true);
    [[unroll]] for (uint x = 0; x < VPC; ++x) sKV4[dst + x] = floatBitsToUint(r[x]);
  } else {  // fp32 storage: CW = 4, one uvec4 of float bits
    sKV4[dst] = k ? kc16[row * (DV / 4) + col / 4] : vc16[row * (DV / 4) + col / 4];
  }
}
// The K rows of a block first (Q·K), then over them its V rows (P·V): one block of either fits the shared memory.
void stage_k(uint jb, uint key_end, uint kv_base) {
  [[dont_unroll]] for (uint i = 0; i < (L * NQT + WG - 1) / WG; ++i) {
    const uint t = gl_LocalInvocationIndex + i * WG;
    if (t < L * NQT) {
      const uint b = t / NQT, c = t % NQT;
      stage_chunk(true, kv_base + min(jb + b, key_end - 1), (DVK_V2 != 0 ? 0 : p.qk_off) + (c / HQ) * HD + (c % HQ) * CW,
                  b * KSTR + c * UPC);
    }
  }
}
void stage_v(uint jb, uint key_end, uint kv_base) {
  [[dont_unroll]] for (uint i = 0; i < (L * NVT + WG - 1) / WG; ++i) {
    const uint t = gl_LocalInvocationIndex + i * WG;
    if (t < L * NVT) {
      const uint b = t / NVT, c = t % NVT;
      stage_chunk(false, kv_base + min(jb + b, key_end - 1), c * CW, b * VSTR + c * UPC);
    }
  }
}
// The staged chunk at unit u, as floats.
void staged_chunk(uint u, out vec4 r[VPC]) {
  if (SMODE == 0) {
    const uvec4 w = sKV4[u];
    r[0] = vec4(unpackHalf2x16(w.x), unpackHalf2x16(w.y));
    r[VPC - 1] = vec4(unpackHalf2x16(w.z), unpackHalf2x16(w.w));
  } else if (SMODE == 1) {
    const uvec2 w = sKV2[u];
    r[0] = vec4(unpackHalf2x16(w.x), unpackHalf2x16(w.y));
  } else {
    [[unroll]] for (uint x = 0; x < VPC; ++x) r[x] = uintBitsToFloat(sKV4[u + x]);
  }
}

void attend_blocks(uint key_begin, uint key_end) {
  const uint l0 = lane(), grp = KG == 1 ? 0 : l0 / LG, vi0 = KG == 1 ? l0 : l0 % LG;
  const uint qo = sg_index() * QA, po = qo + QF;  // this subgroup's Q (unless QH), and with staging its probabilities, in sQ
  const uint qh = sg_index() * QSZ;                // QH: this subgroup's Q in sQh
  const bool all_v = NVT % LG == 0;  // every lane has a chunk of every V row
  const uint gq = grp * (NKB / 4);   // this key group's first vec4 of a row of probabilities (NKB % 4 == 0)
  float l_lane[NST];
  [[unroll]] for (uint i = 0; i < NST; ++i) {
    m_run[i] = NEG_BIG;
    l_lane[i] = 0.0;
  }
  [[unroll]] for (uint i = 0; i < NST * NVV * VPC; ++i) acc[i] = vec4(0.0);
  uint limit[RB];
  [[unroll]] for (uint r = 0; r < RB; ++r) {
    limit[r] = slot_limit(r);
    [[unroll]] for (uint i = 0; i < NKV; ++i) {
      const uint li = l0 + i * L;
      if (li < NQT)
        [[unroll]] for (uint c = 0; c < VPC; ++c) {
          if (QH != 0) {
            const vec4 v = q_raw(r, li, c);
            sQh[qh + (r * NQT + li) * VPC + c] = uvec2(packHalf2x16(v.xy), packHalf2x16(v.zw));
          } else {
            sQ[qo + (r * NQT + li) * VPC + c] = q_part(r, li, c);
          }
        }
    }
  }
  barrier();
  const uint wc = window_cap();
  uint r0;
  const uint wrap = ring_wrap(key_begin, key_end, r0);
  [[dont_unroll]] for (uint seg = 0; seg < 2; ++seg) {  // the ring's two segments (ring_wrap), not indented
  const uint seg_end = seg == 0 ? wrap : key_end;
  const uint kv_base = g_group * p.capacity + (seg == 0 ? r0 - key_begin : 0u - wrap);  // + key = its cache row
  [[dont_unroll]] for (uint jb = seg == 0 ? key_begin : wrap; jb < seg_end; jb += L) {
    const uint jk = jb + l0;
    const uint krow = kv_base + min(jk, seg_end - 1);
    if (STG != 0) {  // the previous block's last barrier has ordered every read of the staged V rows
      stage_k(jb, seg_end, kv_base);
      barrier();
    }
    float sc[NST];
    [[unroll]] for (uint i = 0; i < NST; ++i) sc[i] = 0.0;
    [[unroll]] for (uint c = 0; c < NQT; ++c) {
      const uint s = c / HQ, c0 = (c % HQ) * CW;
      vec4 k[VPC];
      if (STG != 0) staged_chunk(l0 * KSTR + c * UPC, k);
      else load_chunk(true, krow, (DVK_V2 != 0 ? 0 : p.qk_off) + s * HD + c0, HD - c0, k, true);  // V2: qk_off moves Q only
      [[unroll]] for (uint r = 0; r < RB; ++r)  // one FMA chain per score (no separate dot + add)
        [[unroll]] for (uint x = 0; x < VPC; ++x) {
          vec4 qv;
          if (QH != 0) {
            const uvec2 h = sQh[qh + (r * NQT + c) * VPC + x];
            qv = vec4(unpackHalf2x16(h.x), unpackHalf2x16(h.y));
          } else {
            qv = sQ[qo + (r * NQT + c) * VPC + x];
          }
          [[unroll]] for (uint e = 0; e < 4; ++e) sc[s * RB + r] = fma(qv[e], k[x][e], sc[s * RB + r]);
        }
    }
    if (QH != 0)
      [[unroll]] for (uint i = 0; i < NST; ++i) sc[i] *= p.scale;
    [[unroll]] for (uint t = 0; t < NSM; ++t)
      [[unroll]] for (uint r = 0; r < RB; ++r) {
        const uint k = t * RB + r;
        const bool visible = jk < seg_end && key_visible(limit[r], jk, wc);
        const float sv = visible ? sc[k] : NEG_BIG;
        const float mn = max(m_run[k], subgroupMax(sv));
        const float alpha = exp(m_run[k] - mn);  // 1 while nothing is visible (NEG_BIG − NEG_BIG)
        m_run[k] = mn;
        const float pk = visible ? exp(sv - mn) : 0.0;
        l_lane[k] = l_lane[k] * alpha + pk;
        [[unroll]] for (uint i = 0; i < NVV * VPC; ++i) acc[k * NVV * VPC + i] *= alpha;
        if (STG != 0) sQ[po + (k * L + l0) / 4][l0 % 4] = pk;
        else sP[(k * L + l0) / 4][l0 % 4] = pk;
      }
    barrier();  // probabilities written; with staging, every lane has read the block's K rows
    if (STG != 0) {
      stage_v(jb, seg_end, kv_base);
      barrier();
    }
    [[unroll]] for (uint u = 0; u < NKB; ++u) {
      const uint b = grp * NKB + u;
      const uint vrow = kv_base + min(jb + b, seg_end - 1);
      vec4 v[NVV * VPC];
      [[unroll]] for (uint i = 0; i < NVV; ++i) {
        const uint vi = vi0 + i * L;
        vec4 c[VPC];
        if (STG != 0 && (all_v || vi < NVT)) staged_chunk(b * VSTR + vi * UPC, c);
        else if (all_v || vi < NVT) load_chunk(false, vrow, vi * CW, DV - vi * CW, c, true);
        else
          [[unroll]] for (uint x = 0; x < VPC; ++x) c[x] = vec4(0.0);
        [[unroll]] for (uint x = 0; x < VPC; ++x) v[i * VPC + x] = c[x];
      }
      [[unroll]] for (uint k = 0; k < NST; ++k) {
        // A lane-invariant base plus constants: one 16-byte broadcast read serves 4 keys.
        const uint pi = NKB % 4 == 0 ? k * (L / 4) + gq + u / 4 : (k * L + b) / 4, pe = NKB % 4 == 0 ? u % 4 : b % 4;
        const float pb = STG != 0 ? sQ[po + pi][pe] : sP[pi][pe];
        [[unroll]] for (uint i = 0; i < NVV * VPC; ++i) acc[k * NVV * VPC + i] += pb * v[i];
      }
    }
    barrier();  // every lane has read the probabilities (and staged V rows) before the next block writes them
  }
  }
  [[unroll]] for (uint k = 0; k < NST; ++k) l_run[k] = subgroupAdd(l_lane[k]);
  if (KG > 1) {  // fold the key groups into group 0 (lanes 0 .. LG − 1); sQ is free now
    const uint NA = NST * NVV * VPC;
    if (grp != 0)
      [[unroll]] for (uint i = 0; i < NA; ++i) sQ[qo + ((grp - 1) * LG + vi0) * NA + i] = acc[i];
    barrier();
    [[unroll]] for (uint g = 1; g < KG; ++g)
      [[unroll]] for (uint i = 0; i < NA; ++i)
        if (grp == 0) acc[i] += sQ[qo + ((g - 1) * LG + vi0) * NA + i];
    if (grp != 0)
      [[unroll]] for (uint i = 0; i < NA; ++i) acc[i] = vec4(0.0);  // past the row: the epilogue reads zeros
  }
}
#endif

// Streams keys [key_begin, key_end) into the registers (at most capacity of them with a ring: ring_wrap); valid for
// any begin/end (empty range:
// m = NEG_BIG, l = 0, acc = 0, which every merge weights by exactly 0).
void attend(uint key_begin, uint key_end) {
#if DVK_SUBGROUP
  if (KB != 0) {
    attend_blocks(key_begin, key_end);
    return;
  }
#endif
  const uint l0 = lane();
  [[unroll]] for (uint i = 0; i < NST; ++i) {
    m_run[i] = NEG_BIG;
    l_run[i] = 0.0;
  }
  [[unroll]] for (uint i = 0; i < NST * NVV * VPC; ++i) acc[i] = vec4(0.0);
  uint limit[RB];  // last key (inclusive) each slot may see; 0xffffffff marks an invalid slot
  [[unroll]] for (uint r = 0; r < RB; ++r) {
    limit[r] = slot_limit(r);
    [[unroll]] for (uint i = 0; i < NKV; ++i)
      [[unroll]] for (uint c = 0; c < VPC; ++c) qr[(r * NKV + i) * VPC + c] = q_part(r, l0 + i * L, c);
  }
  const uint wc = window_cap();
  uint r0;
  const uint wrap = ring_wrap(key_begin, key_end, r0);
  [[dont_unroll]] for (uint seg = 0; seg < 2; ++seg) {  // the ring's two segments (ring_wrap), not indented
  const uint kv_base = g_group * p.capacity + (seg == 0 ? r0 - key_begin : 0u - wrap);  // + key = its cache row
  [[dont_unroll]] for (uint j = seg == 0 ? key_begin : wrap; j < (seg == 0 ? wrap : key_end); ++j) {
    const uint row = kv_base + j;
    float part[NST];
    [[unroll]] for (uint i = 0; i < NST; ++i) part[i] = 0.0;
    [[unroll]] for (uint i = 0; i < NKV; ++i) {
      const uint li = l0 + i * L;
      if (li < NQT) {
        const uint s = li / HQ, c0 = (li % HQ) * CW;
        vec4 k[VPC];
        load_chunk(true, row, (DVK_V2 != 0 ? 0 : p.qk_off) + s * HD + c0, HD - c0, k, false);  // V2: qk_off moves Q only
        [[unroll]] for (uint r = 0; r < RB; ++r) {
          float d = 0.0;
          [[unroll]] for (uint c = 0; c < VPC; ++c) d += dot(qr[(r * NKV + i) * VPC + c], k[c]);
          [[unroll]] for (uint t = 0; t < NSM; ++t) part[t * RB + r] += s == t ? d : 0.0;
        }
      }
    }
    lane_sums(part);
    vec4 v[NVV * VPC];
    [[unroll]] for (uint i = 0; i < NVV; ++i) {
      const uint vi = l0 + i * L;
      vec4 c[VPC];
      if (FULL_V || vi < NVT) load_chunk(false, row, vi * CW, DV - vi * CW, c, false);
      else
        [[unroll]] for (uint x = 0; x < VPC; ++x) c[x] = vec4(0.0);
      [[unroll]] for (uint x = 0; x < VPC; ++x) v[i * VPC + x] = c[x];
    }
    [[unroll]] for (uint t = 0; t < NSM; ++t)
      [[unroll]] for (uint r = 0; r < RB; ++r) {
        const uint k = t * RB + r;
        const float sc = part[k], mo = m_run[k];
        const bool visible = key_visible(limit[r], j, wc);
        const float e = exp(min(sc, mo) - max(sc, mo));
        const bool grow = visible && sc > mo;  // uniform across the workgroup: sc and mo are lane sums
        if (grow) {  // rare after the first keys: rescale only when the maximum moves
          m_run[k] = sc;
          l_run[k] *= e;
          [[unroll]] for (uint i = 0; i < NVV * VPC; ++i) acc[k * NVV * VPC + i] *= e;
        }
        const float pj = visible ? (grow ? 1.0 : e) : 0.0;
        l_run[k] += pj;
        [[unroll]] for (uint i = 0; i < NVV * VPC; ++i) acc[k * NVV * VPC + i] += pj * v[i];
      }
  }
  }
}
