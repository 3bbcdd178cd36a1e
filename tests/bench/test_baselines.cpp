// Conformance of the benchmark baselines (diffvk bench): the two-pass path (single-softmax flash
// attention run for Q1K1 and Q2K2, prefill and split-K decode, then combine_norm), a single flash
// pass on its own, and the naive path (materialised score matrices, softmax, PV, head_rmsnorm)
// against the float64 reference: seeded inputs, poisoned outputs and scratch, odd S and T, GQA,
// chunked prefill, lambda < 0 and > 1, fp16 and fp32; plus the tile choice on simulated devices.
#include <doctest/doctest.h>

#include <random>

#include "reference/diff_attn_ref.hpp"
#include "attn_inputs.hpp"
#include "gpu_test.hpp"
#include "bench/naive_attn.hpp"
#include "bench/two_pass_attn.hpp"

using namespace diffvk;

namespace {

enum class Impl { two_pass, naive, flash_q1k1 };

struct Case {
  uint32_t H, Hkv, D, S, pos0;
  double lambda;
  bool decode;
};

void run_case(Context& ctx, Impl impl, const Case& c, uint64_t seed) {
  Device& dev = ctx.device();
  const bool fp16 = dev.fp16();
  INFO((fp16 ? "fp16" : "fp32") << (impl == Impl::naive      ? " naive"
                                    : impl == Impl::two_pass ? " two-pass"
                                                             : " flash Q1K1")
                                << (c.decode ? " decode" : " prefill") << " H=" << c.H << " Hkv=" << c.Hkv
                                << " D=" << c.D << " S=" << c.S << " pos0=" << c.pos0 << " lambda=" << c.lambda);
  const uint32_t D = c.D, DV = 2 * D, T = c.pos0 + c.S, cap = T + 2;
  const auto in = test::make_attn_inputs(fp16, c.H, c.Hkv, D, c.S, T, cap, seed);  // spare cache rows: must not be read
  const auto &q = in.q, &k = in.k, &v = in.v, &subln = in.subln, &kc = in.cache.k, &vc = in.cache.v;
  const int depth = in.depth;
  const double gain = in.gain;
  std::vector<double> expect;
  if (impl == Impl::flash_q1k1)  // lambda = 0: O = A1·V, no norm
    expect = ref::diff_attention(q, k, v, c.S, T, c.H, c.Hkv, D, 0.0, c.pos0);
  else
    expect = ref::head_rmsnorm(ref::diff_attention(q, k, v, c.S, T, c.H, c.Hkv, D, c.lambda, c.pos0), c.S, c.H, D,
                               subln, ref::lambda_init(depth));

  const uint32_t n_rep = c.H / c.Hkv;
  AttnCall call{
      c.S, c.pos0, c.H, c.Hkv, cap, 2 * c.H * D, c.H * DV, static_cast<float>(c.lambda), static_cast<float>(gain)};
  std::unique_ptr<TwoPassDiffAttn> two;
  std::unique_ptr<NaiveDiffAttn> naive;
  uint32_t splits = 0, split_len = 0;
  const size_t es = storage_bytes(fp16);
  VkDeviceSize s0 = 4, s1 = 4, s2 = 4, s3 = 4, s4 = 4, s5 = 4, s6 = 4;  // scratch sizes (s6: each pass's counters)
  if (impl == Impl::naive) {
    naive = std::make_unique<NaiveDiffAttn>(dev, KernelOptions::for_device(dev), D, n_rep);
    s0 = s1 = NaiveDiffAttn::score_bytes(call);
    s2 = NaiveDiffAttn::inter_bytes(call, D, fp16);
  } else {
    two = std::make_unique<TwoPassDiffAttn>(dev, KernelOptions::for_device(dev), D, n_rep);
    s0 = s1 = TwoPassDiffAttn::inter_bytes(call, D, fp16);
    if (c.decode) {
      splits = two->flash().decode_splits(call, &split_len);
      s2 = s4 = TwoPassDiffAttn::part_bytes(call, D, splits);
      s3 = s5 = TwoPassDiffAttn::stat_bytes(call, splits);
      s6 = DiffAttnKernel::sync_bytes(call);
    }
  }
  const VkDeviceSize align = dev.caps().min_storage_buffer_offset_alignment;
  auto up = [&](VkDeviceSize n) { return (n + align - 1) / align * align; };
  const VkDeviceSize sizes[13] = {
      q.size() * es, kc.size() * es, kc.size() * es, DV * es, expect.size() * es, s0, s1, s2, s3, s4, s5, s6, s6};
  VkDeviceSize off[14] = {0};
  for (int i = 0; i < 13; ++i) off[i + 1] = off[i] + up(sizes[i]);
  Buffer buf(dev, off[13], MemoryDomain::device, "baseline test");
  auto R = [&](int i) { return buf.range(off[i], sizes[i]); };
  buf.upload(off[0], test::pack(q, fp16).data(), sizes[0]);
  buf.upload(off[1], test::pack(kc, fp16).data(), sizes[1]);
  buf.upload(off[2], test::pack(vc, fp16).data(), sizes[2]);
  buf.upload(off[3], test::pack(subln, fp16).data(), sizes[3]);
  buf.fill(off[4], off[11] - off[4], test::kPoison);  // output and every scratch buffer
  buf.fill(off[11], off[13] - off[11], 0);            // but the split kernels' arrival counters start at zero

  Program prog(dev, "baseline test");
  if (impl == Impl::naive) {
    naive->record(prog, R(0), R(1), R(2), R(3), R(4), R(5), R(6), R(7), call);
  } else if (impl == Impl::two_pass) {
    if (c.decode)
      two->record_decode(prog, R(0), R(1), R(2), R(3), R(4), R(5), R(6), {R(7), R(8), R(11)}, {R(9), R(10), R(12)},
                         call, splits, split_len);
    else
      two->record_prefill(prog, R(0), R(1), R(2), R(3), R(4), R(5), R(6), call);
  } else {
    if (c.decode)
      two->flash().record_decode(prog, R(0), R(1), R(2), {}, R(4), {R(7), R(8), R(11)}, call, splits,
                                 split_len);  // half 0
    else
      two->flash().record_prefill(prog, R(0), R(1), R(2), {}, R(4), call);
  }
  prog.run();
  std::vector<uint8_t> got(sizes[4]);
  buf.download(off[4], got.data(), sizes[4]);
  const auto cmp = test::compare(test::unpack(got, fp16), expect);
  INFO(cmp.summary() << " splits=" << splits);
  CHECK(test::within_spec(cmp, fp16));
}

const std::vector<Case> kCases = {
    {2, 2, 32, 7, 0, -0.4, false},  {4, 2, 16, 33, 0, 1.3, false},   {4, 1, 64, 19, 0, 0.6, false},
    {2, 1, 128, 11, 0, 0.2, false}, {4, 2, 16, 13, 21, -0.9, false},  // chunked prefill after a prefix
    {1, 1, 32, 1, 0, 0.3, true},    {4, 2, 16, 1, 130, 1.2, true},   {8, 2, 64, 1, 77, 0.7, true},
    {2, 2, 128, 3, 40, 0.1, true},
};

void sweep(Precision precision, Impl impl, uint64_t seed) {
  auto ctx = test::make_context_or_skip(precision);
  if (!ctx) return;
  for (const Case& c : kCases) run_case(*ctx, impl, c, seed += 13);
}

DeviceCaps simulated(uint32_t shared, uint32_t invocations, uint32_t cus = 0) {
  DeviceCaps c;
  c.name = "simulated";
  c.max_shared_memory = shared;
  c.subgroup_size = c.subgroup_min_size = c.subgroup_max_size = 32;
  c.max_workgroup_invocations = invocations;
  c.max_workgroup_size = {invocations, invocations, 64};
  c.max_workgroup_count = {65535, 65535, 65535};
  c.compute_units = cus;
  return c;
}

}  // namespace

