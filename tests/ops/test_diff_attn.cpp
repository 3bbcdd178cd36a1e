// Conformance of the differential attention kernels (fused prefill; split-K decode + reduce)
// against the float64 reference: fresh seeded inputs, poisoned outputs, odd S and T, chunked
// prefill after a prefix, decode S = 1..8 after a cached prefix, GQA n_rep 1/2/4/8, lambda < 0
// and > 1, D = 2/6/8/12/16/20/32/64/128 (16-byte, 4-element and element-wise loads), GQA up to
// n_rep = 64, fp16 and fp32, bit-identical replays, the per-invocation loop budget.
#include <doctest/doctest.h>

#include <cmath>
#include <random>

#include "attn_inputs.hpp"
#include "reference/diff_attn_ref.hpp"
#include "gpu_test.hpp"
#include "ops/diff_attn.hpp"

using namespace diffvk;

namespace {

struct Case {
  uint32_t H, Hkv, D, S, pos0;
  double lambda;
  bool decode;
  bool max_splits = false;  // one tile per split: many splits see only masked keys for some rows
  bool one_split = false;   // decode: a single split streams every key in one invocation
};

std::string describe(const Case& c, bool fp16) {
  return std::string(fp16 ? "fp16" : "fp32") + (c.decode ? " decode" : " prefill") + " H=" + std::to_string(c.H) +
         " Hkv=" + std::to_string(c.Hkv) + " D=" + std::to_string(c.D) + " S=" + std::to_string(c.S) +
         " pos0=" + std::to_string(c.pos0) + " lambda=" + std::to_string(c.lambda) + (c.max_splits ? " max-splits" : "");
}

void run_case(Context& ctx, const Case& c, uint64_t seed) {
  Device& dev = ctx.device();
  const bool fp16 = dev.fp16();
  INFO(describe(c, fp16));
  const uint32_t D = c.D, DV = 2 * D, T = c.pos0 + c.S, cap = T + 3;  // spare rows must not be read
  const auto in = test::make_attn_inputs(fp16, c.H, c.Hkv, D, c.S, T, cap, seed);
  const auto &q = in.q, &k = in.k, &v = in.v, &subln = in.subln, &kc = in.cache.k, &vc = in.cache.v;
  const int depth = in.depth;
  const double gain = in.gain;
  const auto o_ref = ref::diff_attention(q, k, v, c.S, T, c.H, c.Hkv, D, c.lambda, c.pos0);
  const auto expect = ref::head_rmsnorm(o_ref, c.S, c.H, D, subln, ref::lambda_init(depth));

  DiffAttnKernel kernel(dev, KernelOptions::for_device(dev), D, c.H / c.Hkv);
  AttnCall call{c.S, c.pos0, c.H, c.Hkv, cap, 2 * c.H * D, c.H * DV, static_cast<float>(c.lambda), static_cast<float>(gain)};
  uint32_t split_len = 0, splits = 0;
  if (c.decode) {
    splits = kernel.decode_splits(call, &split_len);
    if (c.max_splits) {
      split_len = kernel.decode_tiles(c.S).bc;
      splits = (T + split_len - 1) / split_len;
    }
    if (c.one_split) {
      const uint32_t bc = kernel.decode_tiles(c.S).bc;
      split_len = (T + bc - 1) / bc * bc;
      splits = 1;
    }
  } else {
    splits = kernel.prefill_splits(call, &split_len);  // nonzero on loop-limited devices for long prefills
  }
  const bool split = splits > 0;
  const size_t es = storage_bytes(fp16);
  const VkDeviceSize align = dev.caps().min_storage_buffer_offset_alignment;
  auto up = [&](VkDeviceSize n) { return (n + align - 1) / align * align; };
  const VkDeviceSize qb = q.size() * es, kb = kc.size() * es, wb = DV * es, ob = expect.size() * es;
  const VkDeviceSize pb = split ? DiffAttnKernel::part_bytes(call, D, splits) : 4;
  const VkDeviceSize sb = split ? DiffAttnKernel::stat_bytes(call, splits) : 4;
  VkDeviceSize off[8] = {0};
  const VkDeviceSize sizes[7] = {qb, kb, kb, wb, ob, pb, sb};
  for (int i = 0; i < 7; ++i) off[i + 1] = off[i] + up(sizes[i]);
  Buffer buf(dev, off[7], MemoryDomain::device, "attention test");
  auto R = [&](int i) { return buf.range(off[i], sizes[i]); };
  buf.upload(off[0], test::pack(q, fp16).data(), qb);
  buf.upload(off[1], test::pack(kc, fp16).data(), kb);
  buf.upload(off[2], test::pack(vc, fp16).data(), kb);
  buf.upload(off[3], test::pack(subln, fp16).data(), wb);
  Program prog(dev, "attention test");
  if (c.decode)
    kernel.record_decode(prog, R(0), R(1), R(2), R(3), R(4), R(5), R(6), call, splits, split_len);
  else if (split)
    kernel.record_prefill(prog, R(0), R(1), R(2), R(3), R(4), call, R(5), R(6));
  else
    kernel.record_prefill(prog, R(0), R(1), R(2), R(3), R(4), call);
  std::vector<uint8_t> first;
  for (int rep = 0; rep < 2; ++rep) {
    buf.fill(off[4], ob, test::kPoison);
    if (split) {
      buf.fill(off[5], pb, test::kPoison);
      buf.fill(off[6], sb, test::kPoison);
    }
    prog.run();
    std::vector<uint8_t> got(ob);
    buf.download(off[4], got.data(), ob);
    if (rep == 0) {
      first = got;
      const auto cmp = test::compare(test::unpack(got, fp16), expect);
      INFO(cmp.summary() << " splits=" << splits);
      CHECK(test::within_spec(cmp, fp16));
    } else {
      CHECK(got == first);  // replay is bit-identical
    }
  }
}

void sweep(Precision precision, const std::vector<Case>& cases, uint64_t seed) {
  auto ctx = test::make_context_or_skip(precision);
  if (!ctx) return;
  for (const Case& c : cases) run_case(*ctx, c, seed += 17);
}

const std::vector<Case> kPrefill = {
    {1, 1, 16, 1, 0, 0.3, false},     {2, 2, 32, 7, 0, -0.4, false},  {4, 2, 16, 33, 0, 1.3, false},
    {4, 1, 32, 17, 0, 0.8, false},    {8, 1, 16, 9, 0, 0.5, false},   {2, 1, 64, 40, 0, 0.6, false},
    {2, 2, 128, 19, 0, 0.2, false},   {8, 2, 16, 129, 0, 0.7, false},
    {1, 1, 128, 900, 0, 0.4, false},  // long: beyond llvmpipe's per-invocation loop budget (quirk loop_iteration_limit)
    // D not a multiple of 8 (fp16) or 4 (fp32): element-wise loads instead of 16-byte chunks
    {3, 3, 6, 11, 0, 0.5, false},     {4, 1, 12, 13, 0, -0.7, false}, {2, 1, 20, 9, 0, 0.9, false},
    {2, 2, 2, 5, 0, 0.3, false},
    {64, 1, 8, 3, 0, 0.6, false},     // GQA n_rep = 64: slots split across workgroups
};
const std::vector<Case> kChunked = {  // prefill of S rows after pos0 cached rows
    {2, 2, 32, 7, 9, 0.5, false}, {4, 2, 16, 13, 33, -0.9, false}, {8, 1, 16, 5, 60, 1.6, false},
    {2, 1, 64, 31, 2, 0.4, false},
    {2, 1, 64, 20, 1000, 0.5, false},  // a chunk whose queries see > 1000 keys
};
const std::vector<Case> kDecode = {
    {3, 3, 6, 1, 40, 0.5, true},  {4, 1, 12, 3, 65, -0.7, true}, {2, 1, 20, 1, 129, 0.9, true},
    {64, 1, 8, 2, 70, 0.6, true}, {32, 8, 16, 1, 100, 0.4, true},
    {1, 1, 32, 1, 0, 0.3, true},  {2, 2, 32, 1, 70, -0.5, true},  {4, 2, 16, 3, 130, 1.2, true},
    {8, 1, 16, 8, 51, 0.6, true}, {4, 1, 64, 5, 90, 0.9, true},   {2, 2, 128, 2, 40, 0.1, true},
    {8, 8, 16, 4, 200, 0.7, true}, {4, 4, 16, 7, 0, 0.5, true},
    {4, 2, 16, 6, 77, 0.8, true, true}, {1, 1, 64, 8, 33, -0.2, true, true},
    {8, 1, 64, 8, 3000, 0.6, true},  // long cache: splits capped per invocation on loop-limited devices
};

}  // namespace

