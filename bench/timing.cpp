#include "bench/timing.hpp"

#include <algorithm>
#include <cstdarg>
#include <cstdio>

#include "diffvk/error.hpp"
#include "vk/program.hpp"

namespace diffvk::bench {

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

namespace {
std::string vstrf(const char* fmt, va_list ap) {
  va_list copy;
  va_copy(copy, ap);
  const int n = std::vsnprintf(nullptr, 0, fmt, copy);
  va_end(copy);
  if (n <= 0) return {};
  std::string s(size_t(n) + 1, '\0');
  std::vsnprintf(s.data(), s.size(), fmt, ap);
  s.resize(size_t(n));
  return s;
}
}  // namespace

std::string strf(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  std::string s = vstrf(fmt, ap);
  va_end(ap);
  return s;
}

std::string mib(uint64_t b) { return strf("%.1f MiB", double(b) / (1 << 20)); }

Stats stats_of(std::vector<double> v) {
  Stats s;
  s.samples = v;
  if (v.empty()) return s;
  std::sort(v.begin(), v.end());
  s.min = v.front();
  s.max = v.back();
  s.median = v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
  return s;
}

double run_timed(Program& prog, bool gpu_timestamps) {
  const auto t0 = Clock::now();
  prog.run();
  return gpu_timestamps ? prog.total_us() : seconds_since(t0) * 1e6;
}

void Sink::report(const std::string& text) const {
  if (!o_.report) return;
  size_t start = 0;
  while (start < text.size()) {
    const size_t end = text.find('\n', start);
    o_.report(text.substr(start, end == std::string::npos ? std::string::npos : end - start));
    if (end == std::string::npos) break;
    start = end + 1;
  }
}

void Sink::reportf(const char* fmt, ...) const {
  va_list ap;
  va_start(ap, fmt);
  const std::string s = vstrf(fmt, ap);
  va_end(ap);
  report(s);
}

void Sink::check_cancel(const char* where) const {
  if (cancel_requested()) throw Error(Status::cancelled, std::string("benchmark cancelled ") + where);
}

}  // namespace diffvk::bench
