// Debug kernel of the attention maps (shaders/attn_probs.comp): the two causal softmax matrices of each
// output head of one layer, materialised (DIFF V1: A1, A2 of the differential pair; DIFF V2: the maps of
// query heads 2h and 2h + 1, and λ per query row). Not on the inference path; Session::attention_maps records
// it after the layer's RoPE + KV append.
#pragma once
#include "ops/kernel_options.hpp"

namespace diffvk {

// Largest map this kernel draws (T x T floats per head and softmax). The public limit
// (diffvk/model.hpp kAttentionMapMaxTokens, model layer) is checked equal to it in model_kernels.cpp.
constexpr uint32_t kAttnProbsMaxTokens = 256;

struct AttnProbsParams {
  uint32_t rows = 0, H = 0, Hkv = 0, D = 0, capacity = 0;  // H: output heads (V2: 2H query heads), D: head width
  uint32_t T = 0;                 // map size: positions 0 … T − 1 (T <= kAttnProbsMaxTokens)
  uint32_t pos0 = 0;              // position of q's first row (plus the dynamic position, when given)
  uint32_t head0 = 0, heads = 0;  // heads head0 … head0 + heads − 1
  bool v2 = false;                // DIFF V2's layouts (docs/maths.md "DIFF V2"; see record())
};

class AttnProbsKernel {
 public:
  // Declares the V1 and V2 pipelines (LazyPipeline): each compiles when a program that records it is finalized.
  AttnProbsKernel(Device& device, KernelOptions options);
  ~AttnProbsKernel();
  // Bytes of the output for `heads` heads of T tokens: [heads][2][T][T] float32, then for V2 λ [heads][T].
  static uint64_t out_bytes(uint32_t heads, uint32_t T, bool v2);
  // DIFF V1: q rows x 2H·D (roped; storage type), k_cache [Hkv][capacity][2D] (storage type).
  // DIFF V2: q rows x (2H·D + H) (the 2H roped query heads of D, then the H λ logits, as rope_kv writes them),
  //   k_cache [Hkv][capacity][D]; head h's P1 / P2 are the maps of query heads 2h / 2h + 1 over KV head
  //   h / (H / Hkv), and λ[hh][p] = sigmoid(logit) in fp32 (the attention's epilogue formula).
  // dyn_pos: 4 bytes (uint, added to pos0; the host keeps pos0 + dyn + rows <= T). out: float32 [heads][2][T][T]
  // (P1 then P2 per head; row = query position, column = key position, 0 past the query's position), then
  // for V2 λ [heads][T] (out_bytes). Writes the rows (and λ entries) at positions pos0 + dyn … pos0 + dyn + rows − 1
  // only. Throws invalid_argument for bad shapes (Hkv must divide H), T over kAttnProbsMaxTokens, buffers too
  // small or an output overlapping an input.
  void record(Program& program, BufferRange q, BufferRange k_cache, BufferRange dyn_pos, BufferRange out,
              const AttnProbsParams& params) const;

 private:
  Device& device_;
  uint32_t wg_;
  std::unique_ptr<LazyPipeline> pipeline_;
  std::unique_ptr<LazyPipeline> v2_;
};

}  // namespace diffvk
