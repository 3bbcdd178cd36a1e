#version 450
// LayerNorm with bias (torch.nn.LayerNorm; docs/maths.md, LayerNorm), one workgroup per row:
//   y[r, :] = (x[r, :] - mean) / sqrt(var + eps) * w[:] + b[:],   var the biased variance
// fp32 statistics in three passes over the row (x is read again each time, from cache): the sum of
// (x - s), then the sum of squares of c = (x - s) - d, then the store of c * rstd * w + b, where s = x[r, 0]
// (a shift every invocation reads) and d = the mean of (x - s). The mean itself is never formed: at a large
// mean (|mean| >> std) x - s is exact (Sterbenz: x and s within a factor 2) and c keeps the spread's digits,
// where a rounded mean (off by half an ulp of |mean|) or a one-pass E[x²] - E[x]² would lose them.
// X32 = 1: x is float32 (RTYPE, the model's residual stream) in either variant. w, b, y: storage type.
// Rows grid-stride over the workgroups along x (maxComputeWorkGroupCount).
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(constant_id = 0) const uint WG = 64;
layout(constant_id = 1) const uint X32 = 0;
layout(local_size_x_id = 0) in;

layout(std430, binding = 0) readonly buffer In { STYPE x[]; };
layout(std430, binding = 0) readonly buffer InF { RTYPE xf[]; };  // X32: the same binding as float32
layout(std430, binding = 1) readonly buffer Weight { STYPE w[]; };
layout(std430, binding = 2) readonly buffer Bias { STYPE b[]; };  // a dummy binding without a bias
layout(std430, binding = 3) writeonly buffer Out { STYPE y[]; };

layout(push_constant) uniform Params {
  uint rows;
  uint width;     // E
  uint x_stride;  // elements between rows of x (>= width)
  uint y_stride;  // elements between rows of y (>= width)
  float eps;
  uint has_bias;
} p;

#include "reduce.glsl"

float load_x(uint i) { return X32 != 0 ? xf[i] : float(x[i]); }

void main() {
  const uint lid = gl_LocalInvocationIndex;
  const float inv_n = 1.0 / float(p.width);
  for (uint r = gl_WorkGroupID.x; r < p.rows; r += gl_NumWorkGroups.x) {
    const uint base = r * p.x_stride;
    const float s = load_x(base);
    float sum = 0.0;
    for (uint i = lid; i < p.width; i += WG) sum += load_x(base + i) - s;
    const float d = block_sum(sum) * inv_n;
    float ss = 0.0;
    for (uint i = lid; i < p.width; i += WG) {
      const float c = (load_x(base + i) - s) - d;
      ss = fma(c, c, ss);
    }
    const float rstd = inversesqrt(block_sum(ss) * inv_n + p.eps);
    const uint yb = r * p.y_stride;
    for (uint i = lid; i < p.width; i += WG) {
      float v = ((load_x(base + i) - s) - d) * rstd * float(w[i]);
      if (p.has_bias != 0u) v += float(b[i]);
      y[yb + i] = STYPE(v);
    }
  }
}
