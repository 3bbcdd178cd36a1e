// Device listing/selection, logical device creation, pipeline cache persistence, and Context.
#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <cstring>

#include "diffvk/pipeline_cache.hpp"
#include "vk/coopmat_khr.hpp"
#include "vk/gpu.hpp"
#include "vk/instance.hpp"
#include "vk/pipeline_cache_file.hpp"
#include "vk/selftest.hpp"
#include "platform.hpp"
#include "vk/shader_blob.hpp"
#include "vk/tuning.hpp"

namespace diffvk {

namespace {
using platform::LogLevel;

std::vector<VkPhysicalDevice> physical_devices(VkInstance instance) {
  uint32_t n = 0;
  DVK_CHECK(vkEnumeratePhysicalDevices(instance, &n, nullptr));
  std::vector<VkPhysicalDevice> pds(n);
  DVK_CHECK(vkEnumeratePhysicalDevices(instance, &n, pds.data()));
  pds.resize(n);
  if (pds.empty())
    throw Error(Status::unsupported,
                "no Vulkan device found (Debian/Ubuntu without a GPU: apt-get install mesa-vulkan-drivers)");
  return pds;
}

int kind_rank(DeviceKind k) {
  switch (k) {
    case DeviceKind::discrete:
      return 0;
    case DeviceKind::integrated:
      return 1;
    case DeviceKind::virtual_gpu:
      return 2;
    case DeviceKind::cpu:
      return 3;
    default:
      return 4;
  }
}

std::string lower(std::string s) {
  for (auto& ch : s) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return s;
}

// The device line's words on cooperative matrices: nothing where the driver lists none.
std::string coopmat_summary(const Device& d) {
  const DeviceCaps& c = d.caps();
  if (d.coopmat())
    return ", cooperative matrices " + c.coopmat_shape() +
           (c.has_quirk("coopmat_emulated") ? " (enabled; the matmul keeps its scalar path: quirk coopmat_emulated)"
            : c.coopmat_note.empty()        ? ""
                                            : " (" + c.coopmat_note + ")");
  if (!c.coopmat_shapes.empty()) return ", no cooperative matrices (" + c.coopmat_note + ")";
  return "";
}
}  // namespace

std::vector<DeviceCaps> list_devices() {
  Instance inst(0, nullptr);
  std::vector<DeviceCaps> out;
  auto pds = physical_devices(inst.handle());
  for (uint32_t i = 0; i < pds.size(); ++i) out.push_back(probe_device(inst.handle(), pds[i], i, inst.api_version()));
  return out;
}

uint32_t select_device(const std::vector<DeviceCaps>& devices, const std::string& selector) {
  if (devices.empty()) throw Error(Status::unsupported, "no Vulkan device to select from");
  if (selector.empty()) {
    auto best = std::min_element(devices.begin(), devices.end(), [](const DeviceCaps& a, const DeviceCaps& b) {
      return kind_rank(a.kind) != kind_rank(b.kind) ? kind_rank(a.kind) < kind_rank(b.kind) : a.index < b.index;
    });
    return best->index;
  }
  const bool numeric = std::all_of(selector.begin(), selector.end(),
                                   [](char ch) { return std::isdigit(static_cast<unsigned char>(ch)); });
  if (numeric) {
    if (selector.size() > 6 || std::stoul(selector) >= devices.size())
      throw Error(Status::invalid_argument, "device index " + selector +
                                                " out of range: " + std::to_string(devices.size()) +
                                                " device(s) found (see `diffvk info`)");
    return devices[std::stoul(selector)].index;
  }
  for (const auto& d : devices)
    if (lower(d.name).find(lower(selector)) != std::string::npos) return d.index;
  std::string names;
  for (const auto& d : devices) names += "\n  [" + std::to_string(d.index) + "] " + d.name;
  throw Error(Status::invalid_argument, "no Vulkan device name contains '" + selector + "'; devices:" + names);
}

std::unique_ptr<Device> Device::create(const ContextOptions& options, DeviceMode mode) {
  if (mode == DeviceMode::statistics_only && !options.pipeline_cache_path.empty())
    throw Error(Status::invalid_argument, "a device opened for pipeline statistics only uses no pipeline cache (" +
                                              options.pipeline_cache_path + ")");
  if (!options.pipeline_cache && !options.pipeline_cache_path.empty())
    throw Error(Status::invalid_argument,
                "pipeline_cache is off but pipeline_cache_path is set (" + options.pipeline_cache_path + "): give one");
  std::unique_ptr<Device> d(new Device());
  d->mode_ = mode;
  d->instance_ = std::make_unique<Instance>(options.validation, options.on_validation_message);
  VkInstance inst = d->instance_->handle();
  auto pds = physical_devices(inst);
  std::vector<DeviceCaps> all;
  for (uint32_t i = 0; i < pds.size(); ++i) all.push_back(probe_device(inst, pds[i], i, d->instance_->api_version()));
  const DeviceEnvironment env = read_device_environment();
  const std::string selector = options.device.empty() ? env.device : options.device;
  const uint32_t idx = select_device(all, selector);
  d->physical_ = pds[idx];
  d->caps_ = all[idx];
  // The simulated limits first (ContextOptions::simulate_*), so that the tuning and everything planned from the caps
  // plans for the simulated device.
  simulate_limits(d->caps_, options);
  // The tuning: caps, then quirks (probe_device applied the table) and the device rule table, then the overrides, then
  // the precision (runtime/vk/tuning.cpp): the one place that decides fp16, subgroup arithmetic, integer dot
  // products, K/V staging and cooperative matrices.
  d->tuning_ = apply_tuning(d->caps_, tuning_overrides(options, env));
  const DeviceCaps& c = d->caps_;
  const uint32_t api = std::min(c.api_version, d->instance_->api_version());
  if (api < VK_API_VERSION_1_1)
    throw Error(Status::unsupported, "device '" + c.name + "' supports only Vulkan 1.0; diffvk needs 1.1");

  // Precision: the tuning's fp16 under ContextOptions::precision.
  const bool fp16_ok = d->tuning_.fp16;
  apply_precision(d->tuning_, d->caps_, options.precision);
  d->fp16_ = d->tuning_.fp16;
  if (options.precision == Precision::automatic && !fp16_ok)
    platform::log(LogLevel::warn,
                  "device '" + c.name + "' has no usable fp16 storage path (storage16=" +
                      std::to_string(c.storage_16bit) + ", shaderFloat16=" + std::to_string(c.fp16_arithmetic) +
                      "; fp16 off: " + d->tuning_.why("fp16") + "): falling back to fp32 shader variants");
  d->subgroup_ = d->tuning_.subgroup;
  if (!d->subgroup_)
    platform::log(LogLevel::info,
                  "subgroup arithmetic off (" + d->tuning_.why("subgroup") + "): using shared-memory reductions");

  // Queue family: prefer a compute-only family, else any with compute.
  uint32_t nq = 0;
  vkGetPhysicalDeviceQueueFamilyProperties(d->physical_, &nq, nullptr);
  std::vector<VkQueueFamilyProperties> qf(nq);
  vkGetPhysicalDeviceQueueFamilyProperties(d->physical_, &nq, qf.data());
  uint32_t family = UINT32_MAX;
  for (uint32_t i = 0; i < nq && family == UINT32_MAX; ++i)
    if (qf[i].queueFlags & VK_QUEUE_COMPUTE_BIT) family = i;
  if (family == UINT32_MAX) throw Error(Status::unsupported, "device '" + c.name + "' has no compute queue");
  d->queue_family_ = family;

  // Enable exactly what the kernels need: 16-bit storage + shaderFloat16 for the fp16 variants.
  float prio = 1.0f;
  VkDeviceQueueCreateInfo qci{VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO};
  qci.queueFamilyIndex = family;
  qci.queueCount = 1;
  qci.pQueuePriorities = &prio;
  VkPhysicalDeviceFeatures2 f2{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
  VkPhysicalDevice16BitStorageFeatures s16{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_16BIT_STORAGE_FEATURES};
  VkPhysicalDeviceShaderFloat16Int8Features f16{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_FLOAT16_INT8_FEATURES};
  std::vector<const char*> exts;
  // Puts a feature struct at the head of f2's pNext chain (what vkCreateDevice enables).
  const auto chain = [&f2](auto& feature) {
    feature.pNext = f2.pNext;
    f2.pNext = &feature;
  };
  if (d->fp16_) {
    s16.storageBuffer16BitAccess = VK_TRUE;
    f16.shaderFloat16 = VK_TRUE;
    f2.pNext = &s16;
    s16.pNext = &f16;
    if (api < VK_API_VERSION_1_2) exts.push_back(VK_KHR_SHADER_FLOAT16_INT8_EXTENSION_NAME);
  }
  // Subgroup size control (Vulkan 1.3 core, else VK_EXT_subgroup_size_control): lets the attention
  // pipelines ask for the subgroup size their lanes need (PipelineDesc::subgroup_size).
  VkPhysicalDeviceSubgroupSizeControlFeaturesEXT sscf{
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_SIZE_CONTROL_FEATURES_EXT};
  if (c.subgroup_size_control) {
    sscf.subgroupSizeControl = VK_TRUE;
    sscf.computeFullSubgroups = VK_TRUE;
    chain(sscf);
    if (api < VK_API_VERSION_1_3) exts.push_back(VK_EXT_SUBGROUP_SIZE_CONTROL_EXTENSION_NAME);
  }
  // Integer dot products (the int8 decode path: linear_row.comp's variant linear_row_dot).
  VkPhysicalDeviceShaderIntegerDotProductFeatures idot{
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_FEATURES};
  if (c.integer_dot_product) {
    idot.shaderIntegerDotProduct = VK_TRUE;
    chain(idot);
    if (api < VK_API_VERSION_1_3) exts.push_back(VK_KHR_SHADER_INTEGER_DOT_PRODUCT_EXTENSION_NAME);
  }
  // Cooperative matrices (linear_coopmat.comp): the extension, its feature and the Vulkan memory
  // model its SPIR-V declares; only with fp16 storage (the shader's inputs are float16).
  CoopmatFeaturesKHR coopf;
  VkPhysicalDeviceVulkanMemoryModelFeatures vmm{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_MEMORY_MODEL_FEATURES};
  if (d->coopmat()) {
    coopf.cooperative_matrix = VK_TRUE;
    chain(coopf);
    vmm.vulkanMemoryModel = VK_TRUE;
    vmm.vulkanMemoryModelDeviceScope = VK_TRUE;  // probed with it: the split attention's device-scope barriers need it
    chain(vmm);
    exts.push_back(kCoopmatExtension);
    if (api < VK_API_VERSION_1_2) exts.push_back(VK_KHR_VULKAN_MEMORY_MODEL_EXTENSION_NAME);
  }
  // Statistics mode: VK_KHR_pipeline_executable_properties when the driver has it (lavapipe does not).
  VkPhysicalDevicePipelineExecutablePropertiesFeaturesKHR exec{
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PIPELINE_EXECUTABLE_PROPERTIES_FEATURES_KHR};
  if (mode == DeviceMode::statistics_only) {
    uint32_t n = 0;
    DVK_CHECK(vkEnumerateDeviceExtensionProperties(d->physical_, nullptr, &n, nullptr));
    std::vector<VkExtensionProperties> props(n);
    DVK_CHECK(vkEnumerateDeviceExtensionProperties(d->physical_, nullptr, &n, props.data()));
    props.resize(n);
    const bool has_ext = std::any_of(props.begin(), props.end(), [](const VkExtensionProperties& e) {
      return std::strcmp(e.extensionName, VK_KHR_PIPELINE_EXECUTABLE_PROPERTIES_EXTENSION_NAME) == 0;
    });
    if (has_ext) {
      VkPhysicalDeviceFeatures2 q{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
      q.pNext = &exec;
      physical_device_features2(d->instance_->handle(), d->physical_, &q);
      exec.pNext = nullptr;
    }
    if (has_ext && exec.pipelineExecutableInfo) {
      chain(exec);
      exts.push_back(VK_KHR_PIPELINE_EXECUTABLE_PROPERTIES_EXTENSION_NAME);
      d->exec_props_ = true;
    } else {
      platform::log(LogLevel::info, "device '" + c.name + "' has no " +
                                        (has_ext ? std::string("pipelineExecutableInfo feature")
                                                 : std::string(VK_KHR_PIPELINE_EXECUTABLE_PROPERTIES_EXTENSION_NAME)) +
                                        ": pipeline statistics are unavailable on this driver");
    }
  }
  VkDeviceCreateInfo dci{VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO};
  dci.pNext = &f2;
  dci.queueCreateInfoCount = 1;
  dci.pQueueCreateInfos = &qci;
  dci.enabledExtensionCount = static_cast<uint32_t>(exts.size());
  dci.ppEnabledExtensionNames = exts.data();
  DVK_CHECK(vkCreateDevice(d->physical_, &dci, nullptr, &d->device_));
  vkGetDeviceQueue(d->device_, family, 0, &d->queue_);
  if (mode == DeviceMode::statistics_only) {
    platform::log(LogLevel::info, "device [" + std::to_string(c.index) + "] " + c.name +
                                      ": opened for pipeline statistics only (" + (d->fp16_ ? "fp16 storage" : "fp32") +
                                      ", subgroup " + std::to_string(c.subgroup_size) +
                                      (d->subgroup_ ? " (arithmetic)" : " (shared-memory reductions)") + ")");
    return d;  // no command pool, fence or pipeline cache: nothing may execute on this device
  }

  VkCommandPoolCreateInfo pci{VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO};
  pci.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT;
  pci.queueFamilyIndex = family;
  DVK_CHECK(vkCreateCommandPool(d->device_, &pci, nullptr, &d->pool_));
  VkFenceCreateInfo fci{VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
  DVK_CHECK(vkCreateFence(d->device_, &fci, nullptr, &d->fence_));

  if (mode != DeviceMode::statistics_only && options.pipeline_cache) {
    d->cache_default_ = options.pipeline_cache_path.empty();
    d->cache_path_ = d->cache_default_ ? default_pipeline_cache_path(c) : options.pipeline_cache_path;
    if (d->cache_path_.empty()) d->cache_state_ = "none (no cache directory)";
  }
  d->load_pipeline_cache();
  platform::log(LogLevel::info,
                "device [" + std::to_string(c.index) + "] " + c.name + ": " + (d->fp16_ ? "fp16 storage" : "fp32") +
                    ", subgroup " + std::to_string(c.subgroup_size) +
                    (d->subgroup_ ? " (arithmetic)" : " (shared-memory reductions)") + coopmat_summary(*d) +
                    (c.simulated.empty() ? "" : "; simulated (ContextOptions::simulate_*): " + c.simulated));
  return d;
}

Device::~Device() {
  if (device_) {
    if (mode_ != DeviceMode::statistics_only) {
      std::lock_guard<std::mutex> lock(queue_mutex_);
      vkDeviceWaitIdle(device_);
    }
    zero_.reset();
    release_parked_pipelines();
    if (cache_) {
      try {
        save_pipeline_cache();
      } catch (const std::exception& e) {
        platform::log(LogLevel::warn, std::string("pipeline cache not saved: ") + e.what());
      }
      vkDestroyPipelineCache(device_, cache_, nullptr);
    }
    if (fence_) vkDestroyFence(device_, fence_, nullptr);
    if (pool_) vkDestroyCommandPool(device_, pool_, nullptr);
    vkDestroyDevice(device_, nullptr);
  }
}

bool Device::validation() const { return instance_->validation(); }

void Device::park_pipelines(bool on) {
  std::lock_guard<std::mutex> lock(shared_mutex_);
  park_ = on;
}

void Device::release_parked_pipelines() noexcept {
  std::lock_guard<std::mutex> lock(shared_mutex_);
  park_ = false;
  for (auto it = shared_.begin(); it != shared_.end();) {
    if (it->second.refs != 0) {
      ++it;
      continue;
    }
    if (it->second.pipeline) vkDestroyPipeline(device_, it->second.pipeline, nullptr);
    if (it->second.layout) vkDestroyPipelineLayout(device_, it->second.layout, nullptr);
    if (it->second.set_layout) vkDestroyDescriptorSetLayout(device_, it->second.set_layout, nullptr);
    it = shared_.erase(it);
  }
}

void Device::defer_selftest(const std::vector<std::string>& ops, FirstUseTest test) {
  std::lock_guard<std::mutex> lock(first_use_mutex_);
  first_use_.clear();
  for (const std::string& op : ops) first_use_[op] = FirstUse{};
  first_use_test_ = std::move(test);
}

void Device::test_before_first_use(const std::string& op) {
  std::lock_guard<std::mutex> lock(first_use_mutex_);
  auto it = first_use_.find(op);
  if (it == first_use_.end() || !first_use_test_) return;
  if (!it->second.tested) {
    try {
      first_use_test_(*this, op);
    } catch (const Error& e) {
      if (e.status() == Status::device_lost) throw;  // not a verdict: the next call tests again (and meets the loss)
      it->second.error = e.what();
    }
    it->second.tested = true;
  }
  if (!it->second.error.empty()) throw Error(Status::unsupported, it->second.error);
}

std::vector<std::string> Device::selftest_untested() const {
  std::lock_guard<std::mutex> lock(first_use_mutex_);
  std::vector<std::string> ops;
  for (const auto& e : first_use_)
    if (!e.second.tested) ops.push_back(e.first);
  return ops;
}

std::vector<std::string> Device::parked_pipelines() const {
  std::lock_guard<std::mutex> lock(shared_mutex_);
  std::vector<std::string> keys;
  for (const auto& e : shared_)
    if (e.second.refs == 0) keys.push_back(e.first);
  return keys;
}

void Device::require_execution(const std::string& what) const {
  if (mode_ == DeviceMode::statistics_only)
    throw Error(Status::unsupported,
                what + ": the device '" + caps_.name +
                    "' was opened for pipeline statistics only (diffvk shader-stats), which allocates, "
                    "records and submits nothing");
}

VkCommandPool Device::command_pool() const {
  require_execution("command pool");
  return pool_;
}

std::vector<const Pipeline*> Device::pipelines() const {
  std::lock_guard<std::mutex> lock(pipelines_mutex_);
  return pipelines_;
}

void Device::set_pipeline_group(std::string group) {
  std::lock_guard<std::mutex> lock(pipelines_mutex_);
  pipeline_group_ = std::move(group);
}

std::string Device::pipeline_group() const {
  std::lock_guard<std::mutex> lock(pipelines_mutex_);
  return pipeline_group_;
}

void Device::register_pipeline(const Pipeline* p) {
  std::lock_guard<std::mutex> lock(pipelines_mutex_);
  pipelines_.push_back(p);
}

void Device::unregister_pipeline(const Pipeline* p) noexcept {
  std::lock_guard<std::mutex> lock(pipelines_mutex_);
  pipelines_.erase(std::remove(pipelines_.begin(), pipelines_.end(), p), pipelines_.end());
}

uint32_t Device::find_memory_type(uint32_t bits, VkMemoryPropertyFlags required,
                                  VkMemoryPropertyFlags preferred) const {
  uint32_t fallback = UINT32_MAX;
  for (uint32_t i = 0; i < caps_.memory_types.size(); ++i) {
    if (!(bits & (1u << i))) continue;
    const uint32_t f = caps_.memory_types[i].flags;
    if ((f & required) != required) continue;
    if ((f & preferred) == preferred) return i;
    if (fallback == UINT32_MAX) fallback = i;
  }
  return fallback;
}

VkCommandBuffer Device::begin_one_shot() {
  require_execution("one-shot command buffer");
  VkCommandBufferAllocateInfo ai{VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
  ai.commandPool = pool_;
  ai.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
  ai.commandBufferCount = 1;
  VkCommandBuffer cb = VK_NULL_HANDLE;
  DVK_CHECK(vkAllocateCommandBuffers(device_, &ai, &cb));
  VkCommandBufferBeginInfo bi{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
  bi.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
  VkResult r = vk_fault_for("vkBeginCommandBuffer");
  if (r == VK_SUCCESS) r = vkBeginCommandBuffer(cb, &bi);
  if (r != VK_SUCCESS) {
    vkFreeCommandBuffers(device_, pool_, 1, &cb);
    vk_check(r, "vkBeginCommandBuffer");
  }
  return cb;
}

void Device::abandon_one_shot(VkCommandBuffer cb) {
  vkEndCommandBuffer(cb);
  vkFreeCommandBuffers(device_, pool_, 1, &cb);
}

void Device::end_one_shot(VkCommandBuffer cb) {
  struct Free {
    Device* d;
    VkCommandBuffer cb;
    ~Free() { vkFreeCommandBuffers(d->device_, d->pool_, 1, &cb); }
  } guard{this, cb};
  DVK_CHECK(vkEndCommandBuffer(cb));
  submit_and_wait(cb, fence_);
}

void Device::check_not_lost() const {
  if (lost())
    throw Error(Status::device_lost, "the Vulkan device '" + caps_.name +
                                         "' was lost earlier: this context and every model and session created from it "
                                         "are unusable; destroy them and create a new context");
}

void Device::submit_and_wait(const VkCommandBuffer* cbs, uint32_t count, VkFence fence) {
  require_execution("queue submission");
  check_not_lost();
  try {
    VkSubmitInfo si{VK_STRUCTURE_TYPE_SUBMIT_INFO};
    si.commandBufferCount = count;
    si.pCommandBuffers = cbs;
    DVK_CHECK(vkResetFences(device_, 1, &fence));
    {
      std::lock_guard<std::mutex> lock(queue_mutex_);  // VkQueue is externally synchronised
      DVK_CHECK(vkQueueSubmit(queue_, 1, &si, fence));
    }
    VkResult r = vk_fault_for("vkWaitForFences");
    if (r == VK_SUCCESS) r = vkWaitForFences(device_, 1, &fence, VK_TRUE, UINT64_MAX);  // no lock held
    if (r < 0) {
      // A failed wait (out of memory is allowed) may leave the submission executing: drain the queue so
      // that callers can free the command buffer and the resources it uses. After a device loss this
      // returns at once.
      {
        std::lock_guard<std::mutex> lock(queue_mutex_);
        vkQueueWaitIdle(queue_);
      }
      vk_check(r, "vkWaitForFences");
    }
  } catch (const Error& e) {
    if (e.status() == Status::device_lost) mark_lost();
    throw;
  }
}

namespace {
PipelineCacheKey cache_key(const DeviceCaps& c) {
  PipelineCacheKey k{};
  std::memcpy(k.device_uuid, c.pipeline_cache_uuid.data(), 16);
  k.vendor_id = c.vendor_id;
  k.device_id = c.device_id;
  k.driver_version = c.driver_version;
  k.spirv_hash = embedded_shaders_hash();
  return k;
}
}  // namespace

void Device::load_pipeline_cache() {
  std::vector<uint8_t> blob;
  if (!cache_path_.empty()) {
    std::vector<uint8_t> file;
    std::string why;
    try {
      file = platform::read_file(cache_path_, 1ull << 30);
    } catch (const Error& e) {
      why = e.what();
    }
    if (auto data = decode_pipeline_cache(file, cache_key(caps_), &why)) {
      blob = std::move(*data);
      cache_saved_hash_ = fnv1a64(blob.data(), blob.size());
      platform::log(LogLevel::info,
                    "pipeline cache hit: " + cache_path_ + " (" + std::to_string(blob.size()) + " bytes)");
      cache_state_ = "hit";
    } else {
      platform::log(LogLevel::info, "pipeline cache miss (" + why + "): " + cache_path_);
      cache_state_ = "miss (" + why + ")";
    }
  }
  VkPipelineCacheCreateInfo ci{VK_STRUCTURE_TYPE_PIPELINE_CACHE_CREATE_INFO};
  ci.initialDataSize = blob.size();
  ci.pInitialData = blob.empty() ? nullptr : blob.data();
  VkResult r = vkCreatePipelineCache(device_, &ci, nullptr, &cache_);
  if (r != VK_SUCCESS && !blob.empty()) {
    platform::log(LogLevel::warn, "driver rejected the pipeline cache data; starting empty");
    ci.initialDataSize = 0;
    ci.pInitialData = nullptr;
    r = vkCreatePipelineCache(device_, &ci, nullptr, &cache_);
  }
  vk_check(r, "vkCreatePipelineCache");
}

void Device::save_pipeline_cache() {
  if (cache_path_.empty() || !cache_) return;
  size_t size = 0;
  DVK_CHECK(vkGetPipelineCacheData(device_, cache_, &size, nullptr));
  std::vector<uint8_t> data(size);
  DVK_CHECK(vkGetPipelineCacheData(device_, cache_, &size, data.data()));
  data.resize(size);
  const uint64_t hash = fnv1a64(data.data(), data.size());
  if (hash == cache_saved_hash_) return;  // nothing new since it was loaded or last written
  std::string why;
  // The default file: never replace what is not ours (a named file is the caller's to check: pipeline_cache.hpp).
  if (cache_default_ && !pipeline_cache_path_replaceable(cache_path_, &why))
    throw Error(Status::io_error, "pipeline cache " + cache_path_ + " not written: the file there is " + why);
  if (cache_default_) platform::make_dirs(cache_path_.substr(0, cache_path_.rfind('/')));  // a named file's is not
  auto file = encode_pipeline_cache(cache_key(caps_), data.data(), data.size());
  platform::write_file_atomic(cache_path_, file.data(), file.size());
  cache_saved_hash_ = hash;
}

// ---- Context -------------------------------------------------------------------
Context::Context(std::unique_ptr<Device> d) : device_(std::move(d)) {}
Context::~Context() = default;
std::unique_ptr<Context> Context::create(const ContextOptions& options) {
  SelftestReport report;
  std::unique_ptr<Device> d = open_tested_device(options, report);  // Device::create, then the self-test at load
  d->set_selftest(std::move(report));
  return std::unique_ptr<Context>(new Context(std::move(d)));
}
const DeviceCaps& Context::caps() const { return device_->caps(); }
const Tuning& Context::tuning() const { return device_->tuning(); }
const SelftestReport& Context::selftest() const { return device_->selftest(); }
Precision Context::precision() const { return device_->fp16() ? Precision::fp16 : Precision::fp32; }
bool Context::validation_enabled() const { return device_->validation(); }
void Context::save_pipeline_cache() { device_->save_pipeline_cache(); }
const std::string& Context::pipeline_cache_path() const { return device_->pipeline_cache_path(); }
bool Context::lost() const { return device_->lost(); }
Device& Context::device() { return *device_; }

}  // namespace diffvk
