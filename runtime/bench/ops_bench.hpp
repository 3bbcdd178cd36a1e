// diffvk_bench: the `ops` section (`diffvk bench --ops [--op NAME]`): every op's case table in
// OpMode::bench (op_cases.hpp), each case checked against the float64 reference and then timed; µs,
// GB/s, GFLOP/s and the fraction of the measured ceilings (copy bandwidth, fp32 FMA rate).
#pragma once
#include "bench/ceilings.hpp"
#include "bench/presets.hpp"

namespace diffvk::bench {

// Runs the rows (the device's precision only), reports the text table through `sink` and returns the
// "ops" object of the JSON document: {op: [row, ...]}. all_ok: every row that ran passed its check.
json run_op_rows(Device& dev, const Options& o, const Plan& plan, const Ceilings& ceil, bool timestamps, const Sink& sink,
                 bool& all_ok);

}  // namespace diffvk::bench
