#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <exception>
#include <mutex>
#include <set>
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

// The key of Device::shared_: everything that goes into a pipeline's Vulkan objects.
static std::string share_key(const PipelineDesc& desc) {
  std::string key = pipeline_name(desc) + "|" + std::to_string(desc.bindings) + "|" + std::to_string(desc.push_bytes) +
                    "|" + std::to_string(desc.subgroup_size) + "|";
  for (uint32_t v : desc.spec) key += std::to_string(v) + ",";
  return key;
}

Pipeline::Pipeline(Device& device, const PipelineDesc& desc) : Pipeline(device, desc, device.pipeline_group()) {}

Pipeline::Pipeline(Device& device, const PipelineDesc& desc, const std::string& group)
    : Pipeline(device, desc, group, Deferred{}) {
  // (An exception here runs the destructor: the delegated constructor has completed.)
  if (pending_) compile_pending();
  device.register_pipeline(this);
}

// The objects made before the driver's compile, and the create info that points into them: made in place (prepare),
// never moved, so the pointers stay valid until the compile.
struct Pipeline::Pending {
  std::string key;   // Device::shared_'s key
  std::string spec;  // the specialization constants, for the log
  VkShaderModule module = VK_NULL_HANDLE;
  std::vector<VkSpecializationMapEntry> entries;
  std::vector<uint32_t> values;
  VkSpecializationInfo si{};
  VkPipelineShaderStageRequiredSubgroupSizeCreateInfoEXT rss{
      VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_REQUIRED_SUBGROUP_SIZE_CREATE_INFO_EXT};
  VkComputePipelineCreateInfo ci{VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO};
};

Pipeline::Pipeline(Device& device, const PipelineDesc& desc, const std::string& group, Deferred)
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
  const std::string key = share_key(desc);
  bool adopted;
  {
    std::lock_guard<std::mutex> lock(device.shared_mutex_);
    adopted = adopt_shared(key);
  }
  if (adopted) {
    platform::log(platform::LogLevel::debug, "pipeline " + name_ + ": shared with an identical one on this device");
    return;
  }
  try {
    prepare(*blob, key);
  } catch (...) {
    destroy();
    throw;
  }
}

// Makes the set layout, pipeline layout and shader module of desc_, and the create info that compiles them.
void Pipeline::prepare(const ShaderBlob& blob, const std::string& key) {
  Device& device = device_;
  const PipelineDesc& desc = desc_;
  VkDevice dev = device.handle();
  pending_ = std::make_unique<Pending>();
  Pending& pd = *pending_;
  pd.key = key;
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
  DVK_CHECK(vkCreateShaderModule(dev, &sm, nullptr, &pd.module));
  pd.entries.resize(desc.spec.size());
  for (uint32_t i = 0; i < pd.entries.size(); ++i) pd.entries[i] = {i, i * 4u, 4};
  pd.values = desc.spec;
  if (device.caps().has_quirk("half_select_crash")) {  // shaders/common.glsl: DVK_HALF_BY_HAND (a VkBool32)
    pd.entries.push_back({kHalfByHandConstant, uint32_t(pd.values.size() * 4), 4});
    pd.values.push_back(VK_TRUE);
  }
  pd.si = {static_cast<uint32_t>(pd.entries.size()), pd.entries.data(), pd.values.size() * 4, pd.values.data()};
  VkComputePipelineCreateInfo& ci = pd.ci;
  ci.stage.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO;
  ci.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT;
  ci.stage.module = pd.module;
  ci.stage.pName = "main";
  ci.stage.pSpecializationInfo = pd.values.empty() ? nullptr : &pd.si;
  if (desc.subgroup_size) {
    const DeviceCaps& caps = device.caps();
    if (!caps.subgroup_size_control || desc.subgroup_size < caps.subgroup_min_size ||
        desc.subgroup_size > caps.subgroup_max_size)
      throw Error(Status::unsupported, name_ + ": subgroup size " + std::to_string(desc.subgroup_size) +
                                           " cannot be required on this device");
    pd.rss.requiredSubgroupSize = desc.subgroup_size;
    ci.stage.pNext = &pd.rss;
    ci.stage.flags |= VK_PIPELINE_SHADER_STAGE_CREATE_REQUIRE_FULL_SUBGROUPS_BIT_EXT;
  }
  ci.layout = layout_;
  if (device.pipeline_statistics()) ci.flags |= VK_PIPELINE_CREATE_CAPTURE_STATISTICS_BIT_KHR;
  if (device.capture_representations()) ci.flags |= VK_PIPELINE_CREATE_CAPTURE_INTERNAL_REPRESENTATIONS_BIT_KHR;
  for (uint32_t v : desc.spec) pd.spec += (pd.spec.empty() ? "" : ",") + std::to_string(v);
}

