// Register-resident attention core shared by every attention shader: the fused differential
// prefill (diff_attn.comp, NSM = 2), its split-K kernel (diff_attn_split.comp, attn_split.glsl), DIFF V2
// and the single-softmax baselines of `diffvk bench` (flash_attn*.comp, NSM = 1); each ends in its
// variant's epilogue (attn_out.glsl).
//
// One workgroup is ONE subgroup of L invocations (L = the subgroup size, 4..128: the device's
// default, or a smaller one required through subgroup size control so no lane idles) and owns
// RB "row slots" of one key/value group g. Slots are query-major: slot s of the group's n_rep*S rows
// is head g*n_rep + s % n_rep at query s / n_rep, so the n_rep heads that share K/V sit in the same
// workgroup and every K/V load serves all of them.
//
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

layout(constant_id = 0) const uint WG = 8;     // invocations = L, the lanes across the head dimensions
layout(constant_id = 1) const uint HD = 64;    // D: width of one query/key half
layout(constant_id = 2) const uint RB = 4;     // row slots per workgroup
layout(constant_id = 3) const uint CHUNK = 8;  // elements per K/V load: 8 (16 bytes of halves), 4 (vec4), 0 (one at a time)
layout(constant_id = 4) const uint KVQ8 = 0;   // 1: the K/V caches hold Q8_0 blocks (see "Q8_0 KV cache" below)
layout(local_size_x_id = 0) in;

// K/V rows are read in chunks of CW elements (VPC vec4 registers): 16-byte loads of 8 halves where
// every lane still gets a chunk, else 4-element loads (8 bytes of halves, 16 of floats); rows whose
// halves do not split into chunks (D % CW != 0) are read one element at a time (CHUNK = 0).
const uint L = WG;
const uint CW = CHUNK == 8 ? 8 : 4;
const uint VPC = CW / 4;
const uint DV = DVK_V2 != 0 ? HD : 2 * HD;  // V width (and the head stride of q and of the cache rows)
const uint HQ = (HD + CW - 1) / CW;  // chunks per query/key half (the last one padded when D % CW != 0)
const uint NQT = NSM * HQ;           // chunks of the Q/K part of a row
const uint NKV = (NQT + L - 1) / L;  // ... per lane
const uint NVT = (DV + CW - 1) / CW; // chunks of a V row
const uint NVV = (NVT + L - 1) / L;  // ... per lane
const uint NST = NSM * RB;           // (softmax, slot) pairs

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
} p;

vec4 qr[RB * NKV * VPC];    // this lane's chunks of each slot's (scaled) Q
vec4 acc[NST * NVV * VPC];  // this lane's chunks of each (softmax, slot) output accumulator
float m_run[NST], l_run[NST];

uint g_group, g_block, g_pos0;
const uint NSR = (DV + 63) / 64 * 2;  // Q8_0: fp16 scale slots per cache row

uint n_slots() { return p.n_rep * p.S; }
uint slot_index(uint r) { return g_block * RB + r; }
bool slot_valid(uint r) { return slot_index(r) < n_slots(); }
uint slot_head(uint r) { return g_group * p.n_rep + slot_index(r) % p.n_rep; }
uint slot_query(uint r) { return slot_index(r) / p.n_rep; }
uint lane() { return gl_LocalInvocationIndex; }

#if !DVK_SUBGROUP
shared float sSum[NST * L];
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

// Keys the last valid slot of this workgroup may see (exclusive), and the keys of the whole call.
uint block_end() {
  const uint last = min(slot_index(RB - 1), n_slots() - 1);
  return min(g_pos0 + last / p.n_rep + 1, p.capacity);
}
uint call_keys() { return min(g_pos0 + p.S, p.capacity); }
// Keys per split of the split-K kernels (attn_split.glsl) from the LIVE key count (not the capacity), so a
// program recorded once does only the current length's work: ceil(keys / splits), at least min_split (fewer,
// longer splits when the keys are few), at most max_split (the host guarantees splits * max_split >= every
// key, and max_split fits llvmpipe's per-invocation loop budget).
uint split_length(uint splits) {
  return min(p.max_split, max(min(p.min_split, p.max_split), (call_keys() + splits - 1) / splits));
}

