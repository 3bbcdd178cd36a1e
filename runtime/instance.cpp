#include "instance.hpp"

#include <cstdlib>
#include <cstring>
#include <vector>

#include "platform.hpp"
#include "vk_check.hpp"

#ifndef DIFFVK_VALIDATION_DEFAULT
#define DIFFVK_VALIDATION_DEFAULT 0
#endif

namespace diffvk {

namespace {
constexpr const char* kValidationLayer = "VK_LAYER_KHRONOS_validation";

bool has_layer(const char* name) {
  uint32_t n = 0;
  if (vkEnumerateInstanceLayerProperties(&n, nullptr) != VK_SUCCESS) return false;
  std::vector<VkLayerProperties> layers(n);
  if (vkEnumerateInstanceLayerProperties(&n, layers.data()) != VK_SUCCESS) return false;
  for (auto& l : layers)
    if (std::strcmp(l.layerName, name) == 0) return true;
  return false;
}
}  // namespace

bool validation_requested(int option) {
  if (option == 0 || option == 1) return option == 1;
  if (const char* env = std::getenv("DIFFVK_VALIDATION"); env && *env) return std::strcmp(env, "0") != 0;
  return DIFFVK_VALIDATION_DEFAULT != 0;
}

Instance::Instance(int validation, std::function<void(MessageSeverity, const std::string&)> on_message)
    : on_message_(std::move(on_message)) {
  validation_ = validation_requested(validation);
  uint32_t loader_version = VK_API_VERSION_1_0;
  auto enum_version = reinterpret_cast<PFN_vkEnumerateInstanceVersion>(
      vkGetInstanceProcAddr(VK_NULL_HANDLE, "vkEnumerateInstanceVersion"));
  if (enum_version) enum_version(&loader_version);
  if (loader_version < VK_API_VERSION_1_1)
    throw Error(Status::unsupported, "the Vulkan loader supports only Vulkan 1.0; diffvk needs Vulkan 1.1");
  api_version_ = loader_version < VK_API_VERSION_1_3 ? loader_version : VK_API_VERSION_1_3;

  std::vector<const char*> layers, extensions;
  VkValidationFeatureEnableEXT enables[] = {VK_VALIDATION_FEATURE_ENABLE_SYNCHRONIZATION_VALIDATION_EXT};
  VkValidationFeaturesEXT features{VK_STRUCTURE_TYPE_VALIDATION_FEATURES_EXT};
  features.enabledValidationFeatureCount = 1;
  features.pEnabledValidationFeatures = enables;
  VkDebugUtilsMessengerCreateInfoEXT messenger_ci{VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT};
  messenger_ci.messageSeverity = VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT |
                                 VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT;
  messenger_ci.messageType = VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT |
                             VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT |
                             VK_DEBUG_UTILS_MESSAGE_TYPE_PERFORMANCE_BIT_EXT;
  messenger_ci.pfnUserCallback = &Instance::on_debug;
  messenger_ci.pUserData = this;

  VkApplicationInfo app{VK_STRUCTURE_TYPE_APPLICATION_INFO};
  app.pApplicationName = "diffvk";
  app.pEngineName = "diffvk";
  app.apiVersion = api_version_;
  VkInstanceCreateInfo ci{VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO};
  ci.pApplicationInfo = &app;
  if (validation_) {
    if (!has_layer(kValidationLayer))
      throw Error(Status::unsupported,
                  "validation was requested but VK_LAYER_KHRONOS_validation is not installed "
                  "(Debian/Ubuntu: apt-get install vulkan-validationlayers)");
    layers.push_back(kValidationLayer);
    extensions.push_back(VK_EXT_DEBUG_UTILS_EXTENSION_NAME);
    extensions.push_back(VK_EXT_VALIDATION_FEATURES_EXTENSION_NAME);
    // Chain: instance -> validation features -> messenger (also reports instance creation itself).
    features.pNext = &messenger_ci;
    ci.pNext = &features;
  }
  ci.enabledLayerCount = static_cast<uint32_t>(layers.size());
  ci.ppEnabledLayerNames = layers.data();
  ci.enabledExtensionCount = static_cast<uint32_t>(extensions.size());
  ci.ppEnabledExtensionNames = extensions.data();
  VkResult r = vk_fault_for("vkCreateInstance");
  if (r == VK_SUCCESS) r = vkCreateInstance(&ci, nullptr, &instance_);
  if (r == VK_ERROR_INCOMPATIBLE_DRIVER)
    throw Error(Status::unsupported,
                "vkCreateInstance: no Vulkan driver found (Debian/Ubuntu without a GPU: apt-get install "
                "mesa-vulkan-drivers for lavapipe)");
  vk_check(r, "vkCreateInstance");
  if (validation_) {
    auto create = reinterpret_cast<PFN_vkCreateDebugUtilsMessengerEXT>(
        vkGetInstanceProcAddr(instance_, "vkCreateDebugUtilsMessengerEXT"));
    if (!create || create(instance_, &messenger_ci, nullptr, &messenger_) != VK_SUCCESS) {
      vkDestroyInstance(instance_, nullptr);
      throw Error(Status::unsupported, "vkCreateDebugUtilsMessengerEXT failed");
    }
    platform::log(platform::LogLevel::info, "Khronos validation on (synchronization validation enabled)");
  }
}

Instance::~Instance() {
  if (messenger_) {
    auto destroy = reinterpret_cast<PFN_vkDestroyDebugUtilsMessengerEXT>(
        vkGetInstanceProcAddr(instance_, "vkDestroyDebugUtilsMessengerEXT"));
    if (destroy) destroy(instance_, messenger_, nullptr);
  }
  if (instance_) vkDestroyInstance(instance_, nullptr);
}

VKAPI_ATTR VkBool32 VKAPI_CALL Instance::on_debug(VkDebugUtilsMessageSeverityFlagBitsEXT severity,
                                                  VkDebugUtilsMessageTypeFlagsEXT types,
                                                  const VkDebugUtilsMessengerCallbackDataEXT* data, void* user) {
  auto* self = static_cast<Instance*>(user);
  std::string msg = data && data->pMessage ? data->pMessage : "(no message)";
  const bool is_error = severity & VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT;
  // Loader "general" messages (e.g. a foreign-architecture ICD json that cannot be opened) are not
  // validation findings: log them, but do not report them as validation messages.
  const bool validation_msg = types & (VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT |
                                       VK_DEBUG_UTILS_MESSAGE_TYPE_PERFORMANCE_BIT_EXT);
  platform::log(is_error ? platform::LogLevel::error : platform::LogLevel::warn,
                std::string(validation_msg ? "validation: " : "vulkan: ") + msg);
  if (validation_msg && self && self->on_message_)
    self->on_message_(is_error ? MessageSeverity::error : MessageSeverity::warning, msg);
  return VK_FALSE;
}

}  // namespace diffvk
