#version 450
// Tiled matrix-matrix linear layer: y = x·Wᵀ (+ b) (+ r), fp32 accumulation, one rounding at the store.
//   x: rows x in (row stride x_stride), W: out x in (dense, torch Linear layout), y, r: rows x out (y_stride).
//   b: out float32 values (flags bit 1; binding 4), added before r (flags bit 0): v = (x·Wᵀ + b) + r.
// A workgroup computes a BM x BN tile of y, stepping `in` by BK through two shared buffers (double
// buffering: the next tile's global loads are in registers while the current one is multiplied, then
// stored into the other buffer; one barrier per BK step). Both tiles are stored k-major in fp32
// (xs[k][row], ws[k][col]), without padding: a row of BM (BN) floats is split into vec4 groups and group
// g of k-row k sits at g ^ s(k), an XOR swizzle that keeps the transposing stores free of bank
// conflicts (the lanes of one store cover 8 distinct groups: 32 banks).
// Invocation (tx, ty) (tx fastest, TX = BN/RN, TY = BM/RM) owns the RM x RN register block of rows
// (q·TY + ty)·VM + c (q < RM/VM, c < VM, VM = min(RM, 4)) and columns (q·TX + tx)·VN + c (VN = min(RN, 4)):
// each k reads its rows and columns as RM/4 + RN/4 aligned vec4s (ds_load_b128), consecutive invocations
// on consecutive vec4s, for RM·RN FMAs.
// Global loads: load units of UK = min(KV, BK) consecutive k of one row (KV = 8 halves in fp16, 4 floats
// in fp32: 16 bytes), consecutive invocations on consecutive units along k. VEC = 1 loads a unit as one
// uvec4 / vec4: the host uses it when in, x_stride and BK are multiples of KV and the x and W bindings
// are 16-byte aligned; VEC = 0 loads it elementwise (any shape).
// Every global load is bounds-checked: any rows / in / out. Workgroups grid-stride over the tiles, so
// the host may dispatch fewer than there are tiles (maxComputeWorkGroupCount).
// Y32 = 1: y and r are float32 (RTYPE: the model's residual stream, its logits) in either variant.
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
#include "common.glsl"

layout(constant_id = 0) const uint WG = 256;  // == (BM / RM) * (BN / RN)
layout(constant_id = 1) const uint BM = 128;
layout(constant_id = 2) const uint BN = 64;
layout(constant_id = 3) const uint BK = 32;
layout(constant_id = 4) const uint RM = 8;
layout(constant_id = 5) const uint RN = 4;
layout(constant_id = 6) const uint VEC = 0;
layout(constant_id = 7) const uint Y32 = 0;
// k steps per unrolled body of the multiply: BK (the whole step unrolled) except under the quirk
// long_unrolled_compile (runtime/vk/quirks.cpp), where a loop runs BK / KU bodies of KU steps. A power of
// two, <= BK.
layout(constant_id = 8) const uint KU = 32;
// Weight format: 0 = dense (the storage type); 1 = Q8_0, 2 = Q4_0 in the struct-of-arrays layout of
// runtime/ops/linear_quant.hpp (fp16 scale bits, then from byte p.qoff the quants). A load unit of W is then
// UK quants of one block (one 8- or 4-byte load) and its scale, kept as raw bits in registers and
// dequantized to fp32 on the way into shared memory (exact: the tiles are fp32). Its loads do not depend
// on VEC (the layout is always aligned).
layout(constant_id = 9) const uint WQ = 0;
layout(local_size_x_id = 0) in;

#if DVK_FP16
#define KV 8u
#define VTYPE uvec4
float elem(uvec4 v, uint i) { return unpackHalf2x16(v[i >> 1])[i & 1u]; }
#else
#define KV 4u
#define VTYPE vec4
float elem(vec4 v, uint i) { return v[i]; }
#endif

