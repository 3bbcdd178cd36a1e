// Conformance of the linear layer (shaders/linear.comp, shaders/linear_vec.comp) against the float64
// reference through the op's case table (bench/cases/linear.cpp: both precisions, both reduction
// paths of the matrix-vector path, every tile variant, odd shapes, padded row strides, with / without /
// in-place residual, outputs poisoned before each run); the pure tile choice on simulated devices; and
// argument errors.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdlib>
#include <map>

#include "gpu_test.hpp"
#include "op_table.hpp"
#include "bench/cases/linear.hpp"
#include "ops/linear.hpp"
#include "vk/tuning.hpp"
#include "status_of.hpp"
#include "vk/instance.hpp"

using namespace diffvk;

namespace {

DeviceCaps simulated(uint32_t shared, uint32_t invocations, uint32_t subgroup) {
  DeviceCaps c;
  c.max_shared_memory = shared;
  c.max_workgroup_invocations = invocations;
  c.max_workgroup_size = {invocations, invocations, 64};
  c.max_workgroup_count = {65535, 65535, 65535};
  c.subgroup_size = c.subgroup_min_size = c.subgroup_max_size = subgroup;
  return c;
}

}  // namespace

TEST_CASE("linear: tile choice is legal on simulated devices") {
  const uint32_t rows_list[] = {1, 2, 8, 9, 33, 130, 512, 4096};
  const uint32_t out_list[] = {8, 200, 512, 3000};
  for (uint32_t shared : {16384u, 32768u, 49152u})
    for (uint32_t inv : {128u, 256u, 1024u})
      for (uint32_t sg : {4u, 8u, 16u, 32u, 64u, 128u}) {
        const DeviceCaps c = simulated(shared, inv, sg);
        const auto cand = linear_tile_candidates(c);
        REQUIRE(cand.size() == 4);
        for (size_t i = 0; i < cand.size(); ++i) {
          const LinearTiles& t = cand[i];
          INFO("shared=" << shared << " inv=" << inv << " sg=" << sg << " variant=" << i << " wg=" << t.wg
                         << " bm=" << t.bm << " bn=" << t.bn << " bk=" << t.bk << " rm=" << t.rm << " rn=" << t.rn
                         << " nf=" << t.nf << " shared_bytes=" << t.shared_bytes);
          CHECK(t.variant == i);
          CHECK(t.vec == (i == 0));
          CHECK(t.wg >= 1);
          CHECK(t.wg <= inv);
          CHECK(t.wg <= c.max_workgroup_size[0]);
          CHECK((t.wg & (t.wg - 1)) == 0);   // power of two (tree reduction)
          CHECK(t.wg >= std::min(sg, inv));  // at least one full subgroup
          CHECK(t.shared_bytes <= shared);
          CHECK(t.reg == (i == 3));
          if (t.vec) {
            CHECK(t.nf >= 1);
            CHECK(t.shared_bytes == 4 * t.wg);  // reduce.glsl: WG floats
          } else if (t.reg) {
            CHECK(t.wg == std::min(sg, inv));  // one subgroup
            CHECK(t.shared_bytes == 0);
            CHECK(t.bn == t.wg * t.rn);
            CHECK(t.bm * t.rn <= (c.kind == DeviceKind::cpu ? 128u : 32u));  // accumulators per lane
          } else {
            CHECK(t.bk >= 1);
            CHECK(t.rm >= 1);
            CHECK(t.rn >= 1);
            CHECK(t.bm % t.rm == 0);
            CHECK(t.bn % t.rn == 0);
            CHECK(t.wg == (t.bm / t.rm) * (t.bn / t.rn));
            CHECK(t.shared_bytes == 8 * t.bk * (t.bm + t.bn));  // two buffers, no padding
            CHECK(t.rm * t.rn <= 64);                           // register block stays small
          }
        }
        for (uint32_t rows : rows_list)
          for (uint32_t out : out_list) {
            const LinearTiles t = choose_linear_tiles(c, rows, 512, out);
            CHECK(t.vec == (rows <= kLinearVecMaxRows));
            CHECK(t.reg == (rows > kLinearVecMaxRows && rows <= cand[3].bm));  // 9-16 rows: one register tile
            CHECK(t.variant < cand.size());
            CHECK(t.wg == cand[t.variant].wg);
          }
        // CPU drivers: the register-tiled path at every row count.
        DeviceCaps cpu = c;
        cpu.kind = DeviceKind::cpu;
        for (uint32_t rows : rows_list) CHECK(choose_linear_tiles(cpu, rows, 512, 200).reg);
        // Mali: the register-tiled path past the matrix-vector rows.
        DeviceCaps mali = c;
        mali.vendor_id = kVendorArm;
        for (uint32_t rows : rows_list)
          CHECK(choose_linear_tiles(mali, rows, 512, 200).reg == (rows > kLinearVecMaxRows));
      }
  // Big shapes take the large tile on a typical device; a 16-KiB / 128-invocation device still gets legal tiles.
  const DeviceCaps typical = simulated(32768, 1024, 32);
  CHECK(choose_linear_tiles(typical, 4096, 512, 3000).variant == 1);
  CHECK(choose_linear_tiles(typical, 33, 512, 24).variant == 2);
  // 64-KiB GPUs (AMD, Intel) and NVIDIA's 48 KiB get the tiles linear.comp is tuned for (.ci/isa-count on
  // gfx1100 / phoenix: 1024 FMAs per 96 ds_load_b128 per k step for the large tile, 512 per 64 for the small).
  for (uint32_t shared : {49152u, 65536u}) {
    const auto gpu = linear_tile_candidates(simulated(shared, 1024, 64));
    CHECK((gpu[1].bm == 128 && gpu[1].bn == 64 && gpu[1].bk == 32 && gpu[1].rm == 8 && gpu[1].rn == 4 &&
           gpu[1].wg == 256));
    CHECK((gpu[2].bm == 64 && gpu[2].bn == 64 && gpu[2].bk == 32 && gpu[2].rm == 4 && gpu[2].rn == 4 &&
           gpu[2].wg == 256));
    CHECK(gpu[1].shared_bytes == 49152);
  }
  const auto tiny = linear_tile_candidates(simulated(16384, 128, 128));
  CHECK(tiny[1].wg == 128);
  // Even absurdly small limits give something legal.
  const DeviceCaps odd = simulated(256, 96, 64);
  for (const LinearTiles& t : linear_tile_candidates(odd)) {
    CHECK(t.wg <= 96);
    CHECK(t.shared_bytes <= 256);
  }
}

