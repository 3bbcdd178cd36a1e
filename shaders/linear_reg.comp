#version 450
// Register-tiled matrix-matrix linear layer, no shared memory: y = x·Wᵀ (+ b) (+ r), fp32 accumulation.
//   x: rows x in (row stride x_stride), W: out x in (dense, torch Linear layout), y, r: rows x out (y_stride).
//   b: out float32 values (flags bit 1; binding 4), added before r (flags bit 0): v = (x·Wᵀ + b) + r.
// One subgroup per workgroup (WG == the subgroup size, the host makes sure) computes a BM x (WG·RN) tile
// of y: lane l owns RN columns for all BM rows, so it keeps BM·RN fp32 accumulators. Where RN is a multiple of
// KVEC (CVEC: the CPU drivers' RN = 8) they are the consecutive columns n0 + l·RN + j, stored as 16-byte vectors;
// else (GPUs' RN = 2) n0 + l + j·WG, so that each store instruction writes consecutive columns across the lanes.
// Per step of KV consecutive k (KV = 8 halves in a uvec4 in fp16, 4 floats in a vec4 in fp32; 1 when
// VEC = 0), each lane loads its RN weight vectors (private: one 16-byte load each) and the rows of x are
// loaded once per subgroup, lane l loading rows l, l + WG, … and subgroupBroadcast with a constant lane giving
// each element to every lane (the _sg variant, rows unrolled by hand: ROW_SG; without subgroup ballot, or
// with a subgroup size it does not cover, every lane loads every row itself: uniform loads, scalar on AMD).
// Why no shared memory: on CPU drivers (lavapipe, SwiftShader) every non-uniform load, shared or global,
// is a per-lane loop and a barrier is a coroutine switch, so the fewest loads per FMA win; on Mali,
// barriers and shared memory stop workgroup merging. The GPU path with shared memory is linear.comp.
// Loads never leave the tensors: rows and columns past the edge are clamped (their results are dropped
// at the store); the k tail (in % KV) runs elementwise. Workgroups grid-stride over the tiles.
// Y32 = 1: y and r are float32 (RTYPE) in either variant; Y32 = 2: float32 when p.flags bit 2 is set, else the storage
// type, chosen per dispatch (the epilogue's one uniform branch): one pipeline serves both outputs, so a model compiles
// the register tile once per weight format instead of twice (on lavapipe each compile is seconds of LLVM at the first
// dispatch; the main loop does not depend on the output type).
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
#include "common.glsl"
#if DVK_SUBGROUP
#extension GL_KHR_shader_subgroup_ballot : require
#extension GL_KHR_shader_subgroup_shuffle : require
#endif

layout(constant_id = 0) const uint WG = 8;   // == the subgroup size
layout(constant_id = 1) const uint BM = 16;  // rows per tile
layout(constant_id = 2) const uint RN = 4;   // columns per lane
layout(constant_id = 3) const uint VEC = 1;  // 16-byte loads along k (in, x_stride multiples of KV; aligned bindings)
layout(constant_id = 4) const uint Y32 = 0;
// Weight format: 0 = dense (the storage type); 1 = Q8_0, 2 = Q4_0 in the struct-of-arrays layout of
// runtime/ops/linear_quant.hpp (fp16 scale bits, then from byte p.qoff the quants), dequantized in
// registers: q·d (Q8_0) or (nibble − 8)·d (Q4_0), per KV-wide step inside one 32-weight block.
layout(constant_id = 5) const uint WQ = 0;
// _sg variant: 1 = share x rows by subgroupShuffle in an [[unroll]] row loop (CPU drivers: measured faster
// on lavapipe 22.3 than the broadcasts), 0 = subgroupBroadcast with constant lanes (GPUs; see ROW_SG).
layout(constant_id = 6) const uint XSH = 0;
layout(local_size_x_id = 0) in;

#if DVK_FP16
#define VTYPE uvec4
#define KVEC 8u
#else
#define VTYPE vec4
#define KVEC 4u
#endif
const uint KV = VEC != 0 ? KVEC : 1u;
const uint RA = (BM + WG - 1) / WG;  // rows of x each lane loads per step
// A lane's columns consecutive, the epilogue in 16-byte vectors (see the top). On lavapipe each store or load of a
// lane's own address is a loop of its own that LLVM compiles: the 2·BM·RN scalar sites of the two output types took
// half of this pipeline's 1.5 s compile (Mesa 22.3), BM·RN/4 vector ones a fraction of it.
const bool CVEC = RN % KVEC == 0;
// Column of a lane's accumulator j.
#define COL(j) (CVEC ? n0 + lane * RN + (j) : n0 + lane + (j) * WG)

