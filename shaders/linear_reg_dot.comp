#version 450
// Register-tiled matrix-matrix linear layer over Q8_0 / Q4_0 weights with int8 activations and 4x8-bit
// integer dot products (the prefill twin of linear_row_dot): y = q8(x)·Wᵀ (+ b) (+ r).
//   x: rows x in (row stride x_stride, storage type), W: out x in in the struct-of-arrays layout of
//   runtime/ops/linear_quant.hpp (fp16 scale bits, then from byte p.qoff the quants), y, r: rows x out.
//   b: out float32 values (flags bit 1; binding 4), added before r (flags bit 0): v = (x·Wᵀ + b) + r.
// The geometry and spec constants are linear_reg.comp's (one subgroup per workgroup, a BM x (WG·RN) tile of
// y, lane l owns columns n0 + l + j·WG of all BM rows), the k step is one 32-weight block:
//  - each lane loads its RN weight blocks (Q8_0: two 16-byte loads; Q4_0: one, its nibbles turned into
//    signed bytes (nibble − 8) in registers) and their scales;
//  - each row's 32 activations are quantized once per workgroup with Q8_0's rule (q8_0.glsl: d = amax / 127,
//    q = round-half-away(a / d), the decode int8 path's rounding): lane l quantizes rows l, l + WG, … and
//    writes the 8 packed words and the scale to shared memory; after a barrier every lane reads every row there
//    at a constant address (a broadcast), and a second barrier ends the block. Not subgroupShuffle: radv
//    (gfx1100, wave64) lowers a shuffle to a loop, which kept the row loop rolled and its accumulators in scratch;
//  - per (row, column): s = Σ 8 OpSDot(q_x, q_w) in int32 over the block, then acc += (d_x·d_w)·float(s).
// The activations are quantized on the way in, so the op needs no scratch buffer and keeps record_quant's
// bindings (the planner sees the same node). Rows and columns past the edge are clamped at the loads and
// dropped at the store; in is a multiple of 32 (the layout requires it). Workgroups grid-stride over tiles.
// VEC = 1: x read as 16-byte vectors (x_stride a multiple of 8 halves / 4 floats, aligned binding), else
// elementwise. Y32 = 1: y and r are float32 (RTYPE) in either variant. Built only on devices with
// shaderIntegerDotProduct (the DotProduct capabilities are in this module: int_dot.glsl).
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
#extension GL_EXT_spirv_intrinsics : require
#include "common.glsl"
#include "q8_0.glsl"
#include "int_dot.glsl"

layout(constant_id = 0) const uint WG = 8;   // == the subgroup size
layout(constant_id = 1) const uint BM = 16;  // rows per tile
layout(constant_id = 2) const uint RN = 4;   // columns per lane
layout(constant_id = 3) const uint VEC = 1;  // 16-byte loads of x
layout(constant_id = 4) const uint Y32 = 0;
layout(constant_id = 5) const uint WQ = 1;   // 1 = Q8_0, 2 = Q4_0
layout(local_size_x_id = 0) in;

#if DVK_FP16
#define VTYPE uvec4
#define KVEC 8u
#else
#define VTYPE vec4
#define KVEC 4u
#endif
const uint RA = (BM + WG - 1) / WG;  // rows each lane quantizes per block

layout(std430, binding = 0) readonly buffer X { STYPE x[]; };
layout(std430, binding = 0) readonly buffer XV { VTYPE xv[]; };
layout(std430, binding = 1) readonly buffer WQ1 { uint wq1[]; };   // fp16 scale bits, two per word
layout(std430, binding = 1) readonly buffer WQ4 { uvec4 wq4[]; };  // the quants (from byte p.qoff, 16-byte aligned)
layout(std430, binding = 2) writeonly buffer Y { STYPE y[]; };
layout(std430, binding = 3) readonly buffer R { STYPE r[]; };  // residual; a dummy binding when unused
layout(std430, binding = 2) writeonly buffer YF { RTYPE yf[]; };
layout(std430, binding = 3) readonly buffer RF { RTYPE rf[]; };
layout(std430, binding = 4) readonly buffer Bias { float bias[]; };  // float32; a dummy binding when unused

shared uvec4 sq[BM * 2];  // the tile's quantized rows of the current block: 32 int8 in two uvec4s per row
shared float sd[BM];      // and their scales

layout(push_constant) uniform Params {
  uint rows;
  uint in_f;
  uint out_f;
  uint x_stride;
  uint y_stride;
  uint flags;  // bit 0: add the residual (binding 3); bit 1: add the bias (binding 4)
  uint qoff;  // byte offset of the quants in the weight binding (a multiple of 16)
} p;

