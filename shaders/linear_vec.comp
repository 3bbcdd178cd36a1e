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
// VEC = 1: x and W are read as 16-byte vectors (uvec4 = 8 halves in fp16, vec4 in fp32), a lane taking VW
// consecutive elements of every row and weight row per step (the host uses it when `in` and the row stride of x are
// multiples of VW and both bindings start 16-byte aligned): one wide load per weight vector and x row, where the
// scalar form loads every element on its own (radv gfx1100: 224 instructions per 4 weights x 8 rows, 12 loads).
// WQ = 1 (Q8_0) / 2 (Q4_0): W in the quantized layout of runtime/ops/linear_quant.hpp (from byte p.qoff the quants),
// each weight vector dequantized once in registers (linear_wq.glsl) and used by every row: a speculative verify pass
// of up to 8 rows reads and dequantizes each weight once, where the register tile (linear_reg.comp) computes 16 rows.
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
#include "common.glsl"

layout(constant_id = 0) const uint WG = 64;
layout(constant_id = 1) const uint NF = 4;
layout(constant_id = 2) const uint Y32 = 0;
layout(constant_id = 3) const uint VEC = 0;
layout(constant_id = 4) const uint WQ = 0;  // weight format: 0 = the storage type, 1 = Q8_0, 2 = Q4_0
layout(local_size_x_id = 0) in;

#if DVK_FP16
#define VTYPE uvec4
#define KVEC 8u
#else
#define VTYPE vec4
#define KVEC 4u
#endif
const uint VW = KVEC;

#define MAXR 8  // == kLinearVecMaxRows

layout(std430, binding = 0) readonly buffer X { STYPE x[]; };
layout(std430, binding = 1) readonly buffer W { STYPE w[]; };
layout(std430, binding = 0) readonly buffer XV { VTYPE xvec[]; };  // VEC: the same bindings as vectors
layout(std430, binding = 1) readonly buffer WV { VTYPE wvec[]; };
layout(std430, binding = 2) writeonly buffer Y { STYPE y[]; };
layout(std430, binding = 3) readonly buffer R { STYPE r[]; };  // residual; a dummy binding when unused
layout(std430, binding = 2) writeonly buffer YF { RTYPE yf[]; };  // Y32: the same bindings as float32
layout(std430, binding = 3) readonly buffer RF { RTYPE rf[]; };
layout(std430, binding = 4) readonly buffer Bias { float bias[]; };  // float32; a dummy binding when unused
layout(std430, binding = 1) readonly buffer WQ1 { uint wq1[]; };   // WQ != 0: the quantized layout, 4-byte words
layout(std430, binding = 1) readonly buffer WQ2 { uvec2 wq2[]; };  // 8-byte words

layout(push_constant) uniform Params {
  uint rows;
  uint in_f;
  uint out_f;
  uint x_stride;
  uint y_stride;
  uint flags;  // bit 0: add the residual (binding 3); bit 1: add the bias (binding 4)
  uint qoff;   // WQ != 0: byte offset of the quants in the weight binding (a multiple of 16)
} p;

#include "reduce.glsl"
#include "linear_wq.glsl"

void unpack(VTYPE v, out float f[VW]) {
#if DVK_FP16
  for (uint i = 0; i < 4; ++i) {
    const vec2 h = unpackHalf2x16(v[i]);
    f[2 * i] = h.x;
    f[2 * i + 1] = h.y;
  }
#else
  for (uint i = 0; i < 4; ++i) f[i] = v[i];
#endif
}

void main() {
  const uint lid = gl_LocalInvocationIndex;
  const uint groups = (p.out_f + NF - 1) / NF;
  for (uint g = gl_WorkGroupID.x; g < groups; g += gl_NumWorkGroups.x) {
    const uint n0 = g * NF;
    float acc[MAXR][NF];
    for (uint rr = 0; rr < MAXR; ++rr)
      for (uint f = 0; f < NF; ++f) acc[rr][f] = 0.0;

    if (VEC != 0) {
      const uint nv = p.in_f / VW, xs = p.x_stride / VW;
      // Each feature's weight row, clamped into W (a feature past out_f reads row out_f − 1 and writes nothing),
      // and its offsets, once: the loop has no per-feature branch and two address additions per weight vector.
      uint wbase[NF], sbase[NF];
      for (uint f = 0; f < NF; ++f) {
        const uint n = min(n0 + f, p.out_f - 1u);
        wbase[f] = WQ == 0 ? n * nv : wq_row_quant(n);
        sbase[f] = WQ == 0 ? 0u : wq_row_scale(n);
      }
      for (uint kv = lid; kv < nv; kv += WG) {
        float wf[NF][VW];
        const uvec3 lane = WQ == 0 ? uvec3(0u) : wq_lane(kv);
        for (uint f = 0; f < NF; ++f) {
          if (WQ == 0) unpack(wvec[wbase[f] + kv], wf[f]);
          else wq_vec_at(sbase[f], wbase[f], lane, wf[f]);
        }
        for (uint rr = 0; rr < MAXR; ++rr) {
          if (rr >= p.rows) break;  // uniform
          float xf[VW];
          unpack(xvec[rr * xs + kv], xf);
          for (uint f = 0; f < NF; ++f)
            for (uint e = 0; e < VW; ++e) acc[rr][f] = fma(xf[e], wf[f][e], acc[rr][f]);
        }
      }
    }
    for (uint k = lid; VEC == 0 && k < p.in_f; k += WG) {
      float xv[MAXR];
      for (uint rr = 0; rr < MAXR; ++rr) {
        xv[rr] = 0.0;
        if (rr < p.rows) xv[rr] = float(x[rr * p.x_stride + k]);
      }
      for (uint f = 0; f < NF; ++f) {
        if (n0 + f < p.out_f) {
          const float wv = WQ == 0 ? float(w[(n0 + f) * p.in_f + k]) : wq_at(n0 + f, k);
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
