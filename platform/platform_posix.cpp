// diffvk — POSIX implementation of platform.hpp.
//
// Files (read_file, read_fd, read_fd_range, write_file_atomic, MappedFile) are plain POSIX and
// are used on Android too. The OS defaults default_log_sink() (stderr) and default_cache_dir() (XDG)
// are compiled everywhere except Android (DIFFVK_PLATFORM_ANDROID, see platform.hpp), where
// platform/android.cpp provides them. The log dispatch is in platform/log.cpp; cache_dir() and
// set_cache_dir() are in platform/cache_dir.cpp.
#include "platform.hpp"
#include "platform_test_hooks.hpp"
#include "tmp_names.hpp"

#include <fcntl.h>
#include <signal.h>
#include <pwd.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>
#if defined(__linux__)
#  include <sys/syscall.h>
#endif

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <mutex>
#include <utility>

namespace diffvk::platform {
namespace {

std::string errno_text(int err) {
  // strerror is not guaranteed thread-safe; strerror_r has two incompatible
  // signatures (GNU/XSI), so pick the result through overloads.
  char buf[256] = {0};
  struct Pick {
    static const char* get(int rc, const char* b) { return rc == 0 ? b : "unknown error"; }
    static const char* get(const char* r, const char*) { return r ? r : "unknown error"; }
  };
  return Pick::get(strerror_r(err, buf, sizeof buf), buf);
}

[[noreturn]] void throw_io(const std::string& what, const std::string& path, int err) {
  throw Error(Status::io_error, what + " '" + path + "': " + errno_text(err));
}

// Closes a descriptor on scope exit unless released.
struct Fd {
  int fd = -1;
  explicit Fd(int f) : fd(f) {}
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int release() {
    int f = fd;
    fd = -1;
    return f;
  }
};

const char* file_kind(mode_t m) {
  if (S_ISDIR(m)) return "a directory";
  if (S_ISFIFO(m)) return "a FIFO (named pipe)";
  if (S_ISCHR(m)) return "a character device";
  if (S_ISBLK(m)) return "a block device";
  if (S_ISSOCK(m)) return "a socket";
  return "not a regular file";
}

// Every file diffvk reads by name is a regular file: opened non-blocking (a FIFO would otherwise block
// in open() until a writer appears), checked with fstat before anything is read (a device node such as
// /dev/zero would never end), then switched back to blocking reads. A symlink loop fails in open()
// (ELOOP). Errors name the file.
int open_for_read(const std::string& path, struct stat* st) {
  int fd;
  do {
    fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  } while (fd < 0 && errno == EINTR);
  if (fd < 0) throw_io("cannot open", path, errno);
  if (::fstat(fd, st) != 0) {
    int err = errno;
    ::close(fd);
    throw_io("cannot stat", path, err);
  }
  if (!S_ISREG(st->st_mode)) {
    ::close(fd);
    throw Error(Status::io_error,
                "cannot read '" + path + "': it is " + file_kind(st->st_mode) + ", not a regular file");
  }
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags >= 0) (void)::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
  return fd;
}

// Reads until EOF or until more than `limit` bytes have been read (then returns
// limit + 1 bytes so the caller can tell). `hint` is only used to size the buffer.
std::vector<uint8_t> read_all(int fd, const std::string& path, uint64_t limit, uint64_t hint) {
  std::vector<uint8_t> out;
  const uint64_t cap = limit == std::numeric_limits<uint64_t>::max() ? limit : limit + 1;
  constexpr uint64_t kMaxReserve = uint64_t(1) << 30;  // do not trust st_size blindly
  uint64_t reserve = hint < cap ? hint : cap;
  if (reserve > kMaxReserve) reserve = kMaxReserve;
  if (reserve > 0 && reserve <= std::numeric_limits<size_t>::max()) out.reserve(size_t(reserve) + 1);
  size_t used = 0;
  for (;;) {
    if (uint64_t(used) >= cap) break;
    if (out.size() == used) {
      // First chunk: the size hint + 1 (to see EOF); then geometric growth.
      uint64_t grow = out.empty() && reserve > 0 ? reserve + 1 : (out.size() < 65536 ? 65536 : out.size());
      if (grow > cap - used) grow = cap - used;
      if (grow > uint64_t(std::numeric_limits<size_t>::max() - out.size())) {
        throw Error(Status::out_of_memory, "file '" + path + "' is too large to read into memory");
      }
      out.resize(out.size() + size_t(grow));
    }
    size_t want = out.size() - used;
    if (uint64_t(want) > cap - used) want = size_t(cap - used);
    ssize_t n = ::read(fd, out.data() + used, want);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw_io("cannot read", path, errno);
    }
    if (n == 0) break;
    used += size_t(n);
  }
  out.resize(used);
  return out;
}

