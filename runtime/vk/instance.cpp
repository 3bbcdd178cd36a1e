#include "vk/instance.hpp"

#include <dirent.h>
#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <set>
#include <sstream>
#include <vector>

#include "platform.hpp"
#include "vk/tuning.hpp"
#include "vk/vk_check.hpp"

#ifndef DIFFVK_VALIDATION_DEFAULT
#  define DIFFVK_VALIDATION_DEFAULT 0
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

namespace {
#if defined(__x86_64__)
constexpr uint16_t kHostMachine = EM_X86_64;
#elif defined(__aarch64__)
constexpr uint16_t kHostMachine = EM_AARCH64;
#elif defined(__i386__)
constexpr uint16_t kHostMachine = EM_386;
#elif defined(__arm__)
constexpr uint16_t kHostMachine = EM_ARM;
#else
constexpr uint16_t kHostMachine = 0;  // unknown host: no foreign-architecture allowlist
#endif

// The "library_path" of an ICD JSON (crude: the loader's own files are simple).
std::string icd_library_path(const std::string& json_path) {
  std::string t;
  try {  // a regular file only (a FIFO in an ICD directory must not block the context)
    const auto b = platform::read_file(json_path, 1 << 20);
    t.assign(b.begin(), b.end());
  } catch (const Error&) {
    return {};
  }
  size_t k = t.find("\"library_path\"");
  if (k == std::string::npos) return {};
  k = t.find(':', k);
  if (k == std::string::npos) return {};
  const size_t a = t.find('"', k), b = a == std::string::npos ? a : t.find('"', a + 1);
  return b == std::string::npos ? std::string() : t.substr(a + 1, b - a - 1);
}

// ELF machine of a file; 0 when it cannot be read or is not ELF.
uint16_t elf_machine(const std::string& path) {
  // A regular file only, opened without blocking (as platform's open_for_read).
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return 0;
  unsigned char h[20] = {0};
  struct stat st;
  const bool ok = ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && ::pread(fd, h, sizeof h, 0) == ssize_t(sizeof h);
  ::close(fd);
  if (!ok) return 0;
  if (std::memcmp(h, ELFMAG, SELFMAG) != 0) return 0;
  const bool le = h[EI_DATA] == ELFDATA2LSB;
  return le ? uint16_t(h[18] | (h[19] << 8)) : uint16_t((h[18] << 8) | h[19]);
}
}  // namespace

std::vector<std::string> known_loader_messages() {
  // The loader reports every installed driver it cannot load. The known, harmless case: the ICD JSON of
  // another architecture's Mesa (multiarch packages, e.g. arm64 Mesa installed for the aarch64 cross
  // tests), whose library is a foreign ELF. For exactly those libraries the loader's two messages are
  // allowed, verbatim: the dynamic linker's error for that file (obtained here by the same dlopen, which
  // cannot load a foreign ELF) and loader_icd_scan's "Ignoring this JSON". Anything else fails tests.
  std::vector<std::string> out;
  if (!kHostMachine) return out;
  std::vector<std::string> jsons;
  for (const char* dir : {"/usr/share/vulkan/icd.d", "/etc/vulkan/icd.d", "/usr/local/share/vulkan/icd.d"}) {
    if (DIR* d = ::opendir(dir)) {
      while (const dirent* e = ::readdir(d)) {
        const std::string n = e->d_name;
        if (n.size() > 5 && n.compare(n.size() - 5, 5, ".json") == 0) jsons.push_back(std::string(dir) + "/" + n);
      }
      ::closedir(d);
    }
  }
  for (const std::string& f : read_device_environment().icd_files) jsons.push_back(f);
  std::set<std::string> seen;
  for (const auto& j : jsons) {
    const std::string lib = icd_library_path(j);
    if (lib.empty() || lib[0] != '/' || !seen.insert(lib).second) continue;
    const uint16_t m = elf_machine(lib);
    if (m == 0 || m == kHostMachine) continue;
    if (void* h = ::dlopen(lib.c_str(), RTLD_LAZY | RTLD_LOCAL)) {  // cannot happen for a foreign ELF
      ::dlclose(h);
      continue;
    }
    const char* err = ::dlerror();
    if (err) out.push_back(err);
    out.push_back("loader_icd_scan: Failed loading library associated with ICD JSON " + lib + ". Ignoring this JSON");
  }
  return out;
}

bool validation_requested(int option, const std::string& env) {
  if (option == 0 || option == 1) return option == 1;
  if (!env.empty()) return env != "0";
  return DIFFVK_VALIDATION_DEFAULT != 0;
}

Instance::Instance(int validation, std::function<void(MessageSeverity, const std::string&)> on_message)
    : on_message_(std::move(on_message)) {
  validation_ = validation_requested(validation, read_device_environment().validation);
  if (validation_) allowed_messages_ = known_loader_messages();
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
  messenger_ci.messageSeverity =
      VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT | VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT;
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

namespace {
template <class F>
F instance_fn(VkInstance instance, const char* core, const char* khr) {
  auto f = reinterpret_cast<F>(vkGetInstanceProcAddr(instance, core));
  if (!f) f = reinterpret_cast<F>(vkGetInstanceProcAddr(instance, khr));
  if (!f)
    throw Error(Status::unsupported, std::string("the Vulkan instance has no ") + core + " (Vulkan 1.1) nor " + khr +
                                         "; diffvk needs Vulkan 1.1");
  return f;
}
}  // namespace

void physical_device_features2(VkInstance instance, VkPhysicalDevice pd, VkPhysicalDeviceFeatures2* f) {
  instance_fn<PFN_vkGetPhysicalDeviceFeatures2>(instance, "vkGetPhysicalDeviceFeatures2",
                                                "vkGetPhysicalDeviceFeatures2KHR")(pd, f);
}
void physical_device_properties2(VkInstance instance, VkPhysicalDevice pd, VkPhysicalDeviceProperties2* p) {
  instance_fn<PFN_vkGetPhysicalDeviceProperties2>(instance, "vkGetPhysicalDeviceProperties2",
                                                  "vkGetPhysicalDeviceProperties2KHR")(pd, p);
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
  (void)types;
  // Every warning/error, of any type (validation, performance, general), is reported, except the
  // loader messages on the exact-match allowlist (known_loader_messages): those are logged only.
  bool allowed = false;
  if (self)
    for (const auto& a : self->allowed_messages_)
      if (msg == a) allowed = true;
  platform::log(is_error ? platform::LogLevel::error : platform::LogLevel::warn,
                std::string(allowed ? "vulkan (allowlisted loader message): " : "validation: ") + msg);
  if (!allowed && self && self->on_message_)
    self->on_message_(is_error ? MessageSeverity::error : MessageSeverity::warning, msg);
  return VK_FALSE;
}

}  // namespace diffvk
