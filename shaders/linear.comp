#version 450
// Tiled matrix-matrix linear layer: y = x·Wᵀ (+ r), fp32 accumulation, one rounding at the store.
//   x: rows x in (row stride x_stride), W: out x in (dense, torch Linear layout), y, r: rows x out (y_stride).
// A workgroup computes a BM x BN tile of y, stepping `in` by BK through shared memory (both tiles stored
// k-major, fp32, padded by one to avoid bank conflicts on the transposing store). Invocation (tx, ty)
// owns the RM x RN register block of rows ty + i·TY and columns tx + j·TX (TX = BN/RN, TY = BM/RM),
// so consecutive invocations read consecutive shared words and store consecutive columns of y.
// Every global load is bounds-checked: any rows / in / out. Workgroups grid-stride over the tiles, so
// the host may dispatch fewer than there are tiles (maxComputeWorkGroupCount).
// VEC = 1 loads 4 consecutive k at once (uvec2 = 4 halves in fp16, vec4 in fp32): the host uses it when
// in, x_stride and BK are multiples of 4 and the x and W bindings are 16-byte aligned.
// Y32 = 1: y and r are float32 (RTYPE: the model's residual stream, its logits) in either variant.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(constant_id = 0) const uint WG = 256;  // == (BM / RM) * (BN / RN)
layout(constant_id = 1) const uint BM = 64;
layout(constant_id = 2) const uint BN = 64;
layout(constant_id = 3) const uint BK = 16;
layout(constant_id = 4) const uint RM = 4;
layout(constant_id = 5) const uint RN = 4;
layout(constant_id = 6) const uint VEC = 0;
layout(constant_id = 7) const uint Y32 = 0;
layout(local_size_x_id = 0) in;

#if DVK_FP16
#define VTYPE uvec2
vec4 unpack4(uvec2 v) { return vec4(unpackHalf2x16(v.x), unpackHalf2x16(v.y)); }
#else
#define VTYPE vec4
vec4 unpack4(vec4 v) { return v; }
#endif

layout(std430, binding = 0) readonly buffer X { STYPE x[]; };
layout(std430, binding = 0) readonly buffer XV { VTYPE xv[]; };
layout(std430, binding = 1) readonly buffer W { STYPE w[]; };
layout(std430, binding = 1) readonly buffer WV { VTYPE wv[]; };
layout(std430, binding = 2) writeonly buffer Y { STYPE y[]; };
layout(std430, binding = 3) readonly buffer R { STYPE r[]; };  // residual; a dummy binding when unused
layout(std430, binding = 2) writeonly buffer YF { RTYPE yf[]; };  // Y32: the same bindings as float32
layout(std430, binding = 3) readonly buffer RF { RTYPE rf[]; };

layout(push_constant) uniform Params {
  uint rows;
  uint in_f;
  uint out_f;
  uint x_stride;
  uint y_stride;
  uint has_residual;
} p;

const uint TX = BN / RN;
const uint TY = BM / RM;
const uint XS = BM + 1;  // padded k-major strides
const uint WS = BN + 1;
shared float xs[BK * XS];
shared float ws[BK * WS];

void main() {
  const uint lid = gl_LocalInvocationIndex;
  const uint tx = lid % TX;
  const uint ty = lid / TX;
  for (uint tm = gl_WorkGroupID.y; tm * BM < p.rows; tm += gl_NumWorkGroups.y) {
    for (uint tn = gl_WorkGroupID.x; tn * BN < p.out_f; tn += gl_NumWorkGroups.x) {
      const uint m0 = tm * BM;
      const uint n0 = tn * BN;
      float acc[RM][RN];
      for (uint i = 0; i < RM; ++i)
        for (uint j = 0; j < RN; ++j) acc[i][j] = 0.0;

      for (uint k0 = 0; k0 < p.in_f; k0 += BK) {
        if (VEC != 0) {
          // 4 consecutive k per load; in % 4 == 0, so a group is either wholly inside `in` or wholly outside.
          for (uint e = lid; e < BM * BK / 4; e += WG) {
            const uint rr = e / (BK / 4), k = (e % (BK / 4)) * 4;
            const uint gr = m0 + rr, gk = k0 + k;
            vec4 v = vec4(0.0);
            if (gr < p.rows && gk < p.in_f) v = unpack4(xv[(gr * p.x_stride + gk) / 4]);
            for (uint i = 0; i < 4; ++i) xs[(k + i) * XS + rr] = v[i];
          }
          for (uint e = lid; e < BN * BK / 4; e += WG) {
            const uint nn = e / (BK / 4), k = (e % (BK / 4)) * 4;
            const uint gn = n0 + nn, gk = k0 + k;
            vec4 v = vec4(0.0);
            if (gn < p.out_f && gk < p.in_f) v = unpack4(wv[(gn * p.in_f + gk) / 4]);
            for (uint i = 0; i < 4; ++i) ws[(k + i) * WS + nn] = v[i];
          }
        } else {
        for (uint e = lid; e < BM * BK; e += WG) {
          const uint rr = e / BK, k = e % BK;
          const uint gr = m0 + rr, gk = k0 + k;
          float v = 0.0;
          if (gr < p.rows && gk < p.in_f) v = float(x[gr * p.x_stride + gk]);
          xs[k * XS + rr] = v;
        }
        for (uint e = lid; e < BN * BK; e += WG) {
          const uint nn = e / BK, k = e % BK;
          const uint gn = n0 + nn, gk = k0 + k;
          float v = 0.0;
          if (gn < p.out_f && gk < p.in_f) v = float(w[gn * p.in_f + gk]);
          ws[k * WS + nn] = v;
        }
        }
        barrier();
        for (uint kk = 0; kk < BK; ++kk) {
          float a[RM];
          float b[RN];
          for (uint i = 0; i < RM; ++i) a[i] = xs[kk * XS + ty + i * TY];
          for (uint j = 0; j < RN; ++j) b[j] = ws[kk * WS + tx + j * TX];
          for (uint i = 0; i < RM; ++i)
            for (uint j = 0; j < RN; ++j) acc[i][j] = fma(a[i], b[j], acc[i][j]);
        }
        barrier();
      }

      for (uint i = 0; i < RM; ++i) {
        const uint row = m0 + ty + i * TY;
        if (row >= p.rows) continue;
        for (uint j = 0; j < RN; ++j) {
          const uint col = n0 + tx + j * TX;
          if (col >= p.out_f) continue;
          const uint o = row * p.y_stride + col;
          float v = acc[i][j];
          if (Y32 != 0) {
            if (p.has_residual != 0u) v += rf[o];
            yf[o] = v;
          } else {
            if (p.has_residual != 0u) v += float(r[o]);
            y[o] = STYPE(v);
          }
        }
      }
    }
  }
}
