// diffvk_bench: the linear_row op's cases (one row, in -> out, with the fused prologues: none, rmsnorm,
// silu_mul; f16 weights through LinearKernel::record_row, q8_0 / q4_0 through QuantRowKernel), its table, its
// float64 reference and its record call.
#include "bench/cases/linear.hpp"

namespace diffvk::bench {

using namespace op_detail;

struct LinearRowCaseParams {
  uint32_t in = 0, out = 0;  // x holds 2·in values for the silu_mul prologue
  RowPrologue pro = RowPrologue::none;
  Residual residual = Residual::none;
  bool x_f32 = false, y_f32 = false;   // Elem::f32 x / y (the model's residual stream / logits)
  QuantType weights = QuantType::f16;  // q8_0 / q4_0: QuantRowKernel, against the dequantized weights
  bool int8_dot = false;  // the int8 dot-product path (QuantRowPath::int8_dot); skipped without the feature
  bool bias = false;      // a float32 bias, added before the residual
  // ---- device quirks
  bool subgroup = true;                     // false: the shared-memory reduction even where subgroup arithmetic exists
  bool scalar_loads = false;                // never the 16-byte vector loads
  uint32_t wg_limit_x = 0, wg_limit_y = 0;  // capped workgroup counts (grid-stride loops); 0 = the device's
  bool x_misaligned = false;                // x at the device's offset alignment when that is < 16 bytes
  uint32_t row_lanes = 0;                   // forced lanes per lane group (row_lanes clamps it); 0 = the kernel's
};

class LinearRowCase final : public CaseOf<LinearRowCase, LinearRowCaseParams> {
 public:
  const char* op() const override { return "linear_row"; }
  bool subgroup() const override { return p.subgroup; }
  bool forced_lanes() const override { return p.row_lanes != 0; }
  RowShape row_shape() const override { return {1, p.in, p.out}; }

  std::string describe() const override {
    const char* pro = p.pro == RowPrologue::none ? "" : p.pro == RowPrologue::rmsnorm ? " rmsnorm" : " silu_mul";
    std::string s = precision_prefix(fp16) + strf("%u->%u%s", p.in, p.out, pro);
    if (p.weights != QuantType::f16) s += std::string(" ") + quant_type_name(p.weights);
    if (p.int8_dot) s += " int8-dot";
    if (p.bias) s += " +b";
    s += residual_name(p.residual);
    if (p.x_f32) s += " x32";
    if (p.y_f32) s += " y32";
    if (!p.subgroup) s += " shared-reduction";
    if (p.scalar_loads) s += " scalar-loads";
    s += wg_limit_name(p.wg_limit_x, p.wg_limit_y);
    if (p.x_misaligned) s += " x-misaligned";
    if (p.row_lanes) s += strf(" lanes=%u", p.row_lanes);
    return s;
  }

  std::string skip_reason(const Device& dev) const override {
    if (p.int8_dot && !dev.caps().integer_dot_product)
      return "the device has no shaderIntegerDotProduct: no int8 dot-product path";
    if (p.x_misaligned && dev.caps().min_storage_buffer_offset_alignment >= 16)
      return "the device's storage offset alignment is >= 16 bytes: no misaligned binding exists";
    return {};
  }

