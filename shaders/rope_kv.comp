#version 450
// RoPE of the fused QKV projection and the KV-cache append (docs/maths.md "RoPE", interleaved / GPT-J):
//   qkv row r (position pos0 + r) = [q: 2H·D | λ: LAM | k: NK·D | v: NK·D]
//   q_out[r]                = [RoPE of every D-wide q sub-head | the λ columns, copied]
//   k_cache[g][pos][0:KW]   = RoPE of k sub-heads g·KW/D … (k columns [g·KW, g·KW + KW)), KW = NK·D/Hkv
//   v_cache[g][pos][0:KW]   = v columns [g·KW, g·KW + KW), unrotated
// DIFF V1: NK = 2Hkv (KW = 2D: K1|K2 of a group), LAM = 0. DIFF V2: NK = Hkv (KW = D), LAM = H λ logits.
// One invocation per element pair; (cos, sin) come from a float32 table computed on the host in double
// (no GPU sin/cos of large angles). Workgroups grid-stride over pairs (x) and rows (y).
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(constant_id = 0) const uint WG = 64;
layout(local_size_x_id = 0) in;

layout(std430, binding = 0) readonly buffer Qkv { STYPE qkv[]; };
layout(std430, binding = 1) readonly buffer Table { vec2 cs[]; };  // [pos][D/2] = (cos, sin), always fp32
layout(std430, binding = 2) writeonly buffer QOut { STYPE q_out[]; };
layout(std430, binding = 3) writeonly buffer KCache { STYPE k_cache[]; };
layout(std430, binding = 4) writeonly buffer VCache { STYPE v_cache[]; };
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
} p;

void main() {
  const uint half_d = p.D / 2;
  const uint kw = p.kheads / p.Hkv * p.D;  // cache row width
  const uint qp = p.H * p.D;               // pairs in the q part (2H·D elements)
  const uint kp = p.kheads * half_d;       // pairs in the k part
  const uint np = qp + 2 * kp;             // pairs per row (v has as many as k)
  const uint width = 2 * np + p.lam;
  const uint qw = 2 * qp + p.lam;          // q_out row width
  for (uint row = gl_WorkGroupID.y; row < p.rows; row += gl_NumWorkGroups.y) {
    const uint pos = p.pos0 + dyn_pos + row;
    if (pos >= p.capacity) break;  // never write past the cache (the host checks before replaying)
    const uint src = row * width;
    for (uint j = gl_WorkGroupID.x * WG + gl_LocalInvocationIndex; j < np + p.lam; j += gl_NumWorkGroups.x * WG) {
      if (j >= np) {  // a λ logit (DIFF V2), one element
        const uint c = 2 * qp + (j - np);
        q_out[row * qw + c] = qkv[src + c];
        continue;
      }
      const uint e = 2 * j;
      if (j < qp + kp) {
        const vec2 t = cs[pos * half_d + (e % p.D) / 2];
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
          const uint dst = ((ek / kw) * p.capacity + pos) * kw + ek % kw;
          k_cache[dst] = o0;
          k_cache[dst + 1] = o1;
        }
      } else {
        const uint ev = e - 2 * (qp + kp);  // column in the v part
        const uint dst = ((ev / kw) * p.capacity + pos) * kw + ev % kw;
        v_cache[dst] = qkv[src + p.lam + e];
        v_cache[dst + 1] = qkv[src + p.lam + e + 1];
      }
    }
  }
}
