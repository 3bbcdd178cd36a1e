// Conformance of the one-row (decode) linear layer with fused prologues (shaders/linear_row.comp):
// against the float64 reference on fresh random inputs (rounded to the storage type first), odd sizes,
// every prologue (none / RMSNorm / SwiGLU), with / without / in-place residual, vector and scalar loads,
// subgroup and shared-memory reductions, fp16 and fp32, outputs poisoned before each run, replays bit
// for bit; docs/maths.md's one-kernel tolerances.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "reference/diff_attn_ref.hpp"
#include "gpu_test.hpp"
#include "ops/linear.hpp"
#include "status_of.hpp"

using namespace diffvk;

namespace {

enum Residual { none, separate, in_place };

struct RowCase {
  uint32_t in, out;
  RowPrologue pro;
  Residual res;
  Elem x_elem = Elem::storage, y_elem = Elem::storage;  // f32: the model's residual stream / logits (issue 13)
};

// Runs one case; `scalar` forces the elementwise loads. Returns whether the vector path was eligible.
void run_row(Context& ctx, LinearKernel& kernel, const RowCase& s, bool scalar, uint64_t seed, uint32_t x_misalign = 0) {
  Device& dev = ctx.device();
  const bool fp16 = dev.fp16();
  kernel.force_row_scalar_for_testing(scalar);
  std::mt19937_64 rng(seed);
  auto round = [&](std::vector<double> v) { return fp16 ? ref::round_to_f16(v) : ref::round_to_f32(v); };
  const bool x32 = s.x_elem == Elem::f32, y32 = s.y_elem == Elem::f32;
  // float32 x and residual carry values beyond fp16's 65504 (1e5 times the usual range).
  const double xk = x32 ? 1e5 : 1.0, rk = y32 ? 1e5 : 1.0;
  const uint32_t xn = s.pro == RowPrologue::silu_mul ? 2 * s.in : s.in;
  auto x = test::random_vector(rng, xn, (s.pro == RowPrologue::silu_mul ? -4.0 : -3.0) * xk, 3.0 * xk);
  x = x32 ? ref::round_to_f32(x) : round(x);
  const double ws = 1.7 / std::sqrt(double(s.in));
  auto w = round(test::random_vector(rng, size_t(s.out) * s.in, -ws, ws));
  auto g = round(test::random_vector(rng, s.in, 0.5, 1.5));
  auto r = test::random_vector(rng, s.out, -2.0 * rk, 2.0 * rk);
  r = y32 ? ref::round_to_f32(r) : round(r);
  const double eps = 1e-5;

  std::vector<double> a(s.in);
  double ss = 0;
  for (uint32_t k = 0; k < s.in; ++k) ss += x[k] * x[k];
  const double inv = 1.0 / std::sqrt(ss / s.in + eps);
  for (uint32_t k = 0; k < s.in; ++k) {
    if (s.pro == RowPrologue::none) a[k] = x[k];
    else if (s.pro == RowPrologue::rmsnorm) a[k] = x[k] * inv * g[k];
    else a[k] = x[k] / (1.0 + std::exp(-x[k])) * x[s.in + k];
  }
  auto expect = ref::linear(a, 1, int(s.in), w, int(s.out));
  if (s.res != none)
    for (uint32_t n = 0; n < s.out; ++n) expect[n] += r[n];

  const size_t es = storage_bytes(fp16), xs = x32 ? 4 : es, ys = y32 ? 4 : es;
  const VkDeviceSize align = std::max<VkDeviceSize>(dev.caps().min_storage_buffer_offset_alignment, 16);
  auto up = [&](VkDeviceSize n) { return (n + align - 1) / align * align; };
  const VkDeviceSize xb = x.size() * xs, wb = w.size() * es, gb = g.size() * es, yb = r.size() * ys;
  // x at an offset that is a multiple of the device alignment but (x_misalign) not of 16 bytes.
  const VkDeviceSize xo = x_misalign, wo = up(xo + xb), go = wo + up(wb), yo = go + up(gb), ro = yo + up(yb);
  Buffer buf(dev, ro + up(yb), MemoryDomain::device, "linear_row test");
  const BufferRange rx = buf.range(xo, xb), rw = buf.range(wo, wb), rg = buf.range(go, gb), ry = buf.range(yo, yb),
                    rr = buf.range(ro, yb);
  const auto rbytes = test::pack(r, fp16 && !y32);
  buf.upload(xo, test::pack(x, fp16 && !x32).data(), xb);
  buf.upload(wo, test::pack(w, fp16).data(), wb);
  buf.upload(go, test::pack(g, fp16).data(), gb);
  buf.upload(ro, rbytes.data(), yb);

  Program prog(dev, "linear_row test");
  const BufferRange res = s.res == none ? BufferRange{} : s.res == separate ? rr : ry;
  kernel.record_row(prog, rx, rw, ry, {s.in, s.out, s.pro, float(eps), s.x_elem, s.y_elem}, res, s.pro == RowPrologue::rmsnorm ? rg : BufferRange{});
  std::vector<uint8_t> first;
  for (int rep = 0; rep < 2; ++rep) {
    buf.fill(yo, yb, test::kPoison);
    if (s.res == in_place) buf.upload(yo, rbytes.data(), yb);
    prog.run();
    std::vector<uint8_t> got(yb);
    buf.download(yo, got.data(), yb);
    if (rep == 0) {
      first = got;
      const auto c = test::compare(test::unpack(got, fp16 && !y32), expect);
      INFO("in=" << s.in << " out=" << s.out << " pro=" << int(s.pro) << " residual=" << int(s.res) << " scalar=" << scalar
                 << " x32=" << x32 << " y32=" << y32
                 << " x_offset=" << xo << " " << std::string(precision_name(ctx.precision())) << " wg=" << kernel.row_workgroup_size()
                 << " nf=" << kernel.row_features() << ": " << c.summary());
      CHECK(test::within_spec(c, fp16));
    } else {
      CHECK(got == first);
    }
  }
}

const RowCase kRowCases[] = {
    {16, 8, RowPrologue::none, none},         {256, 200, RowPrologue::none, separate},   {40, 24, RowPrologue::none, in_place},
    {64, 1, RowPrologue::none, none},         {136, 13, RowPrologue::rmsnorm, none},     {256, 832, RowPrologue::rmsnorm, none},
    {24, 71, RowPrologue::rmsnorm, separate}, {7, 9, RowPrologue::none, separate},       {13, 5, RowPrologue::rmsnorm, none},
    {704, 256, RowPrologue::silu_mul, in_place}, {88, 41, RowPrologue::silu_mul, none},  {9, 17, RowPrologue::silu_mul, separate},
    {256, 256, RowPrologue::rmsnorm, in_place},  {1000, 3, RowPrologue::none, none},
};

bool skip(Precision precision, bool subgroup) {
  if (precision == Precision::fp16 && !test::device_has_fp16()) {
    MESSAGE("device has no fp16 path; fp16 case not run on this device");
    return true;
  }
  if (subgroup && !test::device_has_subgroup_arithmetic()) {
    MESSAGE("device has no subgroup arithmetic; subgroup case not run on this device");
    return true;
  }
  return false;
}

void sweep_row(Precision precision, bool subgroup) {
  if (skip(precision, subgroup)) return;
  auto ctx = test::make_context(precision, !subgroup);
  LinearKernel kernel(ctx->device(), KernelOptions{ctx->device().fp16(), subgroup});
  uint64_t seed = 9100 + 100 * static_cast<uint64_t>(precision) + (subgroup ? 50 : 0);
  for (const RowCase& s : kRowCases) {
    run_row(*ctx, kernel, s, false, seed++);
    run_row(*ctx, kernel, s, true, seed++);
  }
  // float32 x (the residual stream under the norm) and float32 y + residual (the residual add, logits).
  const Elem f32 = Elem::f32, st = Elem::storage;
  const RowCase wide[] = {{256, 200, RowPrologue::rmsnorm, separate, f32, f32}, {136, 13, RowPrologue::rmsnorm, none, f32, st},
                          {40, 24, RowPrologue::none, in_place, st, f32},        {704, 256, RowPrologue::silu_mul, in_place, st, f32},
                          {13, 5, RowPrologue::none, separate, f32, f32}};
  for (const RowCase& s : wide) {
    run_row(*ctx, kernel, s, false, seed++);
    run_row(*ctx, kernel, s, true, seed++);
  }
  // A grid-stride over the feature groups (fewer workgroups than groups).
  kernel.limit_workgroups_for_testing(3, 1);
  run_row(*ctx, kernel, {256, 200, RowPrologue::rmsnorm, separate}, false, seed++);
  run_row(*ctx, kernel, {45, 77, RowPrologue::silu_mul, in_place}, false, seed++);
  kernel.limit_workgroups_for_testing(0, 0);
  // x not 16-byte aligned: the kernel must fall back to elementwise loads by itself.
  const uint32_t al = static_cast<uint32_t>(ctx->device().caps().min_storage_buffer_offset_alignment);
  if (al < 16) run_row(*ctx, kernel, {256, 24, RowPrologue::none, none}, false, seed++, al);
}

}  // namespace

