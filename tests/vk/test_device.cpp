// Device layer: listing, probing, selection (pure), quirks, precision fallback, barrier planning,
// fault injection through the call wrapper.
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <set>
#include <thread>

#include "gpu_test.hpp"
#include "ops/head_rmsnorm.hpp"
#include "ops/linear_quant.hpp"
#include "platform.hpp"
#include "status_of.hpp"
#include "vk/device_rules.hpp"
#include "vk/instance.hpp"
#include "vk/program.hpp"
#include "vk/tuning.hpp"

using namespace diffvk;

namespace {
DeviceCaps fake(uint32_t index, DeviceKind kind, const char* name) {
  DeviceCaps c;
  c.index = index;
  c.kind = kind;
  c.name = name;
  return c;
}

// The set-up of the program tests: an fp32 context, the norm kernel and one buffer with x (n floats at 0)
// and w (n floats at 1024). step() records y = norm(buf[from..]) scaled by w into buf[to..].
struct NormChain {
  static constexpr uint32_t n = 64;
  std::unique_ptr<Context> ctx = test::make_context(Precision::fp32);
  Device& dev = ctx->device();
  HeadRmsNormKernel k{dev, KernelOptions::for_device(dev)};
  Buffer buf;
  NormChain(VkDeviceSize bytes, const std::vector<float>& x, const std::vector<float>& w)
      : buf(dev, bytes, MemoryDomain::device, "chain") {
    buf.upload(0, x.data(), n * 4);
    buf.upload(1024, w.data(), n * 4);
  }
  void step(Program& prog, VkDeviceSize from, VkDeviceSize to) const {
    k.record(prog, buf.range(from, n * 4), buf.range(1024, n * 4), buf.range(to, n * 4),
             HeadRmsNormParams{1, 1, n, n, 0.5f, 1e-5f});
  }
};
}  // namespace

TEST_CASE("device: selection by kind order, index and name substring") {
  std::vector<DeviceCaps> d = {fake(0, DeviceKind::cpu, "llvmpipe (LLVM 15)"),
                               fake(1, DeviceKind::integrated, "Mali-G715"),
                               fake(2, DeviceKind::discrete, "NVIDIA H100"), fake(3, DeviceKind::virtual_gpu, "virgl")};
  CHECK(select_device(d, "") == 2);
  d.erase(d.begin() + 2);
  CHECK(select_device(d, "") == 1);
  CHECK(select_device(d, "0") == 0);
  CHECK(select_device(d, "LLVMPIPE") == 0);
  CHECK(select_device(d, "mali") == 1);
  CHECK_THROWS_AS(select_device(d, "7"), Error);
  CHECK_THROWS_AS(select_device(d, "adreno"), Error);
  CHECK_THROWS_AS(select_device(d, "99999999999999999999"), Error);
  try {
    select_device(d, "adreno");
  } catch (const Error& e) {
    CHECK(e.status() == Status::invalid_argument);
    CHECK(std::string(e.what()).find("Mali-G715") != std::string::npos);  // lists what exists
  }
}

TEST_CASE("device: probed caps are complete and sane") {
  auto devs = list_devices();
  REQUIRE(!devs.empty());
  for (const auto& c : devs) {
    INFO(c.describe());
    CHECK(!c.name.empty());
    CHECK(c.subgroup_size >= 1);
    CHECK(c.subgroup_min_size <= c.subgroup_size);
    CHECK(c.subgroup_size <= c.subgroup_max_size);
    CHECK(c.max_shared_memory >= 16384);  // Vulkan minimum
    CHECK(c.max_workgroup_invocations >= 128);
    CHECK(c.max_storage_buffer_range >= (1u << 27) - 1);
    CHECK(c.min_storage_buffer_offset_alignment >= 1);
    CHECK(!c.heaps.empty());
    CHECK(!c.memory_types.empty());
    CHECK(c.describe().find("subgroup size") != std::string::npos);
  }
}

TEST_CASE("device: quirks table matches by capability") {
  DeviceCaps c;
  c.driver_id = VK_DRIVER_ID_MESA_LLVMPIPE;
  c.storage_16bit = true;
  c.fp16_arithmetic = false;
  apply_quirks(c);
  CHECK(c.has_quirk("broken_fp16_storage"));
  CHECK_FALSE(c.fp16_usable());
  c.fp16_arithmetic = true;
  c.compute_units = 8;
  apply_quirks(c);
  CHECK_FALSE(c.has_quirk("broken_fp16_storage"));
  CHECK_FALSE(c.has_quirk("no_compute_unit_count"));
  CHECK(c.fp16_usable());
  for (const auto& q : c.quirks) CHECK(std::string(q.reason).size() > 10);

  // Mesa 26.1 lavapipe lists cooperative matrices at every vector width but crashes compiling them at subgroups of
  // 16 (512-bit vectors): the shape is dropped with a note, and coopmat_emulated goes with it.
  c.kind = DeviceKind::cpu;
  c.coopmat_m = c.coopmat_n = c.coopmat_k = 8;
  c.subgroup_size = 8;
  apply_quirks(c);
  CHECK(c.has_quirk("coopmat_emulated"));
  CHECK_FALSE(c.has_quirk("coopmat_wide_subgroup_crash"));
  CHECK(c.coopmat_m == 8);
  c.subgroup_size = 16;
  apply_quirks(c);
  CHECK(c.has_quirk("coopmat_wide_subgroup_crash"));
  CHECK_FALSE(c.has_quirk("coopmat_emulated"));
  CHECK(c.coopmat_m == 0);
  CHECK(c.coopmat_note.find("coopmat_wide_subgroup_crash") != std::string::npos);

  // Two lanes per feature in the one-row kernels on LLVM <= 15 lavapipe only (the device name carries the version).
  c.name = "llvmpipe (LLVM 15.0.6, 256 bits)";
  apply_quirks(c);
  CHECK(c.has_quirk("row_lane_pairs"));
  c.name = "llvmpipe (LLVM 19.1.7, 256 bits)";
  apply_quirks(c);
  CHECK_FALSE(c.has_quirk("row_lane_pairs"));
  c.name = "llvmpipe";  // no version: the default, one lane
  apply_quirks(c);
  CHECK_FALSE(c.has_quirk("row_lane_pairs"));
}

// The one tuning path (runtime/vk/tuning.cpp), pure: DIFFVK_TUNING's parser, then caps, quirks and overrides
// resolved with why, on simulated devices (no device opened).
namespace {
// What parse_tuning says of `text`: "accepted", or its invalid_argument message.
std::string parse_error(const std::string& text) {
  try {
    parse_tuning(text, "DIFFVK_TUNING");
  } catch (const Error& e) {
    CHECK(e.status() == Status::invalid_argument);
    return std::string(e.what());
  }
  return std::string("accepted");
}
}  // namespace

