// diffvk_bench: the device's ceilings — compute-shader copy bandwidth (GB/s, bytes read + written)
// and the runtime's own matmul rate (LinearKernel, storage type in, fp32 accumulation; GFLOP/s).
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
  uint32_t wg = 0, items = 0;
  Stats us;
  double gbps = 0;
  json tried = json::array();
};

struct MatmulCeiling {
  uint32_t n = 0;
  Stats us;
  double gflops = 0;
  std::string tiles;
  json tried = json::array();
};

struct Ceilings {
  CopyCeiling copy;
  MatmulCeiling mm;
};

// Copies `bytes` (shaders/bench/bench_copy.comp, 1 and 4 elements per invocation; the better one is kept);
// the copy is checked before it is timed.
CopyCeiling measure_copy(Device& dev, uint64_t bytes, int warmup, int runs, bool ts, const Sink& sink);

// Grows the square matmul from 256 while it is shorter than min_us or still gaining more than 10%
// in rate (and the next size, ~8x the time, stays under max_us), then times the best size.
MatmulCeiling measure_matmul(Device& dev, uint32_t n_max, double min_us, double max_us, int warmup, int runs, bool ts,
                             const Sink& sink);

}  // namespace diffvk::bench
