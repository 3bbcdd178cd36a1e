// diffvk_bench: the attn_probs op's cases (the attention-map debug kernel of `diffvk attn-map`: the maps of
// T positions for heads head0 .. head0 + heads - 1, query chunk by query chunk; DIFF V2: the maps of query
// heads 2h, 2h + 1 and λ per query row), its table, its float64 reference (ref::attention_probs,
// ref::diff_v2_probs) and its record call.
#include "bench/op_run_impl.hpp"
#include "ops/attn_probs.hpp"
#include "reference/diff_v2_ref.hpp"
#include "reference/model_ref.hpp"

namespace diffvk::bench {

using namespace op_detail;

struct AttnProbsCaseParams {
  uint32_t H = 0, Hkv = 0, D = 0, T = 0;  // heads, key/value groups, head half width (v2: head width), positions
  uint32_t head0 = 0, heads = 0;          // the heads whose maps are drawn
  std::vector<std::pair<uint32_t, uint32_t>>
      chunks;                // (pos0, rows) query chunks recorded in order (other rows stay poisoned)
  bool dynamic_pos = false;  // pos0 through the 4-byte dynamic-position buffer
  bool v2 = false;           // DIFF V2 (the maps of query heads 2h, 2h + 1 and λ per query row)
  double z_std = 0.5;        // v2: the standard deviation of the λ logits
};

namespace {
void prepare_attn_probs(Device& dev, const AttnProbsKernel& kernel, const AttnProbsCaseParams& c, uint64_t seed,
                        Prepared& p) {
  const bool f16 = dev.fp16(), v2 = c.v2;
  const size_t es = storage_bytes(f16);
  // V1: q rows of 2H·D, cache rows [K1 | K2] of 2D.
  // V2: q rows of 2H·D query columns then H λ logits, cache rows of D.
  const uint32_t H = c.H, Hkv = c.Hkv, D = c.D, T = c.T, cap = T + 5, krow = v2 ? D : 2 * D,
                 qw = 2 * H * D + (v2 ? H : 0), kw = Hkv * krow;
  std::mt19937_64 rng(seed);
  auto q = rounded(uniform(rng, size_t(T) * 2 * H * D, -2, 2), f16);
  const auto cache = rounded(uniform(rng, size_t(Hkv) * cap * krow, -2, 2), f16);
  std::vector<double> k(size_t(T) * kw);  // the reference's layout: T x Hkv·krow
  for (uint32_t j = 0; j < T; ++j)
    for (uint32_t g = 0; g < Hkv; ++g)
      for (uint32_t e = 0; e < krow; ++e) k[size_t(j) * kw + g * krow + e] = cache[(size_t(g) * cap + j) * krow + e];
  std::vector<double> want1, want2, want_lambda;  // [H][T][T], [H][T][T], V2: [H][T]
  if (v2) {
    const auto z = rounded(ref::random_normal(size_t(T) * H, seed + 1, c.z_std), f16);
    ref::V2Maps m = ref::diff_v2_probs(q, k, z, int(T), int(T), int(H), int(Hkv), int(D), 0);
    want1 = std::move(m.a1), want2 = std::move(m.a2), want_lambda = std::move(m.lambda);
    std::vector<double> qz(size_t(T) * qw);  // the device's q rows: the query heads, then the logits
    for (uint32_t i = 0; i < T; ++i) {
      std::copy_n(q.begin() + size_t(i) * 2 * H * D, 2 * H * D, qz.begin() + size_t(i) * qw);
      std::copy_n(z.begin() + size_t(i) * H, H, qz.begin() + size_t(i) * qw + 2 * H * D);
    }
    q = std::move(qz);
  } else {
    ref::AttnProbs want = ref::attention_probs(q, k, int(T), int(T), int(H), int(Hkv), int(D), 0);
    want1 = std::move(want.p1), want2 = std::move(want.p2);
  }

  Arena& a = p.arena;
  const VkDeviceSize cb = cache.size() * es, ob = AttnProbsKernel::out_bytes(c.heads, T, v2);
  const VkDeviceSize co = a.take(cb), oo = a.take(ob);
  std::vector<VkDeviceSize> qo, dyo;
  for (const auto& [pos0, rows] : c.chunks) {
    qo.push_back(a.take(size_t(rows) * qw * es));
    dyo.push_back(a.take(4));
  }
  a.create(dev, "op case attn_probs");
  a.buf->upload(co, pack(cache, f16).data(), cb);
  p.prog = std::make_unique<Program>(dev, "op case attn_probs", p.timestamps);
  std::vector<bool> written(T, false);
  for (size_t i = 0; i < c.chunks.size(); ++i) {
    const auto [pos0, rows] = c.chunks[i];
    const std::vector<double> qc(q.begin() + size_t(pos0) * qw, q.begin() + size_t(pos0 + rows) * qw);
    a.buf->upload(qo[i], pack(qc, f16).data(), qc.size() * es);
    const uint32_t dyn = c.dynamic_pos ? pos0 : 0u;
    a.buf->upload(dyo[i], &dyn, 4);
    kernel.record(*p.prog, a.range(qo[i], qc.size() * es), a.range(co, cb), a.range(dyo[i], 4), a.range(oo, ob),
                  {rows, H, Hkv, D, cap, T, c.dynamic_pos ? 0u : pos0, c.head0, c.heads, v2});
    for (uint32_t r = pos0; r < pos0 + rows; ++r) written[r] = true;
  }
  const uint32_t heads = c.heads, head0 = c.head0;
  for (uint32_t hh = 0; hh < heads; ++hh)
    for (uint32_t m = 0; m < 2; ++m)
      for (uint32_t i = 0; i < T; ++i)
        if (written[i])
          for (uint32_t j = 0; j < T; ++j)
            p.expect.push_back((m == 0 ? want1 : want2)[((size_t(head0) + hh) * T + i) * T + j]);
  for (uint32_t hh = 0; hh < (v2 ? heads : 0); ++hh)
    for (uint32_t i = 0; i < T; ++i)
      if (written[i]) p.expect.push_back(want_lambda[(size_t(head0) + hh) * T + i]);
  Buffer* buf = a.buf.get();
  p.reset = [=] { buf->fill(oo, ob, kPoison); };
  p.out_off = oo, p.out_bytes = ob;
  p.extract = [=](const std::vector<uint8_t>& b, size_t& pad) {
    std::vector<float> got;
    auto take = [&](size_t e, uint32_t i) {
      if (written[i])
        got.push_back(value_at(b, e, 4));
      else
        pad += !poisoned(b, e, 4);  // rows outside every chunk: still the poison, bit for bit
    };
    for (uint32_t hh = 0; hh < heads; ++hh)
      for (uint32_t m = 0; m < 2; ++m)
        for (uint32_t i = 0; i < T; ++i)
          for (uint32_t j = 0; j < T; ++j) take(((size_t(hh) * 2 + m) * T + i) * T + j, i);
    for (uint32_t hh = 0; hh < (v2 ? heads : 0); ++hh)  // λ rows, after the maps
      for (uint32_t i = 0; i < T; ++i) take(size_t(heads) * 2 * T * T + size_t(hh) * T + i, i);
    return got;
  };
  p.bytes = uint64_t(T) * qw * es + uint64_t(T) * kw * es + ob;
  p.flops = double(heads) * 2 * (double(T) * (T + 1) / 2) * (2.0 * D + 4);
}
}  // namespace

class AttnProbsCase final : public CaseOf<AttnProbsCase, AttnProbsCaseParams> {
 public:
  const char* op() const override { return "attn_probs"; }
  RowShape row_shape() const override { return {p.T, p.H, p.D}; }

