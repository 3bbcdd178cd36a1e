// diffvk — float64 CPU reference of the whole model (README "Checkpoint format"): token embedding,
// per layer x += attn(rmsnorm(x)) and x += down(silu(gate(n)) ⊙ up(n)) with n = rmsnorm(x), then the
// final RMSNorm and lm_head. The attention is DIFF V1's (diff_attn_ref.hpp's layer_forward) or, with
// ModelWeights::v2, DIFF V2's (docs/maths.md "DIFF V2"; v2_layer_forward below, diff_v2_ref.hpp's layer
// with a KV cache). Plain loops, double precision.
#pragma once

#include <vector>

#include "reference/diff_attn_ref.hpp"
#include "reference/diff_v2_ref.hpp"

namespace diffvk::ref {

struct ModelLayerWeights {
  std::vector<double> attn_norm;  // (E,)  V2 checkpoints: input_layernorm
  AttnWeights attn;               // DIFF V1 (ModelWeights::v2 false)
  V2Weights attn_v2;              // DIFF V2 (ModelWeights::v2 true): q/k/v/o/lambda_proj
  std::vector<double> ffn_norm;   // (E,)  V2 checkpoints: post_attention_layernorm
  std::vector<double> gate, up;   // (I, E)
  std::vector<double> down;       // (E, I)
};
struct ModelWeights {
  AttnShape shape;   // DIFF V1's shape (unused when v2)
  bool v2 = false;   // DIFF V2 layers: v2_shape and ModelLayerWeights::attn_v2
  V2Shape v2_shape;  // DIFF V2's shape (E, H, Hkv, D; E need not equal H·D)
  int vocab = 0, I = 0;
  double rope_theta = 10000.0, eps = 1e-5;  // eps: the block norms'
  std::vector<double> embed;                // (V, E)
  std::vector<ModelLayerWeights> layers;
  std::vector<double> norm;     // (E,)
  std::vector<double> lm_head;  // (V, E)
  // KVCache::round_row of every layer (empty: exact), applied to each KV head's row of K (after RoPE) and of
  // V as it enters the cache: 2D values wide in DIFF V1, D wide in DIFF V2.
  std::function<void(double* row, int n)> kv_round;

  int width() const { return v2 ? v2_shape.E : shape.E; }  // E
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
// All tokens at positions 0 … n−1 in one causal pass (equal to prefill-then-decode), DIFF V1 or V2 (m.v2).
ModelRun model_forward(const ModelWeights& m, const std::vector<int>& tokens);

// One DIFF V2 attention layer with a KV cache, the V2 counterpart of layer_forward (diff_attn_ref.hpp): x is
// S x E at positions pos0 .. pos0+S-1. Without a cache pos0 must be 0 (the keys are this call's own rows).
// With one, cache->len must equal pos0; the cache holds positions 0 .. pos0-1 in rows of Hkv·D (k after
// RoPE), and this call appends its S rows, each KV head's D-wide K and V row passed through
// cache->round_row first when set. Query i sees keys 0 .. pos0 + i. Equal to diff_v2_layer (diff_v2_ref.hpp)
// up to rounding when nothing is rounded; prefill-then-decode equals one long prefill. Returns S x E.
std::vector<double> v2_layer_forward(const V2Shape& s, const V2Weights& w, double rope_theta,
                                     const std::vector<double>& x, int S, int pos0 = 0, KVCache* cache = nullptr);

// Attention probabilities of one layer (docs/maths.md, differential attention, causal, before the mix with V) from
// projected and roped q (S x 2H·D) and k (T x 2Hkv·D): p1, p2 are H x S x T (row i of head h at
// [(h·S + i)·T, …)), masked keys 0. Query row i sits at position q_pos0 + i.
struct AttnProbs {
  std::vector<double> p1, p2;
};
AttnProbs attention_probs(const std::vector<double>& q, const std::vector<double>& k, int S, int T, int H, int Hkv,
                          int D, int q_pos0 = 0);

}  // namespace diffvk::ref
