#version 450
// Split-K single-softmax flash attention for decode: workgroup z handles keys
// [z*split_len, (z+1)*split_len) and writes its unnormalised partial state (fp32):
//   part[((z*H + h)*S + i)*2D + col],  stat[((z*H + h)*S + i)*2 + {m, l}]
// An empty split writes m = NEG_BIG, l = 0, O = 0 (weight 0 in flash_attn_reduce.comp).
// DVK_HAS_SUBGROUP_VARIANT (softmax statistics, see flash_attn_core.glsl)
#extension GL_GOOGLE_include_directive : require
#include "flash_attn_core.glsl"

layout(std430, binding = 3) writeonly buffer Part { float part[]; };
layout(std430, binding = 4) writeonly buffer Stat { float stat[]; };

void main() {
  g_qblock = gl_WorkGroupID.x;
  g_group = gl_WorkGroupID.y;
  const uint split = gl_WorkGroupID.z;
  const uint begin = split * p.split_len;
  const uint end = min(causal_end(), begin + p.split_len);
  attend(begin, max(begin, end));
  const uint tid = gl_LocalInvocationIndex;
  const uint cg = tid % TC, rg = tid / TC;
  for (uint k = 0; k < RPT; ++k) {
    const uint r = rg + k * TR;
    if (!slot_valid(r)) continue;
    const uint row = (split * p.H + slot_head(r)) * p.S + slot_query(r);
    for (uint j = 0; j < CPT; ++j) part[row * DV + cg + j * TC] = acc[k * CPT + j];
    if (cg == 0) {
      stat[row * 2 + 0] = sM[r];
      stat[row * 2 + 1] = sL[r];
    }
  }
}