TEST_CASE("device: DIFFVK_TUNING parses key=value lists, refuses unknown keys and bad values, and records why") {
  const auto ov = parse_tuning(
      " coopmat=off, attn_core = blocks,,row_lanes=4,linear_reg_share=broadcast,quirk=no_kv_staging", "DIFFVK_TUNING");
  REQUIRE(ov.size() == 5);
  CHECK(ov[1].key == "attn_core");
  CHECK(ov[1].value == "blocks");
  CHECK(ov[1].setting() == "attn_core=blocks (DIFFVK_TUNING)");
  CHECK(parse_tuning("", "DIFFVK_TUNING").empty());
  auto error = parse_error;
  CHECK(error("tile_size=4").find("'tile_size' is unknown") != std::string::npos);
  CHECK(error("attn_core=fast").find("'attn_core' must be") != std::string::npos);
  CHECK(error("coopmat").find("'coopmat' has no value") != std::string::npos);
  CHECK(error("quirk=no_such_quirk").find("no_such_quirk") != std::string::npos);
  for (const char* bad : {"row_lanes=3", "row_lanes=-4", "row_lanes=four", "row_lanes=2048", "row_lanes="})
    CHECK(error(bad).find("'row_lanes'") != std::string::npos);
  CHECK(error("row_lanes=1024") == "accepted");
  CHECK(error("DIFFVK_TUNING=coopmat=on").find("DIFFVK_TUNING") != std::string::npos);

  // A CPU driver: its quirks choose the per-key core and the shuffles; the overrides change both, saying so.
  DeviceCaps c;
  c.kind = DeviceKind::cpu;
  c.name = "sim";
  c.subgroup_arithmetic_compute = true;  // as lavapipe: the key-block cores can be forced
  apply_quirks(c);
  DeviceCaps auto_caps = c;
  const Tuning t = apply_tuning(auto_caps, {});
  CHECK(t.attn_core == "keys");
  CHECK(t.why("attn_core") == "quirk per_key_attention");
  CHECK(t.linear_reg_shuffle);
  CHECK(t.why("linear_reg_share").rfind("cap: ", 0) == 0);
  CHECK_FALSE(t.coopmat);
  CHECK(t.row_lanes == 0);
  CHECK(t.describe().find("attn_core") != std::string::npos);
  DeviceCaps forced = c;
  const Tuning f =
      apply_tuning(forced, parse_tuning("attn_core=blocks,linear_reg_share=broadcast,row_lanes=2", "DIFFVK_TUNING"));
  CHECK(f.attn_core == "blocks");
  CHECK(f.why("attn_core") == "override attn_core=blocks (DIFFVK_TUNING)");
  CHECK_FALSE(forced.has_quirk("per_key_attention"));
  CHECK(forced.has_quirk("no_kv_staging"));
  CHECK_FALSE(f.linear_reg_shuffle);
  CHECK(f.row_lanes == 2);
  // row_prologue: a CPU driver splits the one-row prologues, a GPU fuses them; fused and split override both.
  CHECK(t.row_prologue_split);
  CHECK(t.why("row_prologue").rfind("cap: CPU driver", 0) == 0);
  for (const auto& [value, split] : {std::pair<const char*, bool>{"fused", false}, {"split", true}}) {
    DeviceCaps o = c;
    const Tuning r = apply_tuning(o, parse_tuning(std::string("row_prologue=") + value, "DIFFVK_TUNING"));
    CHECK(r.row_prologue_split == split);
    CHECK(r.why("row_prologue") == std::string("override row_prologue=") + value + " (DIFFVK_TUNING)");
  }
  CHECK(error("row_prologue=sometimes").find("'row_prologue' must be") != std::string::npos);
  // attn_decode: a CPU driver runs decode's attention on the prefill kernel, a GPU on the split-K one; both override.
  CHECK(t.attn_decode_prefill);
  CHECK(t.why("attn_decode").rfind("cap: CPU driver", 0) == 0);
  for (const auto& [value, prefill] : {std::pair<const char*, bool>{"split", false}, {"prefill", true}}) {
    DeviceCaps o = c;
    const Tuning r = apply_tuning(o, parse_tuning(std::string("attn_decode=") + value, "DIFFVK_TUNING"));
    CHECK(r.attn_decode_prefill == prefill);
    CHECK(r.why("attn_decode") == std::string("override attn_decode=") + value + " (DIFFVK_TUNING)");
  }
  CHECK(error("attn_decode=sometimes").find("'attn_decode' must be") != std::string::npos);
  // A later override of a key wins; auto goes back to the device's choice.
  DeviceCaps again = c;
  CHECK(apply_tuning(again, parse_tuning("attn_core=staged,attn_core=auto", "x")).attn_core == "keys");
  // Cooperative matrices forced on a device without a usable shape: unsupported, naming the setting.
  DeviceCaps none = c;
  try {
    apply_tuning(none, parse_tuning("coopmat=on", "DIFFVK_TUNING"));
    FAIL("coopmat=on was accepted without a shape");
  } catch (const Error& e) {
    CHECK(e.status() == Status::unsupported);
    CHECK(std::string(e.what()).find("coopmat=on (DIFFVK_TUNING)") != std::string::npos);
  }
}

namespace {
// A simulated phone GPU with every feature the kill switches govern (no device opened).
DeviceCaps sim_gpu(uint32_t vendor, const char* name, uint32_t driver_id = 0, uint32_t driver_version = 0) {
  DeviceCaps c;
  c.kind = DeviceKind::integrated;
  c.name = name;
  c.vendor_id = vendor;
  c.driver_id = driver_id;
  c.driver_version = driver_version;
  c.storage_16bit = c.fp16_arithmetic = true;
  c.subgroup_arithmetic_compute = true;
  c.integer_dot_product = c.int8_dot_accelerated = true;
  c.coopmat_m = c.coopmat_n = c.coopmat_k = 16;
  c.compute_units = 8;
  apply_quirks(c);
  return c;
}

Tuning tuned(DeviceCaps& c, const std::string& text) { return apply_tuning(c, parse_tuning(text, "DIFFVK_TUNING")); }

std::string tuning_error(DeviceCaps c, const std::string& text) {
  try {
    tuned(c, text);
  } catch (const Error& e) {
    CHECK(e.status() == Status::invalid_argument);
    return e.what();
  }
  return "accepted";
}
}  // namespace