// The chunk at element `elem` as floats: one 16- or 8-byte load when CHUNK says the layout allows,
// else element by element with zeros past `valid`.
// The binary16 value in the low 16 bits of h, converted by hand: unpackHalf2x16 of a per-lane choice of
// half (a select, or a variable shift, of the scale word) crashes LLVM 15's AArch64 instruction selection
// ("Cannot select: v4f32 = truncate", Mesa 22.3 lavapipe on arm64; DEVELOPERS.md "Traps").
float half_bits(uint h) {
  const uint e = (h >> 10) & 31u, m = h & 1023u;
  const float mag = e == 0u ? float(m) * 5.9604644775390625e-8  // subnormal: m · 2^-24, exact
                  : e == 31u ? uintBitsToFloat(m == 0u ? 0x7f800000u : 0x7fc00000u)
                             : uintBitsToFloat(((e + 112u) << 23) | (m << 13));
  return (h & 0x8000u) != 0u ? -mag : mag;
}
vec4 i8x4(uint u) { return vec4(ivec4(int(u << 24), int(u << 16), int(u << 8), int(u)) >> 24); }
void load_chunk(bool k, uint elem, uint valid, out vec4 r[VPC]) {
  if (KVQ8 != 0) {  // one scale, then 4 or 8 int8 quants (the chunk never crosses a block of 32)
    const uint row = elem / DV, col = elem % DV;
    const uint sw = (p.H / p.n_rep) * p.capacity * (DV / 4) + row * (NSR / 2) + col / 64;
    const float d = half_bits((k ? kc4[sw] : vc4[sw]) >> ((col & 32u) >> 1));
    if (VPC == 2) {
      const uvec2 u = k ? kc8[elem / 8] : vc8[elem / 8];
      r[0] = d * i8x4(u.x);
      r[VPC - 1] = d * i8x4(u.y);
    } else {
      r[0] = d * i8x4(k ? kc4[elem / 4] : vc4[elem / 4]);
    }
    return;
  }
#if DVK_FP16
  if (CHUNK == 8) {
    const uvec4 u = k ? kc16[elem / 8] : vc16[elem / 8];
    r[0] = vec4(unpackHalf2x16(u.x), unpackHalf2x16(u.y));
    r[VPC - 1] = vec4(unpackHalf2x16(u.z), unpackHalf2x16(u.w));
    return;
  }
  if (CHUNK == 4) {
    const uvec2 u = k ? kc8[elem / 4] : vc8[elem / 4];
    r[0] = vec4(unpackHalf2x16(u.x), unpackHalf2x16(u.y));
    return;
  }
#else
  if (CHUNK != 0) {
    r[0] = uintBitsToFloat(k ? kc16[elem / 4] : vc16[elem / 4]);
    return;
  }
#endif
  [[unroll]] for (uint c = 0; c < VPC; ++c)
    [[unroll]] for (uint e = 0; e < 4; ++e) {
      const uint x = c * 4 + e;
      r[c][e] = x < valid ? float(k ? kc[elem + x] : vc[elem + x]) : 0.0;
    }
}

// Streams keys [key_begin, key_end) into the registers; valid for any begin/end (empty range:
// m = NEG_BIG, l = 0, acc = 0, which every merge weights by exactly 0).
void attend(uint key_begin, uint key_end) {
  const uint l0 = lane();
  [[unroll]] for (uint i = 0; i < NST; ++i) {
    m_run[i] = NEG_BIG;
    l_run[i] = 0.0;
  }
  [[unroll]] for (uint i = 0; i < NST * NVV * VPC; ++i) acc[i] = vec4(0.0);
  uint limit[RB];  // last key (inclusive) each slot may see; 0xffffffff marks an invalid slot
  [[unroll]] for (uint r = 0; r < RB; ++r) {
    const bool ok = slot_valid(r);
    limit[r] = ok ? g_pos0 + slot_query(r) : 0xffffffffu;
    const uint qbase = ok ? slot_query(r) * p.q_stride + slot_head(r) * (p.q_hstride != 0 ? p.q_hstride : DV) + p.qk_off : 0;
    [[unroll]] for (uint i = 0; i < NKV; ++i) {
      const uint li = l0 + i * L;
      const uint s = li / HQ, c0 = (li % HQ) * CW;
      [[unroll]] for (uint c = 0; c < VPC; ++c) {
        vec4 v = vec4(0.0);
        [[unroll]] for (uint e = 0; e < 4; ++e) {
          const uint x = c0 + c * 4 + e;
          if (ok && li < NQT && x < HD) v[e] = float(q[qbase + s * HD + x]);
        }
        qr[(r * NKV + i) * VPC + c] = v * p.scale;
      }
    }
  }
  const uint kv_base = g_group * p.capacity;
  [[dont_unroll]] for (uint j = key_begin; j < key_end; ++j) {
    const uint row = (kv_base + j) * DV;
    float part[NST];
    [[unroll]] for (uint i = 0; i < NST; ++i) part[i] = 0.0;
    [[unroll]] for (uint i = 0; i < NKV; ++i) {
      const uint li = l0 + i * L;
      if (li < NQT) {
        const uint s = li / HQ, c0 = (li % HQ) * CW;
        vec4 k[VPC];
        load_chunk(true, row + (DVK_V2 != 0 ? 0 : p.qk_off) + s * HD + c0, HD - c0, k);  // V2: qk_off moves Q only
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
      if (vi < NVT) load_chunk(false, row + vi * CW, DV - vi * CW, c);
      else
        [[unroll]] for (uint x = 0; x < VPC; ++x) c[x] = vec4(0.0);
      [[unroll]] for (uint x = 0; x < VPC; ++x) v[i * VPC + x] = c[x];
    }
    [[unroll]] for (uint t = 0; t < NSM; ++t)
      [[unroll]] for (uint r = 0; r < RB; ++r) {
        const uint k = t * RB + r;
        const float sc = part[k], mo = m_run[k];
        const bool visible = j <= limit[r] && limit[r] != 0xffffffffu;
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
