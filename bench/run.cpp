// diffvk_bench: bench::run — plan, ceilings, then the attention cases series by series (with the default
// T grid each series gets an equal share of the remaining budget, and a T is skipped when the previous
// case's wall time scaled by the flop ratio would overrun it), or the whole-model benchmark; then the
// report, the JSON document and the plot.
#include <algorithm>
#include <thread>

#include "bench/cases.hpp"
#include "bench/ceilings.hpp"
#include "bench/figure.hpp"
#include "bench/host_memory.hpp"
#include "bench/model_bench.hpp"
#include "bench/ops_bench.hpp"
#include "bench/presets.hpp"
#include "bench/report.hpp"
#include "bench/thermal.hpp"
#include "diffvk/error.hpp"
#include "vk/gpu.hpp"

namespace diffvk::bench {

namespace {
std::string process_command_line() {
  const std::string raw = read_small_file("/proc/self/cmdline", 1 << 16);
  if (raw.empty()) return "diffvk bench";
  std::string s;
  for (char ch : raw) s += ch ? ch : ' ';
  while (!s.empty() && s.back() == ' ') s.pop_back();
  return s;
}

// The cool-down pause, in slices so that a cancel request is seen within 50 ms.
void cool_down(double seconds, const Sink& sink, const std::string& tag) {
  if (seconds <= 0) return;
  sink.step(strf("%s cool-down %.1f s", tag.c_str(), seconds));
  const auto t0 = Clock::now();
  while (seconds_since(t0) < seconds) {
    sink.check_cancel("during a cool-down pause");
    const double left = seconds - seconds_since(t0);
    std::this_thread::sleep_for(std::chrono::duration<double>(std::min(0.05, std::max(0.0, left))));
  }
}

// Runs plan.cases within plan.budget_s (when budgeted); budget skips become notes in the plan.
std::vector<CaseResult> run_cases(AttnBench& bench, Plan& plan, const Sink& sink) {
  std::vector<CaseResult> results;
  std::vector<std::string> series;
  for (const auto& c : plan.cases)
    if (std::find(series.begin(), series.end(), c.series()) == series.end()) series.push_back(c.series());
  const auto t_cases = Clock::now();
  size_t index = 0;
  for (size_t s = 0; s < series.size(); ++s) {
    const double share = (plan.budget_s - seconds_since(t_cases)) / double(series.size() - s);
    const auto t_series = Clock::now();
    double last_wall = 0, last_flops = 0;
    bool stop = false;
    for (const auto& c : plan.cases) {
      if (c.series() != series[s]) continue;
      ++index;
      sink.check_cancel("between cases");
      if (plan.budgeted && last_flops > 0) {
        const uint32_t S = c.decode ? 1 : c.T;
        double pairs = 0;
        for (uint32_t i = 0; i < S; ++i) pairs += double(c.decode ? c.T - 1 : 0) + i + 1;
        const double est =
            last_wall * (pairs * c.H * 12.0 * c.D) / last_flops + plan.cooldown_s;  // the pause counts too
        if (stop || seconds_since(t_series) + est > share) {
          stop = true;
          plan.notes.push_back(
              strf("%s skipped by the time budget (estimated %.0f s, %.0f s left for this series; pass --t to force)",
                   c.name().c_str(), est, std::max(0.0, share - seconds_since(t_series))));
          continue;
        }
      }
      const std::string tag = strf("[%zu/%zu]", index, plan.cases.size());
      cool_down(plan.cooldown_s, sink, tag);
      json before = plan.thermal ? read_thermal() : json(nullptr);
      CaseResult r = bench.run(c, tag);
      r.cooldown_s = plan.cooldown_s;
      if (plan.thermal) r.thermal = json{{"before", std::move(before)}, {"after", read_thermal()}};
      last_wall = r.wall_s;
      last_flops = r.flops;
      results.push_back(std::move(r));
    }
  }
  return results;
}
}  // namespace

Result run(Context& ctx, const Options& o) {
  const auto t_start = Clock::now();
  const Sink sink(o);
  Device& dev = ctx.device();
  const DeviceCaps& caps = ctx.caps();
  const bool cpu = caps.kind == DeviceKind::cpu, ts = caps.timestamps;
  const bool fp32_fallback = !dev.fp16() && o.requested_precision != Precision::fp32;
  Plan plan = make_plan(o, caps, fp32_fallback, cpu ? largest_cpu_cache_bytes() : 0);
  if (!o.plot_path.empty() && !plot_available())
    plan.notes.push_back("no PNG plot: this build has no stb (stb_image_write.h); " + o.plot_path + " not written");
  const std::string cmdline = o.command_line.empty() ? process_command_line() : o.command_line;
  sink.check_cancel("before the first measurement");

  sink.reportf("diffvk bench\ndevice:    [%u] %s (%s), %s %s, Vulkan %u.%u", caps.index, caps.name.c_str(),
               device_kind_name(caps.kind), caps.driver_name.c_str(), caps.driver_info.c_str(),
               VK_API_VERSION_MAJOR(caps.api_version), VK_API_VERSION_MINOR(caps.api_version));
  sink.reportf("precision: %s storage, fp32 accumulation%s; subgroup arithmetic %s; timing by %s",
               precision_name(ctx.precision()), fp32_fallback ? " (fp32 FALLBACK: no usable fp16 on this device)" : "",
               dev.subgroup_arithmetic() ? "on" : "off", ts ? "GPU timestamps" : "host wall clock");
  for (const auto& n : plan.notes) sink.reportf("note:      %s", n.c_str());

  // ---- ceilings
  sink.stage("ceilings: copy bandwidth");
  Ceilings ceil;
  ceil.copy = measure_copy(dev, plan.copy_bytes, plan.copy_warmup, plan.copy_runs, ts, sink);
  ceil.copy.rule = plan.copy_rule;
  sink.stage("ceilings: FMA rate");
  ceil.fma32 = measure_fma(dev, false, plan.fma_min_us, plan.fma_max_us, plan.copy_warmup, plan.copy_runs, ts, sink);
  ceil.fma16 = measure_fma(dev, true, plan.fma_min_us, plan.fma_max_us, plan.copy_warmup, plan.copy_runs, ts, sink);
  report_ceilings(sink, ceil, plan);
  if (!o.model_dir.empty() || !o.shape.empty()) {
    cool_down(plan.cooldown_s, sink, "[model]");
    json before = plan.thermal ? read_thermal() : json(nullptr);
    json j = run_model_bench(o, ctx, ceil, plan.runs, cmdline, sink);
    j["preset"] = plan.preset;
    if (plan.thermal) j["thermal"] = json{{"before", std::move(before)}, {"after", read_thermal()}};
    return Result{j.dump(2) + "\n", true};
  }

  if (o.ops || !o.op.empty() || o.matmul_table) {
    bool ok = false;
    json rows = o.matmul_table ? json::object() : run_op_rows(dev, o, plan, ceil, ts, sink, ok);
    if (o.matmul_table) rows["linear"] = run_matmul_rows(dev, true, plan, ceil, ts, sink, ok);
    const double total_s = seconds_since(t_start);
    sink.reportf("\ntotal %.1f s", total_s);
    json j;
    j["tool"] = "diffvk bench";
    j["command_line"] = cmdline;
    j["preset"] = plan.preset;
    j["device"] = caps_json(caps, dev);
    j["precision"] = precision_name(ctx.precision());
    j["fp32_fallback"] = fp32_fallback;
    j["timing"] = ts ? "gpu_timestamps" : "host_wall_clock";
    j["config"] = json{{"runs", plan.runs}, {"warmup", plan.warmup}, {"op", o.op.empty() ? json(nullptr) : json(o.op)}};
    j["ceilings"] = ceilings_json(ceil);
    j["ops"] = std::move(rows);
    j["outputs_checked"] = ok;
    j["total_s"] = total_s;
    return Result{j.dump(2) + "\n", ok};
  }

  // ---- the matmul row (f16 weights, M = 512, K = N = 2048), before the attention cases; not in --quick,
  // nor under --preset phone (a 20 s budget: 4.3 GFLOP per run is most of it on a phone, minutes on a CPU driver)
  bool mm_ok = true;
  json mm = json(nullptr);
  const char* mm_skipped = o.quick ? "--quick" : o.preset == "phone" ? "--preset phone (time budget)" : nullptr;
  if (!mm_skipped)
    mm = run_matmul_rows(dev, false, plan, ceil, ts, sink, mm_ok);
  else
    sink.reportf("matmul row skipped: %s (`diffvk bench --matmul-table` runs it)", mm_skipped);

  // ---- cases
  AttnBench bench(dev, CaseConfig{plan.warmup, plan.runs, ts, o.no_naive}, sink);
  const std::vector<CaseResult> results = run_cases(bench, plan, sink);

  // ---- report
  report_table(sink, results, ceil);
  const auto targets = evaluate_targets(results, ceil, cpu);
  const bool all_ok = report_checks(sink, results, targets, plan);
  const double total_s = seconds_since(t_start);
  sink.reportf("\ntotal %.1f s", total_s);

  const RunInfo info{cmdline, precision_name(ctx.precision()), fp32_fallback, ts, bench.naive_budget()};
  json j = attention_document(info, caps, dev, plan, o, ceil, results, targets, all_ok && mm_ok, total_s);
  j["matmul"] = mm_skipped ? json{{"skipped", mm_skipped}} : json{{"rows", std::move(mm)}, {"outputs_checked", mm_ok}};
  if (!o.plot_path.empty()) {
    if (plot_available()) {
      const std::string sub = strf(
          "%s storage%s, %s device, %s preset, median of %d runs; ceilings: copy %.1f GB/s, fp32 FMA %.1f GFLOP/s%s",
          precision_name(ctx.precision()), fp32_fallback ? " (fp32 FALLBACK)" : "", device_kind_name(caps.kind),
          plan.preset.c_str(), plan.runs, ceil.copy.gbps, ceil.fma32.gflops,
          cpu ? "\nCPU device: a correctness target, not a GPU performance proxy" : "");
      write_plot(o.plot_path, results, ceil, caps.name, sub, cpu);
      sink.reportf("plot: %s", o.plot_path.c_str());
      j["plot"] = json{{"path", o.plot_path}, {"written", true}};
    } else {
      sink.warn("diffvk bench: no PNG plot in this build (stb was not found at configure time); " + o.plot_path +
                " not written");
      j["plot"] = json{{"path", o.plot_path}, {"written", false}, {"reason", "this build has no stb (PNG encoder)"}};
    }
  }
  return Result{j.dump(2) + "\n", all_ok && mm_ok};
}

}  // namespace diffvk::bench