TEST_CASE("baselines: two-pass flash + combine_norm fp32") { sweep(Precision::fp32, Impl::two_pass, 1000); }
TEST_CASE("baselines: two-pass flash + combine_norm fp16") { sweep(Precision::fp16, Impl::two_pass, 2000); }
TEST_CASE("baselines: naive materialised scores fp32") { sweep(Precision::fp32, Impl::naive, 3000); }
TEST_CASE("baselines: naive materialised scores fp16") { sweep(Precision::fp16, Impl::naive, 4000); }

TEST_CASE("baselines: one flash pass alone equals standard attention") {
  for (Precision precision : test::supported_precisions()) {
    auto ctx = test::make_context(precision);
    uint64_t seed = 5000;
    for (const Case& c : {Case{4, 2, 32, 9, 0, 0, false}, Case{2, 1, 64, 1, 50, 0, true}})
      run_case(*ctx, Impl::flash_q1k1, c, seed += 7);
  }
}

TEST_CASE("baselines: two-pass and naive with the shared-memory reduction path (forced)") {
  for (Precision precision : test::supported_precisions()) {
    auto ctx = test::make_context(precision, /*force_no_subgroup=*/true);
    REQUIRE_FALSE(ctx->device().subgroup_arithmetic());
    uint64_t seed = 6000;
    for (Impl impl : {Impl::two_pass, Impl::naive})
      for (const Case& c : {Case{4, 2, 32, 21, 0, 0.6, false}, Case{2, 1, 64, 1, 90, -0.3, true}})
        run_case(*ctx, impl, c, seed += 7);
  }
}

