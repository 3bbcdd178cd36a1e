// diffvk — one MultiheadDiffAttn layer (docs/maths.md) on the GPU: fused QKV projection, RoPE + KV-cache
// append, dual-softmax attention with the headwise norm, out_proj. Positions continue across
// forward() calls (KV cache) until reset().
// Also the authors' DIFF V2 layer (MultiheadFlashDiffV2, docs/maths.md "DIFF V2"), recognised by its tensor
// names: one softmax per query head (2H of them), λ = sigmoid(x·Wλᵀ) per token, head i = O_2i − λ_i·O_2i+1.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "diffvk/device.hpp"

namespace diffvk {

struct LayerOptions {
  uint32_t num_heads = 0;     // H (differential heads; DIFF V2: output heads, 2H query heads)
  uint32_t num_kv_heads = 0;  // Hkv; 0 = H (DIFF V2: must divide H)
  int depth = 0;              // 0-based layer index (lambda_init; unused by DIFF V2)
  double rope_theta = 10000.0;
  uint32_t max_positions = 2048;  // KV-cache capacity
  uint32_t chunk = 128;           // rows per prefill chunk (longer inputs are processed in chunks)
};

class DiffAttnLayer {
 public:
  // Reads a safetensors file holding exactly the reference module's state_dict names
  // (q_proj.weight, k_proj.weight, v_proj.weight, out_proj.weight, lambda_q1, lambda_k1, lambda_q2,
  // lambda_k2, subln.weight; F32, F16 or BF16). Shapes are checked against H, Hkv and E.
  // A DIFF V2 file (lambda_proj.weight or o_proj.weight present) holds exactly q_proj (2H·D, E), k_proj and
  // v_proj (Hkv·D, E), o_proj (E, H·D) and lambda_proj (H, E) .weight; D is read from q_proj and E need not
  // be H·D. A mixed or inconsistent file is refused with a message naming the tensor.
  static std::unique_ptr<DiffAttnLayer> load(Context& context, const std::string& safetensors_path,
                                             const LayerOptions& options);
  ~DiffAttnLayer();

  // x: S x E row-major float32 at positions position() .. position()+S-1; returns S x E.
  // Throws Error(context_overflow) without touching any state when the cache would overflow.
  std::vector<float> forward(const float* x, uint32_t S);
  void reset();  // empty the KV cache

  uint32_t hidden() const;
  uint32_t position() const;
  double lambda() const;              // lambda computed at load time (DIFF V1; 0 for DIFF V2, where λ is per token)
  double lambda_init() const;         // DIFF V1; 0 for DIFF V2
  bool is_v2() const;                 // a DIFF V2 layer
  uint32_t head_dim() const;          // D
  std::string describe_plan() const;  // the static memory plan of the intermediates

  struct Impl;

 private:
  explicit DiffAttnLayer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace diffvk
