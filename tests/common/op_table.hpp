// The conformance half of the one-case-class-per-op design (bench/op_cases.hpp): runs every case of
// an op's table (OpMode::conformance) whose precision is `precision`, on a validated context, and checks
// each against the float64 reference (docs/maths.md one-kernel tolerances), the replay and the padding.
// Never times anything (the benchmark's `ops` rows run the same table in OpMode::bench).
#pragma once
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdlib>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "bench/op_cases.hpp"
#include "gpu_test.hpp"

namespace diffvk::test {

// force_quirks: device quirks applied as if the driver had them (ContextOptions::force_quirks), so that a
// quirk's path runs here; only: the cases to run (all when empty); tuning: ContextOptions::tuning (key=value,...).
inline void run_op_table(const std::string& op, Precision precision, const std::vector<std::string>& force_quirks = {},
                         const std::function<bool(const bench::OpCase&)>& only = {}, const std::string& tuning = "") {
  if (precision == Precision::fp16 && !device_has_fp16()) {
    skip("device has no fp16 path; fp16 case not run on this device");
    return;
  }
  ContextOptions o = validated_options(precision);
  o.force_quirks = force_quirks;
  o.tuning = tuning;
  auto ctx = Context::create(o);
  bench::OpRunner runner(ctx->device());
  const bool fp16 = precision == Precision::fp16;
  size_t ran = 0, lanes_left = 0;
  // DIFFVK_TEST_FORCED_LANES=0 (.ci/sanitize): the forced lane-group cases (OpCase::forced_lanes) are not run; they
  // repeat shader variants the other passes run on the same device, with no host path of their own.
  const char* lanes_env = std::getenv("DIFFVK_TEST_FORCED_LANES");
  const bool forced_lanes = !lanes_env || std::string(lanes_env) != "0";
  // DIFFVK_TEST_CASE_STRIDE=k (.ci/sanitize: 3; CI pass 2 on SwiftShader: 2): every k-th case of the table (the
  // first, then every k-th), so that each op's recording and upload code still runs on several shapes at a k-th of
  // the cost; CI pass 1 (lavapipe) and the README's test command run every case.
  const char* stride_env = std::getenv("DIFFVK_TEST_CASE_STRIDE");
  const size_t stride = stride_env ? std::max<long>(1, std::strtol(stride_env, nullptr, 10)) : 1;
  size_t seen = 0, stride_left = 0;
  for (const auto& cp : bench::op_cases(op, bench::OpMode::conformance)) {
    const bench::OpCase& c = *cp;
    if (c.fp16 != fp16 || (only && !only(c))) continue;
    if (c.forced_lanes() && !forced_lanes) {
      ++lanes_left;
      continue;
    }
    if (seen++ % stride != 0) {
      ++stride_left;
      continue;
    }
    INFO(op << " case " << c.name);
    const bench::OpCaseRun r = runner.run(c);
    INFO(r.summary());
    if (!r.skipped.empty()) {
      MESSAGE(op << " case " << c.name << ": " << r.skipped);
      continue;
    }
    ++ran;
    CHECK(r.check.ok);
    CHECK(r.replay_identical);
    CHECK(r.padding_changed == 0);
  }
  if (lanes_left) MESSAGE(op << ": " << lanes_left << " forced lane-group cases not run (DIFFVK_TEST_FORCED_LANES=0)");
  if (stride_left) MESSAGE(op << ": " << stride_left << " cases not run (DIFFVK_TEST_CASE_STRIDE=" << stride << ")");
  CHECK(ran > 0);
}

// An fp32 context and its device: the fixture (TEST_CASE_FIXTURE) of the argument checks beside an op's table.
struct Fp32Device {
  std::unique_ptr<Context> ctx = make_context(Precision::fp32);
  Device& dev = ctx->device();
};

}  // namespace diffvk::test
