#version 450
// One-row (decode) linear layer with an optional fused prologue: y = pro(x)·Wᵀ (+ b) (+ r), fp32 accumulation,
// one rounding at the store.
//   PRO 0: pro(x) = x                                     (x: in values)
//   PRO 1: pro(x) = x / sqrt(mean(x²) + eps) ⊙ g          (block RMSNorm, statistic in fp32; g: in values)
//   PRO 2: pro(x) = silu(x[0, in)) ⊙ x[in, 2·in)          (SwiGLU on the fused [gate | up] row)
// W: out x in (dense), y, r: out values; b: out float32 values (flags bit 1, binding 5; not in the RoPE
// variants), added before r (flags bit 0): v = (pro(x)·Wᵀ + b) + r. The norm's 1/rms is applied after the dot
// products (Σ x·g·w · inv_rms), so its sum of squares comes from the same loads as the dot products.
// A workgroup computes NF consecutive output features: its WG invocations stride over `in` (consecutive
// invocations read consecutive vectors), each keeping NF partial sums (only for the features that exist;
// with lane groups, LG < WG, each group of LG invocations strides over `in` for its NF·LG/WG features),
// then one reduction of all NF sums at once (subgroup arithmetic in the _sg variant, a shared-memory tree
// otherwise). VEC = 1 reads x, g and W as 16-byte vectors (uvec4 = 8 halves in fp16, vec4 in fp32): the
// host uses it when `in` is a multiple of the vector width and the bindings are 16-byte aligned.
// Workgroups grid-stride over the feature groups (maxComputeWorkGroupCount).
// X32 = 1: x is float32 (RTYPE, the model's residual stream; the vector path reads VW/4 vec4s per load);
// Y32 = 1: y and r are float32 (the residual stream, the logits). Both in either variant.
// Loop iterations per invocation: (out / NF / groups) · in / (LG · VW), far below llvmpipe's 65535 for
// the shapes the model dispatches (LinearKernel::record_row checks a budget).
// WQ: the weight format. 0: dense storage-type rows. 1 (Q8_0) / 2 (Q4_0): block-quantized
// rows in the struct-of-arrays layout of ops/linear_quant.hpp, all in binding 1: the fp16 scales (one per
// 32 weights along `in`, read as uint bits, so no 16-bit storage is needed) from byte 0, the quants from
// uvec4 index p.q_off (Q8_0: int8 per weight; Q4_0: byte j of a block = element j (low nibble) and
// j + 16 (high nibble), weight = nibble − 8). Each invocation step takes one whole block per feature (its
// scale once, and two 16-byte quant vectors in Q8_0, one in Q4_0), dequantizes it in registers and applies
// the scale once: acc += d · Σ a·q (Q4_0: d · (Σ a·n − 8·Σ a), Σ a shared by the features). x and g are read
// as with dense weights (VEC). (One block per step, not one vector: Q8_0 reads its scale once per block and
// runs half the steps; lavapipe 22.3 -14% time on the op table's Q8_0 rows, raven -17% instructions per
// block in Q4_0, 64 VGPRs / 4 waves in Q8_0.)
// DVK_INT_DOT = 1 (the variant linear_row_dot, a SPIR-V module of its own because it declares the DotProduct
// capabilities): the Q8_0 / Q4_0 path quantizes pro(x) per block of 32 to int8 (Q8_0's rule:
// d = amax / 127, q = round-half-away(a / d)) and multiplies with 4x8-bit integer dot products (OpSDot
// against Q8_0 quants, OpSUDot against Q4_0 nibbles, minus 8·Σq), acc += d_x · d_w · Σ q_x·q_w.
// DVK_ROPE_EPI = 1 (the variant linear_row_rope, the fused q/k/v projection of a one-row decode): the
// epilogue of rope_kv.comp instead of the plain store. The row is [q: p.qcols | λ: p.lcols | k: p.kcols |
// v: p.kcols] (DIFF V1: no λ columns; DIFF V2: H logits, copied into y after q, H even), NF is even, so the pair (2j, 2j+1) of a rotation lies in one workgroup and lane f
// takes its partner's sum from s[f ^ 1]. Both are rounded to the storage type first (the values rope_kv
// would read back from the stored row), then: q columns roped into y (the q_out row), k columns roped into
// k_cache[g][pos][.] and v columns copied into v_cache[g][pos][.], with pos = p.pos0 + dyn_pos and cache
// rows p.kw wide (g = column / kw). (cos, sin) from the float32 table [pos][hd/2].
// Variants (shaders/variants.cmake): linear_row (the defaults), linear_row_dot (DVK_INT_DOT = 1; spec constant
// WQ must be 1 or 2; built only on devices with shaderIntegerDotProduct: QuantRowKernel), linear_row_rope
// (DVK_ROPE_EPI = 1) and linear_row_dot_rope (both).
#extension GL_GOOGLE_include_directive : require
#ifndef DVK_INT_DOT
#define DVK_INT_DOT 0
#endif
#ifndef DVK_ROPE_EPI
#define DVK_ROPE_EPI 0
#endif
#if DVK_INT_DOT
#extension GL_EXT_spirv_intrinsics : require
#endif
#include "common.glsl"

