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
