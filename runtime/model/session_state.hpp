// diffvk — the saved state of a session (Session::save_state / restore_state): the tokens it holds and
// their KV cache rows. File layout (all integers little-endian; docs/session-state.md):
//   offset  0  8 bytes  magic "DVKSTATE"
//           8  u32      format version (kSessionStateVersion)
//          12  u32      KV element type: 1 = f32, 2 = f16 (the session's storage type), 3 = q8_0 (a Q8_0 KV cache)
//          16  u64      model fingerprint (session_state.cpp: config, lambdas, weight formats, norm weights)
//          24  u32      layers
//          28  u32      KV heads
//          32  u32      elements per KV row (2·D)
//          36  u32      position n (tokens held)
//          40  u32      exact: rows 0 … exact-1 are those a fresh prefill gives (n unless context-shifted)
//          44  n × i32  token ids
//      44+4n  KV rows   per layer: K then V; per KV head: rows 0 … n-1, each `elements per row` values
//                       (q8_0: per KV head the int8 quants of rows 0 … n-1, then their fp16 scales, 2·ceil(row/64)
//                       per row: ops/kv_format.hpp's layout)
//    size-8   u64      FNV-1a 64 of every byte before it
// Version 3 is a Phi-4-mini-flash (SambaY) session's state: the same header (layers, KV heads and row elements of
// its config, KV type f32/f16), the tokens, then Phi4FlashForward::save's body (model/phi4flash_forward.hpp: the
// shared cache's rows, each sliding layer's last window − 1 positions, the Mamba conv and scan states in float32).
// Pure functions (no Vulkan, no file I/O): encode_session_state_header and check_session_state.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "ops/kv_format.hpp"  // the Q8_0 cache layout (header-only, pure)

namespace diffvk {

constexpr uint32_t kSessionStateVersion = 2;        // version 1 (no `exact`, a 40-byte header) is still read
constexpr uint32_t kSessionStateSambaYVersion = 3;  // a SambaY session's state (the header of version 2)
constexpr size_t kSessionStateHeaderSize = 44;
constexpr size_t kSessionStateV1HeaderSize = 40;
constexpr size_t kSessionStateTrailerSize = 8;

enum class StateKvType : uint32_t { f32 = 1, f16 = 2, q8_0 = 3 };
const char* state_kv_type_name(StateKvType t);

struct SessionStateShape {
  StateKvType kv_type = StateKvType::f32;
  uint64_t fingerprint = 0;
  uint32_t layers = 0, kv_heads = 0, row_elems = 0;
  // A SambaY session's state (version 3): the bytes of its body for n positions (Phi4FlashForward::saved_bytes).
  std::function<uint64_t(uint32_t)> sambay_body;
  uint32_t version() const { return sambay_body ? kSessionStateSambaYVersion : kSessionStateVersion; }
  uint64_t elem_bytes() const { return kv_type == StateKvType::f16 ? 2 : kv_type == StateKvType::q8_0 ? 1 : 4; }
  // Q8_0: fp16 scale bytes of one cache row (kv_q8_scale_slots of ops/kv_format.hpp); 0 otherwise.
  uint64_t scale_bytes() const { return kv_type == StateKvType::q8_0 ? uint64_t(kv_q8_scale_slots(row_elems)) * 2 : 0; }
  // Bytes of one K (or V) block of one layer and one KV head for n rows.
  uint64_t head_bytes(uint32_t n) const { return uint64_t(n) * (row_elems * elem_bytes() + scale_bytes()); }
  // The whole file for n tokens (header: kSessionStateHeaderSize, or 40 in version 1).
  uint64_t file_bytes(uint32_t n, uint64_t header = kSessionStateHeaderSize) const {
    if (sambay_body) return header + 4ull * n + sambay_body(n) + kSessionStateTrailerSize;
    return header + 4ull * n + uint64_t(layers) * 2 * kv_heads * head_bytes(n) + kSessionStateTrailerSize;
  }
};

// The first kSessionStateHeaderSize bytes, then the n token ids (the caller appends the KV rows and the
// checksum: fnv1a64 of everything before it). exact <= tokens.size().
std::vector<uint8_t> encode_session_state_header(const SessionStateShape& shape, const std::vector<int32_t>& tokens,
                                                 uint32_t exact);

struct CheckedState {
  uint32_t n = 0, exact = 0;
  uint64_t header = kSessionStateHeaderSize;  // where the tokens start (40 in version 1)
};

// Checks a whole state (version 1 or 2; 3 for a SambaY session) against what the restoring session has. Throws
// Error(invalid_argument) naming what does not match: magic, checksum (corrupt or truncated), version,
// KV type, model (fingerprint or shape), position beyond `capacity`, exact beyond n, a token outside
// [0, vocab), the size. The tokens start at `header`, the KV rows at header + 4n.
CheckedState check_session_state(const uint8_t* data, size_t size, const SessionStateShape& want, uint32_t capacity,
                                 uint32_t vocab);

}  // namespace diffvk
