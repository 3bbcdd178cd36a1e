// The model's weights on the device: packed into a few large buffers (each <= the device's maximum
// allocation), every tensor aligned and bindable. Uploaded by streaming: each tensor is converted from
// its (memory-mapped) source a bounded slice at a time (WeightStore::upload's staging_bytes), so the
// host holds at most one slice, never a whole tensor or model. A tensor larger than the storage-buffer
// range is split by rows into parts, each its own binding (the embedding and lm_head of a large vocabulary).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "io/quant.hpp"
#include "io/weight_source.hpp"
#include "vk/gpu.hpp"

namespace diffvk {

struct WeightPart {
  uint64_t row0 = 0, rows = 0;  // rows of the tensor this part holds
  BufferRange range;
};

struct WeightUploadStats {
  uint64_t staging_peak_bytes = 0;    // host bytes of conversion + staging held at once (0 on mapped device memory)
  uint64_t largest_tensor_bytes = 0;  // the largest tensor as stored (storage type or quantized)
  uint64_t bytes = 0;                 // bytes uploaded
  uint32_t split_tensors = 0;         // tensors stored as more than one part
};

class WeightStore {
 public:
  // max_binding: the largest storage-buffer binding (the device's maxStorageBufferRange, or a smaller test limit).
  WeightStore(Device& dev, bool fp16, uint64_t max_binding);
  // format f16: the storage type (fp16 or fp32, as today); q8_0 / q4_0: quantized blocks (the source's
  // cols must be a multiple of 32: invalid_argument otherwise; Model::load checks before).
  size_t add(WeightSource source, QuantType format = QuantType::f16);
  QuantType format(size_t i) const { return formats_.at(i); }
  // Bytes upload() will allocate (aligned), known before anything is allocated.
  uint64_t planned_bytes() const;
  // Allocates, converts and uploads every tensor through a host slice of at most staging_bytes
  // (at least one row). The sources' mapped pages are released as each tensor is done.
  // force_staging: use the host slice + staging buffer even where the device memory is mapped.
  WeightUploadStats upload(uint64_t staging_bytes, bool force_staging = false);
  // The whole tensor; throws unsupported naming it when it is split (the caller does not handle parts).
  BufferRange range(size_t i) const;
  const std::vector<WeightPart>& parts(size_t i) const { return parts_.at(i); }
  uint64_t total() const { return total_; }
  // The device bytes of tensor i as uploaded (its parts in order): tests compare two loads' weights.
  std::vector<uint8_t> download(size_t i) const;

 private:
  std::vector<uint64_t> part_rows(size_t i) const;
  uint64_t part_bytes(size_t i, uint64_t rows) const;  // device bytes of `rows` rows of tensor i in its format
  void upload_part(size_t i, uint64_t row0, uint64_t rows, Buffer& buf, uint64_t offset, uint64_t staging_bytes,
                   bool force_staging, std::vector<uint8_t>& slice, WeightUploadStats& st) const;
  Device& dev_;
  bool fp16_;
  uint64_t max_binding_;
  std::vector<WeightSource> sources_;
  std::vector<QuantType> formats_;
  std::vector<Buffer> buffers_;
  std::vector<std::vector<WeightPart>> parts_;
  uint64_t total_ = 0;
};

}  // namespace diffvk