layout(std430, binding = 0) readonly buffer X { STYPE x[]; };
layout(std430, binding = 0) readonly buffer XV { VTYPE xv[]; };
layout(std430, binding = 1) readonly buffer W { STYPE w[]; };
layout(std430, binding = 1) readonly buffer WV { VTYPE wv[]; };
layout(std430, binding = 2) writeonly buffer Y { STYPE y[]; };
layout(std430, binding = 3) readonly buffer R { STYPE r[]; };  // residual; a dummy binding when unused
layout(std430, binding = 2) writeonly buffer YF { RTYPE yf[]; };  // Y32: the same bindings as float32
layout(std430, binding = 3) readonly buffer RF { RTYPE rf[]; };
layout(std430, binding = 4) readonly buffer Bias { float bias[]; };  // float32; a dummy binding when unused
layout(std430, binding = 1) readonly buffer WQ1 { uint wq1[]; };   // quantized layout, 4-byte words
layout(std430, binding = 1) readonly buffer WQ2 { uvec2 wq2[]; };  // 8-byte words

layout(push_constant) uniform Params {
  uint rows;
  uint in_f;
  uint out_f;
  uint x_stride;
  uint y_stride;
  uint flags;  // bit 0: add the residual (binding 3); bit 1: add the bias (binding 4)
  uint qoff;  // WQ != 0: byte offset of the quants in the weight binding (a multiple of 16)
} p;

const uint TX = BN / RN;
const uint TY = BM / RM;
const uint VM = RM < 4u ? RM : 4u;
const uint VN = RN < 4u ? RN : 4u;
const uint UK = BK < KV ? BK : KV;  // k per load unit
const uint C = BK / UK;              // load units per tile row
const uint SF = C < 8u ? 8u / C : 1u;  // swizzle step per unit: 32 / C rows (8 / C groups) share a store
// Swizzle range: at most 8 groups (32 banks), within the tile, and below TY (TX) so that a vec4 read's
// group (q·TY + ty) ^ s == q·TY + (ty ^ s).
const uint SX0 = (BM / 4u < TY) ? BM / 4u : TY;
const uint SX1 = SX0 < 8u ? SX0 : 8u;
const uint SXM = (SX1 < 1u ? 1u : SX1) - 1u;
const uint SW0 = (BN / 4u < TX) ? BN / 4u : TX;
const uint SW1 = SW0 < 8u ? SW0 : 8u;
const uint SWM = (SW1 < 1u ? 1u : SW1) - 1u;
const uint NPX = (BM * C + WG - 1u) / WG;  // load units per invocation
const uint NPW = (BN * C + WG - 1u) / WG;
const uint XB = BK * BM;  // floats per buffer
const uint WB = BK * BN;
shared float xs[2 * XB];
shared float ws[2 * WB];

VTYPE px[NPX];  // the next tile, in flight
VTYPE pw[NPW];
uvec4 pq[NPW];  // WQ != 0: (quant bits of UK weights: 2 words, scale bits, nibble shift)
float acc[RM][RN];

// Float index of column f (a row of x, a column of W) in a k-row swizzled by s.
uint phys(uint f, uint s) { return (((f >> 2) ^ s) << 2) | (f & 3u); }

VTYPE load_unit_x(uint gr, uint gk) {
  VTYPE v = VTYPE(0);
  if (gr >= p.rows) return v;
  if (VEC != 0) {
    if (gk < p.in_f) v = xv[(gr * p.x_stride + gk) / KV];
    return v;
  }
  const uint base = gr * p.x_stride;
#if DVK_FP16
  [[unroll]] for (uint i = 0; i < UK; i += 2u) {
    const float16_t h0 = gk + i < p.in_f ? x[base + gk + i] : float16_t(0.0);
    const float16_t h1 = gk + i + 1u < p.in_f ? x[base + gk + i + 1u] : float16_t(0.0);
    v[i >> 1] = packFloat2x16(f16vec2(h0, h1));
  }
#else
  [[unroll]] for (uint i = 0; i < UK; ++i) v[i] = gk + i < p.in_f ? x[base + gk + i] : 0.0;
#endif
  return v;
}