TEST_CASE("diff_attn: prefill fp32") { sweep(Precision::fp32, kPrefill, 100); }
TEST_CASE("diff_attn: prefill fp16") { sweep(Precision::fp16, kPrefill, 200); }
TEST_CASE("diff_attn: chunked prefill after a cached prefix fp32") { sweep(Precision::fp32, kChunked, 300); }
TEST_CASE("diff_attn: chunked prefill after a cached prefix fp16") { sweep(Precision::fp16, kChunked, 400); }
TEST_CASE("diff_attn: split-K decode fp32") { sweep(Precision::fp32, kDecode, 500); }
TEST_CASE("diff_attn: split-K decode fp16") { sweep(Precision::fp16, kDecode, 600); }

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
  kernel.record_prefill(prog, buf.range(0, q.size() * 4), buf.range(1024, kc.size() * 4), buf.range(4096, vc.size() * 4),
                        buf.range(8192, DV * 4), buf.range(12288, S * H * DV * 4),
                        AttnCall{S, 0, H, H, 4, H * DV, H * DV, lambda, gain});
  prog.run();
  std::vector<float> o(S * H * DV);
  buf.download(12288, o.data(), o.size() * 4);
  for (uint32_t h = 0; h < H; ++h) {
    double ss = 0;
    for (uint32_t d = 0; d < DV; ++d) ss += std::pow((1 - lambda) * vc[h * 4 * DV + d], 2);
    const double f = gain / std::sqrt(ss / DV + 1e-5);
    for (uint32_t d = 0; d < DV; ++d) CHECK(o[h * DV + d] == doctest::Approx((1 - lambda) * vc[h * 4 * DV + d] * f).epsilon(1e-4));
  }
}

