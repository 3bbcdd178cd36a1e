#version 450
// Merges the split-K partial states of diff_attn_split.comp, one workgroup per (head, query):
//   M = max_z m_z, L = sum_z l_z exp(m_z - M), O = sum_z O_z exp(m_z - M)   (for both softmaxes)
//   out = headwise_rmsnorm(O1/L1 - lambda*O2/L2) * subln * (1 - lambda_init)
// Maxima are finite (NEG_BIG for empty splits), so no NaN; the result is clamped to +-FLT_MAX.
// DVK_HAS_SUBGROUP_VARIANT
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(constant_id = 0) const uint WG = 64;
layout(constant_id = 1) const uint HD = 64;
layout(local_size_x_id = 0) in;
const uint DV = 2 * HD;

layout(std430, binding = 0) readonly buffer Part { float part[]; };
layout(std430, binding = 1) readonly buffer Stat { float stat[]; };
layout(std430, binding = 2) readonly buffer Wbuf { STYPE subln[]; };
layout(std430, binding = 3) writeonly buffer Obuf { STYPE o[]; };

layout(push_constant) uniform Params {
  uint S;
  uint H;
  uint splits;
  uint o_stride;
  float lambda;
  float gain;
  float eps;
} p;

#include "reduce.glsl"

const float FLT_MAX = 3.402823466e38;

void main() {
  const uint h = gl_WorkGroupID.x, i = gl_WorkGroupID.y;
  const uint tid = gl_LocalInvocationIndex;
  float M1 = NEG_BIG, M2 = NEG_BIG;
  for (uint z = 0; z < p.splits; ++z) {
    const uint row = (z * p.H + h) * p.S + i;
    M1 = max(M1, stat[row * 4 + 0]);
    M2 = max(M2, stat[row * 4 + 2]);
  }
  float L1 = 0.0, L2 = 0.0;
  for (uint z = 0; z < p.splits; ++z) {
    const uint row = (z * p.H + h) * p.S + i;
    L1 += stat[row * 4 + 1] * exp(stat[row * 4 + 0] - M1);
    L2 += stat[row * 4 + 3] * exp(stat[row * 4 + 2] - M2);
  }
  const float i1 = L1 > 0.0 ? 1.0 / L1 : 0.0, i2 = L2 > 0.0 ? 1.0 / L2 : 0.0;
  float ss = 0.0;
  for (uint c = tid; c < DV; c += WG) {
    float o1 = 0.0, o2 = 0.0;
    for (uint z = 0; z < p.splits; ++z) {
      const uint row = (z * p.H + h) * p.S + i;
      o1 += part[row * 2 * DV + c] * exp(stat[row * 4 + 0] - M1);
      o2 += part[row * 2 * DV + DV + c] * exp(stat[row * 4 + 2] - M2);
    }
    const float v = clamp(o1 * i1 - p.lambda * o2 * i2, -FLT_MAX, FLT_MAX);
    ss += v * v;
  }
  ss = block_sum(ss);
  const float f = p.gain * inversesqrt(ss / float(DV) + p.eps);
  for (uint c = tid; c < DV; c += WG) {
    float o1 = 0.0, o2 = 0.0;
    for (uint z = 0; z < p.splits; ++z) {
      const uint row = (z * p.H + h) * p.S + i;
      o1 += part[row * 2 * DV + c] * exp(stat[row * 4 + 0] - M1);
      o2 += part[row * 2 * DV + DV + c] * exp(stat[row * 4 + 2] - M2);
    }
    const float v = clamp(o1 * i1 - p.lambda * o2 * i2, -FLT_MAX, FLT_MAX);
    o[i * p.o_stride + h * DV + c] = STYPE(v * f * float(subln[c]));
  }
}
