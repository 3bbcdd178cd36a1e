// diffvk_bench: the report — text (header, ceilings, table, checks, targets) through Sink::report, and
// the JSON document (the same fields `diffvk bench --json` has always written).
#pragma once
#include <string>
#include <vector>

#include "bench/cases.hpp"
#include "bench/presets.hpp"

namespace diffvk::bench {

struct TargetEval {
  std::string target;
  CaseSpec spec;
  double value = 0, threshold = 0;
  std::string unit;
  bool measurable = true;
  std::string note;
};

// The issue-4 targets, evaluated on this run's cases.
std::vector<TargetEval> evaluate_targets(const std::vector<CaseResult>& results, const Ceilings& c, bool cpu_device);

// {median,min,max,samples}_<unit>: the unit in each name is the unit of the values ("us" or "s").
json stats_json(const Stats& s, const std::string& unit = "us");
json caps_json(const DeviceCaps& c, const Device& dev);

// The "ceilings:" lines (copy, fp32 FMA, fp16 FMA or why not) and what %fma and %copy mean.
void report_ceilings(const Sink& sink, const Ceilings& c, const Plan& plan);
void report_table(const Sink& sink, const std::vector<CaseResult>& results, const Ceilings& c);
// "outputs checked: ...", the per-case errors, the targets and the budget notes. Returns whether every
// case that ran was checked (and at least one did).
bool report_checks(const Sink& sink, const std::vector<CaseResult>& results, const std::vector<TargetEval>& targets,
                   const Plan& plan);

struct RunInfo {
  std::string command_line, precision;
  bool fp32_fallback = false, timestamps = false;
  uint64_t naive_budget = 0;
};
// The whole document of an attention-case run.
json attention_document(const RunInfo& info, const DeviceCaps& caps, const Device& dev, const Plan& plan,
                        const Options& o, const Ceilings& ceil, const std::vector<CaseResult>& results,
                        const std::vector<TargetEval>& targets, bool all_ok, double total_s);

}  // namespace diffvk::bench
