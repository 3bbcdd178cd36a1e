// Conformance of the one-row (decode) linear layer with fused prologues (shaders/linear_row.comp),
// through the op's case table: against the float64 reference on fresh random inputs (rounded to the storage type
// first), odd sizes, every prologue (none / RMSNorm / SwiGLU), with / without / in-place residual, vector and scalar
// loads, subgroup and shared-memory reductions, fp16 and fp32, outputs poisoned before each run, replays bit for bit;
// docs/maths.md's one-kernel tolerances.
#include <doctest/doctest.h>

#include <cstdlib>

#include "gpu_test.hpp"
#include "op_table.hpp"
#include "ops/linear.hpp"
#include "status_of.hpp"

using namespace diffvk;

// Every shape, prologue, residual form, precision and quirk comes from the op's one case table
// (bench/cases/linear_row.cpp): vector and elementwise loads, subgroup and shared-memory
// reductions, capped workgroup counts, x at a binding offset that is not 16-byte aligned, float32 x / y,
// a long reduction (in = 16384).
TEST_CASE("linear_row: case table fp32") { test::run_op_table("linear_row", Precision::fp32); }
TEST_CASE("linear_row: case table fp16") { test::run_op_table("linear_row", Precision::fp16); }
// The Q4_0 cases with the nibbles read the way the device does not by default (the tuning's q4_in_place; the table
// above runs the default, in place on CPU drivers and bitfield extracts on GPUs: together, both ways).
TEST_CASE("linear_row: Q4_0 nibbles read in place and by bitfield extract") {
  auto q4 = [](const bench::OpCase& c) { return c.name.find(" q4_0") != std::string::npos; };
  const bool in_place = test::make_context(Precision::fp32)->device().tuning().q4_in_place;
  test::run_op_table("linear_row", Precision::fp32, {}, q4, in_place ? "q4_in_place=off" : "q4_in_place=on");
}

TEST_CASE_FIXTURE(test::Fp32Device, "linear_row: invalid arguments are rejected") {
  LinearKernel kernel(dev, KernelOptions::for_device(dev));
  Buffer a(dev, 4096, MemoryDomain::device, "a"), b(dev, 4096, MemoryDomain::device, "b"),
      c(dev, 4096, MemoryDomain::device, "c");
  Program prog(dev, "linear_row errors");
  auto status = [](auto&& fn) { return test::status_of(fn); };
  const LinearRowParams good{16, 8};
  CHECK(status([&] { kernel.record_row(prog, a.range(), b.range(), c.range(), {0, 8}); }) == Status::invalid_argument);
  CHECK(status([&] { kernel.record_row(prog, a.range(0, 60), b.range(), c.range(), good); }) ==
        Status::invalid_argument);
  CHECK(status([&] { kernel.record_row(prog, a.range(), b.range(0, 508), c.range(), good); }) ==
        Status::invalid_argument);
  CHECK(status([&] { kernel.record_row(prog, a.range(), b.range(), c.range(0, 28), good); }) ==
        Status::invalid_argument);
  CHECK(status([&] { kernel.record_row(prog, a.range(), b.range(), a.range(1024, 32), good); }) ==
        Status::invalid_argument);
  CHECK(status([&] {
          kernel.record_row(prog, a.range(), b.range(), c.range(), {16, 8, RowPrologue::rmsnorm});
        }) == Status::invalid_argument);  // no norm weight
  CHECK(status([&] {
          kernel.record_row(prog, a.range(0, 64), b.range(), c.range(), {16, 8, RowPrologue::silu_mul});
        }) == Status::invalid_argument);  // silu needs 2·in values
  CHECK(status([&] { kernel.record_row(prog, a.range(), b.range(), c.range(0, 32), good, c.range(16, 32)); }) ==
        Status::invalid_argument);
  // The bias: out float32 values, not overlapping y.
  CHECK(status([&] { kernel.record_row(prog, a.range(), b.range(), c.range(0, 32), good, {}, {}, c.range(64, 28)); }) ==
        Status::invalid_argument);
  CHECK(status([&] { kernel.record_row(prog, a.range(), b.range(), c.range(0, 32), good, {}, {}, c.range(16, 32)); }) ==
        Status::invalid_argument);
  CHECK(prog.op_count() == 0);
  CHECK(status([&] { kernel.record_row(prog, a.range(), b.range(), c.range(0, 32), good, c.range(0, 32)); }) ==
        Status::ok);
  // 1024: a multiple of every device's minStorageBufferOffsetAlignment (at most 256 in Vulkan; SwiftShader's is 256).
  CHECK(status([&] {
          kernel.record_row(prog, a.range(), b.range(), c.range(0, 32), good, {}, {}, c.range(1024, 32));
        }) == Status::ok);
  CHECK(prog.op_count() == 2);
}

TEST_CASE("linear_row: the tuning's row_lanes forces the lane groups and refuses what is not a power of two") {
  ContextOptions o = test::validated_options(Precision::fp32);
  o.tuning = "row_lanes=2";
  auto ctx = Context::create(o);
  Device& dev = ctx->device();
  REQUIRE(dev.tuning().row_lanes == 2);
  CHECK(dev.tuning().why("row_lanes") == "override row_lanes=2 (ContextOptions::tuning)");
  const RowGeometry g = row_geometry(dev.caps());
  {
    LinearKernel kernel(dev, KernelOptions::for_device(dev));
    CHECK(kernel.row_lanes_for(16) == row_lanes(g, 16 / 4, false, 2));
    CHECK(kernel.row_lanes_for(16, true) == row_lanes(g, 16 / 4, true, 2));
    kernel.force_row_lanes_for_testing(4);  // the test hook overrides it, and 0 goes back to the tuning's
    CHECK(kernel.row_lanes_for(16) == row_lanes(g, 16 / 4, false, 4));
    kernel.force_row_lanes_for_testing(0);
    CHECK(kernel.row_lanes_for(16) == row_lanes(g, 16 / 4, false, 2));
  }
  struct Env {  // the older variable, an alias of the key, wins over ContextOptions::tuning
    explicit Env(const char* v) { setenv("DIFFVK_ROW_LANES", v, 1); }
    ~Env() { unsetenv("DIFFVK_ROW_LANES"); }
  };
  {
    Env e("0");
    auto c0 = Context::create(o);
    CHECK(c0->device().tuning().row_lanes == 0);
    LinearKernel kernel(c0->device(), KernelOptions::for_device(c0->device()));
    CHECK(kernel.row_lanes_for(16) == row_lanes(g, 16 / 4, false));
  }
  for (const char* bad : {"3", "-4", "four", "4x", "2048"}) {
    Env e(bad);
    CAPTURE(bad);
    try {
      (void)Context::create(o);
      FAIL("accepted");
    } catch (const Error& err) {
      CHECK(err.status() == Status::invalid_argument);
      CHECK(std::string(err.what()).find("DIFFVK_ROW_LANES") != std::string::npos);
    }
  }
  o.tuning = "row_lanes=3";
  CHECK(test::status_of([&] { (void)Context::create(o); }) == Status::invalid_argument);
}
