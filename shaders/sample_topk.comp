#version 450
// Device sampling of one logits row: greedy or top-k with a host-supplied uniform draw; writes one token id.
// Order: value descending, index ascending (a total order, so ties pick the lower index, like
// std::max_element). Round j (j < k) finds the first element after round j-1's choice in that order
// (one pass over the row, then a workgroup argmax); invocation 0 then weights the k choices by
// exp((l - l_max) / temperature) and returns the first whose cumulative weight exceeds u · total.
// The reference is diffvk::sample_top_k() (float64 weights). Loop iterations per invocation:
// k · ceil(vocab / WG) + tree steps; the host keeps them within llvmpipe's budget.
//   params (uint[4]): [0] position (unused here), [1] u (float bits), [2] temperature (float bits),
//   [3] top_k (0 or 1 with temperature <= 0: greedy).
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(constant_id = 0) const uint WG = 64;
layout(constant_id = 1) const uint KMAX = 64;
layout(local_size_x_id = 0) in;

layout(std430, binding = 0) readonly buffer Logits { RTYPE logits[]; };  // float32 in either variant (the model's logits)
layout(std430, binding = 1) readonly buffer Params { uint params[]; };
layout(std430, binding = 2) writeonly buffer Out { uint token[]; };

layout(push_constant) uniform Push { uint vocab; } p;

shared float sv[KMAX];
shared uint si[KMAX];
shared float rv[WG];
shared uint ri[WG];

// (va, ia) comes before (vb, ib) in the order.
bool before(float va, uint ia, float vb, uint ib) { return va > vb || (va == vb && ia < ib); }

void main() {
  const uint lid = gl_LocalInvocationIndex;
  const float u = uintBitsToFloat(params[1]);
  const float temp = uintBitsToFloat(params[2]);
  uint k = params[3];
  if (!(temp > 0.0) || k == 0u) k = 1u;
  k = min(k, min(KMAX, p.vocab));

  float pv = 0.0;
  uint pi = 0u;
  for (uint j = 0; j < k; ++j) {
    float bv = 0.0;
    uint bi = 0xffffffffu;  // none yet
    for (uint i = lid; i < p.vocab; i += WG) {
      const float v = float(logits[i]);
      if ((j == 0u || before(pv, pi, v, i)) && (bi == 0xffffffffu || before(v, i, bv, bi))) {
        bv = v;
        bi = i;
      }
    }
    rv[lid] = bv;
    ri[lid] = bi;
    barrier();
    for (uint h = WG / 2; h > 0; h >>= 1) {
      if (lid < h) {
        const uint ob = ri[lid + h];
        if (ob != 0xffffffffu && (ri[lid] == 0xffffffffu || before(rv[lid + h], ob, rv[lid], ri[lid]))) {
          rv[lid] = rv[lid + h];
          ri[lid] = ob;
        }
      }
      barrier();
    }
    pv = rv[0];
    pi = ri[0];
    if (lid == 0) {
      sv[j] = pv;
      si[j] = pi;
    }
    barrier();
  }
  if (lid == 0) {
    uint choice = 0;
    if (k > 1u) {
      float w[KMAX];
      float total = 0.0;
      for (uint j = 0; j < k; ++j) {
        w[j] = exp((sv[j] - sv[0]) / temp);
        total += w[j];
      }
      const float target = u * total;
      float acc = 0.0;
      choice = k - 1u;
      for (uint j = 0; j < k; ++j) {
        acc += w[j];
        if (target < acc) {
          choice = j;
          break;
        }
      }
    }
    token[0] = si[choice];
  }
}
