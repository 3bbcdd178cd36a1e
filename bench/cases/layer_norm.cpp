// diffvk_bench: the layer_norm op's cases (LayerNorm with bias over rows of width E, Phi-4-mini-flash's norms),
// its table, its float64 reference (ref::layer_norm) and its record call.
#include "bench/op_run_impl.hpp"
#include "ops/layer_norm.hpp"
#include "reference/ssm_ref.hpp"

namespace diffvk::bench {

using namespace op_detail;

struct LayerNormCaseParams {
  uint32_t rows = 1, E = 0;
  uint32_t x_pad = 0, y_pad = 0;  // row strides E + pad (elements)
  double mean = 0;                // inputs mean + U(-1, 1) (float32 x: times 3e5 when mean is 0, beyond fp16)
  bool bias = true;
  bool x_f32 = false;    // Elem::f32 x (the model's residual stream)
  bool subgroup = true;  // false: the shared-memory reduction even where subgroup arithmetic exists
  uint32_t wg_limit = 0;
};

class LayerNormCase final : public CaseOf<LayerNormCase, LayerNormCaseParams> {
 public:
  const char* op() const override { return "layer_norm"; }
  bool subgroup() const override { return p.subgroup; }
  RowShape row_shape() const override { return {p.rows, p.E, p.E}; }

  std::string describe() const override {
    std::string s = precision_prefix(fp16) + strf("rows=%u E=%u", p.rows, p.E);
    if (p.x_pad || p.y_pad) s += strf(" pad=%u/%u", p.x_pad, p.y_pad);
    if (p.mean != 0) s += strf(" mean=%g", p.mean);
    if (!p.bias) s += " no-bias";
    if (p.x_f32) s += " x32";
    if (!p.subgroup) s += " shared-reduction";
    return s + wg_limit_name(p.wg_limit, 0);
  }

  void prepare(Device& dev, KernelCache& kernels, bool sg, Prepared& pr) const override {
    LayerNormKernel& kernel = kernels.get<LayerNormKernel>(sg ? "layer_norm subgroup" : "layer_norm shared", [&] {
      return std::make_unique<LayerNormKernel>(dev, options_for(dev, sg));
    });
    const bool f16 = dev.fp16(), x32 = p.x_f32;
    const uint32_t E = p.E, xs = E + p.x_pad, ys = E + p.y_pad, rows = p.rows;
    std::mt19937_64 rng(seed);
    const double spread = x32 && p.mean == 0 ? 3e5 : 1.0;
    auto x = uniform(rng, size_t(rows) * E, p.mean - spread, p.mean + spread);
    x = x32 ? ref::round_to_f32(x) : rounded(x, f16);
    const auto w = rounded(uniform(rng, E, 0.5, 1.5), f16);
    const auto b = p.bias ? rounded(uniform(rng, E, -1, 1), f16) : std::vector<double>{};
    pr.expect = ref::layer_norm(x, int(rows), int(E), w, b, 1e-5);

    const size_t es = storage_bytes(f16), xes = x32 ? 4 : es;
    std::vector<double> xpad(size_t(rows) * xs, 0.0);
    for (uint32_t r = 0; r < rows; ++r) std::copy_n(x.begin() + size_t(r) * E, E, xpad.begin() + size_t(r) * xs);
    const VkDeviceSize xb = xpad.size() * xes, wb = E * es, bb = p.bias ? E * es : 0, yb = size_t(rows) * ys * es;
    Arena& a = pr.arena;
    const VkDeviceSize xo = a.take(xb), wo = a.take(wb), bo = a.take(std::max<VkDeviceSize>(bb, 16)), yo = a.take(yb);
    a.create(dev, "op case layer_norm");
    a.buf->upload(xo, pack(xpad, f16 && !x32).data(), xb);
    a.buf->upload(wo, pack(w, f16).data(), wb);
    if (p.bias) a.buf->upload(bo, pack(b, f16).data(), bb);
    pr.prog = std::make_unique<Program>(dev, "op case layer_norm", pr.timestamps);
    kernel.limit_workgroups_for_testing(p.wg_limit);
    LayerNormParams lp;
    lp.rows = rows;
    lp.width = E;
    lp.x_stride = xs;
    lp.y_stride = ys;
    lp.eps = 1e-5f;
    kernel.record(*pr.prog, a.range(xo, xb), a.range(wo, wb), p.bias ? a.range(bo, bb) : BufferRange{}, a.range(yo, yb),
                  lp, x32 ? Elem::f32 : Elem::storage);
    kernel.limit_workgroups_for_testing(0);
    pr.detail = strf("wg=%u", kernel.workgroup_size());
    Buffer* buf = a.buf.get();
    pr.reset = [=] { buf->fill(yo, yb, kPoison); };
    pr.out_off = yo, pr.out_bytes = yb;
    pr.extract = [=](const std::vector<uint8_t>& bytes, size_t& pad) {
      std::vector<float> got(size_t(rows) * E);
      for (uint32_t r = 0; r < rows; ++r) {
        for (uint32_t i = 0; i < E; ++i) got[size_t(r) * E + i] = value_at(bytes, size_t(r) * ys + i, es);
        for (uint32_t i = E; i < ys; ++i) pad += !poisoned(bytes, size_t(r) * ys + i, es);
      }
      return got;
    };
    pr.bytes = uint64_t(rows) * E * (xes + es) + wb + bb;
    pr.flops = 8.0 * double(rows) * E;
  }
};

namespace {
LayerNormCaseParams ln(uint32_t rows, uint32_t E) {
  LayerNormCaseParams c;
  c.rows = rows, c.E = E;
  return c;
}
}  // namespace

OpCases layer_norm_cases(OpMode mode) {
  CaseTable<LayerNormCase> b(4100);
  using P = LayerNormCaseParams;
  if (mode == OpMode::bench) {
    b.add(with(ln(1, 2560), [](P& c) { c.x_f32 = true; }));    // decode: the residual stream's one row
    b.add(with(ln(512, 2560), [](P& c) { c.x_f32 = true; }));  // a prefill chunk
    return b.take();
  }
  // Odd widths, widths below, at and past the workgroup (and not a multiple of it), one row and many,
  // strided rows, a capped grid, no bias, large means (a one-pass E[x²] − E[x]² fails these), float32 x.
  const P shapes[] = {ln(1, 1),
                      ln(1, 2560),
                      ln(3, 37),
                      ln(7, 129),
                      ln(300, 64),
                      with(ln(5, 200), [](P& c) { c.bias = false; }),
                      with(ln(9, 1000), [](P& c) { c.x_pad = 3, c.y_pad = 5; }),
                      with(ln(65, 333), [](P& c) { c.wg_limit = 4; }),
                      with(ln(4, 2560), [](P& c) { c.mean = 300; }),
                      with(ln(2, 517), [](P& c) { c.mean = -1000; })};
  for (bool subgroup : {true, false})
    for (P s : shapes) {
      if (!subgroup && s.rows * s.E < 1000) continue;  // the shared-memory reduction: the larger rows only
      s.subgroup = subgroup;
      b.add(s);
    }
  // Float32 x on either precision: beyond fp16's range, and a large mean at the real width.
  b.add(with(ln(3, 131), [](P& c) { c.x_f32 = true; }));
  b.add(with(ln(2, 2560), [](P& c) { c.x_f32 = true, c.mean = 1e5; }));
  b.add(with(ln(33, 100), [](P& c) { c.x_f32 = true, c.mean = 1e4, c.subgroup = false; }));
  return b.take();
}

}  // namespace diffvk::bench
