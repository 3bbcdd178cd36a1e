#version 450
// The combine pass of the bench's two-pass DIFF V2 baseline: from the plain attention of the even
// query heads (oe) and of the odd ones (oo), both rows x H·D,
//   out[i*H*D + h*D + c] = oe[...] − sigmoid(q[i*q_stride + q_off + h])·oo[...]
// (the λ logits read from q, as the fused kernel reads them). Grid-stride over every element.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
#include "diff_v2_lambda.glsl"

layout(constant_id = 0) const uint WG = 64;
layout(local_size_x_id = 0) in;

layout(std430, binding = 0) readonly buffer Oe { STYPE oe[]; };
layout(std430, binding = 1) readonly buffer Oo { STYPE oo[]; };
layout(std430, binding = 2) readonly buffer Qbuf { STYPE q[]; };
layout(std430, binding = 3) writeonly buffer Out { STYPE o[]; };

layout(push_constant) uniform Params {
  uint rows;
  uint H;
  uint D;
  uint q_stride;
  uint q_off;
} p;

void main() {
  const uint n = p.rows * p.H * p.D;
  for (uint e = gl_GlobalInvocationID.x; e < n; e += gl_NumWorkGroups.x * WG) {
    const uint i = e / (p.H * p.D), h = (e / p.D) % p.H;
    const float lam = v2_lambda(float(q[i * p.q_stride + p.q_off + h]));
    o[e] = STYPE(float(oe[e]) - lam * float(oo[e]));
  }
}
