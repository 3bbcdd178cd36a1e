// diffvk — float64 CPU reference of one MultiheadDiffAttn layer.
//
// Used by every GPU conformance test (tests/) and by the benchmark's check before timing
// (bench/check.cpp): the one float64 reference. Standard library only.
// Written from docs/maths.md (docs: "Differential attention: the exact
// computation"). Plain loops, double precision, no GPU code. Every GPU
// conformance test compares against these functions, so they favour clarity
// over speed (a layer with S = T = 512, E = 512 runs in well under a second
// with optimisation, a few seconds at -O0).
//
// Layouts (all row-major, one row per token):
//   x    : rows x E
//   q    : rows x (2H·D)    sub-head s = columns [s·D, s·D + D); head h owns 2h (Q1), 2h+1 (Q2)
//   k    : rows x (2Hkv·D)  group g owns sub-heads 2g (K1) and 2g+1 (K2)
//   v    : rows x (Hkv·2D)  group g owns columns [2gD, 2gD + 2D)
//   o    : rows x (H·2D)    head h owns columns [2hD, 2hD + 2D)
//   head h uses group g = h / (H / Hkv) for K1, K2 and V.
// Weights are (out, in) like torch.nn.Linear; linear() computes y = x·Wᵀ.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

namespace diffvk::ref {

// ---------------------------------------------------------------- shapes

struct AttnShape {
  int E = 0;    // model width
  int H = 0;    // differential heads
  int Hkv = 0;  // key/value groups
  int D = 0;    // width of one Q/K sub-head = E / H / 2

