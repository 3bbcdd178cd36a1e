#version 450
// Headwise RMSNorm of docs/maths.md, one workgroup per (head, row):
//   y[r, h, :] = gain * x[r, h, :] / sqrt(mean_k x[r, h, k]^2 + eps) * w[:]
// gain = (1 - lambda_init), eps = 1e-5, width = 2D; the statistic is accumulated in fp32.
// X32 = 1: x is float32 (RTYPE, the model's residual stream under the block norms) in either variant.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(constant_id = 0) const uint WG = 64;
layout(constant_id = 1) const uint X32 = 0;
layout(local_size_x_id = 0) in;

layout(std430, binding = 0) readonly buffer In { STYPE x[]; };
layout(std430, binding = 0) readonly buffer InF { RTYPE xf[]; };  // X32: the same binding as float32
layout(std430, binding = 1) readonly buffer Weight { STYPE w[]; };
layout(std430, binding = 2) writeonly buffer Out { STYPE y[]; };

layout(push_constant) uniform Params {
  uint rows;
  uint heads;
  uint width;       // 2D
  uint row_stride;  // elements between rows (>= heads * width)
  float gain;       // 1 - lambda_init
  float eps;
} p;

#include "reduce.glsl"

float load_x(uint i) { return X32 != 0 ? xf[i] : float(x[i]); }

void main() {
  const uint h = gl_WorkGroupID.x;
  const uint r = gl_WorkGroupID.y;
  const uint lid = gl_LocalInvocationIndex;
  const uint base = r * p.row_stride + h * p.width;
  float ss = 0.0;
  for (uint i = lid; i < p.width; i += WG) {
    const float v = load_x(base + i);
    ss += v * v;
  }
  ss = block_sum(ss);
  const float scale = p.gain * inversesqrt(ss / float(p.width) + p.eps);
  for (uint i = lid; i < p.width; i += WG) y[base + i] = STYPE(load_x(base + i) * scale * float(w[i]));
}
