// The element format of a KV cache (docs/maths.md "Q8_0 KV cache"), shared by the
// ops that write it (rope_kv), read it (the attention core) and size it (the session's plan).
#pragma once
#include <cstdint>
#include <string>

namespace diffvk {

// storage: the storage type's elements (fp16, or fp32 on the fp32 fallback), [groups][capacity][width].
// q8_0: GGUF Q8_0 blocks of 32 along a row, struct-of-arrays: the int8 quants [groups][capacity][width]
// (one byte each), then the fp16 scales, kv_q8_scale_slots(width) per row (the row's width/32 blocks,
// padded to whole 32-bit words so that no two appending invocations write one word).
enum class KvFormat : uint32_t { storage = 0, q8_0 = 1 };

// 32-bit words of scales per cache row (each holds the fp16 scales of 64 columns; the appending and
// shifting kernels run one invocation per word), and the fp16 slots they hold.
inline uint32_t kv_q8_scale_words(uint32_t width) { return (width + 63) / 64; }
inline uint32_t kv_q8_scale_slots(uint32_t width) { return kv_q8_scale_words(width) * 2; }

// Bytes of one cache (K or V) of `groups` x `capacity` rows of `width` elements.
inline uint64_t kv_cache_bytes(KvFormat f, bool fp16, uint64_t groups, uint64_t capacity, uint32_t width) {
  const uint64_t rows = groups * capacity;
  if (f == KvFormat::q8_0) return rows * width + rows * kv_q8_scale_slots(width) * 2;
  return rows * width * (fp16 ? 2 : 4);
}

// "" when rows of `width` can be stored in format f, else why not (a sentence naming the width).
inline std::string kv_format_problem(KvFormat f, uint32_t width) {
  if (f == KvFormat::q8_0 && width % 32 != 0)
    return "a Q8_0 KV cache needs cache rows whose width is a multiple of 32 (Q8_0 blocks); this model's rows are " +
           std::to_string(width) + " wide";
  return "";
}

}  // namespace diffvk
