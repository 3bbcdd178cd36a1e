// diffvk — float64 CPU reference of the whole Phi-4-mini-flash model (model_type "phi4flash", SambaY: Mamba-1,
// sliding-window and full differential attention, Gated Memory Units, a YOCO cross-decoder). docs/maths.md
// "Phi-4-mini-flash (SambaY)" states the maths and the ports it was checked against; docs/phi4flash.md the layer
// plan. Plain loops, double precision, standard library only; built from ssm_ref.hpp (conv1d, scan, GMU gate,
// LayerNorm) and diff_attn_ref.hpp (diff_attention_row, head_rmsnorm_row, lambda_init, linear). No RoPE.
//
// Three forms, which the tests (tests/reference/test_phi4flash_ref.cpp) check against each other and against an
// independent PyTorch implementation (tests/python/make_phi4flash_fixture.py):
//  - full sequence: every token at once from position 0, the sliding window a mask, zero initial states;
//  - recurrent: chunks (one token: decode) at the state's position, carrying the conv and scan states of the
//    Mamba layers, a window-sized ring KV cache per sliding layer, the growing shared cache of the full-attention
//    layer (the cross-decoder's keys and values); the memory of layer L/2 is per token and kept nowhere;
//  - YOCO: the recurrent form asked for the logits of some rows only: the other rows run the self-decoder alone
//    (layers 0 .. L/2, and the K/V projection of layer L/2+1, which fills the shared cache).
//
// Layouts (row-major, one row per token), diffvk's DIFF V1 layout, which is the checkpoint's own (no permutation):
//   q: T x (2H·D), head h owns sub-heads 2h (Q1) and 2h+1 (Q2) = the checkpoint's query heads 2h, 2h+1;
//   k: T x (2Hkv·D), group g owns K1 | K2 = the checkpoint's KV heads 2g, 2g+1; v likewise (V = V1 | V2);
//   head h reads group g = h / (H / Hkv). H = num_attention_heads / 2, Hkv = num_key_value_heads / 2, D = E / (2H).
// Weights are (out, in) like torch.nn.Linear; conv_w is the checkpoint's conv1d.weight (C, 1, K) without its
// middle axis.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

namespace diffvk::ref {

enum class SambaYKind {
  mamba,         // even i < L/2: Mamba-1
  memory_mamba,  // i = L/2: Mamba-1 whose pre-gate output is the memory m
  swa,           // odd i < L/2: sliding-window differential attention
  full,          // i = L/2 + 1: full differential attention; its K/V are the shared cache
  gmu,           // even i > L/2: Gated Memory Unit out_proj(silu(in_proj(h)) · m)
  cross,         // odd i > L/2 + 1: queries only, over the shared cache
};

struct SambaYShape {
  int vocab = 0;
  int E = 0;        // hidden_size
  int L = 0;        // num_hidden_layers (a multiple of 4)
  int n_heads = 0;  // num_attention_heads: query sub-heads (even)
  int n_kv = 0;     // num_key_value_heads: KV sub-heads (even, divides n_heads)
  int I = 0;        // intermediate_size
  int d_inner = 0;  // mamba_expand · E
  int d_state = 0;
  int d_conv = 0;  // K
  int dt_rank = 0;
  int window = 0;     // sliding_window: keys i-window+1 .. i
  double eps = 1e-5;  // layer_norm_eps (the three LayerNorms; the headwise RMSNorm has 1e-5)

