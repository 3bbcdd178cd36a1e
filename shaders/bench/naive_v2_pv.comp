#version 450
// Naive DIFF V2 baseline, last step: O[i,h,:] = sum_j (P_2h[i,j] - λ_i,h * P_2h+1[i,j]) * V[j,g(h),:] from the
// materialised probability matrices of the even (p1) and odd (p2) query heads, with λ = sigmoid of the
// head's logit in q (after the 2H query heads), V D wide; one invocation per output element (x: column,
// y: query i, z: output head h). Keys past the query's position are skipped (their probability is 0).
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
#include "diff_v2_lambda.glsl"

layout(constant_id = 0) const uint WG = 64;
layout(constant_id = 1) const uint HD = 64;  // D (V is D wide)
layout(local_size_x_id = 0) in;

layout(std430, binding = 0) readonly buffer P1 { float p1[]; };
layout(std430, binding = 1) readonly buffer P2 { float p2[]; };
layout(std430, binding = 2) readonly buffer Vbuf { STYPE vc[]; };
layout(std430, binding = 3) readonly buffer Qbuf { STYPE q[]; };
layout(std430, binding = 4) writeonly buffer Obuf { STYPE o[]; };

layout(push_constant) uniform Params {
  uint S;
  uint keys;
  uint pos0;
  uint H;      // output heads
  uint n_rep;  // output heads per KV head
  uint capacity;
  uint o_stride;
  uint q_stride;
  uint q_off;  // column of head 0's λ logit in a row of q
} p;

void main() {
  const uint c = gl_GlobalInvocationID.x, i = gl_WorkGroupID.y, h = gl_WorkGroupID.z;
  if (c >= HD) return;
  const float lam = v2_lambda(float(q[i * p.q_stride + p.q_off + h]));
  const uint row = (h * p.S + i) * p.keys;
  const uint vb = (h / p.n_rep) * p.capacity * HD + c;
  const uint last = min(p.keys, p.pos0 + i + 1);
  float acc = 0.0;
  for (uint j = 0; j < last; ++j) acc += (p1[row + j] - lam * p2[row + j]) * float(vc[vb + j * HD]);
  o[i * p.o_stride + h * HD + c] = STYPE(acc);
}
