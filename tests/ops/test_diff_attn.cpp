// Conformance of the differential attention kernels (fused prefill; split-K decode merged by its last split)
// against the float64 reference, through the op's case table (bench/cases/diff_attn.cpp): fresh seeded inputs, poisoned
// outputs, odd S and T, chunked prefill after a prefix, decode S = 1..8 after a cached prefix, GQA n_rep 1/2/4/8,
// lambda < 0 and > 1, D = 2/6/8/12/16/20/32/64/128 (16-byte, 4-element and element-wise loads), GQA up to n_rep = 64,
// fp16 and fp32, bit-identical replays, the per-invocation loop budget.
#include <algorithm>
#include <functional>
#include <tuple>
#include <doctest/doctest.h>

#include <cmath>
#include <random>

#include "attn_inputs.hpp"
#include "reference/diff_attn_ref.hpp"
#include "gpu_test.hpp"
#include "bench/cases/diff_attn.hpp"
#include "bench/cases/diff_v2_attn.hpp"
#include "op_table.hpp"
#include "ops/diff_attn.hpp"
#include "ops/rope_kv.hpp"
#include "status_of.hpp"

using namespace diffvk;

namespace {

// Runs diff_attn cases built outside the table (device-dependent or on-request shapes) through the
// same runner as the table.
void run_cases(Context& ctx, const std::vector<bench::DiffAttnCase>& cases) {
  bench::OpRunner runner(ctx.device());
  for (const bench::OpCase& c : cases) {
    INFO("diff_attn case " << c.name);
    const auto r = runner.run(c);
    INFO(r.summary());
    REQUIRE(r.skipped.empty());
    CHECK(r.check.ok);
    CHECK(r.replay_identical);
  }
}

// The parameters the tests pick cases by, of a diff_attn or a diff_v2_attn case (H: output heads).
struct AttnShape {
  uint32_t H, Hkv, D, S, pos0;
  bool decode, kv_q8;
};
AttnShape attn_shape(const bench::OpCase& c) {
  if (const auto* d = dynamic_cast<const bench::DiffAttnCase*>(&c)) {
    const bench::DiffAttnCaseParams& v = d->p;
    return {v.H, v.Hkv, v.D, v.S, v.pos0, v.decode, v.kv_q8};
  }
  const bench::DiffV2AttnCaseParams& v = bench::case_as<bench::DiffV2AttnCase>(c).p;
  return {v.H, v.Hkv, v.D, v.S, v.pos0, v.decode, v.kv_q8};
}

}  // namespace

// Every prefill, chunked-prefill and split-K decode shape, both precisions, and the shared-memory
// reduction path (forced) come from the op's one case table (bench/cases/diff_attn.cpp).
TEST_CASE("diff_attn: case table fp32") { test::run_op_table("diff_attn", Precision::fp32); }
TEST_CASE("diff_attn: case table fp16") { test::run_op_table("diff_attn", Precision::fp16); }
TEST_CASE("diff_v2_attn: case table fp32") { test::run_op_table("diff_v2_attn", Precision::fp32); }
TEST_CASE("diff_v2_attn: case table fp16") { test::run_op_table("diff_v2_attn", Precision::fp16); }
// A few Q8_0 KV-cache cases of both tables (fused prefill, chunk, split-K decode, a wrapped ring; V1 and V2), for the
// CI passes that run a subset (aarch64 under qemu, the Mesa 26 pass): the full tables run them all. One test per
// precision, so that a pass can take the precision its device adds (aarch64 Mesa 25: fp16; Mesa 22.3 runs fp32).
namespace {
void q8_cache_cases(Precision p) {
  if (p == Precision::fp16 && !test::device_has_fp16()) {
    test::skip("device has no fp16 path; fp16 cases not run on this device");
    return;
  }
  auto pick = [](const bench::OpCase& c) {
    return attn_shape(c).kv_q8 && c.subgroup() &&
           (c.name.find("H=4/1 D=48") != std::string::npos || c.name.find("H=4/2 D=16 S=13") != std::string::npos ||
            c.name.find("H=4/1 D=64 S=17") != std::string::npos ||
            c.name.find("decode H=4/1 D=32 S=3") != std::string::npos ||
            c.name.find("window=10 ring=22") != std::string::npos);  // a chunk over a wrapped ring
  };
  test::run_op_table("diff_attn", p, {}, pick);
  test::run_op_table("diff_v2_attn", p, {}, pick);
}
}  // namespace
TEST_CASE("diff_attn: Q8_0 KV cache cases of V1 and V2 fp32") { q8_cache_cases(Precision::fp32); }
TEST_CASE("diff_attn: Q8_0 KV cache cases of V1 and V2 fp16") { q8_cache_cases(Precision::fp16); }

namespace {
// The fp32 context, its kernel options and the key-block kernel (D = 16, 2 query heads per KV head, 4-key blocks) that
// the forced-core tests check first (prefill_tiles().blocks == 1); no kernel, after test::skip(why), where the device
// has no subgroup arithmetic.
struct BlockKernel {
  std::unique_ptr<Context> ctx;
  KernelOptions o;
  std::unique_ptr<DiffAttnKernel> k;
};
BlockKernel block_kernel_or_skip(const char* why) {
  BlockKernel b{Context::create(test::validated_options(Precision::fp32)), {}, nullptr};
  b.o = KernelOptions::for_device(b.ctx->device());
  if (!b.o.subgroup) {
    test::skip(why);
    return b;
  }
  b.k = std::make_unique<DiffAttnKernel>(b.ctx->device(), b.o, 16, 2, 4);
  REQUIRE(b.k->prefill_tiles().blocks == 1);
  return b;
}
// With DIFFVK_ATTN_CORE=value (left set), Context::create fails with `status` and a message naming `named`.
void check_core_rejected(const char* value, Precision precision, Status status, const char* named,
                         const char* fail_message) {
  setenv("DIFFVK_ATTN_CORE", value, 1);
  try {
    Context::create(test::validated_options(precision));
    FAIL(fail_message);
  } catch (const Error& e) {
    CHECK(e.status() == status);
    CHECK(std::string(e.what()).find(named) != std::string::npos);
  }
}
}  // namespace