layout(constant_id = 0) const uint WG = 8;
layout(constant_id = 1) const uint NF = 8;
layout(constant_id = 2) const uint VEC = 1;
layout(constant_id = 3) const uint PRO = 0;
layout(constant_id = 4) const uint X32 = 0;
layout(constant_id = 5) const uint Y32 = 0;
layout(constant_id = 6) const uint WQ = 0;
// ONE_SG = 1: the host guarantees one subgroup per workgroup (WG is the required subgroup size, or the
// device's only one): the subgroup reduction needs no shared memory, so none is declared (occupancy on
// GPUs whose shared memory limits waves: RDNA's 22 -> 32 waves per SIMD at PRO 1).
layout(constant_id = 7) const uint ONE_SG = 0;
// LG: lanes per lane group, a power of two dividing WG (0 = WG: one group). Where a row has
// fewer load steps than WG lanes (in / VL < WG), the WG / LG groups each stride over the whole row with LG
// lanes and compute NF / (WG / LG) CONSECUTIVE features (RoPE pairs stay in one group), so no lane idles.
// Each lane keeps only its group's sums; the reduction is the same NF (+1) workgroup sums as with one group,
// each lane adding its sum to the feature's slot only if its group owns the feature (zero otherwise); the
// norm's sum of squares comes from group 0 only (every group reads all of x).
layout(constant_id = 8) const uint LG = 0;
// QM = 1 (Q4_0; the tuning key q4_in_place, on for CPU drivers): each nibble is masked where it lies in its word,
// q & (0xF << s), and converted as it stands, n·2^s, against the block's activations scaled by 2^-s once per block
// (powers of two: the products are the same bits, barring activations below 2^-98). One integer op per weight instead
// of a shift and a mask; the word's top nibble is shifted down 4 first (int32 range). On a GPU a bitfield extract is
// one instruction, and the scaling would cost more than it saves where a lane has few features: QM = 0 there.
layout(constant_id = 9) const uint QM = 0;
layout(local_size_x_id = 0) in;

#if DVK_FP16
#define VTYPE uvec4
const uint VW = 8;
#else
#define VTYPE vec4
const uint VW = 4;
#endif