TEST_CASE(
    "device: the kill switches int_dot, fp16, subgroup, kv_staging and coopmat parse, resolve with why and "
    "change the caps") {
  CHECK(parse_tuning("int_dot=off,fp16=off,subgroup=off,kv_staging=off,kv_staging=on,coopmat=off", "x").size() == 6);
  const DeviceCaps gpu = sim_gpu(0x13B5, "Mali-G715");
  for (const char* bad : {"int_dot=yes", "fp16=on", "subgroup=yes", "kv_staging=blocks", "coopmat=maybe"}) {
    const std::string key = std::string(bad).substr(0, std::string(bad).find('='));
    CHECK(tuning_error(gpu, bad).find("tuning key '" + key + "' must be") != std::string::npos);
  }

  // Nothing set: every feature on, from the caps.
  DeviceCaps c = gpu;
  Tuning t = apply_tuning(c, {});
  CHECK((t.int_dot && t.fp16 && t.subgroup && t.kv_staging && t.coopmat));
  for (const char* key : {"int_dot", "fp16", "subgroup", "kv_staging", "coopmat"}) {
    REQUIRE(t.find(key));
    CHECK(t.find(key)->value == "on");
    CHECK(t.why(key).rfind("cap: ", 0) == 0);
  }
  CHECK(t.attn_core == "staged");
  CHECK_FALSE(t.row_prologue_split);   // a GPU fuses the one-row prologues (row_prologue)
  CHECK_FALSE(t.attn_decode_prefill);  // a GPU decodes on the split-K kernel (attn_decode)
  CHECK(t.find("rules")->value == "none");

  // int_dot=off: the caps lose the integer dot products, so the quantized linears take the dequantize path.
  c = gpu;
  t = tuned(c, "int_dot=off");
  CHECK_FALSE(t.int_dot);
  CHECK(t.why("int_dot") == "override int_dot=off (DIFFVK_TUNING)");
  CHECK_FALSE(c.integer_dot_product);
  CHECK_FALSE(c.int8_dot_accelerated);
  CHECK(choose_quant_row_path(c).path == QuantRowPath::dequant);
  CHECK(choose_quant_row_path(gpu).path == QuantRowPath::int8_dot);
  CHECK(t.fp16);
  // int_dot=on: the int8 paths where the feature is there but not accelerated (a CPU driver); unsupported without it.
  c = gpu;
  c.int8_dot_accelerated = false;
  CHECK(choose_quant_row_path(c).path == QuantRowPath::dequant);
  t = tuned(c, "int_dot=on");
  CHECK(t.int_dot);
  CHECK(c.int8_dot_accelerated);
  CHECK(t.why("int_dot").find("override int_dot=on (DIFFVK_TUNING)") == 0);
  CHECK(choose_quant_row_path(c).path == QuantRowPath::int8_dot);
  c = gpu;
  c.integer_dot_product = c.int8_dot_accelerated = false;
  try {
    tuned(c, "int_dot=on");
    CHECK(false);
  } catch (const Error& e) {
    CHECK(e.status() == Status::unsupported);
    CHECK(std::string(e.what()).find("no shaderIntegerDotProduct") != std::string::npos);
  }

  // fp16=off: the fp32 variants; the precision step takes the cooperative matrices with it, and refuses fp16.
  c = gpu;
  t = tuned(c, "fp16=off");
  CHECK_FALSE(t.fp16);
  CHECK(t.why("fp16") == "override fp16=off (DIFFVK_TUNING)");
  DeviceCaps c16 = c;
  Tuning t16 = t;
  apply_precision(t, c, Precision::automatic);
  CHECK_FALSE(t.coopmat);
  CHECK(c.coopmat_m == 0);
  CHECK(t.why("coopmat").find("fp16 off by override fp16=off (DIFFVK_TUNING)") != std::string::npos);
  try {
    apply_precision(t16, c16, Precision::fp16);
    FAIL("fp16 precision was accepted with fp16=off");
  } catch (const Error& e) {
    CHECK(e.status() == Status::unsupported);
    CHECK(std::string(e.what()).find("fp16=off") != std::string::npos);
  }
  // An fp32 context: fp16 off for the precision, as before the kill switch.
  c = gpu;
  t = apply_tuning(c, {});
  apply_precision(t, c, Precision::fp32);
  CHECK_FALSE(t.fp16);
  CHECK(t.why("fp16") == "ContextOptions::precision fp32");
  CHECK(t.why("coopmat") == "cap: fp32 precision (the cooperative-matrix shaders take fp16)");

  // subgroup=off: shared-memory reductions.
  c = gpu;
  t = tuned(c, "subgroup=off");
  CHECK_FALSE(t.subgroup);
  CHECK(t.why("subgroup") == "override subgroup=off (DIFFVK_TUNING)");
  // ... and so the per-key attention core, saying why (the key-block cores need subgroup arithmetic); forcing one of
  // them with subgroup off is refused, naming both keys.
  CHECK_FALSE(c.subgroup_arithmetic_compute);
  CHECK(t.attn_core == "keys");
  CHECK(t.why("attn_core") ==
        "subgroup off (override subgroup=off (DIFFVK_TUNING)): the key-block cores need subgroup arithmetic");
  for (const char* forced : {"subgroup=off,attn_core=blocks", "subgroup=off,attn_core=staged"})
    CHECK(tuning_error(gpu, forced).find("the key-block cores need subgroup arithmetic, which is off") !=
          std::string::npos);

  // subgroup_off=OP: one kernel's subgroup variants off (the self-test's per-op fallback); the items add up, a
  // case-table op names its kernel, and the caps keep subgroup arithmetic for the other kernels.
  c = gpu;
  t = tuned(c, "subgroup_off=diff_attn,subgroup_off=head_rmsnorm,subgroup_off=attention");
  CHECK(t.subgroup);
  CHECK(c.subgroup_arithmetic_compute);
  CHECK(t.subgroup_off == std::vector<std::string>{"attention", "head_rmsnorm"});
  for (const char* off : {"attention", "diff_attn", "diff_v2_attn", "head_rmsnorm"}) CHECK_FALSE(t.subgroup_for(off));
  for (const char* on : {"linear", "linear_row", "layer_norm", "attn_probs", "silu_mul"}) CHECK(t.subgroup_for(on));
  CHECK(t.find("subgroup_off")->value == "attention+head_rmsnorm");
  CHECK(t.why("subgroup_off") ==
        "override subgroup_off=diff_attn (DIFFVK_TUNING), subgroup_off=head_rmsnorm (DIFFVK_TUNING)");
  CHECK(tuning_error(gpu, "subgroup_off=silu_mul")
            .find("tuning key 'subgroup_off' names 'silu_mul', not a kernel with subgroup variants (known: linear, "
                  "linear_row, linear_row_rope, attention, diff_attn") != std::string::npos);
  // Several kernels joined by '+', as the choice prints them, and each bad name named.
  c = gpu;
  t = tuned(c, "subgroup_off=linear_row+layer_norm");
  CHECK(t.subgroup_off == std::vector<std::string>{"linear", "layer_norm"});
  CHECK(t.find("subgroup_off")->value == "linear+layer_norm");
  CHECK(t.why("subgroup_off") == "override subgroup_off=linear_row+layer_norm (DIFFVK_TUNING)");
  CHECK(tuning_error(gpu, "subgroup_off=linear+silu_mul").find("names 'silu_mul'") != std::string::npos);
  CHECK(tuning_error(gpu, "subgroup_off=linear+").find("names 'linear+'") != std::string::npos);
  c = gpu;
  CHECK(apply_tuning(c, {}).find("subgroup_off")->value == "none");
  // Subgroup off for the whole device: the list changes nothing.
  c = gpu;
  t = tuned(c, "subgroup=off,subgroup_off=linear");
  CHECK(t.subgroup_off.empty());
  CHECK_FALSE(t.subgroup_for("attention"));
  CHECK(t.why("subgroup_off") == "override subgroup_off=linear (DIFFVK_TUNING) (subgroup is off for every kernel)");

  // kv_staging=off: quirk no_kv_staging, so the blocks core, saying why; on drops the quirk (a CPU driver).
  c = gpu;
  t = tuned(c, "kv_staging=off");
  CHECK_FALSE(t.kv_staging);
  CHECK(c.has_quirk("no_kv_staging"));
  CHECK(t.attn_core == "blocks");
  CHECK(t.why("attn_core") == "kv_staging off (override kv_staging=off (DIFFVK_TUNING))");
  DeviceCaps cpu;
  cpu.kind = DeviceKind::cpu;
  apply_quirks(cpu);
  t = apply_tuning(cpu, {});
  CHECK_FALSE(t.kv_staging);
  CHECK(t.why("kv_staging") == "quirk no_kv_staging");
  t = tuned(cpu, "kv_staging=on");
  CHECK(t.kv_staging);
  CHECK_FALSE(cpu.has_quirk("no_kv_staging"));
  CHECK(t.attn_core == "keys");  // quirk per_key_attention still holds
  // attn_core=staged or blocks decides the staging too; a kv_staging that contradicts it is an error naming both.
  const std::string contra = tuning_error(gpu, "attn_core=staged,kv_staging=off");
  CHECK(contra.find("'kv_staging'") != std::string::npos);
  CHECK(contra.find("attn_core=staged (DIFFVK_TUNING)") != std::string::npos);
  CHECK(tuning_error(gpu, "attn_core=blocks,kv_staging=on").find("'kv_staging'") != std::string::npos);
  CHECK(tuning_error(gpu, "attn_core=blocks,kv_staging=off") == "accepted");

  // coopmat=off: the shape goes, in the same table.
  c = gpu;
  t = tuned(c, "coopmat=off");
  CHECK_FALSE(t.coopmat);
  CHECK(c.coopmat_m == 0);
  CHECK(t.why("coopmat") == "override coopmat=off (DIFFVK_TUNING)");

  // The test hooks force_no_fp16 / force_no_subgroup_arithmetic are aliases of fp16=off / subgroup=off: the same path,
  // and a later override of the key wins.
  ContextOptions o;
  o.force_no_fp16 = o.force_no_subgroup_arithmetic = true;
  c = gpu;
  t = apply_tuning(c, tuning_overrides(o, DeviceEnvironment{}));
  CHECK_FALSE(t.fp16);
  CHECK_FALSE(t.subgroup);
  CHECK(t.why("fp16") == "override ContextOptions::force_no_fp16 (fp16=off)");
  CHECK(t.why("subgroup") == "override ContextOptions::force_no_subgroup_arithmetic (subgroup=off)");
  o.tuning = "fp16=auto";
  c = gpu;
  t = apply_tuning(c, tuning_overrides(o, DeviceEnvironment{}));
  CHECK(t.fp16);
  CHECK_FALSE(t.subgroup);
}

// ContextOptions::simulate_subgroup_size (pure: simulate_limits on simulated caps): the caps report the simulated
// size, and what depends on the hardware's subgroups is off, with why, in the one tuning path.
TEST_CASE("device: a simulated subgroup size is planned for, and subgroup operations, size control and coopmat go") {
  DeviceCaps radv = sim_gpu(0x1002, "AMD Radeon (RADV)");
  radv.subgroup_size = radv.subgroup_max_size = 64;
  radv.subgroup_min_size = 32;
  radv.subgroup_size_control = true;
  radv.subgroup_operations = 0xff;
  radv.subgroup_stages = VK_SHADER_STAGE_COMPUTE_BIT;
  radv.max_workgroup_invocations = 1024;
  radv.max_workgroup_size = {1024, 1024, 64};
  for (const uint32_t sg : {16u, 64u}) {  // a Mali's 16 and an Adreno's 64 (64 is radv's default, but its sizes vary)
    CAPTURE(sg);
    ContextOptions o;
    o.simulate_subgroup_size = sg;
    DeviceCaps c = radv;
    simulate_limits(c, o);
    CHECK(c.subgroup_size == sg);
    CHECK(c.subgroup_min_size == sg);
    CHECK(c.subgroup_max_size == sg);
    CHECK_FALSE(c.subgroup_size_control);
    CHECK_FALSE(c.subgroup_arithmetic_compute);
    CHECK(c.subgroup_operations == 0);
    CHECK(c.subgroup_hardware_size == 64);
    CHECK(c.coopmat_m == 0);
    CHECK(c.coopmat_note.find("ContextOptions::simulate_subgroup_size") != std::string::npos);
    CHECK(c.simulated.find("subgroup " + std::to_string(sg) + " (hardware 64 (32..64)") == 0);
    CHECK(c.describe().find("simulated") != std::string::npos);
    // The tuning: subgroup off with why (subgroup=auto cannot bring it back), coopmat off; forcing coopmat on is
    // refused naming the simulation.
    const DeviceCaps simulated = c;
    Tuning t = tuned(c, "subgroup=auto");
    CHECK_FALSE(t.subgroup);
    CHECK(t.why("subgroup") == "cap: simulated subgroup size " + std::to_string(sg) +
                                   " (ContextOptions::simulate_subgroup_size; hardware 64): no subgroup operations");
    CHECK_FALSE(t.coopmat);
    c = simulated;
    try {
      tuned(c, "coopmat=on");
      FAIL("coopmat=on accepted under a simulated subgroup size");
    } catch (const Error& e) {
      CHECK(e.status() == Status::unsupported);
      CHECK(std::string(e.what()).find("simulate_subgroup_size") != std::string::npos);
    }
    // resolve_tuning (`diffvk info`) takes the same path.
    const Tuning r = resolve_tuning(radv, o);
    CHECK_FALSE(r.subgroup);
    CHECK(r.why("subgroup") == t.why("subgroup"));
  }
  // The hardware's one size: nothing is simulated.
  DeviceCaps mali = sim_gpu(0x13B5, "Mali-G715");
  mali.subgroup_size = mali.subgroup_min_size = mali.subgroup_max_size = 16;
  mali.max_workgroup_invocations = 512;
  mali.max_workgroup_size = {512, 512, 512};
  ContextOptions o;
  o.simulate_subgroup_size = 16;
  DeviceCaps c = mali;
  simulate_limits(c, o);
  CHECK(c.subgroup_arithmetic_compute);
  CHECK(c.coopmat_m == 16);
  CHECK(c.subgroup_hardware_size == 0);
  CHECK(c.simulated.empty());
  CHECK(apply_tuning(c, {}).subgroup);
  // Not a power of two up to 128: invalid_argument; wider than a workgroup may be: unsupported.
  for (const uint32_t bad : {3u, 12u, 256u}) {
    o.simulate_subgroup_size = bad;
    c = mali;
    CHECK(test::status_of([&] { simulate_limits(c, o); }) == Status::invalid_argument);
  }
  o.simulate_subgroup_size = 64;
  c = mali;
  c.max_workgroup_size[0] = 32;
  CHECK(test::status_of([&] { simulate_limits(c, o); }) == Status::unsupported);
  // The memory limits are listed beside it.
  o.simulate_subgroup_size = 0;
  o.simulate_max_storage_buffer_range = 128ull << 20;
  o.simulate_max_memory_allocation_size = 256ull << 20;
  o.simulate_heap_bytes = 2ull << 30;
  c = mali;
  c.max_storage_buffer_range = c.max_memory_allocation_size = 4ull << 30;
  c.heaps = {{8ull << 30, true}};
  simulate_limits(c, o);
  CHECK(c.max_storage_buffer_range == (128ull << 20));
  CHECK(c.max_memory_allocation_size == (256ull << 20));
  CHECK(c.heaps[0].size == (2ull << 30));
  CHECK(c.simulated == "storage buffer range 128 MiB, max allocation 256 MiB, heaps at most 2048 MiB");
  CHECK(c.subgroup_arithmetic_compute);
}