// The key-block core (attn_core.glsl attend_blocks) is what GPUs run; CPU drivers keep the per-key core
// (quirk per_key_attention), so here it is forced with DIFFVK_ATTN_CORE=blocks over a subset of both tables
// that reaches each of its paths: element-wise, 8- and 16-byte loads (D = 6, 16, 64, 128), key groups (D = 8
// on 8 lanes), GQA up to n_rep = 64, chunks after cached rows, split-K decode (max splits), saturated λ, the
// Q8_0 cache, sliding windows over a wrapped ring. The full tables run it on GPUs.
TEST_CASE("diff_attn: the key-block core on both tables (DIFFVK_ATTN_CORE=blocks)") {
  struct ForceBlocks {
    ForceBlocks() { setenv("DIFFVK_ATTN_CORE", "blocks", 1); }
    ~ForceBlocks() { unsetenv("DIFFVK_ATTN_CORE"); }
  } force;
  {  // a value it does not know is an error naming the variable
    check_core_rejected("fast", Precision::fp32, Status::invalid_argument, "DIFFVK_ATTN_CORE",
                        "DIFFVK_ATTN_CORE=fast was accepted");
    setenv("DIFFVK_ATTN_CORE", "blocks", 1);
  }
  {
    const BlockKernel b =
        block_kernel_or_skip("no subgroup arithmetic: the key-block core does not run on this device");
    if (!b.k) return;
    REQUIRE(b.k->decode_tiles(1).blocks == 1);
  }
  // (name fragment, Q8_0 cache): each picks one case per precision.
  using Pick = std::pair<const char*, bool>;
  static const std::vector<Pick> v1 = {{"prefill H=3/3 D=6 S=11", false},
                                       {"prefill H=64/1 D=8 S=3", false},
                                       {"prefill H=2/1 D=64 S=40", false},
                                       {"prefill H=4/2 D=16 S=13 pos0=33", false},
                                       {"decode H=4/2 D=16 S=6 pos0=77 lambda=0.8 max-splits", false},
                                       {"decode H=2/2 D=128 S=2 pos0=40", false},
                                       {"decode H=4/1 D=48 S=3 pos0=65", true},
                                       {"window=10 ring=22", false},  // a chunk over a wrapped ring
                                       {"window=20 ring=27", false},  // ... a decode with max splits
                                       {"S=9 pos0=5 lambda=-0.4 window=1", false}};
  static const std::vector<Pick> v2 = {{"decode H=3/1 D=6 S=5", false},
                                       {"prefill H=32/1 D=8 S=5", false},
                                       {"prefill H=4/1 D=64 S=17", false},
                                       {"decode H=4/2 D=16 S=6 pos0=77 z-std=1 max-splits", false},
                                       {"prefill H=4/2 D=32 S=13", true}};
  auto picker = [](const std::vector<Pick>& names) {
    return [&names](const bench::OpCase& c) {
      for (const auto& [n, q8] : names)
        if (c.subgroup() && attn_shape(c).kv_q8 == q8 && c.name.find(n) != std::string::npos) return true;
      return false;
    };
  };
  for (Precision p : test::supported_precisions()) {
    test::run_op_table("diff_attn", p, {}, picker(v1));
    test::run_op_table("diff_v2_attn", p, {}, picker(v2));
  }
}

namespace {
struct ForceStaged {
  ForceStaged() { setenv("DIFFVK_ATTN_CORE", "staged", 1); }
  ~ForceStaged() { unsetenv("DIFFVK_ATTN_CORE"); }
};
// The cases of both tables that the staged prefill runs: (name fragment, Q8_0 cache).
using Pick = std::pair<const char*, bool>;
const std::vector<Pick> kStagedV1 = {
    {"prefill H=4/2 D=16 S=33 ", false},       {"prefill H=8/2 D=16 S=129", false},
    {"prefill H=2/1 D=64 S=40", false},        {"prefill H=2/2 D=128 S=19", false},
    {"prefill H=64/1 D=8 S=3", false},         {"prefill H=4/2 D=16 S=13 pos0=33", false},
    {"prefill H=8/1 D=16 S=5 pos0=60", false}, {"prefill H=4/1 D=48 S=17", true},
    {"prefill H=2/1 D=64 S=40", true},         {"prefill H=64/1 D=16 S=3", true},
    {"prefill H=4/2 D=16 S=13 pos0=33", true}, {"window=10 ring=22", false}};
const std::vector<Pick> kStagedV2 = {{"prefill H=4/1 D=64 S=17", false},         {"prefill H=4/2 D=16 S=33", false},
                                     {"prefill H=32/1 D=8 S=5", false},          {"prefill H=2/2 D=16 S=9", false},
                                     {"prefill H=4/2 D=16 S=13 pos0=33", false}, {"prefill H=4/1 D=64 S=17", true},
                                     {"prefill H=2/1 D=128 S=19", true}};
std::function<bool(const bench::OpCase&)> staged_pick(const std::vector<Pick>& names) {
  return [&names](const bench::OpCase& c) {
    for (const auto& [n, q8] : names)
      if (c.subgroup() && attn_shape(c).kv_q8 == q8 && c.name.find(n) != std::string::npos) return true;
    return false;
  };
}
}  // namespace

// Prefill with K/V blocks staged in shared memory for several subgroups (Br x Bc; attn_core.glsl stage_k/stage_v),
// what GPUs run for prefill; CPU drivers keep one subgroup per workgroup (quirk no_kv_staging), so here it is forced
// with DIFFVK_ATTN_CORE=staged over the prefill and chunk cases of both tables whose rows split into chunks: 4- and
// 8-element units (fp16), float units (fp32 and the Q8_0 cache, dequantized while staged), key groups (D = 8, 16),
// GQA up to 64 (slots past the last query in the last workgroup), chunks after cached rows, DIFF V2 pairs.
TEST_CASE("diff_attn: prefill with staged K/V blocks on both tables (DIFFVK_ATTN_CORE=staged)") {
  ForceStaged force;
  {
    const BlockKernel b =
        block_kernel_or_skip("no subgroup arithmetic: staged K/V (key-block core) does not run on this device");
    if (!b.k) return;
    const auto& ctx = b.ctx;
    const KernelOptions o = b.o;
    const DiffAttnKernel& k = *b.k;
    REQUIRE(k.prefill_tiles().nsg > 1);
    CHECK(attn_queries_per_workgroup(k.prefill_tiles(), 2) >= kAttnStagedQueries);
    REQUIRE(k.decode_tiles(1).nsg == 1);
    // Without subgroup arithmetic the kernel keeps one subgroup per workgroup.
    KernelOptions plain = o;
    plain.subgroup = false;
    CHECK(DiffAttnKernel(ctx->device(), plain, 16, 2, 4).prefill_tiles().nsg == 1);
  }
  for (Precision p : test::supported_precisions()) {
    test::run_op_table("diff_attn", p, {}, staged_pick(kStagedV1));
    test::run_op_table("diff_v2_attn", p, {}, staged_pick(kStagedV2));
  }
}

