// SambaY's blocks (Phi-4-mini-flash, docs/maths.md "Phi-4-mini-flash (SambaY)"), in the style of the one recipe
// (recipe.hpp): functions that add nodes to a Graph. The MLP (add_mlp_block with MlpBlock::norm_b), the head
// (add_head with Head::norm_b), the embedding and the attention op are recipe.hpp's own; these add the blocks
// SambaY has and a Differential Transformer does not:
//   - add_mamba_block: LayerNorm with bias → in_proj → causal depthwise conv1d (+ bias, SiLU, its rolling state) →
//     x_proj → dt_proj (+ bias; the scan applies softplus) → selective scan with the D skip (its state) → SiLU(z)
//     gate → out_proj, added into the residual stream; the memory layer's pre-gate output is the memory m;
//   - add_gmu_block: x += out_proj(silu(in_proj(LN(x))) · m);
//   - add_sambay_attention_block: LayerNorm with bias → Wqkv (+ bias) → the K/V append without RoPE (a ring of
//     rows for sliding-window layers, the shared cache for the full-attention layer; cross-decoder layers project
//     queries only and append nothing) → differential attention (a window, or every key) → out_proj (+ bias).
// Every block reads the f32 residual stream x and adds its output into it. Variants: f.rows rows of one program at
// the position in f.pos (read at run time); the one-row fused paths are not used (Forward::row must be false).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "model/recipe.hpp"

namespace diffvk {

// The Mamba-1 mixer's sizes: E hidden, C = d_inner, S = d_state, K = d_conv, R = dt_rank.
struct MambaShape {
  uint32_t E = 0, C = 0, S = 0, K = 0, R = 0;
  float eps = 1e-5f;  // the LayerNorm's
};

// What every SambaY mixer block starts with: its tensor-name prefix and its input_layernorm (LayerNorm with bias).
struct SambaNorm {
  std::string prefix;
  TensorRef w, b;
};

// One Mamba layer's tensors. conv_state ((K − 1) x C) and scan_state (C x S) are float32, bound (kv_cache role):
// they persist across programs (zero for a fresh sequence). A_log (C x S) and D (C) are float32 weights, as is
// dt_proj's bias; everything else is the storage type.
struct MambaBlock {
  SambaNorm pre;
  LinearWeight in_proj;      // (2C, E) = [x | z]
  TensorRef conv_w, conv_b;  // C x K, C
  LinearWeight x_proj;       // (R + 2S, C) = [dt | B | Cm]
  LinearWeight dt_proj;      // (C, R) with its bias
  TensorRef A_log, D;
  LinearWeight out_proj;  // (E, C)
  TensorRef conv_state, scan_state;
};
// x += out_proj(y ⊙ silu(z)). With `memory`, also returns the pre-gate y (the D skip included) as a new
// storage-type tensor `memory_name` (T x C): the memory of the GMU layers. Otherwise returns an invalid ref.
TensorRef add_mamba_block(Forward& f, TensorRef x, const MambaShape& s, const MambaBlock& w, bool memory = false,
                          const std::string& memory_name = "memory");

struct GmuBlock {
  SambaNorm pre;
  LinearWeight in_proj;   // (C, E)
  LinearWeight out_proj;  // (E, C)
};
// x += out_proj(silu(in_proj(LN(x))) ⊙ m), m the memory (T x C) of the same rows.
void add_gmu_block(Forward& f, TensorRef x, const MambaShape& s, const GmuBlock& w, TensorRef memory);

// SambaY's differential attention (DIFF V1 maths, no RoPE). The caches are [Hkv][rows][2D] in the storage type.
enum class SambaAttnKind { sliding, full, cross };
struct SambaAttnBlock {
  SambaNorm pre;
  SambaAttnKind kind = SambaAttnKind::full;
  LinearWeight wqkv;  // (q + 2kv, E) = [q | k | v] with its bias; cross: (q, E) with its bias
  LinearWeight wo;    // (E, q) with its bias
  TensorRef subln;    // 2D: the headwise RMSNorm's gain
  double lambda = 0, lambda_init = 0;
  // sliding: this layer's ring (AttnShape::capacity rows, position p at row p mod capacity; capacity >=
  // window + f.rows − 1); full: the shared cache the layer appends to; cross: the shared cache it reads.
  TensorRef k_cache, v_cache;
  uint32_t window = 0;  // sliding only: keys p − window + 1 … p
  // sliding only: a pass of more rows appends and attends `piece` rows at a time (0: every row at once), so that the
  // ring needs window + piece − 1 rows instead of window + chunk − 1 (the projections still run every row at once).
  uint32_t piece = 0;
};
// A SambaY attention layer's row widths (values): the queries (2H·D; also the heads' output) and the fused
// [q | k | v] projection (2H·D + 4·Hkv·D).
inline uint32_t sambay_q_width(const AttnShape& s) { return 2 * s.H * s.D; }
inline uint32_t sambay_qkv_width(const AttnShape& s) { return sambay_q_width(s) + 4 * s.Hkv * s.D; }
// The rows a sliding layer's piece takes (pure): the most, at most `most` and `chunk`, whose rows of every given byte
// width are a multiple of `align` bytes (each piece binds its rows of those tensors at that offset); none: `chunk`
// (no pieces).
uint32_t sambay_piece_rows(uint32_t chunk, uint32_t most, const std::vector<uint64_t>& row_bytes, uint64_t align);
// x += out_proj(attention(...)) + bias. s: E, H (differential heads), Hkv, D, capacity (the cache's rows), chunk
// (the most rows a program of the plan runs), subln_eps.
void add_sambay_attention_block(Forward& f, TensorRef x, const AttnShape& s, const SambaAttnBlock& w, float eps);
// The block's two halves (YOCO splits them at the full-attention layer): the norm, the projection and the K/V
// append, returning the query rows (f.rows x 2H·D, a new tensor prefix + "q"); then the attention of those query
// rows (over the cache's keys up to each row's position) and out_proj, added into x.
TensorRef add_sambay_qkv(Forward& f, TensorRef x, const AttnShape& s, const SambaAttnBlock& w, float eps);
void add_sambay_attention_out(Forward& f, TensorRef x, TensorRef q, const AttnShape& s, const SambaAttnBlock& w);

// YOCO: the last of f.rows rows of the matrix t, copied into a new 1-row tensor `name` of t's type (the rows past
// the full-attention layer's K/V append then run as a one-row pass: a Forward with rows 1 at the last position).
TensorRef add_last_row(Forward& f, TensorRef t, const std::string& name);

}  // namespace diffvk
