#version 450
// SwiGLU gate: a[r, j] = silu(gu[r, j]) * gu[r, I + j], silu(g) = g / (1 + exp(-g)); gu is the fused
// [gate | up] projection (rows x 2I). fp32 arithmetic.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(constant_id = 0) const uint WG = 64;
layout(local_size_x_id = 0) in;

layout(std430, binding = 0) readonly buffer GateUp { STYPE gu[]; };
layout(std430, binding = 1) writeonly buffer Out { STYPE a[]; };

layout(push_constant) uniform Params {
  uint rows;
  uint I;
} p;

void main() {
  for (uint r = gl_WorkGroupID.y; r < p.rows; r += gl_NumWorkGroups.y)
    for (uint j = gl_WorkGroupID.x * WG + gl_LocalInvocationIndex; j < p.I; j += gl_NumWorkGroups.x * WG) {
      const float g = float(gu[r * 2 * p.I + j]);
      const float u = float(gu[r * 2 * p.I + p.I + j]);
      a[r * p.I + j] = STYPE(g / (1.0 + exp(-g)) * u);
    }
}
