// Internal GPU layer: logical device, buffers, compute pipelines. Not part of the public API.
#pragma once
#include <vulkan/vulkan.h>

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "diffvk/device.hpp"
#include "vk_check.hpp"

namespace diffvk {

class Instance;

// The logical device and everything bound to it. Owns the instance.
class Device {
 public:
  static std::unique_ptr<Device> create(const ContextOptions& options);
  ~Device();
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;

  VkDevice handle() const { return device_; }
  VkPhysicalDevice physical() const { return physical_; }
  VkQueue queue() const { return queue_; }
  uint32_t queue_family() const { return queue_family_; }
  VkCommandPool command_pool() const { return pool_; }
  VkPipelineCache pipeline_cache() const { return cache_; }
  const DeviceCaps& caps() const { return caps_; }
  bool fp16() const { return fp16_; }                      // fp16-storage shader variants in use
  bool subgroup_arithmetic() const { return subgroup_; }   // subgroup shader variants in use
  bool validation() const;

  // Memory type index with all `required` flags, preferring `preferred`; UINT32_MAX when none.
  uint32_t find_memory_type(uint32_t type_bits, VkMemoryPropertyFlags required, VkMemoryPropertyFlags preferred) const;

  // Records `fn` into a one-time command buffer, submits it and waits.
  template <class F>
  void one_shot(F&& fn) {
    VkCommandBuffer cb = begin_one_shot();
    try {
      fn(cb);
    } catch (...) {
      abandon_one_shot(cb);
      throw;
    }
    end_one_shot(cb);
  }
  // Submits a recorded command buffer and waits for it (fence).
  void submit_and_wait(VkCommandBuffer cb);

  void save_pipeline_cache();

  // A 256-byte zero-filled storage buffer: bound where an optional input is absent (e.g. the
  // dynamic position of a kernel recorded with a fixed position).
  struct BufferRange zero_range();

 private:
  Device() = default;
  VkCommandBuffer begin_one_shot();
  void end_one_shot(VkCommandBuffer cb);
  void abandon_one_shot(VkCommandBuffer cb);
  void load_pipeline_cache();

  std::unique_ptr<Instance> instance_;
  VkPhysicalDevice physical_ = VK_NULL_HANDLE;
  VkDevice device_ = VK_NULL_HANDLE;
  VkQueue queue_ = VK_NULL_HANDLE;
  uint32_t queue_family_ = 0;
  VkCommandPool pool_ = VK_NULL_HANDLE;
  VkFence fence_ = VK_NULL_HANDLE;
  VkPipelineCache cache_ = VK_NULL_HANDLE;
  std::string cache_path_;
  DeviceCaps caps_;
  bool fp16_ = false;
  bool subgroup_ = false;
  std::unique_ptr<class Buffer> zero_;
};

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
  std::string op;                 // shaders/<op>.comp
  uint32_t bindings = 0;          // storage buffers at binding 0..n-1 (set 0)
  uint32_t push_bytes = 0;        // push-constant block size
  std::vector<uint32_t> spec;     // specialization constants, constant_id 0..n-1 (floats bit-cast)
  bool subgroup = false;          // use the DVK_SUBGROUP=1 variant (device must support it)
  bool fp16 = false;              // use the DVK_FP16=1 variant
  uint32_t subgroup_size = 0;     // nonzero: required subgroup size, full subgroups (DeviceCaps::subgroup_size_control)
};

class Pipeline {
 public:
  Pipeline(Device& device, const PipelineDesc& desc);
  ~Pipeline();
  Pipeline(const Pipeline&) = delete;
  Pipeline& operator=(const Pipeline&) = delete;

  VkPipeline handle() const { return pipeline_; }
  VkPipelineLayout layout() const { return layout_; }
  VkDescriptorSetLayout set_layout() const { return set_layout_; }
  const PipelineDesc& desc() const { return desc_; }
  const std::string& name() const { return name_; }

 private:
  void destroy() noexcept;
  Device& device_;
  PipelineDesc desc_;
  std::string name_;
  VkDescriptorSetLayout set_layout_ = VK_NULL_HANDLE;
  VkPipelineLayout layout_ = VK_NULL_HANDLE;
  VkPipeline pipeline_ = VK_NULL_HANDLE;
};

// Bytes of VkDeviceMemory currently allocated by Buffer objects, process-wide (leak checks in tests).
uint64_t device_bytes_allocated();

inline uint32_t f32_bits(float f) {
  uint32_t u;
  static_assert(sizeof u == sizeof f);
  __builtin_memcpy(&u, &f, sizeof u);
  return u;
}

}  // namespace diffvk
