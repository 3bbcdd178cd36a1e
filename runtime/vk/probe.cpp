// Probing one physical device into DeviceCaps, and the text form `diffvk info` prints.
#include <cstring>
#include <sstream>

#include "vk/coopmat_khr.hpp"
#include "vk/instance.hpp"

namespace diffvk {

namespace {
bool has_extension(VkPhysicalDevice pd, const char* name) {
  uint32_t n = 0;
  vkEnumerateDeviceExtensionProperties(pd, nullptr, &n, nullptr);
  std::vector<VkExtensionProperties> ext(n);
  vkEnumerateDeviceExtensionProperties(pd, nullptr, &n, ext.data());
  for (auto& e : ext)
    if (std::strcmp(e.extensionName, name) == 0) return true;
  return false;
}

std::string version_string(uint32_t v) {
  return std::to_string(VK_API_VERSION_MAJOR(v)) + "." + std::to_string(VK_API_VERSION_MINOR(v)) + "." +
         std::to_string(VK_API_VERSION_PATCH(v));
}

std::string mib(uint64_t bytes) {
  std::ostringstream s;
  if (bytes >= (1ull << 30))
    s << static_cast<double>(bytes) / (1ull << 30) << " GiB";
  else if (bytes >= (1ull << 20))
    s << static_cast<double>(bytes) / (1ull << 20) << " MiB";
  else
    s << static_cast<double>(bytes) / 1024.0 << " KiB";
  return s.str();
}
// Lists the driver's cooperative-matrix shapes and picks the one the matmul uses: A, B float16, C and the
// result float32, subgroup scope, not saturating; 16 x 16 x 16 where listed, else the smallest M·N·K.
void probe_coopmat(DeviceCaps& c, VkInstance instance, VkPhysicalDevice pd, bool feature, bool memory_model) {
  auto fn = reinterpret_cast<PfnCoopmatProperties>(vkGetInstanceProcAddr(instance, kCoopmatPropertiesFn));
  std::vector<CoopmatPropertiesKHR> shapes;
  uint32_t n = 0;
  if (fn && fn(pd, &n, nullptr) == VK_SUCCESS && n > 0 && n < 4096) {
    shapes.resize(n);
    if (fn(pd, &n, shapes.data()) != VK_SUCCESS) n = 0;
    shapes.resize(n);
  }
  auto type = [](int32_t t) -> std::string {
    static const char* const names[] = {"f16", "f32", "f64", "s8", "s16", "s32", "s64", "u8", "u16", "u32", "u64"};
    return t >= 0 && t < 11 ? names[t] : "type" + std::to_string(t);
  };
  const CoopmatPropertiesKHR* best = nullptr;
  for (const auto& s : shapes) {
    c.coopmat_shapes += std::string(c.coopmat_shapes.empty() ? "" : ", ") + std::to_string(s.m) + "x" +
                        std::to_string(s.n) + "x" + std::to_string(s.k) + " " + type(s.a_type) + "*" + type(s.b_type) +
                        "+" + type(s.c_type) + "->" + type(s.result_type) +
                        (s.scope == kCoopmatScopeSubgroup ? " subgroup" : " other scope") +
                        (s.saturating ? " saturating" : "");
    const bool fits = s.a_type == kCoopmatFloat16 && s.b_type == kCoopmatFloat16 && s.c_type == kCoopmatFloat32 &&
                      s.result_type == kCoopmatFloat32 && s.scope == kCoopmatScopeSubgroup && !s.saturating && s.m &&
                      s.n && s.k && s.m <= 64 && s.n <= 64 && s.k <= 64 && s.k % 8 == 0;
    const auto vol = [](const CoopmatPropertiesKHR& x) { return uint64_t(x.m) * x.n * x.k; };
    if (fits && (!best || (s.m == 16 && s.n == 16 && s.k == 16) ||
                 (!(best->m == 16 && best->n == 16 && best->k == 16) && vol(s) < vol(*best))))
      best = &s;
  }
  if (!feature)
    c.coopmat_note = "the cooperativeMatrix feature is off";
  else if (!memory_model)
    c.coopmat_note =
        "no vulkanMemoryModel with device scope (the cooperative-matrix shaders declare the memory model; the "
        "attention's device-scope barriers then need vulkanMemoryModelDeviceScope)";
  else if (!c.storage_16bit || !c.fp16_arithmetic)
    c.coopmat_note = "no fp16 storage and arithmetic";
  else if (!best)
    c.coopmat_note = "no f16*f16+f32->f32 subgroup shape with K a multiple of 8 and sides <= 64";
  else {
    c.coopmat_m = best->m;
    c.coopmat_n = best->n;
    c.coopmat_k = best->k;
  }
}
}  // namespace

DeviceCaps probe_device(VkInstance instance, VkPhysicalDevice pd, uint32_t index, uint32_t instance_api) {
  DeviceCaps c;
  c.index = index;
  VkPhysicalDeviceProperties props;
  vkGetPhysicalDeviceProperties(pd, &props);
  const uint32_t api = props.apiVersion < instance_api ? props.apiVersion : instance_api;
  const bool v12 = api >= VK_API_VERSION_1_2;

  // Properties chain.
  VkPhysicalDeviceProperties2 p2{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2};
  VkPhysicalDeviceSubgroupProperties sub{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES};
  VkPhysicalDeviceIDProperties idp{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_ID_PROPERTIES};
  VkPhysicalDeviceDriverProperties drv{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_DRIVER_PROPERTIES};
  VkPhysicalDeviceSubgroupSizeControlPropertiesEXT ssc{
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_SIZE_CONTROL_PROPERTIES_EXT};
  VkPhysicalDeviceShaderSMBuiltinsPropertiesNV sm{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_SM_BUILTINS_PROPERTIES_NV};
  VkPhysicalDeviceShaderCorePropertiesAMD amd{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_CORE_PROPERTIES_AMD};
#ifdef VK_ARM_SHADER_CORE_BUILTINS_EXTENSION_NAME  // Mali: shader-core count (headers >= 1.3.237)
  VkPhysicalDeviceShaderCoreBuiltinsPropertiesARM arm{
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_CORE_BUILTINS_PROPERTIES_ARM};
  const bool has_arm = has_extension(pd, VK_ARM_SHADER_CORE_BUILTINS_EXTENSION_NAME);
#endif
  p2.pNext = &sub;
  sub.pNext = &idp;
  void** tail = &idp.pNext;
  const bool has_driver = v12 || has_extension(pd, VK_KHR_DRIVER_PROPERTIES_EXTENSION_NAME);
  const bool has_ssc = api >= VK_API_VERSION_1_3 || has_extension(pd, VK_EXT_SUBGROUP_SIZE_CONTROL_EXTENSION_NAME);
  const bool has_sm = has_extension(pd, VK_NV_SHADER_SM_BUILTINS_EXTENSION_NAME);
  const bool has_amd = has_extension(pd, VK_AMD_SHADER_CORE_PROPERTIES_EXTENSION_NAME);
  if (has_driver) {
    *tail = &drv;
    tail = &drv.pNext;
  }
  if (has_ssc) {
    *tail = &ssc;
    tail = &ssc.pNext;
  }
  if (has_sm) {
    *tail = &sm;
    tail = &sm.pNext;
  }
  if (has_amd) {
    *tail = &amd;
    tail = &amd.pNext;
  }
  const bool has_idot =
      api >= VK_API_VERSION_1_3 || has_extension(pd, VK_KHR_SHADER_INTEGER_DOT_PRODUCT_EXTENSION_NAME);
  VkPhysicalDeviceShaderIntegerDotProductProperties idotp{
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_PROPERTIES};
  if (has_idot) {
    *tail = &idotp;
    tail = &idotp.pNext;
  }
#ifdef VK_ARM_SHADER_CORE_BUILTINS_EXTENSION_NAME
  if (has_arm) {
    *tail = &arm;
    tail = &arm.pNext;
  }
#endif
  physical_device_properties2(instance, pd, &p2);

  c.name = props.deviceName;
  switch (props.deviceType) {
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU:
      c.kind = DeviceKind::discrete;
      break;
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU:
      c.kind = DeviceKind::integrated;
      break;
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU:
      c.kind = DeviceKind::virtual_gpu;
      break;
    case VK_PHYSICAL_DEVICE_TYPE_CPU:
      c.kind = DeviceKind::cpu;
      break;
    default:
      c.kind = DeviceKind::other;
      break;
  }
  c.vendor_id = props.vendorID;
  c.device_id = props.deviceID;
  c.api_version = props.apiVersion;
  c.driver_version = props.driverVersion;
  std::memcpy(c.pipeline_cache_uuid.data(), props.pipelineCacheUUID, 16);
  std::memcpy(c.device_uuid.data(), idp.deviceUUID, 16);
  if (has_driver) {
    c.driver_id = drv.driverID;
    c.driver_name = drv.driverName;
    c.driver_info = drv.driverInfo;
  }

  // Features.
  VkPhysicalDeviceFeatures2 f2{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
  VkPhysicalDevice16BitStorageFeatures s16{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_16BIT_STORAGE_FEATURES};
  VkPhysicalDeviceShaderFloat16Int8Features f16{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_FLOAT16_INT8_FEATURES};
  VkPhysicalDeviceSubgroupSizeControlFeaturesEXT sscf{
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_SIZE_CONTROL_FEATURES_EXT};
  f2.pNext = &s16;
  if (v12 || has_extension(pd, VK_KHR_SHADER_FLOAT16_INT8_EXTENSION_NAME)) s16.pNext = &f16;
  if (has_ssc) {  // appended after f16 (or s16)
    sscf.pNext = s16.pNext;
    s16.pNext = &sscf;
  }
  VkPhysicalDeviceShaderIntegerDotProductFeatures idotf{
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_FEATURES};
  if (has_idot) {
    idotf.pNext = s16.pNext;
    s16.pNext = &idotf;
  }
  // Cooperative matrices: the extension's feature, and the Vulkan memory model its shaders need.
  const bool has_coop = has_extension(pd, kCoopmatExtension);
  CoopmatFeaturesKHR coopf;
  VkPhysicalDeviceVulkanMemoryModelFeatures vmm{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_MEMORY_MODEL_FEATURES};
  const bool has_vmm = v12 || has_extension(pd, VK_KHR_VULKAN_MEMORY_MODEL_EXTENSION_NAME);
  if (has_coop) {
    coopf.pNext = s16.pNext;
    s16.pNext = &coopf;
  }
  if (has_coop && has_vmm) {
    vmm.pNext = s16.pNext;
    s16.pNext = &vmm;
  }
  physical_device_features2(instance, pd, &f2);
  c.integer_dot_product = has_idot && idotf.shaderIntegerDotProduct;
  c.int8_dot_accelerated = c.integer_dot_product && idotp.integerDotProduct4x8BitPackedSignedAccelerated &&
                           idotp.integerDotProduct4x8BitPackedMixedSignednessAccelerated;
  c.storage_16bit = s16.storageBuffer16BitAccess;
  c.fp16_arithmetic = f16.shaderFloat16;
  // The memory model with its device scope: with vulkanMemoryModel enabled (the coopmat SPIR-V declares it), the
  // other shaders' device-scope barriers (attn_split.glsl's memoryBarrierBuffer) need vulkanMemoryModelDeviceScope.
  if (has_coop)
    probe_coopmat(c, instance, pd, coopf.cooperative_matrix, vmm.vulkanMemoryModel && vmm.vulkanMemoryModelDeviceScope);

  c.subgroup_size = sub.subgroupSize;
  c.subgroup_stages = sub.supportedStages;
  c.subgroup_operations = sub.supportedOperations;
  c.subgroup_arithmetic_compute = (sub.supportedStages & VK_SHADER_STAGE_COMPUTE_BIT) &&
                                  (sub.supportedOperations & VK_SUBGROUP_FEATURE_ARITHMETIC_BIT) &&
                                  (sub.supportedOperations & VK_SUBGROUP_FEATURE_BASIC_BIT);
  c.subgroup_min_size = c.subgroup_max_size = sub.subgroupSize;
  if (has_ssc && ssc.minSubgroupSize) {
    c.subgroup_min_size = ssc.minSubgroupSize;
    c.subgroup_max_size = ssc.maxSubgroupSize;
    // A compute pipeline may ask for any size in [min, max] (full subgroups): the attention core
    // uses it to match its lanes to the head dimensions (e.g. 32 instead of radv's default 64).
    c.subgroup_size_control = sscf.subgroupSizeControl && sscf.computeFullSubgroups &&
                              (ssc.requiredSubgroupSizeStages & VK_SHADER_STAGE_COMPUTE_BIT);
  }

  const VkPhysicalDeviceLimits& L = props.limits;
  c.max_shared_memory = L.maxComputeSharedMemorySize;
  for (int i = 0; i < 3; ++i) {
    c.max_workgroup_size[i] = L.maxComputeWorkGroupSize[i];
    c.max_workgroup_count[i] = L.maxComputeWorkGroupCount[i];
  }
  c.max_workgroup_invocations = L.maxComputeWorkGroupInvocations;
  c.max_storage_buffer_range = L.maxStorageBufferRange;
  c.min_storage_buffer_offset_alignment = L.minStorageBufferOffsetAlignment;
  c.max_push_constants = L.maxPushConstantsSize;
  {
    VkPhysicalDeviceProperties2 q{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2};
    VkPhysicalDeviceMaintenance3Properties m3{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_3_PROPERTIES};
    q.pNext = &m3;
    physical_device_properties2(instance, pd, &q);
    c.max_memory_allocation_size = m3.maxMemoryAllocationSize;
  }
  if (has_sm)
    c.compute_units = sm.shaderSMCount;
  else if (has_amd)
    c.compute_units = amd.shaderEngineCount * amd.shaderArraysPerEngineCount * amd.computeUnitsPerShaderArray;
#ifdef VK_ARM_SHADER_CORE_BUILTINS_EXTENSION_NAME
  else if (has_arm)
    c.compute_units = arm.shaderCoreCount;
#endif

  VkPhysicalDeviceMemoryProperties mem;
  vkGetPhysicalDeviceMemoryProperties(pd, &mem);
  for (uint32_t i = 0; i < mem.memoryHeapCount; ++i)
    c.heaps.push_back({mem.memoryHeaps[i].size, (mem.memoryHeaps[i].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT) != 0});
  for (uint32_t i = 0; i < mem.memoryTypeCount; ++i)
    c.memory_types.push_back({mem.memoryTypes[i].heapIndex, mem.memoryTypes[i].propertyFlags});

  // Timestamps on the compute queue family diffvk will use (the first with compute).
  uint32_t nq = 0;
  vkGetPhysicalDeviceQueueFamilyProperties(pd, &nq, nullptr);
  std::vector<VkQueueFamilyProperties> qf(nq);
  vkGetPhysicalDeviceQueueFamilyProperties(pd, &nq, qf.data());
  for (auto& q : qf)
    if (q.queueFlags & VK_QUEUE_COMPUTE_BIT) {
      c.timestamp_valid_bits = q.timestampValidBits;
      break;
    }
  c.timestamp_period_ns = L.timestampPeriod;
  c.timestamps = c.timestamp_valid_bits > 0 && L.timestampPeriod > 0;

  apply_quirks(c);
  return c;
}

bool DeviceCaps::has_quirk(const char* q) const {
  for (auto& k : quirks)
    if (std::strcmp(k.name, q) == 0) return true;
  return false;
}

std::string DeviceCaps::coopmat_shape() const {
  return coopmat_m ? std::to_string(coopmat_m) + "x" + std::to_string(coopmat_n) + "x" + std::to_string(coopmat_k)
                   : std::string();
}

bool DeviceCaps::fp16_usable() const { return storage_16bit && fp16_arithmetic && !has_quirk("broken_fp16_storage"); }

const char* device_kind_name(DeviceKind k) noexcept {
  switch (k) {
    case DeviceKind::discrete:
      return "discrete GPU";
    case DeviceKind::integrated:
      return "integrated GPU";
    case DeviceKind::virtual_gpu:
      return "virtual GPU";
    case DeviceKind::cpu:
      return "CPU";
    default:
      return "other";
  }
}

const char* precision_name(Precision p) noexcept {
  switch (p) {
    case Precision::fp16:
      return "fp16";
    case Precision::fp32:
      return "fp32";
    default:
      return "auto";
  }
}

std::string DeviceCaps::describe() const {
  std::ostringstream s;
  auto row = [&](const char* k, const std::string& v) {
    s << "  " << k << std::string(26 - std::strlen(k), ' ') << v << "\n";
  };
  auto hex = [](uint32_t v) {
    std::ostringstream h;
    h << "0x" << std::hex << v;
    return h.str();
  };
  s << "[" << index << "] " << name << "\n";
  row("kind", device_kind_name(kind));
  row("vendor / device id", hex(vendor_id) + " / " + hex(device_id));
  row("driver", (driver_name.empty() ? std::string("?") : driver_name) + " (" + driver_info + "), id " +
                    std::to_string(driver_id) + ", version " + hex(driver_version));
  row("Vulkan API", version_string(api_version));
  row("fp16 arithmetic", fp16_arithmetic ? "yes" : "no");
  row("16-bit storage", storage_16bit ? "yes" : "no");
  row("int8 dot product", !integer_dot_product   ? "no"
                          : int8_dot_accelerated ? "yes (4x8-bit, accelerated)"
                                                 : "yes (not accelerated)");
  row("cooperative matrix", coopmat_shapes.empty() ? std::string("no")
                            : coopmat_m            ? coopmat_shape() + " f16->f32 usable" +
                                              (coopmat_note.empty() ? "" : " (" + coopmat_note + ")") +
                                              "; listed: " + coopmat_shapes
                                        : "not used (" + coopmat_note + "); listed: " + coopmat_shapes);
  row("precision (auto)", fp16_usable() ? "fp16 storage, fp32 accumulation" : "fp32 (no fp16 path on this device)");
  row("subgroup size", std::to_string(subgroup_size) + " (min " + std::to_string(subgroup_min_size) + ", max " +
                           std::to_string(subgroup_max_size) + (subgroup_size_control ? ", size control" : "") + ")");
  std::string ops;
  const std::pair<uint32_t, const char*> names[] = {{VK_SUBGROUP_FEATURE_BASIC_BIT, "basic"},
                                                    {VK_SUBGROUP_FEATURE_VOTE_BIT, "vote"},
                                                    {VK_SUBGROUP_FEATURE_ARITHMETIC_BIT, "arithmetic"},
                                                    {VK_SUBGROUP_FEATURE_BALLOT_BIT, "ballot"},
                                                    {VK_SUBGROUP_FEATURE_SHUFFLE_BIT, "shuffle"},
                                                    {VK_SUBGROUP_FEATURE_SHUFFLE_RELATIVE_BIT, "shuffle-relative"},
                                                    {VK_SUBGROUP_FEATURE_CLUSTERED_BIT, "clustered"},
                                                    {VK_SUBGROUP_FEATURE_QUAD_BIT, "quad"}};
  for (auto& [bit, n] : names)
    if (subgroup_operations & bit) ops += std::string(ops.empty() ? "" : " ") + n;
  row("subgroup ops", (ops.empty() ? "none" : ops) +
                          ((subgroup_stages & VK_SHADER_STAGE_COMPUTE_BIT) ? " (compute)" : " (not in compute)"));
  row("shared memory", mib(max_shared_memory));
  row("workgroup size", std::to_string(max_workgroup_size[0]) + " x " + std::to_string(max_workgroup_size[1]) + " x " +
                            std::to_string(max_workgroup_size[2]) + ", " + std::to_string(max_workgroup_invocations) +
                            " invocations");
  row("workgroup count", std::to_string(max_workgroup_count[0]) + " x " + std::to_string(max_workgroup_count[1]) +
                             " x " + std::to_string(max_workgroup_count[2]));
  row("storage buffer range", mib(max_storage_buffer_range));
  row("storage offset align", std::to_string(min_storage_buffer_offset_alignment) + " B");
  row("push constants", std::to_string(max_push_constants) + " B");
  row("max allocation", max_memory_allocation_size ? mib(max_memory_allocation_size) : "unknown");
  row("compute units", compute_units ? std::to_string(compute_units) : "unknown");
  for (size_t i = 0; i < heaps.size(); ++i)
    row(("heap " + std::to_string(i)).c_str(), mib(heaps[i].size) + (heaps[i].device_local ? ", device-local" : ""));
  for (size_t i = 0; i < memory_types.size(); ++i) {
    std::string f;
    uint32_t fl = memory_types[i].flags;
    if (fl & VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT) f += " device-local";
    if (fl & VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT) f += " host-visible";
    if (fl & VK_MEMORY_PROPERTY_HOST_COHERENT_BIT) f += " coherent";
    if (fl & VK_MEMORY_PROPERTY_HOST_CACHED_BIT) f += " cached";
    row(("memory type " + std::to_string(i)).c_str(),
        "heap " + std::to_string(memory_types[i].heap) + ":" + (f.empty() ? " (none)" : f));
  }
  std::ostringstream ts;
  ts << (timestamps ? "yes" : "no") << ", " << timestamp_valid_bits << " valid bits, period " << timestamp_period_ns
     << " ns";
  row("timestamps", ts.str());
  std::string q;
  for (auto& k : quirks) q += std::string(q.empty() ? "" : "; ") + k.name + " (" + k.reason + ")";
  row("quirks", q.empty() ? "none" : q);
  if (!simulated.empty()) row("simulated", simulated + " (ContextOptions::simulate_*)");
  return s.str();
}

}  // namespace diffvk
