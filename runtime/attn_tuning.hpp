// Tile choice for the differential attention kernels: a pure function of (DeviceCaps, shape),
// unit-tested with simulated devices (16/32/48 KiB shared memory, subgroups 4..128, no fp16).
#pragma once
#include <cstdint>
#include <string>

#include "diffvk/device.hpp"

namespace diffvk {

enum class AttnPhase { prefill, decode };

struct AttnTiles {
  uint32_t wg = 0;  // invocations per workgroup (power of two)
  uint32_t br = 0;  // row slots per workgroup = n_rep heads x qb queries (GQA folded into rows)
  uint32_t bc = 0;  // keys per tile
  uint32_t tc = 0;  // invocations across the 2D output columns (divides 2D and wg)
  uint32_t qb = 0;  // queries per workgroup
  uint32_t shared_bytes = 0;
};

// Shared memory the core uses for these tiles (see shaders/diff_attn_core.glsl).
uint32_t attn_shared_bytes(bool fp16, uint32_t D, uint32_t br, uint32_t bc, uint32_t tc, bool fused_epilogue);

// decode_rows: queries per decode call the tiles should cover in one workgroup (1..8).
// Throws Error(unsupported) when no legal tiling exists (e.g. D too large for the shared memory).
AttnTiles choose_attn_tiles(const DeviceCaps& caps, bool fp16, uint32_t D, uint32_t n_rep, AttnPhase phase,
                            uint32_t decode_rows = 1);

// "" when legal on `caps`, else the reason (shared memory, invocations, divisibility, registers).
std::string check_attn_tiles(const DeviceCaps& caps, bool fp16, uint32_t D, uint32_t n_rep, const AttnTiles& t,
                             bool fused_epilogue);

// Keys one invocation of the attention core may stream on this device: unlimited (UINT32_MAX) unless
// the device has the loop_iteration_limit quirk, then what fits its per-invocation loop budget with
// these tiles (an upper estimate of the core's loop iterations per key tile, plus fixed work). Always
// a whole number of tiles, at least one.
uint32_t attn_max_keys_per_invocation(const DeviceCaps& caps, uint32_t D, const AttnTiles& t);

// Split-K count for decode: enough workgroups to fill the device (2 per compute unit when the
// driver reports them, else 16 in total), never more splits than tiles of keys, each split a
// whole number of tiles. Returns the keys per split through split_len.
// max_split_len (a multiple of bc) caps the keys per split (attn_max_keys_per_invocation).
uint32_t choose_splits(const DeviceCaps& caps, uint32_t keys, uint32_t bc, uint32_t workgroups_per_split,
                       uint32_t* split_len, uint32_t max_split_len = UINT32_MAX);

}  // namespace diffvk
