// diffvk_bench: the gmu_gate op's cases (the Gated Memory Unit's gate of Phi-4-mini-flash: a = silu(g) · m, g and
// m in separate buffers with their own row strides and offsets; SiluMulKernel::record_gmu, shaders/silu_mul.comp),
// its table, its float64 reference (ref::gmu_gate) and its record call.
#include "bench/op_run_impl.hpp"
#include "ops/silu_mul.hpp"
#include "reference/ssm_ref.hpp"

namespace diffvk::bench {

using namespace op_detail;

struct GmuGateCaseParams {
  uint32_t rows = 1, I = 0;
  uint32_t g_pad = 0, g_off = 0, m_pad = 0, m_off = 0;  // row strides I + pad, offsets (elements)
  uint32_t wg_limit_x = 0, wg_limit_y = 0;
};

class GmuGateCase final : public CaseOf<GmuGateCase, GmuGateCaseParams> {
 public:
  const char* op() const override { return "gmu_gate"; }
  RowShape row_shape() const override { return {p.rows, p.I, p.I}; }
  std::string describe() const override {
    std::string s = precision_prefix(fp16) + strf("rows=%u I=%u", p.rows, p.I);
    if (p.g_pad || p.g_off) s += strf(" g=+%u@%u", p.g_pad, p.g_off);
    if (p.m_pad || p.m_off) s += strf(" m=+%u@%u", p.m_pad, p.m_off);
    return s + wg_limit_name(p.wg_limit_x, p.wg_limit_y);
  }

  void prepare(Device& dev, KernelCache& kernels, bool, Prepared& pr) const override {
    SiluMulKernel& kernel = kernels.get<SiluMulKernel>(
        "silu_mul", [&] { return std::make_unique<SiluMulKernel>(dev, options_for(dev, true)); });
    const bool f16 = dev.fp16();
    const uint32_t I = p.I, rows = p.rows, gs = I + p.g_pad, ms = I + p.m_pad;
    std::mt19937_64 rng(seed);
    // The whole strided buffers are random (what lies between the rows must not reach the output).
    const auto gbuf = rounded(uniform(rng, size_t(rows - 1) * gs + p.g_off + I, -6, 6), f16);
    const auto mbuf = rounded(uniform(rng, size_t(rows - 1) * ms + p.m_off + I, -3, 3), f16);
    std::vector<double> g(size_t(rows) * I), m(size_t(rows) * I);
    for (uint32_t r = 0; r < rows; ++r)
      for (uint32_t i = 0; i < I; ++i) {
        g[size_t(r) * I + i] = gbuf[size_t(r) * gs + p.g_off + i];
        m[size_t(r) * I + i] = mbuf[size_t(r) * ms + p.m_off + i];
      }
    pr.expect = ref::gmu_gate(g, m);
    const size_t es = storage_bytes(f16);
    const VkDeviceSize gb = gbuf.size() * es, mb = mbuf.size() * es, ab = pr.expect.size() * es;
    Arena& a = pr.arena;
    const VkDeviceSize go = a.take(gb), mo = a.take(mb), ao = a.take(ab);
    a.create(dev, "op case gmu_gate");
    a.buf->upload(go, pack(gbuf, f16).data(), gb);
    a.buf->upload(mo, pack(mbuf, f16).data(), mb);
    pr.prog = std::make_unique<Program>(dev, "op case gmu_gate", pr.timestamps);
    kernel.limit_workgroups_for_testing(p.wg_limit_x, p.wg_limit_y);
    GmuGateParams gate;
    gate.rows = rows;
    gate.I = I;
    gate.g_stride = gs;
    gate.g_off = p.g_off;
    gate.m_stride = ms;
    gate.m_off = p.m_off;
    kernel.record_gmu(*pr.prog, a.range(go, gb), a.range(mo, mb), a.range(ao, ab), gate);
    kernel.limit_workgroups_for_testing(0, 0);
    dense_output(pr, ao, ab, pr.expect.size(), es);
    pr.bytes = 3 * ab;
    pr.flops = 6.0 * double(pr.expect.size());
  }
};

namespace {
GmuGateCaseParams gate(uint32_t rows, uint32_t I, uint32_t gp = 0, uint32_t go = 0, uint32_t mp = 0, uint32_t mo = 0) {
  GmuGateCaseParams c;
  c.rows = rows, c.I = I, c.g_pad = gp, c.g_off = go, c.m_pad = mp, c.m_off = mo;
  return c;
}
GmuGateCaseParams limited(GmuGateCaseParams c, uint32_t x, uint32_t y) {
  c.wg_limit_x = x, c.wg_limit_y = y;
  return c;
}
}  // namespace

OpCases gmu_gate_cases(OpMode mode) {
  CaseTable<GmuGateCase> b(4200);
  if (mode == OpMode::bench) {
    b.add(gate(1, 5120));    // decode: d_inner = 5120
    b.add(gate(256, 5120));  // a prefill chunk
    return b.take();
  }
  // Dense and strided operands, offsets into a wider row (a column slice of a fused projection), odd sizes,
  // capped grids (the grid-stride loops along both axes).
  for (const GmuGateCaseParams& s :
       {gate(1, 1), gate(1, 5120), gate(3, 37), gate(17, 200, 5, 0, 0, 3), gate(9, 129, 129, 129, 3, 1),
        gate(130, 64, 64, 0, 0, 0), limited(gate(33, 333, 2, 1, 0, 0), 2, 3)})
    b.add(s);
  return b.take();
}

}  // namespace diffvk::bench
