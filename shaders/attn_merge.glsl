// Merge of the split-K partial states written by attn_split.glsl, one workgroup per (head, query):
//   M = max_z m_z,  L = sum_z l_z exp(m_z - M),  O = sum_z O_z exp(m_z - M) / L     (per softmax)
// over the LIVE splits only: the same split_length() as the split kernel, from the same position
// buffer. Maxima are finite (NEG_BIG for a split that saw no key), so exp(m_z - M) is 0 there and
// nothing is NaN; merged values are clamped to +-FLT_MAX.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(constant_id = 0) const uint WG = 64;
layout(constant_id = 1) const uint HD = 64;
layout(local_size_x_id = 0) in;
#ifndef DVK_V2
#define DVK_V2 0  // 1: DIFF V2 (rows are output heads, V is D wide)
#endif
const uint DV = DVK_V2 != 0 ? HD : 2 * HD;
const float FLT_MAX = 3.402823466e38;

layout(std430, binding = 0) readonly buffer Part { float part[]; };
layout(std430, binding = 1) readonly buffer Stat { float stat[]; };
// The including shader defines MERGE_DYN_BINDING (its last binding).
layout(std430, binding = MERGE_DYN_BINDING) readonly buffer Dyn { uint dyn_pos; };

layout(push_constant) uniform Params {
  uint S;
  uint H;
  uint splits;     // dispatched splits (gl_NumWorkGroups.z of the split kernel)
  uint o_stride;
  uint pos0;       // static part of the position of query row 0
  uint capacity;
  uint min_split, max_split;
  float lambda;
  float gain;
  float eps;
  uint q_stride;   // DIFF V2: elements between rows of q
  uint q_off;      // DIFF V2: column of output head 0's λ logit in a row of q
} p;

#include "attn_split_len.glsl"
uint live_splits() {
  const uint t = min(p.pos0 + dyn_pos + p.S, p.capacity);
  const uint len = attn_split_length(t, p.splits, p.min_split, p.max_split);
  return min(p.splits, (t + len - 1) / len);
}

float g_w[NSM];  // 1/L_t of the current (head, query)
uint g_h, g_i, g_live;

float g_m[NSM];  // merged maximum of softmax t
void merge_stats() {
  g_h = gl_WorkGroupID.x;
  g_i = gl_WorkGroupID.y;
  g_live = live_splits();
  for (uint t = 0; t < NSM; ++t) {
    float M = NEG_BIG;
    for (uint z = 0; z < g_live; ++z) M = max(M, stat[((z * p.H + g_h) * p.S + g_i) * 2 * NSM + 2 * t]);
    g_m[t] = M;
    float l = 0.0;
    for (uint z = 0; z < g_live; ++z) {
      const uint row = (z * p.H + g_h) * p.S + g_i;
      l += stat[row * 2 * NSM + 2 * t + 1] * exp(stat[row * 2 * NSM + 2 * t] - g_m[t]);
    }
    g_w[t] = l > 0.0 ? 1.0 / l : 0.0;
  }
}

// Normalised output of softmax t at column c.
float merged(uint t, uint c) {
  float o = 0.0;
  for (uint z = 0; z < g_live; ++z) {
    const uint row = (z * p.H + g_h) * p.S + g_i;
    o += part[(row * NSM + t) * DV + c] * exp(stat[row * 2 * NSM + 2 * t] - g_m[t]);
  }
  return clamp(o * g_w[t], -FLT_MAX, FLT_MAX);
}
