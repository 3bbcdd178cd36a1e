// diffvk — Android implementation of the parts of platform.hpp that differ from POSIX:
// logging to logcat and the app's cache directory. Files (read_file, read_fd, read_fd_range,
// write_file_atomic, MappedFile) are POSIX and come from platform_posix.cpp on Android too.
//
// Built only for Android (the top CMakeLists excludes platform/android*.cpp elsewhere), plus once on
// Linux by tests/platform/platform_android_log_test.cpp with DIFFVK_PLATFORM_ANDROID_ON_HOST, against Debian's
// liblog (android-liblog-dev), whose __android_log_write prints "diffvk I <date> <pid> <tid> msg" on
// stderr.
//
// Model files: an app either copies its assets to Context.getFilesDir() on first run and passes that
// path to diffvk_model_load (what examples/android does), or reads a content:// URI or an
// uncompressed asset through a descriptor with read_fd / read_fd_range (platform.hpp).
// AAssetManager is not used here, so the library needs no libandroid for reading.
#include "platform.hpp"

#if DIFFVK_PLATFORM_ANDROID

#  include <android/log.h>

#  include <atomic>
#  include <cstdlib>
#  include <cstring>
#  include <functional>
#  include <mutex>
#  include <string>
#  include <utility>

namespace diffvk::platform {
namespace {

constexpr const char* kTag = "diffvk";
// logcat truncates an entry at LOGGER_ENTRY_MAX_PAYLOAD (4068 bytes including the priority byte,
// the tag and two NULs); longer messages are split into several entries.
constexpr size_t kMaxEntryBytes = 4000;

int android_priority(LogLevel level) {
  switch (level) {
    case LogLevel::debug:
      return ANDROID_LOG_DEBUG;
    case LogLevel::info:
      return ANDROID_LOG_INFO;
    case LogLevel::warn:
      return ANDROID_LOG_WARN;
    case LogLevel::error:
      return ANDROID_LOG_ERROR;
  }
  return ANDROID_LOG_INFO;
}

// One logcat entry per piece: split at the last newline inside the limit, else at the limit
// (never inside a UTF-8 sequence).
void logcat_write(LogLevel level, const std::string& msg) {
  const int prio = android_priority(level);
  if (msg.size() <= kMaxEntryBytes) {
    __android_log_write(prio, kTag, msg.c_str());
    return;
  }
  size_t pos = 0;
  while (pos < msg.size()) {
    size_t len = msg.size() - pos;
    size_t skip = 0;
    if (len > kMaxEntryBytes) {
      len = kMaxEntryBytes;
      size_t nl = msg.rfind('\n', pos + len - 1);
      if (nl != std::string::npos && nl > pos) {
        len = nl - pos;
        skip = 1;  // drop the newline itself
      } else {
        while (len > 1 && (static_cast<unsigned char>(msg[pos + len]) & 0xC0) == 0x80) --len;
      }
    }
    __android_log_write(prio, kTag, msg.substr(pos, len).c_str());
    pos += len + skip;
  }
}

}  // namespace

// ---- default log sink (logcat); the dispatch is in platform/log.cpp -------------------
void default_log_sink(LogLevel level, const std::string& msg) noexcept {
  try {
    logcat_write(level, msg);
  } catch (...) {}
}

// ---- cache dir: no default on Android (platform/cache_dir.cpp holds the app's setting) -------
std::string default_cache_dir() {
  throw Error(Status::io_error,
              "no cache directory: on Android the app must call set_cache_dir() with "
              "Context.getCacheDir().getAbsolutePath() first");
}

}  // namespace diffvk::platform

#endif  // DIFFVK_PLATFORM_ANDROID
