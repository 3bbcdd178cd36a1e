#version 450
// Cooperative-matrix prefill of the differential attention (VK_KHR_cooperative_matrix): the op of
// diff_attn (docs/maths.md: O = softmax(Q1·K1ᵀ/√D)·V − λ·softmax(Q2·K2ᵀ/√D)·V, then the headwise RMSNorm
// × subln × gain), with Q·Kᵀ and P·V on cooperative matrices (fp16 A/B, fp32 accumulators). fp16 storage only.
// Layouts as attn_core.glsl: q[i*q_stride + h*2D + c] (Q1|Q2), K cache [g][capacity][2D] (K1|K2), V cache
// [g][capacity][2D], subln[2D], o[i*o_stride + h*2D + col]; binding 5: the dynamic part of pos0.
//
// A workgroup of NSG subgroups owns BR = CM row slots of one K/V group g (workgroup y), query-major like the
// scalar core: slot s is head g*n_rep + s % n_rep at query s / n_rep, so every K/V block serves all n_rep heads.
// Keys are taken in blocks of BC (a multiple of CN and CK):
//   1. the block's K rows (K1|K2, fp16) are staged in shared memory (16-byte loads; rows past the keys are zero);
//   2. S_t = Q_t·K_tᵀ (t = 1, 2) on cooperative matrices, Q_t (CM x CK, row-major) from the staged Q rows,
//      K_tᵀ (CK x CN) column-major from the staged K rows; each (softmax, key tile) task on one subgroup; S stored
//      in shared memory (fp32);
//   3. the block's V rows replace the K rows; per (softmax, row) one invocation applies the scale and the causal
//      limit, updates the running max and sum (fp32) and writes the block's probabilities P_t as fp16, and the
//      factor alpha = exp(m_old − m_new) by which the row's output so far shrinks;
//   4. O_t += P_t·V: each (softmax, CN output columns) task rescales its rows of O_t (fp32, shared memory) by
//      alpha, loads them as the accumulator, adds P_t (CM x CK) · V (CK x CN, row-major) over the block, and
//      stores them back.
// Epilogue (attn_out.glsl's NSM = 2 maths): O = O1/l1 − λ·O2/l2 per row, then × gain·inversesqrt(Σ O²/2D + eps)
// × subln; only valid slots are written.
// The matrix shape CM x CN x CK is one the driver lists (DeviceCaps::coopmat_m/n/k), passed as specialization
// constants with D; the host requires D % CK == 0, 2D % CN == 0 (runtime/ops/attn_tuning.cpp fit_attn_coop).
// Compiled by a glslc that knows GL_KHR_cooperative_matrix (shaders/coopmat/README.md); the SPIR-V is committed.
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
#extension GL_KHR_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_KHR_shader_subgroup_basic : require
#include "common.glsl"

layout(constant_id = 0) const uint WG = 32;  // NSG subgroups of the pinned size
layout(constant_id = 1) const uint NSG = 4;
layout(constant_id = 2) const uint HD = 64;  // D: width of one query/key half
layout(constant_id = 3) const uint CM = 16;  // = BR, the row slots of a workgroup
layout(constant_id = 4) const uint CN = 16;
layout(constant_id = 5) const uint CK = 16;
layout(constant_id = 6) const uint BC = 16;  // keys per block: a multiple of CN and CK (and of 8)
layout(local_size_x_id = 0) in;

const uint BR = CM;
const uint DV = 2 * HD;          // V width, and the width of a Q or K row (Q1|Q2, K1|K2)
const uint RS4 = (DV + 8) / 4;   // f16vec4 per staged Q/K/V row (padded by 8 halves)
const uint PS4 = (BC + 8) / 4;   // f16vec4 per row of probabilities
const uint OS = DV + 4;          // floats per output row (padded by 16 bytes)
const uint U = DV / 8;           // 16-byte units per K/V cache row
const uint NS = BC / CN;         // key tiles of a block (Q·Kᵀ)
const uint NO = DV / CN;         // column tiles of an output row (P·V)

layout(std430, binding = 0) readonly buffer Qbuf { float16_t q[]; };
layout(std430, binding = 1) readonly buffer Kbuf { uvec4 kc16[]; };
layout(std430, binding = 2) readonly buffer Vbuf { uvec4 vc16[]; };
layout(std430, binding = 3) readonly buffer Wbuf { float16_t subln[]; };
layout(std430, binding = 4) writeonly buffer Obuf { float16_t o[]; };
layout(std430, binding = 5) readonly buffer Dyn { uint dyn_pos; };

