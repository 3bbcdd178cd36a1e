// diffvk — command-line front end: device info, layer runner, benchmark, model runner.
#include <cstdio>
#include <map>

#include "commands.hpp"
#include "diffvk/atomic_write.hpp"

namespace diffvk::cli {

ContextOptions DeviceFlags::options() const {
  ContextOptions o;
  o.device = device;
  if (validation) o.validation = 1;
  if (precision == "fp16") o.precision = Precision::fp16;
  else if (precision == "fp32") o.precision = Precision::fp32;
  else o.precision = Precision::automatic;
  return o;
}

void add_device_flags(CLI::App* cmd, DeviceFlags& f) {
  cmd->add_option("--device", f.device, "Vulkan device: index or name substring (default: best by kind; env DIFFVK_DEVICE)");
  cmd->add_option("--precision", f.precision, "storage precision")->check(CLI::IsMember({"auto", "fp16", "fp32"}));
  cmd->add_flag("--validation", f.validation, "enable the Khronos validation layer");
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
  add(register_logits(app));
  add(register_plan(app));
  diffvk::platform::install_interrupt_cleanup();  // no temporary output file left behind on Ctrl-C / SIGTERM
  add(register_shader_stats(app));
  add(register_attn_map(app));
  add(register_quantize(app));
  add(register_perplexity(app));
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  for (auto& [cmd, run] : runners)
    if (cmd->parsed()) {
      try {
        return run();
      } catch (const diffvk::Error& e) {
        std::fprintf(stderr, "diffvk %s: error (%s): %s\n", cmd->get_name().c_str(), diffvk::status_name(e.status()), e.what());
        return 1;
      } catch (const std::exception& e) {
        std::fprintf(stderr, "diffvk %s: error: %s\n", cmd->get_name().c_str(), e.what());
        return 1;
      }
    }
  return 1;
}
