#version 450
// Debug path (diffvk attn-map, Session::attention_maps): the two causal softmaxes of one layer's output
// heads, materialised before the mix with V (docs/maths.md):
//   DIFF V1 (V2 = 0): P1[h, i, j] = softmax_j(Q1_h[i]·K1_g[j] / √D), P2 likewise with Q2, K2; g = h / (H / Hkv).
//     q: rows x 2H·D (roped, as RopeKvKernel writes it; the halves of head h are query columns 2h, 2h + 1),
//     k cache: [Hkv][capacity][2D] (roped K1 | K2).
//   DIFF V2 (V2 = 1, docs/maths.md "DIFF V2"): P1 = the map of query head 2h, P2 = of query head 2h + 1, both
//     over KV head g = h / (H / Hkv) (the pair reads one KV head: Hkv divides H), plus λ_h of every query row,
//     sigmoid of its stored logit in fp32 (diff_v2_lambda.glsl, the attention's own epilogue).
//     q: rows x q_stride = 2H·D + H (the 2H query heads, then the H λ logits), k cache: [Hkv][capacity][D].
// keys j > pos(i) get 0. pos: the 4-byte dynamic position (added to pos0). Query row i sits at position
// p = pos0 + pos + i.
// out (float32 in both variants): [nheads][2][T][T], then (V2 only) λ [nheads][T]; this dispatch writes rows
// p of heads head0 … head0 + nheads − 1 (every column of them, zeros past p; λ[hh][p]); rows with p >= T are skipped.
// One workgroup per (query row, head); invocations stride over the keys. Loop iterations per
// invocation: 2 · 3 · ceil(T / WG) · D at most (T <= kAttentionMapMaxTokens), within llvmpipe's budget.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
#include "diff_v2_lambda.glsl"

layout(constant_id = 0) const uint WG = 64;
layout(constant_id = 1) const uint V2 = 0;  // 1: DIFF V2's layout (above); a separate pipeline, V1's code unchanged
layout(local_size_x_id = 0) in;

layout(std430, binding = 0) readonly buffer Q { STYPE q[]; };
layout(std430, binding = 1) readonly buffer K { STYPE k[]; };
layout(std430, binding = 2) readonly buffer Pos { uint dyn_pos[]; };
layout(std430, binding = 3) buffer Out { float p_out[]; };

layout(push_constant) uniform Params {
  uint rows;
  uint H;
  uint Hkv;
  uint D;
  uint capacity;
  uint T;      // map size (tokens)
  uint pos0;
  uint head0;
  uint q_stride;  // q row: 2H·D (V1), 2H·D + H (V2)
  uint nheads;    // heads of this dispatch (V2: where the λ rows start)
} p;

#include "reduce.glsl"

void main() {
  const uint i = gl_WorkGroupID.x, hh = gl_WorkGroupID.y, lid = gl_LocalInvocationIndex;
  const uint pos = p.pos0 + dyn_pos[0] + i;  // uniform over the workgroup
  if (i >= p.rows || pos >= p.T) return;
  const uint h = p.head0 + hh, g = h / (p.H / p.Hkv);
  const uint krow = V2 != 0 ? p.D : 2 * p.D;  // a cache row: V1 [K1 | K2], V2 one head's K
  const float scale = inversesqrt(float(p.D));
  if (V2 != 0 && lid == 0)
    p_out[p.nheads * 2 * p.T * p.T + hh * p.T + pos] = v2_lambda(float(q[i * p.q_stride + 2 * p.H * p.D + h]));
  for (uint half_ = 0; half_ < 2; ++half_) {
    const uint qb = i * p.q_stride + (2 * h + half_) * p.D;
    const uint ob = ((hh * 2 + half_) * p.T + pos) * p.T;
    float mx = NEG_BIG;
    for (uint j = lid; j <= pos; j += WG) {
      const uint kb = (g * p.capacity + j) * krow + (V2 != 0 ? 0 : half_ * p.D);
      float s = 0.0;
      for (uint d = 0; d < p.D; ++d) s = fma(float(q[qb + d]), float(k[kb + d]), s);
      s *= scale;
      p_out[ob + j] = s;  // the raw score; only this invocation reads it back
      mx = max(mx, s);
    }
    mx = block_max(mx);
    float sum = 0.0;
    for (uint j = lid; j <= pos; j += WG) {
      const float e = exp(p_out[ob + j] - mx);
      p_out[ob + j] = e;
      sum += e;
    }
    sum = block_sum(sum);
    const float inv = 1.0 / sum;
    for (uint j = lid; j < p.T; j += WG) p_out[ob + j] = j <= pos ? p_out[ob + j] * inv : 0.0;
  }
}