// Q in shared memory as halves (AttnTiles::qh: fp16 storage, where fp32 Q would hold fewer than 16 queries): the
// staged cases whose kernel takes it on this device (many heads per KV group), both tables.
TEST_CASE("diff_attn: staged prefill with Q in halves") {
  ForceStaged force;
  if (!test::device_has_fp16()) {
    test::skip("no fp16 path: Q in halves needs fp16 storage");
    return;
  }
  auto ctx = Context::create(test::validated_options(Precision::fp16));
  const KernelOptions o = KernelOptions::for_device(ctx->device());
  if (!o.subgroup) {
    test::skip("no subgroup arithmetic: staged K/V (key-block core) does not run on this device");
    return;
  }
  // The staged cases of both tables whose kernel keeps Q in halves on this device: run them, and there must be some.
  std::vector<std::string> names;
  for (const char* op : {"diff_attn", "diff_v2_attn"})
    for (const auto& cp : bench::op_cases(op, bench::OpMode::conformance)) {
      const bench::OpCase& c = *cp;
      const AttnShape a = attn_shape(c);
      if (!c.fp16 || !c.subgroup() || a.decode ||
          !staged_pick(std::string(op) == "diff_attn" ? kStagedV1 : kStagedV2)(c))
        continue;
      const bool v2 = std::string(op) == "diff_v2_attn";
      const uint32_t n_rep = (v2 ? 2 : 1) * a.H / a.Hkv;
      const DiffAttnKernel k(ctx->device(), o, a.D, n_rep, 4, v2 ? AttnSoftmax::v2 : AttnSoftmax::differential,
                             a.kv_q8 ? KvFormat::q8_0 : KvFormat::storage);
      if (k.prefill_tiles().qh) names.push_back(c.name);
    }
  INFO("cases with Q in halves: " << names.size());
  REQUIRE(!names.empty());
  auto named = [&names](const bench::OpCase& c) {
    return std::find(names.begin(), names.end(), c.name) != names.end();
  };
  for (const std::string& n : names) MESSAGE("Q in halves: " << n);
  test::run_op_table("diff_attn", Precision::fp16, {}, named);
  test::run_op_table("diff_v2_attn", Precision::fp16, {}, named);
}

