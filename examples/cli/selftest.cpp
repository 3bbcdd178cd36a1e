// diffvk selftest: the self-test at load, run now (ContextOptions::selftest = always), and its table: op, variant,
// cases, max error, fraction of the tolerance, verdict, fallback taken (docs/decisions/024-selftest-at-load.md).
#include <nlohmann/json.hpp>

#include <cstdio>

#include "commands.hpp"
#include "diffvk/bench.hpp"
#include "diffvk/selftest.hpp"
#include "diffvk/atomic_write.hpp"

namespace diffvk::cli {

namespace {
// --json: the table, and every case's first use of pipelines with their compile seconds (.ci/lavapipe-compile-times).
void write_json(const std::string& path, const SelftestReport& r) {
  using json = nlohmann::ordered_json;
  json rows = json::array();
  for (const SelftestRow& row : r.rows) {
    json firsts = json::array();
    for (const SelftestFirstUse& u : row.first_uses)
      firsts.push_back({{"case", u.case_name}, {"pipelines", u.pipelines}, {"seconds", u.seconds}});
    rows.push_back({{"op", row.op},
                    {"variant", row.variant},
                    {"tuning", row.tuning},
                    {"cases", row.cases},
                    {"failed", row.failed},
                    {"max_error", row.max_error},
                    {"of_tolerance", row.worst},
                    {"seconds", row.seconds},
                    {"pass", row.pass},
                    {"failure", row.failure},
                    {"fallback", row.fallback},
                    {"first_uses", std::move(firsts)}});
  }
  const json out = {{"device", r.device},   {"config", r.config},     {"ran", r.ran},     {"from_cache", r.from_cache},
                    {"seconds", r.seconds}, {"fallback", r.fallback}, {"error", r.error}, {"rows", std::move(rows)}};
  const std::string text = out.dump(2) + "\n";
  platform::write_file_atomic(path, text.data(), text.size());
}
}  // namespace

Runner register_selftest(CLI::App& app) {
  auto* cmd = app.add_subcommand("selftest",
                                 "run every op's pipelines on small fixed inputs against the float64 reference (the "
                                 "self-test at load), print the table and keep the verdict");
  struct Flags {
    DeviceFlags device;
    std::string model, shape, ops, json_path;
    bool read = false;
    LoadOptions load;
    KvCacheType kv = KvCacheType::f16;
  };
  auto f = std::make_shared<Flags>();
  add_device_flags(cmd, f->device);
  cmd->add_option("--model", f->model, "test the ops this model records, at its sizes (a model directory or a .gguf)")
      ->check(CLI::ExistingDirectory | gguf_file_validator());
  cmd->add_option("--shape", f->shape, "test the ops a published shape records (`diffvk bench --shape` names)");
  cmd->add_option("--ops", f->ops, "test these ops (comma-separated case-table names)");
  add_weights_flag(cmd, f->load);  // with --model or --shape: the weight formats of that load (default f16)
  add_kv_flag(cmd, f->kv);         // with --model or --shape: its sessions' KV cache format
  cmd->add_flag("--cached", f->read,
                "print the kept verdict when there is one (--selftest auto) instead of testing again (always); ops the "
                "verdict left to their first use (attention maps, context shift) are tested now");
  cmd->add_option(
      "--json", f->json_path,
      "also write the table to FILE, with each case's first use of pipelines and their compile seconds "
      "(for a cold compile: --no-pipeline-cache and an empty driver cache, e.g. MESA_SHADER_CACHE_DISABLE=true)");
  return [f]() {
    if (int(!f->model.empty()) + int(!f->shape.empty()) + int(!f->ops.empty()) > 1)
      throw Error(Status::invalid_argument, "selftest: give one of --model, --shape and --ops");
    ContextOptions o = f->device.options();
    if (!f->read && o.selftest == SelftestMode::automatic) o.selftest = SelftestMode::always;
    if (o.selftest == SelftestMode::off)
      throw Error(Status::invalid_argument, "selftest: --selftest off tests nothing (auto or always)");
    if (!f->model.empty()) {
      o.selftest_ops = bench::selftest_ops_for_model(f->model);
      o.selftest_model = bench::selftest_model_for_model(f->model);
    }
    if (!f->shape.empty()) {
      o.selftest_ops = bench::selftest_ops_for_shape(f->shape);
      o.selftest_model = bench::selftest_model_for_shape(f->shape);
    }
    if (!f->model.empty() || !f->shape.empty())
      o.selftest_weights = bench::selftest_weights_for_load(f->model, f->load.weights, f->load.q4_0_head, f->kv);
    for (size_t p = 0; !f->ops.empty() && p <= f->ops.size();) {
      const size_t e = std::min(f->ops.find(',', p), f->ops.size());
      if (e > p) o.selftest_ops.push_back(f->ops.substr(p, e - p));
      p = e + 1;
    }
    // What Context::create does first; a failure with no fallback left comes back with its rows, to print.
    const SelftestReport r = run_selftest(o);
    std::printf("device: %s\n", r.device.c_str());
    std::printf("%s", r.table().c_str());
    if (r.from_cache)
      std::printf("verdict: read from %s (tested in %.3f s then)\n", r.verdict_path.c_str(), r.tested_seconds);
    else
      std::printf("self-test time: %.3f s\n", r.seconds);
    std::printf("fallback: %s\n", !r.error.empty()     ? "none left (below)"
                                  : r.fallback.empty() ? "none (every variant passed)"
                                                       : r.fallback.c_str());
    std::printf("verdict file: %s\n", r.verdict_path.empty() ? "none (no cache directory)" : r.verdict_path.c_str());
    if (!f->json_path.empty()) {
      write_json(f->json_path, r);
      std::printf("wrote %s\n", f->json_path.c_str());
    }
    if (!r.error.empty()) {
      std::fprintf(stderr, "diffvk selftest: %s\n", r.error.c_str());
      return 1;
    }
    return 0;
  };
}

}  // namespace diffvk::cli
