#version 450
// Naive baseline, step 3: O[i,h,:] = sum_j (P1[h,i,j] - lambda*P2[h,i,j]) * V[j,g(h),:] from the two
// materialised probability matrices, one invocation per output element (x: column, y: query i,
// z: head h); keys past the query's position are skipped (their probability is 0). The head
// norm follows as a separate head_rmsnorm dispatch.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(constant_id = 0) const uint WG = 64;
layout(constant_id = 1) const uint HD = 64;  // D (V is 2D wide)
layout(local_size_x_id = 0) in;
const uint DV = 2 * HD;

layout(std430, binding = 0) readonly buffer P1 { float p1[]; };
layout(std430, binding = 1) readonly buffer P2 { float p2[]; };
layout(std430, binding = 2) readonly buffer Vbuf { STYPE vc[]; };
layout(std430, binding = 3) writeonly buffer Obuf { STYPE o[]; };

layout(push_constant) uniform Params {
  uint S;
  uint keys;
  uint pos0;
  uint H;
  uint n_rep;
  uint capacity;
  uint o_stride;
  float lambda;
} p;

void main() {
  const uint c = gl_GlobalInvocationID.x, i = gl_WorkGroupID.y, h = gl_WorkGroupID.z;
  if (c >= DV) return;
  const uint row = (h * p.S + i) * p.keys;
  const uint vb = (h / p.n_rep) * p.capacity * DV + c;
  const uint last = min(p.keys, p.pos0 + i + 1);
  float acc = 0.0;
  for (uint j = 0; j < last; ++j) acc += (p1[row + j] - p.lambda * p2[row + j]) * float(vc[vb + j * DV]);
  o[i * p.o_stride + h * DV + c] = STYPE(acc);
}
