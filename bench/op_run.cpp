// diffvk_bench: OpRunner (op_cases.hpp), the one generic run of every op's cases: the case prepares its inputs,
// float64 reference and program (cases/<op>.cpp); the run poisons the outputs, runs, checks every output
// element, replays and requires identical bits, checks the padding, and (bench mode, after the check) times.
#include <algorithm>
#include <cstring>

#include "bench/op_run_impl.hpp"
#include "vk/vk_check.hpp"

namespace diffvk::bench {

using namespace op_detail;

OpRunner::OpRunner(Device& device) : dev_(device), kernels_(std::make_unique<KernelCache>()) {}
OpRunner::~OpRunner() = default;

OpCaseRun OpRunner::run(const OpCase& c, const OpTiming* timing) {
  OpCaseRun out;
  if (c.fp16 != dev_.fp16()) {
    out.skipped =
        strf("the case needs %s storage, the device runs %s", c.fp16 ? "fp16" : "fp32", dev_.fp16() ? "fp16" : "fp32");
    return out;
  }
  out.skipped = c.skip_reason(dev_);
  if (!out.skipped.empty()) return out;
  const bool sg = c.subgroup() && dev_.subgroup_arithmetic(c.op());  // less the self-test's per-op fallback
  Prepared p(dev_);
  p.timestamps = timing && timing->timestamps;
  if (plant_ == Plant::pipeline_failure) fail_pipelines(c, sg, p);
  c.prepare(dev_, *kernels_, sg, p);
  p.detail = strf("%s%s", sg ? "subgroup " : "shared ", p.detail.c_str());
  out.detail = p.detail;
  out.bytes = p.bytes;
  out.flops = p.flops;

  if (plant_ == Plant::no_dispatch) p.prog = std::make_unique<Program>(dev_, "op case (planted: nothing recorded)");
  const bool output_fault =
      plant_ == Plant::wrong_value || plant_ == Plant::nan || plant_ == Plant::fp16_overflow || plant_ == Plant::stale;
  std::vector<PlantedBytes> planted;
  std::vector<uint8_t> first(p.out_bytes), again(p.out_bytes);
  p.reset();
  auto t0 = Clock::now();
  p.prog->run();
  const double first_run_s = seconds_since(t0);
  p.arena.buf->download(p.out_off, first.data(), first.size());
  if (output_fault) {  // in the GPU's output as downloaded (op_plant.cpp)
    planted = plan_output_fault(plant_, p, first, dev_.fp16(), c.name);
    apply_plants(planted, first);
  }
  const std::vector<float> got = p.extract(first, out.padding_changed);
  out.check = compare("float64 reference", got, p.expect, dev_.fp16(), p.tolerance);
  p.reset();
  t0 = Clock::now();
  p.prog->run();  // a replayed program must give identical bits
  const double replay_s = seconds_since(t0);
  p.arena.buf->download(p.out_off, again.data(), again.size());
  for (const Pipeline* pl : p.prog->pipelines()) {
    std::string spec;
    for (uint32_t v : pl->desc().spec) spec += (spec.empty() ? "" : ",") + std::to_string(v);
    const std::string label = pl->name() + " [" + spec + "]";
    // Pipelines of one description share their driver objects (Device::shared_), and the compile with them.
    const std::string key =
        strf("%s|%u|%u|%u", label.c_str(), pl->desc().bindings, pl->desc().push_bytes, pl->desc().subgroup_size);
    if (!dispatched_.insert(key).second) continue;
    out.first_used.push_back(label);
    out.first_use_seconds += pl->compile_seconds();
  }
  if (!out.first_used.empty()) out.first_use_seconds += std::max(0.0, first_run_s - replay_s);
  apply_plants(planted, again);  // the same fault in the replay: the check alone must catch it
  out.replay_identical = again == first;

  if (timing && out.ok()) {  // verify before timing
    for (int i = 0; i < timing->warmup; ++i) p.prog->run();
    std::vector<double> us;
    for (int i = 0; i < timing->runs; ++i) us.push_back(run_timed(*p.prog, timing->timestamps));
    out.us = stats_of(us);
    out.timed = true;
  }
  return out;
}

std::vector<const LazyPipeline*> OpRunner::pending_pipelines(const OpCase& c) {
  if (c.fp16 != dev_.fp16() || !c.skip_reason(dev_).empty()) return {};
  const bool sg = c.subgroup() && dev_.subgroup_arithmetic(c.op());  // as run() asks for them
  Prepared p(dev_);
  c.prepare(dev_, *kernels_, sg, p);
  return p.prog->pending_pipelines();  // owned by the kernels in kernels_, which outlive p
}

namespace {
// Plant::pipeline_failure: vkCreateComputePipelines answers VK_ERROR_UNKNOWN (the process-wide fault hook of
// vk/vk_check.hpp, chained to any hook a test installed) while it is alive.
class PipelineCreationFails {
 public:
  PipelineCreationFails() : previous_(vk_fault_hook()) {
    set_vk_fault_hook([prev = previous_](const char* call) {
      static const char kCall[] = "vkCreateComputePipelines";
      if (std::strncmp(call, kCall, sizeof kCall - 1) == 0) return VK_ERROR_UNKNOWN;
      return prev ? prev(call) : VK_SUCCESS;
    });
  }
  ~PipelineCreationFails() { set_vk_fault_hook(previous_); }
  PipelineCreationFails(const PipelineCreationFails&) = delete;
  PipelineCreationFails& operator=(const PipelineCreationFails&) = delete;

 private:
  VkFaultHook previous_;
};
}  // namespace

void OpRunner::fail_pipelines(const OpCase& c, bool subgroup, Prepared& p) {
  // Kernels of its own, not the runner's kept ones, so that the case builds its pipelines here; finalize() builds
  // them before anything is recorded or dispatched.
  KernelCache fresh;
  PipelineCreationFails fails;
  c.prepare(dev_, fresh, subgroup, p);
  p.prog->finalize();
  throw PlantError("test hook pipeline_failure: case '" + c.name +
                   "' built no pipeline (each was shared with one already on the device)");
}

std::string OpCaseRun::summary() const {
  if (!skipped.empty()) return "skipped: " + skipped;
  return strf("%s max_abs=%g max|ref|=%g nmse=%g nonfinite=%zu replay %s, padding changed %zu%s%s",
              check.ok ? "ok" : "FAILED", check.max_abs, check.max_ref, check.nmse, check.nonfinite,
              replay_identical ? "identical" : "DIFFERS", padding_changed, detail.empty() ? "" : ", ", detail.c_str());
}

}  // namespace diffvk::bench