// Every shape, precision and quirk of the linear op comes from its one case table
// (bench/cases/linear.cpp): the kernel's own path choice, the matrix-vector path with the
// shared-memory reduction, every tile variant, the matrix-matrix tiles with elementwise loads, capped
// workgroup counts (grid-stride loops), a long reduction (in = 16384) on every path, float32 y / residual.
namespace {
const bench::LinearCaseParams& params(const bench::OpCase& c) { return bench::case_as<bench::LinearCase>(c).p; }
bool not_coop(const bench::OpCase& c) { return params(c).variant != int(kLinearCoopVariant) && !params(c).int8_dot; }
bool int8_case(const bench::OpCase& c) { return params(c).int8_dot; }
// The int8 dot-product matmul's cases (LinearKernel::record_quant_path int8_dot), skipped, saying why,
// on a device without shaderIntegerDotProduct.
void run_int8_table(Precision p) {
  if (p == Precision::fp16 && !test::device_has_fp16()) {
    test::skip("device has no fp16 path; fp16 case not run on this device");
    return;
  }
  {
    auto ctx = Context::create(test::validated_options(p));
    if (!ctx->device().caps().integer_dot_product) {
      test::skip("the device has no shaderIntegerDotProduct: no int8 dot-product matmul");
      return;
    }
    const std::string speed = ctx->device().caps().int8_dot_accelerated ? "accelerated" : "not accelerated";
    MESSAGE("int8 dot products: " << speed);
  }
  test::run_op_table("linear", p, {}, int8_case);
}
}  // namespace
TEST_CASE("linear: case table fp32") { test::run_op_table("linear", Precision::fp32, {}, not_coop); }
TEST_CASE("linear: case table fp16") { test::run_op_table("linear", Precision::fp16, {}, not_coop); }
TEST_CASE("linear: int8 dot-product matmul fp32") { run_int8_table(Precision::fp32); }
// The quantized cases that take the device's own path (record_quant) where that path is int8 (a GPU that
// accelerates 4x8-bit dot products; int_dot=on makes a CPU driver choose it): the reference rounds the activations
// as the kernel does. Before, those cases checked the int8 kernel against unrounded activations, and on an H200
// every quantized case and the self-test at load failed.
TEST_CASE("linear: quantized cases on the device's int8 choice (DIFFVK_TUNING=int_dot=on)") {
  {
    auto ctx = Context::create(test::validated_options(Precision::fp32));
    if (!ctx->device().caps().integer_dot_product) {
      test::skip("the device has no shaderIntegerDotProduct: no int8 dot-product matmul");
      return;
    }
  }
  struct IntDotOn {
    IntDotOn() { setenv("DIFFVK_TUNING", "int_dot=on", 1); }
    ~IntDotOn() { unsetenv("DIFFVK_TUNING"); }
  } on;
  {
    auto ctx = Context::create(test::validated_options(Precision::fp32));
    REQUIRE(ctx->device().caps().int8_dot_accelerated);
    LinearKernel k(ctx->device(), KernelOptions::for_device(ctx->device()), {QuantType::q8_0});
    CHECK(k.quant_choice().path == QuantRowPath::int8_dot);
  }
  test::run_op_table("linear", Precision::fp32, {}, [](const bench::OpCase& c) {
    return params(c).weights != QuantType::f16 && params(c).variant < 0 && !params(c).int8_dot;
  });
}
TEST_CASE("linear: int8 dot-product matmul fp16") { run_int8_table(Precision::fp16); }
// The cooperative-matrix tiles (shaders/coopmat/linear_coopmat.comp) on devices that have a usable
// shape: Mesa 26 lavapipe in CI's .ci/coopmat pass (there the tuning does not pick them, quirk
// coopmat_emulated; the case table runs them by variant). Skipped elsewhere, saying why.
TEST_CASE("linear: cooperative-matrix tiles") {
  if (!test::device_has_fp16()) {
    test::skip("device has no fp16 path; the cooperative-matrix shader takes fp16");
    return;
  }
  {
    auto ctx = Context::create(test::validated_options(Precision::fp16));
    std::string why;
    if (!ctx->device().coopmat()) {
      linear_uses_coopmat(ctx->device().caps(), true, &why);
      test::skip("no cooperative-matrix path on this device: " + why);
      return;
    }
    const LinearTiles& t = linear_tile_candidates(ctx->device().caps()).at(kLinearCoopVariant);
    MESSAGE("cooperative matrices " << t.cm << "x" << t.cn << "x" << t.ck << ", " << t.nsg << " subgroups of " << t.sg
                                    << ", tile " << t.bm << "x" << t.bn << "x" << t.bk);
  }
  test::run_op_table("linear", Precision::fp16, {}, [](const bench::OpCase& c) { return !not_coop(c); });
}
// The shared-memory tiles with the k step looped in bodies of 8 (quirk long_unrolled_compile: NVIDIA's
// compiler), forced here so that the loop runs on every CI device.
TEST_CASE("linear: shared-memory tiles under quirk long_unrolled_compile") {
  for (Precision p : test::supported_precisions())
    test::run_op_table("linear", p, {"long_unrolled_compile"},
                       [](const bench::OpCase& c) { return params(c).variant == 1 || params(c).variant == 2; });
}

