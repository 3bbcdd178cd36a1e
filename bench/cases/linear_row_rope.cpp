// diffvk_bench: the linear_row_rope op's cases (the decode step's fused q/k/v projection: one row through the
// prologue (none, rmsnorm), times Wᵀ, RoPE on q and k, and the KV-cache append as the epilogue;
// LinearKernel::record_row_rope, QuantRowKernel::record_rope for Q8_0 / Q4_0 weights and the int8 dot-product path),
// its table, its float64 reference and its record call. Each case records the op at three positions of the dynamic
// position buffer (the first row, one inside, the cache's last row) into one program.
#include "bench/cases/linear.hpp"
#include "ops/rope_kv.hpp"

namespace diffvk::bench {

using namespace op_detail;

struct LinearRowRopeCaseParams {
  uint32_t E = 0, H = 0, Hkv = 0, D = 0, capacity = 0;  // row width, query heads, KV heads, head width, cache rows
  bool norm = false;                                    // the rmsnorm prologue (the model's form)
  bool x_f32 = false;                                   // float32 x (the residual stream)
  QuantType weights = QuantType::f16;                   // q8_0 / q4_0: against the dequantized weights
  bool int8_dot = false;                                // the int8 dot-product path; skipped without the feature
  bool v2 = false;  // DIFF V2: H output heads = 2H query heads of D, H λ logits between q and k, caches of D
  // ---- device quirks
  bool subgroup = true;       // false: the shared-memory reduction even where subgroup arithmetic exists
  bool scalar_loads = false;  // never the 16-byte vector loads
  uint32_t wg_limit = 0;      // capped workgroup count (one grid-stride loop); 0 = the device's
  uint32_t row_lanes = 0;     // forced lanes per lane group (row_lanes clamps it to whole RoPE pairs per group)
};

class LinearRowRopeCase final : public CaseOf<LinearRowRopeCase, LinearRowRopeCaseParams> {
 public:
  const char* op() const override { return "linear_row_rope"; }
  bool subgroup() const override { return p.subgroup; }
  bool forced_lanes() const override { return p.row_lanes != 0; }
  RowShape row_shape() const override { return {1, p.E, out_cols()}; }

  std::string describe() const override {
    std::string s = precision_prefix(fp16) + strf("E=%u H=%u/%u D=%u capacity=%u", p.E, p.H, p.Hkv, p.D, p.capacity);
    if (p.v2) s += " v2";
    if (p.norm) s += " rmsnorm";
    if (p.weights != QuantType::f16) s += std::string(" ") + quant_type_name(p.weights);
    if (p.int8_dot) s += " int8-dot";
    if (p.x_f32) s += " x32";
    if (!p.subgroup) s += " shared-reduction";
    if (p.scalar_loads) s += " scalar-loads";
    s += wg_limit_name(p.wg_limit, 0);
    if (p.row_lanes) s += strf(" lanes=%u", p.row_lanes);
    return s;
  }

  std::string skip_reason(const Device& dev) const override {
    if (p.int8_dot && !dev.caps().integer_dot_product)
      return "the device has no shaderIntegerDotProduct: no int8 dot-product path";
    return {};
  }

  void prepare(Device& dev, KernelCache& kernels, bool sg, Prepared& pr) const override;