VTYPE load_unit_w(uint gn, uint gk) {
  VTYPE v = VTYPE(0);
  if (gn >= p.out_f) return v;
  if (VEC != 0) {
    if (gk < p.in_f) v = wv[(gn * p.in_f + gk) / KV];
    return v;
  }
  const uint base = gn * p.in_f;
#if DVK_FP16
  [[unroll]] for (uint i = 0; i < UK; i += 2u) {
    const float16_t h0 = gk + i < p.in_f ? w[base + gk + i] : float16_t(0.0);
    const float16_t h1 = gk + i + 1u < p.in_f ? w[base + gk + i + 1u] : float16_t(0.0);
    v[i >> 1] = packFloat2x16(f16vec2(h0, h1));
  }
#else
  [[unroll]] for (uint i = 0; i < UK; ++i) v[i] = gk + i < p.in_f ? w[base + gk + i] : 0.0;
#endif
  return v;
}

// WQ != 0: the UK quants of row gn at gk (a multiple of UK, inside one block) and their block's scale.
uvec4 load_unit_q(uint gn, uint gk) {
  if (gn >= p.out_f || gk >= p.in_f) return uvec4(0);  // scale 0: every weight dequantizes to 0
  const uint si = gn * (p.in_f / 32u) + gk / 32u;
  const uint d = (wq1[si / 2u] >> (16u * (si % 2u))) & 0xffffu;
  const uint b = WQ == 1u ? p.qoff + gn * p.in_f + gk : p.qoff + gn * (p.in_f / 2u) + (gk / 32u) * 16u + gk % 16u;
  uvec2 q;
  if (UK == 8u) q = wq2[b / 8u];
  else if (UK == 4u) q = uvec2(wq1[b / 4u], 0u);
  else q = uvec2(wq1[b / 4u] >> (8u * (b % 4u)), 0u);  // UK < 4 (tiny BK): the bytes from b on, one word
  return uvec4(q, d, (gk % 32u) >= 16u ? 4u : 0u);
}

// Weight i of a quantized unit, dequantized: q·d (Q8_0) or (nibble − 8)·d (Q4_0).
float elem_q(uvec4 u, uint i) {
  const float d = half_low(u.z);
  const uint byte = ((i < 4u ? u.x : u.y) >> (8u * (i % 4u))) & 255u;
  if (WQ == 1u) return float(bitfieldExtract(int(byte), 0, 8)) * d;
  return float(int((byte >> u.w) & 15u) - 8) * d;
}

// Global -> registers: unit e = lid + j·WG is (row e / C, k units e % C).
void load_tile(uint lid, uint m0, uint n0, uint k0) {
  [[unroll]] for (uint j = 0; j < NPX; ++j) {
    const uint e = lid + j * WG;
    if (BM * C % WG == 0 || e < BM * C) px[j] = load_unit_x(m0 + e / C, k0 + (e % C) * UK);
  }
  [[unroll]] for (uint j = 0; j < NPW; ++j) {
    const uint e = lid + j * WG;
    if (BN * C % WG == 0 || e < BN * C) {
      if (WQ != 0u) pq[j] = load_unit_q(n0 + e / C, k0 + (e % C) * UK);
      else pw[j] = load_unit_w(n0 + e / C, k0 + (e % C) * UK);
    }
  }
}

// Registers -> shared buffer `buf` (transposed to k-major, swizzled).
void store_tile(uint lid, uint buf) {
  [[unroll]] for (uint j = 0; j < NPX; ++j) {
    const uint e = lid + j * WG;
    if (BM * C % WG == 0 || e < BM * C) {
      const uint kc = e % C;
      const uint o = buf * XB + kc * UK * BM + phys(e / C, (kc * SF) & SXM);
      [[unroll]] for (uint i = 0; i < UK; ++i) xs[o + i * BM] = elem(px[j], i);
    }
  }
  [[unroll]] for (uint j = 0; j < NPW; ++j) {
    const uint e = lid + j * WG;
    if (BN * C % WG == 0 || e < BN * C) {
      const uint kc = e % C;
      const uint o = buf * WB + kc * UK * BN + phys(e / C, (kc * SF) & SWM);
      [[unroll]] for (uint i = 0; i < UK; ++i) ws[o + i * BN] = WQ != 0u ? elem_q(pq[j], i) : elem(pw[j], i);
    }
  }
}

