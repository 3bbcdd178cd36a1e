// Conformance of the decode step's fused q/k/v projection with RoPE and the KV-cache append as its
// epilogue (linear_row.comp: linear_row_rope, LinearKernel::record_row_rope; QuantRowKernel::record_rope for Q8_0
// and Q4_0 weights and the int8 path), through its case table (bench/cases/linear_row_rope.cpp, which the self-test
// at load runs too): against the float64 reference on fresh random inputs, pro(x)·Wᵀ rounded to the storage type
// (what rope_kv would read back), rotated in float64, at three positions of the dynamic position buffer. Odd and GQA
// shapes, DIFF V2's λ columns, float32 x, vector and scalar loads, both reductions, capped workgroup counts, forced
// lane groups; outputs poisoned first and every cache element the op must not touch checked bit for bit. Also the
// argument checks.
#include <doctest/doctest.h>

#include "gpu_test.hpp"
#include "op_table.hpp"
#include "ops/linear.hpp"
#include "status_of.hpp"

using namespace diffvk;

TEST_CASE("linear_row_rope: case table fp32") { test::run_op_table("linear_row_rope", Precision::fp32); }
TEST_CASE("linear_row_rope: case table fp16") { test::run_op_table("linear_row_rope", Precision::fp16); }
// The Q4_0 cases with the nibbles read the way the device does not by default (the tuning's q4_in_place; the tables
// above run the default: together, both ways).
TEST_CASE("linear_row_rope: Q4_0 nibbles read in place and by bitfield extract") {
  auto q4 = [](const bench::OpCase& c) { return c.name.find(" q4_0") != std::string::npos; };
  const bool in_place = test::make_context(Precision::fp32)->device().tuning().q4_in_place;
  test::run_op_table("linear_row_rope", Precision::fp32, {}, q4, in_place ? "q4_in_place=off" : "q4_in_place=on");
}

TEST_CASE("linear_row_rope: shapes that are not [q | k | v] and overlapping outputs are refused") {
  auto ctx = test::make_context(Precision::fp32);
  Device& dev = ctx->device();
  LinearKernel kernel(dev, KernelOptions::for_device(dev));
  Buffer a(dev, 1 << 16, MemoryDomain::device, "a"), b(dev, 1 << 16, MemoryDomain::device, "b");
  Program prog(dev, "linear_row_rope errors");
  // E = 16, H = 1, Hkv = 1, D = 4: q 8, k 8, v 8 columns.
  const LinearRowParams lp{16, 24};
  const RowRope good{b.range(0, 4096), b.range(4096, 4096), b.range(8192, 4096), b.range(12288, 4), 8, 8, 4, 8, 16, 0};
  auto status = [&](LinearRowParams p, RowRope r, BufferRange q) {
    return test::status_of(
        [&] { kernel.record_row_rope(prog, a.range(0, 64), a.range(256, 24 * 16 * 4), q, p, {}, r); });
  };
  RowRope r = good;
  r.qcols = 6;  // not a whole number of D-wide sub-heads
  CHECK(status(lp, r, a.range(4096, 32)) == Status::invalid_argument);
  CHECK(status({16, 25}, good, a.range(4096, 32)) == Status::invalid_argument);  // out != q + 2k
  CHECK(status({16, 24, RowPrologue::silu_mul}, good, a.range(4096, 32)) == Status::invalid_argument);
  r = good;
  r.v_cache = b.range(4096, 4096);  // the caches overlap
  CHECK(status(lp, r, a.range(4096, 32)) == Status::invalid_argument);
  r = good;
  r.capacity = 1000;  // caches too small for the capacity
  CHECK(status(lp, r, a.range(4096, 32)) == Status::invalid_argument);
  CHECK(status(lp, good, b.range(12288, 32)) == Status::invalid_argument);  // q_out over the position
  r = good;
  r.lcols = 1;  // an odd count of DIFF V2 λ columns would split k's rotation pairs
  CHECK(status({16, 25}, r, a.range(4096, 36)) == Status::invalid_argument);
  CHECK(prog.op_count() == 0);
  CHECK(status(lp, good, a.range(4096, 32)) == Status::ok);
  CHECK(prog.op_count() == 1);
}
