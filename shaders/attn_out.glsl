// The epilogue of every attention shader: from the core's registers (attn_core.glsl: acc, m_run, l_run
// of this workgroup's RB row slots) to the output rows, once per (head, query). The fused kernels call it
// after streaming every key; the split-K kernels after the last split to finish has merged every split's
// partial state into the same registers (attn_split.glsl). One epilogue per variant:
//   NSM = 2 (differential, the model's op):  O = O1/l1 − λ·O2/l2, then the headwise RMSNorm
//     (eps, subln, gain = 1 − λ_init):       o[i*o_stride + h*2D + col]          (subln at 3, o at 4)
//   DIFF V2 (DVK_V2 with pairs): per pair of slots (query heads 2j, 2j+1 of one query), λ = sigmoid(z),
//     z = q[i*q_stride + Hq*D + j]:          o[i*o_stride + j*D + col] = O_2j/l_2j − λ·O_2j+1/l_2j+1  (o at 3)
//   otherwise (the bench's single-softmax baselines): O/l, o[i*o_stride + h*DV + col]                 (o at 3)
// OVEC = 1 (CPU drivers, where the host finds o's rows, heads and chunks 16-byte aligned: DiffAttnKernel::
// vector_store): each whole chunk is stored as 16-byte vectors, OV (8 halves) or OVF (4 floats), instead of element by
// element. On llvmpipe every per-lane store is a loop LLVM compiles: 8-16 of them per row slot were about 0.15 s of
// the prefill kernel's compile. The constant folds the other form away (a runtime flag kept both: slower to compile).
layout(constant_id = 8) const uint OVEC = 0;
// The vector form where it applies: whole chunks of 16 bytes (fp16: CW = 8 halves; fp32: 4 or 8 floats).
#define OUT_VECTORS (OVEC != 0 && V_WHOLE && (DVK_FP16 == 0 || CW == 8))
#if NSM == 2
layout(std430, binding = 3) readonly buffer Wbuf { STYPE subln[]; };
layout(std430, binding = 3) readonly buffer WV { uvec4 sublnv[]; };  // OVEC: 16-byte loads of the norm's weights
layout(std430, binding = 3) readonly buffer WVF { vec4 sublnvf[]; };
layout(std430, binding = 4) writeonly buffer Obuf { STYPE o[]; };
layout(std430, binding = 4) writeonly buffer OV { uvec4 ov[]; };
layout(std430, binding = 4) writeonly buffer OVF { vec4 ovf[]; };
#else
layout(std430, binding = 3) writeonly buffer Obuf { STYPE o[]; };
layout(std430, binding = 3) writeonly buffer OV { uvec4 ov[]; };
layout(std430, binding = 3) writeonly buffer OVF { vec4 ovf[]; };
#endif
#if DVK_V2 && DVK_V2_PAIRS
#include "diff_v2_lambda.glsl"
#endif

// Stores chunk i (of NVV) of register row k, scaled: v holds its VPC vec4s. Elements past the row are not written.
void store_chunk(uint base, uint i, vec4 v[VPC]) {
  const uint vi = lane() + i * L;
  const bool in_row = FULL_V || vi < NVT;  // V_WHOLE: the lane's whole chunk (attn_core.glsl)
  if (OUT_VECTORS) {  // base and chunk 16-byte aligned (host: vector_store)
    if (!in_row) return;
#if DVK_FP16  // CW = 8: one vector of 8 halves
    ov[(base + vi * CW) / 8] = uvec4(packHalf2x16(v[0].xy), packHalf2x16(v[0].zw), packHalf2x16(v[VPC - 1].xy),
                                     packHalf2x16(v[VPC - 1].zw));
#else
    [[unroll]] for (uint c = 0; c < VPC; ++c) ovf[(base + vi * CW) / 4 + c] = v[c];
#endif
    return;
  }
  [[unroll]] for (uint c = 0; c < VPC; ++c)
    [[unroll]] for (uint e = 0; e < 4; ++e) {
      const uint x = vi * CW + c * 4 + e;
      if (in_row && (V_WHOLE || x < DV)) o[base + x] = STYPE(v[c][e]);
    }
}

