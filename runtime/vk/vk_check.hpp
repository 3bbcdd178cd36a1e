// Checked Vulkan calls: every failing VkResult becomes a diffvk::Error naming the call,
// with a test hook for fault injection (VK_ERROR_DEVICE_LOST, VK_ERROR_OUT_OF_DEVICE_MEMORY...).
#pragma once
#include <vulkan/vulkan.h>

#include <functional>

#include "diffvk/error.hpp"

namespace diffvk {

const char* vk_result_name(VkResult r) noexcept;

// Throws Error for a negative result: device_lost, out_of_memory (host/device/pool), else vulkan_error.
void vk_check(VkResult r, const char* call);

// Fault injection: when set, the hook is asked before every checked call (with the call's name);
// a non-VK_SUCCESS answer is used instead of making the call. Process-wide; tests only.
using VkFaultHook = std::function<VkResult(const char* call)>;
void set_vk_fault_hook(VkFaultHook hook);
VkFaultHook vk_fault_hook();              // the hook set now (empty when none)
VkResult vk_fault_for(const char* call);  // VK_SUCCESS when no hook

}  // namespace diffvk

// DVK_CHECK(vkCreateBuffer(dev, &ci, nullptr, &buf));
#define DVK_CHECK(expr)                              \
  do {                                               \
    VkResult dvk_r_ = ::diffvk::vk_fault_for(#expr); \
    if (dvk_r_ == VK_SUCCESS) dvk_r_ = (expr);       \
    ::diffvk::vk_check(dvk_r_, #expr);               \
  } while (0)