TEST_CASE("diff_attn: context overflow and bad shapes are clear errors") {
  auto ctx = test::make_context(Precision::fp32);
  Device& dev = ctx->device();
  DiffAttnKernel kernel(dev, KernelOptions::for_device(dev), 16, 2);
  Buffer buf(dev, 1 << 16, MemoryDomain::device, "errors");
  Program prog(dev, "errors");
  auto r = buf.range(0, 1 << 14);
  try {
    kernel.record_prefill(prog, r, r, r, r, r, AttnCall{4, 10, 4, 2, 12, 128, 128, 0.5f, 0.5f});
    FAIL("no error");
  } catch (const Error& e) {
    CHECK(e.status() == Status::context_overflow);
  }
  CHECK_THROWS_AS(kernel.record_prefill(prog, r, r, r, r, r, AttnCall{4, 0, 4, 4, 12, 128, 128, 0.5f, 0.5f}), Error);
  CHECK_THROWS_AS(kernel.record_prefill(prog, r, r, r, r, buf.range(0, 16), AttnCall{4, 0, 4, 2, 12, 128, 128, 0.5f, 0.5f}), Error);
}

TEST_CASE("diff_attn: prefill and split-K decode with the shared-memory reduction path (forced)") {
  // The sweeps above use subgroup reductions where the device has them; this forces the fallback.
  for (Precision precision : test::supported_precisions()) {
    auto ctx = test::make_context(precision, /*force_no_subgroup=*/true);
    REQUIRE_FALSE(ctx->device().subgroup_arithmetic());
    uint64_t seed = 900;
    for (const Case& c : {Case{4, 2, 32, 3, 45, 0.6, true}, Case{2, 2, 64, 1, 100, -0.3, true, true},
                          Case{4, 2, 16, 33, 0, 1.3, false}, Case{8, 1, 16, 5, 60, 1.6, false}, Case{2, 1, 64, 40, 0, 0.6, false}})
      run_case(*ctx, c, seed += 7);
  }
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
    AttnCall call{1, 0, H, Hkv, cap, H * DV, H * DV, static_cast<float>(lambda),
                  static_cast<float>(1.0 - ref::lambda_init(depth)), 1e-5f, pos.range(0, 4)};
    uint32_t len = 0;
    const uint32_t splits = kernel.decode_splits_for_capacity(call, &len);
    Buffer part(dev, DiffAttnKernel::part_bytes(call, D, splits), MemoryDomain::device, "part"),
        stat(dev, DiffAttnKernel::stat_bytes(call, splits), MemoryDomain::device, "stat");
    Program prog(dev, "decode replay");
    kernel.record_decode(prog, qb.range(), kb.range(), vb.range(), wb.range(), ob.range(), part.range(), stat.range(), call,
                         splits, len);
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
      const auto expect = ref::head_rmsnorm(ref::diff_attention(q, kt, vt, 1, p + 1, H, Hkv, D, lambda, p), 1, H, D, subln,
                                            ref::lambda_init(depth));
      const auto c = test::compare(test::unpack(got, fp16), expect);
      INFO(precision_name(precision) << " position " << p << " splits " << splits << ": " << c.summary());
      CHECK(test::within_spec(c, fp16));
    }
  }
}

#if DIFFVK_LARGE_TESTS
// Larger shapes (label "large"): long key streams per workgroup, long caches, many splits.
// Built with -DDIFFVK_LARGE_TESTS=ON; run with `ctest -L large`.
TEST_SUITE("large") {
  const std::vector<Case> kLarge = {
      {4, 2, 64, 300, 0, 0.6, false},  {2, 1, 128, 257, 0, -0.3, false}, {8, 2, 32, 129, 700, 1.2, false},
      {4, 1, 64, 1, 2047, 0.5, true},  {8, 8, 64, 8, 1500, 0.8, true},   {2, 2, 128, 3, 3000, 0.2, true},
  };
  TEST_CASE("diff_attn: large shapes fp32") { sweep(Precision::fp32, kLarge, 7000); }
  TEST_CASE("diff_attn: large shapes fp16") { sweep(Precision::fp16, kLarge, 8000); }
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
      run_case(*ctx, Case{2, 1, 8, 1, keys - 1, 0.5, true, false, true}, seed += 11);
    }
  }
}

