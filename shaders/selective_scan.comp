#version 450
// Mamba-1 selective scan (docs/maths.md "Mamba-1 conv1d and selective scan"): for rows t < T, channels c < C and
// states s < S, from the state h (C x S, fp32 in both precisions, updated in place):
//   delta = softplus(delta_raw[t][c]),  A = -exp(A_log[c][s])
//   h[c][s] = exp(delta·A)·h[c][s] + delta·B[t][s]·u[t][c]
//   y_pre[t][c] = sum_s Cm[t][s]·h[c][s] + D[c]·u[t][c],   y[t][c] = y_pre[t][c]·silu(z[t][c])  (no z: y = y_pre)
// B and Cm are read from x_proj's rows (bc_stride apart, at b_off / c_off), z from in_proj's [x | z] rows.
//
// One invocation owns one channel and keeps its S states in registers (S a specialization constant, the loops over
// s unrolled), so the sum over s needs no reduction across invocations. The push constant `mode` picks the pass;
// every pass is this one pipeline:
//   0 direct: rows [0, T) from h, emits y, writes h (decode, and any call of one chunk);
//   1 chunk:  the chunked parallel prefill's first pass: workgroup row k runs rows [kL, kL + L) from a zero state
//             and writes that chunk's end state and the sum of its deltas (the chunk's decay is exp(A·sum)) to the
//             scratch buffer;
//   2 carry:  per channel, in chunk order: the true initial state of chunk k is kept in the scratch buffer in
//             place of its end state, h_in[k+1] = exp(A·sum[k])·h_in[k] + end[k], h_in[0] = h; writes the final
//             state to h;
//   3 final:  reruns chunk k from its true initial state and emits y.
// Each invocation reads and writes only its own channel's state and scratch entries, so every pass is race-free
// inside its dispatch; the passes are separate dispatches (the program's barriers order them), and no pass reads
// scratch a previous pass of the same call did not write, so a recorded program replays. fp32 arithmetic.
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
#include "common.glsl"

layout(constant_id = 0) const uint WG = 64;
layout(constant_id = 1) const uint S = 16;  // d_state
layout(local_size_x_id = 0) in;

layout(std430, binding = 0) readonly buffer U { STYPE u[]; };        // T x C
layout(std430, binding = 1) readonly buffer Dr { STYPE draw[]; };    // T x C, dt_proj's output (bias included)
layout(std430, binding = 2) readonly buffer Alog { float a_log[]; };  // C x S, fp32
layout(std430, binding = 3) readonly buffer BC { STYPE bc[]; };      // x_proj's rows: B at b_off, Cm at c_off
layout(std430, binding = 4) readonly buffer Dskip { float dskip[]; };  // C, fp32
layout(std430, binding = 5) readonly buffer Z { STYPE z[]; };        // in_proj's rows (read only when has_z)
layout(std430, binding = 6) buffer H { float h[]; };                  // C x S, fp32
layout(std430, binding = 7) writeonly buffer Y { STYPE y[]; };       // T x C
layout(std430, binding = 8) writeonly buffer Ypre { STYPE y_pre[]; };  // T x C (written only when has_ypre)
layout(std430, binding = 9) buffer Scratch { float scratch[]; };     // [chunks][C][S] states, then [chunks][C] sums

layout(push_constant) uniform Params {
  uint T;
  uint C;
  uint mode;
  uint L;       // chunk length (modes 1-3)
  uint chunks;  // ceil(T / L) (modes 1-3)
  uint bc_stride;
  uint b_off;
  uint c_off;
  uint z_stride;
  uint z_off;
  uint flags;  // 1: z present (gate), 2: y_pre written
} p;

// softplus as torch's (threshold 20); log(1 + e) through log(v)·e/(v − 1), v = 1 + e, accurate where e is tiny.
float softplus(float x) {
  if (x > 20.0) return x;
  const float e = exp(x), v = 1.0 + e;
  return v == 1.0 ? e : log(v) * (e / (v - 1.0));
}

void main() {
  const uint sums = p.chunks * p.C * S;              // first sum in scratch
  const uint rows_of_k = p.mode == 1 || p.mode == 3 ? p.chunks : 1;  // modes 0 and 2: one pass over the channels
  for (uint k = gl_WorkGroupID.y; k < rows_of_k; k += gl_NumWorkGroups.y)
    for (uint c = gl_WorkGroupID.x * WG + gl_LocalInvocationIndex; c < p.C; c += gl_NumWorkGroups.x * WG) {
      float A[S], hs[S];
      [[unroll]] for (uint s = 0; s < S; ++s) A[s] = -exp(a_log[c * S + s]);
      if (p.mode == 2) {
        [[unroll]] for (uint s = 0; s < S; ++s) hs[s] = h[c * S + s];
        for (uint j = 0; j < p.chunks; ++j) {
          const float sd = scratch[sums + j * p.C + c];
          const uint base = (j * p.C + c) * S;
          [[unroll]] for (uint s = 0; s < S; ++s) {
            const float end = scratch[base + s];
            scratch[base + s] = hs[s];
            hs[s] = exp(sd * A[s]) * hs[s] + end;
          }
        }
        [[unroll]] for (uint s = 0; s < S; ++s) h[c * S + s] = hs[s];
        continue;
      }
      const uint t0 = p.mode == 0 ? 0 : k * p.L, t1 = p.mode == 0 ? p.T : min(p.T, t0 + p.L);
      const uint sbase = (k * p.C + c) * S;
      if (p.mode == 0)
        [[unroll]] for (uint s = 0; s < S; ++s) hs[s] = h[c * S + s];
      else if (p.mode == 1)
        [[unroll]] for (uint s = 0; s < S; ++s) hs[s] = 0.0;
      else
        [[unroll]] for (uint s = 0; s < S; ++s) hs[s] = scratch[sbase + s];
      float sd = 0.0;
      if (p.mode == 1) {  // end state and delta sum only: no Cm, D or z
        for (uint t = t0; t < t1; ++t) {
          const float x = float(u[t * p.C + c]), d = softplus(float(draw[t * p.C + c])), dx = d * x;
          sd += d;
          const uint b0 = t * p.bc_stride + p.b_off;
          [[unroll]] for (uint s = 0; s < S; ++s) hs[s] = exp(d * A[s]) * hs[s] + dx * float(bc[b0 + s]);
        }
      } else {
        const float Dc = dskip[c];
        for (uint t = t0; t < t1; ++t) {
          const float x = float(u[t * p.C + c]), d = softplus(float(draw[t * p.C + c])), dx = d * x;
          const uint b0 = t * p.bc_stride + p.b_off, c0 = t * p.bc_stride + p.c_off;
          float acc = Dc * x;
          [[unroll]] for (uint s = 0; s < S; ++s) {
            hs[s] = exp(d * A[s]) * hs[s] + dx * float(bc[b0 + s]);
            acc += float(bc[c0 + s]) * hs[s];
          }
          if ((p.flags & 2u) != 0) y_pre[t * p.C + c] = STYPE(acc);
          if ((p.flags & 1u) != 0) {
            const float g = float(z[p.z_off + t * p.z_stride + c]);
            acc *= g / (1.0 + exp(-g));
          }
          y[t * p.C + c] = STYPE(acc);
        }
      }
      if (p.mode == 0)
        [[unroll]] for (uint s = 0; s < S; ++s) h[c * S + s] = hs[s];
      else if (p.mode == 1) {
        [[unroll]] for (uint s = 0; s < S; ++s) scratch[sbase + s] = hs[s];
        scratch[sums + k * p.C + c] = sd;
      }
    }
}
