// RoPE + KV-cache append op (shaders/rope_kv.comp) and its host-computed cos/sin table.
#pragma once
#include <array>
#include <memory>
#include <vector>

#include "ops/kernel_options.hpp"
#include "ops/kv_format.hpp"

namespace diffvk {

// RoPE (docs/maths.md, interleaved GPT-J) of the fused QKV projection, and the KV-cache append.
//   qkv:     rows x (2H·D | 2Hkv·D | Hkv·2D), dense, = x·[Wq; Wk; Wv]ᵀ; row r is at position pos0 + r.
//   table:   float32 (always, also in the fp16 variant) [max_positions][D/2][2] = {cos, sin}(p·θ^(−2i/D)),
//            from rope_table(); must cover positions < pos0 + rows.
//   q_out:   rows x 2H·D, every D-wide sub-head roped.
//   k_cache: [Hkv][capacity][2D]; row (g, p) = [roped K1_g | roped K2_g] (k columns [2gD, 2gD + 2D)).
//   v_cache: [Hkv][capacity][2D]; row (g, p) = v columns [2gD, 2gD + 2D), copied unrotated.
// Only cache rows pos0 .. pos0 + rows − 1 are written; the rest is left untouched (the whole cache
// ranges are declared written to Program, a superset).
// DIFF V2 (docs/maths.md "DIFF V2"): kheads = Hkv (the cache rows are D wide: [Hkv][capacity][D]) and
// lam = H λ logits between the q and the k part of a qkv row, copied after the q part of q_out
// (rows x (2H·D + H)); v then has Hkv·D columns. Pushed as is (shaders/rope_kv.comp's Params).
// Ring KV cache (ring = 1; a sliding-window layer's window-sized cache, DiffAttnKernel's AttnCall::ring): position
// p is written at cache row p mod capacity and positions may pass the capacity (rows <= capacity).
// No rotation (rope = 0; a model without RoPE, e.g. Phi-4-mini-flash): q is copied to q_out and K appended as it
// is; the table is then unused (may be empty).
struct RopeKvParams {
  uint32_t rows = 0, H = 0, Hkv = 0, D = 0, pos0 = 0, capacity = 0;
  uint32_t kheads = 0;  // D-wide k sub-heads per row; 0 = 2·Hkv (DIFF V1)
  uint32_t lam = 0;     // λ columns after the q part (DIFF V2: H)
  uint32_t ring = 0;    // 1: row pos mod capacity
  uint32_t rope = 1;    // 0: no rotation (copy q, append K as is)
};
class RopeKvKernel : public Pow2WorkgroupKernel {
 public:
  // kv: the caches' format (KvFormat::q8_0: K and V quantized at append, ops/kv_format.hpp's layout).
  RopeKvKernel(Device& device, KernelOptions options, KvFormat kv = KvFormat::storage);
  // Throws invalid_argument (zero sizes, odd D, H % Hkv != 0, buffers too small or overlapping outputs, a ring of
  // fewer rows than the call) and context_overflow (pos0 + rows > capacity without a ring).
  void record(Program& program, BufferRange qkv, BufferRange table, BufferRange q_out, BufferRange k_cache,
              BufferRange v_cache, const RopeKvParams& params, BufferRange dyn_pos = {}) const;
  // dyn_pos: optional 4-byte uint added to params.pos0 at run time (recorded once, replayed at
  // every decode position); the host must keep pos0 + dyn + rows <= capacity (rows past it are skipped), unless
  // the cache is a ring (then the RoPE table must cover every position the replays reach: its size is checked
  // against pos0 + rows only).
  KvFormat kv_format() const { return kv_; }

 private:
  KvFormat kv_;
};

// cos/sin table for RopeKvKernel: max_positions x D/2 x {cos, sin} of p·θ^(−2i/D), computed in double
// and rounded once to float. Angles are computed on the host because a GPU's fp32 angle p·inv_freq
// has an absolute rounding error of ~p·6e-8 rad (6e-3 rad at p = 1e5) and GPU sin/cos of large
// arguments are only loosely specified, which would cost accuracy at long contexts.
std::vector<float> rope_table(uint32_t max_positions, uint32_t D, double theta = 10000.0);
// The same table from given inverse frequencies (D/2 of them; e.g. llama3-scaled, model/checkpoint.hpp).
std::vector<float> rope_table(uint32_t max_positions, const std::vector<double>& inv_freq);

}  // namespace diffvk
