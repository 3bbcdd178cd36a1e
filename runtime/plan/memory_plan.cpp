// diffvk — static memory planner (see memory_plan.hpp).
//
// Algorithm: "greedy by size" with best fit, as in TFLite's arena planner and ExecuTorch.
// Tensors are placed one at a time in some order; for each, the already-placed tensors whose
// lifetimes intersect it are walked in offset order, the free gaps between them are collected,
// and the smallest gap the tensor fits in (after alignment) wins; if none fits, the tensor goes
// after the highest end. The arena is virtual: it is cut into chunks of `stride` bytes and an
// offset whose range would cross a chunk boundary is pushed to the next boundary, so each chunk
// can become its own VkBuffer. Several orderings are tried and the smallest arena is kept.
#include "plan/memory_plan.hpp"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <limits>

#include "diffvk/error.hpp"

namespace diffvk {
namespace {

bool is_pow2(uint64_t x) { return x != 0 && (x & (x - 1)) == 0; }

// Rounds x up to a multiple of the power of two a.
uint64_t align_up(uint64_t x, uint64_t a) { return (x + a - 1) & ~(a - 1); }

std::string describe(const std::vector<TensorLifetime>& tensors, size_t i) {
  return "tensor '" + tensors[i].name + "' (#" + std::to_string(i) + ")";
}

bool lifetimes_intersect(const TensorLifetime& a, const TensorLifetime& b) {
  return a.first_step <= b.last_step && b.first_step <= a.last_step;
}

// Largest sum of bytes alive at any one step.
uint64_t peak_live_bytes(const std::vector<TensorLifetime>& tensors) {
  struct Event {
    int64_t step;  // int64: last_step + 1 must not overflow
    bool starts;
    uint64_t bytes;
  };
  std::vector<Event> events;
  events.reserve(2 * tensors.size());
  for (const TensorLifetime& t : tensors) {
    events.push_back({t.first_step, true, t.bytes});
    events.push_back({int64_t{t.last_step} + 1, false, t.bytes});
  }
  // At equal steps, ends (starts == false) come first: a tensor that dies at step s-1 is not
  // alive together with one born at step s.
  std::sort(events.begin(), events.end(),
            [](const Event& a, const Event& b) { return a.step != b.step ? a.step < b.step : a.starts < b.starts; });
  uint64_t live = 0, peak = 0;
  for (const Event& e : events) {
    if (e.starts) {
      live += e.bytes;
      peak = std::max(peak, live);
    } else {
      live -= e.bytes;
    }
  }
  return peak;
}

class GreedyPlacer {
 public:
  GreedyPlacer(const std::vector<TensorLifetime>& tensors, const std::vector<uint64_t>& align, uint64_t stride)
      : tensors_(tensors), align_(align), stride_(stride) {}

  // Virtual-arena offsets of every tensor, placed in the given order.
  std::vector<uint64_t> place(const std::vector<size_t>& order) const {
    const uint64_t unplaced = std::numeric_limits<uint64_t>::max();
    std::vector<uint64_t> offset(tensors_.size(), unplaced);
    std::vector<size_t> by_offset;  // placed tensors, sorted by offset
    by_offset.reserve(tensors_.size());
    for (size_t i : order) {
      const TensorLifetime& t = tensors_[i];
      uint64_t best = unplaced, best_gap = unplaced;
      // Highest end among the intersecting tensors seen so far. They may overlap each other
      // (not all of them are alive together), so a gap opens only past this running maximum.
      uint64_t covered = 0;
      for (size_t j : by_offset) {
        if (!lifetimes_intersect(t, tensors_[j])) continue;
        if (offset[j] > covered) {
          const uint64_t gap = offset[j] - covered;
          const uint64_t candidate = fit(covered, i);
          if (gap < best_gap && candidate + t.bytes <= offset[j]) {
            best = candidate;
            best_gap = gap;
          }
        }
        covered = std::max(covered, offset[j] + tensors_[j].bytes);
      }
      offset[i] = best != unplaced ? best : fit(covered, i);
      auto pos = std::upper_bound(by_offset.begin(), by_offset.end(), offset[i],
                                  [&](uint64_t o, size_t j) { return o < offset[j]; });
      by_offset.insert(pos, i);
    }
    return offset;
  }

