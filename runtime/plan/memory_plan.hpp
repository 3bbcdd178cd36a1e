// diffvk — static memory planner.
//
// Before a graph runs, every intermediate tensor gets a fixed byte offset in one
// arena; tensors that are alive at a common step never overlap. The arena is cut
// into chunks (one VkBuffer each) no larger than the device's largest storage
// buffer binding, and no tensor straddles two chunks.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace diffvk {

struct TensorLifetime {
  std::string name;
  uint64_t bytes = 0;      // > 0
  uint64_t alignment = 1;  // power of two; offset is a multiple of max(alignment, base_alignment)
  int first_step = 0;      // first step (op index) that touches it
  int last_step = 0;       // last step that touches it, inclusive; >= first_step
};

struct TensorPlacement {
  uint32_t buffer = 0;        // which arena chunk (VkBuffer)
  uint64_t offset = 0;        // byte offset inside that chunk
  uint64_t arena_offset = 0;  // byte offset in the virtual arena = buffer * chunk_stride + offset
};

struct MemoryPlan {
  std::vector<TensorPlacement> placements;  // same order as the input tensors
  std::vector<uint64_t> buffer_sizes;       // size of each chunk, each <= max_buffer_bytes
  uint64_t chunk_stride = 0;                // virtual distance between chunks: max_buffer_bytes rounded down to
                                            // base_alignment, or arena_bytes when there is a single chunk
  uint64_t arena_bytes = 0;                 // sum of buffer_sizes (what is actually allocated)
  uint64_t lower_bound = 0;                 // max over steps of the sum of bytes alive at that step
  uint64_t naive_bytes = 0;                 // sum of all tensor sizes, each rounded up to its alignment
};

// Plans offsets (greedy by size, best fit; several orderings tried, smallest arena kept).
// max_buffer_bytes: largest single buffer binding allowed (maxStorageBufferRange).
// base_alignment: power of two every offset must honour (minStorageBufferOffsetAlignment).
// Throws diffvk::Error:
//   Status::invalid_argument for a zero-byte tensor, a non-power-of-two alignment, last_step <
//     first_step, a non-power-of-two base_alignment or a max_buffer_bytes below base_alignment;
//   Status::out_of_memory when one tensor is larger than a chunk can hold (max_buffer_bytes
//     rounded down to base_alignment); the message names the tensor and both sizes.
MemoryPlan plan_memory(const std::vector<TensorLifetime>& tensors, uint64_t max_buffer_bytes, uint64_t base_alignment);

// Independent checker (tests, debug builds): "" when `plan` is valid for `tensors`, else a
// description of the first violation found: two tensors alive at a common step overlapping in
// the same chunk, a misaligned offset, a tensor past its chunk's end, an empty chunk or one
// larger than max_buffer_bytes, or inconsistent bookkeeping (arena_offset, arena_bytes).
std::string check_plan(const std::vector<TensorLifetime>& tensors, const MemoryPlan& plan, uint64_t max_buffer_bytes,
                       uint64_t base_alignment);

// Human-readable table: one line per tensor (name, first..last step, chunk, offset, bytes),
// then the arena size against the lower bound and the naive sum.
std::string format_plan(const std::vector<TensorLifetime>& tensors, const MemoryPlan& plan);

}  // namespace diffvk
