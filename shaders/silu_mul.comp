#version 450
// SwiGLU gate: a[r, j] = silu(g[r, j]) * m[r, j], silu(g) = g / (1 + exp(-g)), a rows x I (dense); fp32 arithmetic.
// g and m are read at r * stride + off + j, each with its own binding, row stride and offset (elements):
//   SwiGLU (SiluMulKernel::record): both bindings are the fused [gate | up] projection (rows x 2I): strides 2I,
//     offsets 0 and I;
//   the Gated Memory Unit (SiluMulKernel::record_gmu): g = the GMU's in_proj output, m = the memory.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(constant_id = 0) const uint WG = 64;
layout(local_size_x_id = 0) in;

layout(std430, binding = 0) readonly buffer Gate { STYPE g[]; };
layout(std430, binding = 1) readonly buffer Mul { STYPE m[]; };
layout(std430, binding = 2) writeonly buffer Out { STYPE a[]; };

layout(push_constant) uniform Params {
  uint rows;
  uint I;
  uint g_stride;
  uint g_off;
  uint m_stride;
  uint m_off;
} p;

void main() {
  for (uint r = gl_WorkGroupID.y; r < p.rows; r += gl_NumWorkGroups.y)
    for (uint j = gl_WorkGroupID.x * WG + gl_LocalInvocationIndex; j < p.I; j += gl_NumWorkGroups.x * WG) {
      const float gv = float(g[r * p.g_stride + p.g_off + j]);
      const float u = float(m[r * p.m_stride + p.m_off + j]);
      a[r * p.I + j] = STYPE(gv / (1.0 + exp(-gv)) * u);
    }
}
