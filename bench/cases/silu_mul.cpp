// diffvk_bench: the silu_mul op's cases (SwiGLU: rows x [gate | up] -> rows x I, silu(gate)·up), its table,
// its float64 reference and its record call.
#include "bench/op_run_impl.hpp"
#include "ops/silu_mul.hpp"

namespace diffvk::bench {

using namespace op_detail;

struct SiluMulCaseParams {
  uint32_t rows = 1, I = 0;
};

class SiluMulCase final : public CaseOf<SiluMulCase, SiluMulCaseParams> {
 public:
  const char* op() const override { return "silu_mul"; }
  RowShape row_shape() const override { return {p.rows, 0, p.I}; }
  std::string describe() const override { return precision_prefix(fp16) + strf("rows=%u I=%u", p.rows, p.I); }

  void prepare(Device& dev, KernelCache& kernels, bool, Prepared& pr) const override {
    const SiluMulKernel& kernel = kernels.get<SiluMulKernel>(
        "silu_mul", [&] { return std::make_unique<SiluMulKernel>(dev, options_for(dev, true)); });
    const bool f16 = dev.fp16();
    const uint32_t I = p.I;
    std::mt19937_64 rng(seed);
    const auto gu = rounded(uniform(rng, size_t(p.rows) * 2 * I, -4, 4), f16);
    pr.expect.resize(size_t(p.rows) * I);
    for (uint32_t r = 0; r < p.rows; ++r)
      for (uint32_t i = 0; i < I; ++i) {
        const double g = gu[size_t(r) * 2 * I + i], u = gu[size_t(r) * 2 * I + I + i];
        pr.expect[size_t(r) * I + i] = g / (1.0 + std::exp(-g)) * u;
      }
    const size_t es = storage_bytes(f16);
    const VkDeviceSize gb = gu.size() * es, ab = pr.expect.size() * es;
    Arena& a = pr.arena;
    const VkDeviceSize go = a.take(gb), ao = a.take(ab);
    a.create(dev, "op case silu_mul");
    a.buf->upload(go, pack(gu, f16).data(), gb);
    pr.prog = std::make_unique<Program>(dev, "op case silu_mul", pr.timestamps);
    kernel.record(*pr.prog, a.range(go, gb), a.range(ao, ab), p.rows, I);
    dense_output(pr, ao, ab, pr.expect.size(), es);
    pr.bytes = gb + ab;
    pr.flops = 6.0 * double(pr.expect.size());
  }
};

namespace {
SiluMulCaseParams rows_i(uint32_t rows, uint32_t I) { return {rows, I}; }
}  // namespace

OpCases silu_mul_cases(OpMode mode) {
  CaseTable<SiluMulCase> b(3300);
  if (mode == OpMode::bench) {
    b.add(rows_i(1, 5632));
    b.add(rows_i(256, 5632));
    return b.take();
  }
  for (const SiluMulCaseParams& s :
       {rows_i(1, 1), rows_i(1, 200), rows_i(3, 7), rows_i(17, 64), rows_i(130, 37), rows_i(2, 1000), rows_i(65, 129)})
    b.add(s);
  return b.take();
}

}  // namespace diffvk::bench
