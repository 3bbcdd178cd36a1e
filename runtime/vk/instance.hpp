// Vulkan instance with optional Khronos validation (synchronization validation on) and a debug messenger.
#pragma once
#include <vulkan/vulkan.h>

#include <functional>
#include <string>
#include <vector>

#include "diffvk/device.hpp"

namespace diffvk {

class Instance {
 public:
  // validation: -1 = DIFFVK_VALIDATION env or build default, 0 off, 1 on.
  Instance(int validation, std::function<void(MessageSeverity, const std::string&)> on_message);
  ~Instance();
  Instance(const Instance&) = delete;
  Instance& operator=(const Instance&) = delete;

  VkInstance handle() const { return instance_; }
  uint32_t api_version() const { return api_version_; }
  bool validation() const { return validation_; }

 private:
  static VKAPI_ATTR VkBool32 VKAPI_CALL on_debug(VkDebugUtilsMessageSeverityFlagBitsEXT severity,
                                                 VkDebugUtilsMessageTypeFlagsEXT types,
                                                 const VkDebugUtilsMessengerCallbackDataEXT* data, void* user);
  VkInstance instance_ = VK_NULL_HANDLE;
  VkDebugUtilsMessengerEXT messenger_ = VK_NULL_HANDLE;
  uint32_t api_version_ = VK_API_VERSION_1_1;
  bool validation_ = false;
  std::function<void(MessageSeverity, const std::string&)> on_message_;
  std::vector<std::string> allowed_messages_;  // known_loader_messages(), matched exactly
};

// The exact texts of the loader messages that do not fail tests: for each installed ICD JSON whose
// library is an ELF of another architecture (multiarch Mesa packages), the dynamic linker's error and
// loader_icd_scan's "Failed loading library associated with ICD JSON <lib>. Ignoring this JSON".
std::vector<std::string> known_loader_messages();

// Resolves the validation request: explicit 0/1 wins, else DIFFVK_VALIDATION=0/1 (`env`: its value, "" when
// unset; runtime/vk/tuning.hpp's read_device_environment), else the build default.
bool validation_requested(int option, const std::string& env);

// vkGetPhysicalDeviceFeatures2 / Properties2 through vkGetInstanceProcAddr: the library imports only Vulkan 1.0
// entry points (.ci/check-vulkan-imports), so that it loads where the system's libvulkan.so exports no 1.1 symbol
// (Android before API 28) and refuses the device with an error there (Instance: the loader's version) instead of
// failing to load. Throws unsupported where the instance has neither the core nor the KHR entry point.
void physical_device_features2(VkInstance instance, VkPhysicalDevice pd, VkPhysicalDeviceFeatures2* f);
void physical_device_properties2(VkInstance instance, VkPhysicalDevice pd, VkPhysicalDeviceProperties2* p);

// Probes one physical device (pure query, no logical device).
DeviceCaps probe_device(VkInstance instance, VkPhysicalDevice pd, uint32_t index, uint32_t instance_api);

// Fills caps.quirks from the named table (runtime/vk/quirks.cpp).
void apply_quirks(DeviceCaps& caps);
// Adds the named quirk of that table as if the driver matched it (the tuning override quirk=NAME, e.g.
// ContextOptions::force_quirks, a test hook). Throws Error(invalid_argument) for a name the table does not have.
void force_quirk(DeviceCaps& caps, const std::string& name);
// Removes the named quirk, if present (the tuning's overrides, runtime/vk/tuning.cpp).
void drop_quirk(DeviceCaps& caps, const char* name);
// The names of the quirk table, in its order.
std::vector<const char*> quirk_names();

}  // namespace diffvk
