// diffvk — GGUF v3 files (ggml's model container, https://github.com/ggml-org/ggml/blob/master/docs/gguf.md):
// a memory-mapped reader and a writer. The format and diffvk's keys are in docs/gguf.md.
//
// Layout (little endian): "GGUF", uint32 version (3; 2 is the same layout and is read too), uint64
// tensor count, uint64 key/value count, the key/value pairs, the tensor infos (name, uint32 n_dims,
// n_dims uint64 dims with dims[0] the fastest-varying one, uint32 ggml type, uint64 offset), padding to
// general.alignment (uint32, default 32), the data section. Strings are a uint64 length then bytes.
//
// The reader treats the file as hostile: every count, length, offset and size is
// checked against the bytes left before anything is allocated or read, products are overflow-checked,
// parsing is linear in the file (one pass, plus a sort of the tensors by offset and a hash set of names),
// and a problem is Error(format_error, "<file>: <what>") naming the field. Limits (docs/gguf.md, docs/limits.md):
//   kGgufMaxTensors      1,048,576 tensor infos      kGgufMaxKeys        65,536 key/value pairs
//   kGgufMaxKeyBytes     65,535 bytes per key        kGgufMaxNameBytes   64 bytes per tensor name (ggml's
//   GGML_MAX_NAME) kGgufMaxStringBytes  64 MiB per string value     kGgufMaxArrayCount  2^28 elements per array
//   n_dims 1..4, every dim >= 1, element count < 2^63; arrays of arrays are refused (ggml's reader
//   refuses them too), so value nesting is at most one level.
// Values point into the file: a GgufFile must outlive the views (strings, arrays, tensor data) it returns.
#pragma once
#include "io/file_bytes.hpp"
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "diffvk/error.hpp"

namespace diffvk {

constexpr uint64_t kGgufMaxTensors = 1u << 20;
constexpr uint64_t kGgufMaxKeys = 1u << 16;
constexpr uint64_t kGgufMaxKeyBytes = 65535;
constexpr uint64_t kGgufMaxNameBytes = 64;
constexpr uint64_t kGgufMaxStringBytes = 64u << 20;
constexpr uint64_t kGgufMaxArrayCount = 1u << 28;
constexpr uint32_t kGgufDefaultAlignment = 32;
constexpr uint32_t kGgufMaxDims = 4;

// GGUF metadata value types (gguf.md, gguf_metadata_value_type).
enum class GgufType : uint32_t {
  uint8 = 0,
  int8 = 1,
  uint16 = 2,
  int16 = 3,
  uint32 = 4,
  int32 = 5,
  float32 = 6,
  boolean = 7,
  string = 8,
  array = 9,
  uint64 = 10,
  int64 = 11,
  float64 = 12,
};
const char* gguf_type_name(GgufType t) noexcept;  // "uint8", ..., "float64"; "?" for others
size_t gguf_type_size(GgufType t) noexcept;       // bytes of a scalar of a fixed-size type; 0 for string/array

// The tensor types diffvk reads and writes, with ggml's ids (ggml.h, enum ggml_type).
enum class GgmlType : uint32_t { f32 = 0, f16 = 1, q4_0 = 2, q8_0 = 8, bf16 = 30 };
const char* ggml_type_name(GgmlType t) noexcept;  // "F32", "F16", "Q4_0", "Q8_0", "BF16" (ggml's spelling)
bool ggml_type_from_id(uint32_t id, GgmlType* out) noexcept;
size_t ggml_block_weights(GgmlType t) noexcept;  // 1, or 32 for Q4_0/Q8_0
size_t ggml_block_bytes(GgmlType t) noexcept;    // 4, 2, 18, 34, 2

// One metadata value. Scalars: `type` and the accessors. Arrays: `type` == array, `elem` the element type,
// `count` elements; numeric arrays are `raw` (count * gguf_type_size(elem) little-endian bytes in the file),
// string arrays are `strings`.
struct GgufValue {
  GgufType type = GgufType::uint8;
  GgufType elem = GgufType::uint8;        // arrays only
  uint64_t count = 1;                     // arrays: element count
  const uint8_t* raw = nullptr;           // numeric scalar or numeric array: the bytes in the file
  std::string_view str;                   // string
  std::vector<std::string_view> strings;  // array of strings