layout(std430, binding = 0) readonly buffer X { STYPE x[]; };
layout(std430, binding = 0) readonly buffer XV { VTYPE xv[]; };
layout(std430, binding = 1) readonly buffer W { STYPE w[]; };
layout(std430, binding = 1) readonly buffer WV { VTYPE wv[]; };
layout(std430, binding = 1) readonly buffer WSC { uint wsc[]; };   // WQ != 0: fp16 scale bits, two per uint
layout(std430, binding = 1) readonly buffer WQV { uvec4 wq[]; };   // WQ != 0: the quants from p.q_off
layout(std430, binding = 2) writeonly buffer Y { STYPE y[]; };
layout(std430, binding = 3) readonly buffer R { STYPE r[]; };   // residual; a dummy binding when unused
layout(std430, binding = 4) readonly buffer G { STYPE g[]; };   // norm weight (PRO 1); a dummy binding otherwise
layout(std430, binding = 4) readonly buffer GV { VTYPE gv[]; };
layout(std430, binding = 0) readonly buffer XF { RTYPE xf[]; };  // X32 / Y32: the same bindings as float32
layout(std430, binding = 0) readonly buffer XF4 { vec4 xf4[]; };
layout(std430, binding = 2) writeonly buffer YF { RTYPE yf[]; };
layout(std430, binding = 3) readonly buffer RF { RTYPE rf[]; };
#if !DVK_ROPE_EPI
layout(std430, binding = 5) readonly buffer Bias { float bias[]; };  // float32; a dummy binding when unused
#endif
#if DVK_ROPE_EPI
layout(std430, binding = 5) readonly buffer Table { vec2 cs[]; };  // [pos][hd/2] = (cos, sin), always fp32
layout(std430, binding = 6) writeonly buffer KCache { STYPE k_cache[]; };
layout(std430, binding = 7) writeonly buffer VCache { STYPE v_cache[]; };
layout(std430, binding = 8) readonly buffer Dyn { uint dyn_pos; };
#endif

layout(push_constant) uniform Params {
  uint in_f;
  uint out_f;
  uint flags;  // bit 0: add the residual (binding 3); bit 1: add the bias (binding 5)
  float eps;
  uint q_off;  // WQ != 0: uvec4 index of the first quant vector in binding 1
#if DVK_ROPE_EPI
  uint qcols;     // q columns (2H·D), then kcols k and kcols v columns
  uint kcols;
  uint hd;        // D: the rotated sub-head width
  uint kw;        // cache row width (2D)
  uint capacity;  // cache rows per group
  uint pos0;      // static part of the position
  uint lcols;     // DIFF V2: λ logit columns between q and k (copied into y after q), even; 0 in V1
#endif
} p;

const uint VL = VEC != 0 ? VW : 1;  // elements per load
const uint NS = PRO == 1 ? NF + 1 : NF;  // sums reduced per group (+ the sum of squares)
const uint LGE = LG == 0 ? WG : LG;        // lanes per lane group
const uint NG = WG / LGE;                  // lane groups per workgroup (the host keeps NF % NG == 0)
const uint FG = NF / NG;                   // consecutive features per lane group

#if DVK_SUBGROUP
shared float red[ONE_SG != 0 ? 1 : NS * WG];  // one slot per (sum, subgroup); WG bounds the subgroup count
#else
shared float red[NS * WG];
#endif

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

// Elements [kv·VL, kv·VL + VL) of x (VL = 1: the scalar x[kv]); `base` is an element offset (multiple of VL).
void load_x(uint base, uint kv, out float f[VW]) {
  if (VEC != 0) {
    if (X32 != 0) {
      const uint i = (base / VW + kv) * (VW / 4);
      for (uint j = 0; j < VW / 4; ++j) {
        const vec4 v = xf4[i + j];
        for (uint e = 0; e < 4; ++e) f[4 * j + e] = v[e];
      }
    } else {
      unpack(xv[base / VW + kv], f);
    }
  } else {
    f[0] = X32 != 0 ? xf[base + kv] : float(x[base + kv]);
  }
}

void load_w(uint row, uint kv, out float f[VW]) {
  if (VEC != 0) {
    unpack(wv[row * (p.in_f / VW) + kv], f);
  } else {
    f[0] = float(w[row * p.in_f + kv]);
  }
}

