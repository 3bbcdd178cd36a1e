// Conformance of the linear layer (shaders/linear.comp, shaders/linear_vec.comp) against the float64
// reference, both precisions, both reduction paths of the matrix-vector path, every tile variant, odd
// shapes, padded row strides, with / without / in-place residual, outputs poisoned before each run;
// and the pure tile choice on simulated devices.
#include <doctest/doctest.h>

#include <cstring>
#include <random>

#include "reference/diff_attn_ref.hpp"
#include "gpu_test.hpp"
#include "ops/linear.hpp"
#include "status_of.hpp"

using namespace diffvk;

namespace {

enum Residual { none, separate, in_place };

struct LShape {
  uint32_t rows, in, out, x_pad, y_pad;
  Residual res;
  Elem y_elem = Elem::storage;  // f32: y and the residual are float32 (the model's residual stream / logits)
};

// variant < 0: the kernel's own choice (record); else record_variant.
void run_case(Context& ctx, const LinearKernel& kernel, int variant, const LShape& s, uint64_t seed) {
  Device& dev = ctx.device();
  const bool fp16 = dev.fp16();
  std::mt19937_64 rng(seed);
  auto round = [&](std::vector<double> v) { return fp16 ? ref::round_to_f16(v) : ref::round_to_f32(v); };
  const uint32_t xs = s.in + s.x_pad, ys = s.out + s.y_pad;
  auto x = round(test::random_vector(rng, size_t(s.rows) * xs, -1.0, 1.0));
  const double ws = 1.7 / std::sqrt(double(s.in));
  auto w = round(test::random_vector(rng, size_t(s.out) * s.in, -ws, ws));
  const bool y32 = s.y_elem == Elem::f32;  // float32 residuals carry values beyond fp16's 65504
  auto r = test::random_vector(rng, size_t(s.rows) * ys, y32 ? -2e5 : -2.0, y32 ? 2e5 : 2.0);
  r = y32 ? ref::round_to_f32(r) : round(r);

  std::vector<double> xd(size_t(s.rows) * s.in);
  for (uint32_t i = 0; i < s.rows; ++i)
    for (uint32_t k = 0; k < s.in; ++k) xd[size_t(i) * s.in + k] = x[size_t(i) * xs + k];
  auto expect = ref::linear(xd, int(s.rows), int(s.in), w, int(s.out));
  if (s.res != none)
    for (uint32_t i = 0; i < s.rows; ++i)
      for (uint32_t n = 0; n < s.out; ++n) expect[size_t(i) * s.out + n] += r[size_t(i) * ys + n];

  const size_t es = storage_bytes(fp16), yes = y32 ? 4 : es;
  // y / r cover full padded rows so the stride padding of the last row is checked as well.
  const VkDeviceSize xb = x.size() * es, wb = w.size() * es, yb = r.size() * yes;
  const VkDeviceSize align = dev.caps().min_storage_buffer_offset_alignment;
  auto up = [&](VkDeviceSize n) { return (n + align - 1) / align * align; };
  Buffer buf(dev, up(xb) + up(wb) + up(yb) + yb, MemoryDomain::device, "linear test");
  BufferRange rx = buf.range(0, xb), rw = buf.range(up(xb), wb), ry = buf.range(up(xb) + up(wb), yb),
              rr = buf.range(up(xb) + up(wb) + up(yb), yb);
  const auto rbytes = test::pack(r, fp16 && !y32);
  buf.upload(rx.offset, test::pack(x, fp16).data(), xb);
  buf.upload(rw.offset, test::pack(w, fp16).data(), wb);
  buf.upload(rr.offset, rbytes.data(), yb);

  Program prog(dev, "linear test");
  const LinearParams p{s.rows, s.in, s.out, xs, ys};
  const BufferRange res = s.res == none ? BufferRange{} : s.res == separate ? rr : ry;
  if (variant < 0)
    kernel.record(prog, rx, rw, ry, p, res, s.y_elem);
  else
    kernel.record_variant(prog, uint32_t(variant), rx, rw, ry, p, res, s.y_elem);

  const LinearTiles t =
      variant < 0 ? choose_linear_tiles(dev.caps(), s.rows, s.in, s.out) : kernel.candidates()[size_t(variant)];
  std::vector<uint8_t> first;
  for (int rep = 0; rep < 2; ++rep) {  // a replayed program must give identical bits
    // Poison y; in place, y starts as r except in the stride padding, which stays poisoned.
    buf.fill(ry.offset, yb, test::kPoison);
    if (s.res == in_place)
      for (uint32_t i = 0; i < s.rows; ++i)
        buf.upload(ry.offset + size_t(i) * ys * yes, rbytes.data() + size_t(i) * ys * yes, size_t(s.out) * yes);
    prog.run();
    std::vector<uint8_t> got(yb);
    buf.download(ry.offset, got.data(), yb);
    if (rep == 0) {
      first = got;
      const auto all = test::unpack(got, fp16 && !y32);
      std::vector<double> gd(expect.size());
      size_t pad_changed = 0;
      for (uint32_t i = 0; i < s.rows; ++i) {
        for (uint32_t n = 0; n < s.out; ++n) gd[size_t(i) * s.out + n] = all[size_t(i) * ys + n];
        for (uint32_t n = s.out; n < ys; ++n) {
          uint32_t poison = test::kPoison;
          if (std::memcmp(&got[(size_t(i) * ys + n) * yes], &poison, yes) != 0) ++pad_changed;
        }
      }
      const auto c = test::compare(gd, expect);
      INFO("rows=" << s.rows << " in=" << s.in << " out=" << s.out << " x_stride=" << xs << " y_stride=" << ys
                   << " residual=" << int(s.res) << " y32=" << y32 << " " << precision_name(ctx.precision())
                   << (t.vec ? " vec wg=" : " mm wg=") << t.wg << " bm=" << t.bm << " bn=" << t.bn << " bk=" << t.bk
                   << " rm=" << t.rm << " rn=" << t.rn << " variant=" << t.variant << ": " << c.summary());
      CHECK(test::within_spec(c, fp16));
      CHECK(pad_changed == 0);
    } else {
      CHECK(got == first);
    }
  }
}

const LShape kShapes[] = {
    {1, 16, 8, 0, 0, none},        {1, 136, 200, 3, 1, separate}, {2, 40, 24, 0, 0, in_place},
    {2, 64, 8, 5, 0, none},        {5, 64, 72, 0, 3, separate},   {5, 40, 200, 0, 0, none},
    {8, 136, 200, 0, 0, in_place}, {8, 16, 72, 2, 2, separate},   {9, 16, 8, 0, 0, separate},
    {9, 136, 72, 3, 0, none},      {33, 40, 24, 0, 5, in_place},  {33, 64, 200, 0, 0, none},
    {33, 136, 24, 1, 1, separate}, {130, 136, 200, 0, 0, separate}, {130, 16, 8, 0, 0, none},
    {130, 64, 72, 7, 0, in_place}, {130, 40, 24, 0, 0, none},  {17, 48, 37, 0, 0, separate},
    {65, 24, 101, 0, 2, none},
    // float32 output and residual (issue 13): every path (<= 8 rows: matrix-vector; more: both tiles).
    {1, 64, 72, 0, 0, in_place, Elem::f32},    {5, 40, 24, 0, 3, separate, Elem::f32}, {33, 136, 72, 1, 0, in_place, Elem::f32},
    {130, 64, 200, 0, 2, separate, Elem::f32}, {17, 48, 37, 0, 0, none, Elem::f32},
};

bool skip_fp16(Precision precision) {
  if (precision == Precision::fp16 && !test::device_has_fp16()) {
    test::skip("device has no fp16 path; fp16 case not run on this device");
    return true;
  }
  return false;
}

// Every shape through the kernel's own path choice (device default reduction).
void sweep_auto(Precision precision) {
  if (skip_fp16(precision)) return;
  auto ctx = test::make_context(precision);
  LinearKernel kernel(ctx->device(), KernelOptions::for_device(ctx->device()));
  uint64_t seed = 5000 + 100 * static_cast<uint64_t>(precision);
  for (const LShape& s : kShapes) run_case(*ctx, kernel, -1, s, seed++);
}

// The matrix-vector path with the shared-memory tree reduction (forced) on every shape it takes.
void sweep_vec_shared(Precision precision) {
  if (skip_fp16(precision)) return;
  auto ctx = test::make_context(precision);
  LinearKernel kernel(ctx->device(), KernelOptions{ctx->device().fp16(), false});
  uint64_t seed = 6000 + 100 * static_cast<uint64_t>(precision);
  for (const LShape& s : kShapes)
    if (s.rows <= kLinearVecMaxRows) run_case(*ctx, kernel, 0, s, seed++);
}

// Every tile variant on a spread of shapes, including small row counts through the matrix-matrix
// shader and a shape that spans several large tiles.
void sweep_variants(Precision precision) {
  if (skip_fp16(precision)) return;
  auto ctx = test::make_context(precision);
  LinearKernel kernel(ctx->device(), KernelOptions::for_device(ctx->device()));
  const LShape shapes[] = {{1, 40, 72, 0, 0, separate}, {8, 64, 24, 2, 0, none},   {9, 136, 8, 0, 0, in_place},
                           {130, 40, 200, 0, 1, none},  {200, 64, 140, 3, 0, separate}};
  uint64_t seed = 7000 + 100 * static_cast<uint64_t>(precision);
  for (uint32_t v = 0; v < kernel.candidates().size(); ++v)
    for (const LShape& s : shapes)
      if (!kernel.candidates()[v].vec || s.rows <= kLinearVecMaxRows) run_case(*ctx, kernel, int(v), s, seed++);
}

// The matrix-matrix path with the 4-wide loads turned off (the sweeps above take them wherever in,
// the x stride and the offsets allow, and the elementwise loads elsewhere).
void sweep_mm_scalar(Precision precision) {
  if (skip_fp16(precision)) return;
  auto ctx = test::make_context(precision);
  LinearKernel kernel(ctx->device(), KernelOptions::for_device(ctx->device()));
  kernel.force_row_scalar_for_testing(true);
  uint64_t seed = 7600 + 100 * static_cast<uint64_t>(precision);
  for (uint32_t v = 1; v < kernel.candidates().size(); ++v)
    for (const LShape& s : kShapes)
      if (s.rows > kLinearVecMaxRows) run_case(*ctx, kernel, int(v), s, seed++);
}

DeviceCaps simulated(uint32_t shared, uint32_t invocations, uint32_t subgroup) {
  DeviceCaps c;
  c.max_shared_memory = shared;
  c.max_workgroup_invocations = invocations;
  c.max_workgroup_size = {invocations, invocations, 64};
  c.max_workgroup_count = {65535, 65535, 65535};
  c.subgroup_size = c.subgroup_min_size = c.subgroup_max_size = subgroup;
  return c;
}

}  // namespace

