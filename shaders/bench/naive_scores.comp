#version 450
// Naive differential attention baseline, step 1 (run once per softmax): materialises one full
// score matrix in fp32,
//   s[(h*S + i)*keys + j] = Q[i,h]·K[j,g(h)] / √D   for j <= pos0 + i,  NEG_BIG (masked) otherwise
// one invocation per score (x: key j, y: query i, z: head h). Query/key halves are selected by
// column offsets, as in flash_attn_core.glsl.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(constant_id = 0) const uint WG = 64;
layout(constant_id = 1) const uint HD = 64;  // D
layout(local_size_x_id = 0) in;

layout(std430, binding = 0) readonly buffer Qbuf { STYPE q[]; };
layout(std430, binding = 1) readonly buffer Kbuf { STYPE kc[]; };
layout(std430, binding = 2) writeonly buffer Sbuf { float s[]; };

layout(push_constant) uniform Params {
  uint S;
  uint keys;  // row length of the score matrix (pos0 + S)
  uint pos0;
  uint H;
  uint n_rep;
  uint capacity;
  uint q_stride;
  uint q_head_stride;
  uint q_col;
  uint k_stride;
  uint k_col;
  float scale;
} p;

void main() {
  const uint j = gl_GlobalInvocationID.x, i = gl_WorkGroupID.y, h = gl_WorkGroupID.z;
  if (j >= p.keys) return;
  float r = NEG_BIG;
  if (j <= p.pos0 + i) {
    const uint qb = i * p.q_stride + h * p.q_head_stride + p.q_col;
    const uint kb = ((h / p.n_rep) * p.capacity + j) * p.k_stride + p.k_col;
    float d = 0.0;
    for (uint c = 0; c < HD; ++c) d += float(q[qb + c]) * float(kc[kb + c]);
    r = d * p.scale;
  }
  s[(h * p.S + i) * p.keys + j] = r;
}
