// Tiled single-softmax (standard) flash attention, shared by flash_attn.comp (prefill, output
// normalised in the epilogue) and flash_attn_split.comp (split-K partial states for decode).
// The "two-pass" baseline of `diffvk bench` runs it twice -- Q1·K1ᵀ and Q2·K2ᵀ, both with V at
// width 2D -- and then combine_norm.comp. Same structure and tile policy as diff_attn_core.glsl
// (GQA folded into rows, one K/V stream per workgroup, fp32 online softmax with subgroup or
// shared-memory statistics, causal block skip), only with one softmax: it is what a
// standard-attention runtime offers.
//
// One workgroup owns BR row slots = (head, query) pairs of ONE key/value group g:
//   slot r -> head h = g*n_rep + r / qb, query i = qblock*qb + r % qb.
// Layouts (elements):
//   q[i*q_stride + h*q_head_stride + q_col + (0..D-1)]       (q_col = 0: Q1, D: Q2)
//   K cache [g][capacity][k_stride], this pass's half at k_col (k_stride = 2D, k_col = 0 or D)
//   V cache [g][capacity][2D]
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(constant_id = 0) const uint WG = 64;   // invocations
layout(constant_id = 1) const uint HD = 64;   // D: query/key width
layout(constant_id = 2) const uint BR = 16;   // row slots per workgroup
layout(constant_id = 3) const uint BC = 32;   // keys per tile
layout(constant_id = 4) const uint TC = 32;   // invocations across the 2D output columns
layout(local_size_x_id = 0) in;

const uint DV = 2 * HD;    // V width
const uint TR = WG / TC;   // invocation rows
const uint RPT = BR / TR;  // row slots per invocation
const uint CPT = DV / TC;  // output columns per invocation

layout(std430, binding = 0) readonly buffer Qbuf { STYPE q[]; };
layout(std430, binding = 1) readonly buffer Kbuf { STYPE kc[]; };
layout(std430, binding = 2) readonly buffer Vbuf { STYPE vc[]; };

layout(push_constant) uniform Params {
  uint S;              // query rows in this call
  uint pos0;           // absolute position of query row 0 (keys 0 .. pos0+S-1 exist)
  uint H;
  uint n_rep;          // H / Hkv
  uint capacity;       // KV-cache rows per group
  uint q_stride;       // elements between query rows
  uint q_head_stride;  // elements between heads within a query row
  uint q_col;          // first column of this pass's query half within a head
  uint k_stride;       // elements per K-cache row
  uint k_col;          // first column of this pass's key half within a K row
  uint o_stride;       // elements between output rows (head h at columns h*2D)
  uint qb;             // queries per workgroup (BR >= n_rep * qb)
  uint split_len;      // keys per split (multiple of BC); >= pos0+S when not split
  float scale;         // 1/sqrt(D)
} p;

shared STYPE sQ[BR * HD];
shared STYPE sKV[BC * DV];  // K tile (BC x D) then V tile (BC x 2D)
shared float sP[BR * BC];
shared float sM[BR], sL[BR], sA[BR];

float acc[RPT * CPT];

uint g_group, g_qblock;

bool slot_valid(uint r) {
  return r < p.n_rep * p.qb && r / p.qb < p.n_rep && g_qblock * p.qb + r % p.qb < p.S;
}
uint slot_head(uint r) { return g_group * p.n_rep + r / p.qb; }
uint slot_query(uint r) { return g_qblock * p.qb + r % p.qb; }