TEST_CASE("linear_row: fp32 subgroup reduction") { sweep_row(Precision::fp32, true); }
TEST_CASE("linear_row: fp16 subgroup reduction") { sweep_row(Precision::fp16, true); }
TEST_CASE("linear_row: fp32 shared-memory reduction") { sweep_row(Precision::fp32, false); }
TEST_CASE("linear_row: fp16 shared-memory reduction") { sweep_row(Precision::fp16, false); }

TEST_CASE("linear_row: long reduction dimension") {
  // in = 16384: loop iterations per invocation stay within llvmpipe's budget (quirk loop_iteration_limit).
  auto ctx = test::make_context(Precision::fp32);
  LinearKernel kernel(ctx->device(), KernelOptions::for_device(ctx->device()));
  run_row(*ctx, kernel, {16384, 24, RowPrologue::rmsnorm, separate}, false, 9901);
  run_row(*ctx, kernel, {16384, 24, RowPrologue::none, none}, true, 9902);
}

TEST_CASE("linear_row: invalid arguments are rejected") {
  auto ctx = test::make_context(Precision::fp32);
  Device& dev = ctx->device();
  LinearKernel kernel(dev, KernelOptions::for_device(dev));
  Buffer a(dev, 4096, MemoryDomain::device, "a"), b(dev, 4096, MemoryDomain::device, "b"), c(dev, 4096, MemoryDomain::device, "c");
  Program prog(dev, "linear_row errors");
  auto status = [](auto&& fn) { return test::status_of(fn); };
  const LinearRowParams good{16, 8};
  CHECK(status([&] { kernel.record_row(prog, a.range(), b.range(), c.range(), {0, 8}); }) == Status::invalid_argument);
  CHECK(status([&] { kernel.record_row(prog, a.range(0, 60), b.range(), c.range(), good); }) == Status::invalid_argument);
  CHECK(status([&] { kernel.record_row(prog, a.range(), b.range(0, 508), c.range(), good); }) == Status::invalid_argument);
  CHECK(status([&] { kernel.record_row(prog, a.range(), b.range(), c.range(0, 28), good); }) == Status::invalid_argument);
  CHECK(status([&] { kernel.record_row(prog, a.range(), b.range(), a.range(1024, 32), good); }) == Status::invalid_argument);
  CHECK(status([&] { kernel.record_row(prog, a.range(), b.range(), c.range(), {16, 8, RowPrologue::rmsnorm}); }) ==
        Status::invalid_argument);  // no norm weight
  CHECK(status([&] { kernel.record_row(prog, a.range(0, 64), b.range(), c.range(), {16, 8, RowPrologue::silu_mul}); }) ==
        Status::invalid_argument);  // silu needs 2·in values
  CHECK(status([&] { kernel.record_row(prog, a.range(), b.range(), c.range(0, 32), good, c.range(16, 32)); }) ==
        Status::invalid_argument);
  CHECK(prog.op_count() == 0);
  CHECK(status([&] { kernel.record_row(prog, a.range(), b.range(), c.range(0, 32), good, c.range(0, 32)); }) == Status::ok);
  CHECK(prog.op_count() == 1);
}