TEST_CASE(
    "device: the device rule table matches exactly its devices, switches features off with why, and "
    "rule=-NAME undoes a row") {
  for (const DeviceRule& r : device_rules()) {
    CAPTURE(r.name);
    CHECK(std::string(r.reason).find("ggml-org/") != std::string::npos);  // cites the public report
    CHECK(std::string(r.reason).find('\n') == std::string::npos);
    CHECK_FALSE(r.keys.empty());
    for (const char* key : r.keys) CHECK(parse_tuning(std::string(key) + "=off", "x").size() == 1);
    CHECK(find_device_rule(r.name) == &r);
  }

  // PowerVR on the Pixel 10 (the row's reason cites the report): coopmat and int_dot off, on every Imagination driver.
  const DeviceCaps pvr =
      sim_gpu(0x1010, "PowerVR DXT-48-1536", VK_DRIVER_ID_IMAGINATION_PROPRIETARY, VK_MAKE_VERSION(1, 602, 0));
  REQUIRE(matching_device_rules(pvr).size() == 1);
  CHECK(std::string(matching_device_rules(pvr)[0]->name) == "powervr_token_zero");
  DeviceCaps c = pvr;
  Tuning t = apply_tuning(c, {});
  CHECK_FALSE(t.coopmat);
  CHECK_FALSE(t.int_dot);
  CHECK(c.coopmat_m == 0);
  CHECK_FALSE(c.integer_dot_product);
  CHECK(t.why("coopmat").rfind("deny rule powervr_token_zero: ", 0) == 0);
  CHECK(t.why("int_dot").find("ggml-org/llama.cpp#28502") != std::string::npos);
  CHECK((t.fp16 && t.subgroup && t.kv_staging));  // what the report does not name stays on
  CHECK(t.find("rules")->value == "powervr_token_zero");
  CHECK(t.describe().find("deny rule powervr_token_zero") != std::string::npos);
  // Not its neighbours: another vendor with the same name, or another Imagination-less phone GPU.
  for (uint32_t vendor : {0x13B5u, 0x5143u, 0x1011u, 0x1000u}) {
    DeviceCaps n = sim_gpu(vendor, "PowerVR DXT-48-1536", VK_DRIVER_ID_IMAGINATION_PROPRIETARY);
    CHECK(matching_device_rules(n).empty());
    t = apply_tuning(n, {});
    CHECK((t.coopmat && t.int_dot));
  }
  // rule=-NAME drops the row (the caps decide again); a key's override wins over the row for that key alone.
  c = pvr;
  t = tuned(c, "rule=-powervr_token_zero");
  CHECK((t.coopmat && t.int_dot));
  CHECK(t.find("rules")->value == "none");
  CHECK(t.why("rules").find("dropped: powervr_token_zero by rule=-powervr_token_zero (DIFFVK_TUNING)") !=
        std::string::npos);
  c = pvr;
  t = tuned(c, "coopmat=on");
  CHECK(t.coopmat);
  CHECK(t.why("coopmat").rfind("override coopmat=on", 0) == 0);
  CHECK_FALSE(t.int_dot);
  // rule=NAME forces a row on any device (to test its path); unknown names are invalid_argument naming the key.
  DeviceCaps mali = sim_gpu(0x13B5, "Mali-G715");
  t = tuned(mali, "rule=powervr_token_zero");
  CHECK_FALSE(t.int_dot);
  CHECK(t.why("rules").find("forced: powervr_token_zero") != std::string::npos);
  CHECK(tuning_error(pvr, "rule=no_such_rule").find("tuning key 'rule' names an unknown device rule") !=
        std::string::npos);
  CHECK(tuning_error(pvr, "rule=-no_such_rule").find("'no_such_rule'") != std::string::npos);

  // The matching of a row, on a table of test rows: vendor, device substring (any case), driver id, and the
  // driver-version range [min, max); an allow row exempts its devices from the deny rows for its keys.
  const uint32_t v600 = VK_MAKE_VERSION(512, 600, 0), v700 = VK_MAKE_VERSION(512, 700, 0);
  const std::vector<DeviceRule> table = {
      {"test_deny", "test", 0x5143, "adreno", VK_DRIVER_ID_QUALCOMM_PROPRIETARY, v600, v700, {"fp16", "subgroup"}},
      {"test_allow", "test", 0x5143, "Adreno (TM) 830", 0, 0, 0, {"fp16"}, true},
  };
  const DeviceRule& deny = table[0];
  auto adreno = [](const char* name, uint32_t version, uint32_t driver = VK_DRIVER_ID_QUALCOMM_PROPRIETARY) {
    return sim_gpu(0x5143, name, driver, version);
  };
  CHECK(device_rule_matches(deny, adreno("Adreno (TM) 740", v600)));
  CHECK(device_rule_matches(deny, adreno("ADRENO (TM) 740", v700 - 1)));
  CHECK_FALSE(device_rule_matches(deny, adreno("Adreno (TM) 740", v700)));
  CHECK_FALSE(device_rule_matches(deny, adreno("Adreno (TM) 740", v600 - 1)));
  CHECK_FALSE(device_rule_matches(deny, adreno("Adreno (TM) 740", v600, VK_DRIVER_ID_MESA_TURNIP)));
  CHECK_FALSE(device_rule_matches(deny, adreno("Mali-G715", v600)));
  CHECK_FALSE(device_rule_matches(deny, sim_gpu(0x13B5, "Adreno (TM) 740", VK_DRIVER_ID_QUALCOMM_PROPRIETARY, v600)));
  const DeviceCaps a740 = adreno("Adreno (TM) 740", v600), a830 = adreno("Adreno (TM) 830", v600);
  REQUIRE(matching_device_rules(a740, table).size() == 1);  // allow rows are not listed
  REQUIRE(matching_device_rules(a830, table).size() == 1);
  CHECK(deny_rule_for("fp16", a740, matching_device_rules(a740, table), table) == &deny);
  CHECK(deny_rule_for("fp16", a830, matching_device_rules(a830, table), table) == nullptr);  // allowed
  CHECK(deny_rule_for("subgroup", a830, matching_device_rules(a830, table), table) == &deny);
  CHECK(deny_rule_for("int_dot", a740, matching_device_rules(a740, table), table) == nullptr);
}

