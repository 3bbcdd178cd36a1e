// diffvk — on-disk wrapper around a driver's VkPipelineCache blob.
//
// The blob is only reused on the same device, driver and shader set. File layout
// (all integers little-endian):
//   offset  0  8 bytes  magic "DVKPCACH"
//           8  u32      format version (kPipelineCacheFormatVersion)
//          12  u32      vendor id
//          16  u32      device id
//          20  u32      driver version
//          24  16 bytes device UUID
//          40  u64      SPIR-V hash
//          48  u64      blob size N
//          56  N bytes  blob
//       56+N   u64      FNV-1a 64 of bytes [0, 56 + N)
// Pure functions: no Vulkan calls, no file I/O (use platform::read_file /
// write_file_atomic around them); the .cpp also holds pipeline_cache_path_replaceable
// (include/diffvk/pipeline_cache.hpp), which reads a file's first 8 bytes.
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace diffvk {

constexpr uint32_t kPipelineCacheFormatVersion = 1;
constexpr size_t kPipelineCacheHeaderSize = 56;  // bytes before the blob
constexpr size_t kPipelineCacheTrailerSize = 8;  // checksum after the blob

struct PipelineCacheKey {
  uint8_t device_uuid[16] = {};  // VkPhysicalDeviceProperties::pipelineCacheUUID or deviceUUID
  uint32_t vendor_id = 0, device_id = 0, driver_version = 0;
  uint64_t spirv_hash = 0;
};

uint64_t fnv1a64(const void* data, size_t size, uint64_t seed = 14695981039346656037ull);

// Little-endian integers in a byte buffer: this file's format and the session state's (model/session_state).
void put_u32(uint8_t* p, uint32_t v);
void put_u64(uint8_t* p, uint64_t v);
uint32_t get_u32(const uint8_t* p);
uint64_t get_u64(const uint8_t* p);

// The whole file. blob may be nullptr when size == 0; invalid_argument for a null
// blob with a size, or a size that cannot be represented.
std::vector<uint8_t> encode_pipeline_cache(const PipelineCacheKey& key, const void* blob, size_t size);

// The blob when `file` is intact and was written for `key`; otherwise nullopt,
// and *why (when non-null) starts with one of: "missing", "truncated",
// "bad magic", "format version", "trailing bytes", "checksum mismatch",
// "other device", "driver version changed", "shaders changed" (followed by
// details, e.g. "other device (uuid 00112233... != 44556677...)").
// On success *why is set to "ok".
std::optional<std::vector<uint8_t>> decode_pipeline_cache(const std::vector<uint8_t>& file, const PipelineCacheKey& key,
                                                          std::string* why);

}  // namespace diffvk