// Key loop over [key_begin, key_end); leaves the unnormalised accumulator in acc and the running
// max/sum in sM/sL (visible after the final barrier).
void attend(uint key_begin, uint key_end) {
  const uint tid = gl_LocalInvocationIndex;
  const uint cg = tid % TC, rg = tid / TC;
  for (uint i = 0; i < RPT * CPT; ++i) acc[i] = 0.0;
  for (uint r = tid; r < BR; r += WG) {
    sM[r] = NEG_BIG;
    sL[r] = 0.0;
  }
  for (uint idx = tid; idx < BR * HD; idx += WG) {
    const uint r = idx / HD, c = idx % HD;
    sQ[idx] = slot_valid(r) ? q[slot_query(r) * p.q_stride + slot_head(r) * p.q_head_stride + p.q_col + c] : STYPE(0);
  }
  const uint k_base = g_group * p.capacity * p.k_stride + p.k_col;
  const uint v_base = g_group * p.capacity * DV;
  for (uint j0 = key_begin; j0 < key_end; j0 += BC) {
    const uint nk = min(BC, key_end - j0);
    barrier();  // previous tile's V and P are consumed
    for (uint idx = tid; idx < BC * HD; idx += WG) {
      const uint c = idx / HD;
      sKV[idx] = c < nk ? kc[k_base + (j0 + c) * p.k_stride + idx % HD] : STYPE(0);
    }
    barrier();
    for (uint pi = tid; pi < BR * BC; pi += WG) {
      const uint r = pi / BC, c = pi % BC;
      float s = NEG_BIG;
      if (slot_valid(r) && c < nk && j0 + c <= p.pos0 + slot_query(r)) {
        float d1 = 0.0;
        for (uint d = 0; d < HD; ++d) d1 += float(sQ[r * HD + d]) * float(sKV[c * HD + d]);
        s = d1 * p.scale;
      }
      sP[pi] = s;
    }
    barrier();  // scores done: K no longer needed
    for (uint idx = tid; idx < BC * DV; idx += WG) {
      const uint c = idx / DV;
      sKV[idx] = c < nk ? vc[v_base + (j0 + c) * DV + idx % DV] : STYPE(0);
    }
    // Online-softmax update (no hazard with the V load above).
#if DVK_SUBGROUP
    // One subgroup per row slot: lanes stride over the tile, subgroupMax/subgroupAdd reduce (as in
    // diff_attn_core.glsl). Subgroups are full or (WG < subgroup size) a single partial one.
    const uint lanes = min(gl_SubgroupSize, WG);
    for (uint r = gl_SubgroupID; r < BR; r += gl_NumSubgroups) {
      const float m_old = sM[r];
      float mx = m_old;
      for (uint c = gl_SubgroupInvocationID; c < nk; c += lanes) mx = max(mx, sP[r * BC + c]);
      mx = subgroupMax(mx);
      float sum = 0.0;
      for (uint c = gl_SubgroupInvocationID; c < BC; c += lanes) {
        const float s = sP[r * BC + c];
        const float e = s > 0.5 * NEG_BIG ? exp(s - mx) : 0.0;
        sP[r * BC + c] = e;
        sum += e;
      }
      sum = subgroupAdd(sum);
      if (subgroupElect()) {
        const float alpha = exp(m_old - mx);
        sM[r] = mx;
        sL[r] = sL[r] * alpha + sum;
        sA[r] = alpha;
      }
    }
#else
    // Shared-memory path: one invocation per row slot walks the tile.
    for (uint r = tid; r < BR; r += WG) {
      const float m_old = sM[r];
      float mx = m_old;
      for (uint c = 0; c < nk; ++c) mx = max(mx, sP[r * BC + c]);
      float sum = 0.0;
      for (uint c = 0; c < BC; ++c) {
        const float s = sP[r * BC + c];
        const float e = s > 0.5 * NEG_BIG ? exp(s - mx) : 0.0;
        sP[r * BC + c] = e;
        sum += e;
      }
      const float alpha = exp(m_old - mx);
      sM[r] = mx;
      sL[r] = sL[r] * alpha + sum;
      sA[r] = alpha;
    }
#endif
    barrier();
    for (uint k = 0; k < RPT; ++k) {
      const uint r = rg + k * TR;
      const float a = sA[r];
      for (uint j = 0; j < CPT; ++j) acc[k * CPT + j] *= a;
      for (uint c = 0; c < nk; ++c) {
        const float pr = sP[r * BC + c];
        for (uint j = 0; j < CPT; ++j) acc[k * CPT + j] += pr * float(sKV[c * DV + cg + j * TC]);
      }
    }
  }
  barrier();
}

// Last key (exclusive) any valid slot of this workgroup can see.
uint causal_end() {
  const uint last_q = min(p.S, (g_qblock + 1) * p.qb) - 1;
  return p.pos0 + last_q + 1;
}
