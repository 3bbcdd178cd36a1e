// VK_KHR_cooperative_matrix's structures and entry point, declared here under diffvk's own names:
// Debian 12's Vulkan headers (1.3.239) and older NDKs predate the extension (1.3.255). Values and
// layouts are those of the Vulkan registry (vulkan_core.h: VkCooperativeMatrixPropertiesKHR,
// VkPhysicalDeviceCooperativeMatrixFeaturesKHR).
#pragma once
#include <vulkan/vulkan.h>

namespace diffvk {

constexpr const char* kCoopmatExtension = "VK_KHR_cooperative_matrix";
constexpr VkStructureType kCoopmatFeaturesSType = static_cast<VkStructureType>(1000506000);
constexpr VkStructureType kCoopmatPropertiesSType = static_cast<VkStructureType>(1000506001);
constexpr int32_t kCoopmatFloat16 = 0;        // VK_COMPONENT_TYPE_FLOAT16_KHR
constexpr int32_t kCoopmatFloat32 = 1;        // VK_COMPONENT_TYPE_FLOAT32_KHR
constexpr int32_t kCoopmatScopeSubgroup = 3;  // VK_SCOPE_SUBGROUP_KHR

struct CoopmatPropertiesKHR {
  VkStructureType sType = kCoopmatPropertiesSType;
  void* pNext = nullptr;
  uint32_t m = 0, n = 0, k = 0;
  int32_t a_type = 0, b_type = 0, c_type = 0, result_type = 0;  // VkComponentTypeKHR
  VkBool32 saturating = VK_FALSE;
  int32_t scope = 0;  // VkScopeKHR
};

struct CoopmatFeaturesKHR {
  VkStructureType sType = kCoopmatFeaturesSType;
  void* pNext = nullptr;
  VkBool32 cooperative_matrix = VK_FALSE;
  VkBool32 robust_buffer_access = VK_FALSE;
};

using PfnCoopmatProperties = VkResult(VKAPI_PTR*)(VkPhysicalDevice, uint32_t*, CoopmatPropertiesKHR*);
constexpr const char* kCoopmatPropertiesFn = "vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR";

}  // namespace diffvk
