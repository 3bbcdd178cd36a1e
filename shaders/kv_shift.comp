#version 450
// Context shift (docs/context-overflow.md): moves KV-cache rows src0 … src0 + rows − 1 down by d positions
// and re-rotates the K rows by −d, so that a key roped at position p becomes the key roped at p − d:
//   R(−dθ)·R(pθ)·k = R((p − d)θ)·k   (docs/maths.md "RoPE", interleaved pairs; (cos, sin)(dθ) from the
//   float32 table rope_kv uses, row d).
//   k_cache[g][p − d][e, e+1] = (k0·c + k1·s, −k0·s + k1·c) of k_cache[g][p][e, e+1], c, s = table[d][(e % D) / 2]
//   v_cache[g][p − d][e]      = v_cache[g][p][e]
// fp32 arithmetic, one rounding to the storage type. The host keeps rows <= d, so no row a dispatch writes
// is one it reads; it records ceil(moved / d) such dispatches, in order, for a longer move (a memmove).
// One invocation per element pair of a row (K pairs, then V pairs); workgroups grid-stride over pairs (x)
// and rows (y).
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(constant_id = 0) const uint WG = 64;
layout(local_size_x_id = 0) in;

layout(std430, binding = 0) buffer KCache { STYPE k_cache[]; };
layout(std430, binding = 1) buffer VCache { STYPE v_cache[]; };
layout(std430, binding = 2) readonly buffer Table { vec2 cs[]; };  // [pos][D/2] = (cos, sin), always fp32

layout(push_constant) uniform Params {
  uint Hkv;
  uint D;
  uint capacity;
  uint src0;  // the first row moved by this dispatch
  uint rows;  // rows moved by this dispatch (<= d)
  uint d;     // the shift
} p;

void main() {
  const uint two_d = 2 * p.D;
  const uint kp = p.Hkv * p.D;  // element pairs of a K row over every KV head (as many in V)
  for (uint r = gl_WorkGroupID.y; r < p.rows; r += gl_NumWorkGroups.y) {
    const uint src = p.src0 + r;
    for (uint j = gl_WorkGroupID.x * WG + gl_LocalInvocationIndex; j < 2 * kp; j += gl_NumWorkGroups.x * WG) {
      const uint e = 2 * (j % kp);  // column over the KV heads: head e / 2D, column e % 2D
      const uint from = ((e / two_d) * p.capacity + src) * two_d + e % two_d;
      const uint to = from - p.d * two_d;
      if (j < kp) {
        const vec2 t = cs[p.d * (p.D / 2) + (e % p.D) / 2];
        const float x0 = float(k_cache[from]);
        const float x1 = float(k_cache[from + 1]);
        k_cache[to] = STYPE(x0 * t.x + x1 * t.y);
        k_cache[to + 1] = STYPE(x1 * t.x - x0 * t.y);
      } else {
        v_cache[to] = v_cache[from];
        v_cache[to + 1] = v_cache[from + 1];
      }
    }
  }
}
