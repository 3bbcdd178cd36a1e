// diffvk_bench: the self-test at load's runner (include/diffvk/selftest.hpp, docs/decisions/024-selftest-at-load.md):
// the conformance cases of the op tables (op_cases.hpp: seeded inputs, the float64 reference, NaN-poisoned
// outputs, the docs/maths.md tolerances) on the context's device, precision and tuning, grouped into one row per
// (op, variant). The core's Context::create drives it (runtime/vk/selftest.cpp: the fallback chain, the verdict).
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <map>
#include <set>
#include <sstream>

#include <sys/stat.h>

#include "bench/op_run_impl.hpp"
#include "bench/presets.hpp"
#include "bench/shapes.hpp"
#include "ops/linear.hpp"
#include "diffvk/bench.hpp"
#include "diffvk/gguf.hpp"

namespace diffvk::bench {

namespace {

bool has(const std::string& s, const char* what) { return s.find(what) != std::string::npos; }

// The tuning keys whose features a case uses, in the fallback chain's order, and its variant's name. `detail`:
// the path the run took ("" before the run).
struct Features {
  std::string variant;
  std::vector<std::string> uses;
};
Features features_of(const OpCase& c, const Device& dev, const std::string& detail) {
  Features f;
  const bool sg = c.subgroup() && dev.subgroup_arithmetic(c.op());
  const std::string op = c.op();
  f.variant = std::string(c.fp16 ? "fp16" : "fp32") + (sg ? " subgroup" : " shared");
  const bool attention = op == "diff_attn" || op == "diff_v2_attn";
  if (has(c.name, " coopmat") || has(detail, "coopmat") || (attention && dev.tuning().attn_core == "coopmat")) {
    f.uses.push_back("coopmat");
    f.variant += " coopmat";
  }
  if (has(c.name, " int8-dot") || has(detail, "int8_dot")) {
    f.uses.push_back("int_dot");
    f.variant += " int8-dot";
  }
  if (attention) {
    f.uses.push_back("attn_core");
    f.variant += " attn=" + dev.tuning().attn_core;
  }
  if (sg) f.uses.push_back("subgroup");
  if (c.fp16) f.uses.push_back("fp16");
  return f;
}

// ContextOptions::selftest_fail_variant: "OP" or "OP:KEY"; an fp16 overflow only where the case stores fp16.
bool planted(const SelftestRequest& request, const OpCase& c, const Features& f) {
  const std::string& hook = request.fail_variant;
  if (hook.empty() || (request.fault == SelftestFault::fp16_overflow && !c.fp16)) return false;
  const size_t colon = hook.find(':');
  if (hook.substr(0, colon) != c.op()) return false;
  if (colon == std::string::npos) return true;
  const std::string key = hook.substr(colon + 1);
  for (const std::string& u : f.uses)
    if (u == key) return true;
  return false;
}

// The check's bound for a case (bench::compare).
double bound_of(const Check& k, bool fp16) { return tolerance_bound(fp16, k.max_ref, k.tolerance_factor); }

const std::vector<std::string>& all_ops() { return table_ops(); }

OpRunner::Plant plant_of(SelftestFault fault) {
  switch (fault) {
    case SelftestFault::wrong_value:
      return OpRunner::Plant::wrong_value;
    case SelftestFault::nan:
      return OpRunner::Plant::nan;
    case SelftestFault::fp16_overflow:
      return OpRunner::Plant::fp16_overflow;
    case SelftestFault::stale:
      return OpRunner::Plant::stale;
    case SelftestFault::pipeline_failure:
      return OpRunner::Plant::pipeline_failure;
  }
  throw Error(Status::invalid_argument,
              "ContextOptions::selftest_fault " + std::to_string(int(fault)) + " is not a fault class");
}

// The path a case exercises, from its name: the precision, the pass (prefill / decode), the weight and cache formats,
// int8 dot products, cooperative matrices, a forced tile variant, the shared-memory reduction, DIFF V2's layout, and
// the forms that are specialization constants of the pipeline a model records (linear_row's prologue, float32 x and y:
// the residual stream and the logits; head_rmsnorm's and layer_norm's float32 x), so that the pipelines a model
// records are the self-test's own and the model adopts them compiled (Device::park_pipelines); not its sizes nor the
// forms that are push constants or plain sizes (strides, residuals, bias, capped grids, scalar loads, splits,
// windows). The self-test runs the first case of each path in table order (kCasesPerPath; the tables start with small
// odd shapes, then each forced variant and quirk): every path at one of its odd sizes, not the long reductions, large
// grids and cross products the conformance tests add. On lavapipe most of the time is the pipelines' compile, one per
// kernel variant and specialization the cases reach.
// The attention's decode of one row and of several rows are two pipelines (their tiles differ), so two paths; the
// element-wise loads (" scalar-loads") are a path where the model records them (ModelShape::unaligned_width).
constexpr int kCasesPerPath = 1;
std::string path_of(const OpCase& c) {
  static const std::set<std::string> kept{
      "fp16",    "fp32",    "prefill",  "decode",       "q8_0", "q4_0", "int8-dot", "coopmat", "v2", "shared-reduction",
      "kv=q8_0", "rmsnorm", "silu_mul", "scalar-loads", "x32",  "y32"};
  std::string sig = c.op(), tok;
  std::istringstream in(c.name);
  bool decode = false;
  while (in >> tok) {
    if (kept.count(tok) || tok.rfind("variant=", 0) == 0) sig += " " + tok;
    decode = decode || tok == "decode";
    if (decode && tok.rfind("S=", 0) == 0) sig += tok == "S=1" ? " one-row" : " rows";
  }
  return sig;
}

// Whether this device's models record the path a case forces. Not: an int8 case where the device does not
// accelerate 4x8-bit dot products (the quantized linears take the int8 paths only there, unless LoadOptions::
// quant_decode / quant_prefill force them), nor a linear tile variant that the tile choice never picks on this device
// (linear_reachable_variants: a CPU driver records the register tile only, and the cooperative-matrix kernel only
// where linear_uses_coopmat). On lavapipe these were 10 of the 37 s a
// cold self-test of the linears took, compiling pipelines no model there runs. Nor the element-wise loads forced on
// an aligned shape (" scalar-loads", a test hook): a model's linears take them only where an input width is not a
// multiple of the vector (8 halves; the memory plan's offsets are aligned). The bundled, DiffLlama and published
// Phi-4-mini-flash widths are; a model with such a width (the random SambaY fixture's dt_proj, 2 wide) records the
// element-wise forms, which the self-test then runs when it knows the model (ModelShape::unaligned_width). On lavapipe
// that form, which the first case of "linear fp16 y32 variant=3" forced, was 2-4 s of LLVM compiling a pipeline the
// bundled model never records.
// With a model (ModelShape), nor a one-row form its kind never records: the prologue and the float32 input and output
// are specialization constants, and each model kind fuses its own (tests/bench/test_selftest.cpp "a model records no
// pipeline that its self-test did not run" holds the list to what the sessions record):
//   DIFF V1/V2: linear_row (none, y32) o_proj and the head, (rmsnorm, x32) and (rmsnorm, x32, y32) the MLP's gate/up
//   and the last norm with the head, (silu_mul, y32) down_proj; linear_row_rope (rmsnorm, x32) q/k/v;
//   phi4flash: linear_row (none) and (none, y32), (silu_mul, y32); no RMSNorm prologue, no RoPE.
// With the prologues split (the tuning's row_prologue: CPU drivers), every one-row linear reads storage-type rows
// with no prologue: linear_row (none) and (none, y32), and DIFF's linear_row_rope (none).
// head_rmsnorm (the block norms where split, the last norm) and layer_norm: their float32 input only.
bool form_recorded(const OpCase& c, const ModelShape& model, bool split) {
  const std::string op = c.op();
  // head_rmsnorm, layer_norm: a model's norms read the float32 residual stream (x32); the storage-type input is the
  // tables' only.
  if (!model.kind.empty() && (op == "head_rmsnorm" || op == "layer_norm")) return has(c.name, " x32");
  if (model.kind.empty() || (op != "linear_row" && op != "linear_row_rope")) return true;
  const bool rms = has(c.name, " rmsnorm"), silu = has(c.name, " silu_mul"), x32 = has(c.name, " x32"),
             y32 = has(c.name, " y32"), phi = model.kind == "phi4flash";
  if (split) {
    if (rms || silu || x32) return false;
    return op == "linear_row" || (!phi && has(c.name, " v2") == (model.kind == "v2"));
  }
  if (op == "linear_row_rope") return !phi && rms && x32 && has(c.name, " v2") == (model.kind == "v2");
  if (rms) return !phi && x32;
  if (silu) return !x32 && y32;
  return !x32 && (phi || y32);
}

bool recorded_here(const OpCase& c, const Device& dev, const ModelShape& model) {
  if (has(c.name, " int8-dot") && !dev.caps().int8_dot_accelerated) return false;
  // Attention maps: DIFF V2's form (the lambda rows) is a specialization constant that only V2 models record.
  if (!model.kind.empty() && std::string(c.op()) == "attn_probs" && has(c.name, " v2") != (model.kind == "v2"))
    return false;
  if (has(c.name, " scalar-loads") && !model.unaligned_width) return false;
  if (!form_recorded(c, model, dev.tuning().row_prologue_split)) return false;
  // A forced tile: " variant=N", or the cooperative-matrix kernel (" coopmat": where the quirk coopmat_emulated keeps
  // the models' matmul on its scalar path, Mesa 26.1 lavapipe, its two pipelines were 2.5-3 s of a cold self-test).
  const size_t at = c.name.find(" variant=");
  const bool coop = has(c.name, " coopmat");
  if (std::string(c.op()) != "linear" || (at == std::string::npos && !coop)) return true;
  const uint32_t v = coop ? kLinearCoopVariant : uint32_t(std::strtoul(c.name.c_str() + at + 9, nullptr, 10));
  const std::vector<uint32_t> reach = linear_reachable_variants(dev.caps(), dev.fp16());
  return std::find(reach.begin(), reach.end(), v) != reach.end();
}

// Whether the case's weight and KV cache formats are ones the request tests (SelftestRequest::weights; empty: all).
// The float cases always run; a quantized case names its format as a word of its name (" q8_0", " q4_0",
// " kv=q8_0").
bool format_requested(const OpCase& c, const SelftestRequest& request) {
  if (request.weights.empty()) return true;
  std::istringstream in(c.name);
  std::string tok;
  while (in >> tok)
    if ((tok == "q8_0" || tok == "q4_0" || tok == "kv=q8_0") &&
        std::find(request.weights.begin(), request.weights.end(), tok) == request.weights.end())
      return false;
  return true;
}

}  // namespace

ModelShape selftest_model_shape(const std::string& config_json) {
  if (config_json.empty()) return {};
  try {
    return model_pipeline_shape(config_json);
  } catch (const Error& e) {
    throw Error(Status::invalid_argument, std::string("ContextOptions::selftest_model: ") + e.what());
  }
}

std::vector<SelftestRow> run_selftest_cases(Device& dev, const SelftestRequest& request) {
  const std::vector<std::string>& ops = request.ops.empty() ? all_ops() : request.ops;
  if (!request.fail_variant.empty()) {
    const std::string op = request.fail_variant.substr(0, request.fail_variant.find(':'));
    bool known = false;
    for (const std::string& o : table_ops()) known = known || o == op;
    if (!known)
      throw Error(Status::invalid_argument, "ContextOptions::selftest_fail_variant '" + request.fail_variant +
                                                "': no op '" + op + "' has a table");
  }
  const OpRunner::Plant plant = plant_of(request.fault);
  const ModelShape model = selftest_model_shape(request.model);
  std::vector<SelftestRow> rows;
  OpRunner runner(dev);
  // The cases to run, per op: the first of each path the device and the model record (`chosen` points into `tables`,
  // which owns the cases).
  std::vector<OpCases> tables;
  std::vector<std::vector<const OpCase*>> chosen;
  for (const std::string& op : ops) {
    if (std::find(request.deferred.begin(), request.deferred.end(), op) != request.deferred.end()) {
      tables.emplace_back();
      chosen.emplace_back();
      continue;  // left to its first record (SelftestReport::deferred)
    }
    std::map<std::string, int> taken;  // path -> cases run
    // An op whose pipelines take the model's sizes runs its cases at those sizes (model_shape_cases) instead of its
    // table's, whose other sizes the model never records.
    OpCases cases = model_shape_cases(op, model);
    if (cases.empty()) cases = op_cases(op, OpMode::conformance);
    std::vector<const OpCase*> pick;
    for (const auto& cp : cases) {
      const OpCase& c = *cp;
      if (c.fp16 != dev.fp16() || !c.skip_reason(dev).empty()) continue;  // not a path this device runs
      // A shared-memory reduction forced where the op's kernel has subgroup arithmetic: not what this tuning records,
      // but the path of its fallback subgroup_off=OP, which the retest after that fallback runs.
      if (!c.subgroup() && dev.subgroup_arithmetic(op)) continue;
      if (!recorded_here(c, dev, model) || !format_requested(c, request)) continue;
      if (++taken[path_of(c)] > kCasesPerPath) continue;
      pick.push_back(&c);
    }
    tables.push_back(std::move(cases));
    chosen.push_back(std::move(pick));
  }
  // Every case's pipelines compiled together first, on the device's pipeline threads (Device::build_pipelines), as a
  // model's program compiles its own: case by case they would compile one case's few at a time, and on a driver that
  // compiles at pipeline creation (GPUs) the self-test's compiles are most of a cold load (18 s on an H200, 16.5 s of
  // it the linear cases). Not with a planted fault (the test hook builds its case's pipelines itself). A pipeline that
  // fails to build here is built again by its case, whose row then names the failure.
  if (request.fail_variant.empty() && dev.tuning().pipeline_threads > 1) {
    std::vector<const LazyPipeline*> pending;
    for (const auto& pick : chosen)
      for (const OpCase* c : pick) {
        try {
          for (const LazyPipeline* l : runner.pending_pipelines(*c)) pending.push_back(l);
        } catch (const Error& e) {  // the case's run reports it
          if (e.status() == Status::device_lost) throw;
        }
      }
    try {
      dev.build_pipelines(pending);
    } catch (const Error& e) {
      if (e.status() == Status::device_lost) throw;
    }
  }
  for (size_t oi = 0; oi < ops.size(); ++oi) {
    const std::string& op = ops[oi];
    std::map<std::string, size_t> index;  // variant -> row
    for (const OpCase* cp : chosen[oi]) {
      const OpCase& c = *cp;
      const auto t0 = std::chrono::steady_clock::now();
      const Features before = features_of(c, dev, "");
      runner.plant_for_testing(planted(request, c, before) ? plant : OpRunner::Plant::none);
      OpCaseRun run;
      std::string error;
      try {
        run = runner.run(c);
      } catch (const OpRunner::PlantError&) {  // the test hook's own error, not the device's
        throw;
      } catch (const Error& e) {
        if (e.status() == Status::device_lost) throw;
        error = e.what();
      }
      runner.plant_for_testing(OpRunner::Plant::none);
      if (error.empty() && !run.skipped.empty()) continue;
      const Features f = features_of(c, dev, run.detail);
      auto it = index.find(f.variant);
      if (it == index.end()) {
        SelftestRow r;
        r.op = op;
        r.variant = f.variant;
        r.uses = f.uses;
        it = index.emplace(f.variant, rows.size()).first;
        rows.push_back(r);
      }
      SelftestRow& r = rows[it->second];
      ++r.cases;
      r.seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (!run.first_used.empty()) r.first_uses.push_back({c.name, run.first_used, run.first_use_seconds});
      const bool ok = error.empty() && run.ok();
      if (error.empty() && std::isfinite(run.check.max_abs)) {  // (the verdict file keeps finite numbers only)
        r.max_error = std::max(r.max_error, run.check.max_abs);
        const double b = bound_of(run.check, c.fp16);
        if (b > 0 && std::isfinite(run.check.max_abs / b)) r.worst = std::max(r.worst, run.check.max_abs / b);
      }
      if (!ok) {
        ++r.failed;
        if (r.pass) r.failure = c.name + ": " + (error.empty() ? run.summary() : error);
        r.pass = false;
      }
    }
  }
  return rows;
}

void install_selftest() { set_selftest_runner(run_selftest_cases); }

std::vector<std::string> selftest_ops_for_config(const std::string& config_json) {
  const nlohmann::json j = nlohmann::json::parse(config_json, nullptr, false);
  const std::string type = j.is_object() && j.contains("model_type") && j["model_type"].is_string()
                               ? j["model_type"].get<std::string>()
                               : std::string();
  const std::vector<std::string> v1 = {"linear",  "linear_row", "linear_row_rope", "head_rmsnorm", "silu_mul", "embed",
                                       "rope_kv", "kv_shift",   "diff_attn",       "attn_probs",   "sample"};
  if (type == "diffllama") return v1;  // Hugging Face DiffLlama: DIFF V1 (Model::load reads its own keys)
  if (type == "phi4flash")
    return {"linear",    "linear_row",   "layer_norm",     "embed",    "silu_mul", "rope_kv",
            "diff_attn", "conv1d_state", "selective_scan", "gmu_gate", "sample"};
  const ModelConfig c = parse_model_config(config_json);
  if (c.v2())
    return {"linear",  "linear_row", "linear_row_rope", "head_rmsnorm", "silu_mul", "embed",
            "rope_kv", "kv_shift",   "diff_v2_attn",    "attn_probs",   "sample"};
  return v1;
}

namespace {
// A model directory's config.json text, or the one a .gguf file's metadata stands for (model_config_text); "" where
// it cannot be read (Model::load says why).
std::string config_text_of(const std::string& path) {
  try {
    return model_config_text(path);
  } catch (const Error&) {
    return "";
  }
}
}  // namespace

std::string selftest_model_for_model(const std::string& path) {
  const std::string text = config_text_of(path);
  try {
    (void)selftest_model_shape(text);
  } catch (const Error&) {  // a config.json the load refuses: Model::load says why, naming the file and the key
    return "";
  }
  return text;
}

std::string selftest_model_for_shape(const std::string& name) { return published_shape(name).config; }

std::string selftest_model_for_bench(const Options& o) {
  if (!o.model_dir.empty()) return selftest_model_for_model(o.model_dir);
  if (!o.shape.empty()) return selftest_model_for_shape(o.shape);
  return "";
}

std::vector<std::string> selftest_ops_for_model(const std::string& path) {
  const std::string config = config_text_of(path);
  if (config.empty()) return table_ops();  // unreadable (Model::load says why): every op
  return selftest_ops_for_config(config);
}

std::vector<std::string> selftest_ops_for_shape(const std::string& name) {
  return selftest_ops_for_config(published_shape(name).config);
}

std::vector<std::string> selftest_weights_for_load(const std::string& path, QuantKind weights, bool q4_0_head,
                                                   KvCacheType kv) {
  struct stat st {};
  if (!path.empty() && (::stat(path.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)))
    return {};  // a GGUF file: its tensors' formats are not read before the load, so every format
  std::vector<std::string> w{"f16"};
  if (weights != QuantKind::f16) w.push_back(quant_kind_name(weights));
  if (weights == QuantKind::q4_0 && !q4_0_head) w.push_back("q8_0");  // lm_head (LoadOptions::weights)
  if (kv == KvCacheType::q8_0) w.push_back("kv=q8_0");                // SessionOptions::kv_cache
  return w;
}

std::vector<std::string> selftest_ops_for_bench(const Options& o) {
  validate_options(o);
  if (!o.model_dir.empty()) {
    try {
      return selftest_ops_for_model(o.model_dir);
    } catch (const std::exception&) {  // a config.json the load refuses: it says why, naming the file and the key
      return {};
    }
  }
  if (!o.shape.empty()) return selftest_ops_for_shape(o.shape);
  if (o.matmul_table) return {"linear"};
  if (!o.op.empty()) return {o.op};
  if (o.ops) return table_ops();
  if (o.variant == "v1") return {"diff_attn"};
  if (o.variant == "v2") return {"diff_v2_attn"};
  return {"diff_attn", "diff_v2_attn"};
}

std::vector<std::string> selftest_weights_for_bench(const Options& o) {
  if (o.model_dir.empty() && o.shape.empty()) return {};  // the op tables and the matmul table: every format
  std::vector<std::string> all;
  for (QuantKind k : o.weight_list.empty() ? std::vector<QuantKind>{o.weights} : o.weight_list)
    for (const std::string& w : selftest_weights_for_load(o.model_dir, k, false, o.kv_cache)) {
      if (std::find(all.begin(), all.end(), w) == all.end()) all.push_back(w);
    }
  return all;
}

}  // namespace diffvk::bench
