// diffvk info: the Vulkan devices and their probed capabilities.
#include <cstdio>

#include "commands.hpp"

namespace diffvk::cli {

Runner register_info(CLI::App& app) {
  auto* cmd = app.add_subcommand("info", "list Vulkan devices and their capabilities (DeviceCaps)");
  auto selector = std::make_shared<std::string>();
  cmd->add_option("--device", *selector, "show only this device (index or name substring)");
  return [selector]() {
    auto devices = list_devices();
    const uint32_t chosen = select_device(devices, "");
    std::printf("%zu Vulkan device(s); default: [%u]\n\n", devices.size(), chosen);
    for (const auto& d : devices) {
      if (!selector->empty() && d.index != select_device(devices, *selector)) continue;
      std::printf("%s\n", d.describe().c_str());
    }
    return 0;
  };
}

}  // namespace diffvk::cli
