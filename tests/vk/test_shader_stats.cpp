// `diffvk shader-stats`: the statistics-only device mode refuses memory and submissions, the
// command lists exactly the pipelines a loaded Model builds (same names and constants), its JSON has
// the documented shape, and on a radv null device (when the driver is installed) every pipeline carries
// the driver's statistics under the driver's names.
#include <doctest/doctest.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "cli_run.hpp"
#include "diffvk/model.hpp"
#include "diffvk/shader_stats.hpp"
#include "gpu_test.hpp"
#include "model_fixture.hpp"
#include "vk/program.hpp"
#include "vk/shader_blob.hpp"

using namespace diffvk;
using json = nlohmann::json;

namespace {

json read_json(const std::string& path) {
  std::ifstream f(path);
  REQUIRE(f.good());
  return json::parse(f);
}

// Checks the documented shape; returns the (name, spec values in constant_id order) of every pipeline.
std::multiset<std::pair<std::string, std::vector<uint32_t>>> check_shape(const json& doc) {
  REQUIRE(doc.is_object());
  REQUIRE(doc.contains("device"));
  CHECK(doc["device"]["name"].is_string());
  CHECK(doc["device"]["precision"].is_string());
  REQUIRE(doc["statistics_available"].is_boolean());
  REQUIRE(doc["pipelines"].is_array());
  REQUIRE(!doc["pipelines"].empty());
  std::multiset<std::pair<std::string, std::vector<uint32_t>>> out;
  for (const auto& p : doc["pipelines"]) {
    INFO(p.dump());
    REQUIRE(p["name"].is_string());
    REQUIRE(p["spec"].is_object());
    REQUIRE(p["workgroup"].is_array());
    REQUIRE(p["workgroup"].size() == 3);
    for (const auto& w : p["workgroup"]) CHECK(w.get<uint32_t>() >= 1);
    // Every shader so far declares `layout(local_size_x_id = 0)` with constant 0 named WG.
    REQUIRE(p["spec"].contains("WG"));
    CHECK(p["workgroup"][0].get<uint32_t>() == p["spec"]["WG"].get<uint32_t>());
    CHECK(p["workgroup"][1].get<uint32_t>() == 1);
    REQUIRE(p["groups"].is_array());
    if (doc["statistics_available"].get<bool>()) {
      REQUIRE(p["stats"].is_object());
      CHECK(!p["stats"].empty());
    } else {
      CHECK(p["stats"].is_null());
    }
    std::vector<uint32_t> spec;
    for (const auto& [k, v] : p["spec"].items()) spec.push_back(v.get<uint32_t>());  // ordered by key name here
    out.insert({p["name"].get<std::string>(), spec});
  }
  return out;
}

std::vector<uint32_t> sorted_by_name(const Pipeline& p) {
  // The JSON object (nlohmann::json, sorted keys) orders constants by name: order the runtime's the same way.
  const auto names = p.spec_names();
  std::vector<std::pair<std::string, uint32_t>> kv;
  for (size_t i = 0; i < p.desc().spec.size(); ++i)
    kv.push_back({names[i].empty() ? std::to_string(i) : names[i], p.desc().spec[i]});
  std::sort(kv.begin(), kv.end());
  std::vector<uint32_t> v;
  for (const auto& e : kv) v.push_back(e.second);
  return v;
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("shader-stats: a statistics-only device refuses buffers and submissions") {
  ContextOptions o = test::validated_options();
  auto dev = Device::create(o, DeviceMode::statistics_only);
  REQUIRE(dev->statistics_only());
  const uint64_t before = device_bytes_allocated();
  try {
    Buffer b(*dev, 256, MemoryDomain::device, "probe");
    FAIL("a buffer was created on a statistics-only device");
  } catch (const Error& e) {
    CHECK(e.status() == Status::unsupported);
    CHECK(contains(e.what(), "pipeline statistics only"));
    CHECK(contains(e.what(), "probe"));
  }
  CHECK_THROWS_AS(dev->command_pool(), Error);
  CHECK_THROWS_AS(dev->one_shot([](VkCommandBuffer) {}), Error);
  CHECK(device_bytes_allocated() == before);
  // Pipelines work, and are registered with their group, constants and workgroup size.
  {
    PipelineGroup g(*dev, "outer");
    PipelineGroup h(*dev, "inner");
    Pipeline p(
        *dev,
        PipelineDesc{"head_rmsnorm"}.with_bindings(3).with_push(24).with_spec({32}).with_subgroup(false).with_fp16(
            dev->fp16()));
    const auto all = dev->pipelines();
    REQUIRE(all.size() == 1);
    CHECK(all[0] == &p);
    CHECK(p.group() == "outer/inner");
    CHECK(p.workgroup() == std::array<uint32_t, 3>{32, 1, 1});
    CHECK(p.spec_names() == std::vector<std::string>{"WG"});
  }
  CHECK(dev->pipelines().empty());
  CHECK(dev->pipeline_group().empty());
  // A pipeline cache file is refused in this mode (it would be loaded and saved).
  o.pipeline_cache_path = "/tmp/diffvk-never-written.cache";
  CHECK_THROWS_AS(Device::create(o, DeviceMode::statistics_only), Error);
}

TEST_CASE("shader-stats: lists exactly the pipelines a loaded model builds on the default device") {
  test::TempDir tmp("diffvk-stats");
  const std::string model = tmp / "model";
  test::write_tiny_model(model);

  // The runtime: a real context and Model::load (weights uploaded), then its device's pipeline registry.
  std::multiset<std::pair<std::string, std::vector<uint32_t>>> runtime;
  bool cpu = false;
  {
    auto ctx = test::make_context();
    cpu = ctx->device().caps().kind == DeviceKind::cpu;
    auto m = Model::load(*ctx, model);
    ctx->device().build_declared_pipelines();  // what its kernels may record (most are compiled on first record)
    for (const Pipeline* p : ctx->device().pipelines()) runtime.insert({p->name(), sorted_by_name(*p)});
  }
  REQUIRE(!runtime.empty());

  const std::string out = tmp / "stats.json";
  const auto r = test::run_cli(tmp, "shader-stats --model " + model + " --json " + out);
  INFO(r.out);
  REQUIRE(r.exit_code == 0);
  CHECK_FALSE(contains(r.out, "validation:"));
  const json doc = read_json(out);
  const auto listed = check_shape(doc);
  // Distinct (name, constants) pairs: the runtime's registry may hold the same pipeline once per kernel.
  const std::set<std::pair<std::string, std::vector<uint32_t>>> a(runtime.begin(), runtime.end()),
      b(listed.begin(), listed.end());
  CHECK(a == b);
  CHECK(listed.size() == b.size());  // the command lists each distinct pipeline once
  std::set<std::string> ops;
  for (const auto& p : doc["pipelines"]) ops.insert(p["op"].get<std::string>());
  for (const char* op : {"diff_attn", "diff_attn_split", "linear_reg", "rope_kv", "head_rmsnorm", "embed", "silu_mul"})
    CHECK_MESSAGE(ops.count(op), op);
  // The shared-memory and matrix-vector tiles are built only where the tile choice can pick them: not on
  // CPU drivers (linear_reachable_variants).
  for (const char* op : {"linear", "linear_vec"}) CHECK_MESSAGE(ops.count(op) == (cpu ? 0u : 1u), op);
  for (const auto& p : doc["pipelines"])
    if (p["op"] == "diff_attn") {
      CHECK(p["spec"].contains("HD"));  // names from shaders/attn_core.glsl
      CHECK(p["spec"].contains("RB"));
      CHECK(p["spec"].contains("CHUNK"));
    }
  if (!doc["statistics_available"].get<bool>()) CHECK(contains(r.out, "statistics: unavailable on this driver"));
}

TEST_CASE("shader-stats: the variant table names exactly the registries' entries, and --list prints it") {
  // shaders/variants.cmake, compiled in: every core variant is in embedded_shaders, every bench variant in
  // diffvk_bench's table, with the table's spec names and word count, and neither registry holds more.
  const std::vector<ShaderVariant> vs = shader_variants();
  size_t n_core = 0, n_bench = 0;
  const ShaderBlob* core = embedded_shaders(&n_core);
  const ShaderBlob* bench = bench_embedded_shaders(&n_bench);
  CHECK(vs.size() == n_core + n_bench);
  std::set<std::string> names, ops;
  size_t core_seen = 0;
  for (const ShaderVariant& v : vs) {
    INFO(v.name);
    CHECK(names.insert(v.name).second);
    ops.insert(v.op);
    CHECK(v.name == v.op + (v.fp16 ? "_fp16" : "_fp32") + (v.subgroup ? "_sg" : ""));
    CHECK(v.source.rfind("shaders/", 0) == 0);
    CHECK(!v.spec.empty());
    const bool is_core = v.registry == "core";
    REQUIRE((is_core || v.registry == "bench"));
    const ShaderBlob* all = is_core ? core : bench;
    const size_t n = is_core ? n_core : n_bench;
    const ShaderBlob* b = nullptr;
    for (size_t i = 0; i < n && !b; ++i)
      if (v.op == all[i].op && all[i].fp16 == int(v.fp16) && all[i].subgroup == int(v.subgroup)) b = &all[i];
    REQUIRE(b != nullptr);
    CHECK(spec_name_list(b->spec_names) == v.spec);
    if (is_core) {
      CHECK(b == &core[core_seen++]);  // the core's table order is its registry order (the pipeline-cache key)
      CHECK(v.words == b->word_count);
    }
  }
  CHECK(core_seen == n_core);
  // The one-row linear's variants are rows of one source, not files.
  for (const char* op : {"linear_row", "linear_row_dot", "linear_row_rope", "linear_row_dot_rope"})
    CHECK_MESSAGE(ops.count(op), op);
  for (const ShaderVariant& v : vs)
    if (v.op == "linear_row_dot_rope") {
      CHECK(v.source == "shaders/linear_row.comp");
      CHECK(v.defines == "DVK_INT_DOT=1 DVK_ROPE_EPI=1");
    }

  // --list opens no device (a device index that does not exist would fail) and prints every variant.
  test::TempDir tmp("diffvk-stats-list");
  const std::string out = tmp / "list.json";
  const auto r = test::run_cli(tmp, "shader-stats --list --device 999 --json " + out);
  INFO(r.out);
  REQUIRE(r.exit_code == 0);
  const json doc = read_json(out);
  REQUIRE(doc["variants"].size() == vs.size());
  for (size_t i = 0; i < vs.size(); ++i) {
    CHECK(doc["variants"][i]["name"] == vs[i].name);
    CHECK(contains(r.out, "\n" + vs[i].name + " "));
  }
}

TEST_CASE("shader-stats: attention shapes on the default device, and bad shapes") {
  test::TempDir tmp("diffvk-stats");
  const std::string out = tmp / "shapes.json";
  const auto s = test::run_cli(tmp, "shader-stats --d 64 --heads 4,3 --kv-heads 2 --t 512 --json " + out);
  INFO(s.out);
  REQUIRE(s.exit_code == 0);
  CHECK_FALSE(contains(s.out, "validation:"));
  CHECK(contains(s.out, "H=3, Hkv=2 skipped"));
  const json doc = read_json(out);
  check_shape(doc);
  bool hd64 = false;
  for (const auto& p : doc["pipelines"])
    if (p["op"] == "diff_attn") hd64 = hd64 || p["spec"]["HD"] == 64;
  CHECK(hd64);
  std::set<std::string> ops;
  for (const auto& p : doc["pipelines"]) ops.insert(p["op"].get<std::string>());
  // DIFF V2 at the shape, and SambaY's own kernels (group "SambaY d_conv=4 d_state=16", no shape of their own).
  for (const char* op : {"diff_v2_attn", "diff_v2_attn_split", "selective_scan", "conv1d_state", "layer_norm"})
    CHECK_MESSAGE(ops.count(op), op);
  // The shape's model kernels, DIFF V2 attention at that shape, and the Q8_0 KV cache's kernels (KVQ8 = 1).
  REQUIRE(doc["shapes"].size() == 3);
  CHECK(doc["shapes"][0]["T"] == json::array({512}));
  CHECK(doc["shapes"][1]["group"] == "DIFF V2 D=64 H=4 Hkv=2");
  CHECK(doc["shapes"][2]["group"] == "Q8_0 KV D=64 H=4 Hkv=2");
  bool kvq8 = false;
  for (const auto& p : doc["pipelines"])
    if (p["op"] == "diff_attn_split") kvq8 = kvq8 || (p["spec"].contains("KVQ8") && p["spec"]["KVQ8"] == 1);
  CHECK(kvq8);
  const auto bad = test::run_cli(tmp, "shader-stats --d 62 --heads 3 --kv-heads 2");
  CHECK(bad.exit_code != 0);
  CHECK(contains(bad.out, "H must be a multiple of Hkv"));
}

TEST_CASE("shader-stats: radv null device vangogh reports the driver's statistics") {
  const char* icd = "/usr/share/vulkan/icd.d/radeon_icd.x86_64.json";
  if (!std::ifstream(icd).good()) {
    test::skip(std::string("no radv ICD (") + icd +
               "; apt-get install mesa-vulkan-drivers): radv null-device case not run");
    return;
  }
  test::TempDir tmp("diffvk-stats-radv");
  const std::string out = tmp / "vangogh.json";
  // Validation off: this checks the driver's statistics; the pipelines are validated on the default device.
  const auto r = test::run_cli(tmp, "shader-stats --d 64 --heads 8 --kv-heads 2 --json " + out,
                               std::string("env VK_DRIVER_FILES=") + icd +
                                   " RADV_FORCE_FAMILY=vangogh NODEVICE_SELECT=1 DIFFVK_VALIDATION=0 DIFFVK_DEVICE= ");
  INFO(r.out);
  REQUIRE(r.exit_code == 0);
  const json doc = read_json(out);
  CHECK(contains(doc["device"]["name"].get<std::string>(), "VANGOGH"));
  REQUIRE(doc["statistics_available"].get<bool>());
  check_shape(doc);
  for (const auto& p : doc["pipelines"]) {
    INFO(p["name"].get<std::string>());
    // radv's names, exactly as the driver gives them.
    for (const char* stat :
         {"SGPRs", "VGPRs", "Spilled SGPRs", "Spilled VGPRs", "LDS size", "Scratch size", "Subgroups per SIMD"}) {
      REQUIRE_MESSAGE(p["stats"].contains(stat), stat);
      CHECK(p["stats"][stat].is_number_unsigned());
    }
    CHECK(p["stats"]["VGPRs"].get<uint64_t>() > 0);
    CHECK(p["stats"]["Subgroups per SIMD"].get<uint64_t>() > 0);
  }
}

TEST_CASE("shader-stats: --isa writes radv's disassembly and measures each pipeline's main loop") {
  const char* icd = "/usr/share/vulkan/icd.d/radeon_icd.x86_64.json";
  if (!std::ifstream(icd).good()) {
    test::skip(std::string("no radv ICD (") + icd + "; apt-get install mesa-vulkan-drivers): --isa case not run");
    return;
  }
  test::TempDir tmp("diffvk-stats-isa");
  const std::string out = tmp / "gfx1100.json", dir = tmp / "isa";
  const auto r = test::run_cli(tmp, "shader-stats --d 64 --heads 8 --kv-heads 2 --isa " + dir + " --json " + out,
                               std::string("env VK_DRIVER_FILES=") + icd +
                                   " RADV_FORCE_FAMILY=gfx1100 NODEVICE_SELECT=1 DIFFVK_VALIDATION=0 DIFFVK_DEVICE= ");
  INFO(r.out);
  REQUIRE(r.exit_code == 0);
  const json doc = read_json(out);
  REQUIRE(doc["statistics_available"].get<bool>());
  bool attn = false;
  for (const auto& p : doc["pipelines"]) {
    INFO(p["name"].get<std::string>());
    REQUIRE(p.contains("isa_files"));
    bool assembly = false;
    for (const auto& f : p["isa_files"]) {
      CHECK(std::ifstream(f["file"].get<std::string>()).good());
      assembly = assembly || contains(f["representation"].get<std::string>(), "ssembl");
    }
    CHECK(assembly);
    if (p["op"] == "diff_attn") {  // the key loop: one K and one V chunk per lane, FMAs for every slot
      attn = true;
      REQUIRE(p["loop"].is_object());
      CHECK(p["loop"]["fma"].get<double>() >= 8);
      CHECK(p["loop"]["instructions"].get<uint32_t>() > p["loop"]["valu"].get<uint32_t>());
      CHECK(p["loop"]["memory_loads"].get<uint32_t>() >= 2);
    }
  }
  CHECK(attn);
}

TEST_CASE("shader-stats: the main-loop measure of a disassembly (isa_main_loop)") {
  // Two loops: BB1 (an outer loop around BB2) and BB2 (the inner one, with the FMAs); a forward branch; comments.
  const std::string text =
      "BB0:\n  s_mov_b32 s0, 0 ; bf800000\nBB1:\n  buffer_load_dword v1, v0, s[0:3], 0\nBB2:\n"
      "  v_fmac_f32 v2, v3, v4\n  v_pk_fma_f32 v[4:5], v[6:7], v[8:9], v[4:5]\n  ds_load_b128 v[10:13], v1\n"
      "  v_add_f32 v2, v2, v3\n  s_cbranch_scc1 BB2\n  v_fma_f32 v5, v6, v7, v8\n  s_cbranch_vccnz BB1\n"
      "  s_branch BB3\nBB3:\n  v_wmma_f32_16x16x16_f16 v[0:7], v[8:15], v[16:23], v[0:7]\n  s_endpgm\n";
  const ShaderLoop l = isa_main_loop(text, 32);
  REQUIRE(l.found);
  // The outer loop holds 4 FMAs, the inner 3 (>= 90% of 4? no): the outer one is the main loop.
  CHECK(l.fma == 4);
  CHECK(l.instructions == 8);  // buffer_load .. s_cbranch_vccnz
  CHECK(l.valu == 4);
  CHECK(l.lds_loads == 1);
  CHECK(l.memory_loads == 1);
  // Without the outer FMA, the inner loop holds all of them and is the shortest such loop.
  std::string inner = text;
  inner.replace(inner.find("  v_fma_f32 v5, v6, v7, v8\n"), std::string("  v_fma_f32 v5, v6, v7, v8\n").size(), "");
  const ShaderLoop k = isa_main_loop(inner, 32);
  CHECK(k.fma == 3);
  CHECK(k.instructions == 5);
  CHECK(k.memory_loads == 0);
  // A v_wmma in a loop counts M·N·K / lanes.
  const ShaderLoop w =
      isa_main_loop("BB0:\n  v_wmma_f32_16x16x16_f16 v[0:7], v[8:15], v[16:23], v[0:7]\n  s_cbranch_scc1 BB0\n", 32);
  CHECK(w.fma == 128);
  // RDNA3 dual issue: one VALU instruction, each of its FMA operations counted (Mesa 25's ACO emits them).
  const ShaderLoop d = isa_main_loop(
      "BB0:\n  v_dual_fmac_f32 v1, v2, v3 :: v_dual_fmac_f32 v4, v5, v6 ; c8e20e0a\n"
      "  v_dual_mul_f32 v7, s1, v8 :: v_dual_fmac_f32 v9, v2, v3\n  s_cbranch_scc1 BB0\n",
      32);
  CHECK(d.fma == 3);
  CHECK(d.valu == 2);
  CHECK_FALSE(isa_main_loop("  s_endpgm\n", 64).found);
}
