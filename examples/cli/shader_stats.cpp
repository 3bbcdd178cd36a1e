// diffvk shader-stats: prints what diffvk::shader_stats (include/diffvk/shader_stats.hpp) collects: every
// production pipeline the runtime would build on the selected device (a model's kernels, and/or the kernels
// of the given attention shapes), with the specialization constants the tuning functions pick for that
// device, and the driver's pipeline-executable statistics (VK_KHR_pipeline_executable_properties: registers,
// spills, shared memory, occupancy, ...). The device is opened in statistics-only mode: nothing is allocated,
// mapped, recorded or submitted, so this runs on null devices (radv with RADV_FORCE_FAMILY, see README.md).
// --list prints the variant table compiled into the library (shaders/variants.cmake) without opening a device.
#include <nlohmann/json.hpp>

#include <cctype>
#include <cstdio>
#include <filesystem>
#include <memory>

#include "commands.hpp"
#include "diffvk/atomic_write.hpp"
#include "diffvk/shader_stats.hpp"

namespace diffvk::cli {

namespace {
using json = nlohmann::ordered_json;

struct StatsArgs {
  DeviceFlags dev;
  std::string model;
  std::vector<uint32_t> d, heads, kv_heads, t;
  std::vector<std::string> weights;
  std::string json_path, isa_dir;
  bool list = false;
};

std::string spec_key(const ShaderPipeline::Spec& s, size_t i) { return s.name.empty() ? std::to_string(i) : s.name; }

std::string spec_text(const ShaderPipeline& p) {
  std::string s;
  for (size_t i = 0; i < p.spec.size(); ++i) {
    if (!s.empty()) s += ' ';
    s += spec_key(p.spec[i], i) + "=" + std::to_string(p.spec[i].value);
  }
  return s.empty() ? "(none)" : s;
}

json spec_json(const ShaderPipeline& p) {
  json j = json::object();
  for (size_t i = 0; i < p.spec.size(); ++i) j[spec_key(p.spec[i], i)] = p.spec[i].value;
  return j;
}

json stat_value(const ShaderStatistic& s) {
  switch (s.format) {
    case ShaderStatistic::Format::boolean:
      return s.b;
    case ShaderStatistic::Format::int64:
      return s.i64;
    case ShaderStatistic::Format::float64:
      return s.f64;
    default:
      return s.u64;
  }
}

std::string stat_text(const ShaderStatistic& s) {
  switch (s.format) {
    case ShaderStatistic::Format::boolean:
      return s.b ? "true" : "false";
    case ShaderStatistic::Format::int64:
      return std::to_string(s.i64);
    case ShaderStatistic::Format::float64: {
      char buf[64];
      std::snprintf(buf, sizeof buf, "%g", s.f64);
      return buf;
    }
    default:
      return std::to_string(s.u64);
  }
}

// --list: every variant of the table compiled into the library (shaders/variants.cmake), no device.
int list_variants(const std::string& json_path) {
  const std::vector<ShaderVariant> vs = shader_variants();
  std::printf("%zu shader variants (shaders/variants.cmake): every pipeline that can exist, before specialization\n",
              vs.size());
  std::printf("%-28s %-4s %-3s %-5s %-8s %-40s %-42s %s\n", "name", "prec", "sg", "reg", "build", "source", "defines",
              "spec constants");
  json arr = json::array();
  for (const ShaderVariant& v : vs) {
    std::string spec;
    for (size_t i = 0; i < v.spec.size(); ++i) spec += (i ? "," : "") + std::to_string(i) + "=" + v.spec[i];
    std::printf("%-28s %-4s %-3s %-5s %-8s %-40s %-42s %s\n", v.name.c_str(), v.fp16 ? "fp16" : "fp32",
                v.subgroup ? "sg" : "-", v.registry.c_str(), v.prebuilt ? "prebuilt" : "glslc", v.source.c_str(),
                v.defines.empty() ? "-" : v.defines.c_str(), spec.empty() ? "(none)" : spec.c_str());
    arr.push_back({{"name", v.name},
                   {"op", v.op},
                   {"source", v.source},
                   {"defines", v.defines},
                   {"precision", v.fp16 ? "fp16" : "fp32"},
                   {"subgroup", v.subgroup},
                   {"registry", v.registry},
                   {"prebuilt", v.prebuilt},
                   {"spec", v.spec},
                   {"description", v.description},
                   {"words", v.words}});
  }
  if (!json_path.empty()) {
    const std::string text = json({{"variants", std::move(arr)}}).dump(2) + "\n";
    platform::write_file_atomic(json_path, text.data(), text.size());
    std::printf("\nwrote %s\n", json_path.c_str());
  }
  return 0;
}

}  // namespace

Runner register_shader_stats(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "shader-stats",
      "create every pipeline the runtime builds for a model and/or attention shapes, and print the driver's statistics "
      "(registers, spills, shared memory, occupancy; VK_KHR_pipeline_executable_properties). Allocates and runs "
      "nothing, "
      "so it works on null devices (radv with RADV_FORCE_FAMILY)");
  auto a = std::make_shared<StatsArgs>();
  add_device_flags(cmd, a->dev);
  cmd->add_option("--model", a->model,
                  "the pipelines of this model (its config.json only; no weights are read). Default, "
                  "when no shape flag is given either: the bundled model");
  cmd->add_option("--d", a->d,
                  "attention shapes: head half widths D (list; default 64,128 when another shape flag is given)")
      ->delimiter(',')
      ->check(CLI::Range(2u, 256u));
  cmd->add_option("--heads", a->heads, "attention shapes: differential heads H (list; default 32)")
      ->delimiter(',')
      ->check(CLI::Range(1u, 1024u));
  cmd->add_option("--kv-heads", a->kv_heads,
                  "attention shapes: key/value groups Hkv (list; default 8; pairs with H where H % Hkv == 0)")
      ->delimiter(',')
      ->check(CLI::Range(1u, 1024u));
  cmd->add_option("--t", a->t,
                  "context lengths T (list): recorded in the JSON; no pipeline depends on T (every pipeline is "
                  "built at load time, for D and H/Hkv)")
      ->delimiter(',')
      ->check(CLI::Range(1u, 1u << 24));
  cmd->add_option("--weights", a->weights,
                  "the model's weight formats (list of f16, q8_0, q4_0): also the quantized pipelines "
                  "of each block format, as a model loaded with those weights builds them")
      ->delimiter(',')
      ->check(CLI::IsMember({"f16", "q8_0", "q4_0"}));
  cmd->add_option("--json", a->json_path,
                  "write {device, pipelines: [{name, spec, workgroup, stats}]} to FILE (atomic); "
                  "with --list, {variants: [...]}");
  cmd->add_flag("--list", a->list,
                "print every shader variant the library embeds (the table shaders/variants.cmake: "
                "name, precision, subgroup, registry, source, defines, spec constants) and exit; "
                "opens no device");
  cmd->add_option("--isa", a->isa_dir,
                  "write each pipeline's internal representations (the driver's IR and disassembly, where it "
                  "gives them: radv does) to DIR/<index>_<name>_<representation>.txt, and report its main "
                  "loop (instructions, VALU, FMAs, loads per iteration; \"loop\" in the JSON)");
  return [a]() {
    if (a->list) return list_variants(a->json_path);
    ShaderStatsOptions o;
    o.context = a->dev.options();
    o.model_dir = a->model;
    o.d = a->d;
    o.heads = a->heads;
    o.kv_heads = a->kv_heads;
    o.t = a->t;
    o.weights = a->weights;
    o.isa = !a->isa_dir.empty();
    if (o.model_dir.empty() && !o.shapes_requested()) o.model_dir = default_model_dir();
    if (o.isa) {
      std::error_code ec;
      std::filesystem::create_directories(a->isa_dir, ec);
      if (ec || !std::filesystem::is_directory(a->isa_dir))
        throw Error(Status::io_error, "--isa " + a->isa_dir + ": cannot create the directory (" + ec.message() + ")");
    }
    const ShaderStatsReport r = shader_stats(o);
    if (o.isa && !r.statistics_available)
      std::printf("isa: unavailable on this driver (no VK_KHR_pipeline_executable_properties): nothing written to %s\n",
                  a->isa_dir.c_str());
    const DeviceCaps& caps = r.device;
    const bool stats = r.statistics_available;

    json shapes_json = json::array();
    for (const auto& s : r.shapes) {
      if (s.model) {
        shapes_json.push_back({{"group", s.group}, {"D", s.D}, {"H", s.H}, {"Hkv", s.Hkv}, {"E", s.E}, {"I", s.I}});
      } else {
        shapes_json.push_back({{"group", s.group}, {"D", s.D}, {"H", s.H}, {"Hkv", s.Hkv}, {"T", s.T}});
      }
    }

    const std::string driver = caps.driver_name + (caps.driver_info.empty() ? "" : ", " + caps.driver_info);
    std::printf("device [%u] %s (%s), %s, subgroup %u, %zu distinct pipelines\n", caps.index, caps.name.c_str(),
                driver.c_str(), r.fp16 ? "fp16 storage" : "fp32", caps.subgroup_size, r.pipelines.size());
    if (!stats)
      std::printf(
          "statistics: unavailable on this driver (no VK_KHR_pipeline_executable_properties / pipelineExecutableInfo); "
          "listing pipelines with their constants and workgroup sizes only\n");
    for (const auto& n : r.notes) std::printf("note: %s\n", n.c_str());

    json out;
    out["device"] = {{"name", caps.name},
                     {"driver_name", caps.driver_name},
                     {"driver_info", caps.driver_info},
                     {"vendor_id", caps.vendor_id},
                     {"device_id", caps.device_id},
                     {"kind", device_kind_name(caps.kind)},
                     {"precision", r.fp16 ? "fp16" : "fp32"},
                     {"subgroup_size", caps.subgroup_size},
                     {"subgroup_arithmetic", r.subgroup_arithmetic}};
    out["statistics_available"] = stats;
    if (!stats)
      out["statistics_note"] = "statistics are unavailable on this driver (no VK_KHR_pipeline_executable_properties)";
    out["shapes"] = shapes_json;
    json pipes = json::array();
    for (size_t i = 0; i < r.pipelines.size(); ++i) {
      const ShaderPipeline& p = r.pipelines[i];
      const auto& wg = p.workgroup;
      std::printf("\n[%zu] %s  workgroup %ux%ux%u  spec %s  compiled in %.0f ms\n", i, p.name.c_str(), wg[0], wg[1],
                  wg[2], spec_text(p).c_str(), p.compile_seconds * 1e3);
      std::string groups;
      for (const auto& g : p.groups) groups += (groups.empty() ? "" : ", ") + g;
      std::printf("    built by: %s\n", groups.c_str());
      json j;
      j["name"] = p.name;
      j["op"] = p.op;
      j["groups"] = p.groups;
      j["spec"] = spec_json(p);
      j["workgroup"] = {wg[0], wg[1], wg[2]};
      j["compile_seconds"] = p.compile_seconds;
      if (stats) {
        json st = json::object();
        json ex = json::array();
        for (const auto& e : p.executables) {
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
        if (p.executables.size() > 1) j["executables"] = ex;
      } else {
        j["stats"] = nullptr;
      }
      if (o.isa) {
        json files = json::array();
        for (const auto& rep : p.isa) {
          std::string tag = rep.name;
          for (char& c : tag)
            if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
          char idx[24];  // a size_t in decimal: 20 digits
          std::snprintf(idx, sizeof idx, "%03zu", i);
          const std::string file = a->isa_dir + "/" + idx + "_" + p.name +
                                   (rep.executable ? "_e" + std::to_string(rep.executable) : "") + "_" + tag + ".txt";
          platform::write_file_atomic(file, rep.text.data(), rep.text.size());
          files.push_back({{"representation", rep.name}, {"executable", rep.executable}, {"file", file}});
        }
        j["isa_files"] = files;
        if (p.loop.found) {
          j["loop"] = {{"instructions", p.loop.instructions},
                       {"valu", p.loop.valu},
                       {"fma", p.loop.fma},
                       {"lds_loads", p.loop.lds_loads},
                       {"memory_loads", p.loop.memory_loads},
                       {"valu_per_fma", p.loop.fma > 0 ? json(p.loop.valu / p.loop.fma) : json(nullptr)}};
          std::printf("    main loop: %u instructions, %u VALU, %g FMA, %u LDS loads, %u memory loads per iteration\n",
                      p.loop.instructions, p.loop.valu, p.loop.fma, p.loop.lds_loads, p.loop.memory_loads);
        } else {
          j["loop"] = nullptr;
        }
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
