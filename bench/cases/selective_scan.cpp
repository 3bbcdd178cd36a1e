// diffvk_bench: the selective_scan op's cases (Mamba-1: B and Cm read from x_proj's [dt_low | B | Cm] rows, z from
// in_proj's [x | z] rows, the float32 state h carried; the one-dispatch path and the chunked parallel prefill, with
// forced chunk lengths so that small T spans several chunks; one-row decode steps after the call, checked against
// one reference call of all the rows), its table, its float64 reference (ref::selective_scan) and its record call.
#include <cmath>

#include "bench/op_run_impl.hpp"
#include "ops/selective_scan.hpp"
#include "reference/ssm_ref.hpp"

namespace diffvk::bench {

using namespace op_detail;

struct SelectiveScanCaseParams {
  uint32_t T = 1, C = 0, S = 16;
  uint32_t chunk = 0;                       // SelectiveScanParams::chunk (0: the kernel's choice)
  uint32_t steps = 0;                       // one-row decode steps after the T-row call (state carried)
  bool z = true;                            // gate y = y_pre·silu(z)
  bool y_pre = false;                       // y_pre written too
  bool fresh = false;                       // zero starting state
  uint32_t wg_limit_x = 0, wg_limit_y = 0;  // capped workgroup counts (grid-stride loops); 0 = the device's
};

class SelectiveScanCase final : public CaseOf<SelectiveScanCase, SelectiveScanCaseParams> {
 public:
  static constexpr uint32_t kDtRank = 5;  // x_proj's dt_low columns before B (the model: 160)

  const char* op() const override { return "selective_scan"; }
  RowShape row_shape() const override { return {p.T + p.steps, p.S, p.C}; }
  std::string describe() const override {
    std::string s = precision_prefix(fp16) + strf("T=%u C=%u S=%u", p.T, p.C, p.S);
    if (p.chunk) s += strf(" chunk=%u", p.chunk);
    if (p.steps) s += strf(" +%u steps", p.steps);
    if (!p.z) s += " no-z";
    if (p.y_pre) s += " y_pre";
    if (p.fresh) s += " fresh";
    s += wg_limit_name(p.wg_limit_x, p.wg_limit_y);
    return s;
  }

