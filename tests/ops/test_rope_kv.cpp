// Conformance of shaders/rope_kv.comp (RoPE of the fused QKV projection + KV-cache append) against the
// float64 reference: both precisions, GQA shapes, D in {16, 32, 64}, pos0 > 0 (chunked prefill / decode),
// cache rows outside [pos0, pos0 + rows) checked bit for bit against a pre-filled pattern, q_out poisoned.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "reference/diff_attn_ref.hpp"
#include "gpu_test.hpp"
#include "ops/rope_kv.hpp"
#include "status_of.hpp"

using namespace diffvk;

namespace {

constexpr double kTheta = 10000.0;

struct RShape {
  uint32_t H, Hkv, D, capacity;
  std::vector<std::pair<uint32_t, uint32_t>> chunks;  // (pos0, rows), recorded in order into one program
};

void run_case(Context& ctx, const RopeKvKernel& kernel, const RShape& s, uint64_t seed) {
  Device& dev = ctx.device();
  const bool fp16 = dev.fp16();
  const size_t es = storage_bytes(fp16);
  std::mt19937_64 rng(seed);
  auto round = [&](std::vector<double> v) { return fp16 ? ref::round_to_f16(v) : ref::round_to_f32(v); };
  const uint32_t D = s.D, qw = 2 * s.H * D, kw = 2 * s.Hkv * D, vw = 2 * s.Hkv * D, width = qw + kw + vw;
  const size_t cache_elems = size_t(s.Hkv) * s.capacity * 2 * D;

  // Pre-filled cache pattern (random values): everything outside the written rows must survive bit for bit.
  const auto kpat = round(test::random_vector(rng, cache_elems, -5.0, 5.0));
  const auto vpat = round(test::random_vector(rng, cache_elems, -5.0, 5.0));
  std::vector<double> kexp = kpat, vexp = vpat;
  std::vector<bool> written(cache_elems, false);

  const VkDeviceSize align = dev.caps().min_storage_buffer_offset_alignment;
  auto up = [&](VkDeviceSize n) { return (n + align - 1) / align * align; };
  uint32_t max_pos = 0;
  for (auto [pos0, rows] : s.chunks) max_pos = std::max(max_pos, pos0 + rows);
  const auto table = rope_table(max_pos + 3, D, kTheta);  // a few spare positions
  const VkDeviceSize tb = table.size() * 4, cb = cache_elems * es;
  Buffer tables(dev, tb, MemoryDomain::device, "rope table");
  tables.upload(0, table.data(), tb);
  Buffer kc(dev, cb, MemoryDomain::device, "k cache"), vc(dev, up(cb) + cb, MemoryDomain::device, "v cache");
  // V cache at a non-zero offset of its buffer.
  const BufferRange rk = kc.range(0, cb), rv = vc.range(up(cb), cb);

  struct Chunk {
    std::unique_ptr<Buffer> in, q;
    std::vector<double> qexp;
    uint32_t rows;
  };
  std::vector<Chunk> chunks;
  Program prog(dev, "rope_kv test");
  for (auto [pos0, rows] : s.chunks) {
    auto qkv = round(test::random_vector(rng, size_t(rows) * width, -3.0, 3.0));
    std::vector<double> q(size_t(rows) * qw), k(size_t(rows) * kw), v(size_t(rows) * vw);
    for (uint32_t r = 0; r < rows; ++r) {
      const double* row = &qkv[size_t(r) * width];
      std::copy(row, row + qw, &q[size_t(r) * qw]);
      std::copy(row + qw, row + qw + kw, &k[size_t(r) * kw]);
      std::copy(row + qw + kw, row + width, &v[size_t(r) * vw]);
    }
    ref::rope_rows(q, int(rows), int(2 * s.H), int(D), int(pos0), kTheta);
    ref::rope_rows(k, int(rows), int(2 * s.Hkv), int(D), int(pos0), kTheta);
    for (uint32_t r = 0; r < rows; ++r)
      for (uint32_t g = 0; g < s.Hkv; ++g)
        for (uint32_t c = 0; c < 2 * D; ++c) {
          const size_t dst = (size_t(g) * s.capacity + pos0 + r) * 2 * D + c;
          kexp[dst] = k[size_t(r) * kw + size_t(g) * 2 * D + c];
          vexp[dst] = v[size_t(r) * vw + size_t(g) * 2 * D + c];
          written[dst] = true;
        }
    Chunk ch;
    ch.rows = rows;
    ch.qexp = q;
    ch.in = std::make_unique<Buffer>(dev, qkv.size() * es, MemoryDomain::device, "qkv");
    ch.in->upload(0, test::pack(qkv, fp16).data(), qkv.size() * es);
    ch.q = std::make_unique<Buffer>(dev, q.size() * es, MemoryDomain::device, "q_out");
    kernel.record(prog, ch.in->range(), tables.range(), ch.q->range(), rk, rv,
                  RopeKvParams{rows, s.H, s.Hkv, D, pos0, s.capacity});
    chunks.push_back(std::move(ch));
  }

  const auto kpat_bytes = test::pack(kpat, fp16), vpat_bytes = test::pack(vpat, fp16);
  std::vector<std::vector<uint8_t>> first;
  for (int rep = 0; rep < 2; ++rep) {
    kc.upload(rk.offset, kpat_bytes.data(), cb);
    vc.upload(rv.offset, vpat_bytes.data(), cb);
    for (auto& ch : chunks) ch.q->fill(0, ch.q->size(), test::kPoison);
    prog.run();
    std::vector<std::vector<uint8_t>> outs;
    for (auto& ch : chunks) {
      outs.emplace_back(ch.q->size());
      ch.q->download(0, outs.back().data(), outs.back().size());
    }
    outs.emplace_back(cb);
    kc.download(rk.offset, outs.back().data(), cb);
    outs.emplace_back(cb);
    vc.download(rv.offset, outs.back().data(), cb);
    if (rep == 1) {
      CHECK(outs == first);
      break;
    }
    first = outs;
    INFO("H=" << s.H << " Hkv=" << s.Hkv << " D=" << D << " capacity=" << s.capacity << " chunks=" << s.chunks.size()
              << " first pos0=" << s.chunks[0].first << " rows=" << s.chunks[0].second << " "
              << precision_name(ctx.precision()));
    for (size_t i = 0; i < chunks.size(); ++i) {
      const auto c = test::compare(test::unpack(outs[i], fp16), chunks[i].qexp);
      INFO("q_out chunk " << i << ": " << c.summary());
      CHECK(test::within_spec(c, fp16));
    }
    for (int which = 0; which < 2; ++which) {
      const auto& got_bytes = outs[chunks.size() + which];
      const auto& pat_bytes = which == 0 ? kpat_bytes : vpat_bytes;
      const auto& expect = which == 0 ? kexp : vexp;
      const auto got = test::unpack(got_bytes, fp16);
      std::vector<double> gw, ew;
      size_t untouched_changed = 0;
      for (size_t e = 0; e < cache_elems; ++e) {
        if (written[e]) {
          gw.push_back(got[e]);
          ew.push_back(expect[e]);
        } else if (std::memcmp(&got_bytes[e * es], &pat_bytes[e * es], es) != 0) {
          ++untouched_changed;
        }
      }
      const auto c = test::compare(gw, ew);
      INFO((which == 0 ? "k cache: " : "v cache: ") << c.summary());
      CHECK(test::within_spec(c, fp16));
      if (which == 1) CHECK(c.max_abs == 0.0);  // V is copied, not computed
      CHECK(untouched_changed == 0);
    }
  }
}

const RShape kShapes[] = {
    {4, 2, 16, 8, {{0, 5}}},                // prefill from 0, rows after it untouched
    {4, 2, 32, 16, {{3, 7}}},               // chunk after a prefix
    {8, 1, 16, 50, {{10, 33}}},             // GQA 8:1
    {2, 2, 64, 20, {{17, 1}}},              // decode step
    {2, 2, 32, 9, {{0, 9}}},                // fills the cache exactly
    {8, 1, 64, 12, {{5, 3}}},               //
    {4, 2, 64, 140, {{2, 130}}},            // many rows
    {2, 2, 16, 24, {{0, 6}, {6, 4}, {10, 1}, {11, 1}}},  // prefill, chunked prefill, two decode steps
};

void sweep(Precision precision) {
  auto ctx = test::make_context_or_skip(precision);
  if (!ctx) return;
  RopeKvKernel kernel(ctx->device(), KernelOptions::for_device(ctx->device()));
  uint64_t seed = 9100 + 100 * static_cast<uint64_t>(precision);
  for (const RShape& s : kShapes) run_case(*ctx, kernel, s, seed++);
}

}  // namespace

