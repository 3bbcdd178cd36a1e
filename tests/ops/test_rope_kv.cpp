// Conformance of shaders/rope_kv.comp (RoPE of the fused QKV projection + KV-cache append) against the
// float64 reference through the op's case table: both precisions, GQA shapes, D in {16, 32, 64}, pos0 > 0 (chunked
// prefill / decode), cache rows outside [pos0, pos0 + rows) checked bit for bit against a pre-filled pattern, q_out
// poisoned; the host cos/sin table and argument errors.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "reference/diff_attn_ref.hpp"
#include "gpu_test.hpp"
#include "op_table.hpp"
#include "ops/rope_kv.hpp"
#include "status_of.hpp"

using namespace diffvk;

namespace {

constexpr double kTheta = 10000.0;

}  // namespace

// Every shape, precision and quirk comes from the op's one case table (bench/cases/rope_kv.cpp):
// GQA shapes, D in {16, 32, 64}, pos0 > 0 (chunked prefill / decode), several calls in one
// program, capped workgroup counts; cache rows outside [pos0, pos0 + rows) checked bit for bit against a
// pre-filled pattern, q_out poisoned.
TEST_CASE("rope_kv: case table fp32") { test::run_op_table("rope_kv", Precision::fp32); }
TEST_CASE("rope_kv: case table fp16") { test::run_op_table("rope_kv", Precision::fp16); }

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
  CHECK(status(good, I, T, Q, K, K) == Status::invalid_argument);           // outputs overlap
  CHECK(status(good, I, T, in.range(), K, V) == Status::invalid_argument);  // output overlaps input
  CHECK(prog.op_count() == 0);
  CHECK(status(good, in.range(0, 4 * 256 * 4), tab.range(0, 6 * 8 * 8), q.range(0, 4 * 128 * 4),
               k.range(0, 2 * 8 * 32 * 4), v.range(0, 2 * 8 * 32 * 4)) == Status::ok);  // exact sizes
  CHECK(prog.op_count() == 1);
}
