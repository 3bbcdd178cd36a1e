// diffvk layer: run one MultiheadDiffAttn layer from a safetensors file on a .npy input (issue 3; not yet implemented).
#include <cstdio>

#include "commands.hpp"

namespace diffvk::cli {

Runner register_layer(CLI::App& app) {
  auto* cmd = app.add_subcommand("layer", "run one differential attention layer (not implemented yet)");
  cmd->allow_extras();
  return []() -> int {
    throw Error(Status::unsupported, "`diffvk layer` is not implemented yet (the attention kernels are in progress)");
  };
}

}  // namespace diffvk::cli
