// diffvk CLI: each subcommand registers itself on the CLI11 app and returns its runner.
#pragma once
#include <CLI/CLI.hpp>
#include <functional>
#include <string>

#include "diffvk/device.hpp"

namespace diffvk::cli {

// Options every GPU subcommand shares.
struct DeviceFlags {
  std::string device;          // --device SEL
  std::string precision = "auto";  // --precision auto|fp16|fp32
  bool validation = false;     // --validation
  ContextOptions options() const;
};
void add_device_flags(CLI::App* cmd, DeviceFlags& flags);

using Runner = std::function<int()>;
Runner register_info(CLI::App& app);
Runner register_layer(CLI::App& app);
Runner register_bench(CLI::App& app);
Runner register_run(CLI::App& app);
Runner register_logits(CLI::App& app);
Runner register_plan(CLI::App& app);
Runner register_shader_stats(CLI::App& app);

// The bundled model (examples/models/tiny-diff): the install prefix's copy, else the source tree's.
std::string default_model_dir();

}  // namespace diffvk::cli
