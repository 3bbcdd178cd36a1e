// diffvk_bench: the `ops` section (`diffvk bench --ops [--op NAME]`): every op's case table in
// OpMode::bench (op_cases.hpp), each case checked against the float64 reference and then timed; µs,
// GB/s, GFLOP/s and the fraction of the measured ceilings (copy bandwidth, fp32 FMA rate).
#pragma once
#include "bench/ceilings.hpp"
#include "bench/presets.hpp"

namespace diffvk::bench {

// Runs the rows (the device's precision only), reports the text table through `sink` and returns the
// "ops" object of the JSON document: {op: [row, ...]}. all_ok: every row that ran passed its check.
// The matmul rows (Options::matmul_table; full = false: the one row of the default run), each checked
// then timed; a JSON array of rows with M, K, N, weights, path and fraction_of_peak.
json run_matmul_rows(Device& dev, bool full, const Plan& plan, const Ceilings& ceil, bool timestamps, const Sink& sink,
                     bool& all_ok);
json run_op_rows(Device& dev, const Options& o, const Plan& plan, const Ceilings& ceil, bool timestamps,
                 const Sink& sink, bool& all_ok);

}  // namespace diffvk::bench
