#version 450
// Fused differential attention (prefill, and unsplit calls): both online softmaxes over one K/V
// stream (attn_core.glsl), then O = O1/l1 - lambda*O2/l2 and the headwise RMSNorm
// (eps, subln, 1 - lambda_init) in registers (attn_out.glsl); writes the normalised head output
//   o[i*o_stride + h*2D + col].
// DVK_HAS_SUBGROUP_VARIANT
#extension GL_GOOGLE_include_directive : require
#define NSM 2
#include "attn_core.glsl"
#include "attn_out.glsl"

void main() {
  g_block = gl_WorkGroupID.x;
  g_group = gl_WorkGroupID.y;
  g_pos0 = p.pos0 + dyn_pos;
  attend(0, block_end());
  write_out();
}