 private:
  // Lowest offset >= from where tensor i is aligned and does not cross a chunk boundary.
  // Offsets are aligned relative to their chunk's start, which is what the GPU binding sees.
  uint64_t fit(uint64_t from, size_t i) const {
    uint64_t chunk = from / stride_;
    uint64_t local = align_up(from - chunk * stride_, align_[i]);
    if (local + tensors_[i].bytes > stride_) {  // bytes <= stride_, so the next chunk fits it
      ++chunk;
      local = 0;
    }
    return chunk * stride_ + local;
  }

  const std::vector<TensorLifetime>& tensors_;
  const std::vector<uint64_t>& align_;
  uint64_t stride_;
};

// Turns virtual offsets into a plan (chunks, local offsets, sizes); statistics are left at 0.
MemoryPlan make_plan(const std::vector<TensorLifetime>& tensors, const std::vector<uint64_t>& offsets,
                     uint64_t stride) {
  MemoryPlan plan;
  plan.placements.resize(tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    TensorPlacement& p = plan.placements[i];
    const uint64_t chunk = offsets[i] / stride;
    p.buffer = static_cast<uint32_t>(chunk);
    p.offset = offsets[i] - chunk * stride;
    p.arena_offset = offsets[i];
    if (plan.buffer_sizes.size() <= chunk) plan.buffer_sizes.resize(chunk + 1, 0);
    plan.buffer_sizes[chunk] = std::max(plan.buffer_sizes[chunk], p.offset + tensors[i].bytes);
  }
  for (uint64_t size : plan.buffer_sizes) plan.arena_bytes += size;
  // A tensor is only ever pushed to the chunk right after the highest end so far, so chunks
  // fill in order and none is empty; with a single chunk the stride is just its size.
  plan.chunk_stride = plan.buffer_sizes.size() > 1 ? stride : plan.arena_bytes;
  return plan;
}

}  // namespace

MemoryPlan plan_memory(const std::vector<TensorLifetime>& tensors, uint64_t max_buffer_bytes, uint64_t base_alignment) {
  if (!is_pow2(base_alignment))
    throw Error(Status::invalid_argument,
                "memory plan: base alignment " + std::to_string(base_alignment) + " is not a power of two");
  const uint64_t stride = max_buffer_bytes & ~(base_alignment - 1);
  if (stride == 0)
    throw Error(Status::invalid_argument, "memory plan: max buffer size " + std::to_string(max_buffer_bytes) +
                                              " is below the base alignment " + std::to_string(base_alignment));

  std::vector<uint64_t> align(tensors.size());
  uint64_t naive = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const TensorLifetime& t = tensors[i];
    if (t.bytes == 0) throw Error(Status::invalid_argument, "memory plan: " + describe(tensors, i) + " has 0 bytes");
    if (!is_pow2(t.alignment))
      throw Error(Status::invalid_argument, "memory plan: " + describe(tensors, i) + " has alignment " +
                                                std::to_string(t.alignment) + ", not a power of two");
    if (t.last_step < t.first_step)
      throw Error(Status::invalid_argument, "memory plan: " + describe(tensors, i) + " has last step " +
                                                std::to_string(t.last_step) + " before its first step " +
                                                std::to_string(t.first_step));
    if (t.bytes > stride) {
      std::string msg = "memory plan: " + describe(tensors, i) + " needs " + std::to_string(t.bytes) +
                        " bytes but one buffer may hold at most " + std::to_string(max_buffer_bytes) + " bytes";
      if (stride != max_buffer_bytes)
        msg += " (" + std::to_string(stride) + " usable at the " + std::to_string(base_alignment) +
               "-byte base alignment)";
      throw Error(Status::out_of_memory, msg);
    }
    align[i] = std::max(t.alignment, base_alignment);
    naive += align_up(t.bytes, align[i]);
  }

