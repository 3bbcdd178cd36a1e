#version 450
// Split-K differential attention for decode: workgroup z handles keys
// [z*split_len, (z+1)*split_len) and writes both unnormalised partial states (fp32):
//   part[((z*H + h)*S + i)*2D*2 + {0: O1, 2D: O2} + col],  stat[((z*H + h)*S + i)*4 + {m1, l1, m2, l2}]
// A split that sees only masked keys writes m = NEG_BIG (finite), l = 0, O = 0, which the merge
// (diff_attn_reduce.comp) weights by exp(NEG_BIG - M) = 0: no NaN.
// DVK_HAS_SUBGROUP_VARIANT (softmax statistics, see diff_attn_core.glsl)
#extension GL_GOOGLE_include_directive : require
#include "diff_attn_core.glsl"

layout(std430, binding = 3) writeonly buffer Part { float part[]; };
layout(std430, binding = 4) writeonly buffer Stat { float stat[]; };

void main() {
  g_qblock = gl_WorkGroupID.x;
  g_group = gl_WorkGroupID.y;
  g_pos0 = p.pos0 + dyn_pos;
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
    for (uint j = 0; j < CPT; ++j) {
      const uint col = cg + j * TC;
      part[row * 2 * DV + col] = acc1[k * CPT + j];
      part[row * 2 * DV + DV + col] = acc2[k * CPT + j];
    }
    if (cg == 0) {
      stat[row * 4 + 0] = sM1[r];
      stat[row * 4 + 1] = sL1[r];
      stat[row * 4 + 2] = sM2[r];
      stat[row * 4 + 3] = sL2[r];
    }
  }
}