// The cooperative-matrix prefill (shaders/coopmat/diff_attn_coopmat.comp), forced with
// DIFFVK_ATTN_CORE=coopmat over the fp16 prefill and chunk cases whose D fits the device's shape: odd S, chunks
// after cached rows (up to 1020 keys), GQA up to 64 (slots of several queries in a tile, slots past the last
// query), D = 8-128, 900 queries at D = 128.
// Runs where the device lists a usable shape (CI: Mesa 26 lavapipe in .ci/coopmat); skipped elsewhere, saying why.
TEST_CASE("diff_attn: cooperative-matrix prefill (DIFFVK_ATTN_CORE=coopmat)") {
  if (!test::device_has_fp16()) {
    test::skip("device has no fp16 path; the cooperative-matrix shader takes fp16");
    return;
  }
  {
    auto ctx = Context::create(test::validated_options(Precision::fp16));
    if (!ctx->device().coopmat()) {
      std::string why;
      attn_uses_coopmat(ctx->device().caps(), true, 16, 2, false, false, nullptr, &why);
      // Forcing it here is an error naming the variable, never the scalar kernel.
      check_core_rejected("coopmat", Precision::fp16, Status::unsupported, "DIFFVK_ATTN_CORE=coopmat",
                          "DIFFVK_ATTN_CORE=coopmat was accepted on a device without cooperative matrices");
      unsetenv("DIFFVK_ATTN_CORE");
      test::skip("no cooperative-matrix path on this device: " + why);
      return;
    }
  }
  struct ForceCoop {
    ForceCoop() { setenv("DIFFVK_ATTN_CORE", "coopmat", 1); }
    ~ForceCoop() { unsetenv("DIFFVK_ATTN_CORE"); }
  } force;
  uint32_t ck = 0, cn = 0;
  {
    auto ctx = Context::create(test::validated_options(Precision::fp16));
    const DeviceCaps& caps = ctx->device().caps();
    const KernelOptions o = KernelOptions::for_device(ctx->device());
    const DiffAttnKernel k(ctx->device(), o, 16, 2, 4);
    REQUIRE(k.prefill_coopmat());
    const AttnCoopTiles& t = k.coop_tiles();
    MESSAGE("cooperative-matrix attention " << t.cm << "x" << t.cn << "x" << t.ck << ", " << t.nsg << " subgroups of "
                                            << t.sg << ", " << t.br << " slots x " << t.bc << " keys, "
                                            << t.shared_bytes << " B shared");
    ck = t.ck, cn = t.cn;
    // Forced where it cannot run: an error naming why, never the scalar kernel.
    auto fails = [&](const char* what, auto make) {
      INFO(what);
      try {
        make();
        FAIL("the kernel was built");
      } catch (const Error& e) {
        CHECK(e.status() == Status::unsupported);
        CHECK(std::string(e.what()).find("DIFFVK_ATTN_CORE=coopmat") != std::string::npos);
      }
    };
    fails("DIFF V2", [&] { DiffAttnKernel(ctx->device(), o, 16, 2, 4, AttnSoftmax::v2); });
    fails("Q8_0 cache", [&] { DiffAttnKernel(ctx->device(), o, 16, 2, 4, AttnSoftmax::differential, KvFormat::q8_0); });
    fails("D = 6", [&] { DiffAttnKernel(ctx->device(), o, 6, 2, 4); });
    if (caps.max_shared_memory < attn_coop_shared_bytes(1024, t.br, t.bc))
      fails("D = 1024 (shared memory)", [&] { DiffAttnKernel(ctx->device(), o, 1024, 1, 4); });
  }
  static const std::vector<const char*> names = {
      "H=1/1 D=16 S=1 pos0=0 ",  "H=2/2 D=32 S=7 pos0=0 ",     "H=4/2 D=16 S=33 pos0=0 ",  "H=4/1 D=32 S=17 pos0=0 ",
      "H=8/1 D=16 S=9 pos0=0 ",  "H=2/1 D=64 S=40 pos0=0 ",    "H=2/2 D=128 S=19 pos0=0 ", "H=8/2 D=16 S=129 pos0=0 ",
      "H=64/1 D=8 S=3 pos0=0 ",  "H=2/2 D=32 S=7 pos0=9 ",     "H=4/2 D=16 S=13 pos0=33 ", "H=8/1 D=16 S=5 pos0=60 ",
      "H=2/1 D=64 S=31 pos0=2 ", "H=2/1 D=64 S=20 pos0=1000 ", "H=1/1 D=128 S=900 pos0=0 "};
  auto ctx = Context::create(test::validated_options(Precision::fp16));
  const KernelOptions o = KernelOptions::for_device(ctx->device());
  int picked = 0;
  test::run_op_table("diff_attn", Precision::fp16, {}, [&](const bench::OpCase& c) {
    const AttnShape a = attn_shape(c);
    if (!c.subgroup() || a.kv_q8 || a.decode || a.D % ck != 0 || 2 * a.D % cn != 0) return false;
    for (const char* n : names)
      if (c.name.find(std::string("prefill ") + n) != std::string::npos) {
        // The runner's kernel takes the cooperative-matrix dispatch for this call (not the split-K path).
        const DiffAttnKernel k(ctx->device(), o, a.D, a.H / a.Hkv, 4);
        AttnCall call;
        call.S = a.S, call.pos0 = a.pos0, call.capacity = a.pos0 + a.S;
        CHECK_MESSAGE(k.prefill_uses_coopmat(call), c.name);
        return ++picked, true;
      }
    return false;
  });
  CHECK(picked >= 10);
  // On a loop-limited device (llvmpipe), one workgroup streams exactly the keys attn_coop_max_keys allows: the
  // estimate of the kernel's loop iterations must not be short (the driver would silently end its loops).
  if (ctx->device().caps().has_quirk("loop_iteration_limit")) {
    const uint32_t D = std::max(16u, ck);
    const DiffAttnKernel k(ctx->device(), o, D, 2, 4);
    const uint32_t keys = attn_coop_max_keys(ctx->device().caps(), D, k.coop_tiles());
    MESSAGE("cooperative-matrix attention: " << keys << " keys per invocation at D=" << D);
    REQUIRE(keys > 8);
    bench::DiffAttnCase c = bench::diff_attn_case(true, 4, 2, D, 3, keys - 3, 0.5, false, 9400);
    AttnCall call;
    call.S = c.p.S, call.pos0 = c.p.pos0, call.capacity = c.p.pos0 + c.p.S;
    REQUIRE(k.prefill_uses_coopmat(call));
    run_cases(*ctx, {c});
  }
}

TEST_CASE("diff_attn: row 0 equals (1 - lambda) V[0] after the norm on the GPU") {
  // Identity from docs/maths.md, checked independently of the reference implementation.
  auto ctx = test::make_context(Precision::fp32);
  Device& dev = ctx->device();
  const uint32_t H = 2, D = 16, DV = 32, S = 1;
  DiffAttnKernel kernel(dev, KernelOptions::for_device(dev), D, 1);
  std::vector<float> q(S * H * DV), kc(H * 4 * DV), vc(H * 4 * DV), w(DV, 1.0f);
  std::mt19937_64 rng(5);
  std::normal_distribution<float> nd;
  for (auto& x : q) x = nd(rng);
  for (auto& x : kc) x = nd(rng);
  for (auto& x : vc) x = nd(rng);
  Buffer buf(dev, 16384, MemoryDomain::device, "row0");
  buf.upload(0, q.data(), q.size() * 4);
  buf.upload(1024, kc.data(), kc.size() * 4);
  buf.upload(4096, vc.data(), vc.size() * 4);
  buf.upload(8192, w.data(), w.size() * 4);
  buf.fill(12288, 1024, test::kPoison);
  const float lambda = 0.37f, gain = 0.55f;
  Program prog(dev, "row0");
  kernel.record_prefill(prog, buf.range(0, q.size() * 4), buf.range(1024, kc.size() * 4),
                        buf.range(4096, vc.size() * 4), buf.range(8192, DV * 4), buf.range(12288, S * H * DV * 4),
                        AttnCall{S, 0, H, H, 4, H * DV, H * DV, lambda, gain});
  prog.run();
  std::vector<float> o(S * H * DV);
  buf.download(12288, o.data(), o.size() * 4);
  for (uint32_t h = 0; h < H; ++h) {
    double ss = 0;
    for (uint32_t d = 0; d < DV; ++d) ss += std::pow((1 - lambda) * vc[h * 4 * DV + d], 2);
    const double f = gain / std::sqrt(ss / DV + 1e-5);
    for (uint32_t d = 0; d < DV; ++d)
      CHECK(o[h * DV + d] == doctest::Approx((1 - lambda) * vc[h * 4 * DV + d] * f).epsilon(1e-4));
  }
}

namespace {
// An fp32 kernel (D = 16, 2 query heads per KV head), a 64 KiB buffer and a program, for the argument checks.
struct ErrorRig {
  std::unique_ptr<Context> ctx = test::make_context(Precision::fp32);
  Device& dev = ctx->device();
  DiffAttnKernel kernel{dev, KernelOptions::for_device(dev), 16, 2};
  Buffer buf{dev, 1 << 16, MemoryDomain::device, "errors"};
  Program prog{dev, "errors"};
};
}  // namespace

