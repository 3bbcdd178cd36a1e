#include "ops/kernel_options.hpp"

#include <algorithm>

namespace diffvk {

uint32_t pick_pow2_workgroup(const DeviceCaps& caps, uint32_t cap) {
  const uint32_t limit = std::min({cap, caps.max_workgroup_invocations, caps.max_workgroup_size[0]});
  uint32_t wg = 1;
  while (wg * 2 <= limit) wg *= 2;
  return wg;
}

}  // namespace diffvk
