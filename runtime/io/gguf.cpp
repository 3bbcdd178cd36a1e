// diffvk — GGUF reader and writer; see gguf.hpp for the format, the checks and the limits.
#include "io/gguf.hpp"

#include <algorithm>
#include <cstring>
#include <limits>
#include <type_traits>
#include <unordered_set>

#include "io/printable.hpp"
#include "platform.hpp"

#if defined(__BYTE_ORDER__) && defined(__ORDER_LITTLE_ENDIAN__)
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "diffvk reads little-endian files with memcpy");
#endif

namespace diffvk {
namespace {

[[noreturn]] void fail(const std::string& file, const std::string& what) {
  throw Error(Status::format_error, file + ": " + what);
}

std::string q(std::string_view s) { return "'" + printable(s, 80) + "'"; }

bool is_pow2(uint64_t v) { return v != 0 && (v & (v - 1)) == 0; }

// What a read is for, for messages: a string, or a callable building one only on failure (hot loops).
template <class W>
std::string text(W&& what) {
  if constexpr (std::is_invocable_v<W>) {
    return what();
  } else {
    return std::string(what);
  }
}

// A bounds-checked cursor over the file. Every read names the field it reads.
struct Cursor {
  const std::string& file;
  const uint8_t* p;
  uint64_t size, pos = 0;