layout(push_constant) uniform Params {  // AttnCorePush (runtime/ops/attn_tuning.hpp)
  uint S;
  uint pos0;
  uint H;
  uint n_rep;
  uint capacity;
  uint q_stride;
  uint o_stride;
  uint qk_off;     // unused (0)
  uint min_split;  // unused
  uint max_split;  // unused
  float scale;     // 1/sqrt(D)
  float lambda;
  float gain;      // 1 - lambda_init
  float eps;
  uint q_hstride;  // unused
} p;

shared f16vec4 sQ[BR * RS4];        // the slots' Q rows (unscaled)
shared f16vec4 sKV[BC * RS4];       // the block's K rows, then its V rows
shared f16vec4 sP[2 * BR * PS4];    // the block's probabilities, [softmax][row][key]
shared float sS[2 * BR * BC];       // the block's scores, [softmax][row][key]
shared float sO[2 * BR * OS];       // output accumulators, [softmax][row][column]
shared float sM[2 * BR], sL[2 * BR], sA[2 * BR];  // running max, sum, and this block's rescale factor
shared float sF[BR];                // the epilogue's norm factor per row

#define ACC coopmat<float, gl_ScopeSubgroup, CM, CN, gl_MatrixUseAccumulator>
#define MATA coopmat<float16_t, gl_ScopeSubgroup, CM, CK, gl_MatrixUseA>
#define MATB coopmat<float16_t, gl_ScopeSubgroup, CK, CN, gl_MatrixUseB>

// Stages the K (k) or V rows of keys [jb, jb + BC) of group row base kv_base; rows at or past key_end are zero
// (a zero probability times a stale cache row could otherwise be NaN).
void stage_rows(bool k, uint jb, uint key_end, uint kv_base) {
  for (uint e = gl_LocalInvocationIndex; e < BC * U; e += WG) {
    const uint b = e / U, c = e % U;
    uvec4 v = uvec4(0u);
    if (jb + b < key_end) v = k ? kc16[(kv_base + jb + b) * U + c] : vc16[(kv_base + jb + b) * U + c];
    sKV[b * RS4 + 2u * c] = f16vec4(unpackFloat2x16(v.x), unpackFloat2x16(v.y));
    sKV[b * RS4 + 2u * c + 1u] = f16vec4(unpackFloat2x16(v.z), unpackFloat2x16(v.w));
  }
}

