// Session::Impl (include/diffvk/model.hpp): shared by session.cpp (programs, prefill, decode) and
// session_state.cpp (saved state). Not a public header.
#pragma once
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "diffvk/model.hpp"
#include "graph/arena.hpp"
#include "model/model_impl.hpp"
#include "model/recipe.hpp"

namespace diffvk {

struct Session::Impl {
  Model::Impl* m = nullptr;
  uint32_t cap = 0, chunk = 0, pos = 0;
  KvFormat kv_format = KvFormat::storage;  // SessionOptions::kv_cache
  std::vector<int32_t> held;               // token ids at positions 0 ... pos-1 (entries past pos are stale)
  // Rows 0 ... exact-1 are those a fresh prefill of held[0 ... exact-1] gives (a context shift makes the
  // rows after its keep approximate: they attended to dropped tokens). prefill_reusing keeps no more.
  uint32_t exact = 0;
  // Every token given since reset (Session::history): held[0 ... pos-1] with the tokens context shifts
  // dropped; held[tail_at ... pos-1] == history[tail_at + D ...], D = history.size() - pos (dropped).
  std::vector<int32_t> history;
  uint32_t tail_at = 0;
  bool profile = false;
  std::function<bool()> should_abort;
  std::vector<Buffer> kv;  // per layer: K then V
  std::vector<BufferRange> kc, vc;
  Buffer tokens, dyn, picked;             // dyn: {position, u, temperature, top_k}; picked: the sampled token id
  Buffer sync;                            // the split-K attention's arrival counters (zero between dispatches)
  uint32_t sample_params[3] = {0, 0, 0};  // u, temperature (float bits), top_k: uploaded with the position
  uint64_t fingerprint = 0;               // of the model (session_state.cpp), computed at the first save or restore
  GraphPlan plan;  // every program variant's intermediates, derived from the recipe (plan_variants)
  Arena arena;
  struct Recorded {
    std::unique_ptr<Program> program;
    BufferRange logits;  // where this program leaves its logits (empty for HeadOut::none)
  };
  std::map<std::pair<uint32_t, HeadOut>, Recorded> programs;  // recorded once per (rows, out)
  Program* last = nullptr;                                    // the program of the last run (profile)
  // A Phi-4-mini-flash (SambaY) model's sequence: its states and programs (model/phi4flash_forward.hpp); the KV
  // cache, plan and programs above are then unused. Its states follow `held` and `pos` lazily (seek at each run).
  std::unique_ptr<Phi4FlashForward> sambay;
  // phi4flash: refuses what a SambaY session cannot do exactly (unsupported, naming `what` and why).
  void refuse_sambay(const char* what, const char* why) const;

  // The model's forward pass of `rows` tokens, from the recipe, into g (tap: attention maps of one layer).
  TensorRef build(Graph& g, uint32_t rows, HeadOut out, const MapTap* tap) const;
  // The planned variant a program of `rows` rows belongs to: one-row programs have their own (fused ops).
  std::string variant(uint32_t rows, HeadOut out) const {
    return "rows=" + std::to_string(rows == 1 ? 1 : chunk) + " " + head_out_name(out);
  }
  Recorded record(uint32_t rows, HeadOut out, const MapTap* tap) const;
  Program& program(uint32_t rows, HeadOut out);
  // Non-empty, every id in the vocabulary (invalid_argument naming the first bad one).
  void check_vocab(const std::vector<int32_t>& toks, const char* what) const;
  // check_vocab, after context_overflow when the tokens, starting at position `at`, pass the capacity.
  void check_tokens(const std::vector<int32_t>& toks, const char* what, uint32_t at) const;
  // Sets the position to n <= pos (rewind, reset, a failed run): exact and history follow. At n == tail_at
  // the dropped tokens stay in history only with keep_dropped (what comes next continues the conversation).
  void truncate(uint32_t n, bool keep_dropped = false);
  // Appends `rows` tokens just computed at pos to held and history.
  void advance(const int32_t* tok, uint32_t rows);
  // Runs `rows` tokens; returns the logits `out` asks for (rows x vocab, or the last row's, or none).
  std::vector<float> run(const int32_t* tok, uint32_t rows, HeadOut out);
  // Runs `rows` tokens and writes the logits `out` asks for into `logits` (when not none/sample), which holds
  // (out == all ? rows : 1) x vocab floats. Allocates nothing once the program for (rows, out) is recorded.
  void run_into(const int32_t* tok, uint32_t rows, HeadOut out, float* logits);
};

}  // namespace diffvk