void write_out() {
#if NSM == 2
  float ss[NST];
  [[unroll]] for (uint k = 0; k < NST; ++k) ss[k] = 0.0;
  [[unroll]] for (uint r = 0; r < RB; ++r) {
    const float i1 = l_run[r] > 0.0 ? 1.0 / l_run[r] : 0.0;
    const float i2 = l_run[RB + r] > 0.0 ? 1.0 / l_run[RB + r] : 0.0;
    [[unroll]] for (uint i = 0; i < NVV * VPC; ++i) {
      const vec4 v = acc[r * NVV * VPC + i] * i1 - p.lambda * (acc[(RB + r) * NVV * VPC + i] * i2);
      acc[r * NVV * VPC + i] = v;
      ss[r] += dot(v, v);  // elements past the row hold zeros
    }
  }
  lane_sums(ss);
  // The norm's weights of this lane's elements, read once for every slot (each read is a per-lane loop on llvmpipe).
  vec4 w[NVV * VPC];
  [[unroll]] for (uint i = 0; i < NVV; ++i) {
    const uint vi = lane() + i * L;
    const bool in_row = FULL_V || vi < NVT;  // V_WHOLE: the lane's whole chunk (attn_core.glsl)
    if (OUT_VECTORS) {  // as store_chunk's vectors
#if DVK_FP16
      const uvec4 u = in_row ? sublnv[vi] : uvec4(0);
      w[i * VPC] = vec4(unpackHalf2x16(u.x), unpackHalf2x16(u.y));
      w[i * VPC + VPC - 1] = vec4(unpackHalf2x16(u.z), unpackHalf2x16(u.w));
#else
      [[unroll]] for (uint c = 0; c < VPC; ++c) w[i * VPC + c] = in_row ? sublnvf[vi * VPC + c] : vec4(0.0);
#endif
      continue;
    }
    [[unroll]] for (uint c = 0; c < VPC; ++c)
      [[unroll]] for (uint e = 0; e < 4; ++e) {
        const uint x = vi * CW + c * 4 + e;
        w[i * VPC + c][e] = in_row && (V_WHOLE || x < DV) ? float(subln[x]) : 0.0;
      }
  }
  [[unroll]] for (uint r = 0; r < RB; ++r) {
    if (!slot_valid(r)) continue;
    const float f = p.gain * inversesqrt(ss[r] / float(DV) + p.eps);
    const uint base = slot_query(r) * p.o_stride + slot_head(r) * DV;
    [[unroll]] for (uint i = 0; i < NVV; ++i) {
      vec4 v[VPC];
      [[unroll]] for (uint c = 0; c < VPC; ++c) v[c] = acc[(r * NVV + i) * VPC + c] * f * w[i * VPC + c];
      store_chunk(base, i, v);
    }
  }
#elif DVK_V2 && DVK_V2_PAIRS
  // A canonical constant-trip loop (a stepped `r += 2` loop stayed rolled on llvmpipe, which moved the
  // register arrays to memory: 1.6x slower prefill).
  [[unroll]] for (uint pr = 0; pr < RB / 2; ++pr) {
    const uint r = 2 * pr;
    if (!slot_valid(r)) continue;  // n_rep * S is even: slot r + 1 is then valid too
    const uint i = slot_query(r), head = slot_head(r) / 2;
    const float lam = v2_lambda(float(q[i * p.q_stride + p.H * HD + head]));
    const float i1 = l_run[r] > 0.0 ? 1.0 / l_run[r] : 0.0;
    const float i2 = l_run[r + 1] > 0.0 ? lam / l_run[r + 1] : 0.0;
    [[unroll]] for (uint k = 0; k < NVV; ++k) {
      vec4 v[VPC];
      [[unroll]] for (uint c = 0; c < VPC; ++c)
        v[c] = acc[(r * NVV + k) * VPC + c] * i1 - acc[((r + 1) * NVV + k) * VPC + c] * i2;
      store_chunk(i * p.o_stride + head * HD, k, v);
    }
  }
#else
  [[unroll]] for (uint r = 0; r < RB; ++r) {
    if (!slot_valid(r)) continue;
    const float inv = l_run[r] > 0.0 ? 1.0 / l_run[r] : 0.0;
    [[unroll]] for (uint i = 0; i < NVV; ++i) {
      vec4 v[VPC];
      [[unroll]] for (uint c = 0; c < VPC; ++c) v[c] = acc[(r * NVV + i) * VPC + c] * inv;
      store_chunk(slot_query(r) * p.o_stride + slot_head(r) * DV, i, v);
    }
  }
#endif
}