TEST_CASE("linear: tile choice is legal on simulated devices") {
  const uint32_t rows_list[] = {1, 2, 8, 9, 33, 130, 512, 4096};
  const uint32_t out_list[] = {8, 200, 512, 3000};
  for (uint32_t shared : {16384u, 32768u, 49152u})
    for (uint32_t inv : {128u, 256u, 1024u})
      for (uint32_t sg : {4u, 8u, 16u, 32u, 64u, 128u}) {
        const DeviceCaps c = simulated(shared, inv, sg);
        const auto cand = linear_tile_candidates(c);
        REQUIRE(cand.size() == 3);
        for (size_t i = 0; i < cand.size(); ++i) {
          const LinearTiles& t = cand[i];
          INFO("shared=" << shared << " inv=" << inv << " sg=" << sg << " variant=" << i << " wg=" << t.wg
                         << " bm=" << t.bm << " bn=" << t.bn << " bk=" << t.bk << " rm=" << t.rm << " rn=" << t.rn
                         << " nf=" << t.nf << " shared_bytes=" << t.shared_bytes);
          CHECK(t.variant == i);
          CHECK(t.vec == (i == 0));
          CHECK(t.wg >= 1);
          CHECK(t.wg <= inv);
          CHECK(t.wg <= c.max_workgroup_size[0]);
          CHECK((t.wg & (t.wg - 1)) == 0);           // power of two (tree reduction)
          CHECK(t.wg >= std::min(sg, inv));           // at least one full subgroup
          CHECK(t.shared_bytes <= shared);
          if (t.vec) {
            CHECK(t.nf >= 1);
            CHECK(t.shared_bytes == 4 * t.wg);  // reduce.glsl: WG floats
          } else {
            CHECK(t.bk >= 1);
            CHECK(t.rm >= 1);
            CHECK(t.rn >= 1);
            CHECK(t.bm % t.rm == 0);
            CHECK(t.bn % t.rn == 0);
            CHECK(t.wg == (t.bm / t.rm) * (t.bn / t.rn));
            CHECK(t.shared_bytes == 4 * t.bk * (t.bm + 1 + t.bn + 1));
            CHECK(t.rm * t.rn <= 64);  // register block stays small
          }
        }
        for (uint32_t rows : rows_list)
          for (uint32_t out : out_list) {
            const LinearTiles t = choose_linear_tiles(c, rows, 512, out);
            CHECK(t.vec == (rows <= kLinearVecMaxRows));
            CHECK(t.variant < cand.size());
            CHECK(t.wg == cand[t.variant].wg);
          }
      }
  // Big shapes take the large tile on a typical device; a 16-KiB / 128-invocation device still gets legal tiles.
  const DeviceCaps typical = simulated(32768, 1024, 32);
  CHECK(choose_linear_tiles(typical, 4096, 512, 3000).variant == 1);
  CHECK(choose_linear_tiles(typical, 33, 512, 24).variant == 2);
  const auto tiny = linear_tile_candidates(simulated(16384, 128, 128));
  CHECK(tiny[1].wg == 128);
  // Even absurdly small limits give something legal.
  const DeviceCaps odd = simulated(256, 96, 64);
  for (const LinearTiles& t : linear_tile_candidates(odd)) {
    CHECK(t.wg <= 96);
    CHECK(t.shared_bytes <= 256);
  }
}

