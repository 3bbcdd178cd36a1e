// Resident set of this process, for `diffvk bench --model`'s loading figures (Linux /proc; 0 elsewhere).
// VmHWM counts every resident page: the host copies a loader makes, file pages of a memory-mapped
// checkpoint while they are mapped and touched, and, on CPU drivers (lavapipe), "device" memory too.
#pragma once
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
inline uint64_t rss_bytes() { return proc_status_kb("VmRSS:") * 1024; }
inline uint64_t peak_rss_bytes() { return proc_status_kb("VmHWM:") * 1024; }
// Resets VmHWM to the current RSS (Linux >= 4.0); false where it cannot.
inline bool reset_peak_rss() {
  std::ofstream f("/proc/self/clear_refs");
  return (f << "5").flush().good();
}

}  // namespace diffvk::bench
