// diffvk_bench: the head_rmsnorm op's cases (rows x heads sub-heads of width 2·D, each RMS-normed, scaled by
// w and by 1 - lambda_init), its table, its float64 reference and its record call.
#include "bench/op_run_impl.hpp"
#include "ops/head_rmsnorm.hpp"

namespace diffvk::bench {

using namespace op_detail;

struct HeadRmsNormCaseParams {
  uint32_t rows = 1, heads = 0, D = 0;
  bool x_f32 = false;    // Elem::f32 x (the model's block norms over the residual stream)
  bool subgroup = true;  // false: the shared-memory reduction even where subgroup arithmetic exists
};

class HeadRmsNormCase final : public CaseOf<HeadRmsNormCase, HeadRmsNormCaseParams> {
 public:
  const char* op() const override { return "head_rmsnorm"; }
  bool subgroup() const override { return p.subgroup; }
  RowShape row_shape() const override { return {p.rows, p.heads, p.D}; }

  std::string describe() const override {
    std::string s = precision_prefix(fp16) + strf("rows=%u heads=%u D=%u", p.rows, p.heads, p.D);
    if (p.x_f32) s += " x32";
    if (!p.subgroup) s += " shared-reduction";
    return s;
  }

  void prepare(Device& dev, KernelCache& kernels, bool sg, Prepared& pr) const override {
    const HeadRmsNormKernel& kernel =
        kernels.get<HeadRmsNormKernel>(sg ? "head_rmsnorm subgroup" : "head_rmsnorm shared",
                                       [&] { return std::make_unique<HeadRmsNormKernel>(dev, options_for(dev, sg)); });
    const bool f16 = dev.fp16(), x32 = p.x_f32;
    const uint32_t heads = p.heads, D = p.D, width = 2 * D, stride = heads * width;
    std::mt19937_64 rng(seed);
    auto x =
        uniform(rng, size_t(p.rows) * stride, x32 ? -3e5 : -3.0, x32 ? 3e5 : 3.0);  // float32 x beyond fp16's range
    x = x32 ? ref::round_to_f32(x) : rounded(x, f16);
    const auto w = rounded(uniform(rng, width, 0.5, 1.5), f16);
    const int depth = int(rng() % 24);
    const double lambda_init = ref::lambda_init(depth);
    pr.expect = ref::head_rmsnorm(x, int(p.rows), int(heads), int(D), w, lambda_init);

    const size_t es = storage_bytes(f16);
    const VkDeviceSize xb = x.size() * (x32 ? 4 : es), wb = w.size() * es, yb = x.size() * es;
    Arena& a = pr.arena;
    const VkDeviceSize xo = a.take(xb), wo = a.take(wb), yo = a.take(yb);
    a.create(dev, "op case head_rmsnorm");
    a.buf->upload(xo, pack(x, f16 && !x32).data(), xb);
    a.buf->upload(wo, pack(w, f16).data(), wb);
    pr.prog = std::make_unique<Program>(dev, "op case head_rmsnorm", pr.timestamps);
    HeadRmsNormParams hp;
    hp.rows = p.rows;
    hp.heads = heads;
    hp.width = width;
    hp.row_stride = stride;
    hp.gain = float(1.0 - lambda_init);
    hp.eps = 1e-5f;
    kernel.record(*pr.prog, a.range(xo, xb), a.range(wo, wb), a.range(yo, yb), hp, x32 ? Elem::f32 : Elem::storage);
    pr.detail = strf("wg=%u", kernel.workgroup_size());
    dense_output(pr, yo, yb, x.size(), es);
    pr.bytes = xb + wb + yb;
    pr.flops = 5.0 * double(x.size());
  }
};

namespace {
// A headwise norm: `heads` heads of width D per row.
HeadRmsNormCaseParams norm(uint32_t heads, uint32_t D, uint32_t rows, bool x32 = false) {
  HeadRmsNormCaseParams c;
  c.rows = rows, c.heads = heads, c.D = D, c.x_f32 = x32;
  return c;
}
}  // namespace

OpCases head_rmsnorm_cases(OpMode mode) {
  CaseTable<HeadRmsNormCase> b(1234);
  using P = HeadRmsNormCaseParams;
  if (mode == OpMode::bench) {
    b.add(norm(16, 64, 1));
    b.add(norm(16, 64, 512));
    b.add(norm(1, 1024, 512, true));  // a block norm over a 2048-wide residual stream
    return b.take();
  }
  const P shapes[] = {norm(1, 16, 1), norm(3, 32, 7), norm(8, 64, 300), norm(5, 128, 33), norm(2, 16, 129),
                      norm(7, 32, 2), norm(4, 64, 65), norm(1, 128, 300), norm(6, 16, 257),
                      // float32 input (the model's block norms over the residual stream)
                      norm(1, 128, 9, true), norm(3, 32, 7, true), norm(1, 16, 1, true)};
  for (bool subgroup : {true, false})
    for (P s : shapes) {
      s.subgroup = subgroup;
      b.add(s);
    }
  return b.take();
}

}  // namespace diffvk::bench