layout(std430, binding = 0) readonly buffer X { STYPE x[]; };
layout(std430, binding = 0) readonly buffer XV { VTYPE xv[]; };
layout(std430, binding = 1) readonly buffer W { STYPE w[]; };
layout(std430, binding = 1) readonly buffer WV { VTYPE wv[]; };
layout(std430, binding = 2) writeonly buffer Y { STYPE y[]; };
layout(std430, binding = 3) readonly buffer R { STYPE r[]; };  // residual; a dummy binding when unused
layout(std430, binding = 2) writeonly buffer YF { RTYPE yf[]; };
layout(std430, binding = 3) readonly buffer RF { RTYPE rf[]; };
// The vector epilogue's views (CVEC, p.flags bit 3): y and r as 16-byte vectors of the storage type and of float32.
layout(std430, binding = 2) writeonly buffer YV { VTYPE yv[]; };
layout(std430, binding = 3) readonly buffer RV { VTYPE rv[]; };
layout(std430, binding = 2) writeonly buffer YFV { vec4 yfv[]; };
layout(std430, binding = 3) readonly buffer RFV { vec4 rfv[]; };
layout(std430, binding = 4) readonly buffer Bias { float bias[]; };  // float32; a dummy binding when unused
layout(std430, binding = 1) readonly buffer WQ1 { uint wq1[]; };   // quantized layout, 4-byte words
layout(std430, binding = 1) readonly buffer WQ2 { uvec2 wq2[]; };  // 8-byte words

layout(push_constant) uniform Params {
  uint rows;
  uint in_f;
  uint out_f;
  uint x_stride;
  uint y_stride;
  uint flags;  // bit 0: add the residual (binding 3); bit 1: add the bias (binding 4); bit 2: float32 y, r (Y32 = 2);
               // bit 3: y and r may be stored as 16-byte vectors (offsets 16-byte aligned, y_stride a multiple of 8)
  uint qoff;  // WQ != 0: byte offset of the quants in the weight binding (a multiple of 16)
} p;

// KVEC floats of one 16-byte vector.
#if DVK_FP16
void unpack_v(uvec4 v, out float f[KVEC]) {
  [[unroll]] for (uint i = 0; i < 4; ++i) {
    const vec2 h = unpackHalf2x16(v[i]);
    f[2 * i] = h.x;
    f[2 * i + 1] = h.y;
  }
}
#else
void unpack_v(vec4 v, out float f[KVEC]) {
  [[unroll]] for (uint i = 0; i < 4; ++i) f[i] = v[i];
}
#endif

#include "linear_wq.glsl"

#if DVK_SUBGROUP
// Row I of the tile (I < 16 = the host's BM), element kk, from the lane that loaded it (lane I % WG, its row
// I / WG). I is a literal (the rows are unrolled by hand): radv (Mesa 22.3, gfx11 wave64) lowers
// subgroupShuffle to a waterfall loop before it unrolls loops, which kept an [[unroll]] row loop rolled
// (its accumulators picked by v_cndmask chains, 64 FMAs per k step in place of 256), while subgroupBroadcast
// with a constant lane is one v_readlane_b32 into a scalar register. Its lane must be a compile-time
// constant (SPIR-V before 1.5), hence one branch per subgroup size (spec constants; BM <= 16).
#define XB(I, kk) (WG >= BM ? subgroupBroadcast(xf[0][kk], I) \
                 : WG == 8 ? subgroupBroadcast(xf[min(I / 8, RA - 1)][kk], I % 8) \
                           : subgroupBroadcast(xf[min(I / 4, RA - 1)][kk], I % 4))
#define ROW_SG(I)                                                                      \
  if (I < BM) {                                                                        \
    [[unroll]] for (uint kk = 0; kk < KVEC; ++kk) {                                    \
      const float xb = XB(I, kk);                                                      \
      [[unroll]] for (uint j = 0; j < RN; ++j) acc[I][j] = fma(xb, b[j][kk], acc[I][j]); \
    }                                                                                  \
  }
// The subgroup sizes XB covers (else every lane loads every row itself).
const bool XB_OK = WG >= BM || WG == 8 || WG == 4;
#endif

