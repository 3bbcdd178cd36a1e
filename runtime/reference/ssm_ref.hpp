// diffvk — float64 CPU reference of the Phi-4-mini-flash (SambaY) pieces that are not attention: the Mamba-1
// causal depthwise conv1d with its rolling state, the Mamba-1 selective scan, the Gated Memory Unit's gate and
// LayerNorm with bias (docs/maths.md "Phi-4-mini-flash (SambaY)"). Plain loops, double precision, standard
// library only; every GPU case table of these ops and the whole-model reference use these functions.
//
// Layouts (row-major, one row per token): x, u, delta, z, y: T x C (C = d_inner channels); B, Cm: T x S
// (S = d_state); A_log: C x S (as the checkpoint stores it: one decay per channel and state, the original
// Mamba-1 scan); conv weight: C x K (torch's Conv1d weight (C, 1, K) without the middle axis); conv state:
// (K - 1) x C, oldest input first; scan state h: C x S.
#pragma once

#include <vector>

namespace diffvk::ref {

// Causal depthwise conv1d over T rows of C channels with kernel width K:
//   out[t][c] = bias[c] + sum_{j<K} w[c][j] · in[t - (K-1) + j][c],
// where in[-(K-1) .. -1] are the K-1 inputs before this call (`state`, zeros for a fresh sequence); then SiLU when
// `silu`. On return `state` holds the last K-1 inputs (of this call and, when T < K-1, of the old state).
// `bias` may be empty (no bias). Returns T x C.
std::vector<double> causal_conv1d(const std::vector<double>& x, int T, int C, const std::vector<double>& w, int K,
                                  const std::vector<double>& bias, std::vector<double>& state, bool silu);

// softplus as torch.nn.functional.softplus (beta 1, threshold 20): x > 20 gives x.
double softplus(double x);
double silu(double x);

// The Mamba-1 selective scan of T steps, C channels and S states, from state h (C x S; zeros for a fresh
// sequence), updated in place:
//   delta = softplus(delta_raw[t][c])                       (delta_raw: dt_proj's output, its bias included)
//   h[c][s] = exp(delta · A[c][s]) · h[c][s] + delta · B[t][s] · u[t][c],   A = −exp(A_log)
//   y_pre[t][c] = sum_s Cm[t][s] · h[c][s] + D[c] · u[t][c]
//   y[t][c] = y_pre[t][c] · silu(z[t][c])                   (no z: y = y_pre)
struct ScanResult {
  std::vector<double> y;      // T x C, gated
  std::vector<double> y_pre;  // T x C, before the gate (the D skip included): SambaY's memory at layer L/2
};
ScanResult selective_scan(const std::vector<double>& u, const std::vector<double>& delta_raw,
                          const std::vector<double>& A_log, const std::vector<double>& B, const std::vector<double>& Cm,
                          const std::vector<double>& D, const std::vector<double>* z, int T, int C, int S,
                          std::vector<double>& h);

// The Gated Memory Unit's gate (ArchScale's GMU, swiglu(in_proj(x), memory)): out[i] = silu(g[i]) · m[i].
std::vector<double> gmu_gate(const std::vector<double>& g, const std::vector<double>& m);

// LayerNorm with bias of each of `rows` rows of width E (torch.nn.LayerNorm): (x − mean) / sqrt(var + eps) ⊙ w + b,
// var the biased variance. `b` may be empty (no bias).
std::vector<double> layer_norm(const std::vector<double>& x, int rows, int E, const std::vector<double>& w,
                               const std::vector<double>& b, double eps);

}  // namespace diffvk::ref
