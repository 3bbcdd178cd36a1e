// diffvk — safetensors reader (https://github.com/huggingface/safetensors).
//
// Layout: 8-byte little-endian header length N, N bytes of UTF-8 JSON, data.
// Everything read from the file is validated before use; any problem throws
// diffvk::Error(format_error, "<file>: <what>"), or io_error when the file cannot
// be opened. Checks: header length 0 / > 100 MB / past the end of the file;
// header UTF-8, JSON syntax, top-level object, duplicate keys (also inside
// entries), nesting depth; each entry an object with exactly dtype/shape/
// data_offsets of the right JSON types; dtype one of F32 F16 BF16 I64 I32;
// shape dims non-negative with no overflow; data_offsets two non-negative
// integers, begin <= end <= data size; end - begin == product(shape) * dtype size;
// the data section covered exactly (no overlaps, no holes, no trailing bytes);
// "__metadata__" a string -> string object.
#pragma once
#include "io/file_bytes.hpp"
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "diffvk/error.hpp"

namespace diffvk {

enum class DType { F32, F16, BF16, I64, I32 };

const char* dtype_name(DType d) noexcept;  // "F32", "F16", "BF16", "I64", "I32"
size_t dtype_size(DType d) noexcept;       // bytes per element

struct TensorInfo {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;   // empty: scalar
  uint64_t begin = 0, end = 0;  // byte offsets relative to the data section
  uint64_t numel() const;       // product(shape); validated not to overflow
  uint64_t nbytes() const { return end - begin; }
};

std::string shape_to_string(const std::vector<int64_t>& shape);  // "[2, 3]"

class SafetensorsFile {
 public:
  SafetensorsFile() = default;  // empty: no tensors

  // Memory-maps the file (platform::MappedFile). io_error / format_error.
  static SafetensorsFile open(const std::string& path);
  // Parses bytes already opened (FileBytes::map_fd: a descriptor's range, mapped where it can be, which the
  // caller checked for the container's magic first).
  static SafetensorsFile from_file(FileBytes bytes);
  // Parses an in-memory file; display_name is used in error messages.
  static SafetensorsFile from_bytes(std::vector<uint8_t> bytes, std::string display_name);
  // Parses memory owned by the caller, without copying; it must outlive the returned object.
  static SafetensorsFile from_view(const void* data, size_t size, std::string display_name);

  const std::string& name() const { return name_; }
  const std::vector<TensorInfo>& tensors() const { return tensors_; }  // sorted by name
  const TensorInfo* find(const std::string& name) const;               // nullptr when absent

  // The tensor, which must exist and have exactly `shape`; otherwise
  // format_error naming the file, the tensor and expected vs actual shape.
  const TensorInfo& require(const std::string& name, std::initializer_list<int64_t> shape) const;
  const TensorInfo& require(const std::string& name, const std::vector<int64_t>& shape) const;

  // Elements converted to float (exact for F32/F16/BF16). invalid_argument for
  // integer dtypes or a TensorInfo that does not describe this file's data.
  std::vector<float> to_float(const TensorInfo& t) const;
  // Raw little-endian bytes of the tensor (t.nbytes() of them; not aligned).
  const uint8_t* data(const TensorInfo& t) const;
  // The data section (all tensors) and its size.
  const uint8_t* data_section() const { return data_; }
  uint64_t data_size() const { return data_size_; }

  std::map<std::string, std::string> metadata() const { return metadata_; }
  // Drops the tensor's pages from the resident set when the file is memory-mapped (open()); no-op otherwise.
  void release(const TensorInfo& t) const;

 private:
  explicit SafetensorsFile(FileBytes bytes);  // parses
  void parse();
  void check_info(const TensorInfo& t, const char* what) const;

  std::string name_;
  std::shared_ptr<const void> owner_;  // keeps the mapping / buffer alive
  const void* mapped_ = nullptr;       // the platform::MappedFile when opened from a path
  const uint8_t* bytes_ = nullptr;     // whole file
  uint64_t size_ = 0;
  const uint8_t* data_ = nullptr;  // data section
  uint64_t data_size_ = 0;
  std::vector<TensorInfo> tensors_;
  std::map<std::string, std::string> metadata_;
};

}  // namespace diffvk
