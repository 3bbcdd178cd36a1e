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
  uint32_t t_cap = 0;  // phone: the default sweep's largest T (0 = none)
  uint64_t copy_bytes = 0;
  std::string copy_rule;  // which rule picked copy_bytes (and what capped it), for the report
  int copy_runs = 0, copy_warmup = 0;
  double fma_min_us = 0, fma_max_us = 0;  // the FMA probe's dispatch: grown until at least min_us (and gaining)
  double cooldown_s = 0;                  // pause before each case
  bool thermal = false;                   // read /sys/class/thermal before and after each case
};

// Refuses what no device can run (Error(invalid_argument) naming the option): unknown presets, phases, variants,
// shapes and ops, conflicting benchmarks. Before any work (the self-test at load's ops come from the options).
void validate_options(const Options& o);

// Validates `o` (Error(invalid_argument) naming the option) and resolves every default for the device.
// host_cache_bytes: the host's largest CPU cache (largest_cpu_cache_bytes()), used for the copy buffer
// on a CPU device; 0 = unknown.
Plan make_plan(const Options& o, const DeviceCaps& caps, bool fp32_fallback, uint64_t host_cache_bytes = 0);

// The copy-ceiling buffer size (each of src and dst) and the rule that picked it: Options::copy_bytes;
// else quick 16 MiB (a smoke test, may stay in a cache); else phone 64 MiB; else on a CPU device 4x the
// largest CPU cache when it is known; else 256 MiB. Then capped by 1/8 of a device-local heap,
// maxStorageBufferRange and maxMemoryAllocationSize, on a 64 KiB multiple.
uint64_t copy_buffer_bytes(const Options& o, const DeviceCaps& caps, uint64_t host_cache_bytes, std::string& rule);

}  // namespace diffvk::bench
