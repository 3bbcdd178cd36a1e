// diffvk — error type shared by every C++ entry point.
#pragma once
#include <stdexcept>
#include <string>

namespace diffvk {

// Stable numeric codes; the C ABI (diffvk.h) reuses these values.
enum class Status : int {
  ok = 0,
  invalid_argument = 1,  // caller passed something malformed (shape, flag, handle)
  io_error = 2,          // a file could not be opened, read or written
  format_error = 3,      // a file's contents are malformed or inconsistent
  unsupported = 4,       // the device lacks a feature or limit the request needs
  out_of_memory = 5,     // host or device allocation failed / plan does not fit
  device_lost = 6,       // VK_ERROR_DEVICE_LOST
  vulkan_error = 7,      // any other failing VkResult
  context_overflow = 8,  // more tokens than the KV cache holds
  internal = 9,          // a broken invariant inside diffvk
  // 10 is the C ABI's DIFFVK_BUFFER_TOO_SMALL
  cancelled = 11,  // an abort callback asked to stop; nothing changed
};

const char* status_name(Status s) noexcept;

class Error : public std::runtime_error {
 public:
  Error(Status status, const std::string& message) : std::runtime_error(message), status_(status) {}
  Status status() const noexcept { return status_; }

 private:
  Status status_;
};

}  // namespace diffvk
