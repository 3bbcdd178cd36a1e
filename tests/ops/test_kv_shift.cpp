// Conformance of shaders/kv_shift.comp (context shift: move KV rows down by d, re-rotate K by −d) against a
// float64 reference on random caches of odd shapes, both precisions: rows below keep bit for bit unchanged,
// the moved rows within one rounding of the exact rotation, V rows moved bit for bit; a move longer than d
// (several ordered dispatches); argument errors. The model-level tests are in tests/model/test_context_shift.cpp.
#include <doctest/doctest.h>

#include <cmath>
#include <random>

#include "gpu_test.hpp"
#include "ops/kv_shift.hpp"
#include "ops/rope_kv.hpp"
#include "status_of.hpp"

using namespace diffvk;

namespace {

struct ShiftCase {
  uint32_t Hkv, D, capacity, keep, discard, end;
};

void run_case(Precision precision, const ShiftCase& c, uint64_t seed) {
  auto ctx = test::make_context_or_skip(precision);
  if (!ctx) return;
  Device& dev = ctx->device();
  const bool fp16 = ctx->precision() == Precision::fp16;
  INFO("Hkv=" << c.Hkv << " D=" << c.D << " capacity=" << c.capacity << " keep=" << c.keep << " discard=" << c.discard
              << " end=" << c.end << " fp16=" << fp16);
  KvShiftKernel kernel(dev, KernelOptions::for_device(dev));
  std::mt19937_64 rng(seed);
  const uint64_t n = uint64_t(c.Hkv) * c.capacity * 2 * c.D, es = fp16 ? 2 : 4;
  const auto k0 = test::unpack(test::pack(test::random_vector(rng, n, -3.0, 3.0), fp16), fp16);  // as stored
  const auto v0 = test::unpack(test::pack(test::random_vector(rng, n, -3.0, 3.0), fp16), fp16);
  const std::vector<float> table = rope_table(c.capacity, c.D, 10000.0);
  Buffer kb(dev, n * es, MemoryDomain::device, "k"), vb(dev, n * es, MemoryDomain::device, "v"),
      tb(dev, table.size() * 4, MemoryDomain::device, "table");
  kb.upload(0, test::pack(k0, fp16).data(), n * es);
  vb.upload(0, test::pack(v0, fp16).data(), n * es);
  tb.upload(0, table.data(), table.size() * 4);
  Program prog(dev, "kv_shift test");
  kernel.record(prog, kb.range(0, n * es), vb.range(0, n * es), tb.range(), KvShiftParams{c.Hkv, c.D, c.capacity, c.keep, c.discard, c.end});
  prog.run();
  std::vector<uint8_t> kbytes(n * es), vbytes(n * es);
  kb.download(0, kbytes.data(), n * es);
  vb.download(0, vbytes.data(), n * es);
  const auto k1 = test::unpack(kbytes, fp16), v1 = test::unpack(vbytes, fp16);

  const uint32_t two_d = 2 * c.D, half = c.D / 2;
  size_t bad = 0;
  double worst = 0;
  for (uint32_t g = 0; g < c.Hkv; ++g)
    for (uint32_t p = 0; p < c.end - c.discard; ++p)
      for (uint32_t e = 0; e < two_d; e += 2) {
        const size_t at = (size_t(g) * c.capacity + p) * two_d + e;
        if (p < c.keep) {  // untouched, bit for bit
          bad += k1[at] != k0[at] || k1[at + 1] != k0[at + 1] || v1[at] != v0[at] || v1[at + 1] != v0[at + 1];
          continue;
        }
        const size_t from = at + size_t(c.discard) * two_d;
        bad += v1[at] != v0[from] || v1[at + 1] != v0[from + 1];
        // R(−dθ) with the table's float (cos, sin) of dθ, in double.
        const double cs = table[(size_t(c.discard) * half + (e % c.D) / 2) * 2], sn = table[(size_t(c.discard) * half + (e % c.D) / 2) * 2 + 1];
        const double x0 = k0[from], x1 = k0[from + 1];
        const double want[2] = {x0 * cs + x1 * sn, x1 * cs - x0 * sn};
        for (int i = 0; i < 2; ++i) {
          const double err = std::fabs(k1[at + i] - want[i]);
          // fp32 arithmetic (a few roundings of terms up to |x0| + |x1|), then one rounding to storage.
          const double tol = 4e-7 * (std::fabs(x0) + std::fabs(x1)) + (fp16 ? std::ldexp(std::fabs(want[i]), -11) + 6e-8 : 0.0);
          worst = std::max(worst, err / std::max(tol, 1e-30));
          bad += err > tol;
        }
      }
  INFO("worst error / tolerance = " << worst);
  CHECK(bad == 0);
}

}  // namespace

TEST_CASE("kv_shift: moved K rows are re-rotated by the shift, V rows moved, the kept rows untouched") {
  const ShiftCase cases[] = {
      {1, 16, 40, 4, 18, 40},   // one pass: the moved rows (18) fit in d
      {3, 6, 37, 5, 7, 33},     // odd shapes; 21 moved rows in three ordered passes of <= 7
      {2, 32, 64, 0, 1, 64},    // d = 1: 63 passes, keep = 0
      {4, 64, 130, 17, 50, 129},
  };
  uint64_t seed = 11;
  for (const Precision p : test::supported_precisions())
    for (const ShiftCase& c : cases) run_case(p, c, seed++);
}

TEST_CASE("kv_shift: invalid arguments are rejected before anything is recorded") {
  auto ctx = test::make_context(Precision::fp32);
  Device& dev = ctx->device();
  KvShiftKernel kernel(dev, KernelOptions::for_device(dev));
  const uint32_t Hkv = 2, D = 8, cap = 16;
  const uint64_t bytes = uint64_t(Hkv) * cap * 2 * D * 4;
  Buffer k(dev, bytes, MemoryDomain::device, "k"), v(dev, bytes, MemoryDomain::device, "v"), t(dev, cap * D * 4, MemoryDomain::device, "t");
  Program prog(dev, "kv_shift errors");
  auto rec = [&](KvShiftParams p, BufferRange kr, BufferRange vr) { kernel.record(prog, kr, vr, t.range(), p); };
  const BufferRange kr = k.range(0, bytes), vr = v.range(0, bytes);
  CHECK(test::status_of([&] { rec({Hkv, D, cap, 2, 0, 10}, kr, vr); }) == Status::invalid_argument);  // nothing to discard
  CHECK(test::status_of([&] { rec({Hkv, D, cap, 6, 5, 10}, kr, vr); }) == Status::invalid_argument);  // past the held rows
  CHECK(test::status_of([&] { rec({Hkv, D, cap, 2, 3, 17}, kr, vr); }) == Status::invalid_argument);  // past the capacity
  CHECK(test::status_of([&] { rec({Hkv, 7, cap, 2, 3, 10}, kr, vr); }) == Status::invalid_argument);  // odd D
  CHECK(test::status_of([&] { rec({Hkv, D, cap, 2, 3, 10}, k.range(0, bytes / 2), vr); }) == Status::invalid_argument);
  CHECK(test::status_of([&] { rec({Hkv, D, cap, 2, 3, 10}, kr, kr); }) == Status::invalid_argument);  // K and V overlap
  CHECK(test::status_of([&] { rec({Hkv, D, 64, 2, 40, 60}, k.range(0, bytes), v.range(0, bytes)); }) == Status::invalid_argument);
}