std::atomic<unsigned> g_tmp_counter{0};

// Temporary files of write_file_atomic in flight, removed by the SIGINT/SIGTERM handler
// (install_interrupt_cleanup). Fixed slots of plain char arrays: all the handler does is unlink().
constexpr int kTmpSlots = 16;
constexpr size_t kTmpPathMax = 4096;
char g_tmp_paths[kTmpSlots][kTmpPathMax];
std::atomic<bool> g_tmp_used[kTmpSlots];
std::atomic<bool> g_tmp_ready[kTmpSlots];

int register_tmp(const std::string& path) {
  if (path.size() >= kTmpPathMax) return -1;
  for (int i = 0; i < kTmpSlots; ++i) {
    bool expected = false;
    if (g_tmp_used[i].compare_exchange_strong(expected, true)) {
      std::memcpy(g_tmp_paths[i], path.c_str(), path.size() + 1);
      g_tmp_ready[i].store(true);
      return i;
    }
  }
  return -1;  // more than kTmpSlots concurrent writes: this one is not cleaned up on a signal
}
void unregister_tmp(int slot) {
  if (slot < 0) return;
  g_tmp_ready[slot].store(false);
  g_tmp_used[slot].store(false);
}
struct TmpSlot {
  int slot;
  ~TmpSlot() { unregister_tmp(slot); }
};

extern "C" void diffvk_interrupt_cleanup(int sig) {
  for (int i = 0; i < kTmpSlots; ++i)
    if (g_tmp_ready[i].load()) ::unlink(g_tmp_paths[i]);
  ::signal(sig, SIG_DFL);
  ::raise(sig);
}

void write_all(int fd, const uint8_t* p, size_t size, const std::string& tmp) {
  while (size > 0) {
    size_t chunk = size < (size_t(1) << 30) ? size : (size_t(1) << 30);
    ssize_t n = ::write(fd, p, chunk);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw_io("cannot write", tmp, errno);
    }
    if (n == 0) throw_io("cannot write", tmp, EIO);
    p += n;
    size -= size_t(n);
  }
}

std::string parent_dir(const std::string& path) {
  size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

}  // namespace

// ---- files -----------------------------------------------------------------------

std::vector<uint8_t> read_file(const std::string& path, uint64_t max_bytes) {
  struct stat st;
  Fd fd(open_for_read(path, &st));
  uint64_t hint = S_ISREG(st.st_mode) && st.st_size > 0 ? uint64_t(st.st_size) : 0;
  if (hint > max_bytes) {
    throw Error(Status::format_error, "file '" + path + "' is " + std::to_string(hint) +
                                          " bytes, more than the limit of " + std::to_string(max_bytes));
  }
  std::vector<uint8_t> out = read_all(fd.fd, path, max_bytes, hint);
  if (uint64_t(out.size()) > max_bytes) {
    throw Error(Status::format_error,
                "file '" + path + "' holds more than the limit of " + std::to_string(max_bytes) + " bytes");
  }
  return out;
}

std::vector<uint8_t> read_fd(int fd, uint64_t max_bytes, const std::string& name) {
  if (fd < 0)
    throw Error(Status::invalid_argument, "read_fd('" + name + "'): invalid descriptor " + std::to_string(fd));
  struct stat st;
  uint64_t hint = 0;
  if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0) {
    off_t pos = ::lseek(fd, 0, SEEK_CUR);
    if (pos >= 0 && pos <= st.st_size) hint = uint64_t(st.st_size - pos);
  }
  if (hint > max_bytes) {
    throw Error(Status::format_error, "'" + name + "' holds " + std::to_string(hint) +
                                          " bytes, more than the limit of " + std::to_string(max_bytes));
  }
  std::vector<uint8_t> out = read_all(fd, name, max_bytes, hint);
  if (uint64_t(out.size()) > max_bytes) {
    throw Error(Status::format_error,
                "'" + name + "' holds more than the limit of " + std::to_string(max_bytes) + " bytes");
  }
  return out;
}

