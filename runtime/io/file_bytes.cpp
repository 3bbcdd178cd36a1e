#include "io/file_bytes.hpp"

#include "platform.hpp"

namespace diffvk {

namespace {
const uint8_t kEmpty[1] = {0};

FileBytes of_mapped(platform::MappedFile file, std::string name) {
  auto mapped = std::make_shared<platform::MappedFile>(std::move(file));
  FileBytes b;
  b.name = std::move(name);
  b.bytes = mapped->size() ? mapped->data() : kEmpty;
  b.size = mapped->size();
  b.mapped = mapped.get();
  b.owner = std::move(mapped);
  return b;
}
}  // namespace

FileBytes FileBytes::map(const std::string& path) { return of_mapped(platform::MappedFile(path), path); }

FileBytes FileBytes::map_fd(int fd, int64_t offset, int64_t size, std::string name) {
  return of_mapped(platform::MappedFile::map_fd_range(fd, offset, size, name), std::move(name));
}

FileBytes FileBytes::own(std::vector<uint8_t> data, std::string display_name) {
  auto buf = std::make_shared<std::vector<uint8_t>>(std::move(data));
  FileBytes b;
  b.name = std::move(display_name);
  b.bytes = buf->empty() ? kEmpty : buf->data();
  b.size = buf->size();
  b.owner = std::move(buf);
  return b;
}

FileBytes FileBytes::view(const void* data, size_t size, std::string display_name) {
  FileBytes b;
  b.name = std::move(display_name);
  b.bytes = data ? static_cast<const uint8_t*>(data) : kEmpty;
  b.size = data ? size : 0;
  return b;
}

}  // namespace diffvk
