// diffvk::shader_stats (include/diffvk/shader_stats.hpp): builds the kernels of a model and/or of attention
// shapes on a statistics-only device and collects every distinct pipeline with the driver's statistics.
// `diffvk shader-stats` (examples/cli/shader_stats.cpp) only prints the report.
#include "diffvk/shader_stats.hpp"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstring>
#include <map>
#include <utility>

#include "diffvk/model.hpp"
#include "model/model_kernels.hpp"
#include "vk/gpu.hpp"
#include "vk/shader_blob.hpp"

namespace diffvk {

ShaderStatsReport shader_stats(const ShaderStatsOptions& options) {
  auto device = Device::create(options.context, DeviceMode::statistics_only);
  Device& dev = *device;
  dev.capture_representations(options.isa);  // before any pipeline is built
  ShaderStatsReport report;

  std::vector<ModelKernels> kernels;  // kept alive until every pipeline has been queried
  if (!options.model_dir.empty()) {
    const ModelConfig c = read_model_config(options.model_dir);  // native or Hugging Face DiffLlama
    const std::string label = "model " + options.model_dir;
    PipelineGroup g(dev, label);
    std::vector<QuantType> quant;
    for (const std::string& w : options.weights) {
      const QuantType q = parse_quant_type(w);  // invalid_argument naming it otherwise
      if (q != QuantType::f16) quant.push_back(q);
    }
    kernels.push_back(build_model_kernels(dev, c, quant));
    ShaderStatsShape s;
    s.group = label;
    s.model = true;
    s.D = c.head_dim();
    s.H = c.num_heads;
    s.Hkv = c.num_kv_heads;
    s.E = c.hidden_size;
    s.I = c.intermediate_size;
    report.shapes.push_back(std::move(s));
  }
  if (options.shapes_requested()) {
    const std::vector<uint32_t> Ds = options.d.empty() ? std::vector<uint32_t>{64, 128} : options.d;
    const std::vector<uint32_t> Hs = options.heads.empty() ? std::vector<uint32_t>{32} : options.heads;
    const std::vector<uint32_t> Hkvs = options.kv_heads.empty() ? std::vector<uint32_t>{8} : options.kv_heads;
    for (uint32_t D : Ds) {
      if (D % 2) throw Error(Status::invalid_argument, "shader-stats: D=" + std::to_string(D) + " must be even");
      for (uint32_t H : Hs)
        for (uint32_t Hkv : Hkvs) {
          if (Hkv == 0 || H % Hkv) {
            report.notes.push_back("H=" + std::to_string(H) + ", Hkv=" + std::to_string(Hkv) +
                                   " skipped: H must be a multiple of Hkv");
            continue;
          }
          // The kernels of a model with these attention shapes (E = 2·D·H); only D and H/Hkv select pipelines.
          ModelConfig c;
          c.num_heads = H;
          c.num_kv_heads = Hkv;
          c.hidden_size = 2 * D * H;
          const std::string label =
              "D=" + std::to_string(D) + " H=" + std::to_string(H) + " Hkv=" + std::to_string(Hkv);
          {
            PipelineGroup g(dev, label);
            kernels.push_back(build_model_kernels(dev, c));
          }
          ShaderStatsShape s;
          s.group = label;
          s.D = D;
          s.H = H;
          s.Hkv = Hkv;
          s.T = options.t;
          report.shapes.push_back(s);
          // DIFF V2 attention at the same shape (H output heads: 2H query heads, 2H/Hkv per KV head).
          ModelKernels v2;
          {
            PipelineGroup g2(dev, "DIFF V2 " + label);
            v2.attn = std::make_unique<DiffAttnKernel>(dev, KernelOptions::for_op(dev, "attention"), D, 2 * H / Hkv, 8,
                                                       AttnSoftmax::v2);
          }
          kernels.push_back(std::move(v2));
          s.group = "DIFF V2 " + label;
          report.shapes.push_back(s);
          // The Q8_0 KV cache's append, shift and attention at the same shape.
          if (kv_format_problem(KvFormat::q8_0, 2 * D).empty()) {
            ModelKernels q8;
            {
              PipelineGroup g3(dev, "Q8_0 KV " + label);
              build_kv_q8_kernels(dev, c, q8);
            }
            kernels.push_back(std::move(q8));
            s.group = "Q8_0 KV " + label;
            report.shapes.push_back(std::move(s));
          }
        }
    }
    if (kernels.empty())
      throw Error(Status::invalid_argument, "shader-stats: no valid (H, Hkv) pair: H must be a multiple of Hkv");
    // SambaY's own kernels at Phi-4-mini-flash's sizes (d_conv 4, d_state 16; docs/phi4flash.md): their pipelines do
    // not depend on D or H.
    ModelKernels sambay;
    {
      PipelineGroup g(dev, "SambaY d_conv=4 d_state=16");
      build_sambay_kernels(dev, 4, 16, sambay);
    }
    kernels.push_back(std::move(sambay));
  }

  dev.build_declared_pipelines();  // the kernels' lazy pipelines: this device records nothing
  const DeviceCaps& caps = dev.caps();
  report.device = caps;
  report.fp16 = dev.fp16();
  report.subgroup_arithmetic = dev.subgroup_arithmetic();
  report.statistics_available = dev.pipeline_statistics();

  // Distinct pipelines (name + constants), in creation order, with every group that created them.
  std::vector<const Pipeline*> distinct;
  std::map<std::pair<std::string, std::vector<uint32_t>>, size_t> index;
  for (const Pipeline* p : dev.pipelines()) {
    auto key = std::make_pair(p->name(), p->desc().spec);
    auto it = index.find(key);
    if (it == index.end()) {
      index[key] = distinct.size();
      distinct.push_back(p);
      ShaderPipeline e;
      e.name = p->name();
      e.op = p->desc().op;
      e.groups.push_back(p->group());
      const auto names = p->spec_names();
      for (size_t i = 0; i < p->desc().spec.size(); ++i)
        e.spec.push_back({i < names.size() ? names[i] : std::string(), p->desc().spec[i]});
      e.workgroup = p->workgroup();
      e.compile_seconds = p->compile_seconds();
      report.pipelines.push_back(std::move(e));
    } else {
      report.pipelines[it->second].groups.push_back(p->group());
    }
  }
  if (report.statistics_available) {
    for (size_t i = 0; i < distinct.size(); ++i)
      report.pipelines[i].executables = pipeline_executable_statistics(dev, *distinct[i]);
  }
  if (options.isa && report.statistics_available) {
    for (size_t i = 0; i < distinct.size(); ++i) {
      ShaderPipeline& p = report.pipelines[i];
      for (auto& r : pipeline_internal_representations(dev, *distinct[i]))
        p.isa.push_back({r.executable, std::move(r.name), std::move(r.description), std::move(r.text)});
      for (const auto& r : p.isa) {
        std::string lower = r.name;
        for (char& c : lower) c = char(std::tolower(static_cast<unsigned char>(c)));
        if (r.executable != 0 || lower.find("assembl") == std::string::npos) continue;
        const uint32_t lanes =
            p.executables.empty() || !p.executables[0].subgroup_size ? 64 : p.executables[0].subgroup_size;
        p.loop = isa_main_loop(r.text, lanes);
        break;
      }
    }
  }
  return report;
}

namespace {
bool starts_with(const std::string& s, size_t at, const char* prefix) {
  return s.compare(at, std::strlen(prefix), prefix) == 0;
}
}  // namespace

ShaderLoop isa_main_loop(const std::string& text, uint32_t lanes) {
  // One entry per line: the first token, and a branch target (BBn) where the line branches.
  struct Line {
    std::string op, target;
    std::string op_y;  // RDNA3 dual issue (VOPD, "v_dual_x ... :: v_dual_y ..."): the second operation
    bool label = false;
  };
  std::vector<Line> lines;
  std::map<std::string, size_t> labels;
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    std::string l = text.substr(pos, end - pos);
    pos = end + 1;
    const size_t a = l.find_first_not_of(" \t");
    if (a == std::string::npos) continue;
    l = l.substr(a);
    const size_t sc = l.find(';');  // ACO appends the encoding as a comment
    if (sc == 0) continue;
    if (sc != std::string::npos) l = l.substr(0, sc);
    while (!l.empty() && (l.back() == ' ' || l.back() == '\t' || l.back() == '\r')) l.pop_back();
    Line x;
    if (l.size() > 3 && starts_with(l, 0, "BB") && l.back() == ':') {
      x.label = true;
      x.op = l.substr(0, l.size() - 1);
      labels[x.op] = lines.size();
      lines.push_back(x);
      continue;
    }
    const size_t sp = l.find_first_of(" \t");
    x.op = l.substr(0, sp);
    if (const size_t dd = l.find("::"); dd != std::string::npos) {
      const size_t b = l.find_first_not_of(" \t", dd + 2);
      if (b != std::string::npos) x.op_y = l.substr(b, l.find_first_of(" \t", b) - b);
    }
    if ((starts_with(x.op, 0, "s_cbranch_") || x.op == "s_branch") && sp != std::string::npos) {
      const size_t t = l.find("BB", sp);
      if (t != std::string::npos) x.target = l.substr(t, l.find_first_of(" ,\t", t) - t);
    }
    lines.push_back(x);
  }
  std::vector<ShaderLoop> loops;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (lines[i].target.empty()) continue;
    auto it = labels.find(lines[i].target);
    if (it == labels.end() || it->second >= i) continue;  // forward branch
    ShaderLoop L;
    L.found = true;
    for (size_t k = it->second; k <= i; ++k) {
      const Line& x = lines[k];
      if (x.label) continue;
      const std::string& o = x.op;
      ++L.instructions;
      if (starts_with(o, 0, "v_")) ++L.valu;
      if (starts_with(o, 0, "v_dual_")) {  // one VALU instruction, two operations: count each FMA
        for (const std::string* d : {&o, &x.op_y})
          if (starts_with(*d, 0, "v_dual_fma")) L.fma += 1;
      } else if (starts_with(o, 0, "v_pk_fma") || starts_with(o, 0, "v_dot2"))
        L.fma += 2;
      else if (starts_with(o, 0, "v_fma") || starts_with(o, 0, "v_mac_f32") || starts_with(o, 0, "v_mad_f32"))
        L.fma += 1;
      else if (starts_with(o, 0, "v_wmma_")) {  // v_wmma_<types>_MxNxK: M·N·K multiply-adds over the subgroup
        for (size_t u = o.find('_'); u != std::string::npos; u = o.find('_', u + 1)) {  // the _MxNxK segment
          unsigned m = 0, n = 0, kk = 0;
          if (std::sscanf(o.c_str() + u + 1, "%ux%ux%u", &m, &n, &kk) == 3 && lanes) {
            L.fma += double(m) * n * kk / lanes;
            break;
          }
        }
      }
      if (starts_with(o, 0, "ds_load") || starts_with(o, 0, "ds_read")) ++L.lds_loads;
      if (starts_with(o, 0, "buffer_load") || starts_with(o, 0, "global_load") || starts_with(o, 0, "s_buffer_load") ||
          starts_with(o, 0, "s_load"))
        ++L.memory_loads;
    }
    loops.push_back(L);
  }
  double top = 0;
  for (const auto& L : loops) top = std::max(top, L.fma);
  const ShaderLoop* best = nullptr;
  for (const auto& L : loops)
    if (L.fma >= 0.9 * top && (!best || L.instructions < best->instructions)) best = &L;
  return best ? *best : ShaderLoop{};
}

std::vector<ShaderVariant> shader_variants() {
  size_t n = 0;
  const ShaderVariantRow* rows = shader_variant_rows(&n);
  std::vector<ShaderVariant> out;
  out.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    const ShaderVariantRow& r = rows[i];
    ShaderVariant v;
    v.op = r.op;
    v.name = v.op + (r.fp16 ? "_fp16" : "_fp32") + (r.subgroup ? "_sg" : "");
    v.source = r.source;
    v.defines = r.defines;
    v.fp16 = r.fp16 != 0;
    v.subgroup = r.subgroup != 0;
    v.registry = r.registry;
    v.prebuilt = r.prebuilt != 0;
    v.description = r.description;
    v.words = r.word_count;
    v.spec = spec_name_list(r.spec_names);
    out.push_back(std::move(v));
  }
  return out;
}

}  // namespace diffvk