TEST_CASE_FIXTURE(ErrorRig, "diff_attn: context overflow and bad shapes are clear errors") {
  auto r = buf.range(0, 1 << 14);
  try {
    kernel.record_prefill(prog, r, r, r, r, r, AttnCall{4, 10, 4, 2, 12, 128, 128, 0.5f, 0.5f});
    FAIL("no error");
  } catch (const Error& e) {
    CHECK(e.status() == Status::context_overflow);
  }
  CHECK_THROWS_AS(kernel.record_prefill(prog, r, r, r, r, r, AttnCall{4, 0, 4, 4, 12, 128, 128, 0.5f, 0.5f}), Error);
  CHECK_THROWS_AS(
      kernel.record_prefill(prog, r, r, r, r, buf.range(0, 16), AttnCall{4, 0, 4, 2, 12, 128, 128, 0.5f, 0.5f}), Error);
}

TEST_CASE("diff_attn: a decode program recorded once replays correctly at every position") {
  // The model records its decode program once; the position travels in a 4-byte buffer.
  for (Precision precision : test::supported_precisions()) {
    auto ctx = test::make_context(precision);
    Device& dev = ctx->device();
    const bool fp16 = dev.fp16();
    const uint32_t H = 4, Hkv = 2, D = 16, DV = 32, cap = 150;
    const double lambda = 0.45;
    const int depth = 2;
    auto round = [&](std::vector<double> v) { return fp16 ? ref::round_to_f16(v) : ref::round_to_f32(v); };
    auto k = round(ref::random_normal(size_t(cap) * 2 * Hkv * D, 41));
    auto v = round(ref::random_normal(size_t(cap) * Hkv * DV, 42));
    std::vector<double> subln(DV, 1.0);
    const auto [kc, vc] = test::to_cache_layout(k, v, cap, Hkv, D, cap);
    DiffAttnKernel kernel(dev, KernelOptions::for_device(dev), D, H / Hkv);
    const size_t es = storage_bytes(fp16);
    Buffer kb(dev, kc.size() * es, MemoryDomain::device, "k"), vb(dev, vc.size() * es, MemoryDomain::device, "v");
    kb.upload(0, test::pack(kc, fp16).data(), kc.size() * es);
    vb.upload(0, test::pack(vc, fp16).data(), vc.size() * es);
    Buffer wb(dev, DV * es, MemoryDomain::device, "w"), qb(dev, H * DV * es, MemoryDomain::device, "q"),
        ob(dev, H * DV * es, MemoryDomain::device, "o"), pos(dev, 16, MemoryDomain::device, "pos");
    wb.upload(0, test::pack(subln, fp16).data(), DV * es);
    AttnCall call{1,
                  0,
                  H,
                  Hkv,
                  cap,
                  H * DV,
                  H * DV,
                  static_cast<float>(lambda),
                  static_cast<float>(1.0 - ref::lambda_init(depth)),
                  1e-5f,
                  pos.range(0, 4)};
    uint32_t len = 0;
    const uint32_t splits = kernel.decode_splits_for_capacity(call, &len);
    Buffer part(dev, DiffAttnKernel::part_bytes(call, D, splits), MemoryDomain::device, "part"),
        stat(dev, DiffAttnKernel::stat_bytes(call, splits), MemoryDomain::device, "stat"),
        sync(dev, DiffAttnKernel::sync_bytes(call), MemoryDomain::device, "arrivals");
    sync.fill(0, DiffAttnKernel::sync_bytes(call), 0);
    Program prog(dev, "decode replay");
    kernel.record_decode(prog, qb.range(), kb.range(), vb.range(), wb.range(), ob.range(),
                         {part.range(), stat.range(), sync.range()}, call, splits, len);
    for (uint32_t p : {0u, 1u, 63u, 64u, 65u, 100u, 149u}) {
      auto q = round(ref::random_normal(size_t(H) * DV, 1000 + p));
      qb.upload(0, test::pack(q, fp16).data(), q.size() * es);
      pos.upload(0, &p, 4);
      ob.fill(0, H * DV * es, test::kPoison);
      prog.run();
      std::vector<uint8_t> got(H * DV * es);
      ob.download(0, got.data(), got.size());
      const std::vector<double> kt(k.begin(), k.begin() + size_t(p + 1) * 2 * Hkv * D);
      const std::vector<double> vt(v.begin(), v.begin() + size_t(p + 1) * Hkv * DV);
      const auto expect = ref::head_rmsnorm(ref::diff_attention(q, kt, vt, 1, p + 1, H, Hkv, D, lambda, p), 1, H, D,
                                            subln, ref::lambda_init(depth));
      const auto c = test::compare(test::unpack(got, fp16), expect);
      INFO(precision_name(precision) << " position " << p << " splits " << splits << ": " << c.summary());
      CHECK(test::within_spec(c, fp16));
      std::vector<uint32_t> counters(DiffAttnKernel::sync_bytes(call) / 4, 1);
      sync.download(0, counters.data(), counters.size() * 4);
      CHECK_MESSAGE(std::count(counters.begin(), counters.end(), 0u) == std::ptrdiff_t(counters.size()),
                    "the split kernel left an arrival counter nonzero");
    }
  }
}

