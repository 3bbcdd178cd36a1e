// diffvk — pipeline-cache file wrapper; see pipeline_cache_file.hpp.
#include "vk/pipeline_cache_file.hpp"

#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>

#include "diffvk/error.hpp"
#include "diffvk/pipeline_cache.hpp"
#include "platform.hpp"

namespace diffvk {
namespace {

const char kMagic[8] = {'D', 'V', 'K', 'P', 'C', 'A', 'C', 'H'};

std::string hex(const uint8_t* p, size_t n) {
  static const char* digits = "0123456789abcdef";
  std::string s;
  for (size_t i = 0; i < n; ++i) {
    s += digits[p[i] >> 4];
    s += digits[p[i] & 15];
  }
  return s;
}

std::string hex32(uint32_t v) {
  uint8_t b[4] = {uint8_t(v >> 24), uint8_t(v >> 16), uint8_t(v >> 8), uint8_t(v)};
  return "0x" + hex(b, 4);
}

std::optional<std::vector<uint8_t>> reject(std::string* why, std::string reason) {
  if (why) *why = std::move(reason);
  return std::nullopt;
}

}  // namespace

void put_u32(uint8_t* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = uint8_t(v >> (8 * i));
}
void put_u64(uint8_t* p, uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = uint8_t(v >> (8 * i));
}
uint32_t get_u32(const uint8_t* p) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}
uint64_t get_u64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

uint64_t fnv1a64(const void* data, size_t size, uint64_t seed) {
  const uint8_t* p = static_cast<const uint8_t*>(data);
  uint64_t h = seed;
  for (size_t i = 0; i < size; ++i) {
    h ^= p[i];
    h *= 1099511628211ull;
  }
  return h;
}

std::vector<uint8_t> encode_pipeline_cache(const PipelineCacheKey& key, const void* blob, size_t size) {
  if (size > std::numeric_limits<size_t>::max() - kPipelineCacheHeaderSize - kPipelineCacheTrailerSize) {
    throw Error(Status::invalid_argument,
                "encode_pipeline_cache: blob of " + std::to_string(size) + " bytes is too large");
  }
  if (blob == nullptr && size != 0) throw Error(Status::invalid_argument, "encode_pipeline_cache: null blob");
  // Written at fixed offsets into a pre-sized buffer (see the layout in the header).
  std::vector<uint8_t> out(kPipelineCacheHeaderSize + size + kPipelineCacheTrailerSize);
  uint8_t* p = out.data();
  std::memcpy(p, kMagic, 8);
  put_u32(p + 8, kPipelineCacheFormatVersion);
  put_u32(p + 12, key.vendor_id);
  put_u32(p + 16, key.device_id);
  put_u32(p + 20, key.driver_version);
  std::memcpy(p + 24, key.device_uuid, 16);
  put_u64(p + 40, key.spirv_hash);
  put_u64(p + 48, uint64_t(size));
  if (size) std::memcpy(p + kPipelineCacheHeaderSize, blob, size);
  const size_t body = kPipelineCacheHeaderSize + size;
  put_u64(p + body, fnv1a64(p, body));
  return out;
}

std::optional<std::vector<uint8_t>> decode_pipeline_cache(const std::vector<uint8_t>& file, const PipelineCacheKey& key,
                                                          std::string* why) {
  const size_t size = file.size();
  const uint8_t* p = file.data();
  if (size == 0) return reject(why, "missing (empty file)");
  if (size < 8) {
    if (std::memcmp(p, kMagic, size) == 0) return reject(why, "truncated (" + std::to_string(size) + " bytes)");
    return reject(why, "bad magic");
  }
  if (std::memcmp(p, kMagic, 8) != 0) return reject(why, "bad magic");
  if (size < 12) return reject(why, "truncated (" + std::to_string(size) + " bytes)");
  const uint32_t version = get_u32(p + 8);
  if (version != kPipelineCacheFormatVersion) {
    return reject(why, "format version " + std::to_string(version) + " (expected " +
                           std::to_string(kPipelineCacheFormatVersion) + ")");
  }
  const size_t fixed = kPipelineCacheHeaderSize + kPipelineCacheTrailerSize;
  if (size < fixed) return reject(why, "truncated (" + std::to_string(size) + " bytes)");
  const uint64_t blob_size = get_u64(p + 48);
  const uint64_t room = uint64_t(size - fixed);
  if (blob_size > room) {
    return reject(why, "truncated (" + std::to_string(size) + " bytes, blob of " + std::to_string(blob_size) +
                           " bytes announced)");
  }
  if (blob_size < room) {
    return reject(why, "trailing bytes (" + std::to_string(room - blob_size) + " after the checksum)");
  }
  const size_t body = kPipelineCacheHeaderSize + size_t(blob_size);
  if (get_u64(p + body) != fnv1a64(p, body)) return reject(why, "checksum mismatch");

  if (std::memcmp(p + 24, key.device_uuid, 16) != 0) {
    return reject(why, "other device (uuid " + hex(p + 24, 16) + " != " + hex(key.device_uuid, 16) + ")");
  }
  const uint32_t vendor = get_u32(p + 12), device = get_u32(p + 16);
  if (vendor != key.vendor_id || device != key.device_id) {
    return reject(why, "other device (vendor " + hex32(vendor) + " device " + hex32(device) + " != vendor " +
                           hex32(key.vendor_id) + " device " + hex32(key.device_id) + ")");
  }
  const uint32_t driver = get_u32(p + 20);
  if (driver != key.driver_version) {
    return reject(why, "driver version changed (" + hex32(driver) + " -> " + hex32(key.driver_version) + ")");
  }
  if (get_u64(p + 40) != key.spirv_hash) return reject(why, "shaders changed");
  if (why) *why = "ok";
  return std::vector<uint8_t>(file.begin() + std::ptrdiff_t(kPipelineCacheHeaderSize),
                              file.begin() + std::ptrdiff_t(body));
}

}  // namespace diffvk

// ---- include/diffvk/pipeline_cache.hpp: the one function of this file that touches the file system ----
namespace diffvk {

bool pipeline_cache_path_replaceable(const std::string& path, std::string* why) {
  auto no = [&](const std::string& w) {
    if (why) *why = w;
    return false;
  };
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return true;
    return no(std::string("cannot inspect it: ") + std::strerror(errno));
  }
  if (!S_ISREG(st.st_mode)) return no("not a regular file");
  if (st.st_size == 0) return true;
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) return no(std::string("cannot open it: ") + std::strerror(errno));
  char magic[8] = {};
  const bool ours = std::fread(magic, 1, 8, f) == 8 && std::memcmp(magic, kMagic, 8) == 0;
  std::fclose(f);
  return ours ? true : no("not a diffvk pipeline cache");
}

std::string default_pipeline_cache_path(const DeviceCaps& c) {
  std::string dir;
  try {
    dir = platform::cache_dir();
  } catch (const Error& e) {
    platform::log(platform::LogLevel::info, std::string("no pipeline cache file: ") + e.what());
    return "";
  }
  return dir + "/pipelines/" + hex32(c.vendor_id).substr(2) + "-" + hex32(c.device_id).substr(2) + "-" +
         hex(c.pipeline_cache_uuid.data(), c.pipeline_cache_uuid.size()) + ".vkpc";
}

}  // namespace diffvk
