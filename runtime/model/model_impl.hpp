// Model::Impl: what a loaded model holds (model_load.cpp fills it; session.cpp records from it).
#pragma once
#include <algorithm>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "diffvk/model.hpp"
#include "model/model_kernels.hpp"
#include "model/phi4flash_forward.hpp"
#include "model/weight_store.hpp"

namespace diffvk {

// Largest device-local heap (where MemoryDomain::device buffers live), else the largest heap.
inline uint64_t device_heap_bytes(const DeviceCaps& c) {
  uint64_t local = 0, any = 0;
  for (const auto& h : c.heaps) {
    any = std::max(any, h.size);
    if (h.device_local) local = std::max(local, h.size);
  }
  return local ? local : any;
}

struct Model::Impl {
  Device* dev = nullptr;
  bool fp16 = false;
  ModelConfig cfg;
  static constexpr size_t kNone = SIZE_MAX;  // a weight the variant does not have (DIFF V2: subln)
  struct Layer {
    // WeightStore indices. DIFF V2: wqkv = [Wq; Wλ; Wk; Wv], wo has H·D inputs, subln = kNone.
    size_t attn_norm = kNone, wqkv = kNone, wo = kNone, subln = kNone, ffn_norm = kNone, wgu = kNone, wdown = kNone;
    double lambda = 0, lambda_init = 0;  // DIFF V1 only (V2's λ is per token)
  };
  std::vector<Layer> layers;
  size_t embed = 0, norm = 0, lm_head = 0;
  std::unique_ptr<WeightStore> weights;
  Buffer rope_table;
  uint64_t per_token_bytes = 0;
  ModelKernels k;          // every pipeline of the config (build_model_kernels)
  std::mutex kv_q8_mutex;  // guards the first build of k's Q8_0 KV-cache kernels (sessions on several threads)
  LoadStats stats;
  // A Phi-4-mini-flash (SambaY) model: its weights and kernels (cfg mirrors its config: format "phi4flash"; the
  // fields above for a Differential Transformer are empty). Its sessions run model/phi4flash_forward.hpp.
  std::shared_ptr<const Phi4FlashWeights> sambay;
};

}  // namespace diffvk
