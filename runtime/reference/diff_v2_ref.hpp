// diffvk — float64 CPU reference of one DIFF V2 attention layer (docs/maths.md, "DIFF V2").
//
// The layer of the authors' MultiheadFlashDiffV2 (microsoft/unilm, Diff-Transformer-V2), written
// from the maths; checked against tests/python/diffv2.py through tests/data/v2_layer/. Plain loops,
// double precision, no GPU code (the GPU's V2 kernels are checked against it).
//
//   q = x·Wqᵀ : 2H query heads of width D          k = x·Wkᵀ, v = x·Wvᵀ : Hkv heads of width D
//   interleaved (GPT-J) RoPE on q and k (the V1 reference's rope()), row r at position pos0 + r
//   O_j = softmax(q_j·k_gᵀ / √D, causal)·v_g   for query head j, KV head g = j / (2H / Hkv)
//   λ = sigmoid(x·Wλᵀ) : one value per token and output head, no λ_init
//   head i = O_2i − λ_i·O_2i+1      (no RMSNorm, no (1 − λ_init) gain)
//   y = concat_i(head i)·Woᵀ
//
// Layouts (row-major, one row per token): x S x E; q S x (2H·D), head j = columns [jD, jD + D);
// k, v S x (Hkv·D); heads S x (H·D). Weights are (out, in) like torch.nn.Linear.
#pragma once

#include <cstdint>
#include <vector>

namespace diffvk::ref {

struct V2Shape {
  int E = 0;    // model width (d_model); need not equal H·D
  int H = 0;    // output heads; there are 2H query heads
  int Hkv = 0;  // KV heads
  int D = 0;    // head width, free

  int q_width() const { return 2 * H * D; }
  int kv_width() const { return Hkv * D; }
  int o_width() const { return H * D; }
  int group() const { return 2 * H / Hkv; }  // query heads per KV head (even: whole pairs)
};

// Builds and validates a shape; Hkv <= 0 means Hkv = H (the authors' num_kv_heads=None).
// Throws std::invalid_argument (naming the values) unless E, H, Hkv, D > 0, D is even (RoPE rotates
// pairs), Hkv divides 2H, and 2H/Hkv is even, i.e. Hkv divides H: otherwise the pair (2i, 2i+1) of
// some output head would read two different KV heads.
V2Shape make_v2_shape(int E, int H, int Hkv, int D);
void validate(const V2Shape& s);

struct V2Weights {
  std::vector<double> wq;  // (2H·D, E)  q_proj.weight
  std::vector<double> wk;  // (Hkv·D, E) k_proj.weight
  std::vector<double> wv;  // (Hkv·D, E) v_proj.weight
  std::vector<double> wo;  // (E, H·D)   o_proj.weight
  std::vector<double> wl;  // (H, E)     lambda_proj.weight
};

// Throws std::invalid_argument if the shape is bad or a tensor has the wrong number of elements.
void validate(const V2Shape& s, const V2Weights& w);

// Deterministic weights from random_normal (diff_attn_ref.hpp), seeds seed .. seed+4: projections
// normal(0, 1/sqrt(in)), lambda_proj normal(0, lambda_std/sqrt(E)).
V2Weights random_v2_weights(const V2Shape& s, std::uint64_t seed, double lambda_std = 1.0);

// λ = sigmoid(x·Wλᵀ): S x H.
std::vector<double> diff_v2_lambda(const V2Shape& s, const V2Weights& w, const std::vector<double>& x, int S);

// The whole layer. x is S x E at positions pos0 .. pos0+S-1; the keys are this call's own rows
// (key j is visible to query i iff j <= i). Returns S x E.
std::vector<double> diff_v2_layer(const std::vector<double>& x, int S, int pos0, const V2Shape& s, const V2Weights& w,
                                  double theta);

// The attention part alone, on given (already roped) inputs: q S x (2H·D), k and v T x (Hkv·D), z S x H λ
// logits; query row i is at position pos0 + i and sees keys 0 .. pos0 + i (T >= pos0 + S). Returns the heads,
// S x (H·D): head h = softmax(q_2h·kᵀ/√D)·v − sigmoid(z_h)·softmax(q_2h+1·kᵀ/√D)·v, KV head g = j / (2H/Hkv).
// What diffvk's DIFF V2 attention kernels compute (the op case table, bench/op_cases.hpp).
std::vector<double> diff_v2_attention(const std::vector<double>& q, const std::vector<double>& k,
                                      const std::vector<double>& v, const std::vector<double>& z, int S, int T, int H,
                                      int Hkv, int D, int pos0);

// The attention maps of one output head h, each S x S row-major (zeros above the diagonal):
// a1 = softmax map of query head 2h, a2 = of query head 2h+1, lambda = λ_h per token (S values),
// diff[i][j] = a1[i][j] − lambda[i]·a2[i][j] (so head h = diff·v_g).
struct V2Maps {
  std::vector<double> a1, a2, lambda, diff;
};
V2Maps diff_v2_maps(const std::vector<double>& x, int S, int pos0, const V2Shape& s, const V2Weights& w, double theta,
                    int head);

// The maps of every output head on given (already roped) inputs, what diffvk's attention-map kernel computes
// (attn_probs in its DIFF V2 mode): q S x (2H·D) at positions pos0 .. pos0+S-1, k T x (Hkv·D) (T >= pos0 + S),
// z S x H λ logits. a1, a2 and diff are H x S x T (row i = the query at position pos0 + i, zeros past it),
// lambda is H x S.
V2Maps diff_v2_probs(const std::vector<double>& q, const std::vector<double>& k, const std::vector<double>& z, int S,
                     int T, int H, int Hkv, int D, int pos0);

}  // namespace diffvk::ref