  // Orderings to try. The sorts are stable (by_size keeps input order among ties, the others
  // keep size order), so plans are deterministic.
  //  - size: plain greedy by size (largest first, longer-lived first among equals);
  //  - area: size * lifetime length, which favours long-lived tensors that pin the bottom
  //    of the arena for the whole graph;
  //  - span: longest-lived first (largest first among equals).
  // Each helps on graphs where the others leave holes; the smallest arena wins.
  auto span = [&](size_t i) { return uint64_t(int64_t{tensors[i].last_step} - tensors[i].first_step + 1); };
  std::vector<size_t> by_size(tensors.size());
  for (size_t i = 0; i < by_size.size(); ++i) by_size[i] = i;
  std::stable_sort(by_size.begin(), by_size.end(), [&](size_t a, size_t b) {
    if (tensors[a].bytes != tensors[b].bytes) return tensors[a].bytes > tensors[b].bytes;
    return span(a) > span(b);
  });
  std::vector<size_t> by_area = by_size;
  std::stable_sort(by_area.begin(), by_area.end(), [&](size_t a, size_t b) {
    // long double: bytes * span can exceed 64 bits; only the order matters here.
    return static_cast<long double>(tensors[a].bytes) * span(a) > static_cast<long double>(tensors[b].bytes) * span(b);
  });
  std::vector<size_t> by_span = by_size;
  std::stable_sort(by_span.begin(), by_span.end(), [&](size_t a, size_t b) { return span(a) > span(b); });

  const GreedyPlacer placer(tensors, align, stride);
  MemoryPlan best = make_plan(tensors, placer.place(by_size), stride);
  for (const std::vector<size_t>* order : {&by_area, &by_span}) {
    MemoryPlan candidate = make_plan(tensors, placer.place(*order), stride);
    if (candidate.arena_bytes < best.arena_bytes) best = std::move(candidate);
  }

  best.lower_bound = peak_live_bytes(tensors);
  best.naive_bytes = naive;
  return best;
}

