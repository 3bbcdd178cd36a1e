// diffvk — command-line front end: device info, layer runner, benchmark, model runner.
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <map>

#include <sys/stat.h>

#include "commands.hpp"
#include "diffvk/atomic_write.hpp"
#include "diffvk/bench.hpp"
#include "diffvk/pipeline_cache.hpp"

namespace diffvk::cli {

ContextOptions DeviceFlags::options() const {
  ContextOptions o;
  o.device = device;
  o.tuning = tuning;
  if (validation) o.validation = 1;
  if (precision == "fp16")
    o.precision = Precision::fp16;
  else if (precision == "fp32")
    o.precision = Precision::fp32;
  else
    o.precision = Precision::automatic;
  if (no_pipeline_cache && !pipeline_cache.empty())
    throw Error(Status::invalid_argument, "--pipeline-cache and --no-pipeline-cache: give one");
  o.pipeline_cache = !no_pipeline_cache;
  o.selftest = parse_selftest_mode(selftest, "--selftest");
  if (!pipeline_cache.empty()) {
    // The library rewrites the file when the context closes: only an absent file, an empty one or one of its
    // own caches may be replaced.
    std::string why;
    if (!pipeline_cache_path_replaceable(pipeline_cache, &why))
      throw Error(Status::invalid_argument, "--pipeline-cache " + pipeline_cache + ": the file exists and is " + why +
                                                "; it would be overwritten, so it is refused (name a new file)");
    o.pipeline_cache_path = pipeline_cache;
  }
  return o;
}

ContextOptions DeviceFlags::options_for_model(const std::string& path, const LoadOptions& load, KvCacheType kv) const {
  ContextOptions o = options();
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return o;
  o.selftest_weights = bench::selftest_weights_for_load(path, load.weights, load.q4_0_head, kv);
  try {
    o.selftest_ops = bench::selftest_ops_for_model(path);
    o.selftest_model = bench::selftest_model_for_model(path);
  } catch (const std::exception&) {  // a config.json Model::load refuses: it says why, naming the file and the key
  }
  return o;
}

void add_device_flags(CLI::App* cmd, DeviceFlags& f) {
  cmd->add_option("--device", f.device,
                  "Vulkan device: index or name substring (default: best by kind; env DIFFVK_DEVICE)");
  cmd->add_option("--precision", f.precision, "storage precision")->check(CLI::IsMember({"auto", "fp16", "fp32"}));
  cmd->add_flag("--validation", f.validation, "enable the Khronos validation layer");
  cmd->add_option(
      "--pipeline-cache", f.pipeline_cache,
      "keep the driver's compiled pipelines in FILE between runs instead of the default file (on by default: "
      "<cache dir>/pipelines/, e.g. ~/.cache/diffvk/pipelines/; created if absent, rewritten on exit when it "
      "changed; a file that is not a diffvk pipeline cache is refused). Saves the compile at load on drivers "
      "that fill their cache (NVIDIA, Mesa's GPU drivers, phones); lavapipe 22.3 stores nothing");
  cmd->add_flag("--no-pipeline-cache", f.no_pipeline_cache, "use no pipeline cache file (a cold start every run)");
  cmd->add_option("--tuning", f.tuning,
                  "tuning overrides key=value,... (keys coopmat, int_dot, fp16, subgroup, kv_staging, attn_core, "
                  "row_lanes, q4_in_place, linear_reg_share, row_prologue, attn_decode, pipeline_threads, "
                  "pipeline_batch, quirk, rule; "
                  "runtime/vk/README.md); env DIFFVK_TUNING wins per key. `diffvk info` prints the resolved tuning");
  cmd->add_option("--selftest", f.selftest,
                  "the self-test at load: auto (test once per device, driver and shader build, then read the verdict "
                  "kept in <cache dir>/selftest/), always, off; a failing variant falls back through the tuning keys "
                  "(docs/decisions/024-selftest-at-load.md)")
      ->check(CLI::IsMember({"auto", "always", "off"}));
}

namespace {
std::string num(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%g", v);
  return b;
}
// The text as a finite double (no trailing characters), else NaN.
double finite_value(const std::string& value) {
  errno = 0;
  char* end = nullptr;
  const double v = std::strtod(value.c_str(), &end);
  if (end == value.c_str() || errno == ERANGE) return std::nan("");
  while (*end == ' ' || *end == '\t') ++end;
  return *end || !std::isfinite(v) ? std::nan("") : v;
}
}  // namespace

CLI::Validator finite_range(double lo, double hi, bool lo_open) {
  const std::string range = (lo_open ? "(" : "[") + num(lo) + ", " + num(hi) + "]";
  return CLI::Validator(
      [lo, hi, lo_open, range](std::string& value) -> std::string {
        const double v = finite_value(value);
        if (std::isnan(v) || v < lo || (lo_open && v == lo) || v > hi)
          return "must be a finite number in " + range + ": " + value;
        return {};
      },
      "FLOAT in " + range, "finite_range");
}

// Every unsigned option of every subcommand (CLI11 types them "UINT", then the descriptions of their validators):
// CLI11 2.1 reads "-1" into a 64-bit option as 2^64 - 1 and saturates values past the type's range, so a sign or an
// overflow is refused here, once, whatever the option. Each option's own range is checked by its subcommand or by the
// library (docs/limits.md).
void check_unsigned_options(CLI::App& app) {
  const CLI::Validator non_negative(
      [](std::string& value) -> std::string {
        const size_t i = value.find_first_not_of(" \t");
        if (i != std::string::npos && (value[i] == '-' || value[i] == '+'))
          return "must be a number without a sign (0 or more): " + value;
        errno = 0;
        char* end = nullptr;
        (void)std::strtoull(value.c_str(), &end, 0);
        if (errno == ERANGE) return "is out of range (at most 2^64 - 1): " + value;
        return {};
      },
      "", "unsigned");
  for (CLI::App* sub : app.get_subcommands({}))
    for (CLI::Option* o : sub->get_options())
      if (const std::string t = o->get_type_name(); t == "UINT" || t.rfind("UINT:", 0) == 0) o->check(non_negative);
  // Every floating-point option: CLI11 reads "nan" and "inf" into a double, and its Range and
  // PositiveNumber validators let NaN through (every comparison with NaN is false). Each option's own
  // range is a finite_range on the option; this is the net for any option without one.
  const CLI::Validator finite(
      [](std::string& value) -> std::string {
        return std::isnan(finite_value(value)) ? "must be a finite number: " + value : std::string();
      },
      "", "finite");
  for (CLI::App* sub : app.get_subcommands({}))
    for (CLI::Option* o : sub->get_options())
      if (const std::string t = o->get_type_name(); t == "FLOAT" || t.rfind("FLOAT:", 0) == 0) o->check(finite);
}

}  // namespace diffvk::cli