  uint64_t left() const { return size - pos; }
  template <class W>
  const uint8_t* take(uint64_t n, W&& what) {
    if (n > left()) {
      fail(file, text(what) + " at offset " + std::to_string(pos) + " needs " + std::to_string(n) + " bytes but only " +
                     std::to_string(left()) + " remain (truncated file?)");
    }
    const uint8_t* r = p + pos;
    pos += n;
    return r;
  }
  template <class T, class W>
  T get(W&& what) {
    T v;
    std::memcpy(&v, take(sizeof(T), what), sizeof(T));
    return v;
  }
  template <class W>
  std::string_view str(uint64_t max, W&& what) {
    const uint64_t at = pos;
    const uint64_t n = get<uint64_t>([&] { return text(what) + " length"; });
    if (n > max) {
      fail(file, text(what) + " at offset " + std::to_string(at) + " is " + std::to_string(n) +
                     " bytes long, over the limit of " + std::to_string(max));
    }
    const uint8_t* s = take(n, what);
    return std::string_view(reinterpret_cast<const char*>(s), size_t(n));
  }
};

// Room for a section's entries and their index (counts already checked against the bytes left).
template <class V, class I>
void reserve_section(V& entries, I& index, uint64_t n) {
  entries.reserve(size_t(n));
  index.reserve(size_t(n));
}

// Entry `i` of a section (a metadata key or a tensor name): read within its length limit, non-empty and
// not seen before. Returns "<label> <quoted name>", the prefix of every later message about the entry.
template <class Index>
std::string read_entry_name(Cursor& c, const std::string& file, uint64_t limit, const std::string& where,
                            const char* empty, const char* label, const Index& index, std::string_view* name) {
  *name = c.str(limit, where + (std::string(empty) == "key" ? ": key" : ": name"));
  if (name->empty()) fail(file, where + ": empty " + empty);
  const std::string w = std::string(label) + " " + q(*name);
  if (index.count(*name)) fail(file, "duplicate " + w);
  return w;
}

}  // namespace

const char* gguf_type_name(GgufType t) noexcept {
  switch (t) {
    case GgufType::uint8:
      return "uint8";
    case GgufType::int8:
      return "int8";
    case GgufType::uint16:
      return "uint16";
    case GgufType::int16:
      return "int16";
    case GgufType::uint32:
      return "uint32";
    case GgufType::int32:
      return "int32";
    case GgufType::float32:
      return "float32";
    case GgufType::boolean:
      return "bool";
    case GgufType::string:
      return "string";
    case GgufType::array:
      return "array";
    case GgufType::uint64:
      return "uint64";
    case GgufType::int64:
      return "int64";
    case GgufType::float64:
      return "float64";
  }
  return "?";
}

size_t gguf_type_size(GgufType t) noexcept {
  switch (t) {
    case GgufType::uint8:
    case GgufType::int8:
    case GgufType::boolean:
      return 1;
    case GgufType::uint16:
    case GgufType::int16:
      return 2;
    case GgufType::uint32:
    case GgufType::int32:
    case GgufType::float32:
      return 4;
    case GgufType::uint64:
    case GgufType::int64:
    case GgufType::float64:
      return 8;
    case GgufType::string:
    case GgufType::array:
      return 0;
  }
  return 0;
}

const char* ggml_type_name(GgmlType t) noexcept {
  switch (t) {
    case GgmlType::f32:
      return "F32";
    case GgmlType::f16:
      return "F16";
    case GgmlType::q4_0:
      return "Q4_0";
    case GgmlType::q8_0:
      return "Q8_0";
    case GgmlType::bf16:
      return "BF16";
  }
  return "?";
}

bool ggml_type_from_id(uint32_t id, GgmlType* out) noexcept {
  switch (id) {
    case 0:
    case 1:
    case 2:
    case 8:
    case 30:
      *out = GgmlType(id);
      return true;
    default:
      return false;
  }
}

size_t ggml_block_weights(GgmlType t) noexcept { return t == GgmlType::q4_0 || t == GgmlType::q8_0 ? 32 : 1; }

size_t ggml_block_bytes(GgmlType t) noexcept {
  switch (t) {
    case GgmlType::f32:
      return 4;
    case GgmlType::f16:
    case GgmlType::bf16:
      return 2;
    case GgmlType::q4_0:
      return 18;
    case GgmlType::q8_0:
      return 34;
  }
  return 0;
}

// ---- values ----------------------------------------------------------------------------------------

bool GgufValue::is_integer() const noexcept {
  switch (type) {
    case GgufType::uint8:
    case GgufType::int8:
    case GgufType::uint16:
    case GgufType::int16:
    case GgufType::uint32:
    case GgufType::int32:
    case GgufType::uint64:
    case GgufType::int64:
      return true;
    default:
      return false;
  }
}

namespace {
// A float as int64 without undefined behaviour: truncated, saturated, NaN -> 0.
int64_t saturate(double v) {
  if (!(v == v)) return 0;
  if (v >= 9.2e18) return std::numeric_limits<int64_t>::max();
  if (v <= -9.2e18) return std::numeric_limits<int64_t>::min();
  return int64_t(v);
}
// Scalar at p of numeric type t, as int64 (integers) — uint64 above INT64_MAX reported through *big.
int64_t read_int(GgufType t, const uint8_t* p, bool* big) {
  *big = false;
  switch (t) {
    case GgufType::uint8:
      return *p;
    case GgufType::int8:
      return int8_t(*p);
    case GgufType::boolean:
      return *p != 0;
    case GgufType::uint16: {
      uint16_t v;
      std::memcpy(&v, p, 2);
      return v;
    }
    case GgufType::int16: {
      int16_t v;
      std::memcpy(&v, p, 2);
      return v;
    }
    case GgufType::uint32: {
      uint32_t v;
      std::memcpy(&v, p, 4);
      return v;
    }
    case GgufType::int32: {
      int32_t v;
      std::memcpy(&v, p, 4);
      return v;
    }
    case GgufType::uint64: {
      uint64_t v;
      std::memcpy(&v, p, 8);
      if (v > uint64_t(std::numeric_limits<int64_t>::max())) *big = true;
      return int64_t(v & uint64_t(std::numeric_limits<int64_t>::max()));
    }
    case GgufType::int64: {
      int64_t v;
      std::memcpy(&v, p, 8);
      return v;
    }
    case GgufType::float32: {
      float v;
      std::memcpy(&v, p, 4);
      return saturate(double(v));
    }
    case GgufType::float64: {
      double v;
      std::memcpy(&v, p, 8);
      return saturate(v);
    }
    default:
      return 0;
  }
}
double read_num(GgufType t, const uint8_t* p) {
  if (t == GgufType::float32) {
    float v;
    std::memcpy(&v, p, 4);
    return v;
  }
  if (t == GgufType::float64) {
    double v;
    std::memcpy(&v, p, 8);
    return v;
  }
  if (t == GgufType::uint64) {
    uint64_t v;
    std::memcpy(&v, p, 8);
    return double(v);
  }
  bool big;
  return double(read_int(t, p, &big));
}
[[noreturn]] void wrong_type(const std::string& what, const char* want, GgufType got) {
  throw Error(Status::format_error, what + " must be " + want + " (it is " + gguf_type_name(got) + ")");
}
}  // namespace

uint64_t GgufValue::as_u64(const std::string& what) const {
  if (!is_integer()) wrong_type(what, "an integer", type);
  if (type == GgufType::uint64) {
    uint64_t v;
    std::memcpy(&v, raw, 8);
    return v;
  }
  bool big;
  const int64_t v = read_int(type, raw, &big);
  if (v < 0) throw Error(Status::format_error, what + " is negative (" + std::to_string(v) + ")");
  return uint64_t(v);
}

int64_t GgufValue::as_i64(const std::string& what) const {
  if (!is_integer()) wrong_type(what, "an integer", type);
  bool big;
  const int64_t v = read_int(type, raw, &big);
  if (big) throw Error(Status::format_error, what + " does not fit in int64");
  return v;
}

double GgufValue::as_f64(const std::string& what) const {
  if (!is_integer() && type != GgufType::float32 && type != GgufType::float64) wrong_type(what, "a number", type);
  return read_num(type, raw);
}

bool GgufValue::as_bool(const std::string& what) const {
  if (type != GgufType::boolean) wrong_type(what, "a bool", type);
  return *raw != 0;
}

std::string_view GgufValue::as_string(const std::string& what) const {
  if (type != GgufType::string) wrong_type(what, "a string", type);
  return str;
}

double GgufValue::number_at(uint64_t i) const { return read_num(elem, raw + i * gguf_type_size(elem)); }
int64_t GgufValue::integer_at(uint64_t i) const {
  bool big;
  return read_int(elem, raw + i * gguf_type_size(elem), &big);
}

std::vector<int64_t> GgufTensorInfo::shape() const {
  std::vector<int64_t> s;
  for (uint32_t i = n_dims; i-- > 0;) s.push_back(int64_t(dims[i]));
  return s;
}

// ---- reader ----------------------------------------------------------------------------------------

GgufFile GgufFile::open(const std::string& path) { return GgufFile(FileBytes::map(path)); }

GgufFile GgufFile::from_file(FileBytes bytes) { return GgufFile(std::move(bytes)); }

GgufFile GgufFile::from_bytes(std::vector<uint8_t> bytes, std::string display_name) {
  return GgufFile(FileBytes::own(std::move(bytes), std::move(display_name)));
}

GgufFile GgufFile::from_view(const void* data, size_t size, std::string display_name) {
  return GgufFile(FileBytes::view(data, size, std::move(display_name)));
}

bool GgufFile::has_magic(const void* data, size_t size) {
  return data && size >= 4 && std::memcmp(data, "GGUF", 4) == 0;
}

GgufFile::GgufFile(FileBytes b)
    : name_(std::move(b.name)), owner_(std::move(b.owner)), mapped_(b.mapped), bytes_(b.bytes), size_(b.size) {
  parse();
}

const GgufValue* GgufFile::find_value(std::string_view key) const {
  auto it = kv_index_.find(key);
  return it == kv_index_.end() ? nullptr : &kv_[it->second].value;
}

const GgufTensorInfo* GgufFile::find_tensor(std::string_view name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

const GgufValue& GgufFile::require_value(std::string_view key) const {
  const GgufValue* v = find_value(key);
  if (!v) fail(name_, "missing metadata key " + q(key));
  return *v;
}

void GgufFile::release(const GgufTensorInfo& t) const {
  if (mapped_)
    static_cast<const platform::MappedFile*>(mapped_)->release(size_t(data_offset_ + t.offset), size_t(t.nbytes));
}

void GgufFile::parse() {
  const std::string& file = name_;
  Cursor c{file, bytes_, size_};
  if (size_ < 24) {
    fail(file, "file is " + std::to_string(size_) + " bytes, shorter than the 24-byte GGUF header (truncated file?)");
  }
  const uint8_t* magic = c.take(4, "magic");
  if (std::memcmp(magic, "GGUF", 4) != 0) {
    fail(file, "not a GGUF file (magic " + q(std::string_view(reinterpret_cast<const char*>(magic), 4)) +
                   ", expected 'GGUF')");
  }
  version_ = c.get<uint32_t>("version");
  if (version_ != 3 && version_ != 2) {
    fail(file, "GGUF version " + std::to_string(version_) + " is not supported (only 2 and 3, little endian" +
                   (version_ >= 0x01000000u ? std::string("; this looks like a big-endian file)") : std::string(")")));
  }
  const uint64_t n_tensors = c.get<uint64_t>("tensor count");
  const uint64_t n_kv = c.get<uint64_t>("metadata key/value count");
  // Counts are checked against their limits and against the bytes left (a tensor info takes at least
  // 8 + 4 + 8 + 4 + 8 bytes, a key/value at least 8 + 4 + 1) before anything is reserved.
  if (n_tensors > kGgufMaxTensors) {
    fail(file,
         "tensor count " + std::to_string(n_tensors) + " exceeds the limit of " + std::to_string(kGgufMaxTensors));
  }
  if (n_kv > kGgufMaxKeys) {
    fail(file,
         "metadata key/value count " + std::to_string(n_kv) + " exceeds the limit of " + std::to_string(kGgufMaxKeys));
  }
  if (n_tensors * 32 + n_kv * 13 > c.left()) {
    fail(file, "tensor count " + std::to_string(n_tensors) + " and key/value count " + std::to_string(n_kv) +
                   " need more than the " + std::to_string(c.left()) + " bytes left in the file (truncated file?)");
  }

  reserve_section(kv_, kv_index_, n_kv);
  for (uint64_t i = 0; i < n_kv; ++i) {
    GgufKV kv;
    const std::string wk = read_entry_name(c, file, kGgufMaxKeyBytes, "metadata key/value " + std::to_string(i), "key",
                                           "metadata key", kv_index_, &kv.key);
    const uint32_t type = c.get<uint32_t>(wk + ": value type");
    if (type > uint32_t(GgufType::float64)) fail(file, wk + ": unknown value type " + std::to_string(type));
    GgufValue& v = kv.value;
    v.type = GgufType(type);
    if (v.type == GgufType::string) {
      v.str = c.str(kGgufMaxStringBytes, wk + ": string");
    } else if (v.type == GgufType::array) {
      const uint32_t et = c.get<uint32_t>(wk + ": array element type");
      if (et > uint32_t(GgufType::float64)) fail(file, wk + ": unknown array element type " + std::to_string(et));
      v.elem = GgufType(et);
      if (v.elem == GgufType::array) fail(file, wk + ": arrays of arrays are not supported (ggml refuses them too)");
      v.count = c.get<uint64_t>(wk + ": array length");
      if (v.count > kGgufMaxArrayCount) {
        fail(file, wk + ": array length " + std::to_string(v.count) + " exceeds the limit of " +
                       std::to_string(kGgufMaxArrayCount));
      }
      if (v.elem == GgufType::string) {
        if (v.count > c.left() / 8) {  // each string needs at least its 8-byte length
          fail(file, wk + ": array of " + std::to_string(v.count) + " strings needs more than the " +
                         std::to_string(c.left()) + " bytes left (truncated file?)");
        }
        v.strings.reserve(size_t(v.count));
        for (uint64_t k = 0; k < v.count; ++k)
          v.strings.push_back(c.str(kGgufMaxStringBytes, [&] { return wk + ": string " + std::to_string(k); }));
      } else {
        const uint64_t es = gguf_type_size(v.elem);
        if (v.count > c.left() / es) {
          fail(file, wk + ": array of " + std::to_string(v.count) + " " + gguf_type_name(v.elem) +
                         " needs more than the " + std::to_string(c.left()) + " bytes left (truncated file?)");
        }
        v.raw = c.take(v.count * es, wk + ": array data");
      }
    } else {
      v.raw = c.take(gguf_type_size(v.type), wk + ": " + gguf_type_name(v.type) + " value");
      if (v.type == GgufType::boolean && *v.raw > 1)
        fail(file, wk + ": bool value " + std::to_string(*v.raw) + " is not 0 or 1");
    }
    kv_index_.emplace(kv.key, kv_.size());
    kv_.push_back(std::move(kv));
  }

  if (const GgufValue* a = find_value("general.alignment")) {
    if (a->type != GgufType::uint32) {
      fail(file, std::string("general.alignment must be a uint32 (it is ") + gguf_type_name(a->type) + ")");
    }
    uint32_t al;
    std::memcpy(&al, a->raw, 4);
    if (!is_pow2(al)) fail(file, "general.alignment " + std::to_string(al) + " is not a power of two");
    alignment_ = al;
  }

  reserve_section(tensors_, tensor_index_, n_tensors);
  for (uint64_t i = 0; i < n_tensors; ++i) {
    GgufTensorInfo t;
    const std::string wt = read_entry_name(c, file, kGgufMaxNameBytes, "tensor info " + std::to_string(i),
                                           "tensor name", "tensor", tensor_index_, &t.name);
    t.n_dims = c.get<uint32_t>(wt + ": n_dims");
    if (t.n_dims < 1 || t.n_dims > kGgufMaxDims) {
      fail(file, wt + ": n_dims " + std::to_string(t.n_dims) + " is outside 1.." + std::to_string(kGgufMaxDims));
    }
    uint64_t numel = 1;
    for (uint32_t d = 0; d < t.n_dims; ++d) {
      const uint64_t v = c.get<uint64_t>([&] { return wt + ": dim " + std::to_string(d); });
      if (v == 0) fail(file, wt + ": dim " + std::to_string(d) + " is 0");
      if (v > uint64_t(std::numeric_limits<int64_t>::max()) / numel) {
        fail(file, wt + ": element count overflows (dim " + std::to_string(d) + " = " + std::to_string(v) + ")");
      }
      numel *= v;
      t.dims[d] = v;
    }
    t.numel = numel;
    const uint32_t type = c.get<uint32_t>(wt + ": type");
    if (!ggml_type_from_id(type, &t.type)) {
      fail(file,
           wt + ": ggml type " + std::to_string(type) + " is not supported (F32 0, F16 1, Q4_0 2, Q8_0 8, BF16 30)");
    }
    const uint64_t bw = ggml_block_weights(t.type);
    if (t.dims[0] % bw != 0) {
      fail(file, wt + ": dim 0 (" + std::to_string(t.dims[0]) + ") is not a multiple of " + ggml_type_name(t.type) +
                     "'s block of " + std::to_string(bw));
    }
    const uint64_t blocks = numel / bw, bb = ggml_block_bytes(t.type);
    if (blocks > std::numeric_limits<uint64_t>::max() / bb) fail(file, wt + ": byte size overflows");
    t.nbytes = blocks * bb;
    t.offset = c.get<uint64_t>(wt + ": data offset");
    if (t.offset % alignment_ != 0) {
      fail(file, wt + ": offset " + std::to_string(t.offset) + " is not a multiple of the alignment " +
                     std::to_string(alignment_));
    }
    tensor_index_.emplace(t.name, tensors_.size());
    tensors_.push_back(t);
  }

  // The data section starts at the next multiple of the alignment (the padding may be the file's end
  // only when there is no tensor data).
  const uint64_t pad = (alignment_ - c.pos % alignment_) % alignment_;
  if (pad > c.left()) {
    if (!tensors_.empty())
      fail(file, "the data section's alignment padding runs past the end of the file (truncated file?)");
    data_offset_ = size_;
  } else {
    data_offset_ = c.pos + pad;
  }
  data_ = bytes_ + data_offset_;
  const uint64_t dsize = size_ - data_offset_;

  std::vector<const GgufTensorInfo*> by_offset;
  by_offset.reserve(tensors_.size());
  for (const auto& t : tensors_) {
    if (t.offset > dsize || t.nbytes > dsize - t.offset) {
      fail(file, "tensor " + q(t.name) + ": data [" + std::to_string(t.offset) + ", +" + std::to_string(t.nbytes) +
                     ") lies beyond the data section (" + std::to_string(dsize) + " bytes; truncated file?)");
    }
    by_offset.push_back(&t);
  }
  std::sort(by_offset.begin(), by_offset.end(), [](const GgufTensorInfo* a, const GgufTensorInfo* b) {
    return a->offset != b->offset ? a->offset < b->offset : a->name < b->name;
  });
  for (size_t i = 1; i < by_offset.size(); ++i) {
    const GgufTensorInfo* a = by_offset[i - 1];
    const GgufTensorInfo* b = by_offset[i];
    if (b->offset < a->offset + a->nbytes) {
      fail(file, "tensors " + q(a->name) + " [" + std::to_string(a->offset) + ", " +
                     std::to_string(a->offset + a->nbytes) + ") and " + q(b->name) + " [" + std::to_string(b->offset) +
                     ", " + std::to_string(b->offset + b->nbytes) + ") overlap in the data section");
    }
  }
}

}  // namespace diffvk
