#version 450
// Mamba-1 causal depthwise conv1d with a rolling state, SiLU fused (docs/maths.md "Mamba-1 conv1d and selective
// scan"): for t < T rows and c < C channels,
//   out[t][c] = silu?( bias[c] + sum_{j<K} w[c][j] · in[t - (K-1) + j][c] ),
// in[-(K-1) .. -1] being the K-1 inputs before this call (the state, oldest first, fp32 in both precisions) and
// in[t] = x[x_off + t·x_stride + c] (x: the first C columns of in_proj's [x | z] rows). On return the state holds
// the last K-1 inputs (when T < K-1, the newest of the old state's and this call's).
//
// Race freedom: one invocation owns one channel and walks t in order, keeping the K-1 previous inputs in
// registers; it alone reads and then writes its channel's state column, so one dispatch updates the state in place
// with no other invocation touching it, whatever T is (prefill and decode, T = 1, run the same code), and a
// recorded program replays with the state it finds. Arithmetic fp32; storage type for x, w, bias and out.
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
#include "common.glsl"

layout(constant_id = 0) const uint WG = 64;
layout(constant_id = 1) const uint K = 4;  // kernel width, 2..8
layout(local_size_x_id = 0) in;

layout(std430, binding = 0) readonly buffer X { STYPE x[]; };
layout(std430, binding = 1) readonly buffer W { STYPE w[]; };     // C x K
layout(std430, binding = 2) readonly buffer Bias { STYPE bias[]; };  // C (read only when has_bias)
layout(std430, binding = 3) buffer State { float state[]; };        // (K-1) x C, fp32
layout(std430, binding = 4) writeonly buffer Out { STYPE y[]; };   // T x C

layout(push_constant) uniform Params {
  uint T;
  uint C;
  uint x_stride;  // elements between rows of x
  uint x_off;     // element offset of row 0, channel 0
  uint has_bias;
  uint silu;
} p;

void main() {
  for (uint c = gl_WorkGroupID.x * WG + gl_LocalInvocationIndex; c < p.C; c += gl_NumWorkGroups.x * WG) {
    float wk[K];
    [[unroll]] for (uint j = 0; j < K; ++j) wk[j] = float(w[c * K + j]);
    // win[j]: input t - (K-1) + j for the row t about to be computed (j < K-1).
    float win[K];
    [[unroll]] for (uint j = 0; j + 1 < K; ++j) win[j] = state[j * p.C + c];
    const float b = p.has_bias != 0 ? float(bias[c]) : 0.0;
    for (uint t = 0; t < p.T; ++t) {
      win[K - 1] = float(x[p.x_off + t * p.x_stride + c]);
      float acc = b;
      [[unroll]] for (uint j = 0; j < K; ++j) acc += wk[j] * win[j];
      y[t * p.C + c] = STYPE(p.silu != 0 ? acc / (1.0 + exp(-acc)) : acc);
      [[unroll]] for (uint j = 0; j + 1 < K; ++j) win[j] = win[j + 1];
    }
    [[unroll]] for (uint j = 0; j + 1 < K; ++j) state[j * p.C + c] = win[j];
  }
}