void load_g(uint kv, out float f[VW]) {
  if (VEC != 0) {
    unpack(gv[kv], f);
  } else {
    f[0] = float(g[kv]);
  }
}

// One step of the prologue: a = pro(x) over elements [kv·VL, kv·VL + VL); sq += x² (PRO 1).
void act(uint kv, out float a[VW], inout float sq) {
  load_x(0, kv, a);
  if (PRO == 1) {
    float gg[VW];
    load_g(kv, gg);
    for (uint e = 0; e < VL; ++e) {
      sq = fma(a[e], a[e], sq);
      a[e] *= gg[e];
    }
  } else if (PRO == 2) {
    float u[VW];
    load_x(p.in_f, kv, u);
    for (uint e = 0; e < VL; ++e) a[e] = a[e] / (1.0 + exp(-a[e])) * u[e];
  }
}

// The prologue's 32 activations of block b (elements [32·b, 32·b + 32)), for both quantized loops; sq as act().
void block_act(uint b, out float a[32], inout float sq) {
  for (uint j = 0; j < 32 / VL; ++j) {
    float t[VW];
    act(b * (32 / VL) + j, t, sq);
    for (uint e = 0; e < VL; ++e) a[j * VL + e] = t[e];
  }
}

// Σ a·w over block `bi` (row-major block index) of the weights, a: its 32 activations, asum: Σ a (Q4_0's offset
// term: Σ a·(n − 8) = Σ a·n − 8·Σ a, so each weight costs one field extract, one conversion and one FMA). One
// step reads the whole block (Q8_0: two 16-byte quant vectors; Q4_0: one) and its scale once.
float quant_dot(uint bi, float a[32], float asum) {
  const float d = half_at(wsc[bi >> 1], (bi & 1u) * 16u);
  float s = 0.0;
  if (WQ == 1) {
    const uvec4 q0 = wq[p.q_off + 2 * bi], q1 = wq[p.q_off + 2 * bi + 1];
    for (uint i = 0; i < 4; ++i)
      for (uint k = 0; k < 4; ++k) {
        s = fma(a[4 * i + k], float(bitfieldExtract(int(q0[i]), int(8 * k), 8)), s);
        s = fma(a[16 + 4 * i + k], float(bitfieldExtract(int(q1[i]), int(8 * k), 8)), s);
      }
  } else {
    const uvec4 q = wq[p.q_off + bi];
    for (uint i = 0; i < 4; ++i)
      for (uint k = 0; k < 4; ++k) {
        // QM: each nibble masked in place (a scaled by 2^-(its bit) in main()); else the field extracted.
        const uint lo = QM != 0 ? q[i] & (0x0fu << (8 * k)) : bitfieldExtract(q[i], int(8 * k), 4);
        const uint hi = QM == 0 ? bitfieldExtract(q[i], int(8 * k + 4), 4)
                        : k == 3 ? (q[i] >> 4) & 0x0f000000u
                                 : q[i] & (0xf0u << (8 * k));
        s = fma(a[4 * i + k], float(int(lo)), s);
        s = fma(a[16 + 4 * i + k], float(int(hi)), s);
      }
    s = fma(-8.0, asum, s);
  }
  return s * d;
}

#if DVK_INT_DOT
#include "q8_0.glsl"
#include "int_dot.glsl"

// d_w · Σ q_x·q_w over block b of row `row` (qa: the 32 int8 activations packed 4 per uint; qsum: their sum).
float quant_idot(uint row, uint b, uint qa[8], int qsum) {
  const uint bi = row * (p.in_f / 32) + b;
  const float d = half_at(wsc[bi >> 1], (bi & 1u) * 16u);
  int s = 0;
  if (WQ == 1) {
    const uvec4 q0 = wq[p.q_off + 2 * bi], q1 = wq[p.q_off + 2 * bi + 1];
    for (uint i = 0; i < 4; ++i) s += sdot4x8(qa[i], q0[i], 0) + sdot4x8(qa[4 + i], q1[i], 0);
  } else {
    const uvec4 q = wq[p.q_off + bi];
    for (uint i = 0; i < 4; ++i)
      s += sudot4x8(qa[i], q[i] & 0x0f0f0f0fu, 0) + sudot4x8(qa[4 + i], (q[i] >> 4) & 0x0f0f0f0fu, 0);
    s -= 8 * qsum;
  }
  return float(s) * d;
}
#endif

