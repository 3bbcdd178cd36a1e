// Device quirks: named flags with a one-line reason each (in the spirit of ncnn's bug database).
// A quirk is matched on vendor id, driver id and driver version; the runtime consults it by name.
#include <vulkan/vulkan.h>

#include "vk/instance.hpp"

namespace diffvk {

namespace {
struct QuirkRule {
  Quirk quirk;
  bool (*applies)(const DeviceCaps&);
};

const QuirkRule kRules[] = {
    {{"broken_fp16_storage",
      "Mesa < 23 lavapipe on aarch64 advertises 16-bit storage but its JIT aborts on fp16 loads"},
     [](const DeviceCaps& c) {
       return c.driver_id == VK_DRIVER_ID_MESA_LLVMPIPE && !c.fp16_arithmetic && c.storage_16bit;
     }},
    {{"loop_iteration_limit",
      "llvmpipe silently ends every loop of an invocation after 65535 iterations in total; attention caps keys per invocation"},
     [](const DeviceCaps& c) { return c.driver_id == VK_DRIVER_ID_MESA_LLVMPIPE; }},
    {{"no_compute_unit_count",
      "the driver exposes no SM/CU count; split-K decode uses a default of 16 parallel splits"},
     [](const DeviceCaps& c) { return c.compute_units == 0; }},
};
}  // namespace

void apply_quirks(DeviceCaps& caps) {
  caps.quirks.clear();
  for (const auto& r : kRules)
    if (r.applies(caps)) caps.quirks.push_back(r.quirk);
}

}  // namespace diffvk
