// C entry point of diffvk_bench (include/diffvk/diffvk_bench.h): options checked and copied into
// bench::Options, callbacks wrapped, everything caught (through the core's capi::with_context).
#include "diffvk/diffvk_bench.h"

#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <string>

#include "diffvk/bench.hpp"
#include "diffvk/error.hpp"
#include "capi/c_api_internal.hpp"

namespace {
constexpr size_t kMinSize = offsetof(diffvk_bench_options, preset);  // struct_size itself
// The layouts of diffvk_bench_options (diffvk.h VERSIONING): 1.0 up to log_user, 1.1 up to shape, 1.2 up to draft_k.
using diffvk::capi::Layout;
using diffvk::capi::layout;
constexpr Layout kBenchLayouts[] = {
    layout(offsetof(diffvk_bench_options, variant), alignof(diffvk_bench_options)),                      // 1.0
    layout(offsetof(diffvk_bench_options, shape) + sizeof(const char*), alignof(diffvk_bench_options)),  // 1.1
    layout(offsetof(diffvk_bench_options, draft_k) + sizeof(uint32_t), alignof(diffvk_bench_options))};  // 1.2
static_assert(kBenchLayouts[2].size == sizeof(diffvk_bench_options),
              "diffvk_bench_options grew: add its layout to kBenchLayouts");
static_assert(sizeof(void*) != 8 || kBenchLayouts[0].size == 72,
              "the 1.0 layout of 64-bit targets (abi/libdiffvk_bench.abi)");

// `opts` as this library's struct: the caller's whole fields (up to the end of the last layout that struct_size
// covers, not that layout's tail padding; runtime/capi/c_api.cpp read_options), defaults for the rest.
diffvk_bench_options normalized(const diffvk_bench_options* opts) {
  diffvk_bench_options o;
  diffvk_bench_default_options(&o);
  if (!opts) return o;
  uint32_t size = 0;
  std::memcpy(&size, opts, sizeof size);
  if (size < kMinSize + sizeof(const char*))
    throw diffvk::Error(
        diffvk::Status::invalid_argument,
        "opts->struct_size " + std::to_string(size) + " is too small (set it with diffvk_bench_default_options)");
  if (size > sizeof(diffvk_bench_options))
    throw diffvk::Error(diffvk::Status::invalid_argument,
                        "opts->struct_size " + std::to_string(size) + " is larger than this library's " +
                            std::to_string(sizeof(diffvk_bench_options)) + " (a newer header?)");
  std::memcpy(static_cast<void*>(&o), opts, diffvk::capi::fields_covered(kBenchLayouts, size));
  o.struct_size = sizeof(diffvk_bench_options);
  return o;
}
}  // namespace

extern "C" {

void diffvk_bench_default_options_sized(diffvk_bench_options* out, size_t size) {
  auto d = diffvk::capi::zeroed<diffvk_bench_options>();
  d.struct_size = sizeof d;
  d.preset = "default";
  diffvk::capi::write_defaults(out, size, d, kBenchLayouts);
}
// The 1.0 ABI (parenthesized: diffvk_bench.h makes the name a function-like macro): the 1.0 struct only.
void(diffvk_bench_default_options)(diffvk_bench_options* out) {
  diffvk_bench_default_options_sized(out, kBenchLayouts[0].size);
}

diffvk_status diffvk_bench_run(diffvk_context* context, const diffvk_bench_options* opts, char** json_out) {
  if (!json_out) return diffvk::capi::report_error(__func__, DIFFVK_INVALID_ARGUMENT, "json_out is NULL");
  *json_out = nullptr;
  return diffvk::capi::with_context(__func__, context, [&](diffvk::Context& ctx) {
    const diffvk_bench_options c = normalized(opts);
    diffvk::bench::Options o;
    if (c.preset) o.preset = c.preset;
    if (c.model_dir) o.model_dir = c.model_dir;
    o.budget_seconds = c.budget_seconds;
    if (c.plot_path) o.plot_path = c.plot_path;
    if (c.variant) o.variant = c.variant;
    if (c.shape) o.shape = c.shape;
    if (c.speculate) o.speculate = c.speculate;
    if (c.draft_k) o.draft_k = c.draft_k;
    if (c.abort_cb) o.cancel = [&c] { return c.abort_cb(c.abort_user) != 0; };
    if (c.log_cb) {
      o.log = [&c](diffvk::bench::LogLevel level, const std::string& m) {
        c.log_cb(c.log_user, static_cast<int>(level), m.c_str());
      };
      o.report = [&c](const std::string& line) {
        c.log_cb(c.log_user, static_cast<int>(diffvk::bench::LogLevel::info), line.c_str());
      };
    }
    const diffvk::bench::Result r = diffvk::bench::run(ctx, o);
    char* s = static_cast<char*>(std::malloc(r.json.size() + 1));
    if (!s) throw diffvk::Error(diffvk::Status::out_of_memory, "no host memory for the JSON report");
    std::memcpy(s, r.json.c_str(), r.json.size() + 1);
    *json_out = s;
  });
}

void diffvk_bench_free_string(char* s) { std::free(s); }

}  // extern "C"