// Quirk half_select_crash (arm64 lavapipe 22.3): every quantized block scale is converted from its binary16 bits
// by hand (shaders/common.glsl half_bits), forced here on the CI device: the first two cases of each quantized path
// of the ops that read such scales (the matmul's tiles and int8 dot products, the one-row kernels, the embedding
// gather, attention over a Q8_0 cache).
TEST_CASE("quirk half_select_crash: quantized scales converted by hand in every op that reads them") {
  for (const char* op : {"linear", "linear_row", "embed", "diff_attn"}) {
    std::map<std::string, int> taken;
    test::run_op_table(op, Precision::fp32, {"half_select_crash"}, [&](const bench::OpCase& c) {
      for (const char* q : {"q8_0", "q4_0", "int8-dot"})
        if (c.name.find(q) != std::string::npos && c.name.find("coopmat") == std::string::npos) return ++taken[q] <= 2;
      return false;
    });
  }
}

// The register tile's _sg variant shares x rows by constant-lane subgroupBroadcast on GPUs and by
// subgroupShuffle on CPU drivers (faster on lavapipe 22.3); forced here so that the GPU form runs in CI
// (subgroups of 8 on lavapipe, 4 on SwiftShader: XB's per-size branches).
TEST_CASE("linear: the register tile's constant-lane broadcasts (DIFFVK_LINEAR_REG_SHARE=broadcast)") {
  struct ForceBroadcast {
    ForceBroadcast() { setenv("DIFFVK_LINEAR_REG_SHARE", "broadcast", 1); }
    ~ForceBroadcast() { unsetenv("DIFFVK_LINEAR_REG_SHARE"); }
  } force;
  for (Precision p : test::supported_precisions())
    test::run_op_table("linear", p, {}, [](const bench::OpCase& c) {
      return not_coop(c) && (params(c).variant < 0 || params(c).variant == int(kLinearRegVariant));
    });
}

