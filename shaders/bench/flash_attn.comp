#version 450
// Single-softmax attention (the bench's two-pass baseline) for prefill: O = softmax(Q·Kᵀ/√D)·V for
// one query/key half (push constant qk_off), normalised and written in the storage type:
//   o[i*o_stride + h*2D + col].  Same core as the fused kernel (attn_core.glsl, NSM = 1).
// DVK_HAS_SUBGROUP_VARIANT
#extension GL_GOOGLE_include_directive : require
#define NSM 1
#include "attn_core.glsl"

layout(std430, binding = 3) writeonly buffer Obuf { STYPE o[]; };

void main() {
  g_block = gl_WorkGroupID.x;
  g_group = gl_WorkGroupID.y;
  g_pos0 = p.pos0 + dyn_pos;
  attend(0, block_end());
  const uint l0 = lane();
  [[unroll]] for (uint r = 0; r < RB; ++r) {
    if (!slot_valid(r)) continue;
    const float inv = l_run[r] > 0.0 ? 1.0 / l_run[r] : 0.0;
    const uint base = slot_query(r) * p.o_stride + slot_head(r) * DV;
    [[unroll]] for (uint i = 0; i < NVV; ++i) {
      const uint vi = l0 + i * L;
      [[unroll]] for (uint c = 0; c < VPC; ++c)
        [[unroll]] for (uint e = 0; e < 4; ++e) {
          const uint x = vi * CW + c * 4 + e;
          if (vi < NVT && x < DV) o[base + x] = STYPE(acc[(r * NVV + i) * VPC + c][e] * inv);
        }
    }
  }
}
