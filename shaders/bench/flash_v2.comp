#version 450
// Plain (single-softmax) attention over D-wide heads, the bench's DIFF V2 baselines: the core
// (attn_core.glsl, NSM = 1, DVK_V2 = 1 without pairing) over the query heads the call names (every one,
// or every other one through q_hstride = 2D and qk_off = 0 / D), normalised and written in the storage type
// (attn_out.glsl):  o[i*o_stride + h*D + col].
// DVK_HAS_SUBGROUP_VARIANT
#extension GL_GOOGLE_include_directive : require
#define NSM 1
#define DVK_V2 1
#define DVK_V2_PAIRS 0
#include "attn_core.glsl"
#include "attn_out.glsl"

void main() {
  g_block = gl_WorkGroupID.x;
  g_group = gl_WorkGroupID.y;
  g_pos0 = p.pos0 + dyn_pos;
  attend(0, block_end());
  write_out();
}