namespace {
// Storage-type buffers of a test (one per tensor) and the record/compare steps the window tests share.
struct AttnBufs {
  Device& dev;
  bool fp16;
  size_t es;
  std::vector<std::unique_ptr<Buffer>> keep;
  Buffer& make(uint64_t bytes, const char* name) {
    keep.push_back(std::make_unique<Buffer>(dev, std::max<uint64_t>(bytes, 16), MemoryDomain::device, name));
    return *keep.back();
  }
  Buffer& upload(const std::vector<double>& x, const char* name) {
    Buffer& b = make(x.size() * es, name);
    b.upload(0, test::pack(x, fp16).data(), x.size() * es);
    return b;
  }
  std::vector<double> download(Buffer& b, size_t n) {
    std::vector<uint8_t> got(n * es);
    b.download(0, got.data(), got.size());
    return test::unpack(got, fp16);
  }
  // v rounded to the storage type.
  std::vector<double> round(const std::vector<double>& v) const {
    return fp16 ? ref::round_to_f16(v) : ref::round_to_f32(v);
  }
};
// Runs body(B, precision) once per supported precision, on a fresh context.
template <class Body>
void for_each_precision(Body&& body) {
  for (Precision precision : test::supported_precisions()) {
    auto ctx = test::make_context(precision);
    Device& dev = ctx->device();
    AttnBufs B{dev, dev.fp16(), storage_bytes(dev.fp16()), {}};
    body(B, precision);
  }
}
// Split scratch for `splits` splits of a call (counters zeroed).
AttnSplitScratch split_scratch(AttnBufs& B, const AttnCall& call, uint32_t D, uint32_t splits) {
  Buffer& part = B.make(DiffAttnKernel::part_bytes(call, D, std::max(splits, 1u)), "part");
  Buffer& stat = B.make(DiffAttnKernel::stat_bytes(call, std::max(splits, 1u)), "stat");
  Buffer& sync = B.make(DiffAttnKernel::sync_bytes(call), "arrivals");
  sync.fill(0, sync.size(), 0);
  return {part.range(), stat.range(), sync.range()};
}
}  // namespace

TEST_CASE("diff_attn: cross-decoder (YOCO) query sets share one full-attention layer's cache") {
  // The second half of Phi-4-mini-flash's layers project queries only and attend over the K/V cache of one
  // full-attention layer (no append): the same kernel over the same cache buffers, a cache longer than the
  // queries' own rows, two query sets (their own λ, subln, gain) in one program, prefill and decode.
  for_each_precision([&](AttnBufs& B, Precision precision) {
    Device& dev = B.dev;
    const auto round = [&](const std::vector<double>& v) { return B.round(v); };
    const uint32_t H = 4, Hkv = 2, D = 16, DV = 32, T = 40, cap = 52;
    const auto k = round(ref::random_normal(size_t(T) * 2 * Hkv * D, 61));
    const auto v = round(ref::random_normal(size_t(T) * Hkv * DV, 62));
    const auto [kc, vc] = test::to_cache_layout(k, v, T, Hkv, D, cap);
    Buffer &kb = B.upload(kc, "k"), &vb = B.upload(vc, "v");
    DiffAttnKernel kernel(dev, KernelOptions::for_device(dev), D, H / Hkv);
    struct Set {
      uint32_t S, pos0;
      double lambda;
      int depth;
      bool decode;
    };
    const Set sets[] = {{9, 31, 0.45, 13}, {9, 31, -0.3, 20}, {1, 39, 0.6, 13, true}, {3, 37, 1.1, 22, true}};
    Program prog(dev, "cross-decoder");
    std::vector<std::tuple<Buffer*, std::vector<double>, Set>> outs;
    for (const Set& st : sets) {
      const auto q = round(ref::random_normal(size_t(st.S) * H * DV, 70 + st.depth + st.S));
      std::mt19937_64 rng(st.depth);
      std::uniform_real_distribution<double> u(0.7, 1.3);
      std::vector<double> subln(DV);
      for (double& x : subln) x = u(rng);
      subln = round(subln);
      Buffer &qb = B.upload(q, "q"), &wb = B.upload(subln, "subln"), &ob = B.make(size_t(st.S) * H * DV * B.es, "o");
      ob.fill(0, ob.size(), test::kPoison);
      const AttnCall call{st.S,
                          st.pos0,
                          H,
                          Hkv,
                          cap,
                          H * DV,
                          H * DV,
                          static_cast<float>(st.lambda),
                          static_cast<float>(1.0 - ref::lambda_init(st.depth))};
      uint32_t len = 0;
      if (st.decode) {
        const uint32_t splits = kernel.decode_splits(call, &len);
        kernel.record_decode(prog, qb.range(), kb.range(), vb.range(), wb.range(), ob.range(),
                             split_scratch(B, call, D, splits), call, splits, len);
      } else {
        const uint32_t splits = kernel.prefill_splits(call, &len);
        kernel.record_prefill(prog, qb.range(), kb.range(), vb.range(), wb.range(), ob.range(), call,
                              splits ? split_scratch(B, call, D, splits) : AttnSplitScratch{});
      }
      const auto expect = ref::head_rmsnorm(
          ref::diff_attention(q, k, v, int(st.S), int(T), int(H), int(Hkv), int(D), st.lambda, int(st.pos0)), int(st.S),
          int(H), int(D), subln, ref::lambda_init(st.depth));
      outs.emplace_back(&ob, expect, st);
    }
    prog.run();
    for (auto& out : outs) {
      auto& ob = std::get<0>(out);  // not structured bindings: INFO cannot capture those (clang 14)
      const auto& expect = std::get<1>(out);
      const auto& st = std::get<2>(out);
      const auto c = test::compare(B.download(*ob, expect.size()), expect);
      INFO(precision_name(precision) << (st.decode ? " decode" : " prefill") << " S=" << st.S << " pos0=" << st.pos0
                                     << ": " << c.summary());
      CHECK(test::within_spec(c, B.fp16));
    }
  });
}

