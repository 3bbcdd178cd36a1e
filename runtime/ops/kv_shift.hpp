// Context shift of one layer's KV cache (shaders/kv_shift.comp; docs/context-overflow.md).
#pragma once
#include <array>
#include <memory>

#include "ops/kernel_options.hpp"
#include "ops/kv_format.hpp"

namespace diffvk {

// Drops the cache rows keep … keep + discard − 1 of a [Hkv][capacity][2D] (V2: [D]) K and V cache (the layout of
// RopeKvKernel) by moving rows keep + discard … end − 1 down by `discard`, re-rotating each moved K row by
// −discard (RoPE composes: the key roped at p becomes the key roped at p − discard, up to one rounding).
// V rows move unchanged. Rows below keep are untouched; rows from end − discard on are left stale.
struct KvShiftParams {
  uint32_t Hkv = 0, D = 0, capacity = 0;
  uint32_t keep = 0, discard = 0, end = 0;  // rows [keep, keep + discard) go; [keep + discard, end) move
  uint32_t row = 0;                         // cache row width: 0 = 2D (DIFF V1: K1|K2); D for DIFF V2's caches
};
class KvShiftKernel : public Pow2WorkgroupKernel {
 public:
  // kv: the caches' format (KvFormat::q8_0: K blocks dequantized, re-rotated and quantized again).
  KvShiftKernel(Device& device, KernelOptions options, KvFormat kv = KvFormat::storage);
  // Records ceil((end − keep − discard) / discard) dispatches (each moves at most `discard` rows, so none
  // reads what it writes; Program orders them). table: rope_table() rows, covering row `discard`.
  // Throws invalid_argument (zero sizes, odd D, discard == 0, keep + discard > end, end > capacity, buffers
  // too small, overlapping or a table too short). Nothing is recorded when no row moves.
  void record(Program& program, BufferRange k_cache, BufferRange v_cache, BufferRange table,
              const KvShiftParams& params) const;

 private:
  KvFormat kv_;
};

}  // namespace diffvk
