// Conformance of shaders/layer_norm.comp (LayerNorm with bias) against the float64 reference through the op's
// case table (bench/cases/layer_norm.cpp: both precisions, both reduction paths, odd widths, strided rows,
// large means, float32 input, outputs poisoned before each run) and its argument checks. The planted one-pass
// variance the bounds must reject is in test_tolerances.cpp.
#include <doctest/doctest.h>

#include "ops/layer_norm.hpp"
#include "gpu_test.hpp"
#include "op_table.hpp"

using namespace diffvk;

TEST_CASE("layer_norm: case table fp32") { test::run_op_table("layer_norm", Precision::fp32); }
TEST_CASE("layer_norm: case table fp16") { test::run_op_table("layer_norm", Precision::fp16); }

TEST_CASE("layer_norm: bad arguments are refused") {
  auto ctx = test::make_context();
  if (!ctx) return;
  Device& dev = ctx->device();
  LayerNormKernel k(dev, KernelOptions::for_device(dev));
  Buffer buf(dev, 4096, MemoryDomain::device, "layer_norm args");
  Program prog(dev, "layer_norm args");
  const BufferRange x = buf.range(0, 1024), w = buf.range(1024, 256), b = buf.range(1280, 256),
                    y = buf.range(2048, 1024);
  const LayerNormParams ok{2, 64, 64, 64, 1e-5f};
  CHECK_NOTHROW(k.record(prog, x, w, b, y, ok));
  CHECK_NOTHROW(k.record(prog, x, w, {}, y, ok));
  auto bad = [&](LayerNormParams p, BufferRange xx, BufferRange yy) {
    try {
      k.record(prog, xx, w, b, yy, p);
    } catch (const Error& e) {
      CHECK(e.status() == Status::invalid_argument);
      CHECK(std::string(e.what()).rfind("layer_norm: ", 0) == 0);
      return;
    }
    FAIL("no error");
  };
  bad(LayerNormParams{0, 64, 64, 64, 1e-5f}, x, y);
  bad(LayerNormParams{2, 64, 63, 64, 1e-5f}, x, y);
  bad(LayerNormParams{2, 64, 64, 64, -1.0f}, x, y);
  bad(LayerNormParams{2, 600, 600, 600, 1e-5f}, x, y);  // buffers too small
  bad(ok, x, buf.range(512, 1024));                     // y overlaps x
}