void main() {
  const uint tid = gl_LocalInvocationIndex, sg = gl_SubgroupID;
  const uint g = gl_WorkGroupID.y;
  const uint pos0 = p.pos0 + dyn_pos;
  const uint nslots = p.n_rep * p.S;
  const uint slot0 = gl_WorkGroupID.x * BR;
  const uint last = min(slot0 + BR, nslots) - 1u;
  const uint key_end = min(pos0 + last / p.n_rep + 1u, p.capacity);  // keys the last slot may see (exclusive)
  const uint kv_base = g * p.capacity;

  for (uint e = tid; e < BR * (DV / 4); e += WG) {
    const uint r = e / (DV / 4), c = e % (DV / 4), s = slot0 + r;
    f16vec4 v = f16vec4(0.0hf);
    if (s < nslots) {
      const uint base = (s / p.n_rep) * p.q_stride + (g * p.n_rep + s % p.n_rep) * DV + c * 4u;
      v = f16vec4(q[base], q[base + 1u], q[base + 2u], q[base + 3u]);
    }
    sQ[r * RS4 + c] = v;
  }
  for (uint e = tid; e < 2 * BR * OS; e += WG) sO[e] = 0.0;
  for (uint e = tid; e < 2 * BR; e += WG) {
    sM[e] = NEG_BIG;
    sL[e] = 0.0;
  }
  barrier();

  for (uint jb = 0; jb < key_end; jb += BC) {
    stage_rows(true, jb, key_end, kv_base);  // the previous block's last barrier retired every read of sKV
    barrier();
    for (uint task = sg; task < 2 * NS; task += NSG) {
      const uint t = task / NS, n = task % NS;
      ACC acc = ACC(0.0);
      for (uint kk = 0; kk < HD; kk += CK) {
        MATA a;
        MATB b;
        coopMatLoad(a, sQ, (t * HD + kk) / 4u, RS4, gl_CooperativeMatrixLayoutRowMajor);
        coopMatLoad(b, sKV, n * CN * RS4 + (t * HD + kk) / 4u, RS4, gl_CooperativeMatrixLayoutColumnMajor);
        acc = coopMatMulAdd(a, b, acc);
      }
      coopMatStore(acc, sS, t * BR * BC + n * CN, BC, gl_CooperativeMatrixLayoutRowMajor);
    }
    barrier();  // S written, every read of the K rows done
    stage_rows(false, jb, key_end, kv_base);
    for (uint e = tid; e < 2 * BR; e += WG) {  // e = t * BR + r
      const uint s = slot0 + e % BR;
      const uint lim = s < nslots ? min(pos0 + s / p.n_rep + 1u, key_end) : 0u;  // keys [0, lim) visible
      const uint nv = lim > jb ? min(lim - jb, BC) : 0u;                         // ... of this block
      const float mo = sM[e];
      float mx = mo;
      for (uint b = 0; b < nv; ++b) mx = max(mx, sS[e * BC + b] * p.scale);
      float sum = 0.0;
      for (uint b = 0; b < BC; ++b) {
        const float pr = b < nv ? exp(sS[e * BC + b] * p.scale - mx) : 0.0;
        sum += pr;
        sP[e * PS4 + b / 4u][b % 4u] = float16_t(pr);
      }
      const float alpha = exp(mo - mx);  // 1 while nothing is visible (NEG_BIG − NEG_BIG)
      sM[e] = mx;
      sL[e] = sL[e] * alpha + sum;
      sA[e] = alpha;
    }
    barrier();  // P, alpha and the V rows ready
    for (uint task = sg; task < 2 * NO; task += NSG) {
      const uint t = task / NO, n = task % NO;
      const uint o0 = t * BR * OS + n * CN;
      for (uint e = gl_SubgroupInvocationID; e < CM * CN; e += gl_SubgroupSize)
        sO[o0 + (e / CN) * OS + e % CN] *= sA[t * BR + e / CN];
      subgroupMemoryBarrierShared();
      subgroupBarrier();
      ACC acc;
      coopMatLoad(acc, sO, o0, OS, gl_CooperativeMatrixLayoutRowMajor);
      for (uint kk = 0; kk < BC; kk += CK) {
        MATA a;
        MATB b;
        coopMatLoad(a, sP, t * BR * PS4 + kk / 4u, PS4, gl_CooperativeMatrixLayoutRowMajor);
        coopMatLoad(b, sKV, kk * RS4 + n * CN / 4u, RS4, gl_CooperativeMatrixLayoutRowMajor);
        acc = coopMatMulAdd(a, b, acc);
      }
      coopMatStore(acc, sO, o0, OS, gl_CooperativeMatrixLayoutRowMajor);
    }
    barrier();  // every read of P and the V rows done, O stored
  }

  // O = O1/l1 − λ·O2/l2 (into the first half), the row's sum of squares, then the norm.
  for (uint e = tid; e < BR * DV; e += WG) {
    const uint r = e / DV, c = e % DV;
    const float l1 = sL[r], l2 = sL[BR + r];
    const float i1 = l1 > 0.0 ? 1.0 / l1 : 0.0, i2 = l2 > 0.0 ? 1.0 / l2 : 0.0;
    sO[r * OS + c] = sO[r * OS + c] * i1 - p.lambda * (sO[(BR + r) * OS + c] * i2);
  }
  barrier();
  for (uint r = tid; r < BR; r += WG) {
    float ss = 0.0;
    for (uint c = 0; c < DV; ++c) ss += sO[r * OS + c] * sO[r * OS + c];
    sF[r] = p.gain * inversesqrt(ss / float(DV) + p.eps);
  }
  barrier();
  for (uint e = tid; e < BR * DV; e += WG) {
    const uint r = e / DV, c = e % DV, s = slot0 + r;
    if (s >= nslots) continue;
    const float v = sO[r * OS + c] * sF[r] * float(subln[c]);
    o[(s / p.n_rep) * p.o_stride + (g * p.n_rep + s % p.n_rep) * DV + c] = float16_t(v);
  }
}
