// Peak device memory of Buffer objects (runtime/vk/buffer.cpp), process-wide: what `diffvk bench --model`
// reports as peak device memory. Counts VkDeviceMemory allocated by Buffers only (not the driver's own).
#pragma once
#include <cstdint>

namespace diffvk {

// The most bytes device_bytes_allocated() (vk/gpu.hpp) reached since the last reset_device_bytes_peak(),
// which sets it to the current count.
uint64_t device_bytes_peak();
void reset_device_bytes_peak();

}  // namespace diffvk
