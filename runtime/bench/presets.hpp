// diffvk_bench: presets and the case grid. "default" = the full benchmark (reduced on a CPU device,
// T trimmed by a calibrated time budget); "phone" = a short run for a handset: 20 s budget, 64 MiB
// copy buffer, T <= 2048, a cool-down pause before each case and thermal readings around it.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "bench/cases.hpp"

namespace diffvk::bench {

struct Plan {
  std::string preset;
  std::vector<CaseSpec> cases;
  bool reduced = false;   // CPU device defaults
  bool budgeted = false;  // default T list trimmed by the calibrated time budget
  double budget_s = 0;
  std::vector<std::string> notes;
  int runs = 0, warmup = 0;
  std::vector<uint32_t> Ds, Ts_decode, Ts_prefill, Hs, Hkvs;
  uint32_t t_cap = 0;     // phone: the default sweep's largest T (0 = none)
  uint64_t copy_bytes = 0;
  int copy_runs = 0, copy_warmup = 0;
  uint32_t matmul_n_max = 0;
  double matmul_min_us = 0;
  double cooldown_s = 0;  // pause before each case
  bool thermal = false;   // read /sys/class/thermal before and after each case
};

// Validates `o` (Error(invalid_argument) naming the option) and resolves every default for the device.
Plan make_plan(const Options& o, const DeviceCaps& caps, bool fp32_fallback);

}  // namespace diffvk::bench
