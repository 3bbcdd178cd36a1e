// diffvk — Vulkan devices, their probed capabilities, and the runtime context.
#pragma once
#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "diffvk/error.hpp"
#include "diffvk/selftest.hpp"

namespace diffvk {

enum class DeviceKind { discrete, integrated, virtual_gpu, cpu, other };
const char* device_kind_name(DeviceKind k) noexcept;

// Storage precision of activations, weights and the KV cache. Arithmetic is always fp32.
enum class Precision { automatic, fp16, fp32 };
const char* precision_name(Precision p) noexcept;

struct MemoryHeapInfo {
  uint64_t size = 0;
  bool device_local = false;
};
struct MemoryTypeInfo {
  uint32_t heap = 0;
  uint32_t flags = 0;  // VkMemoryPropertyFlags
};

// Named device quirk: a flag with a one-line reason (ncnn-style bug database).
struct Quirk {
  const char* name;
  const char* reason;
};

// Everything diffvk needs to know about a physical device, probed once.
struct DeviceCaps {
  uint32_t index = 0;  // position in vkEnumeratePhysicalDevices
  std::string name;
  DeviceKind kind = DeviceKind::other;
  uint32_t vendor_id = 0, device_id = 0;
  uint32_t api_version = 0, driver_version = 0;
  uint32_t driver_id = 0;  // VkDriverId (0 when the driver does not say)
  std::string driver_name, driver_info;
  std::array<uint8_t, 16> device_uuid{}, pipeline_cache_uuid{};

  // 16-bit types
  bool storage_16bit = false;    // storageBuffer16BitAccess
  bool fp16_arithmetic = false;  // shaderFloat16

  // subgroups
  uint32_t subgroup_size = 0;                             // default size
  uint32_t subgroup_min_size = 0, subgroup_max_size = 0;  // VK_EXT_subgroup_size_control (== default when absent)
  bool subgroup_size_control = false;
  // shaderIntegerDotProduct (Vulkan 1.3 core, else VK_KHR_shader_integer_dot_product), and whether the
  // driver says it runs 4x8-bit packed signed and mixed-signedness dot products in hardware (the
  // int8 decode path: QuantRowKernel picks it only where they are accelerated).
  bool integer_dot_product = false;
  bool int8_dot_accelerated = false;
  uint32_t subgroup_stages = 0;              // VkShaderStageFlags
  uint32_t subgroup_operations = 0;          // VkSubgroupFeatureFlags
  bool subgroup_arithmetic_compute = false;  // arithmetic ops usable in compute shaders
  // Nonzero where ContextOptions::simulate_subgroup_size stands in for the hardware's subgroup size: the hardware's
  // default size. The sizes above are then the simulated one, and subgroup operations, subgroup size control and
  // cooperative matrices are off (their shaders would run at the hardware's size).
  uint32_t subgroup_hardware_size = 0;

  // compute limits
  uint32_t max_shared_memory = 0;  // maxComputeSharedMemorySize (bytes)
  std::array<uint32_t, 3> max_workgroup_size{};
  uint32_t max_workgroup_invocations = 0;
  std::array<uint32_t, 3> max_workgroup_count{};
  uint64_t max_storage_buffer_range = 0;
  uint64_t min_storage_buffer_offset_alignment = 0;
  uint32_t max_push_constants = 0;
  uint64_t max_memory_allocation_size = 0;  // 0 = unknown
  uint32_t compute_units = 0;               // SMs / CUs / shader cores when the driver tells, else 0

  std::vector<MemoryHeapInfo> heaps;
  std::vector<MemoryTypeInfo> memory_types;

  // timing
  bool timestamps = false;  // timestampComputeAndGraphics and nonzero valid bits on the compute queue
  uint32_t timestamp_valid_bits = 0;
  float timestamp_period_ns = 0;

  std::vector<Quirk> quirks;  // quirks that apply to this device
  // The ContextOptions::simulate_* limits in force on this device, "subgroup 16 (hardware 8), storage buffer range
  // 128 MiB, ..." ("" when none): the values above are then the simulated ones.
  std::string simulated;
  bool has_quirk(const char* name) const;

