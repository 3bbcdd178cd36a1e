// diffvk_bench: the `ops` rows (ops_bench.hpp): the same case tables as the conformance tests, bench shapes.
#include "bench/ops_bench.hpp"

#include "bench/op_cases.hpp"
#include "bench/report.hpp"
#include "diffvk/error.hpp"
#include "ops/linear.hpp"
#include "vk/gpu.hpp"

namespace diffvk::bench {

namespace {

// Runs `cases` (the device's precision only) into a JSON array: each row checked against the float64
// reference, then timed; linear rows also carry M, K, N, weights and path (the matmul fields).
json run_rows(OpRunner& runner, const std::string& op, const OpCases& cases, bool fp16, const OpTiming& timing,
              const Ceilings& ceil, const Sink& sink, bool& all_ok, size_t& ran) {
  json rows = json::array();
  for (const auto& cp : cases) {
    const OpCase& c = *cp;
    if (c.fp16 != fp16) continue;
    sink.check_cancel("between op cases");
    sink.step("ops: " + op + " " + c.name);
    const OpCaseRun r = runner.run(c, &timing);
    const OpCase::RowShape shape = c.row_shape();
    json row{{"case", c.name},     {"precision", c.fp16 ? "fp16" : "fp32"},
             {"rows", shape.rows}, {"in", shape.in},
             {"out", shape.out},   {"detail", r.detail}};
    c.add_row_fields(row, r.detail);  // linear: M, K, N, weights, path
    if (!r.skipped.empty()) {
      row["skipped"] = r.skipped;
      sink.reportf("%-13s %-52s skipped: %s", op.c_str(), c.name.c_str(), r.skipped.c_str());
      rows.push_back(row);
      continue;
    }
    ++ran;
    all_ok = all_ok && r.ok();
    row["output_checked"] = r.ok();
    row["check"] = json{{"against", r.check.against},
                        {"values", r.check.values},
                        {"max_abs_err", r.check.max_abs},
                        {"max_abs_ref", r.check.max_ref},
                        {"nmse", r.check.nmse},
                        {"nonfinite", r.check.nonfinite},
                        {"replay_identical", r.replay_identical},
                        {"padding_changed", r.padding_changed}};
    row["bytes"] = r.bytes;
    row["flops"] = r.flops;
    if (!r.timed) {
      sink.reportf("%-13s %-52s %10s %9s %9s %7s %7s  FAILED (%s)", op.c_str(), c.name.c_str(), "-", "-", "-", "-", "-",
                   r.summary().c_str());
      sink.warn("ops: " + op + " " + c.name + ": " + r.summary());
      rows.push_back(row);
      continue;
    }
    // %fma: of the fp32 FMA ceiling (every kernel accumulates in fp32, fp16 storage included).
    const PeakFraction pf = peak_fraction(ceil, r.gflops(), r.gbps());
    row["time"] = stats_json(r.us);
    row["GBps"] = r.gbps();
    row["GFLOPs"] = r.gflops();
    add_peak_fields(row, pf);
    sink.reportf("%-13s %-52s %10.2f %9.2f %9.2f %6.1f%% %6.1f%%  ok (max_abs %.2g)", op.c_str(), c.name.c_str(),
                 r.us.median, r.gbps(), r.gflops(), 100 * pf.bytes, 100 * pf.flops, r.check.max_abs);
    rows.push_back(row);
  }
  return rows;
}

void table_header(const Sink& sink) {
  sink.reportf("%-13s %-52s %10s %9s %9s %7s %7s  %s", "op", "case", "median us", "GB/s", "GFLOP/s", "%copy", "%fma",
               "check");
}

}  // namespace

json run_op_rows(Device& dev, const Options& o, const Plan& plan, const Ceilings& ceil, bool ts, const Sink& sink,
                 bool& all_ok) {
  std::vector<std::string> ops = table_ops();
  if (!o.op.empty()) {
    op_cases(o.op, OpMode::bench);  // invalid_argument naming the ops with a table
    ops = {o.op};
  }
  OpRunner runner(dev);
  const OpTiming timing{plan.warmup, plan.runs, ts};
  json doc = json::object();
  all_ok = true;
  size_t ran = 0;
  table_header(sink);
  for (const std::string& op : ops)
    doc[op] = run_rows(runner, op, op_cases(op, OpMode::bench), dev.fp16(), timing, ceil, sink, all_ok, ran);
  if (ran == 0) all_ok = false;
  sink.reportf("\nop rows: %zu run, %s (every row checked against the float64 reference before it was timed)", ran,
               all_ok ? "all outputs checked" : "SOME CHECKS FAILED");
  return doc;
}

json run_matmul_rows(Device& dev, bool full, const Plan& plan, const Ceilings& ceil, bool ts, const Sink& sink,
                     bool& all_ok) {
  OpRunner runner(dev);
  const OpTiming timing{plan.warmup, plan.runs, ts};
  all_ok = true;
  size_t ran = 0;
  sink.reportf("%s", full ? "\nmatmul table (the linear op; M x K -> N, weights; the kernel the tuning picks):"
                          : "\nmatmul (the linear op at M = 512, K = N = 2048; --matmul-table for the full table):");
  std::string why_not;
  linear_uses_coopmat(dev.caps(), dev.fp16(), &why_not);
  if (dev.coopmat())
    sink.reportf("cooperative matrices %s: rows with path coopmat run them%s", dev.caps().coopmat_shape().c_str(),
                 why_not.empty() ? " (the tuning picks them past 16 rows)"
                                 : (" (not picked by the tuning: " + why_not + ")").c_str());
  else
    sink.reportf("cooperative matrices: none (%s); every row is a scalar-FMA kernel", why_not.c_str());
  table_header(sink);
  json rows =
      run_rows(runner, "linear", matmul_table_cases(full, dev.coopmat()), dev.fp16(), timing, ceil, sink, all_ok, ran);
  if (ran == 0) all_ok = false;
  return rows;
}

}  // namespace diffvk::bench
