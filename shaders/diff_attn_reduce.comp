#version 450
// Merges the split-K partial states of diff_attn_split.comp (attn_merge.glsl), then
//   out = headwise_rmsnorm(O1 - lambda*O2) * subln * (1 - lambda_init).
// DVK_HAS_SUBGROUP_VARIANT
#extension GL_GOOGLE_include_directive : require
#define NSM 2
#define MERGE_DYN_BINDING 4
#include "attn_merge.glsl"

layout(std430, binding = 2) readonly buffer Wbuf { STYPE subln[]; };
layout(std430, binding = 3) writeonly buffer Obuf { STYPE o[]; };

#include "reduce.glsl"

void main() {
  merge_stats();
  const uint tid = gl_LocalInvocationIndex;
  float ss = 0.0;
  for (uint c = tid; c < DV; c += WG) {
    const float v = clamp(merged(0, c) - p.lambda * merged(1, c), -FLT_MAX, FLT_MAX);
    ss += v * v;
  }
  ss = block_sum(ss);
  const float f = p.gain * inversesqrt(ss / float(DV) + p.eps);
  for (uint c = tid; c < DV; c += WG) {
    const float v = clamp(merged(0, c) - p.lambda * merged(1, c), -FLT_MAX, FLT_MAX);
    o[g_i * p.o_stride + g_h * DV + c] = STYPE(v * f * float(subln[c]));
  }
}