 private:
  // V1: [q 2H·D | k 2Hkv·D | v]. V2: [q 2H·D | λ H | k Hkv·D | v].
  uint32_t qcols() const { return 2 * p.H * p.D; }
  uint32_t lcols() const { return p.v2 ? p.H : 0; }
  uint32_t kcols() const { return (p.v2 ? 1 : 2) * p.Hkv * p.D; }
  uint32_t out_cols() const { return qcols() + lcols() + 2 * kcols(); }
};

void LinearRowRopeCase::prepare(Device& dev, KernelCache& kernels, bool sg, Prepared& pr) const {
  LinearKernel& kernel = linear_kernel(dev, kernels, sg);
  QuantRowKernel& qk = quant_row_kernel(dev, kernels, sg, p.int8_dot);
  const LinearRowRopeCaseParams& c = p;
  const bool f16 = dev.fp16(), x32 = c.x_f32;
  const uint32_t qc = qcols(), lc = lcols(), kc = kcols(), k0 = qc + lc, out = out_cols(), ycols = qc + lc;
  const uint32_t kw = (c.v2 ? 1 : 2) * c.D;  // a cache row's width per KV head
  std::mt19937_64 rng(seed);
  auto x = uniform(rng, c.E, -3.0, 3.0);
  x = x32 ? ref::round_to_f32(x) : rounded(x, f16);
  const double ws = 1.7 / std::sqrt(double(c.E));
  auto w = rounded(uniform(rng, size_t(out) * c.E, -ws, ws), f16);
  const auto wbytes = weight_bytes(c.weights, c.E, out, f16, w);
  const auto g = rounded(uniform(rng, c.E, 0.5, 1.5), f16);
  const size_t cache_elems = size_t(c.Hkv) * c.capacity * kw;
  const auto kpat = rounded(uniform(rng, cache_elems, -5, 5), f16),
             vpat = rounded(uniform(rng, cache_elems, -5, 5), f16);
  const std::vector<float> table = rope_table(c.capacity, c.D);

  // The reference row: pro(x)·Wᵀ in float64, rounded to the storage type (what the epilogue rotates).
  const double eps = 1e-5;
  double inv = 1.0;
  if (c.norm) {
    double ss = 0;
    for (double v : x) ss += v * v;
    inv = 1.0 / std::sqrt(ss / c.E + eps);
  }
  std::vector<double> act(c.E);
  for (uint32_t e = 0; e < c.E; ++e) act[e] = c.norm ? x[e] * inv * g[e] : x[e];
  std::vector<double> ties(c.int8_dot ? act.size() : 0);
  if (c.int8_dot) int8_round_blocks(act, 0, c.E, &ties);  // the kernel's int8 activations
  const std::vector<double> y = rounded(ref::linear(act, 1, int(c.E), w, int(out)), f16);

  // Three positions (pos0 = 1 plus the dynamic value): the first row after pos0, one inside, the last row.
  const uint32_t pos0 = 1;
  const uint32_t dyns[3] = {0, std::min(3u, c.capacity - 3), c.capacity - 2};
  auto rot = [&](uint32_t e, uint32_t base, uint32_t pos) {  // RoPE of column e of the part at `base`
    const uint32_t i = (e % c.D) / 2, e0 = e & ~1u;
    const double cs = table[(size_t(pos) * (c.D / 2) + i) * 2], sn = table[(size_t(pos) * (c.D / 2) + i) * 2 + 1];
    const double a = y[base + e0], b = y[base + e0 + 1];
    return e % 2 ? a * sn + b * cs : a * cs - b * sn;
  };
  std::vector<double> kexp = kpat, vexp = vpat;
  std::vector<bool> written(cache_elems, false);
  for (uint32_t dyn : dyns) {
    const uint32_t pos = pos0 + dyn;
    for (uint32_t q = 0; q < qc; ++q) pr.expect.push_back(rot(q, 0, pos));
    for (uint32_t l = qc; l < ycols; ++l) pr.expect.push_back(y[l]);  // V2's λ logits, as computed
    for (uint32_t gi = 0; gi < c.Hkv; ++gi)
      for (uint32_t col = 0; col < kw; ++col) {
        const size_t i = (size_t(gi) * c.capacity + pos) * kw + col;
        const uint32_t e = gi * kw + col;
        kexp[i] = rot(e, k0, pos);
        vexp[i] = y[k0 + kc + e];
        written[i] = true;
      }
  }
  for (const auto* e : {&kexp, &vexp})
    for (size_t i = 0; i < cache_elems; ++i)
      if (written[i]) pr.expect.push_back((*e)[i]);
  if (c.int8_dot) pr.tolerance = int8_tie_factor(ties, 1, c.E, w, out, y, f16);

  const size_t es = storage_bytes(f16), xes = x32 ? 4 : es;
  const VkDeviceSize xb = c.E * xes, wb = wbytes.size(), gb = c.E * es, tb = table.size() * 4, cb = cache_elems * es,
                     qb = ycols * es;
  Arena& a = pr.arena;
  // The inputs, then the outputs in one span (both caches, the three q_out): what the replay compares and the
  // self-test's planted faults probe.
  const VkDeviceSize xo = a.take(xb), wo = a.take(wb), go = a.take(gb), to = a.take(tb);
  VkDeviceSize qo[3], po[3];
  for (VkDeviceSize& o : po) o = a.take(4);
  const VkDeviceSize ko = a.take(cb), vo = a.take(cb);
  for (VkDeviceSize& o : qo) o = a.take(qb);
  a.create(dev, "op case linear_row_rope");
  a.buf->upload(xo, pack(x, f16 && !x32).data(), xb);
  a.buf->upload(wo, wbytes.data(), wb);
  a.buf->upload(go, pack(g, f16).data(), gb);
  a.buf->upload(to, table.data(), tb);
  for (int k = 0; k < 3; ++k) a.buf->upload(po[k], &dyns[k], 4);

  kernel.force_row_scalar_for_testing(c.scalar_loads);
  kernel.limit_workgroups_for_testing(c.wg_limit, 0);
  kernel.force_row_lanes_for_testing(c.row_lanes);
  qk.limit_workgroups_for_testing(c.wg_limit);
  qk.force_row_lanes_for_testing(c.row_lanes);
  pr.prog = std::make_unique<Program>(dev, "op case linear_row_rope", pr.timestamps);
  LinearRowParams lp;
  lp.in = c.E;
  lp.out = out;
  lp.pro = c.norm ? RowPrologue::rmsnorm : RowPrologue::none;
  lp.eps = float(eps);
  lp.x_elem = x32 ? Elem::f32 : Elem::storage;
  const BufferRange nw = c.norm ? a.range(go, gb) : BufferRange{};
  for (int k = 0; k < 3; ++k) {
    const RowRope rr{
        a.range(to, tb), a.range(ko, cb), a.range(vo, cb), a.range(po[k], 4), qc, kc, c.D, kw, c.capacity, pos0, lc};
    if (c.weights == QuantType::f16)
      kernel.record_row_rope(*pr.prog, a.range(xo, xb), a.range(wo, wb), a.range(qo[k], qb), lp, nw, rr);
    else
      qk.record_rope(*pr.prog, c.weights, a.range(xo, xb), a.range(wo, wb), a.range(qo[k], qb), lp, nw, rr);
  }
  const uint32_t lanes = c.weights == QuantType::f16 ? kernel.row_lanes_for(c.E) : qk.lanes_for(c.weights, c.E);
  kernel.force_row_scalar_for_testing(false);
  kernel.limit_workgroups_for_testing(0, 0);
  kernel.force_row_lanes_for_testing(0);
  qk.limit_workgroups_for_testing(0);
  qk.force_row_lanes_for_testing(0);
  pr.detail = strf("wg=%u nf=%u lanes=%u %s%s", kernel.row_workgroup_size(), kernel.row_features(), lanes,
                   quant_type_name(c.weights),
                   c.weights == QuantType::f16 ? ""
                   : c.int8_dot                ? " int8_dot"
                                               : " dequant");

  // Checked: each position's q_out, then the written K elements, then the V ones (index order); every other cache
  // element must keep its pre-filled pattern bit for bit.
  Buffer* buf = a.buf.get();
  const auto kbytes = pack(kpat, f16), vbytes = pack(vpat, f16);
  pr.reset = [=] {
    buf->upload(ko, kbytes.data(), cb);
    buf->upload(vo, vbytes.data(), cb);
    for (VkDeviceSize o : qo) buf->fill(o, qb, kPoison);
  };
  std::vector<VkDeviceSize> qoffs;  // from the span's start
  for (VkDeviceSize o : qo) qoffs.push_back(o - ko);
  pr.out_off = ko, pr.out_bytes = a.size - ko;  // the span must replay bit for bit
  pr.extract = [=](const std::vector<uint8_t>& b, size_t& pad) {
    std::vector<float> got;
    for (VkDeviceSize o : qoffs)
      for (size_t i = 0; i < qb / es; ++i) got.push_back(value_at(b, o / es + i, es));
    check_cache(b, 0, kbytes, written, es, got, pad);
    check_cache(b, vo - ko, vbytes, written, es, got, pad);
    return got;
  };
  pr.bytes = 3 * (xb + wb + (c.norm ? gb : 0) + qb + 2 * uint64_t(c.Hkv) * kw * es);
  pr.flops = 3 * 2.0 * c.E * out;
}

namespace {
LinearRowRopeCaseParams rr(uint32_t E, uint32_t H, uint32_t Hkv, uint32_t D, uint32_t capacity, bool norm, bool x32) {
  LinearRowRopeCaseParams c;
  c.E = E, c.H = H, c.Hkv = Hkv, c.D = D, c.capacity = capacity, c.norm = norm, c.x_f32 = x32;
  return c;
}
}  // namespace

OpCases linear_row_rope_cases(OpMode mode) {
  CaseTable<LinearRowRopeCase> b(9950);
  using P = LinearRowRopeCaseParams;
  const QuantType q8 = QuantType::q8_0, q4 = QuantType::q4_0;
  if (mode == OpMode::bench) {  // a 1B model's decode projection: E 2048, 32/8 heads of 2 x 32, f16 and quantized
    for (QuantType q : {QuantType::f16, q8, q4})
      b.add(with(rr(2048, 16, 4, 64, 4096, true, true), [&](P& c) { c.weights = q; }));
    return b.take();
  }
  const P cases[] = {
      rr(64, 2, 1, 16, 9, true, true),    // the model's form: norm prologue, float32 residual stream
      rr(96, 4, 2, 12, 7, true, false),   // D = 12, GQA 2:1, storage-type x
      rr(40, 1, 1, 20, 5, false, false),  // no prologue (a bare layer), in not a multiple of 8
      with(rr(256, 8, 2, 16, 6, true, true), [](P& c) { c.scalar_loads = true; }),
      with(rr(128, 4, 4, 16, 5, true, false), [](P& c) { c.wg_limit = 1; }),  // one workgroup grid-strides
      with(rr(64, 2, 1, 16, 9, true, true), [](P& c) { c.subgroup = false; }),
      // Quantized weights (E a multiple of 32): dequantized in registers, then int8 dot products.
      with(rr(64, 2, 1, 16, 9, true, true), [&](P& c) { c.weights = q8; }),
      with(rr(96, 4, 2, 12, 7, false, false), [&](P& c) { c.weights = q4; }),
      with(rr(128, 4, 4, 16, 5, true, false), [&](P& c) { c.weights = q4, c.wg_limit = 1; }),
      with(rr(96, 4, 2, 12, 7, true, true), [&](P& c) { c.weights = q8, c.subgroup = false; }),
      with(rr(64, 2, 1, 16, 9, true, true), [&](P& c) { c.weights = q8, c.int8_dot = true; }),
      with(rr(96, 4, 2, 12, 7, true, false), [&](P& c) { c.weights = q4, c.int8_dot = true; }),
      // DIFF V2 (even H: the λ columns keep k's pairs in one workgroup): E != H·D, 1 and 2 pairs per KV head.
      with(rr(64, 2, 1, 24, 9, true, true), [](P& c) { c.v2 = true; }),
      with(rr(96, 4, 2, 16, 7, false, false), [](P& c) { c.v2 = true; }),
      with(rr(96, 2, 2, 32, 6, true, false), [&](P& c) { c.v2 = true, c.wg_limit = 1, c.weights = q8; }),
      with(rr(64, 4, 1, 8, 5, true, true), [](P& c) { c.v2 = true, c.scalar_loads = true; }),
      // Forced lane groups: groups of 1, 2 and 4 lanes on consecutive features (pairs kept).
      with(rr(64, 2, 1, 16, 9, true, true), [](P& c) { c.row_lanes = 1; }),
      with(rr(40, 1, 1, 20, 5, false, false), [](P& c) { c.row_lanes = 2; }),
      with(rr(96, 4, 2, 12, 7, true, false), [](P& c) { c.row_lanes = 4, c.scalar_loads = true, c.wg_limit = 1; }),
      with(rr(64, 2, 1, 24, 9, true, true), [](P& c) { c.v2 = true, c.row_lanes = 2; }),
      with(rr(64, 2, 1, 16, 9, true, true), [&](P& c) { c.weights = q8, c.row_lanes = 1; }),
      with(rr(96, 4, 2, 12, 7, false, false), [&](P& c) { c.weights = q4, c.row_lanes = 2, c.wg_limit = 1; }),
      with(rr(64, 2, 1, 16, 9, true, true), [&](P& c) { c.weights = q8, c.int8_dot = true, c.row_lanes = 4; }),
      with(rr(96, 4, 2, 12, 7, true, false), [&](P& c) { c.weights = q4, c.int8_dot = true, c.row_lanes = 1; }),
  };
  for (const P& c : cases) b.add(c);
  return b.take();
}

}  // namespace diffvk::bench
