// Host facts for the benchmark (Linux /proc and /sys; 0 or "" elsewhere): small files, the resident set of this
// process, for `diffvk bench --model`'s loading figures, and the largest CPU cache (the copy ceiling's
// buffer size on a CPU device).
// VmHWM counts every resident page: the host copies a loader makes, file pages of a memory-mapped
// checkpoint while they are mapped and touched, and, on CPU drivers (lavapipe), "device" memory too.
#pragma once
#include <algorithm>
#include <cstdint>
#include <fstream>
#include <string>

namespace diffvk::bench {

inline uint64_t proc_status_kb(const char* key) {
  std::ifstream f("/proc/self/status");
  std::string k;
  uint64_t v = 0;
  while (f >> k) {
    if (k == key) return (f >> v) ? v : 0;
    f.ignore(1 << 12, '\n');
  }
  return 0;
}
// A small /proc or /sys file, at most max_bytes of it; "" when it cannot be opened.
inline std::string read_small_file(const std::string& path, size_t max_bytes) {
  std::ifstream f(path, std::ios::binary);
  std::string s(max_bytes, '\0');
  f.read(&s[0], std::streamsize(max_bytes));
  s.resize(size_t(f.gcount()));
  return s;
}
inline uint64_t rss_bytes() { return proc_status_kb("VmRSS:") * 1024; }
inline uint64_t peak_rss_bytes() { return proc_status_kb("VmHWM:") * 1024; }
// Resets VmHWM to the current RSS (Linux >= 4.0); false where it cannot.
inline bool reset_peak_rss() {
  std::ofstream f("/proc/self/clear_refs");
  return (f << "5").flush().good();
}

// A sysfs cache size ("32768K", "1M", "512"), in bytes; 0 when unparsable.
inline uint64_t parse_cache_size(const std::string& s) {
  size_t i = 0;
  uint64_t v = 0;
  while (i < s.size() && s[i] >= '0' && s[i] <= '9' && v < (1ull << 40)) v = v * 10 + uint64_t(s[i++] - '0');
  if (i == 0) return 0;
  const char u = i < s.size() ? s[i] : '\n';
  return u == 'K' ? v << 10 : u == 'M' ? v << 20 : u == 'G' ? v << 30 : (u == '\n' || u == ' ') ? v : 0;
}
// The largest of cpu0's caches (/sys/devices/system/cpu/cpu0/cache/index*/size: the last level); 0 when
// none is readable.
inline uint64_t largest_cpu_cache_bytes() {
  uint64_t best = 0;
  for (int i = 0; i < 16; ++i) {
    std::ifstream f("/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(i) + "/size");
    std::string s;
    if (f >> s) best = std::max(best, parse_cache_size(s));
  }
  return best;
}

}  // namespace diffvk::bench
