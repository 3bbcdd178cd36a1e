// Conformance of shaders/head_rmsnorm.comp against the float64 reference, both precisions,
// both reduction paths, odd shapes, outputs poisoned before each run.
#include <doctest/doctest.h>

#include <random>

#include "reference/diff_attn_ref.hpp"
#include "gpu_test.hpp"
#include "ops/head_rmsnorm.hpp"

using namespace diffvk;

namespace {

struct Shape {
  uint32_t heads, D, rows;
  Elem x_elem = Elem::storage;  // f32: x is float32 (the model's residual stream under the block norms)
};

void run_case(Context& ctx, bool force_shared, const Shape& s, uint64_t seed) {
  Device& dev = ctx.device();
  const bool fp16 = dev.fp16();
  KernelOptions ko = KernelOptions::for_device(dev);
  if (force_shared) ko.subgroup = false;
  HeadRmsNormKernel kernel(dev, ko);

  std::mt19937_64 rng(seed);
  const uint32_t width = 2 * s.D, stride = s.heads * width;
  // Round inputs to the storage type so the reference sees exactly what the GPU reads.
  auto round = [&](std::vector<double> v) { return fp16 ? ref::round_to_f16(v) : ref::round_to_f32(v); };
  const bool x32 = s.x_elem == Elem::f32;  // float32 x carries values beyond fp16's 65504
  auto x = test::random_vector(rng, size_t(s.rows) * stride, x32 ? -3e5 : -3.0, x32 ? 3e5 : 3.0);
  x = x32 ? ref::round_to_f32(x) : round(x);
  auto w = round(test::random_vector(rng, width, 0.5, 1.5));
  const int depth = static_cast<int>(rng() % 24);
  const double lambda_init = ref::lambda_init(depth);
  const auto expect = ref::head_rmsnorm(x, s.rows, s.heads, s.D, w, lambda_init);

  const size_t es = storage_bytes(fp16);
  const VkDeviceSize xb = x.size() * (x32 ? 4 : es), wb = w.size() * es, yb = x.size() * es;
  const VkDeviceSize align = dev.caps().min_storage_buffer_offset_alignment;
  auto up = [&](VkDeviceSize n) { return (n + align - 1) / align * align; };
  // One buffer, three aligned sub-ranges: exercises non-zero binding offsets.
  Buffer buf(dev, up(xb) + up(wb) + yb, MemoryDomain::device, "rmsnorm test");
  BufferRange rx = buf.range(0, xb), rw = buf.range(up(xb), wb), ry = buf.range(up(xb) + up(wb), yb);
  buf.upload(rx.offset, test::pack(x, fp16 && !x32).data(), xb);
  buf.upload(rw.offset, test::pack(w, fp16).data(), wb);

  Program prog(dev, "head_rmsnorm test");
  HeadRmsNormParams p{s.rows, s.heads, width, stride, static_cast<float>(1.0 - lambda_init), 1e-5f};
  kernel.record(prog, rx, rw, ry, p, s.x_elem);
  std::vector<uint8_t> out(yb);
  for (int rep = 0; rep < 2; ++rep) {  // replayed program must give identical bits
    buf.fill(ry.offset, yb, test::kPoison);
    prog.run();
    std::vector<uint8_t> got(yb);
    buf.download(ry.offset, got.data(), yb);
    if (rep == 0) {
      out = got;
      const auto c = test::compare(test::unpack(got, fp16), expect);
      INFO("heads=" << s.heads << " D=" << s.D << " rows=" << s.rows << " x32=" << x32 << " " << precision_name(ctx.precision())
                    << (ko.subgroup ? " subgroup" : " shared") << ": " << c.summary());
      CHECK(test::within_spec(c, fp16));
    } else {
      CHECK(got == out);
    }
  }
}

const Shape kShapes[] = {{1, 16, 1}, {3, 32, 7}, {8, 64, 300}, {5, 128, 33}, {2, 16, 129},
                         {7, 32, 2},  {4, 64, 65}, {1, 128, 300}, {6, 16, 257},
                         // float32 input (the model's block norms over the residual stream, issue 13)
                         {1, 128, 9, Elem::f32}, {3, 32, 7, Elem::f32}, {1, 16, 1, Elem::f32}};

void sweep(Precision precision, bool force_shared) {
  if (precision == Precision::fp16 && !test::device_has_fp16()) {
    test::skip("device has no fp16 path; fp16 case not run on this device");
    return;
  }
  if (!force_shared && !test::device_has_subgroup_arithmetic()) {
    test::skip("device has no subgroup arithmetic; subgroup case not run on this device");
    return;
  }
  auto ctx = test::make_context(precision);
  uint64_t seed = 1234 + static_cast<uint64_t>(precision) * 100 + force_shared;
  for (const Shape& s : kShapes) run_case(*ctx, force_shared, s, seed++);
}

}  // namespace

TEST_CASE("head_rmsnorm: fp32, subgroup reduction") { sweep(Precision::fp32, false); }
TEST_CASE("head_rmsnorm: fp32, shared-memory reduction") { sweep(Precision::fp32, true); }
TEST_CASE("head_rmsnorm: fp16, subgroup reduction") { sweep(Precision::fp16, false); }
TEST_CASE("head_rmsnorm: fp16, shared-memory reduction") { sweep(Precision::fp16, true); }

TEST_CASE("head_rmsnorm: a wrong result is caught (the test can fail)") {
  // Same comparison as above on a deliberately wrong gain: must be far outside tolerance.
  std::mt19937_64 rng(7);
  auto x = test::random_vector(rng, 2 * 3 * 32);
  auto w = test::random_vector(rng, 32, 0.5, 1.5);
  auto good = ref::head_rmsnorm(x, 2, 3, 16, w, ref::lambda_init(2));
  auto bad = ref::head_rmsnorm(x, 2, 3, 16, w, ref::lambda_init(3));
  CHECK_FALSE(test::within_spec(test::compare(bad, good), false));
  CHECK_FALSE(test::within_spec(test::compare(bad, good), true));
  std::vector<double> nan_out(good.size(), std::nan(""));
  CHECK_FALSE(test::within_spec(test::compare(nan_out, good), true));
}
