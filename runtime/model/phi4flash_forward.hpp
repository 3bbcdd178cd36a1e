// The Phi-4-mini-flash (phi4flash, SambaY) forward pass of a whole prompt on a Device: the checkpoint's weights
// uploaded, the states (Mamba conv and scan states, a ring of K/V rows per sliding-window layer, the shared K/V
// cache of the full-attention layer) allocated, and one program per chunk size built from the SambaY recipe
// (recipe_sambay.hpp), planned by the graph planner (the three outputs' programs share one arena) and recorded once:
// every row's logits (every row runs every layer), or YOCO's last row only. Not wired into Model::load or Session
// yet.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "model/phi4flash_checkpoint.hpp"
#include "vk/gpu.hpp"

namespace diffvk {

struct Phi4FlashForwardOptions {
  uint32_t max_positions = 0;  // the longest prompt (the shared cache's rows); 0: max_position_embeddings
  // Rows per program (prefill chunk); 0: max_positions (a prompt runs as one program). A sliding-window layer's
  // ring holds sliding_window + chunk − 1 rows (the attention's rule: a chunk's rows are appended before it
  // attends), so a prompt longer than that wraps its rings.
  uint32_t chunk = 0;
  uint64_t staging_bytes = 16ull << 20;  // weight upload slice (WeightStore::upload)
};

class Phi4FlashForward {
 public:
  // Uploads every tensor of `ck` in the device's storage type (quantized GGUF tensors dequantized), the linears'
  // biases, A_log and D as float32, and plans the programs. `ck` must outlive the load call only.
  // invalid_argument for max_positions past max_position_embeddings or a zero chunk after clamping.
  static std::unique_ptr<Phi4FlashForward> load(Device& device, const Phi4FlashCheckpoint& ck,
                                                const Phi4FlashForwardOptions& options = {});
  ~Phi4FlashForward();

  // Logits (tokens.size() x vocab, float32, row-major) of every row of `tokens`, a fresh sequence from position 0
  // (the states are reset first), in chunks of chunk() rows. invalid_argument for an empty prompt or a token id out
  // of the vocabulary; context_overflow past max_positions().
  std::vector<float> prompt(const std::vector<int32_t>& tokens);
  // YOCO (docs/phi4flash.md): the logits of the last row only (vocab floats). Every row runs layers 0 … L/2 and
  // the full-attention layer's K/V append; the last row alone the rest (that layer's attention and MLP, the
  // cross-decoder) and the head. Same errors as prompt().
  std::vector<float> prompt_last(const std::vector<int32_t>& tokens);

  uint32_t chunk() const;
  uint32_t max_positions() const;
  uint32_t ring_rows() const;  // rows of each sliding-window layer's ring
  uint32_t vocab() const;
  // The plan of the chunk-row programs (tensor lifetimes and placements, as `diffvk plan` prints them).
  std::string describe_plan() const;
  // Test hook: fills the intermediates' arena and the K/V caches with `word` (e.g. NaN poison): prompt() must
  // read none of it before writing it (it resets only the Mamba states).
  void fill_for_testing(uint32_t word);

  struct Impl;

 private:
  explicit Phi4FlashForward(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace diffvk
