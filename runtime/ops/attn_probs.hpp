// Debug kernel of the attention maps (shaders/attn_probs.comp): the two causal softmax matrices of
// one layer, materialised. Not on the inference path; Session::attention_maps records it after the
// layer's RoPE + KV append.
#pragma once
#include "ops/kernel_options.hpp"

namespace diffvk {

// Largest map this kernel draws (T x T floats per head and softmax). The public limit
// (diffvk/model.hpp kAttentionMapMaxTokens, model layer) is checked equal to it in model_kernels.cpp.
constexpr uint32_t kAttnProbsMaxTokens = 256;

struct AttnProbsParams {
  uint32_t rows = 0, H = 0, Hkv = 0, D = 0, capacity = 0;
  uint32_t T = 0;     // map size: positions 0 … T − 1 (T <= kAttnProbsMaxTokens)
  uint32_t pos0 = 0;  // position of q's first row (plus the dynamic position, when given)
  uint32_t head0 = 0, heads = 0;  // heads head0 … head0 + heads − 1
};

class AttnProbsKernel {
 public:
  AttnProbsKernel(Device& device, KernelOptions options);
  // q: rows x 2H·D (roped; storage type), k_cache: [Hkv][capacity][2D] (storage type), dyn_pos: 4 bytes
  // (uint, added to pos0; the host keeps pos0 + dyn + rows <= T), out: float32 [heads][2][T][T]
  // (P1 then P2 per head; row = query position, column = key position, 0 past the query's position).
  // Writes the rows at positions pos0 + dyn … pos0 + dyn + rows − 1 only. Throws invalid_argument for
  // bad shapes, T over kAttnProbsMaxTokens, buffers too small or an output overlapping an input.
  void record(Program& program, BufferRange q, BufferRange k_cache, BufferRange dyn_pos, BufferRange out,
              const AttnProbsParams& params) const;

 private:
  Device& device_;
  uint32_t wg_;
  std::unique_ptr<Pipeline> pipeline_;
};

}  // namespace diffvk
