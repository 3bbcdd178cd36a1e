#version 450
// RoPE of the fused QKV projection and the KV-cache append (docs/maths.md "RoPE", interleaved / GPT-J):
//   qkv row r (position pos0 + r) = [q: 2H·D | λ: LAM | k: NK·D | v: NK·D]
//   q_out[r]                = [RoPE of every D-wide q sub-head | the λ columns, copied]
//   k_cache[g][pos][0:KW]   = RoPE of k sub-heads g·KW/D … (k columns [g·KW, g·KW + KW)), KW = NK·D/Hkv
//   v_cache[g][pos][0:KW]   = v columns [g·KW, g·KW + KW), unrotated
// DIFF V1: NK = 2Hkv (KW = 2D: K1|K2 of a group), LAM = 0. DIFF V2: NK = Hkv (KW = D), LAM = H λ logits.
// Q8_0 KV cache (KVQ8 = 1; docs/maths.md "Q8_0 KV cache", the layout of attn_core.glsl): each cache
// buffer holds int8 quants [g][capacity][KW], then NSR = 2·ceil(KW/64) fp16 scales per row. One invocation
// per 64 columns of a cache row (two blocks of 32, one 32-bit scale word: no word is shared) quantizes the
// fp32 values (K roped) as GGUF's Q8_0 does: d = amax/127, q = round-half-away(x/d).
// Ring KV cache (ring = 1): position pos at cache row pos mod capacity. No RoPE (rope = 0): (cos, sin) = (1, 0),
// the table is not read.
// One invocation per element pair; (cos, sin) come from a float32 table computed on the host in double
// (no GPU sin/cos of large angles). Workgroups grid-stride over pairs (x) and rows (y).
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
#extension GL_EXT_control_flow_attributes : require

layout(constant_id = 0) const uint WG = 64;
layout(constant_id = 1) const uint KVQ8 = 0;  // 1: the caches hold Q8_0 blocks
layout(local_size_x_id = 0) in;

layout(std430, binding = 0) readonly buffer Qkv { STYPE qkv[]; };
layout(std430, binding = 1) readonly buffer Table { vec2 cs[]; };  // [pos][D/2] = (cos, sin), always fp32
layout(std430, binding = 2) writeonly buffer QOut { STYPE q_out[]; };
layout(std430, binding = 3) writeonly buffer KCache { STYPE k_cache[]; };
layout(std430, binding = 4) writeonly buffer VCache { STYPE v_cache[]; };
layout(std430, binding = 3) writeonly buffer KCacheQ { uint k_q8[]; };  // Q8_0: quants (4 per word), then scales
layout(std430, binding = 4) writeonly buffer VCacheQ { uint v_q8[]; };
// Dynamic part of the position (written by the host before a replay; 0 when recorded with a fixed pos0).
layout(std430, binding = 5) readonly buffer Dyn { uint dyn_pos; };

layout(push_constant) uniform Params {
  uint rows;
  uint H;
  uint Hkv;
  uint D;
  uint pos0;
  uint capacity;
  uint kheads;  // NK: D-wide k sub-heads per row
  uint lam;     // LAM: λ columns after the q part
  uint ring;    // 1: position pos at cache row pos mod capacity (a ring; positions pass the capacity)
  uint rope;    // 0: no rotation (q copied, K appended as is; the table is not read)
} p;
// (cos, sin) of pair i at position pos: the identity without RoPE.
vec2 rot(uint pos, uint i) { return p.rope != 0 ? cs[pos * (p.D / 2) + i] : vec2(1.0, 0.0); }

