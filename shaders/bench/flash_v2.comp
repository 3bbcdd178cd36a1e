#version 450
// Plain (single-softmax) attention over D-wide heads, the bench's DIFF V2 baselines: the core
// (attn_core.glsl, NSM = 1, DVK_V2 = 1 without pairing) over the query heads the call names (every one,
// or every other one through q_hstride = 2D and qk_off = 0 / D), normalised and written in the storage type:
//   o[i*o_stride + h*D + col].
// DVK_HAS_SUBGROUP_VARIANT
#extension GL_GOOGLE_include_directive : require
#define NSM 1
#define DVK_V2 1
#define DVK_V2_PAIRS 0
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