  bool is_integer() const noexcept;  // uint8..int64 (not bool)
  // The value as a number; Error(format_error) naming `what` when it is not one / does not fit.
  uint64_t as_u64(const std::string& what) const;
  int64_t as_i64(const std::string& what) const;
  double as_f64(const std::string& what) const;  // float32/float64 and integers
  bool as_bool(const std::string& what) const;
  std::string_view as_string(const std::string& what) const;
  // Element i of a numeric array as double / int64 (i < count; no type check beyond numeric).
  double number_at(uint64_t i) const;
  int64_t integer_at(uint64_t i) const;
};

struct GgufKV {
  std::string_view key;
  GgufValue value;
};

struct GgufTensorInfo {
  std::string_view name;
  uint32_t n_dims = 0;
  uint64_t dims[kGgufMaxDims] = {1, 1, 1, 1};  // dims[0] fastest (ggml's ne); unused dims are 1
  GgmlType type = GgmlType::f32;
  uint64_t offset = 0;  // relative to the data section, a multiple of the alignment
  uint64_t nbytes = 0;  // validated: fits the data section
  uint64_t numel = 0;
  // Row-major shape as safetensors / numpy write it: dims reversed ([rows, cols] for a matrix).
  std::vector<int64_t> shape() const;
};

class GgufFile {
 public:
  GgufFile() = default;
  // Memory-maps the file (platform::MappedFile). io_error / format_error.
  static GgufFile open(const std::string& path);
  // Parses bytes already opened (FileBytes::map_fd: a descriptor's range, mapped where it can be, which the
  // caller checked for the container's magic first).
  static GgufFile from_file(FileBytes bytes);
  // Parses an owned buffer (tests, fuzzing); display_name is used in messages.
  static GgufFile from_bytes(std::vector<uint8_t> bytes, std::string display_name);
  // Parses caller-owned memory that outlives the GgufFile (Model::load_memory).
  static GgufFile from_view(const void* data, size_t size, std::string display_name);
  // True when `size` bytes at `data` start with the GGUF magic.
  static bool has_magic(const void* data, size_t size);

  const std::string& name() const { return name_; }
  uint32_t version() const { return version_; }
  uint32_t alignment() const { return alignment_; }
  const std::vector<GgufKV>& metadata() const { return kv_; }              // file order
  const std::vector<GgufTensorInfo>& tensors() const { return tensors_; }  // file order
  const GgufValue* find_value(std::string_view key) const;                 // nullptr when absent
  const GgufTensorInfo* find_tensor(std::string_view name) const;          // nullptr when absent
  // The value, which must exist; format_error naming the file and the key otherwise.
  const GgufValue& require_value(std::string_view key) const;
  const uint8_t* data(const GgufTensorInfo& t) const { return data_ + t.offset; }
  uint64_t data_offset() const { return data_offset_; }  // of the data section in the file
  uint64_t data_size() const { return size_ - data_offset_; }
  void release(const GgufTensorInfo& t) const;  // drops the tensor's pages (mapped files); no-op otherwise

 private:
  explicit GgufFile(FileBytes bytes);  // parses
  void parse();
  std::string name_;
  std::shared_ptr<const void> owner_;
  const void* mapped_ = nullptr;
  const uint8_t* bytes_ = nullptr;
  uint64_t size_ = 0;
  const uint8_t* data_ = nullptr;
  uint64_t data_offset_ = 0;
  uint32_t version_ = 0;
  uint32_t alignment_ = kGgufDefaultAlignment;
  std::vector<GgufKV> kv_;
  std::vector<GgufTensorInfo> tensors_;
  std::unordered_map<std::string_view, size_t> kv_index_, tensor_index_;
};

// Builds a GGUF v3 file in memory and writes it atomically (platform::write_file_atomic). Keys and tensor
// names are checked (non-empty, within the limits above, unique); tensor data must be exactly the size
// that the type and dims give. Tensors are laid out in insertion order, each at a multiple of the alignment.
class GgufWriter {
 public:
  explicit GgufWriter(uint32_t alignment = kGgufDefaultAlignment);  // a power of two; also written as general.alignment
  void add_u32(const std::string& key, uint32_t v);
  void add_i32(const std::string& key, int32_t v);
  void add_u64(const std::string& key, uint64_t v);
  void add_f32(const std::string& key, float v);
  void add_bool(const std::string& key, bool v);
  void add_string(const std::string& key, const std::string& v);
  void add_string_array(const std::string& key, const std::vector<std::string>& v);
  void add_f32_array(const std::string& key, const std::vector<float>& v);
  void add_i32_array(const std::string& key, const std::vector<int32_t>& v);
  // dims in ggml order (dims[0] fastest: {cols, rows} for a row-major matrix).
  void add_tensor(const std::string& name, const std::vector<uint64_t>& dims, GgmlType type, std::vector<uint8_t> data);
  std::vector<uint8_t> bytes() const;         // the whole file
  void write(const std::string& path) const;  // atomically

 private:
  void key(const std::string& k, GgufType t);
  struct Tensor {
    std::string name;
    std::vector<uint64_t> dims;
    GgmlType type;
    std::vector<uint8_t> data;
  };
  uint32_t alignment_;
  uint64_t kv_count_ = 0;
  std::vector<uint8_t> kv_;
  std::vector<std::string> keys_;
  std::vector<Tensor> tensors_;
};

}  // namespace diffvk