std::string check_plan(const std::vector<TensorLifetime>& tensors, const MemoryPlan& plan, uint64_t max_buffer_bytes,
                       uint64_t base_alignment) {
  if (plan.placements.size() != tensors.size())
    return "plan has " + std::to_string(plan.placements.size()) + " placements for " + std::to_string(tensors.size()) +
           " tensors";
  if (!is_pow2(base_alignment)) return "base alignment " + std::to_string(base_alignment) + " is not a power of two";

  uint64_t total = 0;
  for (size_t b = 0; b < plan.buffer_sizes.size(); ++b) {
    const uint64_t size = plan.buffer_sizes[b];
    if (size == 0) return "chunk " + std::to_string(b) + " is empty";
    if (size > max_buffer_bytes)
      return "chunk " + std::to_string(b) + " has " + std::to_string(size) + " bytes, more than the maximum " +
             std::to_string(max_buffer_bytes);
    if (plan.buffer_sizes.size() > 1 && size > plan.chunk_stride)
      return "chunk " + std::to_string(b) + " has " + std::to_string(size) + " bytes, more than the chunk stride " +
             std::to_string(plan.chunk_stride);
    total += size;
  }
  if (total != plan.arena_bytes)
    return "arena_bytes " + std::to_string(plan.arena_bytes) + " differs from the sum of chunk sizes " +
           std::to_string(total);

  for (size_t i = 0; i < tensors.size(); ++i) {
    const TensorLifetime& t = tensors[i];
    const TensorPlacement& p = plan.placements[i];
    if (!is_pow2(t.alignment)) return describe(tensors, i) + " has an invalid alignment";
    const uint64_t align = std::max(t.alignment, base_alignment);
    if (p.buffer >= plan.buffer_sizes.size())
      return describe(tensors, i) + " is in chunk " + std::to_string(p.buffer) + " of " +
             std::to_string(plan.buffer_sizes.size());
    if (p.offset % align != 0)
      return describe(tensors, i) + " at offset " + std::to_string(p.offset) + " is misaligned (alignment " +
             std::to_string(align) + ")";
    const uint64_t size = plan.buffer_sizes[p.buffer];
    if (t.bytes > size || p.offset > size - t.bytes)
      return describe(tensors, i) + " [" + std::to_string(p.offset) + ", +" + std::to_string(t.bytes) +
             ") runs past the end of chunk " + std::to_string(p.buffer) + " (" + std::to_string(size) + " bytes)";
    if (p.arena_offset != uint64_t{p.buffer} * plan.chunk_stride + p.offset)
      return describe(tensors, i) + " has arena offset " + std::to_string(p.arena_offset) +
             ", expected chunk * stride + offset = " +
             std::to_string(uint64_t{p.buffer} * plan.chunk_stride + p.offset);
  }

  // Every pair: quadratic, but deliberately simple so it shares nothing with the planner.
  for (size_t i = 0; i < tensors.size(); ++i) {
    const TensorPlacement& p = plan.placements[i];
    for (size_t j = i + 1; j < tensors.size(); ++j) {
      const TensorPlacement& q = plan.placements[j];
      if (p.buffer != q.buffer || !lifetimes_intersect(tensors[i], tensors[j])) continue;
      if (p.offset < q.offset + tensors[j].bytes && q.offset < p.offset + tensors[i].bytes)
        return describe(tensors, i) + " [" + std::to_string(p.offset) + ", +" + std::to_string(tensors[i].bytes) +
               ") and " + describe(tensors, j) + " [" + std::to_string(q.offset) + ", +" +
               std::to_string(tensors[j].bytes) + ") overlap in chunk " + std::to_string(p.buffer) +
               " while both alive at step " + std::to_string(std::max(tensors[i].first_step, tensors[j].first_step));
    }
  }
  return "";
}

std::string format_plan(const std::vector<TensorLifetime>& tensors, const MemoryPlan& plan) {
  int name_width = 6;  // strlen("tensor")
  for (const TensorLifetime& t : tensors) name_width = std::max(name_width, static_cast<int>(t.name.size()));

  std::string out;
  char line[256];
  std::snprintf(line, sizeof line, "%-*s  %13s  %5s  %12s  %12s\n", name_width, "tensor", "steps", "chunk", "offset",
                "bytes");
  out += line;
  const size_t rows = std::min(tensors.size(), plan.placements.size());
  for (size_t i = 0; i < rows; ++i) {
    const TensorLifetime& t = tensors[i];
    const TensorPlacement& p = plan.placements[i];
    const std::string steps = std::to_string(t.first_step) + ".." + std::to_string(t.last_step);
    out += t.name;  // appended separately: names may be longer than `line`
    std::snprintf(line, sizeof line, "%*s  %13s  %5" PRIu32 "  %12" PRIu64 "  %12" PRIu64 "\n",
                  name_width - static_cast<int>(t.name.size()), "", steps.c_str(), p.buffer, p.offset, t.bytes);
    out += line;
  }
  auto ratio = [](uint64_t a, uint64_t b) { return b ? static_cast<double>(a) / static_cast<double>(b) : 0.0; };
  std::snprintf(line, sizeof line,
                "arena %" PRIu64 " bytes in %zu buffer(s); lower bound %" PRIu64 " (x%.3f); naive sum %" PRIu64
                " (x%.3f)\n",
                plan.arena_bytes, plan.buffer_sizes.size(), plan.lower_bound, ratio(plan.arena_bytes, plan.lower_bound),
                plan.naive_bytes, ratio(plan.arena_bytes, plan.naive_bytes));
  out += line;
  return out;
}

}  // namespace diffvk