  int D() const { return E / n_heads; }
  int H() const { return n_heads / 2; }
  int Hkv() const { return n_kv / 2; }
  int q_width() const { return n_heads * D(); }
  int kv_width() const { return n_kv * D(); }
  SambaYKind kind(int layer) const;
  int memory_layer() const { return L / 2; }
  int shared_kv_layer() const { return L / 2 + 1; }
};
// Throws std::invalid_argument unless every size is positive and consistent.
void validate(const SambaYShape& s);

struct SambaYLayer {
  std::vector<double> ln1_w, ln1_b, ln2_w, ln2_b;  // input_layernorm, post_attention_layernorm (E each)
  std::vector<double> fc1, fc2;                    // mlp.fc1 (2I, E) = [gate | up], mlp.fc2 (E, I)
  // swa, full, cross: attn.Wqkv (rows, E) + bias, rows = q_width + 2·kv_width (cross: q_width);
  // attn.out_proj (E, q_width) + bias; attn.inner_cross_attn.lambda_* (D each), .subln.weight (2D).
  std::vector<double> wqkv, wqkv_b, wo, wo_b, lq1, lk1, lq2, lk2, subln;
  // mamba, memory_mamba: attn.in_proj (2·d_inner, E) = [x | z], conv1d (d_inner x K) + bias, x_proj
  // (dt_rank + 2·d_state, d_inner) = [dt | B | C], dt_proj (d_inner, dt_rank) + bias, A_log (d_inner, d_state),
  // D (d_inner), out_proj (E, d_inner). gmu: in_proj (d_inner, E), out_proj (E, d_inner).
  std::vector<double> in_proj, conv_w, conv_b, x_proj, dt_w, dt_b, A_log, Dskip, out_proj;
};

struct SambaYWeights {
  std::vector<double> embed;             // (vocab, E), also the tied lm_head
  std::vector<double> final_w, final_b;  // final_layernorm
  std::vector<SambaYLayer> layers;
};
// Throws std::invalid_argument naming the first tensor of the wrong size (and unused ones that are not empty).
void validate(const SambaYShape& s, const SambaYWeights& w);
// Deterministic random weights (diff_attn_ref.hpp's generator) of a sane scale: a model whose logits depend on
// every piece (Mamba dt in about [1e-3, 0.5], A = -(1..S) perturbed, windows that matter).
SambaYWeights sambay_random_weights(const SambaYShape& s, std::uint64_t seed);

// Every value rounded to float / IEEE half (diff_attn_ref.hpp's rounding): the weights a float32 / float16 GPU
// path holds, for the reference to run on.
SambaYWeights round_to_f32(const SambaYWeights& w);
SambaYWeights round_to_f16(const SambaYWeights& w);

// Where the full form keeps its activations: float64 throughout (fp16 false), or each activation an fp16 device
// stores in its storage type rounded to IEEE half there, as the device's graph (runtime/model/recipe_sambay.*)
// stores it: every LayerNorm's output; the outputs of in_proj ([x | z]), the conv, x_proj ([dt | B | C]), dt_proj
// (its bias included), the scan (gated) and the memory; the GMU's in_proj output and gate; Wqkv's q, k, v (so the
// caches too) and the attention output; the MLP's [gate | up] and its SwiGLU, except where a one-row pass fuses the
// SwiGLU into fc2 (`fused_from`). The residual stream, the recurrent states and the logits are not rounded (float32
// on the device). What fp16 activation storage costs, apart from the kernels' arithmetic: docs/phi4flash.md.
struct ActivationStorage {
  bool fp16 = false;
  // fused_from[t] (one per token, or empty: none): the first layer whose MLP runs token t in a one-row pass (0: a
  // decode step or a one-row chunk; L/2 + 1: YOCO's last row), which stores no SwiGLU output; L or more: none.
  std::vector<int> fused_from;
  // Given: each K and V row the caches hold (kv_width values of every KV group, after the storage rounding) is
  // rounded through it, as a Q8_0 KV cache quantizes them at append (the tests' Q8_0 quantize-dequantize).
  std::function<void(double* row, int n)> kv_round;
};

// The full-sequence form: logits (T x vocab) of every position of `tokens`, from position 0.
std::vector<double> sambay_forward_full(const SambaYShape& s, const SambaYWeights& w, const std::vector<int>& tokens,
                                        const ActivationStorage& storage = {});

// What the recurrent form carries between calls. A value: a copy is a snapshot to resume from (rewind).
struct SambaYState {
  int pos = 0;                            // tokens consumed
  std::vector<std::vector<double>> conv;  // per layer: (K-1) x d_inner, oldest first (Mamba layers; else empty)
  std::vector<std::vector<double>> scan;  // per layer: d_inner x d_state (Mamba layers; else empty)
  std::vector<std::vector<double>> ring_k, ring_v;  // per layer: window x kv_width, slot = position % window (swa)
  std::vector<double> shared_k, shared_v;           // pos x kv_width: layer L/2+1's K and V, every position
};
SambaYState sambay_new_state(const SambaYShape& s);

// The recurrent form: runs `tokens` at positions state.pos .. state.pos + T - 1 and advances the state. Returns
// the logits of the rows `logit_rows` (indices into tokens, ascending, distinct), logit_rows.size() x vocab;
// `logit_rows` null: every row, and every row runs every layer. Given, the YOCO form: the rows not asked stop
// after layer L/2+1's K/V projection (the cross-decoder, layer L/2+1's attention output included, runs only for
// the asked rows). The state after the call is the same either way.
std::vector<double> sambay_forward(const SambaYShape& s, const SambaYWeights& w, SambaYState& state,
                                   const std::vector<int>& tokens, const std::vector<int>* logit_rows = nullptr);

}  // namespace diffvk::ref