  void prepare(Device& dev, KernelCache& kernels, bool, Prepared& pr) const override {
    SelectiveScanKernel& kernel = kernels.get<SelectiveScanKernel>(strf("selective_scan S=%u", p.S), [&] {
      return std::make_unique<SelectiveScanKernel>(dev, options_for(dev, false), p.S);
    });
    const bool f16 = dev.fp16();
    const size_t es = storage_bytes(f16);
    const uint32_t C = p.C, S = p.S, rows = p.T + p.steps;
    const uint32_t bc_stride = kDtRank + 2 * S + 1, z_stride = 2 * C;
    const size_t tc = size_t(rows) * C;
    std::mt19937_64 rng(seed);
    const auto u = rounded(uniform(rng, tc, -2, 2), f16);
    const auto dr = rounded(uniform(rng, tc, -6, 1), f16);  // softplus: 0.0025 .. 1.3
    std::vector<double> a_log = uniform(rng, size_t(C) * S, 1, 16);
    for (double& v : a_log) v = std::log(v);
    a_log = ref::round_to_f32(a_log);
    const auto bcbuf = rounded(uniform(rng, size_t(rows) * bc_stride, -1, 1), f16);
    const auto D = ref::round_to_f32(uniform(rng, C, -1, 1));
    const auto zbuf = rounded(uniform(rng, size_t(rows) * z_stride, -3, 3), f16);
    const auto h0 =
        p.fresh ? std::vector<double>(size_t(C) * S, 0.0) : ref::round_to_f32(uniform(rng, size_t(C) * S, -1, 1));
    std::vector<double> B(size_t(rows) * S), Cm(size_t(rows) * S), z(tc);
    for (uint32_t t = 0; t < rows; ++t) {
      for (uint32_t s = 0; s < S; ++s) {
        B[size_t(t) * S + s] = bcbuf[size_t(t) * bc_stride + kDtRank + s];
        Cm[size_t(t) * S + s] = bcbuf[size_t(t) * bc_stride + kDtRank + S + s];
      }
      for (uint32_t c = 0; c < C; ++c) z[size_t(t) * C + c] = zbuf[size_t(t) * z_stride + C + c];
    }
    std::vector<double> h = h0;
    const ref::ScanResult r =
        ref::selective_scan(u, dr, a_log, B, Cm, D, p.z ? &z : nullptr, int(rows), int(C), int(S), h);

    Arena& a = pr.arena;
    // Inputs: u and delta_raw of the T-row call, then of each step (each its own aligned range); B, Cm and z by
    // element offsets into whole buffers.
    std::vector<VkDeviceSize> uo, dro;
    std::vector<uint32_t> call_rows;
    for (uint32_t i = 0; i <= p.steps; ++i) call_rows.push_back(i == 0 ? p.T : 1);
    for (uint32_t n : call_rows) uo.push_back(a.take(size_t(n) * C * es)), dro.push_back(a.take(size_t(n) * C * es));
    const VkDeviceSize alb = a_log.size() * 4, bcb = bcbuf.size() * es, db = D.size() * 4, zb = zbuf.size() * es;
    const VkDeviceSize alo = a.take(alb), bco = a.take(bcb), dof = a.take(db), zo = a.take(zb);
    SelectiveScanParams sp;
    sp.C = C, sp.S = S, sp.bc_stride = bc_stride, sp.z_stride = z_stride, sp.chunk = p.chunk;
    uint64_t scratch = 0;
    for (uint32_t n : call_rows) {
      sp.T = n;
      scratch = std::max(scratch, selective_scan_scratch_bytes(sp));
    }
    const VkDeviceSize sco = a.take(std::max<uint64_t>(scratch, 16));
    // Outputs, in the expected values' order: each call's y (and y_pre), then h.
    std::vector<OutputRegion> regions;
    std::vector<double>& e = pr.expect;
    uint32_t row0 = 0;
    for (uint32_t n : call_rows) {
      const size_t first = size_t(row0) * C, count = size_t(n) * C;
      regions.push_back({a.take(count * es), count, es});
      e.insert(e.end(), r.y.begin() + first, r.y.begin() + first + count);
      if (p.y_pre) {
        regions.push_back({a.take(count * es), count, es});
        e.insert(e.end(), r.y_pre.begin() + first, r.y_pre.begin() + first + count);
      }
      row0 += n;
    }
    const VkDeviceSize hb = h0.size() * 4, ho = a.take(hb);
    regions.push_back({ho, h.size(), 4});
    e.insert(e.end(), h.begin(), h.end());
    a.create(dev, "op case selective_scan");
    row0 = 0;
    for (size_t i = 0; i < call_rows.size(); ++i) {
      const size_t first = size_t(row0) * C, count = size_t(call_rows[i]) * C;
      const std::vector<double> us(u.begin() + first, u.begin() + first + count),
          ds(dr.begin() + first, dr.begin() + first + count);
      a.buf->upload(uo[i], pack(us, f16).data(), count * es);
      a.buf->upload(dro[i], pack(ds, f16).data(), count * es);
      row0 += call_rows[i];
    }
    a.buf->upload(alo, pack(a_log, false).data(), alb);
    a.buf->upload(bco, pack(bcbuf, f16).data(), bcb);
    a.buf->upload(dof, pack(D, false).data(), db);
    a.buf->upload(zo, pack(zbuf, f16).data(), zb);
    Buffer* buf = a.buf.get();
    const std::vector<uint8_t> hbytes = pack(h0, false);
    const VkDeviceSize scb = std::max<uint64_t>(scratch, 16);
    output_regions(pr, regions, [=] {
      buf->upload(ho, hbytes.data(), hb);
      buf->fill(sco, scb, kPoison);  // a pass reading scratch no earlier pass wrote shows
    });

    pr.prog = std::make_unique<Program>(dev, "op case selective_scan", pr.timestamps);
    row0 = 0;
    size_t reg = 0;
    kernel.limit_workgroups_for_testing(p.wg_limit_x, p.wg_limit_y);
    for (size_t i = 0; i < call_rows.size(); ++i) {
      const uint32_t n = call_rows[i];
      sp.T = n;
      sp.b_offset = row0 * bc_stride + kDtRank, sp.c_offset = sp.b_offset + S;
      sp.z_offset = row0 * z_stride + C;
      SelectiveScanBuffers sb;
      sb.u = a.range(uo[i], size_t(n) * C * es), sb.delta_raw = a.range(dro[i], size_t(n) * C * es);
      sb.A_log = a.range(alo, alb), sb.bc = a.range(bco, bcb), sb.D = a.range(dof, db);
      if (p.z) sb.z = a.range(zo, zb);
      sb.h = a.range(ho, hb);
      sb.y = a.range(regions[reg].off, regions[reg].n * es), ++reg;
      if (p.y_pre) sb.y_pre = a.range(regions[reg].off, regions[reg].n * es), ++reg;
      sb.scratch = a.range(sco, scb);
      kernel.record(*pr.prog, sp, sb);
      row0 += n;
    }
    kernel.limit_workgroups_for_testing(0, 0);
    sp.T = p.T;
    pr.detail = SelectiveScanKernel::choice(sp) + strf(", wg=%u", kernel.workgroup_size());
    pr.tolerance = scan_tolerance_factor(rows);  // the rows the state has seen in this case
    const uint64_t rw = uint64_t(rows) * C * es;
    pr.bytes = rw * (3 + (p.z ? 1 : 0) + (p.y_pre ? 1 : 0)) + uint64_t(rows) * 2 * S * es + alb + db + 2 * hb;
    pr.flops = double(rows) * C * (6.0 * S + 12);
  }
};

namespace {
SelectiveScanCaseParams scan(uint32_t T, uint32_t C, uint32_t chunk = 0) {
  SelectiveScanCaseParams c;
  c.T = T, c.C = C, c.chunk = chunk;
  return c;
}
}  // namespace

OpCases selective_scan_cases(OpMode mode) {
  CaseTable<SelectiveScanCase> b(12300);
  if (mode == OpMode::bench) {  // Phi-4-mini-flash: d_inner 5120, d_state 16, gated, decode and a 512-row prefill
    for (uint32_t T : {1u, 512u}) b.add(scan(T, 5120));
    return b.take();
  }
  b.add(scan(1, 1));    // one channel, decode
  b.add(scan(2, 130));  // two rows, C not a multiple of the workgroup
  SelectiveScanCaseParams c = scan(3, 65);
  c.z = false, c.y_pre = true;  // no gate: y = y_pre
  b.add(c);
  c = scan(13, 70, 4);  // chunked: 4 chunks, the last one partial
  c.y_pre = true;
  b.add(c);
  c = scan(9, 33, 2);  // chunked: 5 chunks of 2, fresh sequence, no gate
  c.z = false, c.fresh = true;
  b.add(c);
  b.add(scan(45, 67));  // the kernel's own choice: 2 chunks of 32
  c = scan(11, 67, 4);
  c.steps = 3, c.y_pre = true;  // chunked prefill, then decode steps carrying h
  b.add(c);
  c = scan(1, 40);
  c.steps = 2;  // decode steps only
  b.add(c);
  c = scan(7, 19, 3);
  c.S = 5;  // another d_state
  b.add(c);
  c = scan(13, 130, 2);
  c.wg_limit_x = 1, c.wg_limit_y = 2, c.y_pre = true;  // grid-stride loops over channels and the 7 chunks
  b.add(c);
  return b.take();
}

// The model's scan (op_registry.cpp, model_shape_cases): its state size, a chunked prefill then decode steps.
OpCases selective_scan_model_cases(const ModelShape& m) {
  CaseTable<SelectiveScanCase> b(12900);
  if (m.d_state == 0) return b.take();
  SelectiveScanCaseParams c = scan(11, 67, 4);
  c.S = m.d_state, c.steps = 2;
  b.add(c);
  return b.take();
}

}  // namespace diffvk::bench
