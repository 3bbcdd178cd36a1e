// diffvk — safetensors reader; see safetensors.hpp for the checks performed.
#include "io/safetensors.hpp"
#include "io/checked_shape.hpp"

#include <algorithm>
#include <cstring>
#include <limits>
#include <set>
#include <utility>

#include <nlohmann/json.hpp>

#include "io/bounded_json.hpp"

#include "io/half.hpp"
#include "platform.hpp"

#if defined(__BYTE_ORDER__) && defined(__ORDER_LITTLE_ENDIAN__)
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "diffvk reads little-endian files with memcpy");
#endif

namespace diffvk {
namespace {

using json = nlohmann::json;

constexpr uint64_t kMaxHeader = 100000000;  // same limit as the reference implementation

[[noreturn]] void fail(const std::string& file, const std::string& what) {
  throw Error(Status::format_error, file + ": " + what);
}

std::string qname(const std::string& s) {
  // Names come from the file: keep messages printable and bounded.
  std::string out = "'";
  size_t n = 0;
  for (unsigned char c : s) {
    if (++n > 200) {
      out += "...";
      break;
    }
    if (c < 0x20 || c == 0x7f) {
      static const char* hex = "0123456789abcdef";
      out += "\\x";
      out += hex[c >> 4];
      out += hex[c & 15];
    } else {
      out += char(c);
    }
  }
  out += "'";
  return out;
}

// Strict UTF-8 (no overlong forms, no surrogates, <= U+10FFFF). Returns the
// offset of the first bad byte, or npos.
size_t find_invalid_utf8(const uint8_t* p, size_t n) {
  size_t i = 0;
  while (i < n) {
    uint8_t c = p[i];
    if (c < 0x80) {
      ++i;
      continue;
    }
    size_t len;
    uint32_t cp;
    uint32_t min;
    if ((c & 0xe0) == 0xc0) {
      len = 2, cp = c & 0x1f, min = 0x80;
    } else if ((c & 0xf0) == 0xe0) {
      len = 3, cp = c & 0x0f, min = 0x800;
    } else if ((c & 0xf8) == 0xf0) {
      len = 4, cp = c & 0x07, min = 0x10000;
    } else {
      return i;
    }
    if (n - i < len) return i;
    for (size_t k = 1; k < len; ++k) {
      if ((p[i + k] & 0xc0) != 0x80) return i;
      cp = (cp << 6) | (p[i + k] & 0x3f);
    }
    if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return i;
    i += len;
  }
  return std::string::npos;
}

const char* json_type(const json& j) {
  switch (j.type()) {
    case json::value_t::null:
      return "null";
    case json::value_t::object:
      return "object";
    case json::value_t::array:
      return "array";
    case json::value_t::string:
      return "string";
    case json::value_t::boolean:
      return "boolean";
    case json::value_t::number_integer:
    case json::value_t::number_unsigned:
      return "integer";
    case json::value_t::number_float:
      return "number";
    case json::value_t::binary:
      return "binary";
    case json::value_t::discarded:
      return "discarded";
  }
  return "?";
}

bool parse_dtype(const std::string& s, DType* out) {
  static const std::pair<const char*, DType> kTable[] = {
      {"F32", DType::F32}, {"F16", DType::F16}, {"BF16", DType::BF16}, {"I64", DType::I64}, {"I32", DType::I32}};
  for (const auto& e : kTable) {
    if (s == e.first) {
      *out = e.second;
      return true;
    }
  }
  return false;
}

// product(shape) * elem, or false on overflow / negative dims.
bool checked_bytes(const std::vector<int64_t>& shape, uint64_t elem, uint64_t* numel, uint64_t* bytes) {
  uint64_t n = 0;
  if (!checked_numel(shape, &n)) return false;
  if (elem != 0 && n > std::numeric_limits<uint64_t>::max() / elem) return false;
  if (numel) *numel = n;
  if (bytes) *bytes = n * elem;
  return true;
}

uint64_t read_u64_le(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

}  // namespace

const char* dtype_name(DType d) noexcept {
  switch (d) {
    case DType::F32:
      return "F32";
    case DType::F16:
      return "F16";
    case DType::BF16:
      return "BF16";
    case DType::I64:
      return "I64";
    case DType::I32:
      return "I32";
  }
  return "?";
}

size_t dtype_size(DType d) noexcept {
  switch (d) {
    case DType::F32:
      return 4;
    case DType::F16:
      return 2;
    case DType::BF16:
      return 2;
    case DType::I64:
      return 8;
    case DType::I32:
      return 4;
  }
  return 0;
}

std::string shape_to_string(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

uint64_t TensorInfo::numel() const {
  uint64_t n = 0;
  if (!checked_bytes(shape, 1, &n, nullptr)) {
    throw Error(Status::invalid_argument,
                "tensor " + qname(name) + ": shape " + shape_to_string(shape) + " is negative or overflows");
  }
  return n;
}

SafetensorsFile SafetensorsFile::open(const std::string& path) { return SafetensorsFile(FileBytes::map(path)); }

SafetensorsFile SafetensorsFile::from_file(FileBytes bytes) { return SafetensorsFile(std::move(bytes)); }

SafetensorsFile SafetensorsFile::from_bytes(std::vector<uint8_t> bytes, std::string display_name) {
  return SafetensorsFile(FileBytes::own(std::move(bytes), std::move(display_name)));
}

SafetensorsFile SafetensorsFile::from_view(const void* data, size_t size, std::string display_name) {
  return SafetensorsFile(FileBytes::view(data, size, std::move(display_name)));
}

SafetensorsFile::SafetensorsFile(FileBytes b)
    : name_(std::move(b.name)), owner_(std::move(b.owner)), mapped_(b.mapped), bytes_(b.bytes), size_(b.size) {
  parse();
}

void SafetensorsFile::parse() {
  const std::string& file = name_;
  if (size_ < 8) {
    fail(file, "file is " + std::to_string(size_) + " bytes, shorter than the 8-byte header length field");
  }
  const uint64_t n = read_u64_le(bytes_);
  if (n == 0) fail(file, "header length is 0");
  if (n > kMaxHeader) {
    fail(file, "header length " + std::to_string(n) + " exceeds the limit of " + std::to_string(kMaxHeader) + " bytes");
  }
  if (n > size_ - 8) {
    fail(file, "header length " + std::to_string(n) + " exceeds the " + std::to_string(size_ - 8) +
                   " bytes after the length field (truncated file?)");
  }
  const uint8_t* hdr = bytes_ + 8;
  const size_t hdr_len = size_t(n);
  data_ = hdr + hdr_len;
  data_size_ = size_ - 8 - n;

  size_t bad = find_invalid_utf8(hdr, hdr_len);
  if (bad != std::string::npos) {
    static const char* hex = "0123456789ABCDEF";
    std::string b = "0x";
    b += hex[hdr[bad] >> 4];
    b += hex[hdr[bad] & 15];
    fail(file, "header is not valid UTF-8 (byte " + b + " at header offset " + std::to_string(bad) + ")");
  }

  // nlohmann's lexer treats a NUL byte as the end of input, which would let junk
  // after it through: refuse NULs outright (JSON never needs a raw NUL).
  if (const void* nul = std::memchr(hdr, 0, hdr_len)) {
    fail(file, "header contains a NUL byte at header offset " + std::to_string(static_cast<const uint8_t*>(nul) - hdr));
  }

  // nlohmann keeps the last of duplicate keys, so duplicates are caught in the
  // parser callback (one key set per open object). The callback also bounds the
  // nesting depth: safetensors needs object > entry object > shape array.
  std::vector<std::set<std::string>> keys;
  std::string entry;  // current top-level key, for messages
  json::parser_callback_t cb = [&](int depth, json::parse_event_t ev, json& parsed) -> bool {
    if (depth < 0) return true;
    const size_t d = size_t(depth);
    switch (ev) {
      case json::parse_event_t::object_start:
      case json::parse_event_t::array_start:
        if (d >= 3) {
          fail(file, "header JSON nests deeper than a safetensors header can (inside entry " + qname(entry) + ")");
        }
        if (ev == json::parse_event_t::object_start) {
          if (keys.size() < d + 2) keys.resize(d + 2);
          keys[d + 1].clear();
        }
        break;
      case json::parse_event_t::key: {
        const std::string& k = parsed.get_ref<const std::string&>();
        if (keys.size() < d + 1) keys.resize(d + 1);
        if (d == 1) entry = k;
        if (!keys[d].insert(k).second) {
          if (d == 1) fail(file, "duplicate tensor name " + qname(k) + " in header");
          fail(file, "duplicate key " + qname(k) + " in header entry " + qname(entry));
        }
        break;
      }
      default:
        break;
    }
    return true;
  };

  // The one bounded entry point (io/bounded_json.hpp) adds the general depth limit; the header's
  // length was checked above.
  const json j = parse_json(reinterpret_cast<const char*>(hdr), hdr_len, file + ": header", hdr_len, cb);
  if (!j.is_object()) fail(file, std::string("header is not a JSON object (it is a ") + json_type(j) + ")");

  std::vector<TensorInfo> infos;
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string& name = it.key();
    const json& v = it.value();
    if (name == "__metadata__") {
      if (!v.is_object()) fail(file, std::string("__metadata__ is not a JSON object (it is a ") + json_type(v) + ")");
      for (auto m = v.begin(); m != v.end(); ++m) {
        if (!m.value().is_string()) {
          fail(file, "__metadata__ value for key " + qname(m.key()) + " is not a string (it is a " +
                         json_type(m.value()) + ")");
        }
        metadata_[m.key()] = m.value().get<std::string>();
      }
      continue;
    }
    const std::string tn = "tensor " + qname(name);
    if (!v.is_object()) fail(file, "entry for " + tn + " is not a JSON object (it is a " + json_type(v) + ")");
    for (auto k = v.begin(); k != v.end(); ++k) {
      if (k.key() != "dtype" && k.key() != "shape" && k.key() != "data_offsets") {
        fail(file, tn + " has unexpected key " + qname(k.key()));
      }
    }
    for (const char* req : {"dtype", "shape", "data_offsets"}) {
      if (!v.contains(req)) fail(file, tn + " is missing '" + req + "'");
    }
    TensorInfo t;
    t.name = name;

    const json& jd = v["dtype"];
    if (!jd.is_string()) fail(file, tn + ": 'dtype' is not a string (it is a " + json_type(jd) + ")");
    const std::string& ds = jd.get_ref<const std::string&>();
    if (!parse_dtype(ds, &t.dtype)) {
      fail(file, "unknown dtype " + qname(ds) + " for " + tn + " (supported: F32, F16, BF16, I64, I32)");
    }

    const json& js = v["shape"];
    if (!js.is_array()) fail(file, tn + ": 'shape' is not an array (it is a " + json_type(js) + ")");
    for (size_t i = 0; i < js.size(); ++i) {
      const json& e = js[i];
      if (e.is_number_unsigned()) {
        uint64_t u = e.get<uint64_t>();
        if (u > uint64_t(std::numeric_limits<int64_t>::max())) {
          fail(file, tn + ": shape dim " + std::to_string(i) + " (" + std::to_string(u) + ") is too large");
        }
        t.shape.push_back(int64_t(u));
      } else if (e.is_number_integer()) {
        fail(file,
             tn + " has negative dim " + std::to_string(e.get<int64_t>()) + " at shape index " + std::to_string(i));
      } else {
        fail(file, tn + ": shape dim " + std::to_string(i) + " is not an integer (it is a " + json_type(e) + ")");
      }
    }
    uint64_t need = 0;
    if (!checked_bytes(t.shape, dtype_size(t.dtype), nullptr, &need)) {
      fail(file, tn + ": shape " + shape_to_string(t.shape) + " overflows 64 bits (element or byte count)");
    }

    const json& jo = v["data_offsets"];
    if (!jo.is_array() || jo.size() != 2) {
      fail(file, tn + ": 'data_offsets' must be an array of two integers");
    }
    for (size_t i = 0; i < 2; ++i) {
      if (!jo[i].is_number_unsigned()) {
        fail(file, tn + ": data_offsets[" + std::to_string(i) + "] is not a non-negative integer (it is " +
                       (jo[i].is_number_integer() ? std::string("negative") : std::string("a ") + json_type(jo[i])) +
                       ")");
      }
    }
    t.begin = jo[0].get<uint64_t>();
    t.end = jo[1].get<uint64_t>();
    if (t.begin > t.end) {
      fail(file,
           tn + ": data_offsets begin " + std::to_string(t.begin) + " is greater than end " + std::to_string(t.end));
    }
    if (t.end > data_size_) {
      fail(file, tn + ": data_offsets end " + std::to_string(t.end) + " is beyond the data section (" +
                     std::to_string(data_size_) + " bytes)");
    }
    if (t.end - t.begin != need) {
      fail(file, tn + " has " + std::to_string(t.end - t.begin) + " bytes at data_offsets [" + std::to_string(t.begin) +
                     ", " + std::to_string(t.end) + ") but shape " + shape_to_string(t.shape) + " of " +
                     dtype_name(t.dtype) + " needs " + std::to_string(need) + " bytes");
    }
    infos.push_back(std::move(t));
  }

  // The data section must be indexed exactly: no overlaps, holes or trailing bytes.
  std::vector<const TensorInfo*> by_offset;
  by_offset.reserve(infos.size());
  for (const auto& t : infos) by_offset.push_back(&t);
  std::sort(by_offset.begin(), by_offset.end(), [](const TensorInfo* a, const TensorInfo* b) {
    if (a->begin != b->begin) return a->begin < b->begin;
    if (a->end != b->end) return a->end < b->end;
    return a->name < b->name;
  });
  uint64_t cursor = 0;
  const TensorInfo* prev = nullptr;
  for (const TensorInfo* t : by_offset) {
    if (t->begin < cursor) {
      fail(file, "tensors " + qname(prev->name) + " [" + std::to_string(prev->begin) + ", " +
                     std::to_string(prev->end) + ") and " + qname(t->name) + " [" + std::to_string(t->begin) + ", " +
                     std::to_string(t->end) + ") overlap in the data section");
    }
    if (t->begin > cursor) {
      fail(file, "hole in the data section: bytes [" + std::to_string(cursor) + ", " + std::to_string(t->begin) +
                     ") before tensor " + qname(t->name) + " belong to no tensor");
    }
    if (t->end > cursor || !prev) prev = t;
    cursor = t->end;
  }
  if (cursor != data_size_) {
    fail(file, std::to_string(data_size_ - cursor) + " trailing bytes at the end of the data section (offsets [" +
                   std::to_string(cursor) + ", " + std::to_string(data_size_) + ")) belong to no tensor");
  }

  std::sort(infos.begin(), infos.end(), [](const TensorInfo& a, const TensorInfo& b) { return a.name < b.name; });
  tensors_ = std::move(infos);
}

const TensorInfo* SafetensorsFile::find(const std::string& name) const {
  auto it = std::lower_bound(tensors_.begin(), tensors_.end(), name,
                             [](const TensorInfo& t, const std::string& n) { return t.name < n; });
  if (it == tensors_.end() || it->name != name) return nullptr;
  return &*it;
}

const TensorInfo& SafetensorsFile::require(const std::string& name, std::initializer_list<int64_t> shape) const {
  return require(name, std::vector<int64_t>(shape));
}

const TensorInfo& SafetensorsFile::require(const std::string& name, const std::vector<int64_t>& shape) const {
  const TensorInfo* t = find(name);
  if (!t) {
    throw Error(Status::format_error, name_ + ": required tensor " + qname(name) + " not found (expected shape " +
                                          shape_to_string(shape) + ")");
  }
  if (t->shape != shape) {
    throw Error(Status::format_error, name_ + ": tensor " + qname(name) + " has shape " + shape_to_string(t->shape) +
                                          ", expected " + shape_to_string(shape));
  }
  return *t;
}

void SafetensorsFile::check_info(const TensorInfo& t, const char* what) const {
  uint64_t need = 0;
  if (t.begin > t.end || t.end > data_size_ || !checked_bytes(t.shape, dtype_size(t.dtype), nullptr, &need) ||
      need != t.end - t.begin) {
    throw Error(Status::invalid_argument,
                std::string(what) + ": tensor " + qname(t.name) + " does not describe data in " + name_);
  }
}

const uint8_t* SafetensorsFile::data(const TensorInfo& t) const {
  check_info(t, "SafetensorsFile::data");
  return data_ + t.begin;
}

std::vector<float> SafetensorsFile::to_float(const TensorInfo& t) const {
  check_info(t, "SafetensorsFile::to_float");
  const uint8_t* p = data_ + t.begin;
  const uint64_t n = (t.end - t.begin) / dtype_size(t.dtype);
  if (n > std::numeric_limits<size_t>::max() / sizeof(float)) {
    throw Error(Status::out_of_memory, name_ + ": tensor " + qname(t.name) + " is too large to convert");
  }
  std::vector<float> out(static_cast<size_t>(n));
  switch (t.dtype) {
    case DType::F32:
      if (n) std::memcpy(out.data(), p, size_t(n) * 4);
      break;
    case DType::F16:
      for (size_t i = 0; i < out.size(); ++i) out[i] = half_to_float(uint16_t(p[2 * i] | (p[2 * i + 1] << 8)));
      break;
    case DType::BF16:
      for (size_t i = 0; i < out.size(); ++i) out[i] = bf16_to_float(uint16_t(p[2 * i] | (p[2 * i + 1] << 8)));
      break;
    case DType::I64:
    case DType::I32:
      throw Error(Status::invalid_argument, name_ + ": tensor " + qname(t.name) + " has dtype " + dtype_name(t.dtype) +
                                                "; to_float supports F32, F16 and BF16");
  }
  return out;
}

void SafetensorsFile::release(const TensorInfo& t) const {
  if (!mapped_ || t.end < t.begin || t.end > data_size_) return;
  const uint64_t at = uint64_t(data_ - bytes_) + t.begin;
  static_cast<const platform::MappedFile*>(mapped_)->release(size_t(at), size_t(t.end - t.begin));
}

}  // namespace diffvk
