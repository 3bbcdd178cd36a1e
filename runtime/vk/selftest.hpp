// The self-test at load, the core's part (include/diffvk/selftest.hpp; docs/decisions/024-selftest-at-load.md).
#pragma once
#include <memory>

#include "diffvk/device.hpp"
#include "diffvk/selftest.hpp"

namespace diffvk {

// Device::create(options), then the self-test of ContextOptions::selftest: the verdict file's verdict (auto, when
// there is one for this configuration), else the registered runner's passes, each failure switching its feature
// off (the fallback chain: coopmat, int_dot, attn_core, subgroup, fp16) and reopening the device with that tuning
// to test again. Fills `report`. Throws Error(unsupported) naming the op and variant when a failure has no fallback
// left (also when read from the verdict file), and for selftest=always without a runner.
// keep_failure: such a failure is recorded in report.error and nullptr returned instead (run_selftest).
std::unique_ptr<Device> open_tested_device(const ContextOptions& options, SelftestReport& report,
                                           bool keep_failure = false);

}  // namespace diffvk
