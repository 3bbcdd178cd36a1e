// Conformance of the Mamba-1 kernels of Phi-4-mini-flash (SambaY): the causal depthwise conv1d with its rolling
// state (shaders/conv1d_state.comp) and the selective scan (shaders/selective_scan.comp: one dispatch, and the
// chunked parallel prefill), through their case tables (bench/cases/conv1d_state.cpp, selective_scan.cpp) against
// the float64 reference (runtime/reference/ssm_ref.*); the argument checks and the pure chunk choice.
#include <doctest/doctest.h>

#include "op_table.hpp"
#include "ops/conv1d_state.hpp"
#include "ops/selective_scan.hpp"
#include "status_of.hpp"

using namespace diffvk;

TEST_CASE("conv1d_state: case table fp32") { test::run_op_table("conv1d_state", Precision::fp32); }
TEST_CASE("conv1d_state: case table fp16") { test::run_op_table("conv1d_state", Precision::fp16); }
TEST_CASE("selective_scan: case table fp32") { test::run_op_table("selective_scan", Precision::fp32); }
TEST_CASE("selective_scan: case table fp16") { test::run_op_table("selective_scan", Precision::fp16); }

TEST_CASE("selective_scan: chunk choice") {
  CHECK(choose_scan_chunk(1) == 0);
  CHECK(choose_scan_chunk(32) == 0);
  CHECK(choose_scan_chunk(33) == 32);
  CHECK(choose_scan_chunk(512) == 32);
  SelectiveScanParams p;
  p.T = 512, p.C = 5120, p.S = 16;
  CHECK(scan_chunk(p) == 32);
  CHECK(selective_scan_scratch_bytes(p) == uint64_t(16) * 5120 * 17 * 4);
  p.chunk = 4, p.T = 13;
  CHECK(scan_chunk(p) == 4);
  CHECK(SelectiveScanKernel::choice(p) == "chunked L=4 x 4");
  p.chunk = 13;  // one chunk: one dispatch, no scratch
  CHECK(scan_chunk(p) == 0);
  CHECK(selective_scan_scratch_bytes(p) == 0);
  p.T = 1, p.chunk = 0;
  CHECK(SelectiveScanKernel::choice(p) == "one dispatch");
}

TEST_CASE("conv1d_state: bad arguments throw invalid_argument") {
  auto ctx = test::make_context(Precision::fp32);
  Device& dev = ctx->device();
  CHECK(test::status_of([&] { Conv1dStateKernel(dev, KernelOptions::for_device(dev), 1); }) ==
        Status::invalid_argument);
  CHECK(test::status_of([&] { Conv1dStateKernel(dev, KernelOptions::for_device(dev), 9); }) ==
        Status::invalid_argument);
  const Conv1dStateKernel k(dev, KernelOptions::for_device(dev), 4);
  Buffer buf(dev, 1 << 16, MemoryDomain::device, "conv1d_state args");
  const BufferRange big = buf.range(0, 1 << 14), small = buf.range(1 << 14, 64);
  Program prog(dev, "conv1d_state args");
  auto status = [&](Conv1dStateParams p, BufferRange x, BufferRange state) {
    return test::status_of([&] { k.record(prog, p, x, big, BufferRange{}, state, big); });
  };
  Conv1dStateParams good;
  good.T = 3, good.C = 16, good.x_stride = 32;
  CHECK(status(good, big, big) == Status::ok);
  Conv1dStateParams p = good;
  p.T = 0;
  CHECK(status(p, big, big) == Status::invalid_argument);
  p = good, p.x_stride = 15;  // rows overlap
  CHECK(status(p, big, big) == Status::invalid_argument);
  CHECK(status(good, small, big) == Status::invalid_argument);  // x too small for 3 rows of stride 32
  p = good, p.C = 8;
  CHECK(status(p, big, small) == Status::invalid_argument);  // state 3 x 8 float32 = 96 bytes > 64
  p.C = 4;
  CHECK(status(p, big, small) == Status::ok);  // 3 x 4 float32 = 48 bytes
}

TEST_CASE("selective_scan: bad arguments throw invalid_argument") {
  auto ctx = test::make_context(Precision::fp32);
  Device& dev = ctx->device();
  CHECK(test::status_of([&] { SelectiveScanKernel(dev, KernelOptions::for_device(dev), 0); }) ==
        Status::invalid_argument);
  const SelectiveScanKernel k(dev, KernelOptions::for_device(dev), 16);
  Buffer buf(dev, 1 << 18, MemoryDomain::device, "selective_scan args");
  const BufferRange big = buf.range(0, 1 << 16), small = buf.range(1 << 16, 256);
  Program prog(dev, "selective_scan args");
  SelectiveScanBuffers good;
  good.u = good.delta_raw = good.A_log = good.bc = good.D = good.h = good.y = good.scratch = big;
  auto status = [&](SelectiveScanParams p, const SelectiveScanBuffers& b) {
    return test::status_of([&] { k.record(prog, p, b); });
  };
  SelectiveScanParams p;
  p.T = 40, p.C = 24, p.S = 16, p.bc_stride = 40, p.b_offset = 5, p.c_offset = 21;
  CHECK(status(p, good) == Status::ok);  // chunked: 2 chunks of 32
  SelectiveScanParams q = p;
  q.S = 8;  // the kernel's S is 16
  CHECK(status(q, good) == Status::invalid_argument);
  q = p, q.T = 0;
  CHECK(status(q, good) == Status::invalid_argument);
  SelectiveScanBuffers b = good;
  b.scratch = small;  // 2 x 24 x 17 x 4 bytes needed
  CHECK(status(p, b) == Status::invalid_argument);
  q = p, q.T = 1;  // one dispatch: no scratch needed
  CHECK(status(q, b) == Status::ok);
  b = good, b.h = small;  // 24 x 16 float32
  CHECK(status(p, b) == Status::invalid_argument);
  b = good, b.z = big;
  q = p, q.z_stride = 23;  // rows overlap
  CHECK(status(q, b) == Status::invalid_argument);
  b = good, b.bc = small;
  CHECK(status(p, b) == Status::invalid_argument);
}
