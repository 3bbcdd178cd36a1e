#version 450
// Token embedding: x[r, :] = table[token[r], :]. Token ids are uint32, validated by the host;
// an id >= vocab writes zeros instead of reading out of bounds. x is the model's residual stream: float32
// (RTYPE) in either variant.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(constant_id = 0) const uint WG = 64;
layout(local_size_x_id = 0) in;

layout(std430, binding = 0) readonly buffer Tokens { uint tokens[]; };
layout(std430, binding = 1) readonly buffer Table { STYPE table[]; };
layout(std430, binding = 2) writeonly buffer Out { RTYPE x[]; };

layout(push_constant) uniform Params {
  uint rows;
  uint E;
  uint vocab;
} p;

void main() {
  for (uint r = gl_WorkGroupID.y; r < p.rows; r += gl_NumWorkGroups.y) {
    const uint t = tokens[r];
    for (uint c = gl_WorkGroupID.x * WG + gl_LocalInvocationIndex; c < p.E; c += gl_NumWorkGroups.x * WG)
      x[r * p.E + c] = t < p.vocab ? RTYPE(table[t * p.E + c]) : RTYPE(0);
  }
}