// The 32 activations of x from element offset e (a block start), quantized: 8 words of int8 (element 0 in
// the low byte) and the block's scale d.
void quant_block(uint e, out uint qa[8], out float d) {
  float a[32];
  if (VEC != 0) {
    [[unroll]] for (uint v = 0; v < 32 / KVEC; ++v) {
      const VTYPE t = xv[e / KVEC + v];
#if DVK_FP16
      [[unroll]] for (uint i = 0; i < 4; ++i) {
        const vec2 h = unpackHalf2x16(t[i]);
        a[v * KVEC + 2 * i] = h.x;
        a[v * KVEC + 2 * i + 1] = h.y;
      }
#else
      [[unroll]] for (uint i = 0; i < 4; ++i) a[v * KVEC + i] = t[i];
#endif
    }
  } else {
    [[unroll]] for (uint i = 0; i < 32; ++i) a[i] = float(x[e + i]);
  }
  float amax = 0.0;
  [[unroll]] for (uint i = 0; i < 32; ++i) amax = max(amax, abs(a[i]));
  d = amax / 127.0;
  const float id = q8_inverse(d);
  [[unroll]] for (uint i = 0; i < 8; ++i) qa[i] = q8_pack4(vec4(a[4 * i], a[4 * i + 1], a[4 * i + 2], a[4 * i + 3]), id);
}

// Signed bytes (nibble − 8) of four packed nibbles (0..15 in each byte), without borrows across bytes.
uint nibbles_to_s8(uint v) { return ((v | 0x80808080u) - 0x08080808u) ^ 0x80808080u; }

void main() {
  const uint lane = gl_LocalInvocationIndex;
  const uint TN = WG * RN;
  const uint nb = p.in_f / 32;  // blocks per row
  for (uint tm = gl_WorkGroupID.y; tm * BM < p.rows; tm += gl_NumWorkGroups.y) {
    for (uint tn = gl_WorkGroupID.x; tn * TN < p.out_f; tn += gl_NumWorkGroups.x) {
      const uint m0 = tm * BM, n0 = tn * TN;
      float acc[BM][RN];
      [[unroll]] for (uint i = 0; i < BM; ++i)
        [[unroll]] for (uint j = 0; j < RN; ++j) acc[i][j] = 0.0;
      uint wn[RN];  // this lane's weight rows (clamped)
      [[unroll]] for (uint j = 0; j < RN; ++j) wn[j] = min(n0 + lane + j * WG, p.out_f - 1);
      uint xrow[RA];  // the rows this lane quantizes (clamped; lanes past the tile's rows skip the store)
      [[unroll]] for (uint a = 0; a < RA; ++a) xrow[a] = min(m0 + lane + a * WG, p.rows - 1) * p.x_stride;

      for (uint kb = 0; kb < nb; ++kb) {
        uint bw[RN][8];
        float dw[RN];
        [[unroll]] for (uint j = 0; j < RN; ++j) {
          const uint si = wn[j] * nb + kb;
          dw[j] = half_at(wq1[si / 2], (si % 2) * 16u);
          if (WQ == 1) {
            const uint q = (p.qoff + wn[j] * p.in_f) / 16 + 2 * kb;
            const uvec4 lo = wq4[q], hi = wq4[q + 1];
            [[unroll]] for (uint i = 0; i < 4; ++i) {
              bw[j][i] = lo[i];
              bw[j][4 + i] = hi[i];
            }
          } else {
            const uvec4 q = wq4[p.qoff / 16 + si];  // Q4_0: one 16-byte vector per block
            [[unroll]] for (uint i = 0; i < 4; ++i) {
              bw[j][i] = nibbles_to_s8(q[i] & 0x0f0f0f0fu);             // elements 4i .. 4i + 3
              bw[j][4 + i] = nibbles_to_s8((q[i] >> 4) & 0x0f0f0f0fu);  // elements 16 + 4i ..
            }
          }
        }
        [[unroll]] for (uint a = 0; a < RA; ++a) {
          const uint rt = lane + a * WG;  // the row in the tile
          if (rt < BM) {
            uint q[8];
            float d;
            quant_block(xrow[a] + kb * 32, q, d);
            sq[2 * rt] = uvec4(q[0], q[1], q[2], q[3]);
            sq[2 * rt + 1] = uvec4(q[4], q[5], q[6], q[7]);
            sd[rt] = d;
          }
        }
        barrier();
        [[unroll]] for (uint i = 0; i < BM; ++i) {
          const uvec4 q0 = sq[2 * i], q1 = sq[2 * i + 1];  // the same address in every lane
          const uint qa[8] = uint[8](q0.x, q0.y, q0.z, q0.w, q1.x, q1.y, q1.z, q1.w);
          const float da = sd[i];
          [[unroll]] for (uint j = 0; j < RN; ++j) {
            int s = 0;
            [[unroll]] for (uint w = 0; w < 8; ++w) s += sdot4x8(qa[w], bw[j][w], 0);
            acc[i][j] = fma(da * dw[j], float(s), acc[i][j]);
          }
        }
        barrier();  // every lane has read the block before the next one is written
      }

      // The bias, once per column (one uniform branch, RN loads), before the per-element epilogue.
      if ((p.flags & 2u) != 0u)
        [[unroll]] for (uint j = 0; j < RN; ++j) {
          const uint col = n0 + lane + j * WG;
          const float bj = col < p.out_f ? bias[col] : 0.0;
          [[unroll]] for (uint i = 0; i < BM; ++i) acc[i][j] += bj;
        }
      [[unroll]] for (uint i = 0; i < BM; ++i) {
        const uint row = m0 + i;
        if (row >= p.rows) break;
        [[unroll]] for (uint j = 0; j < RN; ++j) {
          const uint col = n0 + lane + j * WG;
          if (col >= p.out_f) continue;
          const uint o = row * p.y_stride + col;
          float v = acc[i][j];
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