TEST_CASE("linear: fp32 with the kernel's path choice") { sweep_auto(Precision::fp32); }
TEST_CASE("linear: fp16 with the kernel's path choice") { sweep_auto(Precision::fp16); }
TEST_CASE("linear: fp32 matrix-vector with shared-memory reduction") { sweep_vec_shared(Precision::fp32); }
TEST_CASE("linear: fp16 matrix-vector with shared-memory reduction") { sweep_vec_shared(Precision::fp16); }
TEST_CASE("linear: fp32 every tile variant") { sweep_variants(Precision::fp32); }
TEST_CASE("linear: fp16 every tile variant") { sweep_variants(Precision::fp16); }
TEST_CASE("linear: fp32 matrix-matrix with elementwise loads") { sweep_mm_scalar(Precision::fp32); }
TEST_CASE("linear: fp16 matrix-matrix with elementwise loads") { sweep_mm_scalar(Precision::fp16); }

TEST_CASE("linear: grid-stride loops when workgroup counts are capped") {
  auto ctx = test::make_context(Precision::fp32);
  LinearKernel kernel(ctx->device(), KernelOptions::for_device(ctx->device()));
  kernel.limit_workgroups_for_testing(2, 1);
  uint64_t seed = 8000;
  run_case(*ctx, kernel, 0, {3, 40, 72, 0, 0, separate}, seed++);
  run_case(*ctx, kernel, 1, {130, 40, 200, 0, 0, none}, seed++);
  run_case(*ctx, kernel, 2, {100, 24, 72, 1, 2, in_place}, seed++);
}

