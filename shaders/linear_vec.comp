#version 450
// Matrix-vector shaped linear layer for up to 8 rows (the model's one-row decode step uses linear_row.comp):
// y = x·Wᵀ (+ b) (+ r), fp32 accumulation.
//   x: rows x in (row stride x_stride), W: out x in (dense), y, r: rows x out (y_stride).
//   b: out float32 values (flags bit 1; binding 4), added before r (flags bit 0): v = (x·Wᵀ + b) + r.
// A workgroup computes NF consecutive output features for all rows: its WG invocations stride over
// `in` (coalesced reads of the NF weight rows), each keeping rows x NF partial sums, then one workgroup
// reduction per (row, feature) (subgroup arithmetic in the _sg variant, a shared-memory tree otherwise;
// shaders/reduce.glsl). Workgroups grid-stride over the feature groups (maxComputeWorkGroupCount).
// Y32 = 1: y and r are float32 (RTYPE: the model's residual stream, its logits) in either variant.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(constant_id = 0) const uint WG = 64;
layout(constant_id = 1) const uint NF = 4;
layout(constant_id = 2) const uint Y32 = 0;
layout(local_size_x_id = 0) in;

#define MAXR 8  // == kLinearVecMaxRows

layout(std430, binding = 0) readonly buffer X { STYPE x[]; };
layout(std430, binding = 1) readonly buffer W { STYPE w[]; };
layout(std430, binding = 2) writeonly buffer Y { STYPE y[]; };
layout(std430, binding = 3) readonly buffer R { STYPE r[]; };  // residual; a dummy binding when unused
layout(std430, binding = 2) writeonly buffer YF { RTYPE yf[]; };  // Y32: the same bindings as float32
layout(std430, binding = 3) readonly buffer RF { RTYPE rf[]; };
layout(std430, binding = 4) readonly buffer Bias { float bias[]; };  // float32; a dummy binding when unused

layout(push_constant) uniform Params {
  uint rows;
  uint in_f;
  uint out_f;
  uint x_stride;
  uint y_stride;
  uint flags;  // bit 0: add the residual (binding 3); bit 1: add the bias (binding 4)
} p;

#include "reduce.glsl"

void main() {
  const uint lid = gl_LocalInvocationIndex;
  const uint groups = (p.out_f + NF - 1) / NF;
  for (uint g = gl_WorkGroupID.x; g < groups; g += gl_NumWorkGroups.x) {
    const uint n0 = g * NF;
    float acc[MAXR][NF];
    for (uint rr = 0; rr < MAXR; ++rr)
      for (uint f = 0; f < NF; ++f) acc[rr][f] = 0.0;

    for (uint k = lid; k < p.in_f; k += WG) {
      float xv[MAXR];
      for (uint rr = 0; rr < MAXR; ++rr) {
        xv[rr] = 0.0;
        if (rr < p.rows) xv[rr] = float(x[rr * p.x_stride + k]);
      }
      for (uint f = 0; f < NF; ++f) {
        if (n0 + f < p.out_f) {
          const float wv = float(w[(n0 + f) * p.in_f + k]);
          for (uint rr = 0; rr < MAXR; ++rr)
            if (rr < p.rows) acc[rr][f] = fma(xv[rr], wv, acc[rr][f]);  // uniform: no FMAs for absent rows
        }
      }
    }

    // p.rows and NF are uniform: every invocation takes the same path through the reductions.
    for (uint rr = 0; rr < MAXR; ++rr) {
      if (rr >= p.rows) break;
      for (uint f = 0; f < NF; ++f) {
        const float s = block_sum(acc[rr][f]);
        if (lid == 0 && n0 + f < p.out_f) {
          const uint o = rr * p.y_stride + n0 + f;
          float v = s;
          if ((p.flags & 2u) != 0u) v += bias[n0 + f];
          if (Y32 != 0) {
            if ((p.flags & 1u) != 0u) v += rf[o];
            yf[o] = v;
          } else {
            if ((p.flags & 1u) != 0u) v += float(r[o]);
            y[o] = STYPE(v);
          }
        }
      }
    }
  }
}
