#version 450
// Merges the split-K partial states of flash_attn_split.comp, one workgroup per (head, query):
//   M = max_z m_z, L = sum_z l_z exp(m_z - M), O = sum_z O_z exp(m_z - M) / L
// and writes O in the storage type: o[i*o_stride + h*2D + col]. Maxima are finite (NEG_BIG for
// empty splits): no NaN.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(constant_id = 0) const uint WG = 64;
layout(constant_id = 1) const uint HD = 64;
layout(local_size_x_id = 0) in;
const uint DV = 2 * HD;

layout(std430, binding = 0) readonly buffer Part { float part[]; };
layout(std430, binding = 1) readonly buffer Stat { float stat[]; };
layout(std430, binding = 2) writeonly buffer Obuf { STYPE o[]; };

layout(push_constant) uniform Params {
  uint S;
  uint H;
  uint splits;
  uint o_stride;
} p;

void main() {
  const uint h = gl_WorkGroupID.x, i = gl_WorkGroupID.y;
  const uint tid = gl_LocalInvocationIndex;
  float M = NEG_BIG;
  for (uint z = 0; z < p.splits; ++z) M = max(M, stat[((z * p.H + h) * p.S + i) * 2]);
  float L = 0.0;
  for (uint z = 0; z < p.splits; ++z) {
    const uint row = (z * p.H + h) * p.S + i;
    L += stat[row * 2 + 1] * exp(stat[row * 2] - M);
  }
  const float inv = L > 0.0 ? 1.0 / L : 0.0;
  for (uint c = tid; c < DV; c += WG) {
    float acc = 0.0;
    for (uint z = 0; z < p.splits; ++z) {
      const uint row = (z * p.H + h) * p.S + i;
      acc += part[row * DV + c] * exp(stat[row * 2] - M);
    }
    o[i * p.o_stride + h * DV + c] = STYPE(acc * inv);
  }
}
