// diffvk — log dispatch for every platform: the level filter (DIFFVK_LOG, set_log_level), the
// replaceable sink (set_log_sink) and log(). The default sink is the only part that differs by OS:
// default_log_sink() in platform/platform_posix.cpp (stderr) or platform/android.cpp (logcat).
#include <atomic>
#include <cstdlib>
#include <functional>
#include <mutex>
#include <string>
#include <utility>

#include "platform.hpp"

namespace diffvk::platform {
namespace {

std::mutex g_log_mutex;
std::function<void(LogLevel, const std::string&)> g_log_sink;  // guarded by g_log_mutex
std::atomic<int> g_log_level{-1};                              // -1: not yet read from env

bool ascii_iequals(const char* a, const char* b) {
  for (; *a && *b; ++a, ++b) {
    char ca = (*a >= 'A' && *a <= 'Z') ? char(*a - 'A' + 'a') : *a;
    if (ca != *b) return false;
  }
  return *a == *b;
}

LogLevel level_from_env() {
  const char* v = std::getenv("DIFFVK_LOG");  // Android apps can set it with android.system.Os.setenv
  if (!v || !*v) return LogLevel::info;
  if (ascii_iequals(v, "debug")) return LogLevel::debug;
  if (ascii_iequals(v, "info")) return LogLevel::info;
  if (ascii_iequals(v, "warn")) return LogLevel::warn;
  if (ascii_iequals(v, "error")) return LogLevel::error;
  std::string value(v);
  if (value.size() > 64) value = value.substr(0, 64) + "...";
  default_log_sink(LogLevel::warn, "DIFFVK_LOG='" + value + "' is not one of debug|info|warn|error; using info");
  return LogLevel::info;
}

}  // namespace

const char* log_level_name(LogLevel level) noexcept {
  switch (level) {
    case LogLevel::debug:
      return "debug";
    case LogLevel::info:
      return "info";
    case LogLevel::warn:
      return "warn";
    case LogLevel::error:
      return "error";
  }
  return "?";
}

LogLevel log_level() {
  int lv = g_log_level.load(std::memory_order_acquire);
  if (lv < 0) {
    int fresh = int(level_from_env());
    if (g_log_level.compare_exchange_strong(lv, fresh, std::memory_order_acq_rel)) return LogLevel(fresh);
    return LogLevel(lv);  // another thread won; lv now holds its value
  }
  return LogLevel(lv);
}

void set_log_level(LogLevel level) { g_log_level.store(int(level), std::memory_order_release); }

void log(LogLevel level, const std::string& msg) {
  try {
    if (int(level) < int(log_level())) return;
    std::function<void(LogLevel, const std::string&)> sink;
    {
      std::lock_guard<std::mutex> lock(g_log_mutex);
      sink = g_log_sink;
    }
    if (sink) {
      sink(level, msg);
    } else {
      default_log_sink(level, msg);
    }
  } catch (...) {
    // Logging must never take the process down.
  }
}

void set_log_sink(std::function<void(LogLevel, const std::string&)> sink) {
  std::lock_guard<std::mutex> lock(g_log_mutex);
  g_log_sink = std::move(sink);
}

}  // namespace diffvk::platform