void Pipeline::compile_pending() {
  Pending& pd = *pending_;
  // Logged before the driver's compile too, so a compile that never ends is named (DIFFVK_LOG=debug).
  platform::log(platform::LogLevel::debug, "pipeline " + name_ + " [" + pd.spec + "]: creating");
  const auto t0 = std::chrono::steady_clock::now();
  VkPipeline pipeline = VK_NULL_HANDLE;
  try {
    DVK_CHECK(vkCreateComputePipelines(device_.handle(), device_.pipeline_cache(), 1, &pd.ci, nullptr, &pipeline));
  } catch (const Error& e) {
    throw Error(e.status(), "creating pipeline " + name_ + ": " + e.what());
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  device_.note_compile(seconds);
  finish(pipeline, seconds);
}

// Takes the driver's pipeline (this one's from now on), drops the shader module, and enters the objects in
// Device::shared_ under the pending key (or, when another thread entered the same key meanwhile, takes those and
// destroys its own).
void Pipeline::finish(VkPipeline pipeline, double seconds) {
  VkDevice dev = device_.handle();
  pipeline_ = pipeline;
  compile_seconds_ = seconds;
  const double ms = seconds * 1e3;
  // A driver compile that takes long is worth naming (NVIDIA's compiler spent minutes on one model's pipelines; CPU
  // drivers take 1-2 s per pipeline on a loaded machine, so only past 20 s is it a warning).
  platform::log(ms > 20000 ? platform::LogLevel::warn : platform::LogLevel::debug,
                "pipeline " + name_ + " [" + pending_->spec + "]: created in " + std::to_string(int(ms)) + " ms");
  vkDestroyShaderModule(dev, pending_->module, nullptr);
  const std::string key = pending_->key;
  pending_.reset();
  std::lock_guard<std::mutex> lock(device_.shared_mutex_);
  VkPipeline own = pipeline_;
  VkPipelineLayout own_layout = layout_;
  VkDescriptorSetLayout own_set = set_layout_;
  if (adopt_shared(key)) {  // another thread built the same pipeline meanwhile: keep one
    vkDestroyPipeline(dev, own, nullptr);
    vkDestroyPipelineLayout(dev, own_layout, nullptr);
    vkDestroyDescriptorSetLayout(dev, own_set, nullptr);
  } else {
    device_.shared_[key] = Device::SharedPipeline{set_layout_, layout_, pipeline_, 1};
    shared_key_ = key;
  }
}

std::vector<std::unique_ptr<Pipeline>> Pipeline::create_batch(Device& device, const std::vector<PipelineDesc>& descs,
                                                              const std::vector<std::string>& groups) {
  if (groups.size() != descs.size())
    throw Error(Status::internal, "Pipeline::create_batch: " + std::to_string(descs.size()) + " descriptions but " +
                                      std::to_string(groups.size()) + " groups");
  std::vector<std::unique_ptr<Pipeline>> out;
  std::vector<Pipeline*> todo;  // those not shared with one on the device: compiled here
  out.reserve(descs.size());
  for (size_t i = 0; i < descs.size(); ++i) {
    out.emplace_back(new Pipeline(device, descs[i], groups[i], Deferred{}));
    if (out.back()->pending_) todo.push_back(out.back().get());
  }
  if (todo.size() == 1) {
    todo[0]->compile_pending();
  } else if (!todo.empty()) {
    std::vector<VkComputePipelineCreateInfo> infos;
    std::string names;
    for (const Pipeline* p : todo) {
      infos.push_back(p->pending_->ci);
      names += (names.empty() ? "" : ", ") + p->name_ + " [" + p->pending_->spec + "]";
    }
    platform::log(platform::LogLevel::debug,
                  "creating " + std::to_string(todo.size()) + " pipelines in one call: " + names);
    std::vector<VkPipeline> made(todo.size(), VK_NULL_HANDLE);
    const auto t0 = std::chrono::steady_clock::now();
    std::string error;
    try {
      DVK_CHECK(vkCreateComputePipelines(device.handle(), device.pipeline_cache(), uint32_t(infos.size()), infos.data(),
                                         nullptr, made.data()));
    } catch (const Error& e) {
      if (e.status() == Status::device_lost) throw;
      error = e.what();
    }
    if (error.empty()) {
      const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      device.note_compile(seconds, uint32_t(todo.size()));
      for (size_t i = 0; i < todo.size(); ++i) todo[i]->finish(made[i], seconds / double(todo.size()));
    } else {
      // The call may have created some (the others are VK_NULL_HANDLE): dropped, then one call each, so that the
      // error names the pipeline that fails.
      for (VkPipeline p : made)
        if (p) vkDestroyPipeline(device.handle(), p, nullptr);
      platform::log(platform::LogLevel::debug, "creating " + std::to_string(todo.size()) +
                                                   " pipelines in one call failed (" + error + "): one at a time");
      for (Pipeline* p : todo) p->compile_pending();
    }
  }
  for (const auto& p : out) device.register_pipeline(p.get());
  return out;
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
  if (pending_) {  // prepared, never compiled
    if (pending_->module) vkDestroyShaderModule(dev, pending_->module, nullptr);
    pending_.reset();
  }
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
  // One of each distinct pipeline is compiled; the others with the same description (two ops' kernels often ask for
  // the same one) take its objects afterwards (Device::shared_), with no Vulkan call. Were they compiled side by side,
  // the driver would compile both, and how many Vulkan calls a load makes would depend on the threads' timing.
  // (A repeat of the same LazyPipeline is a twin of itself: its get() afterwards finds it built.)
  std::vector<const LazyPipeline*> todo, same;
  std::set<std::string> keys;
  for (const LazyPipeline* p : pipelines)
    if (p && !p->built()) (keys.insert(share_key(p->desc())).second ? todo : same).push_back(p);
  build_distinct_pipelines(todo);
  for (const LazyPipeline* p : same) p->get();
}

void Device::build_distinct_pipelines(const std::vector<const LazyPipeline*>& todo) {
  if (todo.empty()) return;
  const size_t threads = std::min<size_t>(std::max<uint32_t>(tuning_.pipeline_threads, 1), todo.size());
  // Pipelines per vkCreateComputePipelines call: the tuning's, or (0) an even share per thread.
  const size_t batch = tuning_.pipeline_batch ? tuning_.pipeline_batch : (todo.size() + threads - 1) / threads;
  const size_t chunks = (todo.size() + batch - 1) / batch;
  auto build = [&](size_t chunk) {
    const size_t b = chunk * batch, e = std::min(todo.size(), b + batch);
    if (e - b == 1)
      todo[b]->get();
    else
      LazyPipeline::build_batch(std::vector<const LazyPipeline*>(todo.begin() + long(b), todo.begin() + long(e)));
  };
  const size_t workers_wanted = std::min(threads, chunks);
  if (workers_wanted <= 1) {  // on this thread (pipeline_threads=1, one pipeline, or one batch)
    for (size_t c = 0; c < chunks; ++c) build(c);
    return;
  }
  // Each thread takes the next chunk not taken; after the first error no thread takes another.
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
      const size_t c = next.fetch_add(1);
      if (c >= chunks) return;
      try {
        build(c);
      } catch (...) {
        fail(std::current_exception());
      }
    }
  };
  platform::log(platform::LogLevel::debug, "creating " + std::to_string(todo.size()) + " pipelines on " +
                                               std::to_string(workers_wanted) + " threads, up to " +
                                               std::to_string(batch) + " per call");
  std::vector<std::thread> workers;
  try {
    workers.reserve(workers_wanted - 1);
    for (size_t t = 1; t < workers_wanted; ++t) workers.emplace_back(work);
  } catch (...) {  // a thread that could not start: the ones started finish, joined below
    fail(std::current_exception());
  }
  work();  // this thread is one of them
  for (std::thread& t : workers) t.join();
  if (error) std::rethrow_exception(error);
}

void LazyPipeline::build_batch(const std::vector<const LazyPipeline*>& lazies) {
  std::vector<const LazyPipeline*> todo;
  std::vector<PipelineDesc> descs;
  std::vector<std::string> groups;
  for (const LazyPipeline* l : lazies)
    if (l && !l->built() && std::find(todo.begin(), todo.end(), l) == todo.end()) {
      todo.push_back(l);
      descs.push_back(l->desc_);
      groups.push_back(l->group_);
    }
  if (todo.empty()) return;
  Device& device = todo[0]->device_;
  for (const LazyPipeline* l : todo)
    if (&l->device_ != &device)
      throw Error(Status::internal, "LazyPipeline::build_batch: pipelines of two devices in one batch");
  // Compiled without any LazyPipeline's lock held (two threads' batches may overlap): where another thread installed
  // one meanwhile, ours is dropped (it shares that one's objects, Device::shared_, or releases its own).
  std::vector<std::unique_ptr<Pipeline>> made = Pipeline::create_batch(device, descs, groups);
  for (size_t i = 0; i < todo.size(); ++i) {
    std::lock_guard<std::mutex> lock(todo[i]->mutex_);
    if (!todo[i]->pipeline_) todo[i]->pipeline_ = std::move(made[i]);
  }
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