TEST_CASE("baselines: flash tiles come from the fused kernel's function with one softmax") {
  for (uint32_t shared : {16384u, 32768u, 49152u})
    for (uint32_t inv : {128u, 1024u})
      for (bool fp16 : {false, true})
        for (uint32_t D : {16u, 32u, 64u, 96u, 128u})
          for (uint32_t n_rep : {1u, 2u, 4u, 8u})
            for (AttnPhase ph : {AttnPhase::prefill, AttnPhase::decode}) {
              const DeviceCaps caps = simulated(shared, inv);
              INFO("shared=" << shared << " inv=" << inv << " fp16=" << fp16 << " D=" << D << " n_rep=" << n_rep);
              const AttnTiles t = choose_attn_tiles(caps, fp16, D, n_rep, ph, 1, 1);
              CHECK(t.nsm == 1);
              CHECK(check_attn_tiles(caps, fp16, D, n_rep, t) == "");
              CHECK(t.shared_bytes <= shared);
              // Same policy: never fewer row slots than the fused kernel gets on the same device.
              const AttnTiles f = choose_attn_tiles(caps, fp16, D, n_rep, ph);
              CHECK(t.br >= f.br);
              CHECK(t.wg == f.wg);
            }
}

TEST_CASE("baselines: naive path refuses score matrices beyond the device range") {
  DeviceCaps caps = simulated(32768, 1024);
  caps.max_storage_buffer_range = 128u << 20;
  AttnCall big{4096, 0, 8, 8, 4096, 8 * 128, 8 * 128, 0.5f, 0.5f};
  CHECK(NaiveDiffAttn::unsupported_reason(caps, big, 64, true, 1ull << 40) != "");
  AttnCall small{256, 0, 8, 8, 256, 8 * 128, 8 * 128, 0.5f, 0.5f};
  CHECK(NaiveDiffAttn::unsupported_reason(caps, small, 64, true, 1ull << 40) == "");
  CHECK(NaiveDiffAttn::unsupported_reason(caps, small, 64, true, 1024) != "");
}