  int n_rep() const { return H / Hkv; }
  int q_width() const { return 2 * H * D; }  // = E
  int k_width() const { return 2 * Hkv * D; }
  int v_width() const { return Hkv * 2 * D; }
  int o_width() const { return H * 2 * D; }  // = E
};

// Builds the shape with D = E / H / 2, validating E % (2H) == 0, H % Hkv == 0,
// D even (RoPE rotates pairs) and all sizes positive. Throws std::invalid_argument.
AttnShape make_shape(int E, int H, int Hkv);
// Throws std::invalid_argument unless `s` is what make_shape(s.E, s.H, s.Hkv) returns.
void validate(const AttnShape& s);

// ---------------------------------------------------------------- weights

struct AttnWeights {
  std::vector<double> wq;                  // (E, E)
  std::vector<double> wk;                  // (2·Hkv·D, E)
  std::vector<double> wv;                  // (Hkv·2D, E)
  std::vector<double> wo;                  // (E, H·2D)
  std::vector<double> lq1, lk1, lq2, lk2;  // (D,) each
  std::vector<double> subln;               // (2D,)
};

// Throws std::invalid_argument if any tensor has the wrong number of elements.
void validate(const AttnShape& s, const AttnWeights& w);

// Deterministic pseudo-random data (std::mt19937_64 + Box–Muller written out here,
// so the numbers are identical with every C++ standard library).
//   projections: normal(0, 1/sqrt(in)); λ vectors: normal(0, 0.1);
//   subln: 1 + normal(0, 0.1).
AttnWeights random_weights(const AttnShape& s, std::uint64_t seed);
// `count` values drawn from normal(0, stddev), same generator as random_weights.
std::vector<double> random_normal(std::size_t count, std::uint64_t seed, double stddev = 1.0);

// Every value rounded to the nearest float / IEEE half (round-to-nearest-even;
// half saturates to ±inf like a conversion would). Use these to give the reference
// the same weights a float32 / float16 GPU path sees.
double round_to_f32(double x);
double round_to_f16(double x);
std::vector<double> round_to_f32(const std::vector<double>& v);
std::vector<double> round_to_f16(const std::vector<double>& v);
AttnWeights round_to_f32(const AttnWeights& w);
AttnWeights round_to_f16(const AttnWeights& w);

// ---------------------------------------------------------------- pieces

// λ_init = 0.8 − 0.6·exp(−0.3·depth)
double lambda_init(int depth);
// λ = exp(λq1·λk1) − exp(λq2·λk2) + λ_init(depth). Checks the vectors have D entries.
double lambda_value(const AttnWeights& w, int D, int depth);

// Interleaved (GPT-J) RoPE of one D-wide sub-head at absolute position `pos`, in place.
void rope(double* x, int D, int pos, double theta);
// RoPE of every D-wide sub-head of `rows` rows of width n_sub·D; row r is at position pos0 + r.
void rope_rows(std::vector<double>& t, int rows, int n_sub, int D, int pos0, double theta);

// y = x·Wᵀ; x is rows x in, w is (out, in), y is rows x out.
std::vector<double> linear(const std::vector<double>& x, int rows, int in, const std::vector<double>& w, int out);

// The three projections followed by RoPE on q and k (v is not rotated).
// x holds S rows at positions pos0 .. pos0+S-1.
struct QKV {
  std::vector<double> q;  // S x (2H·D), roped
  std::vector<double> k;  // S x (2Hkv·D), roped
  std::vector<double> v;  // S x (Hkv·2D)
};
QKV project_qkv(const AttnShape& s, const AttnWeights& w, double rope_theta, const std::vector<double>& x, int S,
                int pos0 = 0);

// Core attention on already projected & roped tensors.
//   q: S x (2H·D), k: T x (2Hkv·D), v: T x (Hkv·2D).
// Query row i sits at absolute position q_pos0 + i, key j at position j; key j is
// visible iff j <= q_pos0 + i (causal) and, with window > 0 (sliding-window attention), j > q_pos0 + i − window:
// a query sees its last `window` keys, itself included. Requires q_pos0 >= 0, q_pos0 + S <= T and window >= 0
// (keys after the last query's position are allowed and are simply masked).
// Returns S x (H·2D): per head O = A1·V − λ·A2·V (BEFORE the headwise norm).
std::vector<double> diff_attention(const std::vector<double>& q, const std::vector<double>& k,
                                   const std::vector<double>& v, int S, int T, int H, int Hkv, int D, double lambda,
                                   int q_pos0, int window = 0);

// One (query row, head) of diff_attention on raw rows: o (2D values, overwritten) =
// Σ_{j < n_keys} (A1[j] − λ·A2[j])·V[j], before the norm. q: the head's Q1 | Q2 (2D values); key j:
// K1 | K2 at k + j·k_stride, V at v + j·v_stride (2D values each). diff_attention runs it for every
// row and head; the benchmark's output check (bench/check.cpp) for sampled rows of a KV cache
// (the float overload: the exactly stored values of its inputs, widened without rounding).
void diff_attention_row(const double* q, const double* k, std::size_t k_stride, const double* v, std::size_t v_stride,
                        int n_keys, int D, double lambda, double* o);
void diff_attention_row(const float* q, const float* k, std::size_t k_stride, const float* v, std::size_t v_stride,
                        int n_keys, int D, double lambda, double* o);

// Headwise RMSNorm of one head in place: o (2D values) ← o / sqrt(mean(o²) + eps) ⊙ subln · gain,
// gain = 1 − λ_init (head_rmsnorm runs it for every row and head).
void head_rmsnorm_row(double* o, int D, const double* subln, double gain, double eps = 1e-5);

// Headwise RMSNorm: per row and head, o / sqrt(mean over the 2D values of o² + eps)
// ⊙ subln ⊙ (1 − λ_init). In/out: rows x (H·2D).
std::vector<double> head_rmsnorm(const std::vector<double>& o, int rows, int H, int D, const std::vector<double>& subln,
                                 double lambda_init, double eps = 1e-5);

// ---------------------------------------------------------------- whole layer

// Roped K rows and (unrotated) V rows for positions 0 .. len-1.
struct KVCache {
  std::vector<double> k;  // len x (2Hkv·D)
  std::vector<double> v;  // len x (Hkv·2D)
  int len = 0;
  // Applied in place to every appended cache row of one KV head (its 2D values, K after RoPE, and V): the
  // model of a quantized KV cache (the tests round through Q8_0 here). Empty: the cache is exact.
  std::function<void(double* row, int n)> round_row;
};

// One MultiheadDiffAttn layer: y = out_proj(head_rmsnorm(diff_attention(...))).
// x is S x E at positions pos0 .. pos0+S-1. Without a cache pos0 must be 0 (the
// keys are this call's own rows). With a cache, cache->len must equal pos0; the
// cache holds the keys/values of positions 0 .. pos0-1 and is extended by this
// call, so prefill-then-decode equals one long prefill. Returns S x E.
std::vector<double> layer_forward(const AttnShape& s, const AttnWeights& w, int depth, double rope_theta,
                                  const std::vector<double>& x, int S, int pos0 = 0, KVCache* cache = nullptr);

// ---------------------------------------------------------------- comparison

// Error of `got` against a reference, in the terms docs/maths.md's tolerances use.
struct ErrorStats {
  double max_abs_err = 0;  // max |got − ref|
  double max_abs_ref = 0;  // max |ref|
  double nmse = 0;         // Σ(got − ref)² / Σ ref²  (0 if both are all zero)
  bool finite = true;      // every value of `got` is finite
};
ErrorStats compare(const std::vector<double>& got, const std::vector<double>& ref);
ErrorStats compare(const std::vector<float>& got, const std::vector<double>& ref);

std::vector<float> to_float(const std::vector<double>& v);
std::vector<double> to_double(const std::vector<float>& v);

}  // namespace diffvk::ref