  std::string describe() const override {
    std::string s = precision_prefix(fp16);
    if (p.v2) s += "v2 ";
    s += strf("H=%u/%u D=%u T=%u heads=%u+%u", p.H, p.Hkv, p.D, p.T, p.head0, p.heads);
    for (const auto& [pos0, rows] : p.chunks) s += strf(" [%u+%u]", pos0, rows);
    if (p.dynamic_pos) s += " dynamic-pos";
    if (p.v2) s += strf(" z-std=%g", p.z_std);
    return s;
  }

  void prepare(Device& dev, KernelCache& kernels, bool, Prepared& pr) const override {
    const AttnProbsKernel& kernel = kernels.get<AttnProbsKernel>(
        "attn_probs", [&] { return std::make_unique<AttnProbsKernel>(dev, options_for(dev, true)); });
    prepare_attn_probs(dev, kernel, p, seed, pr);
  }
};

namespace {
AttnProbsCaseParams probs(uint32_t H, uint32_t Hkv, uint32_t D, uint32_t T, uint32_t head0, uint32_t heads,
                          std::vector<std::pair<uint32_t, uint32_t>> chunks, bool dynamic) {
  AttnProbsCaseParams c;
  c.H = H, c.Hkv = Hkv, c.D = D, c.T = T, c.head0 = head0, c.heads = heads, c.chunks = std::move(chunks),
  c.dynamic_pos = dynamic;
  return c;
}
}  // namespace

OpCases attn_probs_cases(OpMode mode) {
  CaseTable<AttnProbsCase> b(7);
  if (mode == OpMode::bench) {  // a debug kernel (diffvk attn-map): the largest map it draws, every head
    b.add(probs(16, 4, 64, 256, 0, 16, {{0, 256}}, false));
    return b.take();
  }
  b.add(probs(2, 1, 16, 37, 0, 2, {{0, 20}, {20, 17}}, true));  // every row, dynamic positions, GQA
  b.add(probs(4, 2, 32, 9, 1, 2, {{3, 4}}, false));             // a head subset; rows 0-2 and 7-8 untouched
  b.add(probs(2, 2, 8, 100, 1, 1, {{0, 100}}, false));          // more keys than invocations per workgroup
  // DIFF V2 (docs/maths.md "DIFF V2"): the maps of query heads 2h and 2h + 1 and λ per row; H output heads,
  // 1, 2 and 4 pairs per KV head, odd T, D = 16/32/64, λ logits of standard deviation 1 or 50 (saturated λ).
  auto v2 = [&](AttnProbsCaseParams c, double z_std) {
    c.v2 = true, c.z_std = z_std;
    b.add(c);
  };
  v2(probs(1, 1, 16, 37, 0, 1, {{0, 20}, {20, 17}}, true), 1.0);  // every row, dynamic positions
  v2(probs(2, 1, 32, 9, 1, 1, {{3, 4}}, false), 1.0);             // 2 pairs per KV head, a head subset, rows untouched
  v2(probs(3, 3, 64, 13, 0, 3, {{0, 12}, {12, 1}}, true), 50.0);  // saturated λ; a one-row chunk (decode)
  v2(probs(4, 1, 16, 101, 0, 4, {{0, 101}}, false), 1.0);         // 4 pairs per KV head, more keys than invocations
  v2(probs(2, 2, 32, 11, 0, 2, {{0, 5}, {5, 6}}, false), 50.0);   // one pair per KV head, chunks
  return b.take();
}

}  // namespace diffvk::bench