TEST_CASE("linear: the tile choice picks only reachable candidates (the ones a kernel builds pipelines for)") {
  for (DeviceKind kind : {DeviceKind::cpu, DeviceKind::integrated, DeviceKind::discrete})
    for (uint32_t vendor : {0x1002u, kVendorArm})
      for (uint32_t cu : {0u, 8u, 132u}) {
        DeviceCaps c = simulated(32768, 256, kind == DeviceKind::cpu ? 8 : 32);
        c.kind = kind;
        c.vendor_id = vendor;
        c.compute_units = cu;
        const auto reach = linear_reachable_variants(c);
        CHECK(std::find(reach.begin(), reach.end(), kLinearRegVariant) != reach.end());
        for (uint32_t rows : {1u, 8u, 9u, 16u, 17u, 64u, 512u, 4096u})
          for (uint32_t out : {8u, 768u, 32000u}) {
            const uint32_t v = choose_linear_tiles(c, rows, 768, out).variant;
            INFO("kind=" << int(kind) << " vendor=" << vendor << " cu=" << cu << " rows=" << rows << " out=" << out);
            CHECK(std::find(reach.begin(), reach.end(), v) != reach.end());
          }
      }
  // On CPU drivers no shared-memory tile is built.
  DeviceCaps cpu = simulated(32768, 256, 8);
  cpu.kind = DeviceKind::cpu;
  CHECK(linear_reachable_variants(cpu) == std::vector<uint32_t>{kLinearRegVariant});
}

TEST_CASE("linear_row: one subgroup per workgroup, pinned where the sizes vary (row_geometry, pure)") {
  auto geo = [](uint32_t sg, uint32_t lo, uint32_t hi, bool control, uint32_t inv = 1024) {
    DeviceCaps c = simulated(32768, inv, sg);
    c.subgroup_min_size = lo;
    c.subgroup_max_size = hi;
    c.subgroup_size_control = control;
    return row_geometry(c);
  };
  RowGeometry g = geo(64, 32, 64, true);  // RDNA (radv): wave32 or wave64
  CHECK(g.wg == 64);
  CHECK(g.pin == 64);
  CHECK(g.one_sg);
  g = geo(32, 8, 32, true);  // Intel: SIMD8/16/32
  CHECK(g.wg == 32);
  CHECK(g.pin == 32);
  CHECK(g.one_sg);
  g = geo(32, 32, 32, false);  // one size (NVIDIA, Adreno without control)
  CHECK(g.wg == 32);
  CHECK(g.pin == 0);
  CHECK(g.one_sg);
  g = geo(64, 32, 64, false);  // sizes vary and cannot be set: the shared-memory step stays
  CHECK(g.pin == 0);
  CHECK_FALSE(g.one_sg);
  g = geo(16, 16, 16, false);  // Mali (Valhall): one size, 16
  CHECK(g.wg == 16);
  CHECK(g.pin == 0);
  CHECK(g.one_sg);
  g = geo(64, 64, 64, false);  // Adreno without size control, GCN: one size, 64
  CHECK(g.wg == 64);
  CHECK(g.pin == 0);
  CHECK(g.one_sg);
  g = geo(4, 4, 4, false);  // SwiftShader: 8 invocations are two subgroups
  CHECK(g.wg == 8);
  CHECK_FALSE(g.one_sg);
  g = geo(128, 128, 128, false, 64);  // a 128-wide subgroup above the invocation limit
  CHECK(g.wg == 64);
  CHECK_FALSE(g.one_sg);
  CHECK(g.nf == 8);
  DeviceCaps cpu = simulated(32768, 1024, 8);  // llvmpipe: one SIMD batch per workgroup; more features share its cost
  cpu.kind = DeviceKind::cpu;
  CHECK(row_geometry(cpu).nf == kCpuRowFeatures);
  CHECK(row_geometry(cpu).nf % 2 == 0);  // whole RoPE pairs in a workgroup
}

// ContextOptions::simulate_subgroup_size on lavapipe (subgroup 8, size control): the one-row and register-tiled
// kernels take the simulated width, with nothing pinned (no required size: the hardware's subgroups differ).
TEST_CASE("linear: a simulated phone subgroup (16, 64) sizes the workgroups, with nothing pinned") {
  DeviceCaps lavapipe = simulated(32768, 1024, 8);
  lavapipe.kind = DeviceKind::cpu;
  lavapipe.subgroup_arithmetic_compute = lavapipe.subgroup_size_control = true;
  lavapipe.subgroup_min_size = 4;
  for (const uint32_t sg : {16u, 64u}) {
    CAPTURE(sg);
    ContextOptions o;
    o.simulate_subgroup_size = sg;
    DeviceCaps c = lavapipe;
    simulate_limits(c, o);
    const RowGeometry g = row_geometry(c);
    CHECK(g.wg == sg);
    CHECK(g.pin == 0);
    const auto cand = linear_tile_candidates(c);
    REQUIRE(cand.size() == 4);  // no cooperative-matrix candidate
    CHECK(cand[kLinearRegVariant].wg == sg);
    CHECK(cand[kLinearRegVariant].pin == 0);
    CHECK(cand[0].wg == 64);  // the matrix-vector path: 64 invocations
    for (const LinearTiles& t : cand) CHECK(t.wg >= sg);
  }
}