namespace {
// The range [offset, offset + length) must lie inside a regular file of file_size bytes: io_error otherwise (read
// before allocating; mapped, a range past the end would fault on access).
void check_in_file(uint64_t offset, uint64_t length, uint64_t file_size, const std::string& name) {
  if (offset + length > file_size)
    throw Error(Status::io_error, "cannot read '" + name + "': " + std::to_string(length) + " bytes at offset " +
                                      std::to_string(offset) + " requested, the file ends after " +
                                      std::to_string(file_size > offset ? file_size - offset : 0));
}
// The length of read_fd_span's range (size -1: to the end of a regular file), its arguments checked.
uint64_t fd_span_length(int fd, int64_t offset, int64_t size, const std::string& name) {
  if (fd < 0) throw Error(Status::invalid_argument, name + ": invalid file descriptor " + std::to_string(fd));
  if (offset < 0) throw Error(Status::invalid_argument, name + ": negative offset " + std::to_string(offset));
  if (size < -1)
    throw Error(Status::invalid_argument, name + ": size " + std::to_string(size) + " (-1 = to the end of the file)");
  if (size >= 0) return uint64_t(size);
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))
    throw Error(Status::invalid_argument, name + ": size -1 (to the end) needs a regular file; give the size");
  if (st.st_size < offset)
    throw Error(Status::io_error, name + ": offset " + std::to_string(offset) + " is past the end of the file (" +
                                      std::to_string(st.st_size) + " bytes)");
  return uint64_t(st.st_size - offset);
}
}  // namespace

std::vector<uint8_t> read_fd_range(int fd, uint64_t offset, uint64_t length, const std::string& name) {
  if (fd < 0) {
    throw Error(Status::invalid_argument, "read_fd_range('" + name + "'): invalid descriptor " + std::to_string(fd));
  }
  if (length > uint64_t(std::numeric_limits<size_t>::max()) || offset > uint64_t(std::numeric_limits<off_t>::max()) ||
      length > uint64_t(std::numeric_limits<off_t>::max()) - offset) {
    throw Error(Status::invalid_argument, "read_fd_range('" + name + "'): range of " + std::to_string(length) +
                                              " bytes at offset " + std::to_string(offset) + " is too large");
  }
  // The caller's size is checked against the file before anything is allocated (a size lie
  // grew the process to the lie's size first). Where fstat gives no size (a device), the buffer grows
  // with what is read.
  struct stat st;
  if (::fstat(fd, &st) != 0) throw_io("cannot stat", name, errno);
  const bool sized = S_ISREG(st.st_mode);
  if (sized) check_in_file(offset, length, uint64_t(st.st_size), name);
  constexpr size_t kGrow = size_t(64) << 20;
  std::vector<uint8_t> out(sized ? static_cast<size_t>(length) : std::min(static_cast<size_t>(length), kGrow));
  size_t done = 0;
  while (done < size_t(length)) {
    if (done == out.size()) out.resize(std::min(static_cast<size_t>(length), out.size() + kGrow));
    size_t want = out.size() - done;
    if (want > (size_t(1) << 30)) want = size_t(1) << 30;
    ssize_t n = ::pread(fd, out.data() + done, want, off_t(offset + done));
    if (n < 0) {
      if (errno == EINTR) continue;
      throw_io("cannot read", name, errno);
    }
    if (n == 0) {
      throw Error(Status::io_error, "cannot read '" + name + "': " + std::to_string(length) + " bytes at offset " +
                                        std::to_string(offset) + " requested, the file ends after " +
                                        std::to_string(done));
    }
    done += size_t(n);
  }
  return out;
}

std::vector<uint8_t> read_fd_span(int fd, int64_t offset, int64_t size, uint64_t max_bytes, const std::string& name) {
  const uint64_t length = fd_span_length(fd, offset, size, name);
  if (length > max_bytes)
    throw Error(Status::format_error,
                name + ": " + std::to_string(length) + " bytes, more than the limit of " + std::to_string(max_bytes));
  return read_fd_range(fd, uint64_t(offset), length, name);
}

