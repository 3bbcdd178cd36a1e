#include "bench/report.hpp"

#include "vk/gpu.hpp"

namespace diffvk::bench {

json stats_json(const Stats& s, const std::string& unit) {
  return json{
      {"median_" + unit, s.median}, {"min_" + unit, s.min}, {"max_" + unit, s.max}, {"samples_" + unit, s.samples}};
}

static json check_json(const Check& c) {
  return json{{"against", c.against},
              {"values", c.values},
              {"max_abs_err", c.max_abs},
              {"max_abs_ref", c.max_ref},
              {"nmse", c.nmse},
              {"nonfinite", c.nonfinite},
              {"tolerance_factor", c.tolerance_factor},
              {"ok", c.ok}};
}

static std::string us_str(double us) {
  return us >= 1e5 ? strf("%.0f", us) : us >= 100 ? strf("%.1f", us) : strf("%.2f", us);
}

void report_ceilings(const Sink& sink, const Ceilings& c, const Plan& plan) {
  sink.reportf(
      "ceilings:  copy %.2f GB/s (compute-shader copy of %s, read + write, %ux%u per workgroup, median of %d; buffer: "
      "%s)",
      c.copy.gbps, mib(c.copy.bytes).c_str(), c.copy.wg, c.copy.items, plan.copy_runs, c.copy.rule.c_str());
  for (const FmaCeiling* f : {&c.fma32, &c.fma16}) {
    const char* prec = f == &c.fma32 ? "fp32" : "fp16";
    if (!f->measured) {
      sink.reportf("           %s FMA: not measured (%s)", prec, f->absent.c_str());
      continue;
    }
    sink.reportf(
        "           %s FMA %.2f GFLOP/s (%u x %u invocations, %u %s chains x %u iterations, result checked, median of "
        "%d)",
        prec, f->gflops, f->groups, f->wg, f->chains, f == &c.fma32 ? "vec4" : "f16vec4", f->iters, plan.copy_runs);
  }
  sink.report(
      "           %fma = GFLOP/s / the fp32 FMA ceiling (diffvk's kernels accumulate in fp32 with either storage "
      "type); "
      "%copy = GB/s / the copy ceiling\n");
}

void report_table(const Sink& sink, const std::vector<CaseResult>& results, const Ceilings& c) {
  sink.reportf(
      "(v2 rows: DIFF V2 with H output heads = 2H query heads; \"plain H\"/\"plain 2H\": one softmax over H or 2H "
      "query heads, "
      "same KV cache)");
  sink.reportf("%-7s %4s %6s %6s  %-8s %11s %11s %11s %8s %6s %8s %6s %8s", "phase", "D", "T", "H/Hkv", "impl",
               "median us", "min us", "max us", "GB/s", "%copy", "GFLOP/s", "%fma", "fused x");
  for (const auto& r : results) {
    const std::string hh = strf("%u/%u", r.spec.H, r.spec.Hkv);
    if (!r.skipped.empty()) {
      sink.reportf("%-7s %4u %6u %6s  skipped: %s",
                   r.spec.v2       ? (r.spec.decode ? "v2 dec" : "v2 pre")
                   : r.spec.decode ? "decode"
                                   : "prefill",
                   r.spec.D, r.spec.T, hh.c_str(), r.skipped.c_str());
      continue;
    }
    for (int i = 0; i < kImpls; ++i) {
      if (!impl_applies(r.spec, i)) continue;
      const char* ph =
          i == 0 ? (r.spec.v2 ? (r.spec.decode ? "v2 dec" : "v2 pre") : (r.spec.decode ? "decode" : "prefill")) : "";
      const std::string d = i == 0 ? strf("%u", r.spec.D) : "", t = i == 0 ? strf("%u", r.spec.T) : "";
      const std::string h = i == 0 ? hh : "";
      if (!timed(r, i)) {
        std::string why = r.impl[i].skipped;
        if (r.impl[i].ran && !r.impl[i].checked) why = "OUTPUT CHECK FAILED, not timed";
        sink.reportf("%-7s %4s %6s %6s  %-8s skipped: %s", ph, d.c_str(), t.c_str(), h.c_str(), kImplNames[i],
                     why.c_str());
        continue;
      }
      const double g = gbps(r, i), f = gflops(r, i);
      const PeakFraction pf = peak_fraction(c, f, g);
      const std::string sp = i == 0 || !timed(r, 0) ? "-" : strf("%.2fx", speedup(r, i));
      sink.reportf("%-7s %4s %6s %6s  %-8s %11s %11s %11s %8.2f %5.1f%% %8.2f %5.1f%% %8s", ph, d.c_str(), t.c_str(),
                   h.c_str(), kImplNames[i], us_str(r.impl[i].us.median).c_str(), us_str(r.impl[i].us.min).c_str(),
                   us_str(r.impl[i].us.max).c_str(), g, 100 * pf.bytes, f, 100 * pf.flops, sp.c_str());
    }
  }
}

namespace {
TargetEval unmeasured_target(const char* name) {
  TargetEval t;
  t.target = name;
  t.measurable = false;
  t.note = "not measured: no qualifying case in this run";
  return t;
}
}  // namespace

std::vector<TargetEval> evaluate_targets(const std::vector<CaseResult>& results, const Ceilings& c, bool cpu_device) {
  std::vector<TargetEval> out;
  const char* names[3] = {"decode T>=2048: fused >= 1.35x two-pass", "prefill T>=1024: fused >= 1.1x two-pass",
                          "decode T>=4096 on a real GPU: fused >= 60% of copy bandwidth"};
  for (int k = 0; k < 3; ++k) {
    bool any = false;
    for (const auto& r : results) {
      const bool decode = k != 1;
      const uint32_t tmin = k == 0 ? 2048 : k == 1 ? 1024 : 4096;
      if (r.spec.v2 || r.spec.decode != decode || r.spec.T < tmin || !r.skipped.empty()) continue;
      any = true;
      TargetEval t;
      t.target = names[k];
      t.spec = r.spec;
      if (k < 2) {
        t.threshold = k == 0 ? 1.35 : 1.1;
        t.unit = "x";
        t.measurable = timed(r, 0) && timed(r, 1);
        if (t.measurable)
          t.value = speedup(r, 1);
        else
          t.note = "not measured: an implementation failed its output check or was skipped";
      } else {
        t.threshold = 60;
        t.unit = "%";
        t.measurable = timed(r, 0) && !cpu_device;
        if (timed(r, 0)) t.value = 100 * gbps(r, 0) / c.copy.gbps;
        t.note = cpu_device     ? "not measurable here: CPU device (lavapipe), not a real GPU"
                 : !timed(r, 0) ? "not measured: the fused output check failed"
                                : "";
      }
      out.push_back(t);
    }
    if (!any) out.push_back(unmeasured_target(names[k]));
  }
  // DIFF V2, on the cases that have a V2 run: ratios of medians from the same run.
  const char* v2names[3] = {"v2 decode T>=2048: fused >= 1.35x two-pass",
                            "v2 decode T>=2048: plain 2H / fused >= 0.91 (fused <= 1.1x)",
                            "v2 prefill T>=512: fused >= 1.2x two-pass"};
  bool any_v2 = false;
  for (const auto& r : results) any_v2 = any_v2 || r.spec.v2;
  for (int k = 0; k < 3 && any_v2; ++k) {
    bool any = false;
    for (const auto& r : results) {
      const bool decode = k != 2;
      if (!r.spec.v2 || r.spec.decode != decode || r.spec.T < (decode ? 2048u : 512u) || !r.skipped.empty()) continue;
      any = true;
      TargetEval t;
      t.target = v2names[k];
      t.spec = r.spec;
      t.unit = "x";
      const int other = k == 1 ? 4 : 1;
      t.threshold = k == 0 ? 1.35 : k == 1 ? 1 / 1.1 : 1.2;
      t.measurable = timed(r, 0) && timed(r, other);
      if (t.measurable)
        t.value = speedup(r, other);
      else
        t.note = "not measured: an implementation failed its output check or was skipped";
      out.push_back(t);
    }
    if (!any) out.push_back(unmeasured_target(v2names[k]));
  }
  return out;
}

json caps_json(const DeviceCaps& c, const Device& dev) {
  json heaps = json::array();
  for (const auto& h : c.heaps) heaps.push_back(json{{"size", h.size}, {"device_local", h.device_local}});
  return json{{"index", c.index},
              {"name", c.name},
              {"kind", device_kind_name(c.kind)},
              {"vendor_id", c.vendor_id},
              {"device_id", c.device_id},
              {"api_version", strf("%u.%u.%u", VK_API_VERSION_MAJOR(c.api_version), VK_API_VERSION_MINOR(c.api_version),
                                   VK_API_VERSION_PATCH(c.api_version))},
              {"driver_version", c.driver_version},
              {"driver_name", c.driver_name},
              {"driver_info", c.driver_info},
              {"storage_16bit", c.storage_16bit},
              {"fp16_arithmetic", c.fp16_arithmetic},
              {"fp16_in_use", dev.fp16()},
              {"subgroup_size", c.subgroup_size},
              {"subgroup_arithmetic_in_use", dev.subgroup_arithmetic()},
              {"max_shared_memory", c.max_shared_memory},
              {"max_workgroup_invocations", c.max_workgroup_invocations},
              {"max_storage_buffer_range", c.max_storage_buffer_range},
              {"max_memory_allocation_size", c.max_memory_allocation_size},
              {"compute_units", c.compute_units},
              {"timestamps", c.timestamps},
              {"timestamp_period_ns", c.timestamp_period_ns},
              {"heaps", heaps}};
}

static json impl_json(const CaseResult& r, int i, const Ceilings& c) {
  const ImplResult& im = r.impl[i];
  json j{{"ran", im.ran}, {"output_checked", im.ran && im.checked}};
  if (!im.ran) {
    j["skipped"] = im.skipped;
    return j;
  }
  j["dispatches"] = im.dispatches;
  j["check_vs_cpu"] = check_json(im.vs_cpu);
  if (im.unwritten) j["outputs_never_written"] = im.unwritten;
  if (i > 0 && i < 3) j["check_vs_fused"] = check_json(im.vs_fused);
  if (!timed(r, i)) {
    j["skipped"] = "output check failed; not timed";
    return j;
  }
  j["time"] = stats_json(im.us);
  j["GBps"] = gbps(r, i);
  j["GFLOPs"] = gflops(r, i);
  add_peak_fields(j, peak_fraction(c, gflops(r, i), gbps(r, i)));
  j["bytes_touched_model"] = im.bytes_touched;
  j["GBps_touched_model"] = double(im.bytes_touched) / (im.us.median * 1e3);
  json ops = json::array();
  for (const auto& [label, us] : im.op_median_us) ops.push_back(json{{"label", label}, {"median_us", us}});
  j["ops"] = ops;
  if (i > 0) j["fused_speedup"] = speedup(r, i);
  return j;
}

bool report_checks(const Sink& sink, const std::vector<CaseResult>& results, const std::vector<TargetEval>& targets,
                   const Plan& plan) {
  bool all_ok = !results.empty();
  size_t checked_cases = 0;
  for (const auto& r : results) {
    if (!r.skipped.empty()) continue;
    if (r.outputs_ok())
      ++checked_cases;
    else
      all_ok = false;
  }
  if (checked_cases == 0) all_ok = false;
  sink.reportf(
      "\noutputs checked: %s (%zu case(s): fused vs a double-precision CPU loop on sampled rows; two-pass and "
      "naive vs fused on every output and vs the CPU rows; docs/maths.md tolerances, x2 between two GPU results)",
      all_ok ? "yes, all agree" : "NO - see the errors above", checked_cases);
  for (const auto& r : results) {
    if (!r.skipped.empty()) continue;
    std::string line = strf("  %-32s vs cpu max abs %.2e", r.spec.name().c_str(), r.impl[0].vs_cpu.max_abs);
    for (int i = 1; i < kImpls; ++i)
      if (r.impl[i].ran && i < 3)
        line += strf(" | %s vs fused max abs %.2e", kImplNames[i], r.impl[i].vs_fused.max_abs);
      else if (r.impl[i].ran)
        line += strf(" | %s vs cpu max abs %.2e", kImplNames[i], r.impl[i].vs_cpu.max_abs);
    sink.report(line);
  }
  if (!targets.empty()) sink.report("\ntargets (ratios from this one run):");
  for (const auto& t : targets) {
    if (t.unit.empty()) {
      sink.reportf("  %-62s %s", t.target.c_str(), t.note.c_str());
      continue;
    }
    const char* verdict = !t.measurable ? "n/a" : t.value >= t.threshold ? "met" : "MISSED";
    const std::string value = t.value > 0 ? strf("%7.2f%s", t.value, t.unit.c_str()) : std::string("      -");
    sink.reportf("  %-62s %-32s %s  %s%s%s", t.target.c_str(), t.spec.name().c_str(), value.c_str(), verdict,
                 t.note.empty() ? "" : " - ", t.note.c_str());
  }
  for (const auto& n : plan.notes)
    if (n.find("time budget (estimated") != std::string::npos) sink.reportf("note: %s", n.c_str());
  return all_ok;
}

json attention_document(const RunInfo& info, const DeviceCaps& caps, const Device& dev, const Plan& plan,
                        const Options& o, const Ceilings& ceil, const std::vector<CaseResult>& results,
                        const std::vector<TargetEval>& targets, bool all_ok, double total_s) {
  json j;
  j["tool"] = "diffvk bench";
  j["command_line"] = info.command_line;
  j["preset"] = plan.preset;
  j["device"] = caps_json(caps, dev);
  j["precision"] = info.precision;
  j["fp32_fallback"] = info.fp32_fallback;
  j["timing"] = info.timestamps ? "gpu_timestamps" : "host_wall_clock";
  j["config"] = json{{"preset", plan.preset},
                     {"runs", plan.runs},
                     {"warmup", plan.warmup},
                     {"phase", o.phase},
                     {"quick", o.quick},
                     {"reduced_grid_for_cpu_device", plan.reduced},
                     {"budgeted", plan.budgeted},
                     {"budget_s", plan.budget_s},
                     {"D", plan.Ds},
                     {"T_decode", plan.Ts_decode},
                     {"T_prefill", plan.Ts_prefill},
                     {"T_cap", plan.t_cap ? json(plan.t_cap) : json(nullptr)},
                     {"H", plan.Hs},
                     {"Hkv", plan.Hkvs},
                     {"copy_bytes", plan.copy_bytes},
                     {"copy_bytes_rule", plan.copy_rule},
                     {"cooldown_s", plan.cooldown_s},
                     {"thermal_recorded", plan.thermal},
                     {"naive_memory_budget_bytes", info.naive_budget}};
  j["notes"] = plan.notes;
  j["ceilings"] = ceilings_json(ceil);
  json cases = json::array();
  for (const auto& r : results) {
    json c{{"phase", r.spec.decode ? "decode" : "prefill"},
           {"variant", r.spec.v2 ? "v2" : "v1"},
           {"D", r.spec.D},
           {"T", r.spec.T},
           {"S", r.S},
           {"pos0", r.pos0},
           {"H", r.spec.H},
           {"Hkv", r.spec.Hkv}};
    if (plan.thermal || plan.cooldown_s > 0) c["cooldown_s"] = r.cooldown_s;
    if (!r.thermal.is_null()) c["thermal"] = r.thermal;
    if (!r.skipped.empty()) {
      c["skipped"] = r.skipped;
      cases.push_back(c);
      continue;
    }
    c["bytes_must_move"] = r.bytes;
    c["bytes_model"] =
        r.spec.v2 ? "Q (+ the lambda logits) + K + V + output, storage type" : "Q + K1 + K2 + V + output, storage type";
    c["flops"] = r.flops;
    c["flops_model"] = r.spec.v2
                           ? "8*D per visible (query, key) pair and output head: two query heads, each a QK dot (2*D) "
                             "and a PV product (2*D)"
                           : "12*D per visible (query, key) pair and head: two QK dots (2*2D) + two PV products (2*4D)";
    if (r.spec.decode) c["fused_splits"] = json{{"splits", r.splits}, {"split_len", r.split_len}};
    c["cpu_reference_rows"] = r.cpu_rows;
    c["outputs_checked"] = r.outputs_ok();
    if (!r.failures.empty()) c["check_failures"] = r.failures;
    json impls;
    for (int i = 0; i < kImpls; ++i)
      if (impl_applies(r.spec, i)) impls[kImplNames[i]] = impl_json(r, i, ceil);
    c["implementations"] = impls;
    c["fused_speedup_vs_two_pass"] = timed(r, 1) && timed(r, 0) ? json(speedup(r, 1)) : json(nullptr);
    c["fused_speedup_vs_naive"] = timed(r, 2) && timed(r, 0) ? json(speedup(r, 2)) : json(nullptr);
    if (r.spec.v2) {
      c["plain_H_over_fused"] = timed(r, 3) && timed(r, 0) ? json(speedup(r, 3)) : json(nullptr);
      c["plain_2H_over_fused"] = timed(r, 4) && timed(r, 0) ? json(speedup(r, 4)) : json(nullptr);
    }
    c["wall_s"] = r.wall_s;
    cases.push_back(c);
  }
  j["cases"] = cases;
  j["outputs_checked"] = all_ok;
  json tj = json::array();
  for (const auto& t : targets)
    tj.push_back(json{{"target", t.target},
                      {"case", t.unit.empty() ? json(nullptr) : json(t.spec.name())},
                      {"value", t.value > 0 ? json(t.value) : json(nullptr)},
                      {"threshold", t.threshold},
                      {"unit", t.unit},
                      {"measurable", t.measurable},
                      {"met", t.measurable ? json(t.value >= t.threshold) : json(nullptr)},
                      {"note", t.note}});
  j["targets"] = tj;
  j["total_s"] = total_s;
  return j;
}

}  // namespace diffvk::bench
