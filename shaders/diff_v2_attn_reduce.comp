#version 450
// Merges the split-K partial states of diff_v2_attn_split.comp (attn_merge.glsl: softmaxes 0 and 1 are
// query heads 2h and 2h+1 of output head h), then, with λ = sigmoid of the head's logit in q,
//   o[i*o_stride + h*D + c] = O_2h − λ·O_2h+1          (docs/maths.md "DIFF V2": no norm, no gain)
#extension GL_GOOGLE_include_directive : require
#define NSM 2
#define DVK_V2 1
#define MERGE_DYN_BINDING 4
#include "attn_merge.glsl"
#include "diff_v2_lambda.glsl"

layout(std430, binding = 2) readonly buffer Qbuf { STYPE q[]; };
layout(std430, binding = 3) writeonly buffer Obuf { STYPE o[]; };

void main() {
  merge_stats();
  const float lam = v2_lambda(float(q[g_i * p.q_stride + p.q_off + g_h]));
  for (uint c = gl_LocalInvocationIndex; c < DV; c += WG)
    o[g_i * p.o_stride + g_h * DV + c] = STYPE(clamp(merged(0, c) - lam * merged(1, c), -FLT_MAX, FLT_MAX));
}