TEST_CASE("linear: invalid arguments are rejected") {
  auto ctx = test::make_context(Precision::fp32);
  Device& dev = ctx->device();
  LinearKernel kernel(dev, KernelOptions::for_device(dev));
  Buffer a(dev, 4096, MemoryDomain::device, "a"), b(dev, 4096, MemoryDomain::device, "b"),
      c(dev, 4096, MemoryDomain::device, "c");
  Program prog(dev, "linear errors");
  auto status = [](auto&& fn) { return test::status_of(fn); };
  const LinearParams good{4, 16, 8, 16, 8};
  CHECK(status([&] { kernel.record(prog, a.range(), b.range(), c.range(), {0, 16, 8, 16, 8}); }) == Status::invalid_argument);
  CHECK(status([&] { kernel.record(prog, a.range(), b.range(), c.range(), {4, 16, 8, 15, 8}); }) == Status::invalid_argument);
  CHECK(status([&] { kernel.record(prog, a.range(), b.range(), c.range(), {4, 16, 8, 16, 7}); }) == Status::invalid_argument);
  CHECK(status([&] { kernel.record(prog, a.range(0, 255), b.range(), c.range(), good); }) == Status::invalid_argument);
  CHECK(status([&] { kernel.record(prog, a.range(), b.range(0, 511), c.range(), good); }) == Status::invalid_argument);
  CHECK(status([&] { kernel.record(prog, a.range(), b.range(), c.range(0, 127), good); }) == Status::invalid_argument);
  CHECK(status([&] { kernel.record(prog, a.range(), b.range(), c.range(), good, a.range(0, 64)); }) == Status::invalid_argument);
  CHECK(status([&] { kernel.record(prog, a.range(), b.range(), a.range(2048, 128), good); }) == Status::invalid_argument);
  CHECK(status([&] { kernel.record(prog, a.range(), b.range(), c.range(0, 128), good, c.range(64, 128)); }) ==
        Status::invalid_argument);
  CHECK(status([&] { kernel.record_variant(prog, 0, a.range(), b.range(), c.range(), {9, 16, 8, 16, 8}); }) ==
        Status::invalid_argument);
  CHECK(status([&] { kernel.record_variant(prog, 7, a.range(), b.range(), c.range(), good); }) == Status::invalid_argument);
  CHECK(prog.op_count() == 0);
  // The legal forms record: separate residual, in-place residual.
  CHECK(status([&] { kernel.record(prog, a.range(), b.range(), c.range(0, 128), good, c.range(256, 128)); }) == Status::ok);
  CHECK(status([&] { kernel.record(prog, a.range(), b.range(), c.range(0, 128), good, c.range(0, 128)); }) == Status::ok);
  CHECK(prog.op_count() == 2);
}

TEST_CASE("linear: long reduction dimension (every path)") {
  // in = 16384 (beyond any intermediate size we ship): if the reduction needed more loop iterations per
  // invocation than llvmpipe allows (quirk loop_iteration_limit) it would be silently truncated.
  auto ctx = test::make_context(Precision::fp32);
  LinearKernel kernel(ctx->device(), KernelOptions::for_device(ctx->device()));
  uint64_t seed = 4242;
  for (size_t v = 0; v < kernel.candidates().size(); ++v) {
    const uint32_t rows = kernel.candidates()[v].vec ? 3 : 20;
    run_case(*ctx, kernel, static_cast<int>(v), LShape{rows, 16384, 24, 0, 0, none}, seed++);
  }
}