TEST_CASE("rope_kv: fp32") { sweep(Precision::fp32); }
TEST_CASE("rope_kv: fp16") { sweep(Precision::fp16); }

TEST_CASE("rope_kv: grid-stride loops when workgroup counts are capped") {
  auto ctx = test::make_context(Precision::fp32);
  RopeKvKernel kernel(ctx->device(), KernelOptions::for_device(ctx->device()));
  kernel.limit_workgroups_for_testing(1, 2);
  run_case(*ctx, kernel, {8, 1, 32, 40, {{4, 9}}}, 9900);
}

TEST_CASE("rope_kv: the cos/sin table matches double precision") {
  const uint32_t P = 5000, D = 64;
  const auto t = rope_table(P, D, kTheta);
  REQUIRE(t.size() == size_t(P) * D);
  double worst = 0;
  for (uint32_t pos : {0u, 1u, 77u, 4999u})
    for (uint32_t i = 0; i < D / 2; ++i) {
      const double a = pos * std::pow(kTheta, -2.0 * i / D);
      worst = std::max(worst, std::fabs(t[(size_t(pos) * D / 2 + i) * 2] - std::cos(a)));
      worst = std::max(worst, std::fabs(t[(size_t(pos) * D / 2 + i) * 2 + 1] - std::sin(a)));
    }
  CHECK(worst <= 6e-8);
  CHECK(t[0] == 1.0f);
  CHECK(t[1] == 0.0f);
  // Same rotation as the reference's rope() on a unit pair.
  std::vector<double> x(D, 0.0);
  x[2] = 1.0;  // pair i = 1
  ref::rope(x.data(), int(D), 4999, kTheta);
  CHECK(std::fabs(x[2] - t[(4999 * D / 2 + 1) * 2]) <= 6e-8);
  CHECK(std::fabs(x[3] - t[(4999 * D / 2 + 1) * 2 + 1]) <= 6e-8);
  CHECK_THROWS_AS(rope_table(4, 15, kTheta), Error);
}