TEST_CASE("linear_row: lane groups where a row has fewer load steps than lanes (row_lanes, pure)") {
  auto geo = [](uint32_t sg, uint32_t lo, uint32_t hi, bool control, DeviceKind kind = DeviceKind::discrete) {
    DeviceCaps c = simulated(32768, 1024, sg);
    c.subgroup_min_size = lo;
    c.subgroup_max_size = hi;
    c.subgroup_size_control = control;
    c.kind = kind;
    return row_geometry(c);
  };
  const RowGeometry gcn = geo(64, 64, 64, false);  // raven / renoir: wave64 only
  CHECK(gcn.lane_groups);
  CHECK(gcn.wg == 64);
  CHECK(gcn.nf == 8);
  // fp16 vector loads (8 halves): in = 256 -> 32 steps -> 2 groups of 32 lanes, 4 features each.
  CHECK(row_lanes(gcn, 256 / 8, false) == 32);
  CHECK(row_lanes(gcn, 256 / 8, true) == 32);
  CHECK(row_lanes(gcn, 512 / 8, false) == 64);  // as many steps as lanes: one group
  CHECK(row_lanes(gcn, 4096 / 8, false) == 64);
  CHECK(row_lanes(gcn, 384 / 8, false) == 64);  // 48 steps: the next power of two is the workgroup
  CHECK(row_lanes(gcn, 20, false) == 32);       // 20 steps: 32 lanes (every step one lane)
  // Few steps: at most nf groups (1 feature each), nf / 2 with RoPE pairs.
  CHECK(row_lanes(gcn, 8, false) == 8);  // Q4_0 at in = 256: 8 blocks -> 8 groups of 8 lanes
  CHECK(row_lanes(gcn, 8, true) == 16);  // the RoPE epilogue: 4 groups of a pair each
  CHECK(row_lanes(gcn, 1, false) == 8);
  CHECK(row_lanes(gcn, 16, true) == 16);
  const RowGeometry rdna = geo(64, 32, 64, true);  // pinned wave64
  CHECK(row_lanes(rdna, 32, false) == 32);
  CHECK(row_lanes(rdna, 64, false) == 64);
  const RowGeometry nv = geo(32, 32, 32, false);
  CHECK(row_lanes(nv, 32, false) == 32);
  CHECK(row_lanes(nv, 16, false) == 16);
  CHECK(row_lanes(nv, 2, false) == 4);  // 8 groups of 4 lanes, one feature each
  CHECK(row_lanes(nv, 2, true) == 8);
  // Every result: a power of two dividing wg, whose groups divide nf (even features per group with pairs).
  for (const RowGeometry& g : {gcn, rdna, nv, geo(8, 8, 8, false), geo(4, 4, 4, false)})
    for (uint32_t steps : {1u, 2u, 3u, 5u, 8u, 13u, 32u, 33u, 64u, 1000u})
      for (bool pairs : {false, true})
        for (uint32_t force : {0u, 1u, 2u, 3u, 4u, 16u, 64u, 256u}) {
          const uint32_t lg = row_lanes(g, steps, pairs, force);
          CAPTURE(g.wg);
          CAPTURE(steps);
          CAPTURE(force);
          CHECK(lg >= 1);
          CHECK((lg & (lg - 1)) == 0);
          CHECK(g.wg % lg == 0);
          CHECK(g.nf % (g.wg / lg) == 0);
          if (pairs) CHECK((g.nf / (g.wg / lg)) % 2 == 0);
        }
  // CPU drivers take one lane per group (no cross-lane sums) unless forced (DIFFVK_ROW_LANES, the op tables' lanes=
  // cases).
  const RowGeometry cpu = geo(8, 8, 8, false, DeviceKind::cpu);
  CHECK_FALSE(cpu.lane_groups);
  CHECK(cpu.lanes == 1);
  CHECK(cpu.nf == kCpuRowFeatures);
  CHECK(row_lanes(cpu, 2, false) == 1);
  CHECK(row_lanes(cpu, 4096 / 8, true) == 1);  // 8 groups of 4 features: RoPE pairs in one group
  CHECK(row_lanes(cpu, 2, false, 8) == 8);
  CHECK(row_lanes(cpu, 2, false, 4) == 4);
  CHECK(row_lanes(cpu, 2, true, 1) == 1);    // 8 groups of 4 features: pairs still in one group
  CHECK(row_lanes(cpu, 2, false, 3) == 2);   // rounded down to a power of two
  CHECK(row_lanes(cpu, 2, false, 64) == 8);  // at most the workgroup
  CHECK(row_lanes(gcn, 2, true, 1) == 16);   // clamped to whole pairs per group
  // Quirk row_lane_pairs (LLVM <= 15 lavapipe): two lanes per feature.
  DeviceCaps old = simulated(32768, 1024, 8);
  old.kind = DeviceKind::cpu;
  old.quirks.push_back({"row_lane_pairs", "test"});
  const RowGeometry pairs = row_geometry(old);
  CHECK(pairs.lanes == 2);
  CHECK(row_lanes(pairs, 2, false) == 2);
  CHECK(row_lanes(pairs, 4096 / 8, true) == 2);
  CHECK(row_lanes(pairs, 2, false, 8) == 8);  // forced
}