int main(int argc, char** argv) {
  using namespace diffvk::cli;
  CLI::App app{"diffvk: Differential Transformer inference on Vulkan compute"};
  app.require_subcommand(1);
  std::map<CLI::App*, Runner> runners;
  auto add = [&](Runner r) { runners[app.get_subcommands({}).back()] = std::move(r); };
  add(register_info(app));
  add(register_layer(app));
  add(register_bench(app));
  add(register_run(app));
  add(register_chat(app));
  add(register_logits(app));
  add(register_plan(app));
  diffvk::platform::install_interrupt_cleanup();  // no temporary output file left behind on Ctrl-C / SIGTERM
  add(register_shader_stats(app));
  add(register_attn_map(app));
  add(register_quantize(app));
  add(register_perplexity(app));
  add(register_selftest(app));
  diffvk::bench::install_selftest();  // Context::create runs the self-test at load (--selftest)
  check_unsigned_options(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  for (auto& [cmd, run] : runners)
    if (cmd->parsed()) {
      try {
        const int rc = run();
        // Every write to standard output is checked here, once: a full device or a closed pipe (the
        // stream's error flag stays set) is an error, not a silent loss of the output.
        errno = 0;
        const bool flushed = std::fflush(stdout) == 0;  // first: std::cout's flush would take the errno
        const int err = flushed ? 0 : errno;
        std::cout.flush();
        if (!flushed || std::ferror(stdout) || !std::cout) {
          std::fprintf(stderr, "diffvk %s: error (%s): cannot write to standard output%s%s\n", cmd->get_name().c_str(),
                       diffvk::status_name(diffvk::Status::io_error), err ? ": " : "", err ? std::strerror(err) : "");
          return 1;
        }
        return rc;
      } catch (const diffvk::Error& e) {
        std::fprintf(stderr, "diffvk %s: error (%s): %s\n", cmd->get_name().c_str(), diffvk::status_name(e.status()),
                     e.what());
        return 1;
      } catch (const std::exception& e) {
        std::fprintf(stderr, "diffvk %s: error: %s\n", cmd->get_name().c_str(), e.what());
        return 1;
      }
    }
  return 1;
}