// Moves `tmp` onto `path`, leaving anything but a regular file at `path` as it is, even one that
// appeared after write_file_atomic's first check. On Linux (renameat2, 3.15+, on file systems that
// support it: ext4, xfs, btrfs, tmpfs, ...) the two names are exchanged atomically, and the object
// that was at `path` is then checked: not a regular file (following a link, as the first check does)
// -> exchanged back, so it is at `path` again (only a reader of `path` during those two system calls
// sees the new file), and the write fails; where nothing was at `path`, RENAME_NOREPLACE creates it
// without replacing anything that appeared meanwhile. Elsewhere, or where the file system refuses
// renameat2 (EINVAL: some FUSE and network file systems), POSIX offers no rename that is conditional on
// the target's type: plain rename(), and a FIFO created between the check and the rename is replaced.
static void replace_regular(const std::string& tmp, const std::string& path, bool& tmp_is_theirs) {
#if defined(__linux__) && defined(SYS_renameat2)
  constexpr unsigned kNoReplace = 1u << 0, kExchange = 1u << 1;  // RENAME_NOREPLACE, RENAME_EXCHANGE
  auto renameat2 = [](const std::string& a, const std::string& b, unsigned flags) {
    return ::syscall(SYS_renameat2, AT_FDCWD, a.c_str(), AT_FDCWD, b.c_str(), flags) == 0 ? 0 : errno;
  };
  for (int attempt = 0; attempt < 16; ++attempt) {
    int err = renameat2(tmp, path, kExchange);
    if (err == 0) {
      struct stat old;  // what was at `path`, now at `tmp`
      if (::stat(tmp.c_str(), &old) == 0 && !S_ISREG(old.st_mode)) {
        const int back = renameat2(tmp, path, kExchange);
        tmp_is_theirs = back != 0;  // then `tmp` names their object: not removed on the way out
        if (back != 0)
          throw Error(Status::io_error, "cannot write '" + path + "': it became " + file_kind(old.st_mode) +
                                            " during the write, and moving it back from '" + tmp +
                                            "' failed: " + errno_text(back));
        throw Error(Status::io_error, "cannot write '" + path + "': it is " + file_kind(old.st_mode) +
                                          ", not a regular file (left as it is)");
      }
      if (::unlink(tmp.c_str()) != 0) throw_io("cannot remove the replaced file now at", tmp, errno);
      return;
    }
    if (err == ENOENT) {  // nothing at `path`: create it, unless something appears first
      err = renameat2(tmp, path, kNoReplace);
      if (err == 0) return;
      if (err == EEXIST) continue;  // appeared in between: exchange and check it
    }
    if (err != EINVAL && err != ENOSYS && err != EPERM) throw_io("cannot rename '" + tmp + "' to", path, err);
    break;  // no renameat2 here: plain rename below
  }
#endif
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    int err = errno;
    throw Error(Status::io_error, "cannot rename '" + tmp + "' to '" + path + "': " + errno_text(err));
  }
}

namespace {
std::atomic<testing::AfterTempWrite> g_after_temp_write{nullptr};
}  // namespace

void testing::set_after_temp_write(AfterTempWrite hook) { g_after_temp_write.store(hook, std::memory_order_release); }

void write_file_atomic(const std::string& path, const void* data, size_t size) {
  if (path.empty()) throw Error(Status::io_error, "cannot write file: empty path");
  if (data == nullptr && size != 0) {
    throw Error(Status::invalid_argument,
                "write_file_atomic('" + path + "'): null data with size " + std::to_string(size));
  }
  // Nothing but a regular file is replaced: a FIFO, a device node or a directory at `path` (or behind
  // a link there) is left as it is.
  struct stat target;
  if (::stat(path.c_str(), &target) == 0 && !S_ISREG(target.st_mode))
    throw Error(Status::io_error, "cannot write '" + path + "': it is " + file_kind(target.st_mode) +
                                      ", not a regular file (left as it is)");
  // The temporary's name fits NAME_MAX whatever the target's length (tmp_names.hpp); temporaries of the
  // same target left by a killed run (10 minutes old or more) are removed first.
  const std::string dir = parent_dir(path);
  const size_t slash = path.find_last_of('/');
  const std::string stem = tmp_stem(slash == std::string::npos ? path : path.substr(slash + 1));
  remove_stale_temporaries(dir, stem);
  const std::string tmp = (slash == std::string::npos ? std::string() : path.substr(0, slash + 1)) + stem + ".tmp." +
                          std::to_string(long(::getpid())) + "." +
                          std::to_string(g_tmp_counter.fetch_add(1, std::memory_order_relaxed));
  // Registered before it is created, so a signal arriving just after the open() still removes it (registered
  // after, a signal between the two left the temporary behind). Removing the name before it exists is harmless:
  // it holds this process's pid, and a stale file of a dead process with the same pid would be removed anyway.
  TmpSlot slot{register_tmp(tmp)};  // removed by the SIGINT/SIGTERM/SIGHUP handler if interrupted
  int raw;
  do {
    raw = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
  } while (raw < 0 && errno == EINTR);
  if (raw < 0) throw_io("cannot create temporary file", tmp, errno);
  Fd fd(raw);
  bool tmp_is_theirs = false;
  try {
    write_all(fd.fd, static_cast<const uint8_t*>(data), size, tmp);
    // Test-only seam (platform_test_hooks.hpp; null in shipped programs): a window in which the temporary exists.
    if (const testing::AfterTempWrite hook = g_after_temp_write.load(std::memory_order_acquire)) hook(tmp);
    if (::fsync(fd.fd) != 0) throw_io("cannot fsync", tmp, errno);
    if (::close(fd.release()) != 0) throw_io("cannot close", tmp, errno);
    replace_regular(tmp, path, tmp_is_theirs);
  } catch (...) {
    if (fd.fd >= 0) ::close(fd.release());
    if (!tmp_is_theirs) ::unlink(tmp.c_str());
    throw;
  }
  // Make the rename itself durable; best effort (some file systems refuse).
  int dfd = ::open(dir.c_str(), O_RDONLY | O_CLOEXEC | O_DIRECTORY);
  if (dfd >= 0) {
    (void)::fsync(dfd);
    ::close(dfd);
  }
}

