#version 450
// Cooperative-matrix matrix-matrix linear layer (VK_KHR_cooperative_matrix): y = x·Wᵀ (+ b) (+ r), fp16
// inputs, fp32 accumulation, one rounding at the store. fp16 storage only (DVK_FP16 = 1).
//   x: rows x in (row stride x_stride), W: out x in (dense, torch Linear layout), y, r: rows x out (y_stride).
//   b: out float32 values (flags bit 1; binding 4), added before r (flags bit 0): v = (x·Wᵀ + b) + r.
// The matrix shape CM x CN x CK is one the driver lists (vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR:
// A, B float16, C and the result float32, subgroup scope); the host passes it as specialization constants.
// A workgroup of NSG = SGM x SGN subgroups computes a BM x BN tile of y (BM = SGM·WM·CM, BN = SGN·WN·CN);
// each subgroup owns WM x WN accumulator matrices. Per step of BK along `in`, the workgroup stages the x
// tile (BM x BK) and the W tile (BN x BK) in shared memory as fp16, k contiguous, each row padded by 8
// halves (16 bytes) so that rows start in different banks; A is loaded row-major from the x tile and B
// column-major from the W tile (B[k][n] = W[n][k]). Loads past the tensors' edges are zero, so any rows,
// in and out work. The accumulators leave through a per-subgroup fp32 staging tile, from which every lane
// writes its elements with the bounds check and the residual.
// VEC = 1: 16-byte global loads (the host uses it when in and x_stride are multiples of 8 and the x and W
// bindings are 16-byte aligned); VEC = 0: elementwise. Y32 = 1: y and r are float32 (the residual stream,
// the logits). Workgroups grid-stride over the tiles.
// Compiled by a glslc that knows GL_KHR_cooperative_matrix (shaders/coopmat/README.md); the SPIR-V is
// committed beside it.
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
#extension GL_KHR_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_KHR_shader_subgroup_basic : require
#include "common.glsl"

layout(constant_id = 0) const uint WG = 128;  // NSG subgroups of the pinned size
layout(constant_id = 1) const uint NSG = 4;   // subgroups per workgroup
layout(constant_id = 2) const uint SGM = 2;   // subgroups along the rows (NSG / SGM along the columns)
layout(constant_id = 3) const uint CM = 16;
layout(constant_id = 4) const uint CN = 16;
layout(constant_id = 5) const uint CK = 16;
layout(constant_id = 6) const uint BK = 32;   // a multiple of CK and of 8
layout(constant_id = 7) const uint VEC = 0;
layout(constant_id = 8) const uint Y32 = 0;
layout(local_size_x_id = 0) in;

// Accumulators per subgroup: compile-time, not specialization constants (array lengths from
// specialization constants are one of the coopmat driver bugs ncnn lists for Adreno).
#define WM 2u
#define WN 2u
const uint SGN = NSG / SGM;
const uint BM = SGM * WM * CM;
const uint BN = SGN * WN * CN;
const uint SK = BK + 8u;    // halves per staged row (padded)
const uint SK4 = SK / 4u;   // f16vec4 per staged row
const uint U = BK / 8u;     // 8-half load units per tile row

layout(std430, binding = 0) readonly buffer X { float16_t x[]; };
layout(std430, binding = 0) readonly buffer XV { uvec4 xv[]; };
layout(std430, binding = 1) readonly buffer W { float16_t w[]; };
layout(std430, binding = 1) readonly buffer WV { uvec4 wv[]; };
layout(std430, binding = 2) writeonly buffer Y { float16_t y[]; };
layout(std430, binding = 3) readonly buffer R { float16_t r[]; };  // residual; a dummy binding when unused
layout(std430, binding = 2) writeonly buffer YF { float yf[]; };
layout(std430, binding = 3) readonly buffer RF { float rf[]; };
layout(std430, binding = 4) readonly buffer Bias { float bias[]; };  // float32; a dummy binding when unused

layout(push_constant) uniform Params {
  uint rows;
  uint in_f;
  uint out_f;
  uint x_stride;
  uint y_stride;
  uint flags;  // bit 0: add the residual (binding 3); bit 1: add the bias (binding 4)
} p;

shared f16vec4 xs[BM * SK4];
shared f16vec4 ws[BN * SK4];
shared float cs[NSG * CM * CN];

f16vec4 lo4(uvec4 v) { return f16vec4(unpackFloat2x16(v.x), unpackFloat2x16(v.y)); }
f16vec4 hi4(uvec4 v) { return f16vec4(unpackFloat2x16(v.z), unpackFloat2x16(v.w)); }