// One context per kill switch, on the test device: the switch reaches the device and the kernels it builds.
namespace {
// Runs the head norm once on `ctx` (fp32 buffers: the context must run the fp32 variants) and returns the names
// of the device's head norm pipelines.
std::vector<std::string> run_head_norm(Context& ctx) {
  Device& dev = ctx.device();
  const uint32_t n = 64;
  HeadRmsNormKernel k{dev, KernelOptions::for_op(dev, "head_rmsnorm")};
  Buffer buf(dev, 4096, MemoryDomain::device, "kill switch");
  const std::vector<float> x(n, 2.0f), w(n, 1.0f);
  buf.upload(0, x.data(), n * 4);
  buf.upload(1024, w.data(), n * 4);
  Program prog(dev, "kill switch");
  k.record(prog, buf.range(0, n * 4), buf.range(1024, n * 4), buf.range(2048, n * 4),
           HeadRmsNormParams{1, 1, n, n, 0.5f, 1e-5f});
  prog.run();
  std::vector<float> y(n);
  buf.download(2048, y.data(), n * 4);
  for (float v : y) CHECK(v == doctest::Approx(0.5).epsilon(1e-5));
  std::vector<std::string> names;
  for (const Pipeline* p : dev.pipelines())
    if (p->name().rfind("head_rmsnorm", 0) == 0) names.push_back(p->name());
  return names;
}

std::unique_ptr<Context> context_with(const std::string& tuning, Precision precision = Precision::automatic) {
  ContextOptions o = test::validated_options(precision);
  o.tuning = tuning;
  return Context::create(o);
}
}  // namespace

TEST_CASE("device: kill switch fp16=off runs the fp32 variants") {
  auto ctx = context_with("fp16=off");
  CHECK_FALSE(ctx->device().fp16());
  CHECK(ctx->precision() == Precision::fp32);
  CHECK(ctx->tuning().why("fp16") == "override fp16=off (ContextOptions::tuning)");
  CHECK_FALSE(ctx->device().coopmat());
  const auto names = run_head_norm(*ctx);
  REQUIRE_FALSE(names.empty());
  for (const std::string& n : names) CHECK(n.find("_fp32") != std::string::npos);
}

TEST_CASE("device: kill switch subgroup=off runs the shared-memory reductions") {
  auto ctx = context_with("subgroup=off", Precision::fp32);
  CHECK_FALSE(ctx->device().subgroup_arithmetic());
  CHECK(ctx->tuning().why("subgroup") == "override subgroup=off (ContextOptions::tuning)");
  const auto names = run_head_norm(*ctx);
  REQUIRE_FALSE(names.empty());
  for (const std::string& n : names) CHECK(n.find("_sg") == std::string::npos);
  if (test::device_has_subgroup_arithmetic()) {  // the same kernel takes the subgroup variant without the switch
    auto plain = context_with("", Precision::fp32);
    const auto plain_names = run_head_norm(*plain);
    REQUIRE_FALSE(plain_names.empty());
    for (const std::string& n : plain_names) CHECK(n.find("_sg") != std::string::npos);
  }
}

TEST_CASE("device: subgroup_off=head_rmsnorm runs that kernel's shared-memory reduction, and no other's") {
  if (!test::device_has_subgroup_arithmetic()) {
    test::skip("the test device has no subgroup arithmetic: no subgroup variant to turn off for one kernel");
    return;
  }
  auto ctx = context_with("subgroup_off=head_rmsnorm", Precision::fp32);
  CHECK(ctx->device().subgroup_arithmetic());
  CHECK_FALSE(ctx->device().subgroup_arithmetic("head_rmsnorm"));
  CHECK(ctx->device().subgroup_arithmetic("linear"));
  CHECK(KernelOptions::for_op(ctx->device(), "attention").subgroup);
  const auto names = run_head_norm(*ctx);
  REQUIRE_FALSE(names.empty());
  for (const std::string& n : names) CHECK(n.find("_sg") == std::string::npos);
}

TEST_CASE("device: a simulated subgroup size reaches the device: shared-memory reductions, the log says why") {
  const DeviceCaps real = test::make_context(Precision::fp32)->caps();
  for (const uint32_t sg : {16u, 64u}) {
    CAPTURE(sg);
    ContextOptions o = test::validated_options(Precision::fp32);
    o.simulate_subgroup_size = sg;
    std::vector<std::string> logs;
    platform::set_log_sink([&](platform::LogLevel, const std::string& m) { logs.push_back(m); });
    auto ctx = Context::create(o);
    platform::set_log_sink(nullptr);
    CHECK(ctx->caps().subgroup_size == sg);
    CHECK_FALSE(ctx->caps().subgroup_size_control);
    CHECK_FALSE(ctx->device().subgroup_arithmetic());
    CHECK_FALSE(ctx->device().coopmat());
    if (real.subgroup_size != sg || real.subgroup_min_size != real.subgroup_max_size) {
      CHECK(ctx->caps().subgroup_hardware_size == real.subgroup_size);
      CHECK(ctx->tuning().why("subgroup").find("ContextOptions::simulate_subgroup_size") != std::string::npos);
      bool said = false;
      for (const std::string& m : logs)
        said |= m.find("simulated subgroup size " + std::to_string(sg)) == 0 ||
                m.find("': simulated subgroup size " + std::to_string(sg)) != std::string::npos;
      CHECK(said);
    }
    const auto names = run_head_norm(*ctx);
    REQUIRE_FALSE(names.empty());
    for (const std::string& n : names) CHECK(n.find("_sg") == std::string::npos);
  }
}

TEST_CASE("device: kill switch int_dot=off takes the dequantize path") {
  auto ctx = context_with("int_dot=off");
  CHECK_FALSE(ctx->caps().integer_dot_product);
  CHECK_FALSE(ctx->tuning().int_dot);
  CHECK(ctx->tuning().why("int_dot") == "override int_dot=off (ContextOptions::tuning)");
  CHECK(choose_quant_row_path(ctx->caps()).path == QuantRowPath::dequant);
  const QuantRowPath int8 = QuantRowPath::int8_dot;
  try {
    choose_quant_row_path(ctx->caps(), &int8);
    FAIL("the int8 path was chosen with int_dot=off");
  } catch (const Error& e) {
    CHECK(e.status() == Status::unsupported);
  }
}

TEST_CASE("device: kill switch kv_staging=off keeps attention from staging K/V blocks") {
  auto ctx = context_with("kv_staging=off");
  CHECK(ctx->caps().has_quirk("no_kv_staging"));
  CHECK_FALSE(ctx->tuning().kv_staging);
  CHECK(ctx->tuning().why("kv_staging") == "override kv_staging=off (ContextOptions::tuning)");
  auto staged = context_with("kv_staging=on");  // and on drops the quirk (CPU drivers have it)
  CHECK_FALSE(staged->caps().has_quirk("no_kv_staging"));
  CHECK(staged->tuning().kv_staging);
}

TEST_CASE("device: fp32 fallback is chosen and reported when fp16 is unavailable") {
  ContextOptions o = test::validated_options();
  o.force_no_fp16 = true;
  std::vector<std::string> logs;
  platform::set_log_sink([&](platform::LogLevel, const std::string& m) { logs.push_back(m); });
  auto ctx = Context::create(o);
  platform::set_log_sink(nullptr);
  CHECK(ctx->precision() == Precision::fp32);
  CHECK(ctx->tuning().why("fp16") == "override ContextOptions::force_no_fp16 (fp16=off)");
  bool reported = false;
  for (auto& m : logs) reported |= m.find("falling back to fp32") != std::string::npos;
  CHECK(reported);
  o.precision = Precision::fp16;
  CHECK_THROWS_AS(Context::create(o), Error);
}

TEST_CASE("device: validation is on in the test suite") {
  auto ctx = test::make_context();
  CHECK(ctx->validation_enabled());
}