void install_interrupt_cleanup() {
  struct sigaction sa {};
  sa.sa_handler = diffvk_interrupt_cleanup;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESETHAND;
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) {
    struct sigaction old {};
    if (::sigaction(sig, nullptr, &old) == 0 && old.sa_handler == SIG_IGN) continue;  // keep "ignored" (nohup)
    ::sigaction(sig, &sa, nullptr);
  }
}

// ---- MappedFile ------------------------------------------------------------------

struct MappedFile::Impl {
  std::string path;
  const uint8_t* data = nullptr;
  size_t size = 0;
  void* map = nullptr;          // mmap base when mapped (a range: the page at or below its offset)
  size_t map_size = 0;          // bytes mapped from `map`
  std::vector<uint8_t> buffer;  // fallback storage
  ~Impl() {
    if (map) ::munmap(map, map_size);
  }
};

MappedFile::MappedFile() noexcept = default;
MappedFile::~MappedFile() = default;
MappedFile::MappedFile(MappedFile&&) noexcept = default;
MappedFile& MappedFile::operator=(MappedFile&&) noexcept = default;

MappedFile::MappedFile(const std::string& path) {
  auto impl = std::make_unique<Impl>();
  impl->path = path;
  struct stat st;
  Fd fd(open_for_read(path, &st));
  static const uint8_t kEmpty[1] = {0};
  if (S_ISREG(st.st_mode)) {
    if (st.st_size < 0 || uint64_t(st.st_size) > std::numeric_limits<size_t>::max()) {
      throw Error(Status::io_error, "cannot map '" + path + "': file of " + std::to_string(st.st_size) +
                                        " bytes does not fit in the address space");
    }
    impl->size = size_t(st.st_size);
    if (impl->size > 0) {  // size 0: maybe empty, maybe procfs-like: read it below
      void* p = ::mmap(nullptr, impl->size, PROT_READ, MAP_PRIVATE, fd.fd, 0);
      if (p != MAP_FAILED) {
        impl->map = p;
        impl->map_size = impl->size;
        impl->data = static_cast<const uint8_t*>(p);
      }
    }
  }
  if (!impl->data) {  // mmap failed or not a regular file: read it
    impl->size = 0;
    impl->buffer =
        read_all(fd.fd, path, std::numeric_limits<uint64_t>::max(), S_ISREG(st.st_mode) ? uint64_t(st.st_size) : 0);
    impl->size = impl->buffer.size();
    impl->data = impl->buffer.empty() ? kEmpty : impl->buffer.data();
  }
  impl_ = std::move(impl);
}

