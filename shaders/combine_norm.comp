#version 450
// Second half of the two-pass differential attention baseline, one workgroup per (head, row):
//   v = O1 - lambda*O2;  y = gain * v / sqrt(mean_k v_k^2 + eps) * subln   (docs/maths.md: differential attention + headwise RMSNorm)
// O1, O2: rows x in_stride, y: rows x out_stride; head h at columns [h*width, (h+1)*width);
// fp32 statistic.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(constant_id = 0) const uint WG = 64;
layout(local_size_x_id = 0) in;

layout(std430, binding = 0) readonly buffer O1 { STYPE o1[]; };
layout(std430, binding = 1) readonly buffer O2 { STYPE o2[]; };
layout(std430, binding = 2) readonly buffer Weight { STYPE w[]; };
layout(std430, binding = 3) writeonly buffer Out { STYPE y[]; };

layout(push_constant) uniform Params {
  uint rows;
  uint heads;
  uint width;       // 2D
  uint in_stride;   // elements between rows of O1/O2 (>= heads * width)
  uint out_stride;  // elements between rows of y
  float lambda;
  float gain;       // 1 - lambda_init
  float eps;
} p;

#include "reduce.glsl"

const float FLT_MAX = 3.402823466e38;

void main() {
  const uint h = gl_WorkGroupID.x;
  const uint r = gl_WorkGroupID.y;
  const uint lid = gl_LocalInvocationIndex;
  const uint base = r * p.in_stride + h * p.width;
  const uint obase = r * p.out_stride + h * p.width;
  float ss = 0.0;
  for (uint i = lid; i < p.width; i += WG) {
    const float v = clamp(float(o1[base + i]) - p.lambda * float(o2[base + i]), -FLT_MAX, FLT_MAX);
    ss += v * v;
  }
  ss = block_sum(ss);
  const float scale = p.gain * inversesqrt(ss / float(p.width) + p.eps);
  for (uint i = lid; i < p.width; i += WG) {
    const float v = clamp(float(o1[base + i]) - p.lambda * float(o2[base + i]), -FLT_MAX, FLT_MAX);
    y[obase + i] = STYPE(v * scale * float(w[i]));
  }
}
