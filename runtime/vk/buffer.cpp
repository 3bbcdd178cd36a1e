#include <atomic>
#include <cstring>

#include "vk/gpu.hpp"

namespace diffvk {

namespace {
std::atomic<uint64_t> g_device_bytes{0};  // live VkDeviceMemory of all Buffers (device_bytes_allocated)
std::atomic<uint64_t> g_device_peak{0};   // its maximum since the last reset_device_bytes_peak()
void note_peak(uint64_t now) {
  uint64_t p = g_device_peak.load();
  while (now > p && !g_device_peak.compare_exchange_weak(p, now)) {}
}
}  // namespace

uint64_t device_bytes_allocated() { return g_device_bytes.load(); }
uint64_t device_bytes_peak() { return g_device_peak.load(); }
void reset_device_bytes_peak() { g_device_peak.store(g_device_bytes.load()); }

Buffer::Buffer(Device& device, VkDeviceSize size, MemoryDomain domain, const std::string& what)
    : device_(&device), size_(size) {
  if (size == 0) throw Error(Status::invalid_argument, "buffer '" + what + "': zero size");
  device.require_execution("buffer '" + what + "'");
  VkDevice dev = device.handle();
  VkBufferCreateInfo bci{VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO};
  bci.size = size;
  bci.usage = VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT |
              (domain == MemoryDomain::device ? VK_BUFFER_USAGE_STORAGE_BUFFER_BIT : 0);
  bci.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
  try {
    DVK_CHECK(vkCreateBuffer(dev, &bci, nullptr, &buffer_));
    VkMemoryRequirements req;
    vkGetBufferMemoryRequirements(dev, buffer_, &req);
    const auto coherent = VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
    uint32_t type;
    if (domain == MemoryDomain::device) {
      // Device-local; on UMA / resizable-BAR devices the same memory is host-visible and is mapped directly.
      type = device.find_memory_type(req.memoryTypeBits, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT,
                                     VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT | coherent);
      if (type == UINT32_MAX) type = device.find_memory_type(req.memoryTypeBits, 0, coherent);
    } else {
      type = device.find_memory_type(req.memoryTypeBits, coherent, coherent | VK_MEMORY_PROPERTY_HOST_CACHED_BIT);
    }
    if (type == UINT32_MAX) throw Error(Status::unsupported, "buffer '" + what + "': no suitable memory type");
    const uint64_t max_alloc = device.caps().max_memory_allocation_size;
    if (max_alloc && req.size > max_alloc)
      throw Error(Status::out_of_memory, "buffer '" + what + "': " + std::to_string(req.size) +
                                             " bytes exceed the device's maxMemoryAllocationSize " +
                                             std::to_string(max_alloc));
    VkMemoryAllocateInfo ai{VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO};
    ai.allocationSize = req.size;
    ai.memoryTypeIndex = type;
    try {
      DVK_CHECK(vkAllocateMemory(dev, &ai, nullptr, &memory_));
      note_peak(g_device_bytes += req.size);
    } catch (const Error& e) {
      throw Error(e.status(), "allocating " + std::to_string(req.size) + " bytes for '" + what + "': " + e.what());
    }
    DVK_CHECK(vkBindBufferMemory(dev, buffer_, memory_, 0));
    if ((device.caps().memory_types[type].flags & coherent) == coherent)
      DVK_CHECK(vkMapMemory(dev, memory_, 0, VK_WHOLE_SIZE, 0, &mapped_));
  } catch (...) {
    release();
    throw;
  }
}

Buffer::~Buffer() { release(); }

void Buffer::release() noexcept {
  if (!device_) return;
  VkDevice dev = device_->handle();
  if (mapped_) vkUnmapMemory(dev, memory_);
  if (memory_ && buffer_) {
    // The allocation was exactly the buffer's requirement (see the constructor).
    VkMemoryRequirements req;
    vkGetBufferMemoryRequirements(dev, buffer_, &req);
    g_device_bytes -= req.size;
  }
  if (buffer_) vkDestroyBuffer(dev, buffer_, nullptr);
  if (memory_) vkFreeMemory(dev, memory_, nullptr);
  mapped_ = nullptr;
  buffer_ = VK_NULL_HANDLE;
  memory_ = VK_NULL_HANDLE;
  device_ = nullptr;
}

Buffer::Buffer(Buffer&& o) noexcept { *this = std::move(o); }
Buffer& Buffer::operator=(Buffer&& o) noexcept {
  if (this != &o) {
    release();
    device_ = o.device_;
    buffer_ = o.buffer_;
    memory_ = o.memory_;
    size_ = o.size_;
    mapped_ = o.mapped_;
    o.device_ = nullptr;
    o.buffer_ = VK_NULL_HANDLE;
    o.memory_ = VK_NULL_HANDLE;
    o.mapped_ = nullptr;
  }
  return *this;
}

namespace {
void check_range(VkDeviceSize offset, size_t bytes, VkDeviceSize size, const char* op) {
  if (offset > size || bytes > size - offset)
    throw Error(Status::invalid_argument, std::string(op) + ": range [" + std::to_string(offset) + ", +" +
                                              std::to_string(bytes) + ") exceeds buffer size " + std::to_string(size));
}
// Transfers and host access happen between recorded programs; the program's leading/trailing
// barriers (runtime/vk/program.cpp) order them against compute work.
void transfer_to_host_barrier(VkCommandBuffer cb) {
  VkMemoryBarrier mb{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
  mb.srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT;
  mb.dstAccessMask = VK_ACCESS_HOST_READ_BIT;
  vkCmdPipelineBarrier(cb, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_PIPELINE_STAGE_HOST_BIT, 0, 1, &mb, 0, nullptr, 0,
                       nullptr);
}
void before_transfer_barrier(VkCommandBuffer cb) {
  VkMemoryBarrier mb{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
  mb.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT | VK_ACCESS_HOST_WRITE_BIT;
  mb.dstAccessMask = VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
  vkCmdPipelineBarrier(
      cb, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT | VK_PIPELINE_STAGE_HOST_BIT,
      VK_PIPELINE_STAGE_TRANSFER_BIT, 0, 1, &mb, 0, nullptr, 0, nullptr);
}
}  // namespace

BufferRange Device::zero_range() {
  std::lock_guard<std::mutex> lock(zero_mutex_);
  if (!zero_) {
    zero_ = std::make_unique<Buffer>(*this, 256, MemoryDomain::device, "zero");
    zero_->fill(0, 256, 0);
  }
  return zero_->range();
}

void Buffer::upload(VkDeviceSize offset, const void* src, size_t bytes) {
  check_range(offset, bytes, size_, "Buffer::upload");
  if (bytes == 0) return;
  if (mapped_) {
    std::memcpy(static_cast<char*>(mapped_) + offset, src, bytes);
    return;
  }
  Buffer staging(*device_, bytes, MemoryDomain::staging, "upload staging");
  std::memcpy(staging.mapped(), src, bytes);
  device_->one_shot([&](VkCommandBuffer cb) {
    before_transfer_barrier(cb);
    VkBufferCopy region{0, offset, bytes};
    vkCmdCopyBuffer(cb, staging.handle(), buffer_, 1, &region);
  });
}

void Buffer::download(VkDeviceSize offset, void* dst, size_t bytes) const {
  check_range(offset, bytes, size_, "Buffer::download");
  if (bytes == 0) return;
  if (mapped_) {
    std::memcpy(dst, static_cast<const char*>(mapped_) + offset, bytes);
    return;
  }
  Buffer staging(*device_, bytes, MemoryDomain::staging, "download staging");
  device_->one_shot([&](VkCommandBuffer cb) {
    before_transfer_barrier(cb);
    VkBufferCopy region{offset, 0, bytes};
    vkCmdCopyBuffer(cb, buffer_, staging.handle(), 1, &region);
    transfer_to_host_barrier(cb);
  });
  std::memcpy(dst, staging.mapped(), bytes);
}

void Buffer::fill(VkDeviceSize offset, VkDeviceSize bytes, uint32_t pattern) {
  check_range(offset, bytes, size_, "Buffer::fill");
  if (bytes == 0) return;
  if (mapped_) {
    auto* p = static_cast<char*>(mapped_) + offset;
    for (VkDeviceSize i = 0; i < bytes; i += 4) std::memcpy(p + i, &pattern, std::min<VkDeviceSize>(4, bytes - i));
    return;
  }
  if (offset % 4 || bytes % 4)
    throw Error(Status::invalid_argument, "Buffer::fill: offset and size must be multiples of 4");
  device_->one_shot([&](VkCommandBuffer cb) {
    before_transfer_barrier(cb);
    vkCmdFillBuffer(cb, buffer_, offset, bytes, pattern);
  });
}

}  // namespace diffvk