TEST_CASE("program: barriers are exact (pure planner)") {
  VkBuffer A = reinterpret_cast<VkBuffer>(uintptr_t(0x10)), B = reinterpret_cast<VkBuffer>(uintptr_t(0x20));
  auto r = [](VkBuffer b, VkDeviceSize o, VkDeviceSize s) { return BufferRange{b, o, s}; };
  std::vector<OpAccesses> ops = {
      {OpStage::compute, {{r(A, 0, 100), Access::read}, {r(A, 256, 100), Access::write}}},  // 0: writes A[256..356)
      {OpStage::compute, {{r(A, 0, 100), Access::read}, {r(B, 0, 64), Access::write}}},     // 1: independent
      {OpStage::compute, {{r(A, 300, 10), Access::read}, {r(A, 512, 64), Access::write}}},  // 2: RAW on op 0
      {OpStage::compute,
       {{r(B, 0, 64), Access::read}, {r(A, 1024, 8), Access::write}}},  // 3: RAW on op 1 (still pending)
      {OpStage::compute,
       {{r(A, 0, 100), Access::write}}},  // 4: WAR on A[0..100)? no: op 2's barrier ordered those reads
      {OpStage::compute, {{r(B, 0, 64), Access::write}}},  // 5: WAR on op 3's read of B
      {OpStage::transfer,
       {{r(A, 512, 64), Access::read}, {r(B, 128, 64), Access::write}}},  // 6: RAW on op 2 (compute -> transfer)
  };
  auto plan = plan_barriers(ops);
  REQUIRE(plan.size() == ops.size());
  CHECK_FALSE(plan[0].needed);
  CHECK_FALSE(plan[1].needed);
  REQUIRE(plan[2].needed);
  REQUIRE(plan[2].flush.size() == 1);
  CHECK(plan[2].flush[0].offset == 256);
  REQUIRE(plan[3].needed);  // B written by op 1 was not covered by op 2's barrier
  REQUIRE(plan[3].flush.size() == 1);
  CHECK(plan[3].flush[0].buffer == B);
  CHECK_FALSE(plan[4].needed);  // earlier barriers already ordered every read of A[0..100)
  REQUIRE(plan[5].needed);      // write-after-read: execution dependency, nothing to flush
  CHECK(plan[5].flush.empty());
  REQUIRE(plan[6].needed);
  REQUIRE(plan[6].flush.size() == 1);
  CHECK(plan[6].flush_stage[0] == OpStage::compute);
  CHECK(plan[6].flush[0].offset == 512);
}

TEST_CASE("program: dependent dispatches get a barrier, replay and timestamps work") {
  const uint32_t n = NormChain::n;
  NormChain c(4096, std::vector<float>(n, 2.0f), std::vector<float>(n, 1.0f));
  Device& dev = c.dev;
  Buffer& buf = c.buf;
  Program prog(dev, "chain", /*timestamps=*/true);
  c.step(prog, 0, 2048);     // y1 = norm(x)
  c.step(prog, 2048, 3072);  // y2 = norm(y1): RAW
  prog.run();
  prog.run();
  CHECK(prog.barrier_count() == 1);
  std::vector<float> y(n);
  buf.download(3072, y.data(), n * 4);
  // norm(x) = 0.5 * x / rms(x) = 0.5 for x = 2; norm(0.5) = 0.5 again.
  for (float v : y) CHECK(v == doctest::Approx(0.5).epsilon(1e-5));
  if (dev.caps().timestamps) {
    REQUIRE(prog.timings().size() == 2);
    CHECK(prog.total_us() > 0);
    CHECK(prog.timings()[0].label == "head_rmsnorm");
  }
}

TEST_CASE("program: groups replay the same and an abort between groups throws cancelled") {
  const uint32_t n = NormChain::n;
  std::vector<float> x(n);
  for (uint32_t i = 0; i < n; ++i) x[i] = 0.25f + 0.01f * float(i);
  NormChain c(8192, x, std::vector<float>(n, 1.5f));
  Device& dev = c.dev;
  Buffer& buf = c.buf;
  Program prog(dev, "groups", /*timestamps=*/true);
  // Three dependent steps, one group each: x -> a -> b -> c (each group reads what the previous wrote).
  c.step(prog, 0, 2048);
  prog.checkpoint();
  prog.checkpoint();  // an empty group is not made
  c.step(prog, 2048, 3072);
  prog.checkpoint();
  c.step(prog, 3072, 4096);
  prog.checkpoint();  // trailing: no empty last group either
  const std::vector<float> poison(n, -777.0f);
  std::vector<float> all(n), stepwise(n), cut(n);
  buf.upload(4096, poison.data(), n * 4);
  prog.run();  // all groups in one submission
  REQUIRE(prog.group_count() == 3);
  buf.download(4096, all.data(), n * 4);
  for (float v : all) CHECK(std::isfinite(v));
  CHECK(all[0] != -777.0f);
  if (dev.caps().timestamps) CHECK(prog.timings().size() == 3);
  buf.upload(4096, poison.data(), n * 4);
  int asked = 0;
  prog.run([&] { return ++asked < 0; });  // never aborts: asked before each of the 3 groups
  CHECK(asked == 3);
  buf.download(4096, stepwise.data(), n * 4);
  CHECK(std::memcmp(all.data(), stepwise.data(), n * 4) == 0);  // bit for bit
  buf.upload(4096, poison.data(), n * 4);
  asked = 0;
  try {
    prog.run([&] { return ++asked == 3; });  // abort before the last group
    FAIL("no error");
  } catch (const Error& e) {
    CHECK(e.status() == Status::cancelled);
  }
  CHECK(asked == 3);
  buf.download(4096, cut.data(), n * 4);
  CHECK(std::memcmp(cut.data(), poison.data(), n * 4) == 0);  // the last group never ran
  prog.run();                                                 // still usable
  buf.download(4096, stepwise.data(), n * 4);
  CHECK(std::memcmp(all.data(), stepwise.data(), n * 4) == 0);
}

TEST_CASE("faults: VK_ERROR_DEVICE_LOST and VK_ERROR_OUT_OF_DEVICE_MEMORY surface as errors") {
  auto ctx = test::make_context(Precision::fp32);
  Device& dev = ctx->device();
  SUBCASE("out of device memory on allocation") {
    set_vk_fault_hook([](const char* call) {
      return std::string(call).rfind("vkAllocateMemory", 0) == 0 ? VK_ERROR_OUT_OF_DEVICE_MEMORY : VK_SUCCESS;
    });
    try {
      Buffer b(dev, 1 << 20, MemoryDomain::device, "weights");
      FAIL("no error");
    } catch (const Error& e) {
      CHECK(e.status() == Status::out_of_memory);
      CHECK(std::string(e.what()).find("weights") != std::string::npos);
    }
    set_vk_fault_hook(nullptr);
  }
  SUBCASE("device lost on submit") {
    HeadRmsNormKernel k(dev, KernelOptions::for_device(dev));
    Buffer buf(dev, 4096, MemoryDomain::device, "x");
    Program prog(dev, "lost");
    k.record(prog, buf.range(0, 256), buf.range(1024, 256), buf.range(2048, 256), {1, 1, 64, 64, 1.0f, 1e-5f});
    set_vk_fault_hook([](const char* call) {
      return std::string(call).rfind("vkQueueSubmit", 0) == 0 ? VK_ERROR_DEVICE_LOST : VK_SUCCESS;
    });
    try {
      prog.run();
      FAIL("no error");
    } catch (const Error& e) {
      CHECK(e.status() == Status::device_lost);
    }
    set_vk_fault_hook(nullptr);
  }
  // The context is still usable for cleanup (no abort, no leak reported by validation at destruction).
}

TEST_CASE("pipeline: identical pipelines on one device share their Vulkan objects until the last one goes") {
  const uint32_t n = NormChain::n;
  NormChain c(4096, std::vector<float>(n, 2.0f), std::vector<float>(n, 1.0f));
  Device& dev = c.dev;
  CHECK(dev.pipelines().empty());  // the kernel declares its pipeline; the first program to dispatch it compiles it
  {
    Program warm(dev, "warm");
    c.step(warm, 0, 2048);
    warm.finalize();
  }
  REQUIRE(dev.pipelines().size() == 1);
  const Pipeline& first = *dev.pipelines()[0];
  PipelineDesc desc = first.desc();
  auto same = std::make_unique<Pipeline>(dev, desc);
  CHECK(same->handle() == first.handle());
  CHECK(same->layout() == first.layout());
  CHECK(same->set_layout() == first.set_layout());
  CHECK(dev.pipelines().size() == 2);  // shader-stats still sees every Pipeline object
  desc.push_bytes += 16;               // another layout: compiled on its own
  auto other = std::make_unique<Pipeline>(dev, desc);
  CHECK(other->handle() != first.handle());
  other.reset();
  same.reset();  // the kernel's pipeline stays valid (the validation layer would report a destroyed one)
  Program prog(dev, "shared");
  c.step(prog, 0, 2048);
  prog.run();
  std::vector<float> y(n);
  c.buf.download(2048, y.data(), n * 4);
  for (float v : y) CHECK(v == doctest::Approx(0.5).epsilon(1e-5));
}

