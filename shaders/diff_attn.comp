#version 450
// Fused differential attention for prefill (and unsplit decode): dual online softmax over one
// K/V pass, then O = O1/l1 - lambda*O2/l2 and the headwise RMSNorm (eps, subln, 1 - lambda_init)
// in the epilogue; writes the normalised head output.
// DVK_HAS_SUBGROUP_VARIANT (softmax statistics, see diff_attn_core.glsl)
#extension GL_GOOGLE_include_directive : require
#include "diff_attn_core.glsl"

layout(std430, binding = 3) readonly buffer Wbuf { STYPE subln[]; };
layout(std430, binding = 4) writeonly buffer Obuf { STYPE o[]; };

shared float sRed[BR * TC];

void main() {
  g_qblock = gl_WorkGroupID.x;
  g_group = gl_WorkGroupID.y;
  g_pos0 = p.pos0 + dyn_pos;
  attend(0, causal_end());
  const uint tid = gl_LocalInvocationIndex;
  const uint cg = tid % TC, rg = tid / TC;
  for (uint k = 0; k < RPT; ++k) {
    const uint r = rg + k * TR;
    const float i1 = sL1[r] > 0.0 ? 1.0 / sL1[r] : 0.0;
    const float i2 = sL2[r] > 0.0 ? 1.0 / sL2[r] : 0.0;
    float ss = 0.0;
    for (uint j = 0; j < CPT; ++j) {
      const float v = acc1[k * CPT + j] * i1 - p.lambda * acc2[k * CPT + j] * i2;
      acc1[k * CPT + j] = v;
      ss += v * v;
    }
    sRed[r * TC + cg] = ss;
  }
  barrier();
  for (uint k = 0; k < RPT; ++k) {
    const uint r = rg + k * TR;
    if (!slot_valid(r)) continue;
    float ss = 0.0;
    for (uint i = 0; i < TC; ++i) ss += sRed[r * TC + i];
    const float f = p.gain * inversesqrt(ss / float(DV) + p.eps);
    const uint base = slot_query(r) * p.o_stride + slot_head(r) * DV;
    for (uint j = 0; j < CPT; ++j) {
      const uint col = cg + j * TC;
      o[base + col] = STYPE(acc1[k * CPT + j] * f * float(subln[col]));
    }
  }
}
