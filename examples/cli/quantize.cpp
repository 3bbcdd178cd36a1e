// diffvk quantize: a checkpoint to a GGUF file (docs/gguf.md), and --list: a GGUF file's header as JSON.
#include <cstdio>

#include "commands.hpp"
#include "diffvk/gguf.hpp"

namespace diffvk::cli {

Runner register_quantize(CLI::App& app) {
  struct Args {
    std::string type = "f16", list;
    std::vector<std::string> paths;
  };
  auto a = std::make_shared<Args>();
  auto* cmd = app.add_subcommand("quantize",
                                 "write a model as a GGUF file (docs/gguf.md): quantize --type T MODEL_DIR OUT.gguf");
  cmd->add_option("--type", a->type, "linear weight type")->check(CLI::IsMember({"f16", "q8_0", "q4_0"}));
  cmd->add_option("--list", a->list, "print the header of a GGUF file as JSON instead (metadata, tensors)");
  cmd->add_option("paths", a->paths, "MODEL_DIR OUT.gguf");
  return [a]() {
    if (!a->list.empty()) {
      if (!a->paths.empty()) throw Error(Status::invalid_argument, "--list takes no MODEL_DIR / OUT.gguf");
      const std::string j = gguf_listing_json(a->list);
      if (std::fwrite(j.data(), 1, j.size(), stdout) != j.size() || std::fflush(stdout) != 0) {
        std::fprintf(stderr, "diffvk quantize: error: writing to standard output failed\n");
        return 1;
      }
      return 0;
    }
    if (a->paths.size() != 2)
      throw Error(Status::invalid_argument, "quantize needs MODEL_DIR and OUT.gguf (or --list FILE)");
    const std::string& dir = a->paths[0];
    const std::string& out = a->paths[1];
    check_output(out, "OUT.gguf", {}, dir);
    const QuantizeReport r = quantize_model(dir, out, parse_quant_kind(a->type));
    std::fprintf(stderr, "diffvk quantize: wrote %s (%s, %llu tensors, %llu bytes", out.c_str(), a->type.c_str(),
                 (unsigned long long)r.tensors, (unsigned long long)r.file_bytes);
    if (!r.f16_fallbacks.empty()) std::fprintf(stderr, "; %zu kept F16", r.f16_fallbacks.size());
    std::fprintf(stderr, ")\n");
    return 0;
  };
}

}  // namespace diffvk::cli
