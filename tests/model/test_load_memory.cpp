// Loading streams. Peak host memory over Model::load (VmHWM growth) stays within what
// the device copy itself takes (host memory on CPU drivers such as lavapipe), plus the loader's bounded
// slice, plus the fixed cost of a load (pipelines, the driver's JIT), measured on a 1-layer model with the
// same shapes (the difference between the two loads is what is bounded). A loader that converted or held the whole
// checkpoint on the host (the old one kept every tensor as fp32 until upload) adds the checkpoint's size and fails.
// Skipped where VmHWM cannot be reset (not Linux) and under AddressSanitizer (its quarantine keeps freed memory
// resident).
#include <doctest/doctest.h>
#include <malloc.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "diffvk/model.hpp"
#include "vk/gpu.hpp"
#include "gpu_test.hpp"
#include "model_fixture.hpp"
#include "sanitizers.hpp"

using namespace diffvk;

namespace {
uint64_t status_kb(const char* key) {
  std::ifstream f("/proc/self/status");
  std::string k;
  uint64_t v = 0;
  while (f >> k) {
    if (k == key) return (f >> v) ? v * 1024 : 0;
    f.ignore(1 << 12, '\n');
  }
  return 0;
}
bool reset_hwm() {
#if defined(__GLIBC__)
  malloc_trim(0);
#endif
  std::ofstream f("/proc/self/clear_refs");
  return (f << "5").flush().good() && status_kb("VmHWM:") > 0;
}
struct LoadCost {
  uint64_t peak_delta = 0, device_delta = 0;
  LoadStats stats;
};
LoadCost measure_load(Context& ctx, const std::string& dir) {
  LoadCost c;
  // The baseline after the reset: reset_hwm trims malloc's free memory first, and a baseline read before it
  // would count what the trim returned (the previous load's garbage) as room for this load.
  REQUIRE(reset_hwm());
  const uint64_t rss0 = status_kb("VmRSS:"), dev0 = device_bytes_allocated();
  auto model = Model::load(ctx, dir);
  const uint64_t hwm = status_kb("VmHWM:");
  c.peak_delta = hwm > rss0 ? hwm - rss0 : 0;
  c.device_delta = device_bytes_allocated() - dev0;
  c.stats = model->load_stats();
  return c;
}
double mib(uint64_t b) { return double(b) / (1 << 20); }
}  // namespace

TEST_CASE("load: peak host memory is the device copy plus a bounded slice, not the checkpoint") {
#if defined(DIFFVK_TEST_ASAN)
  test::skip("AddressSanitizer build: RSS is not bounded (quarantine); not run");
  return;
#endif
  if (!reset_hwm()) {
    test::skip("VmHWM cannot be reset here (/proc/self/clear_refs); not run");
    return;
  }
  // 55 MB of float32 weights in 20 layers (2.7 MB each, no tensor above 1.5 MB), and the same shapes in 1 layer.
  test::TempDir tmp("diffvk-load-memory");
  test::TinySpec spec{512, 256, 1, 4, 2, 640, 32};  // vocab, hidden, layers, heads, kv_heads, intermediate, max_pos
  const std::string small = tmp / "small", big = tmp / "big";
  test::write_tiny_model(small, spec, 3);
  spec.layers = 20;
  test::write_tiny_model(big, spec, 4);
  auto ctx = test::make_context();  // fp16 where the device has it: every tensor is converted while loading
  // SwiftShader's device memory costs host memory beyond its size: the 20-layer load adds 30.5 MiB over the
  // 1-layer one there, against 2.1 MiB on lavapipe in fp32 through the same loader path (mapped memory, float32
  // copied in place; measured 2026-11-29). The check passed there while every pipeline compiled at load,
  // probably because the compiler's memory then dominated both loads' peaks.
  if (ctx->device().caps().name.find("SwiftShader") != std::string::npos) {
    test::skip(
        "SwiftShader: device memory has a host cost beyond its size (the bound would measure the driver); not run");
    return;
  }
  LoadOptions defaults;
  measure_load(*ctx, small);  // first load: the driver's one-time costs
  const LoadCost s = measure_load(*ctx, small), b = measure_load(*ctx, big);
  // Host memory beyond the device copy: the fixed part (pipelines, the driver's JIT, the validation layer:
  // tens of MiB on lavapipe) is the same for both loads; what the 20 layers add must fit in the slice.
  auto host_part = [](const LoadCost& c) { return double(c.peak_delta) - double(c.device_delta); };
  const double extra = host_part(b) - host_part(s);
  const double allowance = double(defaults.staging_bytes + 2 * b.stats.largest_tensor_bytes + (8ull << 20));
  const uint64_t file_bytes = b.stats.weight_bytes * (ctx->precision() == Precision::fp16 ? 2 : 1);
  const std::string line = [&] {
    char buf[400];
    std::snprintf(buf, sizeof buf,
                  "load memory: %s, checkpoint %.1f MiB float32: peak RSS growth %.1f MiB (device copy %.1f MiB); "
                  "1-layer load %.1f MiB (device %.1f MiB); host memory the 20 layers add: %.1f MiB, allowed %.1f MiB",
                  precision_name(ctx->precision()), mib(file_bytes), mib(b.peak_delta), mib(b.device_delta),
                  mib(s.peak_delta), mib(s.device_delta), extra / (1 << 20), allowance / (1 << 20));
    return std::string(buf);
  }();
  MESSAGE(line);
  CHECK(b.stats.largest_tensor_bytes < (2ull << 20));
  CHECK(file_bytes > (48ull << 20));
  // The allowance is less than one host copy of the checkpoint: a loader that holds it fails.
  CHECK(allowance < double(file_bytes));
  CHECK(extra <= allowance);
}