TEST_CASE("diff_attn: sliding window over a ring cache appended without RoPE, prefill chunks then decode replays") {
  // Phi-4-mini-flash's sliding-window layers: rope_kv without rotation appends each chunk at row pos mod ring
  // (before the attention), the attention reads ring rows and masks keys outside the window. Prefill chunks of up to
  // C rows need a ring of window + C − 1 rows; then one decode program (rope_kv + attention, dynamic position)
  // recorded once and replayed across the window boundary and several wrap-arounds of the ring.
  for_each_precision([&](AttnBufs& B, Precision precision) {
    Device& dev = B.dev;
    const auto round = [&](const std::vector<double>& v) { return B.round(v); };
    const uint32_t H = 4, Hkv = 2, D = 16, DV = 32, W = 12, C = 8, ring = W + C - 1, T = 60;
    const uint32_t qw = 2 * H * D, kw = 2 * Hkv * D, vw = Hkv * DV, width = qw + kw + vw;
    const double lambda = 0.55;
    const int depth = 3;
    const auto qkv = round(ref::random_normal(size_t(T) * width, 81));
    std::vector<double> q(size_t(T) * qw), k(size_t(T) * kw), v(size_t(T) * vw), subln(DV, 1.1);
    for (uint32_t r = 0; r < T; ++r) {
      std::copy_n(&qkv[size_t(r) * width], qw, &q[size_t(r) * qw]);
      std::copy_n(&qkv[size_t(r) * width + qw], kw, &k[size_t(r) * kw]);
      std::copy_n(&qkv[size_t(r) * width + qw + kw], vw, &v[size_t(r) * vw]);
    }
    const auto expect_all =
        ref::head_rmsnorm(ref::diff_attention(q, k, v, int(T), int(T), int(H), int(Hkv), int(D), lambda, 0, int(W)),
                          int(T), int(H), int(D), subln, ref::lambda_init(depth));
    // The ring starts poisoned: a row read before it is written wrecks the result.
    Buffer &kb = B.upload(std::vector<double>(size_t(Hkv) * ring * DV, 1000.0), "k ring"),
           &vb = B.upload(std::vector<double>(size_t(Hkv) * ring * DV, 1000.0), "v ring");
    Buffer &wb = B.upload(subln, "subln"), &xb = B.make(size_t(C) * width * B.es, "qkv rows"),
           &qb = B.make(size_t(C) * qw * B.es, "q"), &ob = B.make(size_t(C) * H * DV * B.es, "o");
    Buffer& pos = B.make(16, "position");
    DiffAttnKernel kernel(dev, KernelOptions::for_device(dev), D, H / Hkv);
    RopeKvKernel append(dev, KernelOptions::for_device(dev));
    AttnCall call{
        0, 0, H, Hkv, ring, qw, H * DV, static_cast<float>(lambda), static_cast<float>(1.0 - ref::lambda_init(depth))};
    call.window = W;
    call.ring = true;
    auto check_rows = [&](uint32_t p0, uint32_t S, const char* what) {
      const auto got = B.download(ob, size_t(S) * H * DV);
      const std::vector<double> expect(expect_all.begin() + size_t(p0) * H * DV,
                                       expect_all.begin() + size_t(p0 + S) * H * DV);
      const auto c = test::compare(got, expect);
      INFO(precision_name(precision) << " " << what << " positions " << p0 << ".." << p0 + S - 1 << ": "
                                     << c.summary());
      CHECK(test::within_spec(c, B.fp16));
    };
    auto upload_rows = [&](uint32_t p0, uint32_t S) {
      const std::vector<double> rows(qkv.begin() + size_t(p0) * width, qkv.begin() + size_t(p0 + S) * width);
      xb.upload(0, test::pack(rows, B.fp16).data(), rows.size() * B.es);
      ob.fill(0, ob.size(), test::kPoison);
    };
    // Prefill: chunks of 8, 5 and 8 rows (positions 0 .. 20: the window's boundary and the ring's first wrap).
    uint32_t p0 = 0;
    for (uint32_t S : {C, 5u, C}) {
      upload_rows(p0, S);
      Program prog(dev, "window prefill chunk");
      RopeKvParams rp{S, H, Hkv, D, p0, ring};
      rp.ring = 1, rp.rope = 0;
      append.record(prog, xb.range(), {}, qb.range(), kb.range(), vb.range(), rp);
      call.S = S, call.pos0 = p0;
      uint32_t len = 0;
      const uint32_t splits = kernel.prefill_splits(call, &len);
      kernel.record_prefill(prog, qb.range(), kb.range(), vb.range(), wb.range(), ob.range(), call,
                            splits ? split_scratch(B, call, D, splits) : AttnSplitScratch{});
      prog.run();
      check_rows(p0, S, "prefill");
      p0 += S;
    }
    // Decode: one program, the position in a buffer, replayed at every later position.
    call.S = 1, call.pos0 = 0, call.dyn_pos = pos.range(0, 4);
    uint32_t len = 0;
    const uint32_t splits = kernel.decode_splits_for_capacity(call, &len);
    Program prog(dev, "window decode");
    RopeKvParams rp{1, H, Hkv, D, 0, ring};
    rp.ring = 1, rp.rope = 0;
    append.record(prog, xb.range(), {}, qb.range(), kb.range(), vb.range(), rp, pos.range(0, 4));
    kernel.record_decode(prog, qb.range(), kb.range(), vb.range(), wb.range(), ob.range(),
                         split_scratch(B, call, D, splits), call, splits, len);
    for (; p0 < T; ++p0) {
      upload_rows(p0, 1);
      pos.upload(0, &p0, 4);
      prog.run();
      check_rows(p0, 1, "decode");
    }
  });
}

TEST_CASE_FIXTURE(ErrorRig, "diff_attn: sliding-window and ring arguments are checked") {
  auto r = buf.range(0, 1 << 14);
  AttnCall c{4, 100, 4, 2, 12, 128, 128, 0.5f, 0.5f};
  c.ring = true;  // a ring without a window
  CHECK(test::status_of([&] { kernel.record_prefill(prog, r, r, r, r, r, c); }) == Status::invalid_argument);
  c.window = 10;  // a ring of 12 rows cannot hold window + S − 1 = 13 keys
  CHECK(test::status_of([&] { kernel.record_prefill(prog, r, r, r, r, r, c); }) == Status::invalid_argument);
  c.window = 9;  // 12 = 9 + 4 − 1: fits, positions past the capacity are fine in a ring
  CHECK_NOTHROW(kernel.record_prefill(prog, buf.range(0, 4096), buf.range(4096, 4096), buf.range(8192, 4096),
                                      buf.range(12288, 4096), buf.range(16384, 4096), c));
  CHECK_FALSE(kernel.prefill_uses_coopmat(c));  // the cooperative-matrix prefill has no window
  c.ring = false;                               // a window over a plain cache: positions must fit it
  CHECK(test::status_of([&] { kernel.record_prefill(prog, r, r, r, r, r, c); }) == Status::context_overflow);
  CHECK(DiffAttnKernel::call_keys(c) == 12);  // window + S − 1
  RopeKvKernel append(dev, KernelOptions::for_device(dev));
  RopeKvParams rp{8, 4, 2, 16, 100, 6};
  rp.ring = 1, rp.rope = 0;  // 8 rows into a ring of 6
  CHECK(test::status_of([&] { append.record(prog, r, {}, r, r, r, rp); }) == Status::invalid_argument);
  rp.rows = 6;
  CHECK_NOTHROW(append.record(prog, r, {}, buf.range(1 << 14, 1 << 14), buf.range(2 << 14, 1 << 13),
                              buf.range(3 << 14, 1 << 13), rp));
}

