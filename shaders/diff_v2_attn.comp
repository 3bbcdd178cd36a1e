#version 450
// Fused DIFF V2 attention (docs/maths.md "DIFF V2"; prefill and unsplit calls): one softmax per query
// head over one K/V stream (attn_core.glsl with NSM = 1, DVK_V2 = 1), every query head of a GQA group
// in the same workgroup, then per pair of slots (query heads 2i and 2i+1 of one query) in registers:
//   λ = sigmoid(z),  z = q[i*q_stride + Hq*D + head]   (the λ logits follow the 2H query heads)
//   o[i*o_stride + head*D + col] = O_2i/l_2i − λ·O_2i+1/l_2i+1        (no norm, no gain)
// DVK_HAS_SUBGROUP_VARIANT
#extension GL_GOOGLE_include_directive : require
#define NSM 1
#define DVK_V2 1
#include "attn_core.glsl"
#include "diff_v2_lambda.glsl"

layout(std430, binding = 3) writeonly buffer Obuf { STYPE o[]; };

void main() {
  g_block = gl_WorkGroupID.x;
  g_group = gl_WorkGroupID.y;
  g_pos0 = p.pos0 + dyn_pos;
  attend(0, block_end());
  const uint l0 = lane();
  // A canonical constant-trip loop (a stepped `r += 2` loop stayed rolled on llvmpipe, which moved the
  // register arrays to memory: 1.6x slower prefill).
  [[unroll]] for (uint pr = 0; pr < RB / 2; ++pr) {
    const uint r = 2 * pr;
    if (!slot_valid(r)) continue;  // n_rep * S is even: slot r + 1 is then valid too
    const uint i = slot_query(r), head = slot_head(r) / 2;
    const float lam = v2_lambda(float(q[i * p.q_stride + p.H * HD + head]));
    const float i1 = l_run[r] > 0.0 ? 1.0 / l_run[r] : 0.0;
    const float i2 = l_run[r + 1] > 0.0 ? lam / l_run[r + 1] : 0.0;
    const uint base = i * p.o_stride + head * HD;
    [[unroll]] for (uint k = 0; k < NVV; ++k) {
      const uint vi = l0 + k * L;
      [[unroll]] for (uint c = 0; c < VPC; ++c) {
        const vec4 v = acc[(r * NVV + k) * VPC + c] * i1 - acc[((r + 1) * NVV + k) * VPC + c] * i2;
        [[unroll]] for (uint e = 0; e < 4; ++e) {
          const uint x = vi * CW + c * 4 + e;
          if (vi < NVT && x < DV) o[base + x] = STYPE(v[e]);
        }
      }
    }
  }
}