  void prepare(Device& dev, KernelCache& kernels, bool sg, Prepared& pr) const override {
    LinearKernel& kernel = linear_kernel(dev, kernels, sg);
    QuantRowKernel& qk = quant_row_kernel(dev, kernels, sg, p.int8_dot);
    const LinearRowCaseParams& c = p;
    const bool f16 = dev.fp16(), x32 = c.x_f32, y32 = c.y_f32;
    std::mt19937_64 rng(seed);
    const bool silu = c.pro == RowPrologue::silu_mul;
    const double xk = x32 ? 1e5 : 1.0, rk = y32 ? 1e5 : 1.0;  // float32 x / residual beyond fp16's 65504
    const uint32_t xn = silu ? 2 * c.in : c.in;
    auto x = uniform(rng, xn, (silu ? -4.0 : -3.0) * xk, 3.0 * xk);
    x = x32 ? ref::round_to_f32(x) : rounded(x, f16);
    const double ws = 1.7 / std::sqrt(double(c.in));
    auto w = rounded(uniform(rng, size_t(c.out) * c.in, -ws, ws), f16);
    const auto wbytes = weight_bytes(c.weights, c.in, c.out, f16, w);
    const auto g = rounded(uniform(rng, c.in, 0.5, 1.5), f16);
    auto r = uniform(rng, c.out, -2.0 * rk, 2.0 * rk);
    r = y32 ? ref::round_to_f32(r) : rounded(r, f16);
    const double eps = 1e-5;
    std::vector<double> act(c.in);
    double ss = 0;
    for (uint32_t k = 0; k < c.in; ++k) ss += x[k] * x[k];
    const double inv = 1.0 / std::sqrt(ss / c.in + eps);
    for (uint32_t k = 0; k < c.in; ++k)
      act[k] = c.pro == RowPrologue::none      ? x[k]
               : c.pro == RowPrologue::rmsnorm ? x[k] * inv * g[k]
                                               : x[k] / (1.0 + std::exp(-x[k])) * x[c.in + k];
    std::vector<double> ties(c.int8_dot ? act.size() : 0);
    if (c.int8_dot) int8_round_blocks(act, 0, c.in, &ties);  // the kernel's int8 activations
    pr.expect = ref::linear(act, 1, int(c.in), w, int(c.out));
    // The bias: drawn after every other input, so that the unbiased cases keep their values.
    const auto bias = c.bias ? ref::round_to_f32(uniform(rng, c.out, -1, 1)) : std::vector<double>{};
    for (size_t n = 0; n < bias.size(); ++n) pr.expect[n] += bias[n];
    if (c.residual != Residual::none)
      for (uint32_t n = 0; n < c.out; ++n) pr.expect[n] += r[n];
    if (c.int8_dot) pr.tolerance = int8_tie_factor(ties, 1, c.in, w, c.out, pr.expect, f16);

    const size_t es = storage_bytes(f16), xes = x32 ? 4 : es, yes = y32 ? 4 : es;
    const VkDeviceSize xb = x.size() * xes, wb = wbytes.size(), gb = g.size() * es, yb = r.size() * yes;
    Arena& a = pr.arena;
    // x at an offset that is a multiple of the device alignment but not of 16 bytes (x_misaligned).
    const VkDeviceSize xo = a.take(xb, c.x_misaligned ? dev.caps().min_storage_buffer_offset_alignment : 0);
    const VkDeviceSize wo = a.take(wb), go = a.take(gb), yo = a.take(yb), ro = a.take(yb);
    const VkDeviceSize bb = bias.size() * 4, bo = c.bias ? a.take(bb) : 0;
    a.create(dev, "op case linear_row");
    if (c.bias) a.buf->upload(bo, pack(bias, false).data(), bb);
    const BufferRange br = c.bias ? a.range(bo, bb) : BufferRange{};
    const auto rbytes = pack(r, f16 && !y32);
    a.buf->upload(xo, pack(x, f16 && !x32).data(), xb);
    a.buf->upload(wo, wbytes.data(), wb);
    a.buf->upload(go, pack(g, f16).data(), gb);
    a.buf->upload(ro, rbytes.data(), yb);

    // The kernels' test hooks for this case (undone after the recording).
    kernel.force_row_scalar_for_testing(c.scalar_loads);
    kernel.limit_workgroups_for_testing(c.wg_limit_x, c.wg_limit_y);
    kernel.force_row_lanes_for_testing(c.row_lanes);
    pr.prog = std::make_unique<Program>(dev, "op case linear_row", pr.timestamps);
    const BufferRange ry = a.range(yo, yb);
    const BufferRange res = c.residual == Residual::none       ? BufferRange{}
                            : c.residual == Residual::separate ? a.range(ro, yb)
                                                               : ry;
    LinearRowParams lp;
    lp.in = c.in;
    lp.out = c.out;
    lp.pro = c.pro;
    lp.eps = float(eps);
    lp.x_elem = x32 ? Elem::f32 : Elem::storage;
    lp.y_elem = y32 ? Elem::f32 : Elem::storage;
    const BufferRange nw = c.pro == RowPrologue::rmsnorm ? a.range(go, gb) : BufferRange{};
    if (c.weights == QuantType::f16) {
      kernel.record_row(*pr.prog, a.range(xo, xb), a.range(wo, wb), ry, lp, res, nw, br);
    } else {
      qk.limit_workgroups_for_testing(c.wg_limit_x);
      qk.force_row_lanes_for_testing(c.row_lanes);
      qk.record(*pr.prog, c.weights, a.range(xo, xb), a.range(wo, wb), ry, lp, res, nw, br);
      qk.limit_workgroups_for_testing(0);
    }
    const uint32_t lanes = c.weights == QuantType::f16 ? kernel.row_lanes_for(c.in) : qk.lanes_for(c.weights, c.in);
    qk.force_row_lanes_for_testing(0);
    kernel.force_row_scalar_for_testing(false);
    kernel.limit_workgroups_for_testing(0, 0);
    kernel.force_row_lanes_for_testing(0);
    pr.detail = strf("wg=%u nf=%u lanes=%u x_offset=%llu %s%s", kernel.row_workgroup_size(), kernel.row_features(),
                     lanes, (unsigned long long)xo, quant_type_name(c.weights),
                     c.weights == QuantType::f16 ? ""
                     : c.int8_dot                ? " int8_dot"
                                                 : " dequant");
    Buffer* buf = a.buf.get();
    const bool in_place = c.residual == Residual::in_place;
    const uint32_t out = c.out;
    pr.reset = [=] {
      buf->fill(yo, yb, kPoison);
      if (in_place) buf->upload(yo, rbytes.data(), yb);
    };
    pr.out_off = yo, pr.out_bytes = yb;
    pr.extract = [=](const std::vector<uint8_t>& b, size_t&) {
      std::vector<float> got(out);
      for (uint32_t n = 0; n < out; ++n) got[n] = value_at(b, n, yes);
      return got;
    };
    pr.bytes = xn * xes + wb + (c.pro == RowPrologue::rmsnorm ? c.in * es : 0) +
               uint64_t(c.out) * yes * (c.residual == Residual::none ? 1 : 2) + bb;
    pr.flops = 2.0 * c.in * c.out;
  }
};

namespace {

constexpr Residual kNone = Residual::none, kSep = Residual::separate, kInPlace = Residual::in_place;

LinearRowCaseParams row(uint32_t in, uint32_t out, RowPrologue p, Residual r, bool x32 = false, bool y32 = false) {
  LinearRowCaseParams c;
  c.in = in, c.out = out, c.pro = p, c.residual = r, c.x_f32 = x32, c.y_f32 = y32;
  return c;
}

}  // namespace

OpCases linear_row_cases(OpMode mode) {
  CaseTable<LinearRowCase> b(9100);
  using P = LinearRowCaseParams;
  const RowPrologue none = RowPrologue::none, rms = RowPrologue::rmsnorm, silu = RowPrologue::silu_mul;
  if (mode == OpMode::bench) {
    b.add(row(2048, 2048, rms, kNone, true, false));
    b.add(row(2048, 11264, rms, kNone, true, false));
    b.add(row(5632, 2048, silu, kInPlace, false, true));
    b.add(row(2048, 32000, rms, kNone, true, true));
    for (QuantType q : {QuantType::q8_0, QuantType::q4_0})  // the same shapes over quantized weights
      for (bool i8 : {false, true}) {  // dequantizing in registers, then int8 dot products (where the device has them)
        P a = row(2048, 11264, rms, kNone, true, false), d = row(5632, 2048, silu, kInPlace, false, true);
        a.weights = d.weights = q;
        a.int8_dot = d.int8_dot = i8;
        b.add(a);
        b.add(d);
      }
    return b.take();
  }
  const P shapes[] = {
      row(16, 8, none, kNone),
      row(256, 200, none, kSep),
      row(40, 24, none, kInPlace),
      row(64, 1, none, kNone),
      row(136, 13, rms, kNone),
      row(256, 832, rms, kNone),
      row(24, 71, rms, kSep),
      row(7, 9, none, kSep),
      row(13, 5, rms, kNone),
      row(704, 256, silu, kInPlace),
      row(88, 41, silu, kNone),
      row(9, 17, silu, kSep),
      row(256, 256, rms, kInPlace),
      row(1000, 3, none, kNone),
      // float32 x (the residual stream under the norm) and float32 y + residual (the residual add, logits)
      row(256, 200, rms, kSep, true, true),
      row(136, 13, rms, kNone, true, false),
      row(40, 24, none, kInPlace, false, true),
      row(704, 256, silu, kInPlace, false, true),
      row(13, 5, none, kSep, true, true),
  };
  for (bool subgroup : {true, false}) {
    for (P s : shapes)
      for (bool scalar : {false, true}) {
        s.subgroup = subgroup, s.scalar_loads = scalar;
        b.add(s);
      }
    // A grid-stride over the feature groups (fewer workgroups than groups).
    for (P s : {row(256, 200, rms, kSep), row(45, 77, silu, kInPlace)}) {
      s.subgroup = subgroup, s.wg_limit_x = 3, s.wg_limit_y = 1;
      b.add(s);
    }
    // x not 16-byte aligned: the kernel must fall back to elementwise loads by itself.
    P m = row(256, 24, none, kNone);
    m.subgroup = subgroup, m.x_misaligned = true;
    b.add(m);
  }
  // Quantized weights: in = 32·k with k odd, out not a multiple of 8 (the last feature group is
  // partial), every prologue and residual form, float32 x / y, both reductions, a capped grid.
  const P qshapes[] = {
      row(32, 5, none, kNone),
      row(96, 13, none, kSep),
      row(160, 37, none, kInPlace),
      row(224, 71, rms, kNone),
      row(96, 13, rms, kSep),
      row(352, 9, rms, kInPlace),
      row(96, 21, silu, kNone),
      row(160, 13, silu, kInPlace),
      row(32, 3, silu, kSep),
      row(224, 37, rms, kSep, true, true),
      row(96, 13, none, kInPlace, false, true),
      row(160, 11, silu, kInPlace, false, true),
  };
  // Each twice: dequantizing in registers, and the int8 dot-product path (skipped without the feature).
  for (QuantType q : {QuantType::q8_0, QuantType::q4_0})
    for (bool i8 : {false, true}) {
      for (bool subgroup : {true, false})
        for (P s : qshapes) {
          s.weights = q, s.subgroup = subgroup, s.int8_dot = i8;
          b.add(s);
        }
      P g = row(96, 77, rms, kSep);
      g.weights = q, g.wg_limit_x = 3, g.int8_dot = i8;
      b.add(g);
      P m = row(96, 13, rms, kNone);  // x misaligned: the elementwise-load variant (devices with alignment < 16)
      m.weights = q, m.x_misaligned = true, m.int8_dot = i8;
      b.add(m);
      P l = row(16384, 13, rms, kSep);  // a long reduction
      l.weights = q, l.int8_dot = i8;
      b.add(l);
    }
  // Lane groups (a workgroup split into groups of LG lanes, each on consecutive features),
  // forced on devices whose choice is one group (CPU drivers): odd out, widths with fewer load steps than
  // lanes, every prologue, float32 x / y, both reductions, scalar loads, a capped grid, quantized rows.
  const P lshapes[] = {
      row(16, 13, none, kNone),
      row(24, 37, rms, kSep),
      row(40, 9, silu, kInPlace),
      row(256, 21, rms, kSep, true, true),
      row(64, 71, none, kInPlace, false, true),
      row(200, 5, silu, kSep),
  };
  for (uint32_t lanes : {1u, 2u, 4u})
    for (bool subgroup : {true, false}) {
      for (P s : lshapes) {
        s.row_lanes = lanes, s.subgroup = subgroup;
        b.add(s);
      }
      P sc = row(24, 19, rms, kSep);
      sc.row_lanes = lanes, sc.subgroup = subgroup, sc.scalar_loads = true;
      b.add(sc);
      P g = row(48, 77, silu, kSep);
      g.row_lanes = lanes, g.subgroup = subgroup, g.wg_limit_x = 3, g.wg_limit_y = 1;
      b.add(g);
      for (QuantType q : {QuantType::q8_0, QuantType::q4_0})
        for (bool i8 : {false, true})
          for (P s : {row(96, 13, rms, kSep), row(64, 37, silu, kInPlace, false, true), row(32, 5, none, kNone)}) {
            s.row_lanes = lanes, s.subgroup = subgroup, s.weights = q, s.int8_dot = i8;
            b.add(s);
          }
    }
  // in = 16384: loop iterations per invocation stay within llvmpipe's budget (quirk loop_iteration_limit).
  b.add(row(16384, 24, rms, kSep));
  P l = row(16384, 24, none, kNone);
  l.scalar_loads = true;
  b.add(l);
  // A float32 bias (Phi-4-mini-flash's biased linears in decode): a few cases per weight type and path, with
  // every prologue and residual form, float32 x / y and the shared-memory reduction among them (not a cross
  // product). Seeds after every other case's.
  auto biased = [](P s, QuantType q = QuantType::f16, bool i8 = false, bool sg = true) {
    s.bias = true, s.weights = q, s.int8_dot = i8, s.subgroup = sg;
    return s;
  };
  const QuantType q8 = QuantType::q8_0, q4 = QuantType::q4_0;
  for (const P& s :
       {biased(row(256, 200, none, kNone)), biased(row(136, 13, rms, kSep, true, true)),
        biased(row(88, 41, silu, kInPlace), QuantType::f16, false, false),
        biased(row(7, 9, none, kInPlace, false, true)), biased(row(96, 13, rms, kNone), q8),
        biased(row(160, 37, none, kInPlace, false, true), q4), biased(row(224, 71, silu, kSep), q4, false, false),
        biased(row(96, 21, rms, kSep, true, true), q8, true), biased(row(160, 13, none, kNone), q4, true)})
    b.add(s);
  return b.take();
}

}  // namespace diffvk::bench