TEST_CASE("linear: the k loop of quirk long_unrolled_compile, and unknown quirk names") {
  DeviceCaps c = simulated(49152, 1024, 32);
  for (const LinearTiles& t : linear_tile_candidates(c))
    if (!t.vec && !t.reg) CHECK(t.ku == t.bk);
  c.driver_id = VK_DRIVER_ID_NVIDIA_PROPRIETARY;
  apply_quirks(c);
  REQUIRE(c.has_quirk("long_unrolled_compile"));
  for (const LinearTiles& t : linear_tile_candidates(c))
    if (!t.vec && !t.reg) {
      CHECK(t.ku == std::min(t.bk, 8u));
      CHECK(t.bk % t.ku == 0);
    }
  ContextOptions o = test::validated_options();
  o.force_quirks = {"no_such_quirk"};
  try {
    (void)Context::create(o);
    FAIL("an unknown quirk name was accepted");
  } catch (const Error& e) {
    CHECK(e.status() == Status::invalid_argument);
    CHECK(std::string(e.what()).find("no_such_quirk") != std::string::npos);
  }
}

TEST_CASE("linear: invalid arguments are rejected") {
  auto ctx = test::make_context(Precision::fp32);
  Device& dev = ctx->device();
  LinearKernel kernel(dev, KernelOptions::for_device(dev), {}, /*all_variants=*/true);
  Buffer a(dev, 4096, MemoryDomain::device, "a"), b(dev, 4096, MemoryDomain::device, "b"),
      c(dev, 4096, MemoryDomain::device, "c");
  Program prog(dev, "linear errors");
  auto status = [](auto&& fn) { return test::status_of(fn); };
  const LinearParams good{4, 16, 8, 16, 8};
  CHECK(status([&] {
          kernel.record(prog, a.range(), b.range(), c.range(), {0, 16, 8, 16, 8});
        }) == Status::invalid_argument);
  CHECK(status([&] {
          kernel.record(prog, a.range(), b.range(), c.range(), {4, 16, 8, 15, 8});
        }) == Status::invalid_argument);
  CHECK(status([&] {
          kernel.record(prog, a.range(), b.range(), c.range(), {4, 16, 8, 16, 7});
        }) == Status::invalid_argument);
  CHECK(status([&] { kernel.record(prog, a.range(0, 255), b.range(), c.range(), good); }) == Status::invalid_argument);
  CHECK(status([&] { kernel.record(prog, a.range(), b.range(0, 511), c.range(), good); }) == Status::invalid_argument);
  CHECK(status([&] { kernel.record(prog, a.range(), b.range(), c.range(0, 127), good); }) == Status::invalid_argument);
  CHECK(status([&] { kernel.record(prog, a.range(), b.range(), c.range(), good, a.range(0, 64)); }) ==
        Status::invalid_argument);
  CHECK(status([&] { kernel.record(prog, a.range(), b.range(), a.range(2048, 128), good); }) ==
        Status::invalid_argument);
  CHECK(status([&] { kernel.record(prog, a.range(), b.range(), c.range(0, 128), good, c.range(64, 128)); }) ==
        Status::invalid_argument);
  CHECK(status([&] {
          kernel.record_variant(prog, 0, a.range(), b.range(), c.range(), {9, 16, 8, 16, 8});
        }) == Status::invalid_argument);
  CHECK(status([&] { kernel.record_variant(prog, 7, a.range(), b.range(), c.range(), good); }) ==
        Status::invalid_argument);
  // The bias: out (8) float32 values, not overlapping y.
  CHECK(status([&] {
          kernel.record(prog, a.range(), b.range(), c.range(0, 128), good, {}, Elem::storage, c.range(256, 28));
        }) == Status::invalid_argument);
  CHECK(status([&] {
          kernel.record(prog, a.range(), b.range(), c.range(0, 128), good, {}, Elem::storage, c.range(96, 32));
        }) == Status::invalid_argument);
  CHECK(prog.op_count() == 0);
  // The legal forms record: separate residual, in-place residual, a bias beside either.
  CHECK(status([&] { kernel.record(prog, a.range(), b.range(), c.range(0, 128), good, c.range(256, 128)); }) ==
        Status::ok);
  CHECK(status([&] { kernel.record(prog, a.range(), b.range(), c.range(0, 128), good, c.range(0, 128)); }) ==
        Status::ok);
  CHECK(status([&] {
          kernel.record(prog, a.range(), b.range(), c.range(0, 128), good, c.range(0, 128), Elem::storage,
                        c.range(512, 32));
        }) == Status::ok);
  CHECK(prog.op_count() == 3);
}

