// diffvk_bench: one case class per op, like llama.cpp's test-backend-ops. Each op with a table has one file,
// bench/cases/<op>.cpp, holding its parameter struct, its case class (the name, the seeded inputs
// rounded to the storage type, the float64 reference, the recorded program, the outputs and what they must
// hold, bytes and flops) and its ONE list of cases (odd shapes, both precisions, each device quirk the op has:
// forced elementwise loads, capped workgroup counts, the shared-memory reduction instead of the subgroup one,
// a forced tile variant, float32 residual-stream arguments, split tables). op_registry.cpp names the ops, one
// line each. The same table drives the conformance tests (tests/ops/, OpMode::conformance: every case, small
// shapes) and the benchmark's `ops` rows (`diffvk bench --ops`, OpMode::bench: a few larger shapes, same code).
//
// OpRunner::run() (op_run.cpp, generic) has the case prepare its inputs and reference, poisons every output
// with NaN, runs the recorded program, checks every output element against the float64 reference
// (runtime/reference/) with the docs/maths.md one-kernel tolerances (bench::compare), replays it and
// requires identical bits, and checks that bytes outside the outputs (stride padding) are untouched. Only
// when given an OpTiming, and only after the check passed, it times the program.
#pragma once
#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "bench/ceilings.hpp"
#include "bench/check.hpp"
#include "bench/timing.hpp"
#include "diffvk/model.hpp"

namespace diffvk::bench {

enum class OpMode { conformance, bench };

namespace op_detail {
struct Prepared;
class KernelCache;
}  // namespace op_detail

// One case of one op's table. The op's case class (cases/<op>.cpp) adds its parameter struct and the calls
// below; the runner and the benchmark rows see only this interface.
class OpCase {
 public:
  std::string name;   // unique within the op's table: the precision, then every parameter that is not a default
  bool fp16 = false;  // the storage precision the case needs (the device's precision must match)
  uint64_t seed = 1;  // of the case's random inputs

