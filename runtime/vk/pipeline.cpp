#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <exception>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "platform.hpp"
#include "vk/gpu.hpp"
#include "vk/pipeline_cache_file.hpp"
#include "vk/shader_blob.hpp"

namespace diffvk {

namespace {
// shaders/common.glsl's DVK_HALF_BY_HAND, set for every pipeline under quirk half_select_crash.
constexpr uint32_t kHalfByHandConstant = 60;

std::mutex g_tables_mutex;
std::vector<std::pair<const ShaderBlob*, size_t>>& extra_tables() {
  static std::vector<std::pair<const ShaderBlob*, size_t>> tables;
  return tables;
}
const ShaderBlob* find_in(const ShaderBlob* all, size_t n, const char* op, bool fp16, bool subgroup) {
  for (size_t i = 0; i < n; ++i)
    if (std::strcmp(all[i].op, op) == 0 && all[i].fp16 == int(fp16) && all[i].subgroup == int(subgroup)) return &all[i];
  return nullptr;
}
}  // namespace

void register_shader_table(const ShaderBlob* blobs, size_t count) {
  std::lock_guard<std::mutex> lock(g_tables_mutex);
  for (const auto& t : extra_tables())
    if (t.first == blobs) return;
  extra_tables().emplace_back(blobs, count);
}

const ShaderBlob* find_shader(const char* op, bool fp16, bool subgroup) {
  size_t n = 0;
  const ShaderBlob* all = embedded_shaders(&n);
  if (const ShaderBlob* b = find_in(all, n, op, fp16, subgroup)) return b;
  std::lock_guard<std::mutex> lock(g_tables_mutex);
  for (const auto& t : extra_tables())
    if (const ShaderBlob* b = find_in(t.first, t.second, op, fp16, subgroup)) return b;
  return nullptr;
}

uint64_t embedded_shaders_hash() {
  static const uint64_t h = [] {
    size_t n = 0;
    const ShaderBlob* all = embedded_shaders(&n);
    uint64_t v = fnv1a64(nullptr, 0);
    for (size_t i = 0; i < n; ++i) {
      v = fnv1a64(all[i].op, std::strlen(all[i].op), v);
      v = fnv1a64(all[i].words, all[i].word_count * sizeof(uint32_t), v);
    }
    return v;
  }();
  return h;
}

std::string pipeline_name(const PipelineDesc& desc) {
  return desc.op + (desc.fp16 ? "_fp16" : "_fp32") + (desc.subgroup ? "_sg" : "");
}

Pipeline::Pipeline(Device& device, const PipelineDesc& desc) : Pipeline(device, desc, device.pipeline_group()) {}

Pipeline::Pipeline(Device& device, const PipelineDesc& desc, const std::string& group)
    : device_(device), desc_(desc), group_(group) {
  name_ = pipeline_name(desc);
  const ShaderBlob* blob = find_shader(desc.op.c_str(), desc.fp16, desc.subgroup);
  if (!blob) throw Error(Status::internal, "no embedded shader variant " + name_);
  spec_names_ = blob->spec_names ? blob->spec_names : "";
  try {
    workgroup_ = spirv_workgroup_size(blob->words, blob->word_count, desc.spec);
  } catch (const Error& e) {
    throw Error(e.status(), name_ + ": " + e.what());
  }
  if (desc.subgroup && !device.caps().subgroup_arithmetic_compute)
    throw Error(Status::unsupported, name_ + ": device has no subgroup arithmetic in compute shaders");
  if (desc.fp16 && !device.fp16())
    throw Error(Status::unsupported, name_ + ": the fp16 path is not enabled on this device");
  if (desc.push_bytes > device.caps().max_push_constants)
    throw Error(Status::unsupported, name_ + ": push constants exceed the device limit");
  // The key of Device::shared_: everything that goes into the Vulkan objects below.
  std::string key = name_ + "|" + std::to_string(desc.bindings) + "|" + std::to_string(desc.push_bytes) + "|" +
                    std::to_string(desc.subgroup_size) + "|";
  for (uint32_t v : desc.spec) key += std::to_string(v) + ",";
  bool adopted;
  {
    std::lock_guard<std::mutex> lock(device.shared_mutex_);
    adopted = adopt_shared(key);
  }
  if (adopted)
    platform::log(platform::LogLevel::debug, "pipeline " + name_ + ": shared with an identical one on this device");
  else
    create(*blob, key);
  try {
    device.register_pipeline(this);
  } catch (...) {
    destroy();
    throw;
  }
}

// Compiles the Vulkan objects of desc_ and enters them in Device::shared_ under `key` (or, when another thread
// entered the same key meanwhile, takes those and destroys its own). Nothing is left behind on failure.
void Pipeline::create(const ShaderBlob& blob, const std::string& key) {
  Device& device = device_;
  const PipelineDesc& desc = desc_;
  VkDevice dev = device.handle();
  VkShaderModule module = VK_NULL_HANDLE;
  try {
    std::vector<VkDescriptorSetLayoutBinding> binds(desc.bindings);
    for (uint32_t i = 0; i < desc.bindings; ++i) {
      binds[i].binding = i;
      binds[i].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
      binds[i].descriptorCount = 1;
      binds[i].stageFlags = VK_SHADER_STAGE_COMPUTE_BIT;
    }
    VkDescriptorSetLayoutCreateInfo dl{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO};
    dl.bindingCount = desc.bindings;
    dl.pBindings = binds.data();
    DVK_CHECK(vkCreateDescriptorSetLayout(dev, &dl, nullptr, &set_layout_));
    VkPushConstantRange pcr{VK_SHADER_STAGE_COMPUTE_BIT, 0, desc.push_bytes};
    VkPipelineLayoutCreateInfo pl{VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO};
    pl.setLayoutCount = 1;
    pl.pSetLayouts = &set_layout_;
    pl.pushConstantRangeCount = desc.push_bytes ? 1 : 0;
    pl.pPushConstantRanges = &pcr;
    DVK_CHECK(vkCreatePipelineLayout(dev, &pl, nullptr, &layout_));
    VkShaderModuleCreateInfo sm{VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO};
    sm.codeSize = blob.word_count * sizeof(uint32_t);
    sm.pCode = blob.words;
    DVK_CHECK(vkCreateShaderModule(dev, &sm, nullptr, &module));
    std::vector<VkSpecializationMapEntry> entries(desc.spec.size());
    for (uint32_t i = 0; i < entries.size(); ++i) entries[i] = {i, i * 4u, 4};
    std::vector<uint32_t> values = desc.spec;
    if (device.caps().has_quirk("half_select_crash")) {  // shaders/common.glsl: DVK_HALF_BY_HAND (a VkBool32)
      entries.push_back({kHalfByHandConstant, uint32_t(values.size() * 4), 4});
      values.push_back(VK_TRUE);
    }
    VkSpecializationInfo si{static_cast<uint32_t>(entries.size()), entries.data(), values.size() * 4, values.data()};
    VkComputePipelineCreateInfo ci{VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO};
    ci.stage.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO;
    ci.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT;
    ci.stage.module = module;
    ci.stage.pName = "main";
    ci.stage.pSpecializationInfo = values.empty() ? nullptr : &si;
    VkPipelineShaderStageRequiredSubgroupSizeCreateInfoEXT rss{
        VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_REQUIRED_SUBGROUP_SIZE_CREATE_INFO_EXT};
    if (desc.subgroup_size) {
      const DeviceCaps& caps = device.caps();
      if (!caps.subgroup_size_control || desc.subgroup_size < caps.subgroup_min_size ||
          desc.subgroup_size > caps.subgroup_max_size)
        throw Error(Status::unsupported, name_ + ": subgroup size " + std::to_string(desc.subgroup_size) +
                                             " cannot be required on this device");
      rss.requiredSubgroupSize = desc.subgroup_size;
      ci.stage.pNext = &rss;
      ci.stage.flags |= VK_PIPELINE_SHADER_STAGE_CREATE_REQUIRE_FULL_SUBGROUPS_BIT_EXT;
    }
    ci.layout = layout_;
    if (device.pipeline_statistics()) ci.flags |= VK_PIPELINE_CREATE_CAPTURE_STATISTICS_BIT_KHR;
    if (device.capture_representations()) ci.flags |= VK_PIPELINE_CREATE_CAPTURE_INTERNAL_REPRESENTATIONS_BIT_KHR;
    std::string spec;
    for (uint32_t v : desc.spec) spec += (spec.empty() ? "" : ",") + std::to_string(v);
    // Logged before the driver's compile too, so a compile that never ends is named (DIFFVK_LOG=debug).
    platform::log(platform::LogLevel::debug, "pipeline " + name_ + " [" + spec + "]: creating");
    const auto t0 = std::chrono::steady_clock::now();
    try {
      DVK_CHECK(vkCreateComputePipelines(dev, device.pipeline_cache(), 1, &ci, nullptr, &pipeline_));
    } catch (const Error& e) {
      throw Error(e.status(), "creating pipeline " + name_ + ": " + e.what());
    }
    // A driver compile that takes long is worth naming (NVIDIA's compiler spent minutes on one model's pipelines; CPU
    // drivers take 1-2 s per pipeline on a loaded machine, so only past 20 s is it a warning).
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    device.note_compile(ms * 1e-3);
    compile_seconds_ = ms * 1e-3;
    platform::log(ms > 20000 ? platform::LogLevel::warn : platform::LogLevel::debug,
                  "pipeline " + name_ + " [" + spec + "]: created in " + std::to_string(int(ms)) + " ms");
    vkDestroyShaderModule(dev, module, nullptr);
    module = VK_NULL_HANDLE;
    {
      std::lock_guard<std::mutex> lock(device.shared_mutex_);
      VkPipeline own = pipeline_;
      VkPipelineLayout own_layout = layout_;
      VkDescriptorSetLayout own_set = set_layout_;
      if (adopt_shared(key)) {  // another thread built the same pipeline meanwhile: keep one
        vkDestroyPipeline(dev, own, nullptr);
        vkDestroyPipelineLayout(dev, own_layout, nullptr);
        vkDestroyDescriptorSetLayout(dev, own_set, nullptr);
      } else {
        device.shared_[key] = Device::SharedPipeline{set_layout_, layout_, pipeline_, 1};
        shared_key_ = key;
      }
    }
  } catch (...) {
    if (module) vkDestroyShaderModule(dev, module, nullptr);
    destroy();
    throw;
  }
}

Pipeline::~Pipeline() {
  device_.unregister_pipeline(this);
  destroy();
}

std::vector<std::string> spec_name_list(const char* spec_names) {
  std::vector<std::string> names;
  const std::string all = spec_names ? spec_names : "";
  size_t pos = 0;
  while (pos < all.size()) {
    size_t end = all.find(',', pos);
    if (end == std::string::npos) end = all.size();
    const std::string item = all.substr(pos, end - pos);
    const size_t eq = item.find('=');
    if (eq != std::string::npos && eq > 0) {
      const unsigned long id = std::stoul(item.substr(0, eq));
      if (id >= names.size()) names.resize(id + 1);
      names[id] = item.substr(eq + 1);
    }
    pos = end + 1;
  }
  return names;
}

std::vector<std::string> Pipeline::spec_names() const {
  std::vector<std::string> names = spec_name_list(spec_names_);
  names.resize(desc_.spec.size());
  return names;
}

bool Pipeline::adopt_shared(const std::string& key) {
  auto it = device_.shared_.find(key);
  if (it == device_.shared_.end()) return false;
  ++it->second.refs;
  set_layout_ = it->second.set_layout;
  layout_ = it->second.layout;
  pipeline_ = it->second.pipeline;
  shared_key_ = key;
  return true;
}

void Pipeline::destroy() noexcept {
  VkDevice dev = device_.handle();
  if (!shared_key_.empty()) {
    std::lock_guard<std::mutex> lock(device_.shared_mutex_);
    auto it = device_.shared_.find(shared_key_);
    // Others still use the objects, or the device parks them for a later adopter (Device::park_pipelines).
    if (it != device_.shared_.end() && (--it->second.refs > 0 || device_.park_)) {
      pipeline_ = VK_NULL_HANDLE;
      layout_ = VK_NULL_HANDLE;
      set_layout_ = VK_NULL_HANDLE;
      shared_key_.clear();
      return;
    }
    if (it != device_.shared_.end()) device_.shared_.erase(it);
    shared_key_.clear();
  }
  if (pipeline_) vkDestroyPipeline(dev, pipeline_, nullptr);
  if (layout_) vkDestroyPipelineLayout(dev, layout_, nullptr);
  if (set_layout_) vkDestroyDescriptorSetLayout(dev, set_layout_, nullptr);
  pipeline_ = VK_NULL_HANDLE;
  layout_ = VK_NULL_HANDLE;
  set_layout_ = VK_NULL_HANDLE;
}

LazyPipeline::LazyPipeline(Device& device, PipelineDesc desc, bool now)
    : device_(device), desc_(std::move(desc)), name_(pipeline_name(desc_)), group_(device.pipeline_group()) {
  if (now) pipeline_ = std::make_unique<Pipeline>(device_, desc_, group_);
  std::lock_guard<std::mutex> lock(device_.lazy_mutex_);
  device_.lazy_.push_back(this);
}

LazyPipeline::~LazyPipeline() {
  std::lock_guard<std::mutex> lock(device_.lazy_mutex_);
  device_.lazy_.erase(std::remove(device_.lazy_.begin(), device_.lazy_.end(), this), device_.lazy_.end());
}

void Device::build_declared_pipelines() {
  std::lock_guard<std::mutex> lock(lazy_mutex_);
  for (const LazyPipeline* p : lazy_) p->get();
}

void Device::build_pipelines(const std::vector<const LazyPipeline*>& pipelines) {
  std::vector<const LazyPipeline*> todo;
  for (const LazyPipeline* p : pipelines)
    if (p && !p->built() && std::find(todo.begin(), todo.end(), p) == todo.end()) todo.push_back(p);
  const size_t threads = std::min<size_t>(std::max<uint32_t>(tuning_.pipeline_threads, 1), todo.size());
  if (threads <= 1) {  // one at a time on this thread (pipeline_threads=1, or one pipeline)
    for (const LazyPipeline* p : todo) p->get();
    return;
  }
  // Each thread takes the next pipeline not taken; after the first error no thread takes another.
  std::atomic<size_t> next{0};
  std::atomic<bool> failed{false};
  std::mutex error_mutex;
  std::exception_ptr error;
  auto fail = [&](std::exception_ptr e) {
    std::lock_guard<std::mutex> lock(error_mutex);
    if (!error) error = std::move(e);
    failed.store(true);
  };
  auto work = [&]() noexcept {
    while (!failed.load()) {
      const size_t i = next.fetch_add(1);
      if (i >= todo.size()) return;
      try {
        todo[i]->get();
      } catch (...) {
        fail(std::current_exception());
      }
    }
  };
  platform::log(platform::LogLevel::debug,
                "creating " + std::to_string(todo.size()) + " pipelines on " + std::to_string(threads) + " threads");
  std::vector<std::thread> workers;
  try {
    workers.reserve(threads - 1);
    for (size_t t = 1; t < threads; ++t) workers.emplace_back(work);
  } catch (...) {  // a thread that could not start: the ones started finish, joined below
    fail(std::current_exception());
  }
  work();  // this thread is one of them
  for (std::thread& t : workers) t.join();
  if (error) std::rethrow_exception(error);
}

bool LazyPipeline::built() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return pipeline_ != nullptr;
}

const Pipeline& LazyPipeline::get() const {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!pipeline_) pipeline_ = std::make_unique<Pipeline>(device_, desc_, group_);
  return *pipeline_;
}

}  // namespace diffvk
