// diffvk_bench: clocks, sample statistics, string formatting and the message sink (report lines,
// progress, warnings, cancellation) shared by every part of the benchmark.
#pragma once
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "diffvk/bench.hpp"

namespace diffvk {
class Program;
}

namespace diffvk::bench {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t0);

std::string strf(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
std::string mib(uint64_t bytes);

struct Stats {
  double median = 0, min = 0, max = 0;
  std::vector<double> samples;
};
Stats stats_of(std::vector<double> v);

// One replay of `prog`: GPU time of its dispatches in us when `gpu_timestamps`, else host wall time.
double run_timed(Program& prog, bool gpu_timestamps);

// Where the benchmark's output goes: Options::report (text lines), Options::log, Options::cancel.
class Sink {
 public:
  explicit Sink(const Options& o) : o_(o) {}
  // `text` may hold several lines ('\n'); a final newline ends the last line, it adds no empty one.
  void report(const std::string& text) const;
  void reportf(const char* fmt, ...) const __attribute__((format(printf, 2, 3)));
  void stage(const std::string& s) const { log(LogLevel::info, s); }
  void step(const std::string& s) const { log(LogLevel::debug, s); }
  void warn(const std::string& s) const { log(LogLevel::warn, s); }
  void log(LogLevel level, const std::string& s) const {
    if (o_.log) o_.log(level, s);
  }
  // Throws Error(Status::cancelled, "benchmark cancelled <where>") when Options::cancel says so.
  void check_cancel(const char* where) const;
  // Whether Options::cancel asks to stop (for SessionOptions::should_abort: a long prefill stops between layers).
  bool cancel_requested() const { return o_.cancel && o_.cancel(); }

 private:
  const Options& o_;
};

}  // namespace diffvk::bench