// Device::park_pipelines (the self-test at load hands its pipelines to the model): a parked pipeline is adopted
// without a compile, one parked while nothing adopts it goes with release_parked_pipelines (a leaked one would be
// reported by the validation layer at vkDestroyDevice), and with parking off the last user destroys it as before.
TEST_CASE("pipeline: a parked pipeline is adopted without compiling, and released when nothing takes it") {
  const uint32_t n = NormChain::n;
  NormChain c(4096, std::vector<float>(n, 2.0f), std::vector<float>(n, 1.0f));
  Device& dev = c.dev;
  {
    Program warm(dev, "warm");
    c.step(warm, 0, 2048);
    warm.finalize();
  }
  REQUIRE(dev.pipelines().size() == 1);
  PipelineDesc desc = dev.pipelines()[0]->desc();
  desc.push_bytes += 16;  // a description of its own, not the kernel's
  PipelineDesc other = desc;
  other.push_bytes += 16;
  CHECK(dev.parked_pipelines().size() == 0);
  dev.park_pipelines(true);
  auto a = std::make_unique<Pipeline>(dev, desc);
  auto b = std::make_unique<Pipeline>(dev, other);
  a.reset();
  b.reset();
  dev.park_pipelines(false);
  CHECK(dev.parked_pipelines().size() == 2);
  const auto compiled = dev.compile_stats().pipelines;
  auto again = std::make_unique<Pipeline>(dev, desc);  // adopts the parked one
  CHECK(dev.compile_stats().pipelines == compiled);
  CHECK(dev.parked_pipelines().size() == 1);
  dev.release_parked_pipelines();  // `other`: nothing took it
  CHECK(dev.parked_pipelines().size() == 0);
  again.reset();  // parking is off: destroyed by its last user
  CHECK(dev.parked_pipelines().size() == 0);
  auto fresh = std::make_unique<Pipeline>(dev, desc);
  CHECK(dev.compile_stats().pipelines == compiled + 1);
  // The kernel's own pipeline is untouched by all of this.
  Program prog(dev, "after parking");
  c.step(prog, 0, 2048);
  prog.run();
  std::vector<float> y(n);
  c.buf.download(2048, y.data(), n * 4);
  for (float v : y) CHECK(v == doctest::Approx(0.5).epsilon(1e-5));
}

TEST_CASE("pipeline: a LazyPipeline compiles on first use, once across threads, with its declaration's group") {
  auto ctx = test::make_context(Precision::fp32);
  Device& dev = ctx->device();
  const PipelineDesc desc =
      PipelineDesc{"head_rmsnorm"}.with_bindings(3).with_push(24).with_spec({32}).with_subgroup(false).with_fp16(false);
  std::unique_ptr<LazyPipeline> lazy;
  {
    PipelineGroup g(dev, "declared");
    lazy = std::make_unique<LazyPipeline>(dev, desc, false);
  }
  CHECK(dev.pipelines().empty());  // declared, not compiled
  const Pipeline* seen[4] = {};
  std::vector<std::thread> ts;
  for (int i = 0; i < 4; ++i) ts.emplace_back([&, i] { seen[i] = &lazy->get(); });
  for (auto& t : ts) t.join();
  REQUIRE(dev.pipelines().size() == 1);
  for (const Pipeline* p : seen) CHECK(p == dev.pipelines()[0]);
  CHECK(seen[0]->group() == "declared");
  CHECK(seen[0]->workgroup() == std::array<uint32_t, 3>{32, 1, 1});
  // build_declared_pipelines compiles what is declared and not yet compiled; `now` compiles at declaration.
  LazyPipeline second(
      dev,
      PipelineDesc{"head_rmsnorm"}.with_bindings(3).with_push(24).with_spec({64}).with_subgroup(false).with_fp16(false),
      false);
  CHECK(dev.pipelines().size() == 1);
  dev.build_declared_pipelines();
  CHECK(dev.pipelines().size() == 2);
  LazyPipeline third(
      dev,
      PipelineDesc{"head_rmsnorm"}.with_bindings(3).with_push(24).with_spec({16}).with_subgroup(false).with_fp16(false),
      true);
  CHECK(dev.pipelines().size() == 3);
  lazy.reset();
  CHECK(dev.pipelines().size() == 2);
}

TEST_CASE("tuning: pipeline_threads takes auto, 0 or a thread count, and auto is the host's threads up to 8") {
  auto error = parse_error;
  for (const char* ok : {"pipeline_threads=auto", "pipeline_threads=0", "pipeline_threads=1", "pipeline_threads=64"})
    CHECK(error(ok) == "accepted");
  for (const char* bad : {"pipeline_threads=65", "pipeline_threads=-1", "pipeline_threads=two", "pipeline_threads="})
    CHECK(error(bad).find("'pipeline_threads'") != std::string::npos);
  DeviceCaps c;
  c.kind = DeviceKind::cpu;
  c.name = "sim";
  const unsigned hw = std::thread::hardware_concurrency();
  const uint32_t automatic = std::max(1u, std::min(hw, 8u));
  DeviceCaps a = c, zero = c, three = c;
  const Tuning t = apply_tuning(a, {});
  CHECK(t.pipeline_threads == automatic);
  CHECK(t.why("pipeline_threads").rfind("cap: ", 0) == 0);
  CHECK(apply_tuning(zero, parse_tuning("pipeline_threads=0", "x")).pipeline_threads == automatic);
  const Tuning f = apply_tuning(three, parse_tuning("pipeline_threads=3", "DIFFVK_TUNING"));
  CHECK(f.pipeline_threads == 3);
  CHECK(f.why("pipeline_threads") == "override pipeline_threads=3 (DIFFVK_TUNING)");
}

namespace {
// `count` head_rmsnorm pipelines that differ in their workgroup size only (each its own compile), not compiled.
std::vector<std::unique_ptr<LazyPipeline>> norm_pipelines(Device& dev, uint32_t count) {
  std::vector<std::unique_ptr<LazyPipeline>> v;
  for (uint32_t i = 0; i < count; ++i)
    v.push_back(std::make_unique<LazyPipeline>(dev,
                                               PipelineDesc{"head_rmsnorm"}
                                                   .with_bindings(3)
                                                   .with_push(24)
                                                   .with_spec({8 + 8 * i})
                                                   .with_subgroup(false)
                                                   .with_fp16(false),
                                               false));
  return v;
}
std::vector<const LazyPipeline*> pointers(const std::vector<std::unique_ptr<LazyPipeline>>& v) {
  std::vector<const LazyPipeline*> p;
  for (const auto& l : v) p.push_back(l.get());
  return p;
}
}  // namespace

TEST_CASE("pipeline: build_pipelines compiles a list on pipeline_threads threads, the calling one included") {
  for (const char* threads : {"1", "4"}) {
    CAPTURE(threads);
    auto ctx = context_with(std::string("pipeline_threads=") + threads, Precision::fp32);
    Device& dev = ctx->device();
    REQUIRE(dev.tuning().pipeline_threads == uint32_t(std::atoi(threads)));
    auto lazy = norm_pipelines(dev, 12);
    std::vector<const LazyPipeline*> list = pointers(lazy);
    list.push_back(list[0]);  // a repeat compiles once
    std::mutex m;
    std::set<std::thread::id> seen;
    set_vk_fault_hook([&](const char* call) {
      if (std::string(call).rfind("vkCreateComputePipelines", 0) == 0) {
        std::lock_guard<std::mutex> lock(m);
        seen.insert(std::this_thread::get_id());
      }
      return VK_SUCCESS;
    });
    dev.build_pipelines(list);
    set_vk_fault_hook(nullptr);
    for (const auto& l : lazy) CHECK(l->built());
    CHECK(dev.pipelines().size() == lazy.size());
    if (std::string(threads) == "1") {
      CHECK(seen == std::set<std::thread::id>{std::this_thread::get_id()});
    } else {
      CHECK(seen.size() >= 1);
      CHECK(seen.size() <= 4);
    }
    const auto before = dev.compile_stats().pipelines;
    dev.build_pipelines(list);  // all compiled: nothing to do
    CHECK(dev.compile_stats().pipelines == before);
  }
}

// Two ops' kernels often declare the same pipeline. Compiled side by side on two threads, both would reach the
// driver, and how many Vulkan calls a load makes would depend on the threads' timing (a fault-injection sweep, which
// counts them, failed on CI once for it): each description is compiled once, and its twins share the objects.
TEST_CASE("pipeline: build_pipelines compiles each description once, however many lazy pipelines declare it") {
  for (const char* tuning : {"pipeline_threads=1", "pipeline_threads=4", "pipeline_threads=4,pipeline_batch=1"}) {
    CAPTURE(tuning);
    auto ctx = context_with(tuning, Precision::fp32);
    Device& dev = ctx->device();
    auto lazy = norm_pipelines(dev, 6), twins = norm_pipelines(dev, 6);
    std::vector<const LazyPipeline*> list;
    for (size_t i = 0; i < lazy.size(); ++i) {
      list.push_back(lazy[i].get());
      list.push_back(twins[lazy.size() - 1 - i].get());  // a twin in another thread's share
    }
    std::atomic<int> creates{0}, modules{0};
    set_vk_fault_hook([&](const char* call) {
      const std::string c(call);
      creates += c.rfind("vkCreateComputePipelines", 0) == 0;
      modules += c.rfind("vkCreateShaderModule", 0) == 0;
      return VK_SUCCESS;
    });
    const auto before = dev.compile_stats().pipelines;
    dev.build_pipelines(list);
    set_vk_fault_hook(nullptr);
    CHECK(modules.load() == 6);
    CHECK(dev.compile_stats().pipelines - before == 6);
    CHECK(creates.load() <= 6);
    for (size_t i = 0; i < lazy.size(); ++i) {
      REQUIRE(lazy[i]->built());
      REQUIRE(twins[i]->built());
      CHECK(twins[i]->get().handle() == lazy[i]->get().handle());
    }
  }
}

