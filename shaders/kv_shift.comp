#version 450
// Context shift (docs/context-overflow.md): moves KV-cache rows src0 … src0 + rows − 1 down by d positions
// and re-rotates the K rows by −d, so that a key roped at position p becomes the key roped at p − d:
//   R(−dθ)·R(pθ)·k = R((p − d)θ)·k   (docs/maths.md "RoPE", interleaved pairs; (cos, sin)(dθ) from the
//   float32 table rope_kv uses, row d).
//   k_cache[g][p − d][e, e+1] = (k0·c + k1·s, −k0·s + k1·c) of k_cache[g][p][e, e+1], c, s = table[d][(e % D) / 2]
//   (rows of W = 2D (DIFF V1: K1|K2, each roped with the same frequencies) or W = D (DIFF V2))
//   v_cache[g][p − d][e]      = v_cache[g][p][e]
// fp32 arithmetic, one rounding to the storage type. The host keeps rows <= d, so no row a dispatch writes
// is one it reads; it records ceil(moved / d) such dispatches, in order, for a longer move (a memmove).
// Q8_0 KV cache (KVQ8 = 1; the layout of attn_core.glsl): one invocation per 64 columns of a K or V row
// (one scale word): V quants and scales are copied; K blocks are dequantized, re-rotated in fp32 and
// quantized again as rope_kv quantizes (GGUF Q8_0: d = amax/127, round half away from zero).
// One invocation per element pair of a row (K pairs, then V pairs); workgroups grid-stride over pairs (x)
// and rows (y).
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
#extension GL_EXT_control_flow_attributes : require

layout(constant_id = 0) const uint WG = 64;
layout(constant_id = 1) const uint KVQ8 = 0;  // 1: the caches hold Q8_0 blocks
layout(local_size_x_id = 0) in;

layout(std430, binding = 0) buffer KCache { STYPE k_cache[]; };
layout(std430, binding = 1) buffer VCache { STYPE v_cache[]; };
layout(std430, binding = 0) buffer KCacheQ { uint k_q8[]; };  // Q8_0: quants (4 per word), then scales
layout(std430, binding = 1) buffer VCacheQ { uint v_q8[]; };
layout(std430, binding = 2) readonly buffer Table { vec2 cs[]; };  // [pos][D/2] = (cos, sin), always fp32

layout(push_constant) uniform Params {
  uint Hkv;
  uint D;
  uint capacity;
  uint src0;  // the first row moved by this dispatch
  uint rows;  // rows moved by this dispatch (<= d)
  uint d;     // the shift
  uint W;     // cache row width: 2D (DIFF V1: K1|K2) or D (DIFF V2)
} p;

#include "q8_0.glsl"
float q8_at(uint word) { return float(int(k_q8[word / 4] << (24 - 8 * (word % 4))) >> 24); }  // byte `word` of K

// Q8_0: scale word w (K: w < Hkv·nsw, then V) of cache row src moves to src − d.
void shift_q8(uint w, uint src) {
  const uint rw = p.W, nsw = (rw + 63) / 64;
  const bool k = w < p.Hkv * nsw;
  const uint wk = k ? w : w - p.Hkv * nsw, g = wk / nsw, col0 = (wk % nsw) * 64;
  const uint from = g * p.capacity + src, to = from - p.d;  // cache rows
  const uint sbase = p.Hkv * p.capacity * rw / 4;        // first scale word
  const uint sfrom = sbase + from * nsw + col0 / 64, sto = sbase + to * nsw + col0 / 64;
  if (!k) {
    for (uint i = 0; i < 16 && col0 + 4 * i < rw; ++i) v_q8[(to * rw + col0) / 4 + i] = v_q8[(from * rw + col0) / 4 + i];
    v_q8[sto] = v_q8[sfrom];
    return;
  }
  const vec2 dold = unpackHalf2x16(k_q8[sfrom]);
  vec2 dnew = vec2(0.0);
  [[unroll]] for (uint b = 0; b < 2; ++b) {
    const uint c0 = col0 + 32 * b;
    if (c0 >= rw) break;
    float x[32];
    float amax = 0.0;
    for (uint i2 = 0; i2 < 16; ++i2) {  // pairs (step-1 loops: see attn_core.glsl)
      const uint i = 2 * i2;
      const vec2 t = cs[p.d * (p.D / 2) + ((c0 + i) % p.D) / 2];
      const float x0 = q8_at(from * rw + c0 + i) * dold[b], x1 = q8_at(from * rw + c0 + i + 1) * dold[b];
      x[i] = x0 * t.x + x1 * t.y;
      x[i + 1] = x1 * t.x - x0 * t.y;
      amax = max(amax, max(abs(x[i]), abs(x[i + 1])));
    }
    const float db = amax / 127.0, id = q8_inverse(db);
    for (uint wd = 0; wd < 8; ++wd)
      k_q8[(to * rw + c0) / 4 + wd] = q8_pack4(vec4(x[4 * wd], x[4 * wd + 1], x[4 * wd + 2], x[4 * wd + 3]), id);
    dnew[b] = db;
  }
  k_q8[sto] = packHalf2x16(dnew);
}

void main() {
  const uint rw = p.W;
  if (KVQ8 != 0) {
    const uint items = 2 * p.Hkv * ((rw + 63) / 64);
    for (uint r = gl_WorkGroupID.y; r < p.rows; r += gl_NumWorkGroups.y)
      for (uint j = gl_WorkGroupID.x * WG + gl_LocalInvocationIndex; j < items; j += gl_NumWorkGroups.x * WG)
        shift_q8(j, p.src0 + r);
    return;
  }
  const uint kp = p.Hkv * (p.W / 2);  // element pairs of a K row over every KV head (as many in V)
  for (uint r = gl_WorkGroupID.y; r < p.rows; r += gl_NumWorkGroups.y) {
    const uint src = p.src0 + r;
    for (uint j = gl_WorkGroupID.x * WG + gl_LocalInvocationIndex; j < 2 * kp; j += gl_NumWorkGroups.x * WG) {
      const uint e = 2 * (j % kp);  // column over the KV heads: head e / W, column e % W
      const uint from = ((e / rw) * p.capacity + src) * rw + e % rw;
      const uint to = from - p.d * rw;
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
