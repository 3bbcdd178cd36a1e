// diffvk shader-stats: builds every production pipeline the runtime would build on the selected device
// (a model's kernels, and/or the kernels of the given attention shapes), with the specialization constants
// the tuning functions pick for that device, and prints the driver's pipeline-executable statistics
// (VK_KHR_pipeline_executable_properties: registers, spills, shared memory, occupancy, ...).
// The device is opened in DeviceMode::statistics_only: nothing is allocated, mapped, recorded or
// submitted, so this runs on null devices (radv with RADV_FORCE_FAMILY, see README.md).
#include <nlohmann/json.hpp>

#include <cstdio>
#include <map>
#include <memory>

#include "commands.hpp"
#include "diffvk/model.hpp"
#include "vk/gpu.hpp"
#include "model/model_kernels.hpp"
#include "platform.hpp"

namespace diffvk::cli {

namespace {
using json = nlohmann::ordered_json;

struct StatsArgs {
  DeviceFlags dev;
  std::string model;
  std::vector<uint32_t> d, heads, kv_heads, t;
  std::string json_path;
};

// One distinct pipeline (name + specialization constants) and every group that created it.
struct Entry {
  const Pipeline* pipeline = nullptr;
  std::vector<std::string> groups;
};

std::string spec_text(const Pipeline& p) {
  const auto names = p.spec_names();
  std::string s;
  for (size_t i = 0; i < p.desc().spec.size(); ++i) {
    if (!s.empty()) s += ' ';
    s += (names[i].empty() ? std::to_string(i) : names[i]) + "=" + std::to_string(p.desc().spec[i]);
  }
  return s.empty() ? "(none)" : s;
}

json spec_json(const Pipeline& p) {
  const auto names = p.spec_names();
  json j = json::object();
  for (size_t i = 0; i < p.desc().spec.size(); ++i) j[names[i].empty() ? std::to_string(i) : names[i]] = p.desc().spec[i];
  return j;
}

json stat_value(const PipelineStatistic& s) {
  switch (s.format) {
    case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_BOOL32_KHR: return s.b;
    case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_INT64_KHR: return s.i64;
    case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_FLOAT64_KHR: return s.f64;
    default: return s.u64;
  }
}

std::string stat_text(const PipelineStatistic& s) {
  switch (s.format) {
    case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_BOOL32_KHR: return s.b ? "true" : "false";
    case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_INT64_KHR: return std::to_string(s.i64);
    case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_FLOAT64_KHR: {
      char buf[64];
      std::snprintf(buf, sizeof buf, "%g", s.f64);
      return buf;
    }
    default: return std::to_string(s.u64);
  }
}

}  // namespace

Runner register_shader_stats(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "shader-stats",
      "create every pipeline the runtime builds for a model and/or attention shapes, and print the driver's statistics "
      "(registers, spills, shared memory, occupancy; VK_KHR_pipeline_executable_properties). Allocates and runs nothing, "
      "so it works on null devices (radv with RADV_FORCE_FAMILY)");
  auto a = std::make_shared<StatsArgs>();
  add_device_flags(cmd, a->dev);
  cmd->add_option("--model", a->model, "the pipelines of this model (its config.json only; no weights are read). Default, "
                                        "when no shape flag is given either: the bundled model");
  cmd->add_option("--d", a->d, "attention shapes: head half widths D (list; default 64,128 when another shape flag is given)")
      ->delimiter(',')->check(CLI::Range(2u, 256u));
  cmd->add_option("--heads", a->heads, "attention shapes: differential heads H (list; default 32)")->delimiter(',')->check(CLI::Range(1u, 1024u));
  cmd->add_option("--kv-heads", a->kv_heads, "attention shapes: key/value groups Hkv (list; default 8; pairs with H where H % Hkv == 0)")
      ->delimiter(',')->check(CLI::Range(1u, 1024u));
  cmd->add_option("--t", a->t, "context lengths T (list): recorded in the JSON; no pipeline depends on T (every pipeline is "
                               "built at load time, for D and H/Hkv)")
      ->delimiter(',')->check(CLI::Range(1u, 1u << 24));
  cmd->add_option("--json", a->json_path, "write {device, pipelines: [{name, spec, workgroup, stats}]} to FILE (atomic)");
  return [a]() {
    ContextOptions opts = a->dev.options();
    auto device = Device::create(opts, DeviceMode::statistics_only);
    Device& dev = *device;
    const DeviceCaps& caps = dev.caps();
    const bool shapes = !a->d.empty() || !a->heads.empty() || !a->kv_heads.empty() || !a->t.empty();
    std::string model_dir = a->model;
    if (model_dir.empty() && !shapes) model_dir = default_model_dir();

    std::vector<ModelKernels> kernels;  // kept alive until every pipeline has been queried
    json shapes_json = json::array();
    std::vector<std::string> notes;
    if (!model_dir.empty()) {
      const ModelConfig c = read_model_config(model_dir);  // native or Hugging Face DiffLlama
      const std::string label = "model " + model_dir;
      PipelineGroup g(dev, label);
      kernels.push_back(build_model_kernels(dev, c));
      shapes_json.push_back({{"group", label}, {"D", c.head_dim()}, {"H", c.num_heads}, {"Hkv", c.num_kv_heads},
                             {"E", c.hidden_size}, {"I", c.intermediate_size}});
    }
    if (shapes) {
      const std::vector<uint32_t> Ds = a->d.empty() ? std::vector<uint32_t>{64, 128} : a->d;
      const std::vector<uint32_t> Hs = a->heads.empty() ? std::vector<uint32_t>{32} : a->heads;
      const std::vector<uint32_t> Hkvs = a->kv_heads.empty() ? std::vector<uint32_t>{8} : a->kv_heads;
      for (uint32_t D : Ds) {
        if (D % 2) throw Error(Status::invalid_argument, "shader-stats: D=" + std::to_string(D) + " must be even");
        for (uint32_t H : Hs)
          for (uint32_t Hkv : Hkvs) {
            if (H % Hkv) {
              notes.push_back("H=" + std::to_string(H) + ", Hkv=" + std::to_string(Hkv) + " skipped: H must be a multiple of Hkv");
              continue;
            }
            // The kernels of a model with these attention shapes (E = 2·D·H); only D and H/Hkv select pipelines.
            ModelConfig c;
            c.num_heads = H;
            c.num_kv_heads = Hkv;
            c.hidden_size = 2 * D * H;
            const std::string label = "D=" + std::to_string(D) + " H=" + std::to_string(H) + " Hkv=" + std::to_string(Hkv);
            PipelineGroup g(dev, label);
            kernels.push_back(build_model_kernels(dev, c));
            shapes_json.push_back({{"group", label}, {"D", D}, {"H", H}, {"Hkv", Hkv}, {"T", a->t}});
          }
      }
      if (kernels.empty()) throw Error(Status::invalid_argument, "shader-stats: no valid (H, Hkv) pair: H must be a multiple of Hkv");
    }

    // Distinct pipelines (name + constants), in creation order, with every group that created them.
    std::vector<Entry> entries;
    std::map<std::pair<std::string, std::vector<uint32_t>>, size_t> index;
    for (const Pipeline* p : dev.pipelines()) {
      const std::string group = p->group();
      auto key = std::make_pair(p->name(), p->desc().spec);
      auto it = index.find(key);
      if (it == index.end()) {
        index[key] = entries.size();
        entries.push_back({p, {group}});
      } else {
        entries[it->second].groups.push_back(group);
      }
    }

    const bool stats = dev.pipeline_statistics();
    const std::string driver = caps.driver_name + (caps.driver_info.empty() ? "" : ", " + caps.driver_info);
    std::printf("device [%u] %s (%s), %s, subgroup %u, %zu distinct pipelines\n", caps.index, caps.name.c_str(), driver.c_str(),
                dev.fp16() ? "fp16 storage" : "fp32", caps.subgroup_size, entries.size());
    if (!stats)
      std::printf("statistics: unavailable on this driver (no VK_KHR_pipeline_executable_properties / pipelineExecutableInfo); "
                  "listing pipelines with their constants and workgroup sizes only\n");
    for (const auto& n : notes) std::printf("note: %s\n", n.c_str());

    json out;
    out["device"] = {{"name", caps.name},
                     {"driver_name", caps.driver_name},
                     {"driver_info", caps.driver_info},
                     {"vendor_id", caps.vendor_id},
                     {"device_id", caps.device_id},
                     {"kind", device_kind_name(caps.kind)},
                     {"precision", dev.fp16() ? "fp16" : "fp32"},
                     {"subgroup_size", caps.subgroup_size},
                     {"subgroup_arithmetic", dev.subgroup_arithmetic()}};
    out["statistics_available"] = stats;
    if (!stats) out["statistics_note"] = "statistics are unavailable on this driver (no VK_KHR_pipeline_executable_properties)";
    out["shapes"] = shapes_json;
    json pipes = json::array();
    for (size_t i = 0; i < entries.size(); ++i) {
      const Pipeline& p = *entries[i].pipeline;
      const auto& wg = p.workgroup();
      std::printf("\n[%zu] %s  workgroup %ux%ux%u  spec %s\n", i, p.name().c_str(), wg[0], wg[1], wg[2], spec_text(p).c_str());
      std::string groups;
      for (const auto& g : entries[i].groups) groups += (groups.empty() ? "" : ", ") + g;
      std::printf("    built by: %s\n", groups.c_str());
      json j;
      j["name"] = p.name();
      j["op"] = p.desc().op;
      j["groups"] = entries[i].groups;
      j["spec"] = spec_json(p);
      j["workgroup"] = {wg[0], wg[1], wg[2]};
      if (stats) {
        const auto execs = pipeline_executable_statistics(dev, p);
        json st = json::object();
        json ex = json::array();
        for (const auto& e : execs) {
          std::string line;
          json es = json::object();
          for (const auto& s : e.statistics) {
            line += (line.empty() ? "" : ", ") + s.name + " " + stat_text(s);
            es[s.name] = stat_value(s);
            // One executable (every compute pipeline so far): its statistics are the pipeline's. With
            // several, "stats" keeps the first executable's and "executables" lists them all.
            if (!st.contains(s.name)) st[s.name] = stat_value(s);
          }
          std::printf("    %s (subgroup %u): %s\n", e.name.c_str(), e.subgroup_size, line.c_str());
          ex.push_back({{"name", e.name}, {"subgroup_size", e.subgroup_size}, {"stats", es}});
        }
        j["stats"] = st;
        if (execs.size() > 1) j["executables"] = ex;
      } else {
        j["stats"] = nullptr;
      }
      pipes.push_back(std::move(j));
    }
    out["pipelines"] = std::move(pipes);
    if (!a->json_path.empty()) {
      const std::string text = out.dump(2) + "\n";
      platform::write_file_atomic(a->json_path, text.data(), text.size());
      std::printf("\nwrote %s\n", a->json_path.c_str());
    }
    return 0;
  };
}

}  // namespace diffvk::cli
