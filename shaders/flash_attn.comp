#version 450
// Single-softmax flash attention for prefill (and unsplit decode): O = softmax(Q·Kᵀ/√D)·V for one
// query/key half, normalised in the epilogue and written in the storage type:
//   o[i*o_stride + h*2D + col]
// DVK_HAS_SUBGROUP_VARIANT (softmax statistics, see flash_attn_core.glsl)
#extension GL_GOOGLE_include_directive : require
#include "flash_attn_core.glsl"

layout(std430, binding = 3) writeonly buffer Obuf { STYPE o[]; };

void main() {
  g_qblock = gl_WorkGroupID.x;
  g_group = gl_WorkGroupID.y;
  attend(0, causal_end());
  const uint tid = gl_LocalInvocationIndex;
  const uint cg = tid % TC, rg = tid / TC;
  for (uint k = 0; k < RPT; ++k) {
    const uint r = rg + k * TR;
    if (!slot_valid(r)) continue;
    const float inv = sL[r] > 0.0 ? 1.0 / sL[r] : 0.0;
    const uint base = slot_query(r) * p.o_stride + slot_head(r) * DV;
    for (uint j = 0; j < CPT; ++j) o[base + cg + j * TC] = STYPE(acc[k * CPT + j] * inv);
  }
}