// A vkCreateComputePipelines failure on a worker thread: every thread is joined, the first error is rethrown on the
// calling thread naming the pipeline, what compiled stays compiled, and a later call compiles the rest.
TEST_CASE("pipeline: a pipeline that fails on a worker thread surfaces as an Error naming it") {
  auto ctx = context_with("pipeline_threads=4", Precision::fp32);
  Device& dev = ctx->device();
  auto lazy = norm_pipelines(dev, 12);
  const std::thread::id caller = std::this_thread::get_id();
  std::atomic<int> failed{0};
  set_vk_fault_hook([&](const char* call) {
    if (std::string(call).rfind("vkCreateComputePipelines", 0) != 0 || std::this_thread::get_id() == caller)
      return VK_SUCCESS;
    ++failed;
    return VK_ERROR_OUT_OF_HOST_MEMORY;
  });
  try {
    dev.build_pipelines(pointers(lazy));
    set_vk_fault_hook(nullptr);
    FAIL("no error (failures injected: " << failed.load() << ")");
  } catch (const Error& e) {
    set_vk_fault_hook(nullptr);
    CAPTURE(e.what());
    CHECK(failed.load() >= 1);
    CHECK(e.status() == Status::out_of_memory);
    CHECK(std::string(e.what()).find("creating pipeline head_rmsnorm_fp32") != std::string::npos);
    CHECK(std::string(e.what()).find("vkCreateComputePipelines") != std::string::npos);
  }
  size_t built = 0;
  for (const auto& l : lazy) built += l->built();
  CHECK(built < lazy.size());
  CHECK(dev.pipelines().size() == built);  // a failed pipeline leaves nothing behind
  dev.build_pipelines(pointers(lazy));     // tries again: the rest compile
  for (const auto& l : lazy) CHECK(l->built());
  CHECK(dev.pipelines().size() == lazy.size());
}

TEST_CASE(
    "tuning: pipeline_batch takes auto, per_thread or a count, and auto is 1 on CPU drivers, per_thread on GPUs") {
  auto error = parse_error;
  for (const char* ok : {"pipeline_batch=auto", "pipeline_batch=per_thread", "pipeline_batch=1", "pipeline_batch=64"})
    CHECK(error(ok) == "accepted");
  for (const char* bad :
       {"pipeline_batch=0", "pipeline_batch=65", "pipeline_batch=-1", "pipeline_batch=two", "pipeline_batch="})
    CHECK(error(bad).find("'pipeline_batch'") != std::string::npos);
  DeviceCaps cpu;
  cpu.kind = DeviceKind::cpu;
  cpu.name = "sim";
  DeviceCaps gpu = cpu;
  gpu.kind = DeviceKind::integrated;
  const Tuning tc = apply_tuning(cpu, {}), tg = apply_tuning(gpu, {});
  CHECK(tc.pipeline_batch == 1);
  CHECK(tc.why("pipeline_batch").rfind("cap: CPU driver", 0) == 0);
  CHECK(tg.pipeline_batch == 0);
  REQUIRE(tg.find("pipeline_batch"));
  CHECK(tg.find("pipeline_batch")->value == "per_thread");
  DeviceCaps a = cpu, b = gpu;
  CHECK(apply_tuning(a, parse_tuning("pipeline_batch=per_thread", "x")).pipeline_batch == 0);
  const Tuning f = apply_tuning(b, parse_tuning("pipeline_batch=5", "DIFFVK_TUNING"));
  CHECK(f.pipeline_batch == 5);
  CHECK(f.why("pipeline_batch") == "override pipeline_batch=5 (DIFFVK_TUNING)");
}

// Batched creation: each call creates up to pipeline_batch pipelines (per_thread: an even share per thread), the same
// pipelines as one call each, counted in the compile statistics one by one.
TEST_CASE("pipeline: build_pipelines creates pipeline_batch pipelines per vkCreateComputePipelines call") {
  for (const char* tuning : {"pipeline_threads=1,pipeline_batch=5", "pipeline_threads=3,pipeline_batch=per_thread"}) {
    CAPTURE(tuning);
    auto ctx = context_with(tuning, Precision::fp32);
    Device& dev = ctx->device();
    auto lazy = norm_pipelines(dev, 12);
    std::atomic<int> calls{0};
    set_vk_fault_hook([&](const char* call) {
      if (std::string(call).rfind("vkCreateComputePipelines", 0) == 0) ++calls;
      return VK_SUCCESS;
    });
    const auto before = dev.compile_stats().pipelines;
    dev.build_pipelines(pointers(lazy));
    set_vk_fault_hook(nullptr);
    CHECK(calls.load() == 3);  // 5 + 5 + 2, or 4 on each of 3 threads
    for (const auto& l : lazy) CHECK(l->built());
    CHECK(dev.pipelines().size() == lazy.size());
    CHECK(dev.compile_stats().pipelines - before == lazy.size());
    std::set<std::vector<uint32_t>> specs;
    for (const Pipeline* p : dev.pipelines()) {
      CHECK(p->handle() != VK_NULL_HANDLE);
      CHECK(p->compile_seconds() >= 0.0);
      specs.insert(p->desc().spec);
    }
    CHECK(specs.size() == lazy.size());
  }
}

// A batch whose call fails is created again one pipeline per call: a transient failure costs nothing, and a pipeline
// that fails on its own is named, with nothing of the batch left behind.
TEST_CASE("pipeline: a failed batched call retries one pipeline per call, and a failure names the pipeline") {
  auto ctx = context_with("pipeline_threads=1,pipeline_batch=4", Precision::fp32);
  Device& dev = ctx->device();
  auto lazy = norm_pipelines(dev, 4);
  std::atomic<int> calls{0};
  set_vk_fault_hook([&](const char* call) {  // the first call (the batch) fails; the four single calls pass
    if (std::string(call).rfind("vkCreateComputePipelines", 0) != 0) return VK_SUCCESS;
    return ++calls == 1 ? VK_ERROR_UNKNOWN : VK_SUCCESS;
  });
  dev.build_pipelines(pointers(lazy));
  set_vk_fault_hook(nullptr);
  CHECK(calls.load() == 5);
  for (const auto& l : lazy) CHECK(l->built());
  CHECK(dev.pipelines().size() == 4);

  // One batch of four: one shares a pipeline compiled above (the same description), three are new; every call fails.
  auto more = norm_pipelines(dev, 8);
  const std::vector<const LazyPipeline*> batch{more[4].get(), more[0].get(), more[5].get(), more[6].get()};
  set_vk_fault_hook([](const char* call) {
    return std::string(call).rfind("vkCreateComputePipelines", 0) == 0 ? VK_ERROR_OUT_OF_HOST_MEMORY : VK_SUCCESS;
  });
  try {
    dev.build_pipelines(batch);
    set_vk_fault_hook(nullptr);
    FAIL("no error");
  } catch (const Error& e) {
    set_vk_fault_hook(nullptr);
    CAPTURE(e.what());
    CHECK(e.status() == Status::out_of_memory);
    CHECK(std::string(e.what()).find("creating pipeline head_rmsnorm_fp32") != std::string::npos);
  }
  for (const LazyPipeline* l : batch) CHECK_FALSE(l->built());  // all or nothing, the shared one included
  CHECK(dev.pipelines().size() == 4);                           // nothing of the failed batch is left
  dev.build_pipelines(batch);                                   // tries again
  for (const LazyPipeline* l : batch) CHECK(l->built());
  CHECK(dev.pipelines().size() == 8);
}

// A program compiles the LazyPipelines it dispatches when it is finalized, not when they are recorded.
TEST_CASE("program: finalize compiles the lazy pipelines the program dispatches, and only those") {
  const uint32_t n = NormChain::n;
  NormChain c(4096, std::vector<float>(n, 2.0f), std::vector<float>(n, 1.0f));
  Device& dev = c.dev;
  auto unused = norm_pipelines(dev, 2);
  Program prog(dev, "lazy");
  c.step(prog, 0, 2048);
  CHECK(dev.pipelines().empty());  // recorded, not compiled
  prog.run();
  CHECK(dev.pipelines().size() == 1);
  for (const auto& l : unused) CHECK_FALSE(l->built());
  std::vector<float> y(n);
  c.buf.download(2048, y.data(), n * 4);
  for (float v : y) CHECK(v == doctest::Approx(0.5).epsilon(1e-5));
}