// Column c of k (roped) or v of qkv row `src` at position pos, in fp32 (the value a Q8_0 block quantizes).
float kv_value(bool k, uint src, uint pos, uint c) {
  const uint qp = p.H * p.D, kcols = p.kheads * p.D;
  if (!k) return float(qkv[src + 2 * qp + p.lam + kcols + c]);
  const uint e = c & ~1u, base = src + 2 * qp + p.lam + e;
  const vec2 t = rot(pos, (e % p.D) / 2);
  const float x0 = float(qkv[base]), x1 = float(qkv[base + 1]);
  return (c & 1u) == 0 ? x0 * t.x - x1 * t.y : x0 * t.y + x1 * t.x;
}
#include "q8_0.glsl"
// Q8_0 append of scale word w (of kw/64 rounded up per row) of k (w < Hkv·nsw) or v: two blocks of 32.
void append_q8(uint w, uint src, uint pos, uint kw) {
  const uint nsw = (kw + 63) / 64;  // scale words per cache row
  const bool k = w < p.Hkv * nsw;
  const uint wk = k ? w : w - p.Hkv * nsw, g = wk / nsw, col0 = (wk % nsw) * 64;
  const uint crow = g * p.capacity + (p.ring != 0 ? pos % p.capacity : pos);  // cache row
  vec2 d = vec2(0.0);
  [[unroll]] for (uint b = 0; b < 2; ++b) {
    const uint c0 = col0 + 32 * b;
    if (c0 >= kw) break;
    float amax = 0.0;
    for (uint i = 0; i < 32; ++i) amax = max(amax, abs(kv_value(k, src, pos, g * kw + c0 + i)));
    const float db = amax / 127.0, id = q8_inverse(db);
    for (uint wd = 0; wd < 8; ++wd) {
      vec4 x;
      for (uint i = 0; i < 4; ++i) x[i] = kv_value(k, src, pos, g * kw + c0 + 4 * wd + i);
      const uint packed = q8_pack4(x, id);
      const uint at = (crow * kw + c0) / 4 + wd;
      if (k) k_q8[at] = packed;
      else v_q8[at] = packed;
    }
    d[b] = db;
  }
  const uint at = p.Hkv * p.capacity * kw / 4 + crow * nsw + col0 / 64;
  if (k) k_q8[at] = packHalf2x16(d);
  else v_q8[at] = packHalf2x16(d);
}

void main() {
  const uint half_d = p.D / 2;
  const uint kw = p.kheads / p.Hkv * p.D;  // cache row width
  const uint qp = p.H * p.D;               // pairs in the q part (2H·D elements)
  const uint kp = p.kheads * half_d;       // pairs in the k part
  const uint np = qp + 2 * kp;             // pairs per row (v has as many as k)
  const uint width = 2 * np + p.lam;
  const uint qw = 2 * qp + p.lam;          // q_out row width
  // Q8_0: the q pairs, the λ columns, then one item per scale word of k and of v.
  const uint items = KVQ8 != 0 ? qp + p.lam + 2 * p.Hkv * ((kw + 63) / 64) : np + p.lam;
  for (uint row = gl_WorkGroupID.y; row < p.rows; row += gl_NumWorkGroups.y) {
    const uint pos = p.pos0 + dyn_pos + row;
    if (p.ring == 0 && pos >= p.capacity) break;  // never write past the cache (the host checks before replaying)
    const uint crow = p.ring != 0 ? pos % p.capacity : pos;  // the cache row of this position
    const uint src = row * width;
    for (uint j = gl_WorkGroupID.x * WG + gl_LocalInvocationIndex; j < items; j += gl_NumWorkGroups.x * WG) {
      if (KVQ8 != 0 && j >= qp + p.lam) {
        append_q8(j - qp - p.lam, src, pos, kw);
        continue;
      }
      const uint lam0 = KVQ8 != 0 ? qp : np;  // the λ logits (DIFF V2) follow the pairs this shader copies itself
      if (j >= lam0) {  // a λ logit (DIFF V2), one element
        const uint c = 2 * qp + (j - lam0);
        q_out[row * qw + c] = qkv[src + c];
        continue;
      }
      const uint e = 2 * j;
      if (j < qp + kp) {
        const vec2 t = rot(pos, (e % p.D) / 2);
        const uint se = j < qp ? e : e + p.lam;
        const float x0 = float(qkv[src + se]);
        const float x1 = float(qkv[src + se + 1]);
        const STYPE o0 = STYPE(x0 * t.x - x1 * t.y);
        const STYPE o1 = STYPE(x0 * t.y + x1 * t.x);
        if (j < qp) {
          const uint dst = row * qw + e;
          q_out[dst] = o0;
          q_out[dst + 1] = o1;
        } else {
          const uint ek = e - 2 * qp;  // column in the k part
          const uint dst = ((ek / kw) * p.capacity + crow) * kw + ek % kw;
          k_cache[dst] = o0;
          k_cache[dst + 1] = o1;
        }
      } else {
        const uint ev = e - 2 * (qp + kp);  // column in the v part
        const uint dst = ((ev / kw) * p.capacity + crow) * kw + ev % kw;
        v_cache[dst] = qkv[src + p.lam + e];
        v_cache[dst + 1] = qkv[src + p.lam + e + 1];
      }
    }
  }
}
