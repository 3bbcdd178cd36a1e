// diffvk — the cache directory for every platform: the app's setting (set_cache_dir) and cache_dir().
// Only the default differs by OS: default_cache_dir() in platform/platform_posix.cpp (XDG) or
// platform/android.cpp (none: the app must set one).
#include <mutex>
#include <string>

#include "platform.hpp"

namespace diffvk::platform {
namespace {
std::mutex g_cache_dir_mutex;
std::string g_cache_dir_base;  // guarded by g_cache_dir_mutex; "" = the OS default
}  // namespace

void set_cache_dir(const std::string& base) {
  if (!base.empty() && base[0] != '/') {
    throw Error(Status::invalid_argument, "set_cache_dir('" + base + "'): the directory must be an absolute path");
  }
  std::string b = base;
  while (b.size() > 1 && b.back() == '/') b.pop_back();
  std::lock_guard<std::mutex> lock(g_cache_dir_mutex);
  g_cache_dir_base = b;
}

std::string cache_dir() {
  {
    std::lock_guard<std::mutex> lock(g_cache_dir_mutex);
    if (!g_cache_dir_base.empty()) return g_cache_dir_base == "/" ? "/diffvk" : g_cache_dir_base + "/diffvk";
  }
  return default_cache_dir();
}

}  // namespace diffvk::platform
