// diffvk — float64 CPU reference of the whole model (README "Checkpoint format"): token embedding,
// per layer x += attn(rmsnorm(x)) and x += down(silu(gate(n)) ⊙ up(n)) with n = rmsnorm(x), then the
// final RMSNorm and lm_head. Built on diff_attn_ref.hpp's layer; plain loops, double precision.
#pragma once

#include <vector>

#include "reference/diff_attn_ref.hpp"

namespace diffvk::ref {

struct ModelLayerWeights {
  std::vector<double> attn_norm;  // (E,)
  AttnWeights attn;
  std::vector<double> ffn_norm;   // (E,)
  std::vector<double> gate, up;   // (I, E)
  std::vector<double> down;       // (E, I)
};
struct ModelWeights {
  AttnShape shape;
  int vocab = 0, I = 0;
  double rope_theta = 10000.0, eps = 1e-5;  // eps: the block norms'
  std::vector<double> embed;    // (V, E)
  std::vector<ModelLayerWeights> layers;
  std::vector<double> norm;     // (E,)
  std::vector<double> lm_head;  // (V, E)
  std::function<void(double* row, int n)> kv_round;  // KVCache::round_row of every layer (empty: exact)
};

// Block RMSNorm of each of `rows` rows: x / sqrt(mean(x²) + eps) ⊙ g.
std::vector<double> rms_norm(const std::vector<double>& x, int rows, int E, const std::vector<double>& g, double eps);

// What one run computes: the logits of every token, the residual stream entering each layer and after
// the last one (hidden[l], l = 0 … layers), and the largest |value| the residual stream ever held.
struct ModelRun {
  std::vector<double> logits;               // tokens x V
  std::vector<std::vector<double>> hidden;  // layers + 1 entries of tokens x E
  double max_abs_residual = 0;
};
// All tokens at positions 0 … n−1 in one causal pass (equal to prefill-then-decode).
ModelRun model_forward(const ModelWeights& m, const std::vector<int>& tokens);

// Attention probabilities of one layer (docs/maths.md, differential attention, causal, before the mix with V) from
// projected and roped q (S x 2H·D) and k (T x 2Hkv·D): p1, p2 are H x S x T (row i of head h at
// [(h·S + i)·T, …)), masked keys 0. Query row i sits at position q_pos0 + i.
struct AttnProbs {
  std::vector<double> p1, p2;
};
AttnProbs attention_probs(const std::vector<double>& q, const std::vector<double>& k, int S, int T, int H, int Hkv,
                          int D, int q_pos0 = 0);

}  // namespace diffvk::ref
