// The memory a GraphPlan asks for: one device buffer per chunk of the plan, and the way back from a
// placed range to the Buffer that owns it (uploads of inputs, read-backs of outputs).
#pragma once
#include <string>
#include <vector>

#include "graph/graph.hpp"

namespace diffvk {

class Arena {
 public:
  Arena() = default;
  Arena(Device& device, const MemoryPlan& plan, const std::string& what);
  const std::vector<VkBuffer>& handles() const { return handles_; }
  // The chunk holding `r` (Error internal when r is not in this arena).
  Buffer& owner(const BufferRange& r);

 private:
  std::vector<Buffer> chunks_;
  std::vector<VkBuffer> handles_;
};

}  // namespace diffvk
