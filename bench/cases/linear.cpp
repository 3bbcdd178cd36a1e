// diffvk_bench: the linear op's cases (matrix-matrix / matrix-vector: y = x·Wᵀ (+ b) (+ r)), its table, its
// float64 reference and its record call; and the matmul table of `diffvk bench --matmul-table`.
#include "bench/cases/linear.hpp"

#include "ops/linear_quant.hpp"

namespace diffvk::bench {

using namespace op_detail;

std::string LinearCase::describe() const {
  std::string s = precision_prefix(fp16) + strf("%ux%u->%u", p.rows, p.in, p.out);
  if (p.x_pad || p.y_pad) s += strf(" pad %u/%u", p.x_pad, p.y_pad);
  if (p.weights != QuantType::f16) s += std::string(" ") + quant_type_name(p.weights);
  if (p.int8_dot) s += " int8-dot";
  if (p.bias) s += " +b";
  s += residual_name(p.residual);
  if (p.y_f32) s += " y32";
  if (p.variant == int(kLinearCoopVariant))
    s += " coopmat";
  else if (p.variant >= 0)
    s += strf(" variant=%d", p.variant);
  if (!p.subgroup) s += " shared-reduction";
  if (p.scalar_loads) s += " scalar-loads";
  return s + wg_limit_name(p.wg_limit_x, p.wg_limit_y);
}

std::string LinearCase::skip_reason(const Device& dev) const {
  if (p.int8_dot && !dev.caps().integer_dot_product)
    return "the device has no shaderIntegerDotProduct: no int8 dot-product path";
  if (p.variant == int(kLinearCoopVariant) && !dev.coopmat()) {
    std::string why;
    linear_uses_coopmat(dev.caps(), dev.fp16(), &why);
    return "no cooperative-matrix path on this device (" + why + ")";
  }
  return {};
}

void LinearCase::add_row_fields(json& row, const std::string& detail) const {
  row["M"] = p.rows, row["K"] = p.in, row["N"] = p.out;
  row["weights"] = quant_type_name(p.weights);
  // coopmat: the cooperative-matrix kernel (forced by variant, or the tuning's choice); else a scalar-FMA kernel.
  row["path"] = p.variant == int(kLinearCoopVariant) || detail.rfind("coopmat", 0) == 0 ? "coopmat" : "scalar";
}

LinearKernel& linear_kernel(Device& dev, KernelCache& kernels, bool sg) {
  return kernels.get<LinearKernel>(sg ? "linear subgroup" : "linear shared", [&] {
    return std::make_unique<LinearKernel>(dev, options_for(dev, sg),
                                          std::vector<QuantType>{QuantType::q8_0, QuantType::q4_0},
                                          /*all_variants=*/true);
  });
}

QuantRowKernel& quant_row_kernel(Device& dev, KernelCache& kernels, bool sg, bool int8_dot) {
  return kernels.get<QuantRowKernel>(strf("quant_row sg=%d int8_dot=%d", int(sg), int(int8_dot)), [&] {
    const QuantRowPath path = int8_dot ? QuantRowPath::int8_dot : QuantRowPath::dequant;
    return std::make_unique<QuantRowKernel>(dev, options_for(dev, sg),
                                            std::vector<QuantType>{QuantType::q8_0, QuantType::q4_0}, &path);
  });
}

void LinearCase::prepare(Device& dev, KernelCache& kernels, bool sg, Prepared& pr) const {
  LinearKernel& kernel = linear_kernel(dev, kernels, sg);
  const LinearCaseParams& c = p;
  const bool f16 = dev.fp16(), y32 = c.y_f32;
  // The path the case runs: int8 dot products when it forces them, or when quantized weights take the device's
  // own choice (record_quant) and that is int8_dot; the reference then rounds the activations as they do.
  const bool int8 = c.int8_dot || (c.weights != QuantType::f16 && c.variant < 0 &&
                                   kernel.quant_choice().path == QuantRowPath::int8_dot);
  std::mt19937_64 rng(seed);
  const uint32_t xs = c.in + c.x_pad, ys = c.out + c.y_pad;
  const auto x = rounded(uniform(rng, size_t(c.rows) * xs, -1, 1), f16);
  const double ws = 1.7 / std::sqrt(double(c.in));
  auto w = rounded(uniform(rng, size_t(c.out) * c.in, -ws, ws), f16);
  const std::vector<uint8_t> wbytes =
      weight_bytes(c.weights, c.in, c.out, f16, w);  // quantized: w becomes the dequantized values
  auto r =
      uniform(rng, size_t(c.rows) * ys, y32 ? -2e5 : -2.0, y32 ? 2e5 : 2.0);  // float32 residuals exceed fp16's range
  r = y32 ? ref::round_to_f32(r) : rounded(r, f16);
  std::vector<double> xd(size_t(c.rows) * c.in);
  for (uint32_t i = 0; i < c.rows; ++i)
    for (uint32_t k = 0; k < c.in; ++k) xd[size_t(i) * c.in + k] = x[size_t(i) * xs + k];
  std::vector<double> ties(int8 ? xd.size() : 0);
  if (int8)  // the int8 matmul's activations, per row
    for (uint32_t i = 0; i < c.rows; ++i) int8_round_blocks(xd, size_t(i) * c.in, c.in, &ties);
  pr.expect = ref::linear(xd, int(c.rows), int(c.in), w, int(c.out));
  // The bias: drawn after every other input, so that the unbiased cases keep their values.
  const auto bias = c.bias ? ref::round_to_f32(uniform(rng, c.out, -1, 1)) : std::vector<double>{};
  if (c.bias)
    for (uint32_t i = 0; i < c.rows; ++i)
      for (uint32_t n = 0; n < c.out; ++n) pr.expect[size_t(i) * c.out + n] += bias[n];
  if (c.residual != Residual::none)
    for (uint32_t i = 0; i < c.rows; ++i)
      for (uint32_t n = 0; n < c.out; ++n) pr.expect[size_t(i) * c.out + n] += r[size_t(i) * ys + n];
  if (int8) pr.tolerance = int8_tie_factor(ties, c.rows, c.in, w, c.out, pr.expect, f16);

  const size_t es = storage_bytes(f16), yes = y32 ? 4 : es;
  const VkDeviceSize xb = x.size() * es, wb = wbytes.size(), yb = r.size() * yes;  // y / r: full padded rows
  Arena& a = pr.arena;
  const VkDeviceSize xo = a.take(xb), wo = a.take(wb), yo = a.take(yb), ro = a.take(yb);
  const VkDeviceSize bb = bias.size() * 4, bo = c.bias ? a.take(bb) : 0;
  a.create(dev, "op case linear");
  if (c.bias) a.buf->upload(bo, pack(bias, false).data(), bb);
  const BufferRange br = c.bias ? a.range(bo, bb) : BufferRange{};
  const auto rbytes = pack(r, f16 && !y32);
  a.buf->upload(xo, pack(x, f16).data(), xb);
  a.buf->upload(wo, wbytes.data(), wb);
  a.buf->upload(ro, rbytes.data(), yb);

  // The kernel's test hooks for this case (undone after the recording).
  kernel.force_row_scalar_for_testing(c.scalar_loads);
  kernel.limit_workgroups_for_testing(c.wg_limit_x, c.wg_limit_y);
  kernel.force_row_lanes_for_testing(0);
  pr.prog = std::make_unique<Program>(dev, "op case linear", pr.timestamps);
  diffvk::LinearParams lp;
  lp.rows = c.rows;
  lp.in = c.in;
  lp.out = c.out;
  lp.x_stride = xs;
  lp.y_stride = ys;
  const BufferRange ry = a.range(yo, yb);
  const BufferRange res = c.residual == Residual::none       ? BufferRange{}
                          : c.residual == Residual::separate ? a.range(ro, yb)
                                                             : ry;
  const Elem ye = y32 ? Elem::f32 : Elem::storage;
  if (int8)
    kernel.record_quant_path(*pr.prog, QuantRowPath::int8_dot, c.weights, a.range(xo, xb), a.range(wo, wb), ry, lp, res,
                             ye, br);
  else if (c.weights != QuantType::f16 && c.variant >= 0)
    kernel.record_quant_variant(*pr.prog, uint32_t(c.variant), c.weights, a.range(xo, xb), a.range(wo, wb), ry, lp, res,
                                ye, br);
  else if (c.weights != QuantType::f16)
    kernel.record_quant(*pr.prog, c.weights, a.range(xo, xb), a.range(wo, wb), ry, lp, res, ye, br);
  else if (c.variant < 0)
    kernel.record(*pr.prog, a.range(xo, xb), a.range(wo, wb), ry, lp, res, ye, br);
  else
    kernel.record_variant(*pr.prog, uint32_t(c.variant), a.range(xo, xb), a.range(wo, wb), ry, lp, res, ye, br);
  kernel.force_row_scalar_for_testing(false);
  kernel.limit_workgroups_for_testing(0, 0);

  const LinearTiles t = int8                          ? kernel.candidates()[kLinearRegVariant]
                        : c.variant >= 0              ? kernel.candidates()[size_t(c.variant)]
                        : c.weights != QuantType::f16 ? choose_quant_linear_tiles(dev.caps(), c.rows, c.in, c.out)
                                                      : choose_linear_tiles(dev.caps(), c.rows, c.in, c.out, f16);
  pr.detail = t.coop ? strf("coopmat %ux%ux%u wg=%u nsg=%u bm=%u bn=%u bk=%u variant=%u", t.cm, t.cn, t.ck, t.wg, t.nsg,
                            t.bm, t.bn, t.bk, t.variant)
                     : strf("%s wg=%u bm=%u bn=%u bk=%u ku=%u rm=%u rn=%u variant=%u",
                            t.vec   ? "vec"
                            : t.reg ? "reg"
                                    : "mm",
                            t.wg, t.bm, t.bn, t.bk, t.ku, t.rm, t.rn, t.variant);
  if (c.weights != QuantType::f16)
    pr.detail += std::string(" ") + quant_type_name(c.weights) + (int8 ? " int8_dot" : " dequant");
  Buffer* buf = a.buf.get();
  const bool in_place = c.residual == Residual::in_place;
  const uint32_t rows = c.rows, out = c.out;
  pr.reset = [=] {
    // Poison y; in place, y starts as r except in the stride padding, which stays poisoned.
    buf->fill(yo, yb, kPoison);
    if (in_place)
      for (uint32_t i = 0; i < rows; ++i)
        buf->upload(yo + size_t(i) * ys * yes, rbytes.data() + size_t(i) * ys * yes, size_t(out) * yes);
  };
  pr.out_off = yo, pr.out_bytes = yb;
  pr.extract = [=](const std::vector<uint8_t>& b, size_t& pad) {
    std::vector<float> got(size_t(rows) * out);
    for (uint32_t i = 0; i < rows; ++i) {
      for (uint32_t n = 0; n < out; ++n) got[size_t(i) * out + n] = value_at(b, size_t(i) * ys + n, yes);
      for (uint32_t n = out; n < ys; ++n) pad += !poisoned(b, size_t(i) * ys + n, yes);
    }
    return got;
  };
  pr.bytes =
      uint64_t(c.rows) * c.in * es + wb + uint64_t(c.rows) * c.out * yes * (c.residual == Residual::none ? 1 : 2) + bb;
  pr.flops = 2.0 * c.rows * c.in * c.out;
}

namespace {

constexpr Residual kNone = Residual::none, kSep = Residual::separate, kInPlace = Residual::in_place;

LinearCaseParams lin(uint32_t rows, uint32_t in, uint32_t out, uint32_t xp, uint32_t yp, Residual r, bool y32 = false) {
  LinearCaseParams c;
  c.rows = rows, c.in = in, c.out = out, c.x_pad = xp, c.y_pad = yp, c.residual = r, c.y_f32 = y32;
  return c;
}

}  // namespace

// The conformance list: odd shapes, padded strides, every residual form, float32 y, crossed with each quirk.
OpCases linear_cases(OpMode mode) {
  CaseTable<LinearCase> b(5000);
  using P = LinearCaseParams;
  if (mode == OpMode::bench) {
    b.add(lin(1, 2048, 2048, 0, 0, kNone));
    b.add(lin(8, 2048, 2048, 0, 0, kNone));
    b.add(lin(64, 2048, 2048, 0, 0, kInPlace, true));
    b.add(lin(64, 2048, 5632, 0, 0, kNone));
    b.add(lin(128, 768, 2304, 0, 0, kNone));
    b.add(lin(512, 2048, 2048, 0, 0, kNone));
    for (QuantType q : {QuantType::q8_0, QuantType::q4_0}) {  // quantized weights, dequantized in registers
      P m = lin(512, 2048, 2048, 0, 0, kNone);
      m.weights = q;
      b.add(m);
    }
    // The int8 dot-product matmul beside the dequantizing one (skipped without the feature).
    for (QuantType q : {QuantType::q8_0, QuantType::q4_0})
      for (const P& s :
           {lin(64, 2048, 2048, 0, 0, kNone), lin(128, 2048, 2048, 0, 0, kNone), lin(64, 5632, 2048, 0, 0, kNone)})
        for (bool i8 : {false, true}) {
          P m = s;
          m.weights = q, m.int8_dot = i8;
          b.add(m);
        }
    return b.take();
  }
  // Odd shapes, padded strides, every residual form; float32 y / residual on every path
  // (<= 8 rows: matrix-vector; more: both tiles).
  const P shapes[] = {
      lin(1, 16, 8, 0, 0, kNone),
      lin(1, 136, 200, 3, 1, kSep),
      lin(2, 40, 24, 0, 0, kInPlace),
      lin(2, 64, 8, 5, 0, kNone),
      lin(5, 64, 72, 0, 3, kSep),
      lin(5, 40, 200, 0, 0, kNone),
      lin(8, 136, 200, 0, 0, kInPlace),
      lin(8, 16, 72, 2, 2, kSep),
      lin(9, 16, 8, 0, 0, kSep),
      lin(9, 136, 72, 3, 0, kNone),
      lin(33, 40, 24, 0, 5, kInPlace),
      lin(33, 64, 200, 0, 0, kNone),
      lin(33, 136, 24, 1, 1, kSep),
      lin(130, 136, 200, 0, 0, kSep),
      lin(130, 16, 8, 0, 0, kNone),
      lin(130, 64, 72, 7, 0, kInPlace),
      lin(130, 40, 24, 0, 0, kNone),
      lin(17, 48, 37, 0, 0, kSep),
      lin(65, 24, 101, 0, 2, kNone),
      lin(70, 37, 40, 1, 0, kSep),
      lin(1, 64, 72, 0, 0, kInPlace, true),
      lin(5, 40, 24, 0, 3, kSep, true),
      lin(33, 136, 72, 1, 0, kInPlace, true),
      lin(130, 64, 200, 0, 2, kSep, true),
      lin(17, 48, 37, 0, 0, kNone, true),
  };
  // The kernel's own path choice.
  for (const P& s : shapes) b.add(s);
  // The matrix-vector path (candidate 0) with the shared-memory tree reduction.
  for (P s : shapes)
    if (s.rows <= kLinearVecMaxRows) {
      s.variant = 0, s.subgroup = false;
      b.add(s);
    }
  // Every tile variant (LinearKernel has 4 candidates on every device: tests/ops/test_linear.cpp checks it),
  // including small row counts through the matrix-matrix shader and a shape spanning several large tiles.
  const P spread[] = {lin(1, 40, 72, 0, 0, kSep), lin(8, 64, 24, 2, 0, kNone), lin(9, 136, 8, 0, 0, kInPlace),
                      lin(130, 40, 200, 0, 1, kNone), lin(200, 64, 140, 3, 0, kSep)};
  for (int v = 0; v < 4; ++v)
    for (P s : spread)
      if (v != 0 || s.rows <= kLinearVecMaxRows) {
        s.variant = v;
        b.add(s);
      }
  // The matrix-matrix tiles with the 4-wide loads turned off.
  for (int v = 1; v < 4; ++v)
    for (P s : shapes)
      if (s.rows > kLinearVecMaxRows) {
        s.variant = v, s.scalar_loads = true;
        b.add(s);
      }
  // Grid-stride loops: workgroup counts capped below the device limit, one case per candidate.
  const P capped[] = {lin(3, 40, 72, 0, 0, kSep), lin(130, 40, 200, 0, 0, kNone), lin(100, 24, 72, 1, 2, kInPlace),
                      lin(100, 40, 200, 0, 0, kSep)};
  for (int v = 0; v < 4; ++v) {
    P s = capped[v];
    s.variant = v, s.wg_limit_x = 2, s.wg_limit_y = 1;
    b.add(s);
  }
  // Quantized weights (record_quant: the register-tiled shader with WQ): in = 32·k (k odd too), odd row and
  // column counts, padded strides, every residual form, float32 y, elementwise loads (x misaligned by its
  // stride), a capped grid and a long reduction.
  for (QuantType q : {QuantType::q8_0, QuantType::q4_0}) {
    const P qs[] = {lin(1, 32, 8, 0, 0, kNone),     lin(5, 96, 37, 0, 3, kSep),    lin(17, 160, 72, 8, 0, kInPlace),
                    lin(33, 64, 200, 3, 1, kNone),  lin(130, 224, 24, 0, 0, kSep), lin(65, 352, 101, 0, 2, kNone, true),
                    lin(20, 16384, 24, 0, 0, kNone)};
    for (P s : qs) {
      s.weights = q;
      b.add(s);
    }
    P g = lin(100, 96, 200, 0, 0, kSep);
    g.weights = q, g.wg_limit_x = 2, g.wg_limit_y = 1;
    b.add(g);
    P e = lin(33, 64, 72, 0, 0, kNone);
    e.weights = q, e.scalar_loads = true;
    b.add(e);
  }
  // A long reduction (in = 16384) on every path: llvmpipe's loop-iteration budget (quirk loop_iteration_limit)
  // would silently truncate a reduction that needed more iterations per invocation.
  for (int v = 0; v < 4; ++v) {
    P s = lin(v == 0 ? 3 : 20, 16384, 24, 0, 0, kNone);
    s.variant = v;
    b.add(s);
  }
  // Cooperative matrices (fp16 only; skipped on devices without a usable shape): partial tiles on every side
  // (rows, out and in not multiples of the matrix or tile sizes), padded strides, every residual form, float32
  // y, elementwise loads, a capped grid, a long reduction. Seeds come after every other case's, so adding
  // these changed none of them.
  {
    const P cs[] = {lin(1, 40, 72, 0, 0, kSep),          lin(17, 48, 37, 0, 0, kSep),
                    lin(33, 136, 24, 1, 1, kSep),        lin(70, 37, 40, 1, 0, kSep),
                    lin(130, 64, 200, 0, 2, kSep, true), lin(65, 24, 101, 0, 2, kInPlace),
                    lin(200, 64, 140, 3, 0, kNone),      lin(130, 136, 72, 7, 0, kInPlace, true)};
    for (P s : cs) {
      s.variant = int(kLinearCoopVariant);
      b.add_fp16(s);
    }
    P e = lin(33, 64, 72, 0, 0, kNone);
    e.variant = int(kLinearCoopVariant), e.scalar_loads = true;
    b.add_fp16(e);
    P g = lin(100, 40, 200, 0, 0, kSep);
    g.variant = int(kLinearCoopVariant), g.wg_limit_x = 2, g.wg_limit_y = 1;
    b.add_fp16(g);
    P l = lin(20, 16384, 24, 0, 0, kNone);
    l.variant = int(kLinearCoopVariant);
    b.add_fp16(l);
  }
  // Quantized weights through the shared-memory tiles (linear.comp with WQ: W dequantized on the way into
  // shared memory; the GPU prefill path), on every device by variant: partial tiles, padded strides, float32
  // y, a long reduction, elementwise x loads (variant 1) and a capped grid (variant 2).
  for (QuantType q : {QuantType::q8_0, QuantType::q4_0})
    for (int v = 1; v <= 2; ++v) {
      const P qs[] = {lin(33, 64, 200, 3, 1, kNone), lin(130, 224, 24, 0, 0, kSep),
                      lin(65, 352, 101, 0, 2, kInPlace, true), lin(20, 16384, 24, 0, 0, kNone)};
      for (P c : qs) {
        c.weights = q, c.variant = v;
        b.add(c);
      }
      P e = lin(33, 96, 72, 0, 0, kSep);
      e.weights = q, e.variant = v;
      if (v == 1)
        e.scalar_loads = true;
      else
        e.wg_limit_x = 2, e.wg_limit_y = 1;
      b.add(e);
    }
  // The int8 dot-product matmul (record_quant_path int8_dot, linear_reg_dot.comp; skipped without
  // shaderIntegerDotProduct), against the reference on the dequantized weights and the int8-rounded
  // activations: 2..70 rows (past one 16-row tile), in = 32·k not a multiple of 256, odd out, padded strides
  // (elementwise x loads), every residual form, float32 y, a capped grid and a long reduction. Seeds after
  // every other case's.
  for (QuantType q : {QuantType::q8_0, QuantType::q4_0}) {
    const P qs[] = {lin(2, 32, 8, 0, 0, kNone),        lin(5, 96, 37, 0, 3, kSep),
                    lin(17, 160, 72, 8, 0, kInPlace),  lin(33, 64, 200, 3, 1, kNone),
                    lin(70, 224, 41, 0, 0, kSep),      lin(65, 352, 101, 0, 2, kInPlace, true),
                    lin(3, 480, 23, 0, 0, kSep, true), lin(20, 16384, 24, 0, 0, kNone)};
    for (P s : qs) {
      s.weights = q, s.int8_dot = true;
      b.add(s);
    }
    P g = lin(100, 96, 200, 0, 0, kSep);
    g.weights = q, g.int8_dot = true, g.wg_limit_x = 2, g.wg_limit_y = 1;
    b.add(g);
    P e = lin(33, 64, 72, 0, 0, kNone);
    e.weights = q, e.int8_dot = true, e.scalar_loads = true;
    b.add(e);
    P n = lin(40, 96, 72, 0, 0, kSep);  // a kernel built without subgroup operations (the register tile unpinned)
    n.weights = q, n.int8_dot = true, n.subgroup = false;
    b.add(n);
  }
  // A float32 bias (y = x·Wᵀ + b (+ r)): a few cases per path and weight type, not a cross product; every
  // residual form and float32 y among them. Seeds after every other case's.
  {
    auto biased = [](P s, int variant, QuantType q = QuantType::f16, bool i8 = false) {
      s.bias = true, s.variant = variant, s.weights = q, s.int8_dot = i8;
      return s;
    };
    const QuantType q8 = QuantType::q8_0, q4 = QuantType::q4_0;
    const P bs[] = {biased(lin(1, 136, 200, 3, 1, kNone), -1),  // the matrix-vector path
                    biased(lin(5, 40, 72, 0, 3, kInPlace, true), 0),
                    biased(lin(33, 64, 37, 1, 0, kSep), -1),  // the device's tile (the register tile on CPU drivers)
                    biased(lin(70, 40, 101, 0, 2, kNone, true), 1),
                    biased(lin(130, 136, 24, 0, 0, kInPlace), 2),
                    biased(lin(17, 96, 37, 0, 3, kSep), -1, q8),  // record_quant's choice
                    biased(lin(65, 160, 72, 8, 0, kInPlace, true), -1, q4),
                    biased(lin(33, 64, 101, 0, 0, kNone), 1, q8),  // the shared-memory tiles dequantizing W
                    biased(lin(40, 96, 24, 3, 1, kSep), 2, q4),
                    biased(lin(17, 96, 37, 0, 0, kSep), -1, q8, true),  // int8 dot products (skipped without)
                    biased(lin(33, 64, 72, 0, 2, kNone, true), -1, q4, true)};
    for (const P& s : bs) b.add(s);
    b.add_fp16(biased(lin(70, 37, 40, 1, 0, kSep), int(kLinearCoopVariant)));
    b.add_fp16(biased(lin(130, 64, 200, 0, 2, kInPlace, true), int(kLinearCoopVariant)));
  }
  // Quantized weights through the matrix-vector shader (linear_vec.comp with WQ: 2-8 rows on GPUs, each weight
  // dequantized once for every row), on every device by variant: 1-8 rows, in = 32·k, odd out, padded strides
  // (elementwise x loads), every residual form, float32 y, a bias, the shared-memory reduction, a capped grid and a
  // long reduction. Seeds after every other case's.
  for (QuantType q : {QuantType::q8_0, QuantType::q4_0}) {
    const P qs[] = {lin(2, 32, 8, 0, 0, kNone), lin(5, 96, 37, 0, 3, kSep), lin(8, 160, 72, 8, 0, kInPlace),
                    lin(3, 64, 200, 3, 1, kNone, true), lin(8, 16384, 24, 0, 0, kNone)};
    for (P s : qs) {
      s.weights = q, s.variant = 0;
      b.add(s);
    }
    P n = lin(7, 96, 41, 0, 0, kSep);
    n.weights = q, n.variant = 0, n.subgroup = false;
    b.add(n);
    P g = lin(4, 64, 200, 0, 0, kNone);
    g.weights = q, g.variant = 0, g.wg_limit_x = 2, g.wg_limit_y = 1;
    b.add(g);
    P bi = lin(6, 96, 37, 0, 2, kInPlace, true);
    bi.weights = q, bi.variant = 0, bi.bias = true;
    b.add(bi);
  }
  return b.take();
}

OpCases matmul_table_cases(bool full, bool coopmat) {
  CaseTable<LinearCase> b(7000);
  if (!full) {
    b.add(lin(512, 2048, 2048, 0, 0, kNone));
    if (coopmat) {  // the cooperative-matrix kernel beside the tuning's choice (fp16 only)
      LinearCaseParams c = lin(512, 2048, 2048, 0, 0, kNone);
      c.variant = int(kLinearCoopVariant);
      b.add_fp16(c);
    }
    return b.take();
  }
  const uint32_t kn[][2] = {{768, 768}, {768, 2304}, {2048, 768}, {2048, 2048}, {4096, 4096}};
  for (QuantType q : {QuantType::f16, QuantType::q8_0, QuantType::q4_0})
    for (const auto& s : kn)
      for (uint32_t m : {1u, 8u, 64u, 512u}) {
        LinearCaseParams c = lin(m, s[0], s[1], 0, 0, kNone);
        c.weights = q;
        b.add(c);
      }
  // The cooperative-matrix kernel at the f16 shapes past one register tile of rows (its weights are f16 only).
  if (coopmat)
    for (const auto& s : kn)
      for (uint32_t m : {64u, 512u}) {
        LinearCaseParams c = lin(m, s[0], s[1], 0, 0, kNone);
        c.variant = int(kLinearCoopVariant);
        b.add_fp16(c);
      }
  return b.take();
}

}  // namespace diffvk::bench
