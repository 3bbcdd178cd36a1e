// Internal GPU layer: logical device, buffers, compute pipelines. Not part of the public API.
#pragma once
#include <vulkan/vulkan.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "diffvk/device.hpp"
#include "vk/vk_check.hpp"

namespace diffvk {

class Instance;
class Pipeline;
class LazyPipeline;
struct ShaderBlob;

enum class DeviceMode {
  normal,
  // `diffvk shader-stats`: pipelines only. No pipeline cache, command pool or fence is created, and
  // any Buffer, command buffer or submission is refused with Error(unsupported), so that the device
  // can be a driver's null device (radv with RADV_FORCE_FAMILY), where using memory crashes. Pipelines
  // are created with VK_PIPELINE_CREATE_CAPTURE_STATISTICS_BIT_KHR when the driver has
  // VK_KHR_pipeline_executable_properties (pipeline_statistics()).
  statistics_only,
};

// The logical device and everything bound to it. Owns the instance.
//
// Threading: a Device is shared by every model and session of a context and may be used from any
// number of threads at once. Everything Vulkan requires to be externally synchronised is owned here
// behind a lock or owned by one caller: the queue (vkQueueSubmit, vkQueueWaitIdle, vkDeviceWaitIdle)
// is serialised by queue_mutex_, held only for the call itself, never during GPU work; the one-shot
// command pool and fence are used under oneshot_mutex_ (uploads/downloads through staging memory and
// fills: load time, and never on UMA devices where buffers are mapped); every Program owns its own
// command pool, command buffer, descriptor pool and fence (runtime/vk/program.cpp).
class Device {
 public:
  static std::unique_ptr<Device> create(const ContextOptions& options, DeviceMode mode = DeviceMode::normal);
  ~Device();
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;

  VkDevice handle() const { return device_; }
  VkPhysicalDevice physical() const { return physical_; }
  VkQueue queue() const { return queue_; }
  VkCommandPool command_pool() const;  // the one-shot pool; throws Error(unsupported) in DeviceMode::statistics_only
  uint32_t queue_family() const { return queue_family_; }
  VkPipelineCache pipeline_cache() const { return cache_; }
  const std::string& pipeline_cache_path() const { return cache_path_; }  // "" = no file
  // How the pipeline cache file was found when the device opened: "hit", "miss (<why>)", "off", or
  // "none (no cache directory)".
  const std::string& pipeline_cache_state() const { return cache_state_; }
  // Pipelines this device's driver compiled (vkCreateComputePipelines calls) and the wall time they took, summed over
  // the threads that compiled them (build_pipelines compiles several at once), since the device opened: the compile
  // part of a cold start.
  struct CompileStats {
    uint64_t pipelines = 0;
    double seconds = 0;
  };
  CompileStats compile_stats() const { return {compiled_.load(), compile_ns_.load() * 1e-9}; }
  void note_compile(double seconds, uint32_t pipelines = 1) {
    compiled_.fetch_add(pipelines);
    compile_ns_.fetch_add(uint64_t(seconds * 1e9));
  }
  const DeviceCaps& caps() const { return caps_; }
  // The kernel choices resolved when the device opened (runtime/vk/tuning.cpp); caps() has its quirks applied.
  const Tuning& tuning() const { return tuning_; }
  bool fp16() const { return fp16_; }                     // fp16-storage shader variants in use
  bool subgroup_arithmetic() const { return subgroup_; }  // subgroup shader variants in use
  // Subgroup shader variants in use for `op`'s kernel (Tuning::subgroup_for: less the per-op fallback's subgroup_off).
  bool subgroup_arithmetic(const std::string& op) const { return subgroup_ && tuning_.subgroup_for(op); }
  // VK_KHR_cooperative_matrix enabled (caps().coopmat_shape()): the caps keep a shape only where it is enabled
  // (an fp32 device zeroes it at creation).
  bool coopmat() const { return caps_.coopmat_m != 0; }
  bool validation() const;
  bool statistics_only() const { return mode_ == DeviceMode::statistics_only; }
  // VK_KHR_pipeline_executable_properties enabled (statistics_only mode on a driver that has it).
  bool pipeline_statistics() const { return exec_props_; }
  // Pipelines created from now on also keep the driver's internal representations (`shader-stats --isa`; a
  // statistics device only, where pipeline_statistics()). Off by default: capturing them slows every compile.
  void capture_representations(bool on) { capture_reps_ = on && exec_props_; }
  bool capture_representations() const { return capture_reps_; }
  // Throws Error(unsupported) naming `what` in statistics_only mode (no memory, no submissions).
  void require_execution(const std::string& what) const;