#if DIFFVK_LARGE_TESTS
// Larger shapes (label "large"): long key streams per workgroup, long caches, many splits.
// Built with -DDIFFVK_LARGE_TESTS=ON; run with `ctest -L large`.
TEST_SUITE("large") {
  void large(Precision precision) {
    if (precision == Precision::fp16 && !test::device_has_fp16()) {
      test::skip("device has no fp16 path; fp16 cases not run on this device");
      return;
    }
    const bool fp16 = precision == Precision::fp16;
    uint64_t seed = fp16 ? 8000 : 7000;
    auto ctx = test::make_context(precision);
    run_cases(*ctx, {bench::diff_attn_case(fp16, 4, 2, 64, 300, 0, 0.6, false, seed++),
                     bench::diff_attn_case(fp16, 2, 1, 128, 257, 0, -0.3, false, seed++),
                     bench::diff_attn_case(fp16, 8, 2, 32, 129, 700, 1.2, false, seed++),
                     bench::diff_attn_case(fp16, 4, 1, 64, 1, 2047, 0.5, true, seed++),
                     bench::diff_attn_case(fp16, 8, 8, 64, 8, 1500, 0.8, true, seed++),
                     bench::diff_attn_case(fp16, 2, 2, 128, 3, 3000, 0.2, true, seed++)});
  }
  TEST_CASE("diff_attn: large shapes fp32") { large(Precision::fp32); }
  TEST_CASE("diff_attn: large shapes fp16") { large(Precision::fp16); }
}
#endif

TEST_CASE("diff_attn: one invocation streams the device's whole per-invocation key budget") {
  // On llvmpipe (quirk loop_iteration_limit) every loop iteration of an invocation counts against
  // 65535; attn_max_keys_per_invocation assumes the core's constant-trip loops are unrolled. One
  // split of exactly that many keys returns wrong (poisoned) rows if any of them is not.
  uint64_t seed = 9100;
  for (Precision precision : test::supported_precisions()) {
    for (bool subgroup : {true, false}) {
      auto ctx = test::make_context(precision, !subgroup);
      Device& dev = ctx->device();
      if (subgroup && !dev.subgroup_arithmetic()) continue;
      DiffAttnKernel kernel(dev, KernelOptions::for_device(dev), 8, 2);
      const AttnTiles& t = kernel.decode_tiles(1);
      const uint32_t keys = std::min<uint32_t>(kernel.max_keys_per_invocation(t), 24000) / t.bc * t.bc;
      MESSAGE("keys in one invocation: " << keys << std::string(subgroup ? " (subgroup)" : " (shared memory)"));
      bench::DiffAttnCase c =
          bench::diff_attn_case(precision == Precision::fp16, 2, 1, 8, 1, keys - 1, 0.5, true, seed += 11);
      c.p.one_split = true, c.p.subgroup = subgroup, c.name += " one-split";
      run_cases(*ctx, {c});
    }
  }
}

// The tuning's attn_decode (decision 029): a decode call takes the prefill kernel under `prefill` (CPU drivers' auto)
// wherever one invocation may stream every key it may see, the split-K kernel past that budget and under `split`; a
// model case of a decode takes that route (ModelPipelineShape::max_positions) and still matches the reference.
TEST_CASE("diff_attn: decode on the prefill kernel (the tuning's attn_decode)") {
  for (const char* value : {"prefill", "split"}) {
    CAPTURE(value);
    struct Force {
      explicit Force(const char* v) { setenv("DIFFVK_TUNING", (std::string("attn_decode=") + v).c_str(), 1); }
      ~Force() { unsetenv("DIFFVK_TUNING"); }
    } force(value);
    const bool prefill = std::string(value) == "prefill";
    for (Precision precision : test::supported_precisions()) {
      auto ctx = test::make_context(precision);
      Device& dev = ctx->device();
      REQUIRE(dev.tuning().attn_decode_prefill == prefill);
      DiffAttnKernel kernel(dev, KernelOptions::for_op(dev, "attention"), 32, 2);
      const uint32_t budget = kernel.max_keys_per_invocation(kernel.prefill_tiles());
      CHECK(kernel.decode_on_prefill(1, 100) == prefill);
      CHECK(kernel.decode_on_prefill(8, 100) == prefill);
      CHECK_FALSE(kernel.decode_on_prefill(9, 100));  // more rows than a decode call: the prefill path anyway
      if (budget < UINT32_MAX) CHECK_FALSE(kernel.decode_on_prefill(1, uint64_t(budget) + 1));
      CHECK((kernel.choice(1, 100).rfind("decode on the prefill kernel (", 0) == 0) == prefill);
      CHECK((kernel.choice(1, 100).rfind("split-K decode (", 0) == 0) == !prefill);
      // A model's decode cases (max_positions 2048: the prefill kernel where it fits), one row and several.
      ModelPipelineShape m;
      m.kind = "v1", m.heads = 4, m.kv_heads = 2, m.head_dim = 32, m.max_positions = 2048;
      bench::OpRunner runner(dev);
      int ran = 0;
      for (const auto& cp : bench::model_shape_cases("diff_attn", m)) {
        const auto& c = dynamic_cast<const bench::DiffAttnCase&>(*cp);
        if (!c.p.decode || c.p.kv_q8 || c.fp16 != (precision == Precision::fp16) ||
            c.p.subgroup != dev.subgroup_arithmetic())
          continue;
        INFO("diff_attn case " << c.name);
        const auto r = runner.run(c);
        INFO(r.summary());
        CHECK(r.ok());
        CHECK((r.detail.find("decode on the prefill kernel") != std::string::npos) == prefill);
        ++ran;
      }
      CHECK(ran == 2);
    }
  }
}
