// The one recipe of a forward pass: the embedding, the attention block, the MLP block and the
// head, each written once as a function that adds nodes to a Graph (graph/graph.hpp). The session's
// prefill chunks and decode steps, the attention-map debug run, DiffAttnLayer (`diffvk layer`) and
// `diffvk bench --model` all build their programs from these functions; nothing else records a layer.
//
// Variants are choices inside the recipe, not new recipes:
//   - rows == 1 (Forward::row): one-row linears (linear_row.comp) with the block norms and SwiGLU fused
//     in as prologues; otherwise a norm kernel, the tiled linear and silu_mul;
//   - the attention path (split-K decode for up to max_decode_rows rows, fused prefill beyond);
//   - the precision (storage type of activations and weights; the residual stream and logits are f32);
//   - the weight format of each linear (add_linear: storage-type rows, or Q8_0 / Q4_0 blocks);
//   - an attention-map tap (debug) on one layer.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "graph/graph.hpp"
#include "model/model_kernels.hpp"
#include "model/weight_store.hpp"

namespace diffvk {

// What every block of one forward pass shares.
struct Forward {
  Graph& g;
  const ModelKernels& k;
  bool fp16 = false;
  uint32_t rows = 0;  // token rows of this program
  bool row = false;   // rows == 1: one-row linears with fused prologues
  TensorRef pos;      // external: 4-byte uint position of the first row (read at run time)
  // external: the split-K attention's arrival counters (attn_sync_bytes), zeroed once by their owner and
  // shared by every attention node of the pass (each dispatch leaves them zero; AttnSplitScratch).
  TensorRef attn_sync;
  KvFormat kv = KvFormat::storage;  // the KV caches' format (q8_0: ModelKernels::rope_q8 / attn_q8)
  ElemType storage() const { return fp16 ? ElemType::f16 : ElemType::f32; }
  // How a kernel reads tensor t: a float32 tensor on an fp16 device (the residual stream, the logits) is
  // Elem::f32; everything else is the storage type (on an fp32 device, float32 is the storage type).
  Elem elem(TensorRef t) const { return fp16 && g.at(t).dtype == ElemType::f32 ? Elem::f32 : Elem::storage; }
};

// A linear's weight (out x in, torch layout), bound as one graph tensor per row part (one part unless the
// tensor exceeds a storage binding; only the embedding and lm_head may, see Model::load). format f16: rows
// in the storage type (fp16 or fp32); q8_0 / q4_0: each part is one range in the device layout
// of ops/linear_quant.hpp (its fp16 scale array, then its quant array), bound as bytes.
struct LinearWeight {
  std::string name;  // the bound tensor's name (scratch tensors derived from it keep names stable)
  uint32_t in = 0, out = 0;
  QuantType format = QuantType::f16;
  struct Part {
    uint32_t row0 = 0, rows = 0;
    TensorRef t;
  };
  std::vector<Part> parts;
  TensorRef bias;  // optional: `out` float32 values added before the residual (SambaY's Wqkv, out_proj, dt_proj)
};
LinearWeight bind_linear(Forward& f, const std::string& name, uint32_t in, const std::vector<WeightPart>& parts,
                         QuantType format = QuantType::f16);
TensorRef bind_vector(Forward& f, const std::string& name, uint32_t n, BufferRange range);  // a norm weight
// A float32 vector whatever the storage type (a linear's bias; SambaY's A_log and D).
TensorRef bind_f32(Forward& f, const std::string& name, std::vector<uint64_t> shape, BufferRange range);

// The attention-map tap of a debug run: softmaxes of heads head0 … head0 + heads − 1 of a T-token prompt
// (and DIFF V2's λ rows): `out` holds AttnProbsKernel::out_bytes(heads, T, v2).
struct MapTap {
  uint32_t layer = 0, head0 = 0, heads = 0, T = 0;
  BufferRange out;
};

struct AttnShape {
  uint32_t E = 0, H = 0, Hkv = 0, D = 0;
  uint32_t capacity = 0;    // KV-cache rows
  uint32_t chunk = 0;       // the most rows a program of this plan runs (sizes the split-K scratch)
  float eps = 1e-5f;        // block RMSNorm (pre-attention norm)
  float subln_eps = 1e-5f;  // headwise norm
  // Named construction: AttnShape::heads(E, H, Hkv, D).cache(capacity, chunk).norms(eps, subln_eps).
  static AttnShape heads(uint32_t hidden, uint32_t q_heads, uint32_t kv_heads, uint32_t head_dim) {
    AttnShape s;
    s.E = hidden;
    s.H = q_heads;
    s.Hkv = kv_heads;
    s.D = head_dim;
    return s;
  }
  AttnShape cache(uint32_t rows, uint32_t max_chunk) const {
    AttnShape s = *this;
    s.capacity = rows;
    s.chunk = max_chunk;
    return s;
  }
  AttnShape norms(float block_eps, float headwise_eps) const {
    AttnShape s = *this;
    s.eps = block_eps;
    s.subln_eps = headwise_eps;
    return s;
  }
};

// DIFF V1 (v2 = false): wqkv = [Wq; Wk; Wv] (E + 4·Hkv·D rows, E = 2·H·D), the K/V caches [Hkv][capacity][2D],
// the headwise norm. DIFF V2 (v2 = true, docs/maths.md "DIFF V2"): wqkv = [Wq (2H·D); Wλ (H); Wk (Hkv·D);
// Wv (Hkv·D)], the caches [Hkv][capacity][D], wo of H·D inputs; no subln, no λ scalar (λ is per token).
struct AttnBlock {
  std::string prefix;  // tensor names: prefix + "qkv", …
  TensorRef norm;      // pre-attention RMSNorm weight (E); invalid: none (a bare layer)
  bool v2 = false;
  LinearWeight wqkv, wo;
  TensorRef subln;  // headwise norm weight (2D); DIFF V1 only
  double lambda = 0, lambda_init = 0;
  TensorRef k_cache, v_cache, rope_table;
  const MapTap* tap = nullptr;  // this layer's tap, if any
};

struct MlpBlock {
  std::string prefix;
  TensorRef norm;    // post-attention RMSNorm weight (E)
  TensorRef norm_b;  // valid: the norm is a LayerNorm with this bias (SambaY), never fused into gate_up
  LinearWeight wgu, wdown;
  uint32_t I = 0;
  float eps = 1e-5f;
};

// Split-K scratch of the attention op (bytes of partials and of statistics), enough for every program a
// plan covers: decode rows 1 … min(8, chunk) over the whole capacity, and prefill chunks on loop-limited devices.
struct AttnScratch {
  uint64_t part = 0, stat = 0;
};
AttnScratch attn_scratch(const DiffAttnKernel& attn, const AttnShape& s);
// The K/V append's shape for f.rows rows of an attention of shape s (rows, heads, D, the cache's rows; pos0 0: the
// position is Forward::pos, read at run time). The caller sets the variant's fields (kheads, lam, ring, rope).
RopeKvParams rope_kv_params(const Forward& f, const AttnShape& s);
// Bytes of Forward::attn_sync for every program of a plan (up to s.chunk rows; v2: the calls count 2H query heads).
uint64_t attn_sync_bytes(const AttnShape& s, bool v2);

// x[r] = embedding[tokens[r]]: returns the f32 residual stream (rows x E), named `x_name`.
TensorRef add_embed(Forward& f, TensorRef tokens, const LinearWeight& table, const std::string& x_name);

// y = x·Wᵀ (+ w.bias) over w's row parts (+ y's old value when `residual`: in place). Without `row`, the tiled
// matrix path over f.rows rows, row r of x at r·x_stride (0: w.in; e.g. the first columns of a wider row);
// with it, one row (linear_row.comp) with an optional fused prologue, reading the first row of x. A quantized
// w: the one-row path reads the blocks directly (QuantRowKernel); the matrix path dequantizes in registers.
// A bias needs a weight of one part (a part's slice of it would be an unaligned binding).
enum class Prologue : uint32_t { none = 0, rmsnorm = 1, silu_mul = 2 };
struct RowLinear {
  Prologue pro = Prologue::none;
  TensorRef norm_w;  // rmsnorm only
  float eps = 1e-5f;
};
void add_linear(Forward& f, const std::string& label, TensorRef x, const LinearWeight& w, TensorRef y, bool residual,
                const RowLinear* row = nullptr, uint32_t x_stride = 0);

// y = RMSNorm(x) ⊙ w (b invalid) or LayerNorm(x) ⊙ w + b (b valid: SambaY's LayerNorm with bias), rows of E
// (`rows` of them; 0: the pass's), into a new storage-type tensor `name`.
TensorRef add_norm(Forward& f, const std::string& name, TensorRef x, TensorRef w, TensorRef b, uint32_t E, float eps,
                   uint32_t rows = 0);

// The differential attention op (DIFF V1 with the headwise norm, or V2) over caches the q rows' keys were already
// appended to: o (rows x o_stride, a new storage-type tensor prefix + "attn.out") with the split-K scratch sized
// by attn_scratch(s). Used by add_attention_block and by SambaY's attention (recipe_sambay.hpp).
struct AttnOp {
  bool v2 = false;
  double lambda = 0, lambda_init = 0;  // DIFF V1
  uint32_t q_stride = 0, o_stride = 0;
  uint32_t window = 0;  // sliding window (AttnCall::window); 0: every key up to the row's position
  bool ring = false;    // the caches are a ring of s.capacity rows (AttnCall::ring)
  // A piece of the pass: query rows row0 … row0 + rows − 1 (rows 0: every row of the pass), at positions
  // Forward::pos + row0 …, written into those rows of `out` (invalid: a new tensor prefix + "attn.out" of every row).
  // The split-K scratch is shared by the pieces of one prefix.
  uint32_t row0 = 0, rows = 0;
  TensorRef out;
};
TensorRef add_attention_op(Forward& f, const std::string& prefix, TensorRef q, TensorRef k_cache, TensorRef v_cache,
                           TensorRef subln, const AttnShape& s, const AttnOp& op);

// The differential attention block (DIFF V1 or V2: AttnBlock::v2). With a norm weight: x is the f32 residual stream and
// the block adds its output into x (returns x). Without one (DiffAttnLayer): x is a storage-type activation and the
// output is a new storage-type tensor `y_name` (role `y_role`), which is returned.
TensorRef add_attention_block(Forward& f, TensorRef x, const AttnShape& s, const AttnBlock& w,
                              const std::string& y_name = "y", TensorRole y_role = TensorRole::output);

// x += down(silu(gate) ⊙ up) of the normed x (SwiGLU MLP).
void add_mlp_block(Forward& f, TensorRef x, uint32_t E, const MlpBlock& w);

// What the head computes: logits of every row, of the last row, nothing, or the last row's logits and a
// token sampled on the device (writes `picked`, reads the sampling parameters `params`).
enum class HeadOut { all, last, none, sample };
const char* head_out_name(HeadOut o);
struct Head {
  TensorRef norm;    // final RMSNorm weight
  TensorRef norm_b;  // valid: the final norm is a LayerNorm with this bias (SambaY; HeadOut::all only)
  LinearWeight lm_head;
  float eps = 1e-5f;
  uint32_t E = 0, vocab = 0;
  TensorRef params, picked;  // HeadOut::sample only (external)
};
// Returns the f32 logits tensor (output role), or an invalid ref for HeadOut::none.
TensorRef add_head(Forward& f, TensorRef x, const Head& h, HeadOut out);
// Device sampling of one row of float32 logits (vocab V): params {position, u, temperature, top_k} -> picked (u32).
void add_sample(Forward& f, TensorRef logits, TensorRef params, TensorRef picked, uint32_t V);

}  // namespace diffvk
