// Uses only the public headers: lists the Vulkan devices.
#include <cstdio>

#include "diffvk/device.hpp"

int main() {
  try {
    auto devices = diffvk::list_devices();
    for (const auto& d : devices) std::printf("consumer: [%u] %s\n", d.index, d.name.c_str());
    return devices.empty() ? 1 : 0;
  } catch (const diffvk::Error& e) {
    std::fprintf(stderr, "consumer: %s\n", e.what());
    return 1;
  }
}
