// What `diffvk shader-stats` reads about a pipeline: its local size (from the SPIR-V, with the
// specialization constants applied) and the driver's VK_KHR_pipeline_executable_properties statistics.
#include <algorithm>
#include <cstring>
#include <map>

#include "vk/gpu.hpp"

namespace diffvk {

namespace {
// SPIR-V opcodes, decorations and execution modes used below (SPIR-V 1.x unified specification).
constexpr uint32_t kOpExecutionMode = 16, kOpConstant = 43, kOpConstantComposite = 44, kOpSpecConstant = 50,
                   kOpSpecConstantComposite = 51, kOpDecorate = 71, kOpExecutionModeId = 331;
constexpr uint32_t kDecorationSpecId = 1, kDecorationBuiltIn = 11, kBuiltInWorkgroupSize = 25;
constexpr uint32_t kModeLocalSize = 17, kModeLocalSizeId = 38;
constexpr uint32_t kSpirvMagic = 0x07230203;
}  // namespace

std::array<uint32_t, 3> spirv_workgroup_size(const uint32_t* words, size_t count, const std::vector<uint32_t>& spec) {
  if (count < 5 || words[0] != kSpirvMagic) throw Error(Status::internal, "not a SPIR-V module (bad magic number)");
  std::map<uint32_t, uint32_t> spec_id, value;           // result id -> SpecId, scalar default value
  std::map<uint32_t, std::vector<uint32_t>> composites;  // result id -> constituent ids
  uint32_t builtin_wg = 0;
  bool have_literal = false, have_ids = false;
  std::array<uint32_t, 3> literal{1, 1, 1}, ids{0, 0, 0};
  for (size_t i = 5; i < count;) {
    const uint32_t n = words[i] >> 16, op = words[i] & 0xffff;
    if (n == 0 || i + n > count)
      throw Error(Status::internal, "truncated SPIR-V instruction at word " + std::to_string(i));
    const uint32_t* w = words + i;
    if (op == kOpDecorate && n >= 4 && w[2] == kDecorationSpecId)
      spec_id[w[1]] = w[3];
    else if (op == kOpDecorate && n >= 4 && w[2] == kDecorationBuiltIn && w[3] == kBuiltInWorkgroupSize)
      builtin_wg = w[1];
    else if ((op == kOpConstant || op == kOpSpecConstant) && n >= 4)
      value[w[2]] = w[3];
    else if ((op == kOpConstantComposite || op == kOpSpecConstantComposite) && n >= 3)
      composites[w[2]] = std::vector<uint32_t>(w + 3, w + n);
    else if (op == kOpExecutionMode && n >= 6 && w[2] == kModeLocalSize) {
      literal = {w[3], w[4], w[5]};
      have_literal = true;
    } else if (op == kOpExecutionModeId && n >= 6 && w[2] == kModeLocalSizeId) {
      ids = {w[3], w[4], w[5]};
      have_ids = true;
    }
    i += n;
  }
  auto resolve = [&](uint32_t id) -> uint32_t {
    auto s = spec_id.find(id);
    if (s != spec_id.end() && s->second < spec.size()) return spec[s->second];
    auto v = value.find(id);
    if (v == value.end())
      throw Error(Status::internal, "the workgroup size uses SPIR-V id " + std::to_string(id) +
                                        ", which is not a scalar (specialization) constant");
    return v->second;
  };
  if (builtin_wg) {
    auto c = composites.find(builtin_wg);
    if (c == composites.end() || c->second.size() != 3)
      throw Error(Status::internal, "the WorkgroupSize built-in is not a 3-component constant");
    return {resolve(c->second[0]), resolve(c->second[1]), resolve(c->second[2])};
  }
  if (have_ids) return {resolve(ids[0]), resolve(ids[1]), resolve(ids[2])};
  if (have_literal) return literal;
  throw Error(Status::internal, "the SPIR-V declares no local size");
}

namespace {
// A VK_KHR_pipeline_executable_properties entry point of a statistics device; throws Error(unsupported)
// when the device did not enable the extension or the driver returns no such entry point.
template <class F>
F exec_props_proc(const Device& device, const char* name) {
  if (!device.pipeline_statistics())
    throw Error(Status::unsupported,
                "pipeline statistics and representations need VK_KHR_pipeline_executable_properties, "
                "enabled only on a device opened for statistics on a driver that has it");
  F f = reinterpret_cast<F>(vkGetDeviceProcAddr(device.handle(), name));
  if (!f)
    throw Error(Status::unsupported,
                std::string("the driver enabled VK_KHR_pipeline_executable_properties but returns no ") + name);
  return f;
}
}  // namespace

std::vector<ShaderExecutable> pipeline_executable_statistics(const Device& device, const Pipeline& pipeline) {
  auto get_props =
      exec_props_proc<PFN_vkGetPipelineExecutablePropertiesKHR>(device, "vkGetPipelineExecutablePropertiesKHR");
  auto get_stats =
      exec_props_proc<PFN_vkGetPipelineExecutableStatisticsKHR>(device, "vkGetPipelineExecutableStatisticsKHR");
  VkDevice dev = device.handle();
  VkPipelineInfoKHR info{VK_STRUCTURE_TYPE_PIPELINE_INFO_KHR};
  info.pipeline = pipeline.handle();
  uint32_t n = 0;
  DVK_CHECK(get_props(dev, &info, &n, nullptr));
  std::vector<VkPipelineExecutablePropertiesKHR> props(n, {VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_PROPERTIES_KHR});
  DVK_CHECK(get_props(dev, &info, &n, props.data()));
  props.resize(n);
  std::vector<ShaderExecutable> out;
  for (uint32_t e = 0; e < n; ++e) {
    ShaderExecutable x;
    x.name = props[e].name;
    x.description = props[e].description;
    x.subgroup_size = props[e].subgroupSize;
    VkPipelineExecutableInfoKHR ei{VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_INFO_KHR};
    ei.pipeline = pipeline.handle();
    ei.executableIndex = e;
    uint32_t ns = 0;
    DVK_CHECK(get_stats(dev, &ei, &ns, nullptr));
    std::vector<VkPipelineExecutableStatisticKHR> st(ns, {VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_STATISTIC_KHR});
    DVK_CHECK(get_stats(dev, &ei, &ns, st.data()));
    st.resize(ns);
    for (const auto& s : st) {
      ShaderStatistic p;
      p.name = s.name;
      p.description = s.description;
      using F = ShaderStatistic::Format;
      switch (s.format) {
        case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_BOOL32_KHR:
          p.format = F::boolean, p.b = s.value.b32 != VK_FALSE;
          break;
        case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_INT64_KHR:
          p.format = F::int64, p.i64 = s.value.i64;
          break;
        case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_UINT64_KHR:
          p.format = F::uint64, p.u64 = s.value.u64;
          break;
        case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_FLOAT64_KHR:
          p.format = F::float64, p.f64 = s.value.f64;
          break;
        default:
          throw Error(Status::internal, pipeline.name() + ": statistic '" + p.name + "' has an unknown format " +
                                            std::to_string(int(s.format)));
      }
      x.statistics.push_back(std::move(p));
    }
    out.push_back(std::move(x));
  }
  return out;
}

std::vector<ShaderRepresentation> pipeline_internal_representations(const Device& device, const Pipeline& pipeline) {
  if (!device.capture_representations()) return {};  // the pipeline kept none
  auto get_props =
      exec_props_proc<PFN_vkGetPipelineExecutablePropertiesKHR>(device, "vkGetPipelineExecutablePropertiesKHR");
  auto get_reps = exec_props_proc<PFN_vkGetPipelineExecutableInternalRepresentationsKHR>(
      device, "vkGetPipelineExecutableInternalRepresentationsKHR");
  VkDevice dev = device.handle();
  VkPipelineInfoKHR info{VK_STRUCTURE_TYPE_PIPELINE_INFO_KHR};
  info.pipeline = pipeline.handle();
  uint32_t n = 0;
  DVK_CHECK(get_props(dev, &info, &n, nullptr));
  std::vector<ShaderRepresentation> out;
  for (uint32_t e = 0; e < n; ++e) {
    VkPipelineExecutableInfoKHR ei{VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_INFO_KHR};
    ei.pipeline = pipeline.handle();
    ei.executableIndex = e;
    uint32_t nr = 0;
    DVK_CHECK(get_reps(dev, &ei, &nr, nullptr));
    std::vector<VkPipelineExecutableInternalRepresentationKHR> reps(
        nr, {VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_INTERNAL_REPRESENTATION_KHR});
    DVK_CHECK(get_reps(dev, &ei, &nr, reps.data()));  // sizes (pData null)
    reps.resize(nr);
    std::vector<std::vector<char>> data(nr);
    for (uint32_t r = 0; r < nr; ++r) {
      data[r].resize(reps[r].dataSize);
      reps[r].pData = data[r].empty() ? nullptr : data[r].data();
    }
    const VkResult res = get_reps(dev, &ei, &nr, reps.data());
    if (res != VK_SUCCESS && res != VK_INCOMPLETE) DVK_CHECK(res);
    for (uint32_t r = 0; r < nr && r < data.size(); ++r) {
      if (!reps[r].isText) continue;
      ShaderRepresentation x;
      x.executable = e;
      x.name = reps[r].name;
      x.description = reps[r].description;
      const size_t len = std::min<size_t>(reps[r].dataSize, data[r].size());
      x.text.assign(data[r].data(), strnlen(data[r].data(), len));  // text data ends with a NUL
      out.push_back(std::move(x));
    }
  }
  return out;
}

}  // namespace diffvk