  // Every live Pipeline created on this device, in creation order (shader-stats iterates it).
  std::vector<const Pipeline*> pipelines() const;
  // Compiles every live LazyPipeline not compiled yet, in declaration order, one after another (shader-stats, whose
  // device records nothing, reports them in creation order; the test that compares it with a loaded model).
  void build_declared_pipelines();
  // Compiles those of `pipelines` not compiled yet (each once; repeats and compiled ones are skipped) on up to
  // tuning().pipeline_threads threads at once, the calling thread one of them, so that the driver's compiles overlap:
  // what Program::finalize does with the LazyPipelines a program dispatches, before recording. Each thread takes the
  // next tuning().pipeline_batch of them (0: an even share per thread) and creates them with one
  // vkCreateComputePipelines call (LazyPipeline::build_batch). The caller keeps them alive. Every thread is joined
  // before it returns; the first error of any (Pipeline's constructor: it names the pipeline) is rethrown here, the
  // others' pipelines that compiled stay compiled, and a later call tries the rest. Pipelines with the same
  // description are compiled once: the first of them; the others share its objects (so the Vulkan calls a load makes
  // do not depend on the threads' timing).
  void build_pipelines(const std::vector<const LazyPipeline*>& pipelines);
  // Label recorded with each Pipeline created from now on (see PipelineGroup); "" = none.
  void set_pipeline_group(std::string group);
  std::string pipeline_group() const;

  // Memory type index with all `required` flags, preferring `preferred`; UINT32_MAX when none.
  uint32_t find_memory_type(uint32_t type_bits, VkMemoryPropertyFlags required, VkMemoryPropertyFlags preferred) const;

  // Records `fn` into a one-time command buffer, submits it and waits.
  template <class F>
  void one_shot(F&& fn) {
    std::lock_guard<std::mutex> lock(oneshot_mutex_);  // the one-shot pool and fence_ are shared
    check_not_lost();
    VkCommandBuffer cb = begin_one_shot();
    try {
      fn(cb);
    } catch (...) {
      abandon_one_shot(cb);
      throw;
    }
    end_one_shot(cb);
  }
  // Submits a recorded command buffer on the queue (serialised with every other submission of this
  // device) and waits for `fence`, which the caller owns (and nobody else uses meanwhile). The fence is
  // reset first. VK_ERROR_DEVICE_LOST marks the device lost (below) before it is thrown.
  void submit_and_wait(VkCommandBuffer cb, VkFence fence) { submit_and_wait(&cb, 1, fence); }
  void submit_and_wait(const VkCommandBuffer* cbs, uint32_t count, VkFence fence);  // one batch, in order

  // Device loss is permanent: once any call saw VK_ERROR_DEVICE_LOST, every later operation of a
  // context, its models and sessions fails at once with Status::device_lost (check_not_lost).
  void mark_lost() noexcept { lost_.store(true); }
  bool lost() const noexcept { return lost_.load(); }
  void check_not_lost() const;

  void save_pipeline_cache();

  // A 256-byte zero-filled storage buffer: bound where an optional input is absent (e.g. the
  // dynamic position of a kernel recorded with a fixed position).
  struct BufferRange zero_range();