TEST_CASE("linear: the cooperative-matrix candidate and its choice (pure, simulated devices)") {
  for (uint32_t sg : {8u, 32u, 64u})
    for (uint32_t shared : {16384u, 32768u, 65536u})
      for (uint32_t mnk : {8u, 16u, 32u}) {
        DeviceCaps c = simulated(shared, 1024, sg);
        c.kind = DeviceKind::integrated;
        c.coopmat_m = c.coopmat_n = c.coopmat_k = mnk;
        const auto cand = linear_tile_candidates(c);
        INFO("sg=" << sg << " shared=" << shared << " mnk=" << mnk);
        REQUIRE(cand.size() == 5);
        const LinearTiles& t = cand[kLinearCoopVariant];
        CHECK(t.coop);
        CHECK(t.variant == kLinearCoopVariant);
        CHECK(t.wg == t.nsg * sg);
        CHECK(t.wg <= 1024);
        CHECK(t.shared_bytes <= shared);
        CHECK(t.bm == t.sgm * 2 * mnk);
        CHECK(t.bn == (t.nsg / t.sgm) * 2 * mnk);
        CHECK(t.bk % mnk == 0);
        CHECK(t.bk % 8 == 0);
        CHECK(t.pin == 0);  // one subgroup size: nothing to pin
        // Past 16 rows the tuning takes it in fp16; never in fp32, nor under quirk coopmat_emulated.
        CHECK(choose_linear_tiles(c, 512, 2048, 2048).coop);
        CHECK(!choose_linear_tiles(c, 16, 2048, 2048).coop);
        CHECK(!choose_linear_tiles(c, 512, 2048, 2048, /*fp16=*/false).coop);
        const auto reach = linear_reachable_variants(c);
        CHECK(std::find(reach.begin(), reach.end(), kLinearCoopVariant) != reach.end());
        std::string why;
        CHECK(!linear_uses_coopmat(c, false, &why));
        CHECK(why.find("fp32") != std::string::npos);
        force_quirk(c, "coopmat_emulated");
        CHECK(!choose_linear_tiles(c, 512, 2048, 2048).coop);
        CHECK(!linear_uses_coopmat(c, true, &why));
        CHECK(why == "quirk coopmat_emulated");
      }
  // Subgroup sizes that vary: pinned where the device can be told, absent where it cannot.
  DeviceCaps v = simulated(32768, 1024, 32);
  v.subgroup_min_size = 32, v.subgroup_max_size = 64;
  v.coopmat_m = v.coopmat_n = v.coopmat_k = 16;
  CHECK(linear_tile_candidates(v).size() == 4);
  v.subgroup_size_control = true;
  REQUIRE(linear_tile_candidates(v).size() == 5);
  CHECK(linear_tile_candidates(v)[kLinearCoopVariant].pin == 32);
  // Nothing fits: no candidate.
  DeviceCaps tiny = simulated(1024, 64, 64);
  tiny.coopmat_m = tiny.coopmat_n = tiny.coopmat_k = 16;
  CHECK(linear_tile_candidates(tiny).size() == 4);
  std::string why;
  CHECK(!linear_uses_coopmat(tiny, true, &why));
  CHECK(why.find("fits") != std::string::npos);
}

