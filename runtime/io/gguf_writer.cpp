// GGUF v3 writer (io/gguf.hpp): metadata and tensors with alignment padding, written atomically.
#include <algorithm>
#include <cstring>

#include "diffvk/error.hpp"
#include "io/gguf.hpp"
#include "io/printable.hpp"
#include "platform.hpp"

namespace diffvk {
namespace {
std::string q(std::string_view s) { return "'" + printable(s, 80) + "'"; }
bool is_pow2(uint64_t v) { return v != 0 && (v & (v - 1)) == 0; }
}  // namespace

// ---- writer ----------------------------------------------------------------------------------------

namespace {
template <class T>
void put(std::vector<uint8_t>& out, T v) {
  const size_t at = out.size();
  out.resize(at + sizeof(T));
  std::memcpy(out.data() + at, &v, sizeof(T));
}
void put_str(std::vector<uint8_t>& out, const std::string& s) {
  put<uint64_t>(out, s.size());
  out.insert(out.end(), s.begin(), s.end());
}
}  // namespace

GgufWriter::GgufWriter(uint32_t alignment) : alignment_(alignment) {
  if (!is_pow2(alignment))
    throw Error(Status::invalid_argument, "GGUF alignment " + std::to_string(alignment) + " is not a power of two");
  add_u32("general.alignment", alignment);
}

void GgufWriter::key(const std::string& k, GgufType t) {
  if (k.empty() || k.size() > kGgufMaxKeyBytes)
    throw Error(Status::invalid_argument, "GGUF key " + q(k) + ": empty or too long");
  if (std::find(keys_.begin(), keys_.end(), k) != keys_.end())
    throw Error(Status::invalid_argument, "duplicate GGUF key " + q(k));
  if (kv_count_ >= kGgufMaxKeys) throw Error(Status::invalid_argument, "too many GGUF keys");
  keys_.push_back(k);
  ++kv_count_;
  put_str(kv_, k);
  put<uint32_t>(kv_, uint32_t(t));
}

void GgufWriter::add_u32(const std::string& k, uint32_t v) {
  key(k, GgufType::uint32);
  put(kv_, v);
}
void GgufWriter::add_i32(const std::string& k, int32_t v) {
  key(k, GgufType::int32);
  put(kv_, v);
}
void GgufWriter::add_u64(const std::string& k, uint64_t v) {
  key(k, GgufType::uint64);
  put(kv_, v);
}
void GgufWriter::add_f32(const std::string& k, float v) {
  key(k, GgufType::float32);
  put(kv_, v);
}
void GgufWriter::add_bool(const std::string& k, bool v) {
  key(k, GgufType::boolean);
  put<uint8_t>(kv_, v ? 1 : 0);
}
void GgufWriter::add_string(const std::string& k, const std::string& v) {
  key(k, GgufType::string);
  put_str(kv_, v);
}

void GgufWriter::add_string_array(const std::string& k, const std::vector<std::string>& v) {
  key(k, GgufType::array);
  put<uint32_t>(kv_, uint32_t(GgufType::string));
  put<uint64_t>(kv_, v.size());
  for (const auto& s : v) put_str(kv_, s);
}

void GgufWriter::add_f32_array(const std::string& k, const std::vector<float>& v) {
  key(k, GgufType::array);
  put<uint32_t>(kv_, uint32_t(GgufType::float32));
  put<uint64_t>(kv_, v.size());
  for (float x : v) put(kv_, x);
}

void GgufWriter::add_i32_array(const std::string& k, const std::vector<int32_t>& v) {
  key(k, GgufType::array);
  put<uint32_t>(kv_, uint32_t(GgufType::int32));
  put<uint64_t>(kv_, v.size());
  for (int32_t x : v) put(kv_, x);
}

void GgufWriter::add_tensor(const std::string& name, const std::vector<uint64_t>& dims, GgmlType type,
                            std::vector<uint8_t> data) {
  if (name.empty() || name.size() > kGgufMaxNameBytes) {
    throw Error(Status::invalid_argument, "GGUF tensor name " + q(name) + ": empty or longer than " +
                                              std::to_string(kGgufMaxNameBytes) + " bytes");
  }
  for (const auto& t : tensors_)
    if (t.name == name) throw Error(Status::invalid_argument, "duplicate GGUF tensor " + q(name));
  if (dims.empty() || dims.size() > kGgufMaxDims)
    throw Error(Status::invalid_argument, "GGUF tensor " + q(name) + ": 1 to 4 dims");
  uint64_t n = 1;
  for (uint64_t d : dims) {
    if (d == 0) throw Error(Status::invalid_argument, "GGUF tensor " + q(name) + ": a dim is 0");
    n *= d;
  }
  if (dims[0] % ggml_block_weights(type) != 0) {
    throw Error(Status::invalid_argument,
                "GGUF tensor " + q(name) + ": dim 0 is not a multiple of the " + ggml_type_name(type) + " block");
  }
  if (data.size() != n / ggml_block_weights(type) * ggml_block_bytes(type)) {
    throw Error(Status::invalid_argument,
                "GGUF tensor " + q(name) + ": " + std::to_string(data.size()) + " bytes of data, " +
                    std::to_string(n / ggml_block_weights(type) * ggml_block_bytes(type)) + " expected");
  }
  tensors_.push_back({name, dims, type, std::move(data)});
}

std::vector<uint8_t> GgufWriter::bytes() const {
  auto align = [&](uint64_t v) { return (v + alignment_ - 1) / alignment_ * alignment_; };
  std::vector<uint8_t> out = {'G', 'G', 'U', 'F'};
  put<uint32_t>(out, 3);
  put<uint64_t>(out, tensors_.size());
  put<uint64_t>(out, kv_count_);
  out.insert(out.end(), kv_.begin(), kv_.end());
  uint64_t offset = 0;
  for (const auto& t : tensors_) {
    put_str(out, t.name);
    put<uint32_t>(out, uint32_t(t.dims.size()));
    for (uint64_t d : t.dims) put<uint64_t>(out, d);
    put<uint32_t>(out, uint32_t(t.type));
    put<uint64_t>(out, offset);
    offset = align(offset + t.data.size());
  }
  out.resize(size_t(align(out.size())), 0);
  for (const auto& t : tensors_) {
    out.insert(out.end(), t.data.begin(), t.data.end());
    out.resize(size_t(align(out.size())), 0);
  }
  return out;
}

void GgufWriter::write(const std::string& path) const {
  const std::vector<uint8_t> b = bytes();
  platform::write_file_atomic(path, b.data(), b.size());
}

}  // namespace diffvk