  // What the self-test at load did (Context::create: runtime/vk/selftest.cpp).
  const SelftestReport& selftest() const { return selftest_; }
  // Pipelines kept for the model: while on, a shared pipeline whose last user goes is parked (kept compiled, no
  // user) instead of destroyed, so that a later Pipeline of the same description adopts it without compiling it
  // again. The self-test at load turns it on around its runner: the model's first dispatches then find the variants
  // the self-test compiled (a driver without a shader cache of its own compiles them once, not twice). Parked
  // pipelines that nothing adopted go with release_parked_pipelines() or with the device; at most one per variant
  // the self-test ran. parked_pipelines(): the descriptions of those parked now (op_fp16|bindings|push|subgroup
  // size|spec constants,).
  void park_pipelines(bool on);
  void release_parked_pipelines() noexcept;
  std::vector<std::string> parked_pipelines() const;
  void set_selftest(SelftestReport report) { selftest_ = std::move(report); }
  // The self-test's ops left to their first record (runtime/vk/selftest.cpp: the forms that sessions record only on
  // request, attention maps and the context shift, are tested then instead of at load). defer_selftest: the ops and
  // the test that open_tested_device leaves. test_before_first_use(op): nothing for an op not left to its first use
  // (tested at load, or no self-test); for one left, its first call runs the test (once per device; concurrent callers
  // wait for it) and a failure is thrown then and at every later call (Error unsupported, naming the op and the
  // variant), before anything is recorded. selftest_untested(): the ops left that no call has tested yet.
  using FirstUseTest = std::function<void(Device& device, const std::string& op)>;
  void defer_selftest(const std::vector<std::string>& ops, FirstUseTest test);
  void test_before_first_use(const std::string& op);
  std::vector<std::string> selftest_untested() const;

 private:
  Device() = default;
  VkCommandBuffer begin_one_shot();
  void end_one_shot(VkCommandBuffer cb);  // submit + wait on fence_ (oneshot_mutex_ held)
  void abandon_one_shot(VkCommandBuffer cb);
  void load_pipeline_cache();
  void build_distinct_pipelines(const std::vector<const LazyPipeline*>& todo);  // build_pipelines, no two alike
  friend class Pipeline;
  friend class LazyPipeline;
  void register_pipeline(const Pipeline* p);
  void unregister_pipeline(const Pipeline* p) noexcept;
  // Lock order: lazy_mutex_ before any LazyPipeline's own lock, never after; a LazyPipeline's lock before
  // shared_mutex_ and pipelines_mutex_ (its Pipeline's constructor). build_pipelines' worker threads take only
  // LazyPipeline locks and what is after them.
  std::mutex lazy_mutex_;
  std::vector<const LazyPipeline*> lazy_;

  // Pipelines are shared on a device: a second Pipeline with the same description (shader variant,
  // specialization constants, bindings, push-constant size, required subgroup size) takes the Vulkan
  // objects of the first, counted, instead of compiling them again (a second model or layer loaded on the
  // same context, every session's kernels). The last Pipeline to go destroys them.
  struct SharedPipeline {
    VkDescriptorSetLayout set_layout = VK_NULL_HANDLE;
    VkPipelineLayout layout = VK_NULL_HANDLE;
    VkPipeline pipeline = VK_NULL_HANDLE;
    uint32_t refs = 0;
  };
  mutable std::mutex shared_mutex_;
  std::map<std::string, SharedPipeline> shared_;  // refs == 0: parked (park_pipelines)
  bool park_ = false;                             // under shared_mutex_