void main() {
  const uint lid = gl_LocalInvocationIndex;
  // The lane group and the lane in it: the constants 0 and lid with one group (no dynamic register indexing).
  const uint grp = NG == 1 ? 0 : lid / LGE;
  const uint li = NG == 1 ? lid : lid % LGE;
  const uint groups = (p.out_f + NF - 1) / NF;
  const uint nk = p.in_f / VL;  // loads per row (VEC requires in % VW == 0)
  for (uint gi = gl_WorkGroupID.x; gi < groups; gi += gl_NumWorkGroups.x) {
    const uint n0 = gi * NF;
    const uint nf = min(NF, p.out_f - n0);  // features that exist (uniform)
    const uint f0 = grp * FG;               // the lane group's first feature (uniform in the group)
    float acc[FG];
    for (uint j = 0; j < FG; ++j) acc[j] = 0.0;

    float sq = 0.0;  // PRO 1: the sum of squares of x
    if (WQ == 0) {
      for (uint kv = li; kv < nk; kv += LGE) {
        float a[VW];
        act(kv, a, sq);
        for (uint j = 0; j < FG; ++j) {
          if (f0 + j < nf) {  // uniform in the group: no loads or FMAs for features past the end
            float b[VW];
            load_w(n0 + f0 + j, kv, b);
            for (uint e = 0; e < VL; ++e) acc[j] = fma(a[e], b[e], acc[j]);
          }
        }
      }
    } else if (DVK_INT_DOT != 0) {
#if DVK_INT_DOT
      for (uint b = li; b < p.in_f / 32; b += LGE) {
        float a[32];
        block_act(b, a, sq);
        float amax = 0.0;
        for (uint i = 0; i < 32; ++i) amax = max(amax, abs(a[i]));
        const float da = amax / 127.0;
        const float ida = q8_inverse(da);
        uint qa[8];
        int qsum = 0;
        for (uint i = 0; i < 8; ++i) {
          uint word = 0u;
          for (uint k = 0; k < 4; ++k) {
            const float v = a[4 * i + k] * ida;
            const int q = int(round_half_away(v));  // as ggml's roundf (q8_0.glsl)
            qsum += q;
            word |= uint(q & 0xff) << (8u * k);
          }
          qa[i] = word;
        }
        for (uint j = 0; j < FG; ++j)
          if (f0 + j < nf) acc[j] += da * quant_idot(n0 + f0 + j, b, qa, qsum);
      }
#endif
    } else {
      for (uint b = li; b < p.in_f / 32; b += LGE) {
        float a[32];
        block_act(b, a, sq);
        float asum = 0.0;  // Q4_0's offset term (quant_dot)
        if (WQ == 2)
          for (uint e = 0; e < 32; ++e) asum += a[e];
        // QM: element e's nibble is read in place at bit 8·(e % 4), + 4 from element 16 on (the top byte's: 24).
        if (WQ == 2 && QM != 0)
          for (uint e = 0; e < 32; ++e) {
            const uint at = e >= 16 && e % 4 == 3 ? 24 : 8 * (e % 4) + (e / 16) * 4;
            a[e] *= 1.0 / float(1u << at);
          }
        for (uint j = 0; j < FG; ++j)
          if (f0 + j < nf) acc[j] += quant_dot((n0 + f0 + j) * (p.in_f / 32) + b, a, asum);
      }
    }
    // This lane's share of the NS workgroup sums: its group's features (zero for the others' features), and
    // the sum of squares from group 0 only (each group covers all of x).
    float part[NS];
    for (uint f = 0; f < NF; ++f) part[f] = NG == 1 ? acc[f % FG] : (grp == f / FG ? acc[f % FG] : 0.0);
    if (PRO == 1) part[NF] = grp == 0 ? sq : 0.0;

    // Reduce the NS sums over the workgroup (uniform control flow).
    float s[NS];
#if DVK_SUBGROUP
    for (uint f = 0; f < NS; ++f) s[f] = subgroupAdd(part[f]);
    if (ONE_SG == 0 && gl_NumSubgroups > 1) {
      if (subgroupElect())
        for (uint f = 0; f < NS; ++f) red[f * WG + gl_SubgroupID] = s[f];
      barrier();
      for (uint f = 0; f < NS; ++f) {
        float t = 0.0;
        for (uint i = 0; i < gl_NumSubgroups; ++i) t += red[f * WG + i];
        s[f] = t;
      }
      barrier();
    }
#else
    for (uint f = 0; f < NS; ++f) red[f * WG + lid] = part[f];
    barrier();
    for (uint h = WG / 2; h > 0; h >>= 1) {
      if (lid < h)
        for (uint f = 0; f < NS; ++f) red[f * WG + lid] += red[f * WG + lid + h];
      barrier();
    }
    for (uint f = 0; f < NS; ++f) s[f] = red[f * WG];
    barrier();
#endif

    float scale = 1.0;
    if (PRO == 1) scale = inversesqrt(s[NF] / float(p.in_f) + p.eps);
    // Invocation lid stores features n0 + lid, n0 + lid + WG, ... (NF may exceed WG).
    for (uint j = 0; j < (NF + WG - 1) / WG; ++j) {
      const uint fl = j * WG + lid;  // this invocation's feature in the group
      float v = 0.0;
      for (uint f = 0; f < NF; ++f)
        if (fl == f) v = s[f];
#if DVK_ROPE_EPI
      float u = 0.0;  // the pair partner's sum
      for (uint f = 0; f < NF; ++f)
        if ((fl ^ 1u) == f) u = s[f];
      const uint pos = p.pos0 + dyn_pos;
      if (fl < nf && pos < p.capacity) {  // never write past the cache (the host checks before replaying)
        const uint o = n0 + fl;
        v = float(STYPE(v * scale));
        u = float(STYPE(u * scale));
        const uint k0 = p.qcols + p.lcols;  // the first k column (even: k pairs stay in one workgroup)
        if (o >= k0 + p.kcols) {
          const uint c = o - k0 - p.kcols;
          v_cache[((c / p.kw) * p.capacity + pos) * p.kw + c % p.kw] = STYPE(v);
        } else if (o >= p.qcols && o < k0) {
          y[o] = STYPE(v);  // a DIFF V2 λ logit, stored as rope_kv copies it
        } else {
          const uint e = o < p.qcols ? o : o - k0;  // column in the q or the k part
          const vec2 t = cs[pos * (p.hd / 2) + (e % p.hd) / 2];
          const bool odd = (o & 1u) != 0u;
          const float x0 = odd ? u : v, x1 = odd ? v : u;
          const STYPE r = STYPE(odd ? x0 * t.y + x1 * t.x : x0 * t.x - x1 * t.y);
          if (o < p.qcols) y[o] = r;
          else k_cache[((e / p.kw) * p.capacity + pos) * p.kw + e % p.kw] = r;
        }
      }
#else
      if (fl < nf) {
        const uint o = n0 + fl;
        v *= scale;
        if ((p.flags & 2u) != 0u) v += bias[o];
        if (Y32 != 0) {
          if ((p.flags & 1u) != 0u) v += rf[o];
          yf[o] = v;
        } else {
          if ((p.flags & 1u) != 0u) v += float(r[o]);
          y[o] = STYPE(v);
        }
      }
#endif
    }
  }
}