void main() {
  const uint lane = gl_LocalInvocationIndex;
  const bool out32 = Y32 == 2 ? (p.flags & 4u) != 0u : Y32 != 0;
  const uint TN = WG * RN;
#if DVK_SUBGROUP
  // Broadcast only when the workgroup is exactly one subgroup (the host asks for that size; a driver that
  // gave another one still computes the right result, with private loads).
  const bool share = (XSH != 0 || XB_OK) && gl_SubgroupSize == WG && gl_NumSubgroups == 1;
#endif
  for (uint tm = gl_WorkGroupID.y; tm * BM < p.rows; tm += gl_NumWorkGroups.y) {
    for (uint tn = gl_WorkGroupID.x; tn * TN < p.out_f; tn += gl_NumWorkGroups.x) {
      const uint m0 = tm * BM, n0 = tn * TN;
      float acc[BM][RN];
      [[unroll]] for (uint i = 0; i < BM; ++i)
        [[unroll]] for (uint j = 0; j < RN; ++j) acc[i][j] = 0.0;
      // Element offsets of this lane's weight rows and x rows (clamped into the tensors).
      uint wrow[RN];
      [[unroll]] for (uint j = 0; j < RN; ++j) wrow[j] = min(COL(j), p.out_f - 1) * p.in_f;
      uint xrow[RA];
      [[unroll]] for (uint a = 0; a < RA; ++a) xrow[a] = min(m0 + lane + a * WG, p.rows - 1) * p.x_stride;
      uint xall[BM];  // every row of the tile, for the private-load path and the k tail
      [[unroll]] for (uint i = 0; i < BM; ++i) xall[i] = min(m0 + i, p.rows - 1) * p.x_stride;

      const uint kmain = VEC != 0 ? p.in_f - p.in_f % KV : 0u;
      for (uint k = 0; k < kmain; k += KV) {
        float b[RN][KVEC];
        if (WQ == 0) {
          [[unroll]] for (uint j = 0; j < RN; ++j) unpack_v(wv[(wrow[j] + k) / KVEC], b[j]);
        } else {
          [[unroll]] for (uint j = 0; j < RN; ++j) wq_vec(min(COL(j), p.out_f - 1), k, b[j]);
        }
#if DVK_SUBGROUP
        if (XSH != 0) {
          VTYPE xa[RA];
          [[unroll]] for (uint a = 0; a < RA; ++a) xa[a] = xv[(xrow[a] + k) / KVEC];
          [[unroll]] for (uint i = 0; i < BM; ++i) {
            float a[KVEC];
            if (share) unpack_v(subgroupShuffle(xa[i / WG], i % WG), a);  // i % WG: a constant once unrolled
            else unpack_v(xv[(xall[i] + k) / KVEC], a);
            [[unroll]] for (uint kk = 0; kk < KVEC; ++kk)
              [[unroll]] for (uint j = 0; j < RN; ++j) acc[i][j] = fma(a[kk], b[j][kk], acc[i][j]);
          }
        } else if (share) {
          float xf[RA][KVEC];  // this lane's rows of x (l, l + WG, …), unpacked once
          [[unroll]] for (uint a = 0; a < RA; ++a) unpack_v(xv[(xrow[a] + k) / KVEC], xf[a]);
          ROW_SG(0) ROW_SG(1) ROW_SG(2) ROW_SG(3) ROW_SG(4) ROW_SG(5) ROW_SG(6) ROW_SG(7)
          ROW_SG(8) ROW_SG(9) ROW_SG(10) ROW_SG(11) ROW_SG(12) ROW_SG(13) ROW_SG(14) ROW_SG(15)
        } else
#endif
        {
          [[unroll]] for (uint i = 0; i < BM; ++i) {
            float a[KVEC];
            unpack_v(xv[(xall[i] + k) / KVEC], a);
            [[unroll]] for (uint kk = 0; kk < KVEC; ++kk)
              [[unroll]] for (uint j = 0; j < RN; ++j) acc[i][j] = fma(a[kk], b[j][kk], acc[i][j]);
          }
        }
      }
      // Elementwise: the k tail, or everything when VEC == 0.
      for (uint k = kmain; k < p.in_f; ++k) {
        float b[RN];
        [[unroll]] for (uint j = 0; j < RN; ++j)
          b[j] = WQ == 0 ? float(w[wrow[j] + k]) : wq_at(min(COL(j), p.out_f - 1), k);
        [[unroll]] for (uint i = 0; i < BM; ++i) {
          const float a = float(x[xall[i] + k]);
          [[unroll]] for (uint j = 0; j < RN; ++j) acc[i][j] = fma(a, b[j], acc[i][j]);
        }
      }

      // The bias, once per column (one uniform branch, RN loads), before the per-element epilogue.
      if ((p.flags & 2u) != 0u)
        [[unroll]] for (uint j = 0; j < RN; ++j) {
          const uint col = COL(j);
          const float bj = col < p.out_f ? bias[col] : 0.0;
          [[unroll]] for (uint i = 0; i < BM; ++i) acc[i][j] += bj;
        }
      // The strided columns (GPUs): element by element, each store instruction consecutive across the lanes. (Written
      // as it was before the vector form below: radv's ACO keeps it 92 instructions shorter than with the residual
      // test hoisted.)
      if (!CVEC) {
        [[unroll]] for (uint i = 0; i < BM; ++i) {
          const uint row = m0 + i;
          if (row >= p.rows) break;
          [[unroll]] for (uint j = 0; j < RN; ++j) {
            const uint col = n0 + lane + j * WG;
            if (col >= p.out_f) continue;
            const uint o = row * p.y_stride + col;
            float v = acc[i][j];
            if (out32) {
              if ((p.flags & 1u) != 0u) v += rf[o];
              yf[o] = v;
            } else {
              if ((p.flags & 1u) != 0u) v += float(r[o]);
              y[o] = STYPE(v);
            }
          }
        }
      } else {
        const bool res = (p.flags & 1u) != 0u;
        // The vector epilogue: every column of this lane inside y, y and r vector-aligned (the host's flag).
        const bool whole = (p.flags & 8u) != 0u && COL(RN - 1) < p.out_f;
        if (whole) {
          [[unroll]] for (uint i = 0; i < BM; ++i) {
            const uint row = m0 + i;
            if (row >= p.rows) break;
            const uint o = row * p.y_stride + COL(0);  // a multiple of 8
            if (out32) {
              [[unroll]] for (uint c = 0; c < RN / 4; ++c) {
                vec4 v = vec4(acc[i][4 * c], acc[i][4 * c + 1], acc[i][4 * c + 2], acc[i][4 * c + 3]);
                if (res) v += rfv[o / 4 + c];
                yfv[o / 4 + c] = v;
              }
            } else {
              [[unroll]] for (uint c = 0; c < RN / KVEC; ++c) {
                float v[KVEC];
                [[unroll]] for (uint e = 0; e < KVEC; ++e) v[e] = acc[i][KVEC * c + e];
                if (res) {
                  float rr[KVEC];
                  unpack_v(rv[o / KVEC + c], rr);
                  [[unroll]] for (uint e = 0; e < KVEC; ++e) v[e] += rr[e];
                }
#if DVK_FP16
                // Each value rounded to fp16 once, as the scalar store does.
                yv[o / KVEC + c] = uvec4(packHalf2x16(vec2(v[0], v[1])), packHalf2x16(vec2(v[2], v[3])),
                                         packHalf2x16(vec2(v[4], v[5])), packHalf2x16(vec2(v[6], v[7])));
#else
                yv[o / KVEC + c] = vec4(v[0], v[1], v[2], v[3]);
#endif
              }
            }
          }
        } else {
          // A lane at the right edge, or y not vector-aligned: element by element in one rolled loop, the accumulator
          // picked by a chain of selects. On lavapipe 22.3 a rolled loop per row instead (inside the unrolled rows)
          // took LLVM 4.6 s, and the scalar sites unrolled (as the strided form above has them) 0.6 s more than this.
          [[dont_unroll]] for (uint t = 0; t < BM * RN && COL(0) < p.out_f; ++t) {
            const uint i = t / RN, j = t % RN;
            const uint row = m0 + i, col = COL(j);
            if (row >= p.rows) break;
            if (col >= p.out_f) continue;
            const uint o = row * p.y_stride + col;
            float val = acc[0][0];
            [[unroll]] for (uint e = 1; e < BM * RN; ++e) val = t == e ? acc[e / RN][e % RN] : val;
            if (out32) {
              if (res) val += rf[o];
              yf[o] = val;
            } else {
              if (res) val += float(r[o]);
              y[o] = STYPE(val);
            }
          }
        }
      }
    }
  }
}