TEST_CASE("rope_kv: invalid arguments are rejected") {
  auto ctx = test::make_context(Precision::fp32);
  Device& dev = ctx->device();
  RopeKvKernel kernel(dev, KernelOptions::for_device(dev));
  Buffer in(dev, 1 << 16, MemoryDomain::device, "in"), tab(dev, 1 << 16, MemoryDomain::device, "table"),
      q(dev, 1 << 16, MemoryDomain::device, "q"), k(dev, 1 << 16, MemoryDomain::device, "k"),
      v(dev, 1 << 16, MemoryDomain::device, "v");
  Program prog(dev, "rope_kv errors");
  auto status = [&](const RopeKvParams& p, BufferRange qkv, BufferRange table, BufferRange qo, BufferRange kc,
                    BufferRange vc) {
    return test::status_of([&] { kernel.record(prog, qkv, table, qo, kc, vc, p); });
  };
  const RopeKvParams good{4, 4, 2, 16, 2, 8};
  const auto I = in.range(), T = tab.range(), Q = q.range(), K = k.range(), V = v.range();
  CHECK(status({4, 4, 2, 16, 5, 8}, I, T, Q, K, V) == Status::context_overflow);
  CHECK(status({4, 4, 2, 15, 0, 8}, I, T, Q, K, V) == Status::invalid_argument);  // odd D
  CHECK(status({4, 4, 3, 16, 0, 8}, I, T, Q, K, V) == Status::invalid_argument);  // H % Hkv
  CHECK(status({0, 4, 2, 16, 0, 8}, I, T, Q, K, V) == Status::invalid_argument);
  CHECK(status(good, in.range(0, 4 * 256 * 4 - 4), T, Q, K, V) == Status::invalid_argument);  // qkv too small
  CHECK(status(good, I, tab.range(0, 6 * 8 * 8 - 8), Q, K, V) == Status::invalid_argument);   // table short
  CHECK(status(good, I, T, q.range(0, 4 * 128 * 4 - 4), K, V) == Status::invalid_argument);
  CHECK(status(good, I, T, Q, k.range(0, 2 * 8 * 32 * 4 - 4), V) == Status::invalid_argument);
  CHECK(status(good, I, T, Q, K, v.range(0, 2 * 8 * 32 * 4 - 4)) == Status::invalid_argument);
  CHECK(status(good, I, T, Q, K, K) == Status::invalid_argument);  // outputs overlap
  CHECK(status(good, I, T, in.range(), K, V) == Status::invalid_argument);  // output overlaps input
  CHECK(prog.op_count() == 0);
  CHECK(status(good, in.range(0, 4 * 256 * 4), tab.range(0, 6 * 8 * 8), q.range(0, 4 * 128 * 4),
               k.range(0, 2 * 8 * 32 * 4), v.range(0, 2 * 8 * 32 * 4)) == Status::ok);  // exact sizes
  CHECK(prog.op_count() == 1);
}
