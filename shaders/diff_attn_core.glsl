// Tiled dual-softmax differential attention (SPEC.md eq. 1), shared by diff_attn.comp (fused
// headwise-norm epilogue) and diff_attn_split.comp (split-K partial states for decode).
//
// One workgroup owns BR "row slots" = (head, query) pairs of ONE key/value group g:
//   slot r -> head h = g*n_rep + r / qb, query i = qblock*qb + r % qb   (GQA folded into rows,
// so every K/V tile is loaded once for all n_rep heads that share it). It streams the keys of its
// range once, BC at a time: the K tile (K1|K2, 2D wide) gives both score tiles, then the V tile
// (2D wide) is loaded ONCE into the same shared buffer and feeds BOTH accumulators. Each softmax
// keeps its own running max and sum (fp32); with DVK_SUBGROUP=1 their per-tile statistics are
// reduced with subgroupMax/subgroupAdd, else by one invocation per row. Key blocks past the last
// query's position are never visited (causal skip). Masked scores are NEG_BIG and contribute exactly 0.
//
// Layouts (elements): q[i*q_stride + h*2D + (0..D-1: Q1, D..2D-1: Q2)]
//   K cache [g][capacity][2D] = K1|K2 (roped), V cache [g][capacity][2D].
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(constant_id = 0) const uint WG = 64;   // invocations
layout(constant_id = 1) const uint HD = 64;   // D (one Q/K half)
layout(constant_id = 2) const uint BR = 16;   // row slots per workgroup
layout(constant_id = 3) const uint BC = 32;   // keys per tile
layout(constant_id = 4) const uint TC = 32;   // invocations across the 2D output columns
layout(local_size_x_id = 0) in;

const uint DV = 2 * HD;
const uint TR = WG / TC;   // invocation rows
const uint RPT = BR / TR;  // row slots per invocation
const uint CPT = DV / TC;  // output columns per invocation

layout(std430, binding = 0) readonly buffer Qbuf { STYPE q[]; };
layout(std430, binding = 1) readonly buffer Kbuf { STYPE kc[]; };
layout(std430, binding = 2) readonly buffer Vbuf { STYPE vc[]; };
// Dynamic part of pos0 (host-written before a replay; 0 when recorded with a fixed position).
layout(std430, binding = 5) readonly buffer Dyn { uint dyn_pos; };

layout(push_constant) uniform Params {
  uint S;          // query rows in this call
  uint pos0;       // absolute position of query row 0 (keys 0 .. pos0+S-1 exist)
  uint H;
  uint n_rep;      // H / Hkv
  uint capacity;   // KV-cache rows per group
  uint q_stride;
  uint o_stride;
  uint qb;         // queries per workgroup (BR >= n_rep * qb)
  uint split_len;  // keys per split (multiple of BC); >= pos0+S when not split
  float scale;     // 1/sqrt(D)
  float lambda;
  float gain;      // 1 - lambda_init
  float eps;
} p;

shared STYPE sQ[BR * DV];
shared STYPE sKV[BC * DV];
shared float sP1[BR * BC];
shared float sP2[BR * BC];
shared float sM1[BR], sL1[BR], sM2[BR], sL2[BR], sA1[BR], sA2[BR];

float acc1[RPT * CPT];
float acc2[RPT * CPT];

uint g_group, g_qblock, g_pos0;  // g_pos0 = p.pos0 + dyn_pos

bool slot_valid(uint r) {
  return r < p.n_rep * p.qb && r / p.qb < p.n_rep && g_qblock * p.qb + r % p.qb < p.S;
}
uint slot_head(uint r) { return g_group * p.n_rep + r / p.qb; }
uint slot_query(uint r) { return g_qblock * p.qb + r % p.qb; }