void compute_step(uint tx, uint ty, uint buf, uint kk) {
  const uint xo = buf * XB + kk * BM, wo = buf * WB + kk * BN;
  const uint sx = ((kk / UK) * SF) & SXM, sw = ((kk / UK) * SF) & SWM;
  float a[RM];
  float b[RN];
  [[unroll]] for (uint q = 0; q < RM / VM; ++q)
    [[unroll]] for (uint c = 0; c < VM; ++c) {
      if (VM == 4u) a[q * VM + c] = xs[xo + ((q * TY + (ty ^ sx)) << 2) + c];  // == phys(): sx < TY
      else a[q * VM + c] = xs[xo + phys((q * TY + ty) * VM + c, sx)];
    }
  [[unroll]] for (uint q = 0; q < RN / VN; ++q)
    [[unroll]] for (uint c = 0; c < VN; ++c) {
      if (VN == 4u) b[q * VN + c] = ws[wo + ((q * TX + (tx ^ sw)) << 2) + c];
      else b[q * VN + c] = ws[wo + phys((q * TX + tx) * VN + c, sw)];
    }
  [[unroll]] for (uint i = 0; i < RM; ++i)
    [[unroll]] for (uint j = 0; j < RN; ++j) acc[i][j] = fma(a[i], b[j], acc[i][j]);
}

void compute(uint tx, uint ty, uint buf) {
  if (KU >= BK) {
    [[unroll]] for (uint kk = 0; kk < BK; ++kk) compute_step(tx, ty, buf, kk);
  } else {
    [[dont_unroll]] for (uint k0 = 0; k0 < BK; k0 += KU)
      [[unroll]] for (uint u = 0; u < KU; ++u) compute_step(tx, ty, buf, k0 + u);
  }
}

void main() {
  const uint lid = gl_LocalInvocationIndex;
  const uint tx = lid % TX;
  const uint ty = lid / TX;
  for (uint tm = gl_WorkGroupID.y; tm * BM < p.rows; tm += gl_NumWorkGroups.y) {
    for (uint tn = gl_WorkGroupID.x; tn * BN < p.out_f; tn += gl_NumWorkGroups.x) {
      const uint m0 = tm * BM;
      const uint n0 = tn * BN;
      [[unroll]] for (uint i = 0; i < RM; ++i)
        [[unroll]] for (uint j = 0; j < RN; ++j) acc[i][j] = 0.0;

      // The previous tile's last barrier has retired every read of buffer 0.
      load_tile(lid, m0, n0, 0u);
      store_tile(lid, 0u);
      barrier();
      uint cur = 0u;
      for (uint k0 = 0; k0 < p.in_f; k0 += BK) {
        const bool more = k0 + BK < p.in_f;
        if (more) load_tile(lid, m0, n0, k0 + BK);  // in flight during the FMAs
        compute(tx, ty, cur);
        // Buffer cur ^ 1 was last read in the previous step, before the barrier that ended it.
        if (more) store_tile(lid, cur ^ 1u);
        barrier();
        cur ^= 1u;
      }

      // The bias, once per column (one uniform branch, RN loads), before the per-element epilogue.
      if ((p.flags & 2u) != 0u)
        [[unroll]] for (uint j = 0; j < RN; ++j) {
          const uint col = n0 + ((j / VN) * TX + tx) * VN + j % VN;
          const float bj = col < p.out_f ? bias[col] : 0.0;
          [[unroll]] for (uint i = 0; i < RM; ++i) acc[i][j] += bj;
        }
      [[unroll]] for (uint i = 0; i < RM; ++i) {
        const uint row = m0 + ((i / VM) * TY + ty) * VM + i % VM;
        if (row >= p.rows) continue;
        [[unroll]] for (uint j = 0; j < RN; ++j) {
          const uint col = n0 + ((j / VN) * TX + tx) * VN + j % VN;
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