  std::unique_ptr<Instance> instance_;
  DeviceMode mode_ = DeviceMode::normal;
  bool capture_reps_ = false;
  bool exec_props_ = false;
  mutable std::mutex pipelines_mutex_;
  std::vector<const Pipeline*> pipelines_;
  std::string pipeline_group_;
  VkPhysicalDevice physical_ = VK_NULL_HANDLE;
  VkDevice device_ = VK_NULL_HANDLE;
  VkQueue queue_ = VK_NULL_HANDLE;
  uint32_t queue_family_ = 0;
  VkCommandPool pool_ = VK_NULL_HANDLE;
  VkFence fence_ = VK_NULL_HANDLE;
  VkPipelineCache cache_ = VK_NULL_HANDLE;
  std::string cache_path_;
  std::string cache_state_ = "off";
  std::atomic<uint64_t> compiled_{0}, compile_ns_{0};
  bool cache_default_ = false;     // cache_path_ is the default file (its folder is created when it is written)
  uint64_t cache_saved_hash_ = 0;  // fnv1a64 of the driver's data last loaded or written (0: none)
  DeviceCaps caps_;
  Tuning tuning_;
  SelftestReport selftest_;
  struct FirstUse {
    bool tested = false;
    std::string error;  // the first-use test's failure ("" = passed or not tested yet)
  };
  mutable std::mutex first_use_mutex_;  // held while a first-use test runs
  std::map<std::string, FirstUse> first_use_;
  FirstUseTest first_use_test_;
  bool fp16_ = false;
  bool subgroup_ = false;
  std::unique_ptr<class Buffer> zero_;
  std::mutex zero_mutex_;     // zero_ is created on first use, possibly by two sessions at once
  std::mutex oneshot_mutex_;  // pool_ + fence_ (one-shot command buffers)
  std::mutex queue_mutex_;    // queue_: vkQueueSubmit / vkQueueWaitIdle / vkDeviceWaitIdle
  std::atomic<bool> lost_{false};
};

// v rounded up to a multiple of a (a > 0): offsets of ranges packed into one buffer.
inline uint64_t align_up(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

// A range of one VkBuffer, as bound to a shader.
struct BufferRange {
  VkBuffer buffer = VK_NULL_HANDLE;
  VkDeviceSize offset = 0;
  VkDeviceSize size = 0;
  BufferRange sub(VkDeviceSize off, VkDeviceSize sz) const { return {buffer, offset + off, sz}; }
};

enum class MemoryDomain {
  device,   // storage buffer; device-local preferred; mapped directly when also host-visible+coherent
  staging,  // host-visible+coherent (host-cached preferred): uploads and read-backs
};

class Buffer {
 public:
  Buffer() = default;
  Buffer(Device& device, VkDeviceSize size, MemoryDomain domain, const std::string& what);
  ~Buffer();
  Buffer(Buffer&& o) noexcept;
  Buffer& operator=(Buffer&& o) noexcept;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  VkBuffer handle() const { return buffer_; }
  VkDeviceSize size() const { return size_; }
  void* mapped() const { return mapped_; }
  BufferRange range() const { return {buffer_, 0, size_}; }
  BufferRange range(VkDeviceSize off, VkDeviceSize sz) const { return {buffer_, off, sz}; }

  // Host <-> buffer transfers; direct when mapped, else through a staging buffer (one submit).
  void upload(VkDeviceSize offset, const void* src, size_t bytes);
  void download(VkDeviceSize offset, void* dst, size_t bytes) const;
  void fill(VkDeviceSize offset, VkDeviceSize bytes, uint32_t pattern);  // e.g. NaN poison

 private:
  void release() noexcept;
  Device* device_ = nullptr;
  VkBuffer buffer_ = VK_NULL_HANDLE;
  VkDeviceMemory memory_ = VK_NULL_HANDLE;
  VkDeviceSize size_ = 0;
  void* mapped_ = nullptr;
};

struct PipelineDesc {
  std::string op;              // shaders/<op>.comp
  uint32_t bindings = 0;       // storage buffers at binding 0..n-1 (set 0)
  uint32_t push_bytes = 0;     // push-constant block size
  std::vector<uint32_t> spec;  // specialization constants, constant_id 0..n-1 (floats bit-cast)
  bool subgroup = false;       // use the DVK_SUBGROUP=1 variant (device must support it)
  bool fp16 = false;           // use the DVK_FP16=1 variant
  uint32_t subgroup_size = 0;  // nonzero: required subgroup size, full subgroups (DeviceCaps::subgroup_size_control)

  // Named setters, chained on a temporary so that a declaration reads field by field:
  //   PipelineDesc{"embed"}.with_bindings(3).with_push(sizeof(EmbedPush)).with_spec({wg, 0u}).with_fp16(fp16)
  // Each sets one member and returns the description by value; members not set keep the defaults above.
  PipelineDesc with_bindings(uint32_t n) && {
    bindings = n;
    return std::move(*this);
  }
  PipelineDesc with_push(uint32_t bytes) && {
    push_bytes = bytes;
    return std::move(*this);
  }
  PipelineDesc with_spec(std::vector<uint32_t> constants) && {
    spec = std::move(constants);
    return std::move(*this);
  }
  PipelineDesc with_subgroup(bool on) && {
    subgroup = on;
    return std::move(*this);
  }
  PipelineDesc with_fp16(bool on) && {
    fp16 = on;
    return std::move(*this);
  }
  PipelineDesc with_subgroup_size(uint32_t size) && {
    subgroup_size = size;
    return std::move(*this);
  }
};

// A description's pipeline name: op + "_fp16" / "_fp32" (+ "_sg" for the subgroup variant), as Pipeline::name().
std::string pipeline_name(const PipelineDesc& desc);

class Pipeline {
 public:
  Pipeline(Device& device, const PipelineDesc& desc);
  // Same, labelled `group` instead of the device's current PipelineGroup (LazyPipeline: the label of its declaration).
  Pipeline(Device& device, const PipelineDesc& desc, const std::string& group);
  ~Pipeline();
  Pipeline(const Pipeline&) = delete;
  Pipeline& operator=(const Pipeline&) = delete;

  VkPipeline handle() const { return pipeline_; }
  VkPipelineLayout layout() const { return layout_; }
  VkDescriptorSetLayout set_layout() const { return set_layout_; }
  const PipelineDesc& desc() const { return desc_; }
  const std::string& name() const { return name_; }
  // Local size with the specialization constants applied (read from the SPIR-V).
  const std::array<uint32_t, 3>& workgroup() const { return workgroup_; }
  // Name of each specialization constant (constant_id i -> spec_names()[i]; "" when unknown), from
  // the shader source's `layout(constant_id = i) const ... NAME` declarations.
  std::vector<std::string> spec_names() const;
  const std::string& group() const { return group_; }  // Device::set_pipeline_group() at creation
  // The driver's vkCreateComputePipelines wall time for this pipeline (0 when it shares an earlier one's; created in a
  // batch: its even share of the call's time).
  double compile_seconds() const { return compile_seconds_; }
  // Pipelines for `descs`, each labelled with its group (same length), those not shared with one already on the
  // device created with one vkCreateComputePipelines call. Where that call fails, they are created one at a time, so
  // that the error names the pipeline that fails; nothing is left behind on an error.
  static std::vector<std::unique_ptr<Pipeline>> create_batch(Device& device, const std::vector<PipelineDesc>& descs,
                                                             const std::vector<std::string>& groups);

 private:
  struct Pending;  // the objects and create info made before the driver's compile (pipeline.cpp)
  struct Deferred {};
  // Everything but the compile: adopts a shared pipeline, or prepares pending_ (create_batch compiles it). Not
  // registered with the device.
  Pipeline(Device& device, const PipelineDesc& desc, const std::string& group, Deferred);
  void destroy() noexcept;
  bool adopt_shared(const std::string& key);                     // shared_mutex_ held; true when the key was there
  void prepare(const ShaderBlob& blob, const std::string& key);  // layouts, module and create info into pending_
  void compile_pending();                                        // one vkCreateComputePipelines call, then finish
  void finish(VkPipeline pipeline, double seconds);              // takes the compiled pipeline; enters Device::shared_
  std::unique_ptr<Pending> pending_;
  Device& device_;
  PipelineDesc desc_;
  std::string shared_key_;  // set once this Pipeline counts in Device::shared_ (its objects are shared)
  std::string name_;
  std::string group_;
  const char* spec_names_ = "";
  double compile_seconds_ = 0;
  std::array<uint32_t, 3> workgroup_{1, 1, 1};
  VkDescriptorSetLayout set_layout_ = VK_NULL_HANDLE;
  VkPipelineLayout layout_ = VK_NULL_HANDLE;
  VkPipeline pipeline_ = VK_NULL_HANDLE;
};

// A Pipeline compiled on its first use (get()) instead of at declaration: every kernel declares its pipelines
// this way, so that a model compiles only what its programs record (LinearKernel alone declares about 40 one-row,
// RoPE and tile variants; the bundled model records 8 of them, and compiling the rest cost ~60% of `diffvk run`'s
// start on lavapipe). Kernels hand the LazyPipeline itself to Program::dispatch; Program::finalize compiles the
// program's uncompiled ones together, on several threads (Device::build_pipelines), before recording. A session
// records a row count's program the first time it runs it, so a pipeline compiles once, before that first run;
// nothing compiles during a recorded program's replay. `now`: compile at declaration (tests' all-variant kernels);
// Device::build_declared_pipelines() compiles the rest (shader-stats).
// get() is safe from several threads (sessions of one model record concurrently); it throws what Pipeline's
// constructor throws, and a later get() tries again.
class LazyPipeline {
 public:
  LazyPipeline(Device& device, PipelineDesc desc, bool now);
  ~LazyPipeline();
  LazyPipeline(const LazyPipeline&) = delete;
  LazyPipeline& operator=(const LazyPipeline&) = delete;
  const Pipeline& get() const;
  // Compiles those of `lazies` not compiled yet with one Pipeline::create_batch (each once); where another thread
  // compiled one meanwhile, its pipeline is kept and the batch's copy dropped. Throws what create_batch throws.
  static void build_batch(const std::vector<const LazyPipeline*>& lazies);
  const PipelineDesc& desc() const { return desc_; }
  const std::string& name() const { return name_; }  // pipeline_name(desc())
  bool built() const;                                // get() would not compile

 private:
  Device& device_;
  PipelineDesc desc_;
  std::string name_;
  std::string group_;  // the device's PipelineGroup at declaration
  mutable std::mutex mutex_;
  mutable std::unique_ptr<Pipeline> pipeline_;
};

// Labels the pipelines created in its scope: the device's current label + "/" + label (or label
// alone), restored on destruction. shader-stats reports which kernels created each pipeline.
class PipelineGroup {
 public:
  PipelineGroup(Device& device, const std::string& label) : device_(device), saved_(device.pipeline_group()) {
    device.set_pipeline_group(saved_.empty() ? label : saved_ + "/" + label);
  }
  ~PipelineGroup() { device_.set_pipeline_group(saved_); }
  PipelineGroup(const PipelineGroup&) = delete;
  PipelineGroup& operator=(const PipelineGroup&) = delete;

 private:
  Device& device_;
  std::string saved_;
};

// Local size of a compute shader's SPIR-V with `spec` applied to its specialization constants
// (constant_id i = spec[i]): the WorkgroupSize built-in when present, else LocalSizeId, else LocalSize.
// Throws Error(internal) on SPIR-V it cannot read.
std::array<uint32_t, 3> spirv_workgroup_size(const uint32_t* words, size_t count, const std::vector<uint32_t>& spec);

// The driver's statistics of every executable of `pipeline` (the public structs of diffvk/device.hpp).
// Requires device.pipeline_statistics().
std::vector<ShaderExecutable> pipeline_executable_statistics(const Device& device, const Pipeline& pipeline);

// The driver's internal representations of every executable of `pipeline` that are text (radv: NIR, ACO IR and
// the disassembly; VK_KHR_pipeline_executable_properties, captured at creation while
// device.capture_representations()); empty when it was off or the driver keeps none.
struct ShaderRepresentation {
  uint32_t executable = 0;
  std::string name, description, text;
};
std::vector<ShaderRepresentation> pipeline_internal_representations(const Device& device, const Pipeline& pipeline);

// Bytes of VkDeviceMemory currently allocated by Buffer objects, process-wide (leak checks in tests).
uint64_t device_bytes_allocated();

inline uint32_t f32_bits(float f) {
  uint32_t u;
  static_assert(sizeof u == sizeof f);
  __builtin_memcpy(&u, &f, sizeof u);
  return u;
}

}  // namespace diffvk