// Stages rows [r0, r0 + n) x k [k0, k0 + BK) of a (nrows x in, row stride `stride`) tensor into `dst`.
#define STAGE(dst, src, srcv, n, r0, nrows, stride, k0)                                          \
  for (uint e = gl_LocalInvocationIndex; e < (n) * U; e += WG) {                                \
    const uint row = e / U, kc = e % U;                                                         \
    const uint gr = (r0) + row, gk = (k0) + kc * 8u;                                            \
    f16vec4 a = f16vec4(0.0hf), b = f16vec4(0.0hf);                                             \
    if (gr < (nrows) && gk < p.in_f) {                                                          \
      if (VEC != 0u) {                                                                          \
        const uvec4 v = srcv[(gr * (stride) + gk) / 8u];                                         \
        a = lo4(v);                                                                             \
        b = hi4(v);                                                                             \
      } else {                                                                                  \
        const uint base = gr * (stride) + gk;                                                   \
        [[unroll]] for (uint i = 0; i < 4u; ++i) {                                              \
          if (gk + i < p.in_f) a[i] = src[base + i];                                             \
          if (gk + 4u + i < p.in_f) b[i] = src[base + 4u + i];                                   \
        }                                                                                       \
      }                                                                                         \
    }                                                                                           \
    dst[row * SK4 + kc * 2u] = a;                                                               \
    dst[row * SK4 + kc * 2u + 1u] = b;                                                          \
  }

void main() {
  const uint sg = gl_SubgroupID;
  const uint sgm = sg % SGM, sgn = sg / SGM;
  for (uint tm = gl_WorkGroupID.y; tm * BM < p.rows; tm += gl_NumWorkGroups.y) {
    for (uint tn = gl_WorkGroupID.x; tn * BN < p.out_f; tn += gl_NumWorkGroups.x) {
      const uint m0 = tm * BM, n0 = tn * BN;
      coopmat<float, gl_ScopeSubgroup, CM, CN, gl_MatrixUseAccumulator> acc[WM][WN];
      [[unroll]] for (uint i = 0; i < WM; ++i)
        [[unroll]] for (uint j = 0; j < WN; ++j)
          acc[i][j] = coopmat<float, gl_ScopeSubgroup, CM, CN, gl_MatrixUseAccumulator>(0.0);

      for (uint k0 = 0; k0 < p.in_f; k0 += BK) {
        // The previous step's barrier (or the previous tile's last one) retired every read of the tiles.
        STAGE(xs, x, xv, BM, m0, p.rows, p.x_stride, k0)
        STAGE(ws, w, wv, BN, n0, p.out_f, p.in_f, k0)
        barrier();
        [[unroll]] for (uint kk = 0; kk < BK; kk += CK) {
          coopmat<float16_t, gl_ScopeSubgroup, CM, CK, gl_MatrixUseA> a[WM];
          coopmat<float16_t, gl_ScopeSubgroup, CK, CN, gl_MatrixUseB> b[WN];
          [[unroll]] for (uint i = 0; i < WM; ++i)
            coopMatLoad(a[i], xs, ((sgm * WM + i) * CM) * SK4 + kk / 4u, SK4, gl_CooperativeMatrixLayoutRowMajor);
          [[unroll]] for (uint j = 0; j < WN; ++j)
            coopMatLoad(b[j], ws, ((sgn * WN + j) * CN) * SK4 + kk / 4u, SK4, gl_CooperativeMatrixLayoutColumnMajor);
          [[unroll]] for (uint i = 0; i < WM; ++i)
            [[unroll]] for (uint j = 0; j < WN; ++j) acc[i][j] = coopMatMulAdd(a[i], b[j], acc[i][j]);
        }
        barrier();
      }

      // Epilogue: one accumulator at a time through this subgroup's staging tile.
      const uint cs0 = sg * CM * CN;
      [[unroll]] for (uint i = 0; i < WM; ++i)
        [[unroll]] for (uint j = 0; j < WN; ++j) {
          coopMatStore(acc[i][j], cs, cs0, CN, gl_CooperativeMatrixLayoutRowMajor);
          subgroupMemoryBarrierShared();
          subgroupBarrier();
          const uint r0 = m0 + (sgm * WM + i) * CM, c0 = n0 + (sgn * WN + j) * CN;
          for (uint e = gl_SubgroupInvocationID; e < CM * CN; e += gl_SubgroupSize) {
            const uint row = r0 + e / CN, col = c0 + e % CN;
            if (row >= p.rows || col >= p.out_f) continue;
            const uint o = row * p.y_stride + col;
            float v = cs[cs0 + e];
            if ((p.flags & 2u) != 0u) v += bias[col];
            if (Y32 != 0u) {
              if ((p.flags & 1u) != 0u) v += rf[o];
              yf[o] = v;
            } else {
              if ((p.flags & 1u) != 0u) v += float(r[o]);
              y[o] = float16_t(v);
            }
          }
          subgroupMemoryBarrierShared();
          subgroupBarrier();
        }
    }
  }
}
