#version 450
// Fused differential attention (prefill, and unsplit calls): both online softmaxes over one K/V
// stream (attn_core.glsl), then O = O1/l1 - lambda*O2/l2 and the headwise RMSNorm
// (eps, subln, 1 - lambda_init) in registers; writes the normalised head output
//   o[i*o_stride + h*2D + col].
// DVK_HAS_SUBGROUP_VARIANT
#extension GL_GOOGLE_include_directive : require
#define NSM 2
#include "attn_core.glsl"

layout(std430, binding = 3) readonly buffer Wbuf { STYPE subln[]; };
layout(std430, binding = 4) writeonly buffer Obuf { STYPE o[]; };

void main() {
  g_block = gl_WorkGroupID.x;
  g_group = gl_WorkGroupID.y;
  g_pos0 = p.pos0 + dyn_pos;
  attend(0, block_end());
  const uint l0 = lane();
  float ss[NST];
  [[unroll]] for (uint k = 0; k < NST; ++k) ss[k] = 0.0;
  [[unroll]] for (uint r = 0; r < RB; ++r) {
    const float i1 = l_run[r] > 0.0 ? 1.0 / l_run[r] : 0.0;
    const float i2 = l_run[RB + r] > 0.0 ? 1.0 / l_run[RB + r] : 0.0;
    [[unroll]] for (uint i = 0; i < NVV * VPC; ++i) {
      const vec4 v = acc[r * NVV * VPC + i] * i1 - p.lambda * (acc[(RB + r) * NVV * VPC + i] * i2);
      acc[r * NVV * VPC + i] = v;
      ss[r] += dot(v, v);  // elements past the row hold zeros
    }
  }
  lane_sums(ss);
  [[unroll]] for (uint r = 0; r < RB; ++r) {
    if (!slot_valid(r)) continue;
    const float f = p.gain * inversesqrt(ss[r] / float(DV) + p.eps);
    const uint base = slot_query(r) * p.o_stride + slot_head(r) * DV;
    [[unroll]] for (uint i = 0; i < NVV; ++i) {
      const uint vi = l0 + i * L;
      [[unroll]] for (uint c = 0; c < VPC; ++c)
        [[unroll]] for (uint e = 0; e < 4; ++e) {
          const uint x = vi * CW + c * 4 + e;
          if (vi < NVT && x < DV) o[base + x] = STYPE(acc[(r * NVV + i) * VPC + c][e] * f * float(subln[x]));
        }
    }
  }
}
