// Conformance of shaders/kv_shift.comp (context shift: move KV rows down by d, re-rotate K by −d) against the
// float64 reference through the op's case table, and argument errors. The model-level tests are in
// tests/model/test_context_shift.cpp.
#include <doctest/doctest.h>

#include "gpu_test.hpp"
#include "op_table.hpp"
#include "ops/kv_shift.hpp"
#include "status_of.hpp"

using namespace diffvk;

// Every shape, precision and quirk comes from the op's one case table (bench/cases/kv_shift.cpp):
// odd shapes, d = 1 (one pass per moved row), nothing moved, capped workgroup counts; the K rows
// against R(-d) in float64, the V rows, and every row outside the moved ones bit for bit against its pattern.
TEST_CASE("kv_shift: case table fp32") { test::run_op_table("kv_shift", Precision::fp32); }
TEST_CASE("kv_shift: case table fp16") { test::run_op_table("kv_shift", Precision::fp16); }

TEST_CASE_FIXTURE(test::Fp32Device, "kv_shift: invalid arguments are rejected before anything is recorded") {
  KvShiftKernel kernel(dev, KernelOptions::for_device(dev));
  const uint32_t Hkv = 2, D = 8, cap = 16;
  const uint64_t bytes = uint64_t(Hkv) * cap * 2 * D * 4;
  Buffer k(dev, bytes, MemoryDomain::device, "k"), v(dev, bytes, MemoryDomain::device, "v"),
      t(dev, cap * D * 4, MemoryDomain::device, "t");
  Program prog(dev, "kv_shift errors");
  auto rec = [&](KvShiftParams p, BufferRange kr, BufferRange vr) { kernel.record(prog, kr, vr, t.range(), p); };
  const BufferRange kr = k.range(0, bytes), vr = v.range(0, bytes);
  CHECK(test::status_of([&] {
          rec({Hkv, D, cap, 2, 0, 10}, kr, vr);
        }) == Status::invalid_argument);  // nothing to discard
  CHECK(test::status_of([&] {
          rec({Hkv, D, cap, 6, 5, 10}, kr, vr);
        }) == Status::invalid_argument);  // past the held rows
  CHECK(test::status_of([&] {
          rec({Hkv, D, cap, 2, 3, 17}, kr, vr);
        }) == Status::invalid_argument);  // past the capacity
  CHECK(test::status_of([&] { rec({Hkv, 7, cap, 2, 3, 10}, kr, vr); }) == Status::invalid_argument);  // odd D
  CHECK(test::status_of([&] { rec({Hkv, D, cap, 2, 3, 10}, k.range(0, bytes / 2), vr); }) == Status::invalid_argument);
  CHECK(test::status_of([&] { rec({Hkv, D, cap, 2, 3, 10}, kr, kr); }) == Status::invalid_argument);  // K and V overlap
  CHECK(test::status_of([&] {
          rec({Hkv, D, 64, 2, 40, 60}, k.range(0, bytes), v.range(0, bytes));
        }) == Status::invalid_argument);
}
