// diffvk info: the Vulkan devices and their probed capabilities.
#include <cstdio>

#include "commands.hpp"
#include "diffvk/pipeline_cache.hpp"

namespace diffvk::cli {

Runner register_info(CLI::App& app) {
  auto* cmd = app.add_subcommand("info", "list Vulkan devices and their capabilities (DeviceCaps)");
  auto selector = std::make_shared<std::string>();
  cmd->add_option("--device", *selector, "show only this device (index or name substring)");
  auto tuning = std::make_shared<std::string>();
  cmd->add_option("--tuning", *tuning,
                  "tuning overrides key=value,... to resolve with (as a context's; env DIFFVK_TUNING wins per key)");
  return [selector, tuning]() {
    auto devices = list_devices();
    const uint32_t chosen = select_device(devices, "");
    std::printf("%zu Vulkan device(s); default: [%u]\n\n", devices.size(), chosen);
    ContextOptions o;
    o.tuning = *tuning;
    for (const auto& d : devices) {
      if (!selector->empty() && d.index != select_device(devices, *selector)) continue;
      std::printf("%s\n", d.describe().c_str());
      const std::string cache = default_pipeline_cache_path(d);
      std::printf("  pipeline cache file (default; --no-pipeline-cache: none): %s\n",
                  cache.empty() ? "none (no cache directory)" : cache.c_str());
      // The tuning a context would resolve here (caps, then quirks and device rules, then overrides), and why each
      // value.
      try {
        std::printf("  tuning (caps, then quirks and device rules, then overrides; fp16 where usable):\n%s\n",
                    resolve_tuning(d, o).describe().c_str());
      } catch (const Error& e) {
        std::printf("  tuning: %s\n\n", e.what());
        if (e.status() == Status::invalid_argument) throw;  // a bad key or value is the user's error
      }
    }
    return 0;
  };
}

}  // namespace diffvk::cli
