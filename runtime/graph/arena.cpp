#include "graph/arena.hpp"

#include "diffvk/error.hpp"

namespace diffvk {

Arena::Arena(Device& device, const MemoryPlan& plan, const std::string& what) {
  for (size_t i = 0; i < plan.buffer_sizes.size(); ++i) {
    chunks_.emplace_back(device, plan.buffer_sizes[i], MemoryDomain::device, what + " arena " + std::to_string(i));
    handles_.push_back(chunks_.back().range().buffer);
  }
}

Buffer& Arena::owner(const BufferRange& r) {
  for (size_t i = 0; i < handles_.size(); ++i)
    if (handles_[i] == r.buffer) return chunks_[i];
  throw Error(Status::internal, "arena: a range that is not in the arena");
}

}  // namespace diffvk