// Runs the key loop over [key_begin, key_end); leaves unnormalised accumulators in acc1/acc2
// and the running max/sum in sM*/sL* (shared, visible after the final barrier).
void attend(uint key_begin, uint key_end) {
  const uint tid = gl_LocalInvocationIndex;
  const uint cg = tid % TC, rg = tid / TC;
  for (uint i = 0; i < RPT * CPT; ++i) {
    acc1[i] = 0.0;
    acc2[i] = 0.0;
  }
  for (uint r = tid; r < BR; r += WG) {
    sM1[r] = NEG_BIG;
    sM2[r] = NEG_BIG;
    sL1[r] = 0.0;
    sL2[r] = 0.0;
  }
  for (uint idx = tid; idx < BR * DV; idx += WG) {
    const uint r = idx / DV, c = idx % DV;
    sQ[idx] = slot_valid(r) ? q[slot_query(r) * p.q_stride + slot_head(r) * DV + c] : STYPE(0);
  }
  const uint kv_base = g_group * p.capacity * DV;
  for (uint j0 = key_begin; j0 < key_end; j0 += BC) {
    const uint nk = min(BC, key_end - j0);
    barrier();  // previous tile's V and P are consumed
    for (uint idx = tid; idx < BC * DV; idx += WG) {
      const uint c = idx / DV;
      sKV[idx] = c < nk ? kc[kv_base + (j0 + c) * DV + idx % DV] : STYPE(0);
    }
    barrier();
    for (uint pi = tid; pi < BR * BC; pi += WG) {
      const uint r = pi / BC, c = pi % BC;
      float s1 = NEG_BIG, s2 = NEG_BIG;
      if (slot_valid(r) && c < nk && j0 + c <= g_pos0 + slot_query(r)) {
        float d1 = 0.0, d2 = 0.0;
        for (uint d = 0; d < HD; ++d) {
          d1 += float(sQ[r * DV + d]) * float(sKV[c * DV + d]);
          d2 += float(sQ[r * DV + HD + d]) * float(sKV[c * DV + HD + d]);
        }
        s1 = d1 * p.scale;
        s2 = d2 * p.scale;
      }
      sP1[pi] = s1;
      sP2[pi] = s2;
    }
    barrier();  // scores done: K no longer needed
    for (uint idx = tid; idx < BC * DV; idx += WG) {
      const uint c = idx / DV;
      sKV[idx] = c < nk ? vc[kv_base + (j0 + c) * DV + idx % DV] : STYPE(0);
    }
    // Online-softmax update of both softmaxes (no hazard with the V load above).
#if DVK_SUBGROUP
    // One subgroup per (row slot, softmax): lanes stride over the tile, subgroupMax/subgroupAdd reduce.
    // Subgroups are full or (WG < subgroup size) a single partial one, so min(size, WG) lanes are active.
    const uint lanes = min(gl_SubgroupSize, WG);
    for (uint w = gl_SubgroupID; w < 2 * BR; w += gl_NumSubgroups) {
      const uint r = w % BR;
      const bool second = w >= BR;
      const float m_old = second ? sM2[r] : sM1[r];
      float mx = m_old;
      for (uint c = gl_SubgroupInvocationID; c < nk; c += lanes) mx = max(mx, second ? sP2[r * BC + c] : sP1[r * BC + c]);
      mx = subgroupMax(mx);
      float sum = 0.0;
      for (uint c = gl_SubgroupInvocationID; c < BC; c += lanes) {
        const float s = second ? sP2[r * BC + c] : sP1[r * BC + c];
        const float e = s > 0.5 * NEG_BIG ? exp(s - mx) : 0.0;
        if (second) sP2[r * BC + c] = e; else sP1[r * BC + c] = e;
        sum += e;
      }
      sum = subgroupAdd(sum);
      if (subgroupElect()) {
        const float alpha = exp(m_old - mx);
        if (second) {
          sM2[r] = mx;
          sL2[r] = sL2[r] * alpha + sum;
          sA2[r] = alpha;
        } else {
          sM1[r] = mx;
          sL1[r] = sL1[r] * alpha + sum;
          sA1[r] = alpha;
        }
      }
    }
#else
    // Shared-memory path: one invocation per (row slot, softmax) walks the tile.
    for (uint w = tid; w < 2 * BR; w += WG) {
      const uint r = w % BR;
      const bool second = w >= BR;
      const float m_old = second ? sM2[r] : sM1[r];
      float mx = m_old;
      for (uint c = 0; c < nk; ++c) mx = max(mx, second ? sP2[r * BC + c] : sP1[r * BC + c]);
      float sum = 0.0;
      for (uint c = 0; c < BC; ++c) {
        const float s = second ? sP2[r * BC + c] : sP1[r * BC + c];
        const float e = s > 0.5 * NEG_BIG ? exp(s - mx) : 0.0;
        if (second) sP2[r * BC + c] = e; else sP1[r * BC + c] = e;
        sum += e;
      }
      const float alpha = exp(m_old - mx);  // finite: both are finite, mx >= m_old
      if (second) {
        sM2[r] = mx;
        sL2[r] = sL2[r] * alpha + sum;
        sA2[r] = alpha;
      } else {
        sM1[r] = mx;
        sL1[r] = sL1[r] * alpha + sum;
        sA1[r] = alpha;
      }
    }
#endif
    barrier();
    for (uint k = 0; k < RPT; ++k) {
      const uint r = rg + k * TR;
      const float a1 = sA1[r], a2 = sA2[r];
      for (uint j = 0; j < CPT; ++j) {
        acc1[k * CPT + j] *= a1;
        acc2[k * CPT + j] *= a2;
      }
      for (uint c = 0; c < nk; ++c) {
        const float p1 = sP1[r * BC + c], p2 = sP2[r * BC + c];
        for (uint j = 0; j < CPT; ++j) {
          const float v = float(sKV[c * DV + cg + j * TC]);
          acc1[k * CPT + j] += p1 * v;
          acc2[k * CPT + j] += p2 * v;
        }
      }
    }
  }
  barrier();
}

// Last key (exclusive) any valid slot of this workgroup can see.
uint causal_end() {
  const uint last_q = min(p.S, (g_qblock + 1) * p.qb) - 1;
  return min(g_pos0 + last_q + 1, p.capacity);
}
