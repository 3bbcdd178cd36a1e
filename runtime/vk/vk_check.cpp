#include "vk/vk_check.hpp"

#include <atomic>
#include <mutex>
#include <string>

namespace diffvk {

const char* status_name(Status s) noexcept {
  switch (s) {
    case Status::ok:
      return "ok";
    case Status::invalid_argument:
      return "invalid argument";
    case Status::io_error:
      return "I/O error";
    case Status::format_error:
      return "format error";
    case Status::unsupported:
      return "unsupported";
    case Status::out_of_memory:
      return "out of memory";
    case Status::device_lost:
      return "device lost";
    case Status::vulkan_error:
      return "Vulkan error";
    case Status::context_overflow:
      return "context overflow";
    case Status::internal:
      return "internal error";
    case Status::cancelled:
      return "cancelled";
  }
  return "unknown";
}

const char* vk_result_name(VkResult r) noexcept {
  switch (r) {
#define DVK_R(x) \
  case x:        \
    return #x;
    DVK_R(VK_SUCCESS);
    DVK_R(VK_NOT_READY);
    DVK_R(VK_TIMEOUT);
    DVK_R(VK_EVENT_SET);
    DVK_R(VK_EVENT_RESET);
    DVK_R(VK_INCOMPLETE);
    DVK_R(VK_ERROR_OUT_OF_HOST_MEMORY);
    DVK_R(VK_ERROR_OUT_OF_DEVICE_MEMORY);
    DVK_R(VK_ERROR_INITIALIZATION_FAILED);
    DVK_R(VK_ERROR_DEVICE_LOST);
    DVK_R(VK_ERROR_MEMORY_MAP_FAILED);
    DVK_R(VK_ERROR_LAYER_NOT_PRESENT);
    DVK_R(VK_ERROR_EXTENSION_NOT_PRESENT);
    DVK_R(VK_ERROR_FEATURE_NOT_PRESENT);
    DVK_R(VK_ERROR_INCOMPATIBLE_DRIVER);
    DVK_R(VK_ERROR_TOO_MANY_OBJECTS);
    DVK_R(VK_ERROR_FORMAT_NOT_SUPPORTED);
    DVK_R(VK_ERROR_FRAGMENTED_POOL);
    DVK_R(VK_ERROR_UNKNOWN);
    DVK_R(VK_ERROR_OUT_OF_POOL_MEMORY);
    DVK_R(VK_ERROR_INVALID_EXTERNAL_HANDLE);
    DVK_R(VK_ERROR_FRAGMENTATION);
    DVK_R(VK_ERROR_INVALID_OPAQUE_CAPTURE_ADDRESS);
    DVK_R(VK_PIPELINE_COMPILE_REQUIRED);
#undef DVK_R
    default:
      return "VkResult(unknown)";
  }
}

void vk_check(VkResult r, const char* call) {
  if (r >= 0) return;
  std::string name(call);
  if (auto p = name.find('('); p != std::string::npos) name.resize(p);
  std::string msg = name + " failed: " + vk_result_name(r);
  switch (r) {
    case VK_ERROR_DEVICE_LOST:
      throw Error(Status::device_lost, msg + " (the GPU reset or the driver crashed; the context must be recreated)");
    case VK_ERROR_OUT_OF_HOST_MEMORY:
    case VK_ERROR_OUT_OF_DEVICE_MEMORY:
    case VK_ERROR_OUT_OF_POOL_MEMORY:
    case VK_ERROR_FRAGMENTED_POOL:
      throw Error(Status::out_of_memory, msg);
    case VK_ERROR_LAYER_NOT_PRESENT:
    case VK_ERROR_EXTENSION_NOT_PRESENT:
    case VK_ERROR_FEATURE_NOT_PRESENT:
    case VK_ERROR_INCOMPATIBLE_DRIVER:
      throw Error(Status::unsupported, msg);
    default:
      throw Error(Status::vulkan_error, msg);
  }
}

namespace {
std::mutex g_hook_mutex;
VkFaultHook g_hook;
std::atomic<bool> g_hook_set{false};  // fast path without locking when no test installed a hook
}  // namespace

void set_vk_fault_hook(VkFaultHook hook) {
  std::lock_guard<std::mutex> lock(g_hook_mutex);
  g_hook = std::move(hook);
  g_hook_set = static_cast<bool>(g_hook);
}

VkFaultHook vk_fault_hook() {
  std::lock_guard<std::mutex> lock(g_hook_mutex);
  return g_hook;
}

VkResult vk_fault_for(const char* call) {
  if (!g_hook_set) return VK_SUCCESS;
  std::lock_guard<std::mutex> lock(g_hook_mutex);
  return g_hook ? g_hook(call) : VK_SUCCESS;
}

}  // namespace diffvk
