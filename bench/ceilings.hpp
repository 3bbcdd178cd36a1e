// diffvk_bench: the device's ceilings, measured by probes that depend on the device only (never on a
// diffvk kernel): compute-shader copy bandwidth (GB/s, bytes read + written) and the peak FMA rate
// (GFLOP/s = 2 x FMAs / time) in fp32 and, where the context has fp16 arithmetic enabled, in fp16.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "bench/timing.hpp"
#include "vk/gpu.hpp"

namespace diffvk::bench {

using json = nlohmann::ordered_json;

struct CopyCeiling {
  uint64_t bytes = 0;  // buffer size (each of src and dst)
  std::string rule;    // which rule picked `bytes` (Plan::copy_rule)
  uint32_t wg = 0, items = 0;
  Stats us;
  double gbps = 0;
  json tried = json::array();
};

struct FmaCeiling {
  bool measured = false;
  std::string absent;  // why not measured (fp16 without shaderFloat16 on this context)
  uint32_t wg = 0, iters = 0, chains = 0, groups = 0;
  uint64_t fmas = 0;  // scalar FMAs per dispatch
  Stats us;
  double gflops = 0;
  json tried = json::array();
};

struct Ceilings {
  CopyCeiling copy;
  FmaCeiling fma32, fma16;
  // The arithmetic ceiling of diffvk's kernels: they accumulate in fp32 in both storage variants.
  double flops_ceiling() const { return fma32.gflops; }
};

// Copies `bytes` (shaders/bench/bench_copy.comp, 1 and 4 elements per invocation; the better one is kept);
// the copy is checked before it is timed.
CopyCeiling measure_copy(Device& dev, uint64_t bytes, int warmup, int runs, bool ts, const Sink& sink);

// Peak FMA rate (shaders/bench/bench_fma.comp; fp16 = its f16vec4 variant, only on a context with fp16
// arithmetic: otherwise `absent` says why). Every dispatch's result is checked (each invocation's value is
// known exactly) before it counts. For each chain count (2, 4, 8, 16 vec4 accumulators per invocation) the
// grid grows by 2x from 8 workgroups while the dispatch is shorter than min_us or still gaining more than
// 10% in rate (and the next, ~2x the time, stays under max_us); then the configuration with the best rate
// among the dispatches of at least min_us (the best of all when none was that long) is timed: median of runs.
FmaCeiling measure_fma(Device& dev, bool fp16, double min_us, double max_us, int warmup, int runs, bool ts,
                       const Sink& sink);

// A kernel's place under the ceilings (a roofline): its GFLOP/s over the fp32 FMA ceiling, its GB/s over
// the copy ceiling, and fraction_of_peak = the larger of the two (the ceiling it is closer to; `bound`
// names it, "fma" or "copy"). Zero fractions where a ceiling is missing.
struct PeakFraction {
  double flops = 0, bytes = 0, peak = 0;
  const char* bound = "copy";
};
PeakFraction peak_fraction(const Ceilings& c, double gflops, double gbps);
// Adds fraction_of_fma_ceiling, fraction_of_copy_ceiling, fraction_of_peak and peak_bound to `row`.
void add_peak_fields(json& row, const PeakFraction& f);

// JSON of the ceilings: ceilings.{fma_f32_gflops, fma_f16_gflops (null where absent), copy_gbps, ...}.
json ceilings_json(const Ceilings& c);

}  // namespace diffvk::bench