  virtual ~OpCase() = default;
  virtual const char* op() const = 0;
  virtual std::unique_ptr<OpCase> clone() const = 0;
  // The name the parameters give (the tables set `name` from it).
  virtual std::string describe() const = 0;
  // false: the shared-memory reduction even where the device has subgroup arithmetic.
  virtual bool subgroup() const { return true; }
  // A forced lane-group count (cases that repeat shader variants other passes run; DIFFVK_TEST_FORCED_LANES=0).
  virtual bool forced_lanes() const { return false; }
  // Non-empty: the case cannot run on this device (why). The precision is the runner's check.
  virtual std::string skip_reason(const Device& /*dev*/) const { return {}; }
  // Seeded inputs rounded to the storage type, the float64 reference (p.expect), the arena, the recorded
  // program, how to reset and read the outputs, bytes and flops. `subgroup`: the kernel's reduction (the
  // case's choice where the device has subgroup arithmetic); kernels come from (and stay in) `kernels`.
  virtual void prepare(Device& dev, op_detail::KernelCache& kernels, bool subgroup, op_detail::Prepared& p) const = 0;
  // The benchmark row's shape fields ("rows", "in", "out": each op's own meaning of them), and fields the
  // op adds after "detail" (linear: M, K, N, weights, path).
  struct RowShape {
    uint32_t rows = 0, in = 0, out = 0;
  };
  virtual RowShape row_shape() const = 0;
  virtual void add_row_fields(json& /*row*/, const std::string& /*detail*/) const {}
};

using OpCases = std::vector<std::unique_ptr<OpCase>>;

// A case of a known op, for tests that filter or build cases by their parameters (std::bad_cast otherwise).
template <class C>
const C& case_as(const OpCase& c) {
  return dynamic_cast<const C&>(c);
}

// The ops that have a table, in report order (op_registry.cpp).
const std::vector<std::string>& table_ops();
// The op's table: both precisions (callers run the cases whose fp16 matches their device). Throws
// invalid_argument for an op without a table.
OpCases op_cases(const std::string& op, OpMode mode);
// The shape of the model a self-test at load is for (diffvk/model.hpp model_pipeline_shape, from the config.json text
// of ContextOptions::selftest_model): the sizes that are specialization constants of the pipelines it records, so that
// the self-test runs those very pipelines and not only the tables' shapes.
using ModelShape = ModelPipelineShape;
// The cases of `op` at the model's shape, in both precisions (empty for an op whose pipelines do not depend on it):
// the self-test runs them before the table's, as the first case of their path. (op_registry.cpp)
OpCases model_shape_cases(const std::string& op, const ModelShape& shape);
// The shape of a config.json text of any model kind (empty text: no model). Throws invalid_argument naming
// ContextOptions::selftest_model and the key the config parser refused. (selftest.cpp)
ModelShape selftest_model_shape(const std::string& config_json);

// The matmul table (Options::matmul_table), linear cases in both precisions: full = M {1, 8, 64, 512} x
// (K, N) {(768, 768), (768, 2304), (2048, 768), (2048, 2048), (4096, 4096)} x weights {f16, q8_0, q4_0};
// otherwise the one row the default run times (f16 weights, M = 512, K = N = 2048).
// coopmat: also the cooperative-matrix kernel (variant kLinearCoopVariant, fp16) at the f16 shapes with M >= 64
// (the default run: at M = 512, K = N = 2048), path "coopmat" in the JSON. (cases/linear.cpp)
OpCases matmul_table_cases(bool full, bool coopmat = false);

struct OpTiming {
  int warmup = 1, runs = 3;
  bool timestamps = false;
};

struct OpCaseRun {
  std::string skipped;            // non-empty: not run on this device (why)
  Check check;                    // every output element against the float64 reference
  bool replay_identical = false;  // the second run gave the same bits
  size_t padding_changed = 0;     // elements outside the outputs (stride padding, cache rows not appended) that changed
  std::string detail;             // the path the op took (tiles, workgroup size)
  bool ok() const { return skipped.empty() && check.ok && replay_identical && padding_changed == 0; }
  std::string summary() const;
  // ---- first use (the compile-time check of the self-test's table, `diffvk selftest --json`): the pipelines this
  // run dispatched that no earlier run of its OpRunner had ("name [spec,...]"), and their compile: the driver's
  // vkCreateComputePipelines time (Pipeline::compile_seconds) plus the first run's wall time less the replay's, which
  // is the compile that CPU drivers (lavapipe, SwiftShader) do at a pipeline's first dispatch. 0 when none is new.
  std::vector<std::string> first_used;
  double first_use_seconds = 0;
  // ---- bench mode (OpTiming given and the check passed)
  bool timed = false;
  Stats us;
  uint64_t bytes = 0;  // bytes the op must move (inputs read once, outputs written once; + residual)
  double flops = 0;    // useful flops
  double gbps() const { return timed && us.median > 0 ? double(bytes) / (us.median * 1e3) : 0; }
  double gflops() const { return timed && us.median > 0 ? flops / (us.median * 1e3) : 0; }
};

// Runs cases on one device; keeps the kernels the cases build (one per op, reduction and format) across cases.
class OpRunner {
 public:
  explicit OpRunner(Device& device);
  ~OpRunner();
  OpRunner(const OpRunner&) = delete;
  OpRunner& operator=(const OpRunner&) = delete;
  // A case whose precision differs from the device's comes back skipped.
  OpCaseRun run(const OpCase& c, const OpTiming* timing = nullptr);
  // The pipelines a run of the case would compile, declared (the case prepared and recorded, then dropped; its
  // kernels stay in the runner) and not compiled: the self-test compiles several cases' together on the device's
  // pipeline threads before running them. Empty for a case run() would skip.
  std::vector<const LazyPipeline*> pending_pipelines(const OpCase& c);
  // Test hook (tests/ops/test_tolerances.cpp, the self-test's ContextOptions::selftest_fault): a planted fault the
  // run must catch. The value faults overwrite the downloaded output bytes of both runs (the check and the replay
  // read the same fault, so the check alone must catch it), never the reference, in an element slot found by
  // probing the case's extract (op_plant.cpp): wrong_value: one element off by 8x the case's bound; nan: one element
  // a NaN in its encoding; fp16_overflow: one fp16 element +inf (an error where the case has no fp16 output);
  // stale: up to four elements spread over the output keep the NaN poison, as a consumer that read before the
  // producer's write landed (a missing barrier's race, which CPU drivers, running commands in order, never show).
  // pipeline_failure: vkCreateComputePipelines returns VK_ERROR_UNKNOWN while the case builds its kernels (fresh
  // ones, not the runner's kept ones), before any dispatch. no_dispatch: the program records nothing, so the
  // outputs keep their NaN poison.
  enum class Plant { none, wrong_value, nan, fp16_overflow, stale, pipeline_failure, no_dispatch };
  // A fault that cannot be planted in the case (no fp16 output element for an fp16 overflow, no pipeline left to
  // build): the hook's own error (invalid_argument), never a result of the case.
  class PlantError : public Error {
   public:
    explicit PlantError(const std::string& message) : Error(Status::invalid_argument, message) {}
  };
  void plant_for_testing(Plant p) { plant_ = p; }

 private:
  Device& dev_;
  std::unique_ptr<op_detail::KernelCache> kernels_;
  std::set<std::string> dispatched_;  // every pipeline a run has dispatched, by description (OpCaseRun::first_used)
  Plant plant_ = Plant::none;
  [[noreturn]] void fail_pipelines(const OpCase& c, bool subgroup, op_detail::Prepared& p);
};

}  // namespace diffvk::bench
