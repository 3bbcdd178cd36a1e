// The Phi-4-mini-flash (phi4flash, SambaY) forward pass on a Device, in two parts:
//  - Phi4FlashWeights (upload_phi4flash): the checkpoint's weights on the device and the kernels, shared by every
//    sequence of a model (Model::load keeps one);
//  - Phi4FlashForward: one sequence's states (Mamba conv and scan states, a ring of K/V rows per sliding-window
//    layer, the shared K/V cache of the full-attention layer, a snapshot of the recurrent states) and one program
//    per (rows, output) built from the SambaY recipe (recipe_sambay.hpp), planned by the graph planner (every
//    variant shares one arena) and recorded once. A Session of a phi4flash model holds one.
// Rewind (seek): a recurrent state cannot be cut back. Every run first copies the recurrent states to the snapshot
// (inside its program), so a seek back into the last run restores the snapshot and recomputes the rows between
// (at most one chunk, the self-decoder only); a seek further back recomputes from position 0 (docs/phi4flash.md).
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "model/phi4flash_checkpoint.hpp"
#include "model/recipe.hpp"
#include "ops/kv_format.hpp"
#include "ops/linear.hpp"
#include "vk/gpu.hpp"

namespace diffvk {

struct Phi4FlashWeights;  // phi4flash_forward.cpp

// How upload_phi4flash stores the linears: LoadOptions' fields of the same names.
struct Phi4FlashLoad {
  uint64_t staging_bytes = 16ull << 20;
  // f16: the storage type, and a quantized GGUF's blocks as they are; q8_0 / q4_0: the large linears (in_proj,
  // out_proj, fc1, fc2, Wqkv, the embedding and the head) quantized while they stream in, a width that is not a
  // multiple of 32 left in the storage type (logged); x_proj and dt_proj stay (GGUF stores them F16 too).
  QuantKind weights = QuantKind::f16;
  bool q4_0_head = false;                     // else the head (and a tied embedding) is Q8_0 under q4_0
  const QuantRowPath* decode_path = nullptr;  // forced quantized paths (nullptr: the device's choice)
  const QuantRowPath* prefill_path = nullptr;
};
// Uploads every tensor of `ck`: the linears as `load` says, the other tensors in the device's storage type, the
// linears' biases, A_log and D as float32; builds the kernels. `ck` must outlive the call only.
std::shared_ptr<const Phi4FlashWeights> upload_phi4flash(Device& device, const Phi4FlashCheckpoint& ck,
                                                         const Phi4FlashLoad& load = {});
// The quantized linears' paths ("" without quantized weights) and formats used (e.g. "q8_0", "q8_0/q4_0").
std::string phi4flash_quant_decode(const Phi4FlashWeights& w);
std::string phi4flash_quant_prefill(const Phi4FlashWeights& w);
std::string phi4flash_quant_formats(const Phi4FlashWeights& w);
const Phi4FlashConfig& phi4flash_config(const Phi4FlashWeights& w);
uint64_t phi4flash_weight_bytes(const Phi4FlashWeights& w);     // every weight as stored on the device
uint64_t phi4flash_per_token_bytes(const Phi4FlashWeights& w);  // read per decoded token (one embedding row)
// What makes a saved state belong to a model (session_state.cpp): the config, the precision, each layer's λ and
// the LayerNorm weights' bytes; not the large matrices.
uint64_t phi4flash_fingerprint(const Phi4FlashWeights& w);

struct Phi4FlashForwardOptions {
  uint32_t max_positions = 0;  // the longest sequence (the shared cache's rows); 0: max_position_embeddings
  // Rows per program (prefill chunk); 0: max_positions (a prompt runs as one program). A sliding-window layer
  // appends and attends min(chunk, kMaxDraftTokens + 1) rows at a time and its ring holds sliding_window + that − 1
  // rows (the attention's rule: a piece's rows are appended before it attends), so a longer prompt wraps its rings.
  uint32_t chunk = 0;
  uint64_t staging_bytes = 16ull << 20;  // weight upload slice (load only)
  bool yoco = true;      // false: HeadOut::last and none run every row through every layer (SessionOptions::yoco)
  bool profile = false;  // GPU timestamps between the programs' dispatches (SessionOptions::profile, last_program)
  // The shared cache's and the rings' format (SessionOptions::kv_cache): q8_0 quantizes K and V at append, the
  // attention dequantizes them (invalid_argument where 2·head_dim is not a multiple of 32).
  KvFormat kv = KvFormat::storage;
};

class Phi4FlashForward {
 public:
  // States and programs of one sequence over `weights`. invalid_argument for max_positions past
  // max_position_embeddings; out_of_memory (nothing allocated) when the states and the arena do not fit the heap.
  static std::unique_ptr<Phi4FlashForward> create(std::shared_ptr<const Phi4FlashWeights> weights,
                                                  const Phi4FlashForwardOptions& options = {});
  // upload_phi4flash, then create.
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

  // The sequence step by step (Session). The states hold positions 0 … position()−1.
  // seek: the states after held[0 … n) (held: the sequence's tokens, at least n of them, checked by the caller).
  void seek(const int32_t* held, uint32_t n);
  // `rows` (1 … chunk()) checked tokens at position() (seek first): out all writes rows x vocab floats to logits,
  // last (YOCO) and one row: vocab floats, none: nothing. should_abort is asked between layers (Error cancelled);
  // after any failure the states are unknown and the next seek recomputes them.
  void run(const int32_t* tokens, uint32_t rows, HeadOut out, float* logits,
           const std::function<bool()>& should_abort = {});
  // One checked token at position() (seek first), then device sampling of its logits (shaders/sample_topk.comp):
  // `sample` is {u, temperature (float bits), top_k} as Session::decode_sample checks them. Returns the id.
  uint32_t run_sample(int32_t token, const uint32_t sample[3], const std::function<bool()>& should_abort = {});
  uint32_t position() const;  // UINT32_MAX after a failed run (unknown)
  // The program of the last run() or run_sample() (its timings() with options.profile); nullptr before the first.
  const Program* last_program() const;
  // Saved state at position() = n: the shared cache's rows 0 … n−1, each sliding layer's last min(n, window − 1)
  // positions (in position order; a Q8_0 cache's rows each followed by their scales), every Mamba layer's conv and
  // scan states (float32). Bytes for n positions:
  uint64_t saved_bytes(uint32_t n) const;
  void save(uint8_t* out) const;                // saved_bytes(position()) bytes
  void restore(uint32_t n, const uint8_t* in);  // saved_bytes(n) bytes; the states then hold positions 0 … n−1
  // Session::fill_for_timing: every cache, ring and recurrent state zero, held as positions 0 … n−1.
  void zero_states(uint32_t n);

  uint32_t chunk() const;
  uint32_t max_positions() const;
  uint32_t ring_rows() const;  // rows of each sliding-window layer's ring
  uint32_t vocab() const;
  // Device bytes of the sequence's states: caches, rings, recurrent states and their snapshot (not the arena).
  uint64_t state_bytes() const;
  uint64_t arena_bytes() const;
  // The plan of the programs (tensor lifetimes and placements, as `diffvk plan` prints them).
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
