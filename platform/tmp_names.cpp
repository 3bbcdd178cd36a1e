// tmp_stem, remove_stale_temporaries (tmp_names.hpp).
#include "tmp_names.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <ctime>

#include "platform.hpp"

namespace diffvk::platform {

namespace {
constexpr size_t kNameMax = 255;  // NAME_MAX on Linux, Android and macOS
// ".tmp." + a pid (at most 10 digits) + "." + a counter (at most 10 digits).
constexpr size_t kSuffixMax = 5 + 10 + 1 + 10;

bool all_digits(const std::string& s) {
  if (s.empty() || s.size() > 10) return false;
  for (char c : s)
    if (c < '0' || c > '9') return false;
  return true;
}
}  // namespace

std::string tmp_stem(const std::string& base) {
  if (base.size() + kSuffixMax <= kNameMax) return base;
  uint64_t h = 1469598103934665603ull;  // FNV-1a
  for (unsigned char c : base) h = (h ^ c) * 1099511628211ull;
  static const char* hex = "0123456789abcdef";
  std::string tail = "~";
  for (int i = 15; i >= 0; --i) tail += hex[(h >> (4 * i)) & 15];
  // Cut on a byte that does not split a UTF-8 sequence.
  size_t keep = kNameMax - kSuffixMax - tail.size();
  while (keep > 0 && (static_cast<unsigned char>(base[keep]) & 0xC0) == 0x80) --keep;
  return base.substr(0, keep) + tail;
}

void remove_stale_temporaries(const std::string& dir, const std::string& stem) noexcept {
  try {
    DIR* d = ::opendir(dir.c_str());
    if (!d) return;
    struct Close {
      DIR* d;
      ~Close() { ::closedir(d); }
    } close_dir{d};
    const int dfd = ::dirfd(d);
    const std::string prefix = stem + ".tmp.";
    const long self = long(::getpid());
    const time_t now = ::time(nullptr);
    while (const dirent* e = ::readdir(d)) {
      const std::string name = e->d_name;
      if (name.compare(0, prefix.size(), prefix) != 0) continue;
      const std::string rest = name.substr(prefix.size());
      const size_t dot = rest.find('.');
      if (dot == std::string::npos || !all_digits(rest.substr(0, dot)) || !all_digits(rest.substr(dot + 1))) continue;
      const long pid = std::strtol(rest.substr(0, dot).c_str(), nullptr, 10);
      if (pid <= 0 || pid == self) continue;
      if (::kill(pid_t(pid), 0) == 0 || errno != ESRCH) continue;  // alive (or not ours to judge)
      // The entry itself, never what a link there points to; only a regular file not modified for
      // kStaleSeconds (a pid of another host or pid namespace sharing the directory looks dead here, and
      // a write in progress keeps its temporary's mtime recent).
      struct stat st;
      if (dfd < 0 || ::fstatat(dfd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode)) continue;
      if (now < st.st_mtime || now - st.st_mtime < kStaleSeconds) continue;
      const std::string path = dir + "/" + name;
      if (::unlinkat(dfd, name.c_str(), 0) == 0)
        log(LogLevel::warn, "removed '" + path + "', a temporary file left by a run that ended during a write (pid " +
                                std::to_string(pid) + ")");
    }
  } catch (...) {}
}

}  // namespace diffvk::platform
