// diffvk — the self-test at load (docs/decisions/024-selftest-at-load.md): before a context's first use on a
// device, driver and shader build, every op's pipelines run on small fixed inputs against the float64 reference,
// a failing feature is switched off through its tuning key (the fallback chain) and retested, and the verdict is
// kept in the platform cache directory so that the next context reads it instead of testing again.
//
// The core library holds the driver of the test (Context::create: the chain, the verdict file); the cases and the
// float64 reference live in diffvk_bench (bench/selftest.cpp), which registers them with set_selftest_runner
// (diffvk::bench::install_selftest(); libdiffvk_bench.so does it when it is loaded). Without a registered runner,
// SelftestMode::automatic tests nothing (Context::selftest() says why) and SelftestMode::always is an error.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace diffvk {

class Device;  // runtime internal (runtime/vk/gpu.hpp)

// ContextOptions::selftest.
enum class SelftestMode {
  automatic,  // "auto" (the default): test once per device, driver version, shader build and configuration; reuse
  always,     // test at every Context::create (and rewrite the verdict)
  off,        // no test, no verdict read: the tuning as resolved
};
const char* selftest_mode_name(SelftestMode mode) noexcept;  // "auto", "always", "off"
// "auto", "always" or "off"; anything else is Error(invalid_argument) naming the choices and `what` (the option).
SelftestMode parse_selftest_mode(const std::string& text, const std::string& what = "selftest");

// Test hook (ContextOptions::selftest_fault): the class of fault planted in the variants that
// ContextOptions::selftest_fail_variant names. The value faults change the GPU's output as downloaded (the bytes the
// check reads, in the replay too), never the float64 reference: the check itself must catch them.
enum class SelftestFault {
  wrong_value,       // one output element off by 8x the case's bound (docs/maths.md one-kernel tolerance)
  nan,               // one output element a NaN, in the element's encoding (fp16 or fp32)
  fp16_overflow,     // one fp16 output element +inf, what an fp16 overflow gives; fp16-storage variants only
  stale,             // a missing barrier's race, simulated: up to four output elements spread over the output left
                     // at the NaN poison the runner writes before each run (CPU drivers run commands in order: a real
                     // race does not show there)
  pipeline_failure,  // the variant's pipelines fail to build (vkCreateComputePipelines returns VK_ERROR_UNKNOWN)
};
// "wrong_value", "nan", "fp16_overflow", "stale", "pipeline_failure"; nullptr for a value out of the enum.
const char* selftest_fault_name(SelftestFault fault) noexcept;
// One of the names above; anything else is Error(invalid_argument) naming the choices and `what` (the option).
SelftestFault parse_selftest_fault(const std::string& text, const std::string& what = "selftest_fault");

// A case that dispatched pipelines no earlier case of its pass had: their compile time on this driver, the
// vkCreateComputePipelines time plus the first run's wall time less the replay's (CPU drivers compile at the first
// dispatch). `diffvk selftest --json` writes them; CI fails a compile past 10x the median (.ci/lavapipe-compile-times).
struct SelftestFirstUse {
  std::string case_name;               // the case (bench/cases/<op>.cpp)
  std::vector<std::string> pipelines;  // "shader [specialization constants]"
  double seconds = 0;
};

// One (op, variant) of a self-test pass: the cases of that op that ran the same feature path.
struct SelftestRow {
  std::string op;       // the op's case table (bench/cases/<op>.cpp)
  std::string variant;  // the features it ran with: "fp16 subgroup", "fp16 subgroup coopmat", "fp32 shared attn=keys"
  uint32_t cases = 0, failed = 0;
  double max_error = 0;  // the largest max-abs error over its cases (against the float64 reference)
  double worst = 0;      // the largest max-abs error as a fraction of its case's bound (1 = at the SPEC tolerance)
  double seconds = 0;    // wall time of its cases (inputs, float64 reference, pipelines, runs, check)
  bool pass = true;      // every case within the tolerance, replayed identically, padding untouched
  std::string failure;   // the first failing case: its name and why ("" when pass)
  std::string fallback;  // the tuning step the failure took ("subgroup_off=linear"); "" when pass or nothing was left
  std::string tuning;    // the fallback overrides this pass ran under ("" = the context's tuning as requested)
  // The tuning keys whose features the variant used, in the fallback chain's order: coopmat, int_dot, attn_core,
  // subgroup, fp16. The chain switches off the first of them still on (subgroup: for this op's kernel only,
  // subgroup_off=KERNEL, where it has subgroup variants).
  std::vector<std::string> uses;
  std::vector<SelftestFirstUse> first_uses;  // its cases' new pipelines and their compile (not kept in the verdict)
};