TEST_CASE(
    "linear: quantized weights take the matrix-vector shader for 2-8 rows and a shared-memory tile past 16 rows on "
    "GPUs (choose_quant_linear_tiles, pure)") {
  DeviceCaps gpu = simulated(49152, 1024, 32);
  gpu.kind = DeviceKind::discrete;
  gpu.compute_units = 8;
  // 2-8 rows (a speculative verify pass): each weight dequantized once for every row, not a 16-row register tile.
  for (uint32_t rows : {1u, 2u, 8u}) CHECK(choose_quant_linear_tiles(gpu, rows, 2048, 2048).variant == 0u);
  for (uint32_t rows : {9u, 16u}) CHECK(choose_quant_linear_tiles(gpu, rows, 2048, 2048).variant == kLinearRegVariant);
  const LinearTiles big = choose_quant_linear_tiles(gpu, 512, 2048, 2048);
  CHECK((big.variant == 1 || big.variant == 2));
  CHECK(big.variant == choose_linear_tiles(gpu, 512, 2048, 2048).variant);
  // Cooperative matrices take fp16 weights only: the quantized choice stays on the shared-memory tiles.
  gpu.coopmat_m = gpu.coopmat_n = gpu.coopmat_k = 16;
  CHECK(choose_linear_tiles(gpu, 512, 2048, 2048).coop);
  CHECK(choose_quant_linear_tiles(gpu, 512, 2048, 2048).variant == big.variant);
  // CPU drivers: the register tile at every row count; Mali: the matrix-vector shader up to 8 rows (as for f16
  // weights), then the register tile.
  DeviceCaps cpu = simulated(32768, 256, 8);
  cpu.kind = DeviceKind::cpu;
  DeviceCaps mali = simulated(32768, 256, 16);
  mali.kind = DeviceKind::integrated;
  mali.vendor_id = kVendorArm;
  for (uint32_t rows : {1u, 8u, 17u, 512u}) {
    CHECK(choose_quant_linear_tiles(cpu, rows, 2048, 2048).variant == kLinearRegVariant);
    CHECK(choose_quant_linear_tiles(mali, rows, 2048, 2048).variant == (rows <= 8 ? 0u : kLinearRegVariant));
  }
}

TEST_CASE(
    "linear: the quantized matmul's int8 path only where the device accelerates it (choose_quant_matmul_path, pure)") {
  DeviceCaps c = simulated(32768, 256, 8);
  c.name = "simulated";
  CHECK(choose_quant_matmul_path(c).path == QuantRowPath::dequant);
  c.integer_dot_product = true;  // unaccelerated (lavapipe, SwiftShader)
  const QuantRowChoice slow = choose_quant_matmul_path(c);
  CHECK(slow.path == QuantRowPath::dequant);
  CHECK(slow.reason.find("not accelerated") != std::string::npos);
  c.int8_dot_accelerated = true;
  CHECK(choose_quant_matmul_path(c).path == QuantRowPath::int8_dot);
  const QuantRowPath deq = QuantRowPath::dequant, i8 = QuantRowPath::int8_dot;
  CHECK(choose_quant_matmul_path(c, &deq).path == QuantRowPath::dequant);
  c.integer_dot_product = c.int8_dot_accelerated = false;
  CHECK(test::status_of([&] { choose_quant_matmul_path(c, &i8); }) == Status::unsupported);
}

TEST_CASE("linear: the int8 matmul without its pipelines or the feature is an error naming why") {
  auto ctx = test::make_context(Precision::fp32);
  Device& dev = ctx->device();
  Buffer a(dev, 1 << 16, MemoryDomain::device, "a"), b(dev, 1 << 16, MemoryDomain::device, "b"),
      c(dev, 1 << 16, MemoryDomain::device, "c");
  Program prog(dev, "int8 matmul errors");
  const LinearParams lp{4, 64, 8, 64, 8};
  const QuantRowPath deq = QuantRowPath::dequant, i8 = QuantRowPath::int8_dot;
  LinearKernel dequant(dev, KernelOptions::for_device(dev), {QuantType::q8_0}, false, &deq);
  CHECK(dequant.quant_choice().path == QuantRowPath::dequant);
  const Status want = dev.caps().integer_dot_product ? Status::invalid_argument : Status::unsupported;
  CHECK(test::status_of([&] {
          dequant.record_quant_path(prog, QuantRowPath::int8_dot, QuantType::q8_0, a.range(), b.range(), c.range(), lp);
        }) == want);
  if (!dev.caps().integer_dot_product) {
    CHECK(test::status_of([&] {
            LinearKernel k(dev, KernelOptions::for_device(dev), {QuantType::q8_0}, false, &i8);
          }) == Status::unsupported);
    return;
  }
  LinearKernel forced(dev, KernelOptions::for_device(dev), {QuantType::q8_0}, false, &i8);
  CHECK(forced.quant_choice().path == QuantRowPath::int8_dot);
  CHECK(test::status_of([&] { forced.record_quant(prog, QuantType::q4_0, a.range(), b.range(), c.range(), lp); }) ==
        Status::invalid_argument);  // built for Q8_0 only
  CHECK(prog.op_count() == 0);
  CHECK(test::status_of([&] { forced.record_quant(prog, QuantType::q8_0, a.range(), b.range(), c.range(), lp); }) ==
        Status::ok);
  CHECK(prog.op_count() == 1);
}