  // VK_KHR_cooperative_matrix: the float16 x float16 -> float32, subgroup-scope shape M x N x K
  // that the cooperative-matrix matmul uses, as the driver lists it (0 x 0 x 0: none usable; the shaders also
  // need shaderFloat16, 16-bit storage and vulkanMemoryModel). coopmat_shapes: every shape the driver lists,
  // "16x16x16 f16*f16+f32->f32 subgroup, ..." (empty without the extension). coopmat_note: why none is
  // usable, or that the tuning (Tuning, key coopmat) changed the choice.
  uint32_t coopmat_m = 0, coopmat_n = 0, coopmat_k = 0;
  std::string coopmat_shapes, coopmat_note;
  std::string coopmat_shape() const;  // "MxNxK" of the usable shape; "" when none

  // fp16 storage variants need 16-bit storage buffers AND shaderFloat16 (and no quirk against it).
  bool fp16_usable() const;
  // Human-readable multi-line description (diffvk info).
  std::string describe() const;
};

// One resolved tuning value: its key (as in DIFFVK_TUNING), its value, and why it has that value:
// "cap: ..." (the device's capabilities), "quirk NAME" (runtime/vk/quirks.cpp), "deny rule NAME: reason" (the device
// rule table, runtime/vk/device_rules.cpp) or "override SOURCE" (DIFFVK_TUNING, ContextOptions::tuning,
// ContextOptions::force_quirks, ContextOptions::force_no_fp16 / force_no_subgroup_arithmetic or an alias variable such
// as DIFFVK_COOPMAT).
struct TuningChoice {
  std::string key, value, why;
};

// The device's kernel choices, resolved once when the device opens (runtime/vk/tuning.cpp): from its capabilities,
// then its quirks and the device rule table, then one override, `key=value,...` in ContextOptions::tuning and the
// environment variable DIFFVK_TUNING (the environment wins per key). The keys, their values and their aliases:
// runtime/vk/README.md. The ops read these fields from the device (Device::tuning()); the quirks the tuning adds or
// drops are those of the device's caps(), which the pure tile-choice functions read.
struct Tuning {
  // coopmat: cooperative matrices for the matmul and the differential prefill attention where the shape fits.
  bool coopmat = false;
  // The kill switches (auto or off; kv_staging also on): int_dot: the integer dot-product kernels of the quantized
  // linears (off clears DeviceCaps::integer_dot_product); fp16: fp16 storage and arithmetic (off: the fp32 variants);
  // subgroup: subgroup arithmetic (off: shared-memory reductions); kv_staging: attention stages K/V blocks in shared
  // memory (off: quirk no_kv_staging).
  bool int_dot = false;
  bool fp16 = false;
  bool subgroup = false;
  bool kv_staging = true;
  // subgroup_off: the kernels whose subgroup variants are off while `subgroup` is on: the self-test's per-op fallback
  // (runtime/vk/selftest.cpp), or the override subgroup_off=OP[+OP...], whose items add up. The kernels:
  // linear (the matmul and one-row linears), attention, head_rmsnorm, layer_norm, attn_probs; an op of the case
  // tables names its kernel (linear_row, linear_row_rope: linear; diff_attn, diff_v2_attn: attention).
  std::vector<std::string> subgroup_off;
  // Whether `op`'s kernel (a kernel or a case-table op, as above) runs its subgroup variant: `subgroup`, less
  // subgroup_off. An op without subgroup variants follows `subgroup`.
  bool subgroup_for(const std::string& op) const;
  // attn_core: the attention core. keys (one key at a time), blocks (key blocks, one subgroup per workgroup),
  // staged (key blocks staged in shared memory for several subgroups), coopmat (every differential prefill takes
  // the cooperative-matrix kernel; a kernel that cannot is an error naming why).
  std::string attn_core = "staged";
  // row_lanes: lanes per lane group of the one-row linear kernels; 0: each kernel's choice (its row geometry).
  uint32_t row_lanes = 0;
  // q4_in_place: the one-row Q4_0 kernels read each nibble where it lies in its word, against activations scaled by
  // a power of two (linear_row.comp's QM): one integer op per weight fewer where a shift costs one (auto: CPU drivers;
  // a GPU's bitfield extract is one instruction).
  bool q4_in_place = false;
  // linear_reg_share: how the register-tiled matmul shares x rows in a subgroup: true: subgroupShuffle (shuffle),
  // false: constant-lane subgroupBroadcast (broadcast).
  bool linear_reg_shuffle = false;
  // row_prologue: where a one-row pass (decode) applies a linear's prologue (the block's RMSNorm before q/k/v,
  // gate_up and the head; the SwiGLU before down). Split (true): its own dispatch first (head_rmsnorm, silu_mul,
  // whose output the storage type keeps), then the plain one-row linear. Fused (false): the one-row kernel's prologue
  // (no dispatch, no rounding). auto: split on CPU drivers, where a lane computes the prologue over the whole row for
  // its own 4 features, so each row recomputes it out / 4 times (lavapipe: decode 0.97-1.5x as fast split,
  // BENCHMARKS.md); fused on GPUs, where it hides under the weight stream.
  bool row_prologue_split = false;
  // attn_decode: which kernel a decode call of up to 8 rows takes (docs/decisions/029). Prefill (true): the fused
  // prefill kernel the model compiled for its prompts, where every key a call may see fits one invocation (else the
  // split-K kernel, as with false). auto: prefill on CPU drivers, which compile each pipeline at its first dispatch
  // (the split-K pipeline was a third of the 134M model's first decode step on lavapipe) and gain little from
  // splitting a row's keys; split on GPUs, where the splits fill the compute units.
  bool attn_decode_prefill = false;
  // pipeline_threads: how many threads compile a program's pipelines at once (Device::build_pipelines), at least 1;
  // auto (or 0): the host's hardware threads, at most 8.
  uint32_t pipeline_threads = 1;
  // pipeline_batch: how many pipelines one vkCreateComputePipelines call creates (Device::build_pipelines); 0 (the
  // value per_thread): a program's uncompiled pipelines split evenly over the threads, one call per thread. auto: 1 on
  // CPU drivers (they compile in the calling thread, so single calls let the threads balance compiles of unequal
  // length), per_thread on GPUs (drivers may compile a batch's pipelines together: pytorch/executorch#11345, Adreno).
  uint32_t pipeline_batch = 1;
  // Every key in table order, plus "rules" (the device rule table's deny rows in force) and "quirks" (the device's
  // quirks after the overrides), each with why.
  std::vector<TuningChoice> choices;
  const TuningChoice* find(const std::string& key) const;  // nullptr when the key is not there
  std::string why(const std::string& key) const;           // the choice's why; "" when absent
  // One line per choice: "  key = value  (why)".
  std::string describe() const;
};

enum class MessageSeverity { info, warning, error };

struct ContextOptions {
  // Device: "" = best by kind (discrete, integrated, virtual, cpu); "3" = index; else a case-insensitive
  // substring of the device name. Overridden by the environment variable DIFFVK_DEVICE when this is "".
  std::string device;
  Precision precision = Precision::automatic;
  // -1: build default / DIFFVK_VALIDATION env; 0: off; 1: Khronos validation + synchronization validation.
  int validation = -1;
  // The VkPipelineCache file, on by default: it saves the driver's compile of every pipeline on the next load.
  // "" = the default file, `<platform cache dir>/pipelines/<vendor>-<device>-<pipelineCacheUUID>.vkpc` (the
  // cache dir: XDG_CACHE_HOME/diffvk, ~/.cache/diffvk, or set_cache_dir's; where there is none, as on Android
  // before set_cache_dir, no file is used and the log says why). Loaded if it matches this device, driver and
  // shaders; anything else is a logged cache miss. Written atomically by save_pipeline_cache() and on destruction,
  // only when the driver's data changed. Context::pipeline_cache_path() says which file is in use.
  std::string pipeline_cache_path;
  bool pipeline_cache = true;  // false: no pipeline cache file (pipeline_cache_path must then be "")
  // Receives every validation-layer message (the test suite fails the running test on any warning/error).
  // Messages are always logged as well.
  std::function<void(MessageSeverity, const std::string&)> on_validation_message;
  // Test hooks, simulated limitations (used by the conformance suite to force fallback paths): aliases of the tuning
  // overrides fp16=off and subgroup=off (applied before ContextOptions::tuning, whose key wins).
  bool force_no_fp16 = false;
  bool force_no_subgroup_arithmetic = false;
  // Nonzero: every memory heap is reported (and planned against) as at most this many bytes, to test the
  // "does not fit the device" errors of Model::load / Session::create without a small device.
  uint64_t simulate_heap_bytes = 0;
  // Nonzero: maxStorageBufferRange is reported as at most this many bytes (tests of weights split across
  // bindings, e.g. an embedding larger than a binding, without a device that has a small range).
  uint64_t simulate_max_storage_buffer_range = 0;
  // Nonzero: maxMemoryAllocationSize is reported as at most this many bytes (a phone's 256 MiB, say): the weights
  // are placed in several allocations, and a buffer larger than this is refused (out_of_memory), as on such a device.
  uint64_t simulate_max_memory_allocation_size = 0;
  // Nonzero: the device is planned as if its subgroups were this wide and of this one size (a power of two up to 128;
  // a phone's 16 or 64), so that every choice made from the subgroup size is the one such a device gets: tile
  // choices, workgroup sizes, split-K, the attention lanes. The hardware still runs its own subgroups, so wherever
  // this differs from the hardware's one size, nothing may depend on a subgroup's width: subgroup operations (the
  // tuning key subgroup: off, the shared-memory reductions run), subgroup size control (no required sizes) and
  // cooperative matrices are off, and the log and DeviceCaps::simulated say so. Equal to the hardware's one size: no
  // change. Not a power of two up to 128 is an invalid_argument error; above the workgroup limits, unsupported.
  uint32_t simulate_subgroup_size = 0;
  // Device quirks (runtime/vk/quirks.cpp) applied as if the driver matched them, so that a quirk's path
  // is tested on any device: each name is the tuning override quirk=NAME. An unknown name is an
  // invalid_argument error.
  std::vector<std::string> force_quirks;
  // Tuning overrides, "key=value,..." (as the environment variable DIFFVK_TUNING, which wins per key; keys:
  // runtime/vk/README.md). An unknown key or a bad value is an invalid_argument error naming the key.
  std::string tuning;
  // The self-test at load (diffvk/selftest.hpp, docs/decisions/024-selftest-at-load.md): automatic ("auto", the
  // default) tests once per device, driver version, shader build and configuration and then reads the verdict file;
  // always tests at every create; off tests nothing. It runs where a runner is registered (diffvk_bench).
  SelftestMode selftest = SelftestMode::automatic;
  // The ops it tests (names of diffvk_bench's case tables); empty: every op with a table (all that any model kind
  // records). `diffvk selftest --model DIR` gives the model's.
  std::vector<std::string> selftest_ops;
  // The weight formats whose paths it tests: "f16" (the storage type), "q8_0", "q4_0", and "kv=q8_0" for a Q8_0 KV
  // cache (SessionOptions::kv_cache); empty: every format. The float paths are always tested; a quantized op case
  // runs only where its format is listed (an f16 model then compiles no quantized pipeline at load). `diffvk
  // run/chat/bench` give the load's (LoadOptions::weights; every format for a GGUF file, whose tensors are not read
  // before the load). Any other name is an invalid_argument error naming the field.
  std::vector<std::string> selftest_weights;
  // The config.json text of the model the context is for ("" = none): the self-test then also runs the pipelines
  // that take the model's sizes as specialization constants (its attention's head width and query heads per KV
  // head, its scan's state size, the linears' element-wise loads where an input width is not a multiple of 8), at
  // those sizes; the tables' own shapes alone would leave the model's pipelines untested. `diffvk run/chat/bench/
  // selftest --model` give it (diffvk_bench's selftest_model_for_model); part of the verdict's configuration. A text
  // the runner cannot read is an invalid_argument error naming the field and the key.
  std::string selftest_model;
  // Test hook: the cases it fails on purpose (with selftest_fault's fault), "" = none: "OP" fails every variant of
  // the op (the chain then runs out: the create fails naming op and variant), "OP:KEY" only the variants that use the
  // feature of tuning key KEY (coopmat, int_dot, attn_core, subgroup, fp16: the fallback then passes).
  std::string selftest_fail_variant;
  // Test hook: the class of fault planted in selftest_fail_variant's cases (diffvk/selftest.hpp SelftestFault): a
  // wrong element, a NaN, an fp16 overflow (+inf; only in fp16-storage variants), a missing barrier's race (stale
  // elements left at the poison), or a pipeline creation failure. The value faults change the GPU's downloaded
  // output, not the reference. Anything but wrong_value (the default) without selftest_fail_variant, or a value
  // out of the enum, is an invalid_argument error naming the field. Part of the verdict's configuration.
  SelftestFault selftest_fault = SelftestFault::wrong_value;
};

class Device;  // runtime internal (runtime/vk/gpu.hpp)

// Lists the Vulkan devices (probes each once). Throws Error(unsupported) when no Vulkan driver exists.
std::vector<DeviceCaps> list_devices();

// Picks a device per ContextOptions::device (pure; unit-testable).
uint32_t select_device(const std::vector<DeviceCaps>& devices, const std::string& selector);

// The tuning a context with these options would resolve on this device (list_devices()' caps), with the
// environment's overrides; `diffvk info` prints it. Throws what Context::create would for the overrides
// (invalid_argument naming a key; unsupported for cooperative matrices forced on a device without them).
// The precision is taken as automatic (fp16 where usable); an fp32 context turns coopmat off.
Tuning resolve_tuning(const DeviceCaps& caps, const ContextOptions& options = {});

// One Vulkan instance + logical device + queue + pipeline cache.
//
// Threading model (the same for the C ABI, include/diffvk/diffvk.h, and the Java binding):
//  - A Context, its Models and their Sessions may be used from any number of threads at once, with one
//    rule: ONE SESSION IS USED BY ONE THREAD AT A TIME (a session is a conversation; use one per
//    thread, or lock around it). Sessions of the same model run concurrently on different threads;
//    each owns its KV cache, activations, command buffers, command pools and fences, and their
//    submissions are serialised on the device's queue by a lock that is never held during GPU work.
//  - Loading models and creating/destroying sessions may also happen on any thread, concurrently with
//    other sessions running. Destroying an object while another thread still uses it (or uses an object
//    created from it) is the caller's error: destroy sessions before their model, models before their
//    context. A Sampler is used by one thread at a time.
//  - The validation callback (ContextOptions::on_validation_message) may be called on any thread.
// Device loss: once any operation saw VK_ERROR_DEVICE_LOST, lost() is true and every later operation on
// this context, its models and sessions fails at once with Status::device_lost; recreate the context.
class Context {
 public:
  static std::unique_ptr<Context> create(const ContextOptions& options = {});
  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  const DeviceCaps& caps() const;
  const Tuning& tuning() const;  // resolved when the device opened, with why each value was chosen
  // What the self-test at load did (ContextOptions::selftest): its rows, its time, the fallback the tuning took.
  const SelftestReport& selftest() const;
  Precision precision() const;  // resolved: fp16 or fp32
  bool validation_enabled() const;
  void save_pipeline_cache();  // no-op without a path
  // The pipeline cache file in use ("" = none: pipeline_cache = false, no cache directory, statistics_only).
  const std::string& pipeline_cache_path() const;
  bool lost() const;  // the device was lost: everything created from this context is unusable
  Device& device();   // internal handle for runtime code

 private:
  explicit Context(std::unique_ptr<Device> d);
  std::unique_ptr<Device> device_;
};

// Peak device memory of diffvk's buffers, process-wide (every Context): the most bytes they held at once since
// the last reset_device_bytes_peak(), which sets the peak to the bytes held now. Counts the VkDeviceMemory that
// diffvk's buffers allocate, not the driver's own. What `diffvk bench --model` reports as peak device memory.
uint64_t device_bytes_peak();
void reset_device_bytes_peak();

// The driver's statistics of one pipeline executable (VK_KHR_pipeline_executable_properties), as the
// device layer reads them (vk/gpu.hpp: pipeline_executable_statistics) and diffvk/shader_stats.hpp
// reports them. One value of VkPipelineExecutableStatisticKHR; `format` says which member holds it.
struct ShaderStatistic {
  enum class Format { boolean, int64, uint64, float64 };
  std::string name, description;
  Format format = Format::uint64;
  bool b = false;
  int64_t i64 = 0;
  uint64_t u64 = 0;
  double f64 = 0;
};

struct ShaderExecutable {
  std::string name, description;
  uint32_t subgroup_size = 0;
  std::vector<ShaderStatistic> statistics;
};

}  // namespace diffvk