MappedFile MappedFile::map_fd_range(int fd, int64_t offset, int64_t size, const std::string& name) {
  const uint64_t length = fd_span_length(fd, offset, size, name);  // read_fd_span's checks and messages
  MappedFile out;
  auto impl = std::make_unique<Impl>();
  impl->path = name;
  struct stat st;
  if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) {
    check_in_file(uint64_t(offset), length, uint64_t(st.st_size), name);  // before mapping
    const long ps = ::sysconf(_SC_PAGESIZE);
    const uint64_t page = ps > 0 ? uint64_t(ps) : 4096;
    const uint64_t start = uint64_t(offset) / page * page, delta = uint64_t(offset) - start;
    if (length > 0 && length + delta <= uint64_t(std::numeric_limits<size_t>::max()) &&
        start <= uint64_t(std::numeric_limits<off_t>::max())) {
      void* p = ::mmap(nullptr, size_t(length + delta), PROT_READ, MAP_PRIVATE, fd, off_t(start));
      if (p != MAP_FAILED) {
        impl->map = p;
        impl->map_size = size_t(length + delta);
        impl->data = static_cast<const uint8_t*>(p) + delta;
        impl->size = size_t(length);
      }
    }
  }
  if (!impl->data) {  // not a regular file, an empty range, or mmap refused it: read it
    static const uint8_t kEmpty[1] = {0};
    impl->buffer = read_fd_range(fd, uint64_t(offset), length, name);
    impl->size = impl->buffer.size();
    impl->data = impl->buffer.empty() ? kEmpty : impl->buffer.data();
  }
  out.impl_ = std::move(impl);
  return out;
}

bool MappedFile::is_open() const noexcept { return impl_ != nullptr; }
const uint8_t* MappedFile::data() const noexcept { return impl_ ? impl_->data : nullptr; }
size_t MappedFile::size() const noexcept { return impl_ ? impl_->size : 0; }
bool MappedFile::is_mapped() const noexcept { return impl_ && impl_->map != nullptr; }
bool file_exists(const std::string& path) noexcept {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

void MappedFile::release(size_t offset, size_t bytes) const noexcept {
  if (!is_mapped() || offset >= impl_->size) return;
  const long page_size = ::sysconf(_SC_PAGESIZE);
  const uintptr_t page = page_size > 0 ? uintptr_t(page_size) : 4096;
  const uintptr_t base = reinterpret_cast<uintptr_t>(impl_->data);
  const uintptr_t lo = (base + offset + page - 1) / page * page;
  const uintptr_t hi = (base + offset + std::min(bytes, impl_->size - offset)) / page * page;
  if (hi > lo)
    ::madvise(reinterpret_cast<void*>(lo), hi - lo, MADV_DONTNEED);  // read-only private map: contents unchanged
}
const std::string& MappedFile::path() const noexcept {
  static const std::string kNone;
  return impl_ ? impl_->path : kNone;
}

// mkdir -p (Android too: the cache directory an app sets with set_cache_dir).
void make_dirs(const std::string& path) {
  if (path.empty()) throw Error(Status::invalid_argument, "make_dirs: empty path");
  for (size_t i = 1; i <= path.size(); ++i) {
    if (i < path.size() && path[i] != '/') continue;
    const std::string part = path.substr(0, i);
    if (::mkdir(part.c_str(), 0700) == 0) continue;
    const int err = errno;
    struct stat st;
    if (err == EEXIST && ::stat(part.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) continue;
    throw Error(Status::io_error, "cannot create the directory " + part + ": " +
                                      (err == EEXIST ? std::string("a file of that name is not a directory")
                                                     : std::string(std::strerror(err))));
  }
}

#if !DIFFVK_PLATFORM_ANDROID
// ---- default log sink (stderr); the dispatch is in platform/log.cpp ----------------
void default_log_sink(LogLevel level, const std::string& msg) noexcept {
  try {
    std::string line = "diffvk: [";
    line += log_level_name(level);
    line += "] ";
    line += msg;
    line += '\n';
    std::fwrite(line.data(), 1, line.size(), stderr);  // one call: lines do not interleave
    std::fflush(stderr);
  } catch (...) {}
}

// ---- cache dir -------------------------------------------------------------------
// The default when set_cache_dir() gave none (platform/cache_dir.cpp): XDG.
std::string default_cache_dir() {
  const char* xdg = std::getenv("XDG_CACHE_HOME");
  if (xdg && xdg[0] == '/') return std::string(xdg) + "/diffvk";  // relative values are ignored (XDG spec)
  const char* home = std::getenv("HOME");
  if (home && home[0] != '\0') return std::string(home) + "/.cache/diffvk";
  struct passwd pw;
  struct passwd* found = nullptr;
  std::vector<char> buf(16384);
  if (::getpwuid_r(::getuid(), &pw, buf.data(), buf.size(), &found) == 0 && found && found->pw_dir &&
      found->pw_dir[0] != '\0') {
    return std::string(found->pw_dir) + "/.cache/diffvk";
  }
  throw Error(Status::io_error,
              "cannot determine the cache directory: XDG_CACHE_HOME and HOME are unset and the user has no "
              "home directory");
}
#endif  // !DIFFVK_PLATFORM_ANDROID

}  // namespace diffvk::platform
