// diffvk — the small set of things that differ between operating systems.
//
// Implementations:
//   platform/platform_posix.cpp  files (Linux, Android, macOS) + stderr logging and
//                                XDG cache dir (everything except Android)
//   platform/log.cpp             the log dispatch (level filter, sink), shared by both
//   platform/cache_dir.cpp       set_cache_dir / cache_dir, shared by both
//   platform/android.cpp         logcat logging (__android_log_write, tag "diffvk") + the
//                                app's cache dir (set_cache_dir) on Android
// See platform/README.md.
//
// Keep this header free of OS types so every implementation can share it.
// Every failure throws diffvk::Error.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "diffvk/atomic_write.hpp"
#include "diffvk/cache_dir.hpp"
#include "diffvk/error.hpp"

// 1 where platform/android.cpp provides the default log sink (logcat) and the default cache dir (instead of
// platform_posix.cpp): on Android, and in the host build of tests/platform/platform_android_log_test.cpp,
// which compiles android.cpp against Debian's liblog (android-liblog-dev).
#if defined(__ANDROID__) || defined(DIFFVK_PLATFORM_ANDROID_ON_HOST)
#  define DIFFVK_PLATFORM_ANDROID 1
#else
#  define DIFFVK_PLATFORM_ANDROID 0
#endif

namespace diffvk::platform {

// ---- logging -------------------------------------------------------------------
enum class LogLevel { debug = 0, info = 1, warn = 2, error = 3 };

const char* log_level_name(LogLevel level) noexcept;  // "debug", "info", "warn", "error"

// Emits `msg` if level >= log_level(). Default sink on Linux: one line
// "diffvk: [warn] msg" on stderr. On Android: __android_log_write with tag "diffvk"
// (debug/info/warn/error -> ANDROID_LOG_DEBUG/INFO/WARN/ERROR; messages longer than
// logcat's entry limit are split). Thread-safe; never throws.
void log(LogLevel level, const std::string& msg);

// Replaces the default sink (tests capture logs with this); nullptr restores the
// default. The level filter applies to every sink. The sink is called without any
// diffvk lock held, so it may itself call log().
void set_log_sink(std::function<void(LogLevel, const std::string&)> sink);

// Minimum level that is emitted. Initially taken from the environment variable
// DIFFVK_LOG (debug|info|warn|error, case-insensitive; default info; an
// unrecognised value logs a warning and means info).
LogLevel log_level();
void set_log_level(LogLevel level);

// The OS's own sink, used when no sink is set: stderr (platform_posix.cpp) or logcat (android.cpp).
// The level filter and the sink dispatch live once, in platform/log.cpp.
void default_log_sink(LogLevel level, const std::string& msg) noexcept;

// ---- files -----------------------------------------------------------------------
// True when something exists at path (stat succeeds; it may not be a regular file: read_file says so).
bool file_exists(const std::string& path) noexcept;

// Whole file into memory. Throws io_error (names the path and strerror) when it
// cannot be opened/read, format_error when it holds more than max_bytes. The size
// reported by the file system is only a hint: reading stops at max_bytes + 1.
std::vector<uint8_t> read_file(const std::string& path, uint64_t max_bytes);

// Whole contents of an open file descriptor, from its current offset to EOF (Android: the fd of
// a ParcelFileDescriptor from a content:// URI, or any pipe/socket). The descriptor is not closed
// and its offset advances. Throws io_error (naming `name`) on read errors, format_error when it holds
// more than max_bytes (reading stops at max_bytes + 1), invalid_argument for fd < 0.
std::vector<uint8_t> read_fd(int fd, uint64_t max_bytes, const std::string& name = "file descriptor");

// `length` bytes at `offset` of a seekable descriptor, with pread (the offset of the fd does not move):
// for an uncompressed APK asset opened with AAsset_openFileDescriptor64(asset, &offset, &length).
// Throws io_error when the range cannot be read completely (short file), invalid_argument for fd < 0.
std::vector<uint8_t> read_fd_range(int fd, uint64_t offset, uint64_t length,
                                   const std::string& name = "file descriptor");

// A range as the API's descriptor entry points take it (Model::load_fd, Tokenizer::load_gguf_fd, the C ABI's _fd
// calls): `size` bytes at `offset`, or with size -1 everything from offset to the end of a regular file; read
// with read_fd_range. Throws invalid_argument for fd < 0, a negative offset, size < -1, or size -1 on something
// that is not a regular file; io_error for an offset past the end of the file; format_error when the range is
// longer than max_bytes (checked before anything is read).
std::vector<uint8_t> read_fd_span(int fd, int64_t offset, int64_t size, uint64_t max_bytes, const std::string& name);

// write_file_atomic and install_interrupt_cleanup: public API, in include/diffvk/atomic_write.hpp.

// cache_dir and set_cache_dir: public API, in include/diffvk/cache_dir.hpp.
// Creates the directory `path` and its missing parents (mode 0700), as `mkdir -p`; an existing directory is fine.
// Throws invalid_argument for "" and io_error naming the part that could not be created (or is not a directory).
void make_dirs(const std::string& path);
// The OS's default (platform_posix.cpp: XDG; android.cpp: throws io_error), used by cache_dir() when
// set_cache_dir() gave no base. set_cache_dir/cache_dir live once, in platform/cache_dir.cpp.
std::string default_cache_dir();

// Read-only view of a whole file: mmap where available, otherwise the file is read
// into memory. Move-only. Throws io_error (path + strerror) on failure, including
// for directories and other non-regular files.
// Note: with mmap, a file truncated by another process while mapped may fault on
// access (SIGBUS) — do not modify weight files while they are open.
class MappedFile {
 public:
  MappedFile() noexcept;
  explicit MappedFile(const std::string& path);
  ~MappedFile();
  MappedFile(MappedFile&&) noexcept;
  MappedFile& operator=(MappedFile&&) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  static MappedFile open(const std::string& path) { return MappedFile(path); }
  // A descriptor's range, as read_fd_span takes it (`size` bytes at `offset`, or size -1 to the end of a regular
  // file), with read_fd_span's checks and errors: mapped where the descriptor is a regular file and mmap accepts it
  // (the mapping starts at the page below `offset`; the descriptor may be closed afterwards), otherwise read with
  // read_fd_span. An Android asset's range (AAsset_openFileDescriptor64) maps without a copy on the heap.
  static MappedFile map_fd_range(int fd, int64_t offset, int64_t size, const std::string& name);

  bool is_open() const noexcept;
  const uint8_t* data() const noexcept;  // non-null when is_open(), even for empty files
  size_t size() const noexcept;
  bool is_mapped() const noexcept;  // true: mmap; false: read into memory (or empty)
  const std::string& path() const noexcept;
  // Drops the pages wholly inside [offset, offset + bytes) from this process's resident set when the
  // file is mapped (they are read again from the file on the next access); a no-op otherwise.
  void release(size_t offset, size_t bytes) const noexcept;

  struct Impl;  // defined by the platform implementation

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace diffvk::platform
