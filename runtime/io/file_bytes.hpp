// The bytes of a container file (safetensors, GGUF): a memory-mapped path, an owned buffer or a caller's
// view, and what keeps them alive. One copy of the opening code for every container reader.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace diffvk {

struct FileBytes {
  std::string name;
  std::shared_ptr<const void> owner;  // keeps the mapping / buffer alive (null for a view)
  const void* mapped = nullptr;       // the platform::MappedFile when opened from a path
  const uint8_t* bytes = nullptr;     // never null: an empty file points at a static byte
  uint64_t size = 0;

  static FileBytes map(const std::string& path);  // platform::MappedFile
  // A descriptor's range (platform::MappedFile::map_fd_range: mapped where it can be, else read), named `name`.
  static FileBytes map_fd(int fd, int64_t offset, int64_t size, std::string name);
  static FileBytes own(std::vector<uint8_t> data, std::string display_name);       // tests, fuzzing, descriptors
  static FileBytes view(const void* data, size_t size, std::string display_name);  // caller-owned memory
};

}  // namespace diffvk
