#version 450
// Mamba-1 causal depthwise conv1d with a rolling state, SiLU fused (docs/maths.md "Mamba-1 conv1d and selective
// scan"): for t < T rows and c < C channels,
//   out[t][c] = silu?( bias[c] + sum_{j<K} w[c][j] · in[t - (K-1) + j][c] ),
// in[-(K-1) .. -1] being the K-1 inputs before this call (the state, oldest first, fp32 in both precisions) and
// in[t] = x[x_off + t·x_stride + c] (x: the first C columns of in_proj's [x | z] rows). On return the state holds
// the last K-1 inputs (when T < K-1, the newest of the old state's and this call's).
//
// Work split and race freedom: workgroup row k of the grid takes rows [kL, kL + L) (L >= K-1 when there is more than
// one block; the host's choice, conv1d_rows_per_block) and one invocation one channel, walking its rows in order with
// the K-1 previous inputs in registers; block k > 0 reads those from x (rows kL-(K-1) .. kL-1 >= 0), so only block
// 0 touches the state: its invocation reads its channel's state column first and writes the new one last (the
// inputs T-(K-1) .. T-1: x's rows where >= 0, else the old state it kept in registers). No two invocations read and
// write the same state element, so one dispatch updates the state in place, whatever T is (prefill and decode,
// T = 1, run the same code), and a recorded program replays with the state it finds. Arithmetic fp32; storage type
// for x, w, bias and out.
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
  uint L;       // rows per block
  uint blocks;  // ceil(T / L)
} p;

float xin(uint t, uint c) { return float(x[p.x_off + t * p.x_stride + c]); }

void main() {
  for (uint k = gl_WorkGroupID.y; k < p.blocks; k += gl_NumWorkGroups.y)
    for (uint c = gl_WorkGroupID.x * WG + gl_LocalInvocationIndex; c < p.C; c += gl_NumWorkGroups.x * WG) {
      float wk[K];
      [[unroll]] for (uint j = 0; j < K; ++j) wk[j] = float(w[c * K + j]);
      const uint t0 = k * p.L, t1 = min(p.T, t0 + p.L);
      // win[j]: input t - (K-1) + j for the row t about to be computed (j < K-1); old: the state (block 0).
      float win[K], old[K];
      if (k == 0) {
        [[unroll]] for (uint j = 0; j + 1 < K; ++j) {
          old[j] = state[j * p.C + c];
          win[j] = old[j];
        }
      } else {
        [[unroll]] for (uint j = 0; j + 1 < K; ++j) win[j] = xin(t0 - (K - 1) + j, c);
      }
      const float b = p.has_bias != 0 ? float(bias[c]) : 0.0;
      for (uint t = t0; t < t1; ++t) {
        win[K - 1] = xin(t, c);
        float acc = b;
        [[unroll]] for (uint j = 0; j < K; ++j) acc += wk[j] * win[j];
        y[t * p.C + c] = STYPE(p.silu != 0 ? acc / (1.0 + exp(-acc)) : acc);
        [[unroll]] for (uint j = 0; j + 1 < K; ++j) win[j] = win[j + 1];
      }
      if (k == 0)  // the new state: inputs T-(K-1) .. T-1
        [[unroll]] for (uint j = 0; j + 1 < K; ++j) {
          const int i = int(p.T) - int(K - 1) + int(j);  // >= -(K-1)
          float v = 0.0;
          if (i >= 0)
            v = xin(uint(i), c);
          else
            [[unroll]] for (uint q = 0; q + 1 < K; ++q) if (int(q) == int(K - 1) + i) v = old[q];
          state[j * p.C + c] = v;
        }
    }
}
