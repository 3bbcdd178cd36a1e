#version 450
// Naive baseline, step 2: row softmax of a materialised fp32 score matrix, in place, one
// workgroup per row (x: query i, y: head h). Masked entries (NEG_BIG) become exactly 0.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(constant_id = 0) const uint WG = 64;
layout(local_size_x_id = 0) in;

layout(std430, binding = 0) buffer Sbuf { float s[]; };

layout(push_constant) uniform Params {
  uint S;
  uint keys;
} p;

#include "reduce.glsl"

void main() {
  const uint i = gl_WorkGroupID.x, h = gl_WorkGroupID.y;
  const uint lid = gl_LocalInvocationIndex;
  const uint base = (h * p.S + i) * p.keys;
  float m = NEG_BIG;
  for (uint j = lid; j < p.keys; j += WG) m = max(m, s[base + j]);
  m = block_max(m);
  float sum = 0.0;
  for (uint j = lid; j < p.keys; j += WG) {
    const float v = s[base + j];
    sum += v > 0.5 * NEG_BIG ? exp(v - m) : 0.0;
  }
  sum = block_sum(sum);
  const float inv = sum > 0.0 ? 1.0 / sum : 0.0;
  for (uint j = lid; j < p.keys; j += WG) {
    const float v = s[base + j];
    s[base + j] = v > 0.5 * NEG_BIG ? exp(v - m) * inv : 0.0;
  }
}