// Context::selftest(): what the self-test did at Context::create.
struct SelftestReport {
  SelftestMode mode = SelftestMode::automatic;
  bool ran = false;          // the cases ran now (false: off, read from the verdict file, or no runner)
  bool from_cache = false;   // the verdict came from the verdict file
  std::string note;          // why it did not run, or where the verdict came from
  std::string verdict_path;  // the verdict file ("" where there is no cache directory, or off)
  std::string config;        // the configuration the verdict is for (precision, resolved tuning, ops)
  // The fallback the context runs with: tuning overrides, "key=value,..." ("" = none).
  std::string fallback;
  double seconds = 0;             // wall time of the passes run now (0 when read)
  double tested_seconds = 0;      // wall time of the passes when they ran (now, or when the verdict was written)
  std::vector<SelftestRow> rows;  // every pass's rows, in order (a retest adds rows with `tuning` set)
  // The ops left to their first record (auto at Context::create: the forms sessions record only on request, the
  // attention maps' attn_probs and the context shift's kv_shift; docs/selftest.md): not in `rows`, tested by the
  // session call that first records them (Session::attention_maps, Session::shift), whose failure refuses that call
  // (Error unsupported naming the op and the variant) and has the next create test the op at load, where the
  // fallback chain can take over. The verdict file keeps their rows once tested. Empty with always, off, and
  // run_selftest (`diffvk selftest`), which test every op they are asked for.
  std::vector<std::string> deferred;
  std::string device;  // the device tested last: "<name> (fp16)" / "(fp32)"
  // run_selftest only: the error Context::create would throw when a failure has no fallback left ("" otherwise).
  std::string error;
  // The table `diffvk selftest` prints: op, variant, cases, max error, verdict, fallback taken.
  std::string table() const;
};

// What a runner is asked to test.
struct SelftestRequest {
  std::vector<std::string> ops;       // the ops' case tables to run; empty: every op with a table
  std::vector<std::string> weights;   // ContextOptions::selftest_weights: the quantized formats to test; empty: all
  std::string model;                  // ContextOptions::selftest_model: the model's config.json text, "" = none
  std::vector<std::string> deferred;  // ops not to run now, even where `ops` names them or is empty (left to first use)
  // Test hook (ContextOptions::selftest_fail_variant): cases to fail on purpose, "" = none (see there).
  std::string fail_variant;
  // Test hook (ContextOptions::selftest_fault): the fault planted in them.
  SelftestFault fault = SelftestFault::wrong_value;
};
// Runs the request's cases on `device` (its precision and tuning) and returns one row per (op, variant); `tuning`
// and `fallback` are left empty (the driver fills them). Registered by diffvk_bench.
using SelftestRunner = std::function<std::vector<SelftestRow>(Device& device, const SelftestRequest& request)>;
void set_selftest_runner(SelftestRunner runner);  // an empty function unregisters; thread-safe
bool has_selftest_runner();

// What Context::create(options) does before it returns the context, without the context: the device opened, tested
// as options.selftest says (auto: the kept verdict when there is one), closed. A failure with no fallback left is
// returned in SelftestReport::error with every row (Context::create throws it); other errors are thrown. What
// `diffvk selftest` prints.
struct ContextOptions;
SelftestReport run_selftest(const ContextOptions& options);

// The verdict file of a device (DeviceCaps of list_devices() or Context::caps()):
// `<cache dir>/selftest/<vendor>-<device>-<pipelineCacheUUID>-<driver version>-<shader hash>.json`, all hex;
// "" where there is no cache directory.
struct DeviceCaps;
std::string selftest_verdict_path(const DeviceCaps& caps);

}  // namespace diffvk
