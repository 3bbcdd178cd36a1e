#version 450
// Fused DIFF V2 attention (docs/maths.md "DIFF V2"; prefill and unsplit calls): one softmax per query
// head over one K/V stream (attn_core.glsl with NSM = 1, DVK_V2 = 1), every query head of a GQA group
// in the same workgroup, then per pair of slots (query heads 2i and 2i+1 of one query) in registers
// (attn_out.glsl):
//   λ = sigmoid(z),  z = q[i*q_stride + Hq*D + head]   (the λ logits follow the 2H query heads)
//   o[i*o_stride + head*D + col] = O_2i/l_2i − λ·O_2i+1/l_2i+1        (no norm, no gain)
// DVK_HAS_SUBGROUP_VARIANT
#extension GL_GOOGLE_include_directive : require
#define NSM 1
#define DVK_V2 1
#include "attn_core.glsl"
#include "attn_out.glsl"

void main() {
  g_block = gl_WorkGroupID.x;
  g_group = gl_WorkGroupID.y;
  g_pos0 = p.pos0 + dyn_pos;
  attend(0, block_end());
  write_out();
}
