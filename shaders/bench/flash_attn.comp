#version 450
// Single-softmax attention (the bench's two-pass baseline) for prefill: O = softmax(Q·Kᵀ/√D)·V for
// one query/key half (push constant qk_off), normalised and written in the storage type:
//   o[i*o_stride + h*2D + col].  Same core and epilogue as the fused kernel (attn_core.glsl, NSM = 1;
// attn_out.glsl).
// DVK_HAS_SUBGROUP_VARIANT
#extension GL_GOOGLE_include_directive : require
#define NSM 1
#include "attn_core.glsl"
#include "attn_out.glsl"

void main() {
  g_block = gl_WorkGroupID.x;
  g_group = gl_WorkGroupID.y;
  g_pos0 = p.pos0 + dyn_pos;
  attend(0, block_end());
  write_out();
}
