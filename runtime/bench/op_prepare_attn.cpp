// diffvk_bench: the preparation of a diff_attn case for OpRunner (op_run.cpp): seeded q, k, v in the
// cache layout, the float64 reference (differential attention + head norm), the fused prefill, the split
// prefill on loop-limited devices, or the split-K decode + merge (with forced split shapes); and of an
// attn_probs case (the attention-map debug kernel against ref::attention_probs, or ref::diff_v2_probs for V2).
#include "bench/op_run_impl.hpp"
#include "io/half.hpp"
#include "io/quant.hpp"
#include "ops/attn_probs.hpp"
#include "ops/diff_attn.hpp"
#include "reference/diff_v2_ref.hpp"
#include "reference/model_ref.hpp"

namespace diffvk::bench::op_detail {

std::vector<uint8_t> q8_cache(std::vector<double>& x, size_t stride, uint32_t groups, uint32_t cap, uint32_t T, uint32_t width) {
  const uint64_t rows = uint64_t(groups) * cap, slots = kv_q8_scale_slots(width);
  std::vector<uint8_t> img(kv_cache_bytes(KvFormat::q8_0, true, groups, cap, width), 0x7f);
  for (uint64_t s = 0; s < rows * slots; ++s) img[rows * width + 2 * s] = 0x00, img[rows * width + 2 * s + 1] = 0x64;  // 1024
  std::vector<float> f(width), y(width);
  std::vector<uint8_t> blocks(quant_row_bytes(QuantType::q8_0, width));
  for (uint32_t g = 0; g < groups; ++g)
    for (uint32_t j = 0; j < T; ++j) {
      double* row = &x[size_t(j) * stride + size_t(g) * width];
      for (uint32_t e = 0; e < width; ++e) f[e] = static_cast<float>(row[e]);
      quantize_row(QuantType::q8_0, f.data(), width, blocks.data());
      dequantize_row(QuantType::q8_0, blocks.data(), width, y.data());
      for (uint32_t e = 0; e < width; ++e) row[e] = y[e];
      const uint64_t r = uint64_t(g) * cap + j;
      for (uint32_t b = 0; b < width / 32; ++b) {
        std::memcpy(&img[r * width + 32 * b], &blocks[b * kQ8_0BlockBytes + 2], 32);
        std::memcpy(&img[rows * width + (r * slots + b) * 2], &blocks[b * kQ8_0BlockBytes], 2);
      }
    }
  return img;
}

std::vector<double> q8_cache_values(const uint8_t* img, uint32_t groups, uint32_t cap, uint32_t width) {
  const uint64_t rows = uint64_t(groups) * cap, slots = kv_q8_scale_slots(width);
  std::vector<double> out(rows * width);
  for (uint64_t r = 0; r < rows; ++r)
    for (uint32_t e = 0; e < width; ++e) {
      const uint8_t* s = &img[rows * width + (r * slots + e / 32) * 2];
      out[r * width + e] = double(int8_t(img[r * width + e])) * half_to_float(uint16_t(s[0] | s[1] << 8));
    }
  return out;
}

void prepare_diff_attn(Device& dev, const DiffAttnKernel& kernel, const OpCase& c, Prepared& p) {
  const bool f16 = dev.fp16();
  const uint32_t H = c.in, Hkv = c.Hkv, D = c.out, S = c.rows, DV = 2 * D, T = c.pos0 + S, cap = T + 3;
  // Inputs rounded to the storage type (the reference sees what the GPU reads).
  const auto q = rounded(ref::random_normal(size_t(S) * 2 * H * D, c.seed), f16);
  auto k = rounded(ref::random_normal(size_t(T) * 2 * Hkv * D, c.seed + 1), f16);
  auto v = rounded(ref::random_normal(size_t(T) * Hkv * DV, c.seed + 2), f16);
  // Q8_0 KV cache: K and V rounded through Q8_0 (the reference sees the dequantized cache).
  const std::vector<uint8_t> kq = c.kv_q8 ? q8_cache(k, 2 * Hkv * D, Hkv, cap, T, DV) : std::vector<uint8_t>{};
  const std::vector<uint8_t> vq = c.kv_q8 ? q8_cache(v, Hkv * DV, Hkv, cap, T, DV) : std::vector<uint8_t>{};
  std::mt19937_64 rng(c.seed + 3);
  const auto subln = rounded(uniform(rng, DV, 0.7, 1.3), f16);
  const int depth = int(c.seed % 12);
  const double gain = 1.0 - ref::lambda_init(depth);
  // The cache layout [g][cap][2D]; rows T .. cap - 1 hold 1000 (reading one wrecks the result).
  std::vector<double> kc(size_t(Hkv) * cap * DV, 1000.0), vc(kc.size(), 1000.0);
  for (uint32_t g = 0; g < Hkv; ++g)
    for (uint32_t j = 0; j < T; ++j)
      for (uint32_t d = 0; d < DV; ++d) {
        kc[(size_t(g) * cap + j) * DV + d] = k[size_t(j) * 2 * Hkv * D + g * DV + d];
        vc[(size_t(g) * cap + j) * DV + d] = v[size_t(j) * Hkv * DV + g * DV + d];
      }
  p.expect = ref::head_rmsnorm(ref::diff_attention(q, k, v, int(S), int(T), int(H), int(Hkv), int(D), c.lambda, int(c.pos0)), int(S),
                               int(H), int(D), subln, ref::lambda_init(depth));

  AttnCall call{S, c.pos0, H, Hkv, cap, 2 * H * D, H * DV, float(c.lambda), float(gain)};
  uint32_t split_len = 0, splits = 0;
  if (c.decode) {
    splits = kernel.decode_splits(call, &split_len);
    const uint32_t bc = kernel.decode_tiles(S).bc;
    if (c.max_splits) split_len = bc, splits = (T + bc - 1) / bc;
    if (c.one_split) split_len = (T + bc - 1) / bc * bc, splits = 1;
  } else {
    splits = kernel.prefill_splits(call, &split_len);  // nonzero on loop-limited devices for long prefills
  }
  const bool split = splits > 0;
  const size_t es = storage_bytes(f16);
  const VkDeviceSize qb = q.size() * es, kb = c.kv_q8 ? kq.size() : kc.size() * es, wb = DV * es, ob = p.expect.size() * es;
  const VkDeviceSize pb = split ? DiffAttnKernel::part_bytes(call, D, splits) : 4, sb = split ? DiffAttnKernel::stat_bytes(call, splits) : 4,
                     yb = DiffAttnKernel::sync_bytes(call);
  Arena& a = p.arena;
  const VkDeviceSize qo = a.take(qb), ko = a.take(kb), vo = a.take(kb), wo = a.take(wb), oo = a.take(ob), po = a.take(pb), so = a.take(sb),
                     yo = a.take(yb);
  a.create(dev, "op case diff_attn");
  a.buf->fill(yo, yb, 0);  // the split kernel's arrival counters start at zero (and every replay leaves them so)
  a.buf->upload(qo, pack(q, f16).data(), qb);
  a.buf->upload(ko, c.kv_q8 ? kq.data() : pack(kc, f16).data(), kb);
  a.buf->upload(vo, c.kv_q8 ? vq.data() : pack(vc, f16).data(), kb);
  a.buf->upload(wo, pack(subln, f16).data(), wb);
  p.prog = std::make_unique<Program>(dev, "op case diff_attn", p.timestamps);
  const BufferRange rq = a.range(qo, qb), rk = a.range(ko, kb), rv = a.range(vo, kb), rw = a.range(wo, wb), ro = a.range(oo, ob),
                    rp = a.range(po, pb), rs = a.range(so, sb), ry = a.range(yo, yb);
  if (c.decode)
    kernel.record_decode(*p.prog, rq, rk, rv, rw, ro, {rp, rs, ry}, call, splits, split_len);
  else if (split)
    kernel.record_prefill(*p.prog, rq, rk, rv, rw, ro, call, {rp, rs, ry});
  else
    kernel.record_prefill(*p.prog, rq, rk, rv, rw, ro, call);
  p.detail = strf("splits=%u split_len=%u", splits, split_len);
  dense_output(p, oo, ob, p.expect.size(), es);
  if (split) {  // the fp32 scratch is poisoned too: a split the merge reads but nothing wrote shows
    Buffer* buf = a.buf.get();
    p.reset = [=] {
      buf->fill(oo, ob, kPoison);
      buf->fill(po, pb, kPoison);
      buf->fill(so, sb, kPoison);
    };
  }
  // The bytes that must move (Q, K1, K2, V of the live keys, the output) and the useful flops (causal):
  // 12·D per visible (query, key) pair and head, as the attention cases count them (cases.hpp).
  p.bytes = qb + 2 * kv_cache_bytes(c.kv_q8 ? KvFormat::q8_0 : KvFormat::storage, f16, Hkv, T, DV) + ob;
  double pairs = 0;
  for (uint32_t i = 0; i < S; ++i) pairs += double(c.pos0) + i + 1;
  p.flops = pairs * H * 12.0 * D;
}

void prepare_diff_v2_attn(Device& dev, const DiffAttnKernel& kernel, const OpCase& c, Prepared& p) {
  const bool f16 = dev.fp16();
  const uint32_t H = c.in, Hkv = c.Hkv, D = c.out, S = c.rows, T = c.pos0 + S, cap = T + 3;
  const uint32_t qw = 2 * H * D + H, kw = Hkv * D;  // a q row: the 2H query heads, then the H λ logits
  const auto q = rounded(ref::random_normal(size_t(S) * 2 * H * D, c.seed), f16);
  const auto z = rounded(ref::random_normal(size_t(S) * H, c.seed + 3, c.lambda), f16);
  auto k = rounded(ref::random_normal(size_t(T) * kw, c.seed + 1), f16);
  auto v = rounded(ref::random_normal(size_t(T) * kw, c.seed + 2), f16);
  const std::vector<uint8_t> kq = c.kv_q8 ? q8_cache(k, kw, Hkv, cap, T, D) : std::vector<uint8_t>{};
  const std::vector<uint8_t> vq = c.kv_q8 ? q8_cache(v, kw, Hkv, cap, T, D) : std::vector<uint8_t>{};
  std::vector<double> qz(size_t(S) * qw);
  for (uint32_t i = 0; i < S; ++i) {
    std::copy_n(q.begin() + size_t(i) * 2 * H * D, 2 * H * D, qz.begin() + size_t(i) * qw);
    std::copy_n(z.begin() + size_t(i) * H, H, qz.begin() + size_t(i) * qw + 2 * H * D);
  }
  // The cache layout [g][cap][D]; rows T .. cap - 1 hold 1000 (reading one wrecks the result).
  std::vector<double> kc(size_t(Hkv) * cap * D, 1000.0), vc(kc.size(), 1000.0);
  for (uint32_t g = 0; g < Hkv; ++g)
    for (uint32_t j = 0; j < T; ++j)
      for (uint32_t d = 0; d < D; ++d) {
        kc[(size_t(g) * cap + j) * D + d] = k[size_t(j) * kw + g * D + d];
        vc[(size_t(g) * cap + j) * D + d] = v[size_t(j) * kw + g * D + d];
      }
  p.expect = ref::diff_v2_attention(q, k, v, z, int(S), int(T), int(H), int(Hkv), int(D), int(c.pos0));

  AttnCall call{S, c.pos0, 2 * H, Hkv, cap, qw, H * D};
  uint32_t split_len = 0, splits = 0;
  if (c.decode) {
    splits = kernel.decode_splits(call, &split_len);
    const uint32_t bc = kernel.decode_tiles(S).bc;
    if (c.max_splits) split_len = bc, splits = (T + bc - 1) / bc;
  } else {
    splits = kernel.prefill_splits(call, &split_len);
  }
  const bool split = splits > 0;
  const size_t es = storage_bytes(f16);
  const VkDeviceSize qb = qz.size() * es, kb = c.kv_q8 ? kq.size() : kc.size() * es, ob = p.expect.size() * es;
  const VkDeviceSize pb = split ? DiffAttnKernel::part_bytes(call, D, splits, AttnSoftmax::v2) : 4,
                     sb = split ? DiffAttnKernel::stat_bytes(call, splits, AttnSoftmax::v2) : 4, yb = DiffAttnKernel::sync_bytes(call);
  Arena& a = p.arena;
  const VkDeviceSize qo = a.take(qb), ko = a.take(kb), vo = a.take(kb), oo = a.take(ob), po = a.take(pb), so = a.take(sb), yo = a.take(yb);
  a.create(dev, "op case diff_v2_attn");
  a.buf->fill(yo, yb, 0);  // arrival counters (see prepare_diff_attn)
  a.buf->upload(qo, pack(qz, f16).data(), qb);
  a.buf->upload(ko, c.kv_q8 ? kq.data() : pack(kc, f16).data(), kb);
  a.buf->upload(vo, c.kv_q8 ? vq.data() : pack(vc, f16).data(), kb);
  p.prog = std::make_unique<Program>(dev, "op case diff_v2_attn", p.timestamps);
  const BufferRange rq = a.range(qo, qb), rk = a.range(ko, kb), rv = a.range(vo, kb), ro = a.range(oo, ob), rp = a.range(po, pb),
                    rs = a.range(so, sb), ry = a.range(yo, yb);
  if (c.decode)
    kernel.record_decode(*p.prog, rq, rk, rv, {}, ro, {rp, rs, ry}, call, splits, split_len);
  else if (split)
    kernel.record_prefill(*p.prog, rq, rk, rv, {}, ro, call, {rp, rs, ry});
  else
    kernel.record_prefill(*p.prog, rq, rk, rv, {}, ro, call);
  p.detail = strf("splits=%u split_len=%u", splits, split_len);
  dense_output(p, oo, ob, p.expect.size(), es);
  if (split) {
    Buffer* buf = a.buf.get();
    p.reset = [=] {
      buf->fill(oo, ob, kPoison);
      buf->fill(po, pb, kPoison);
      buf->fill(so, sb, kPoison);
    };
  }
  // Bytes: Q (+ logits), K and V of the live keys, the output. Flops: 4·D per visible (query, key) pair and
  // query head (Q·K and P·V), as the attention cases count them.
  p.bytes = qb + 2 * kv_cache_bytes(c.kv_q8 ? KvFormat::q8_0 : KvFormat::storage, f16, Hkv, T, D) + ob;
  double pairs = 0;
  for (uint32_t i = 0; i < S; ++i) pairs += double(c.pos0) + i + 1;
  p.flops = pairs * 2 * H * 4.0 * D;
}

void prepare_attn_probs(Device& dev, const AttnProbsKernel& kernel, const OpCase& c, Prepared& p) {
  const bool f16 = dev.fp16(), v2 = c.v2;
  const size_t es = storage_bytes(f16);
  // V1: q rows of 2H·D, cache rows [K1 | K2] of 2D. V2: q rows of 2H·D query columns then H λ logits, cache rows of D.
  const uint32_t H = c.in, Hkv = c.Hkv, D = c.out, T = c.rows, cap = T + 5, krow = v2 ? D : 2 * D, qw = 2 * H * D + (v2 ? H : 0),
                 kw = Hkv * krow;
  std::mt19937_64 rng(c.seed);
  auto q = rounded(uniform(rng, size_t(T) * 2 * H * D, -2, 2), f16);
  const auto cache = rounded(uniform(rng, size_t(Hkv) * cap * krow, -2, 2), f16);
  std::vector<double> k(size_t(T) * kw);  // the reference's layout: T x Hkv·krow
  for (uint32_t j = 0; j < T; ++j)
    for (uint32_t g = 0; g < Hkv; ++g)
      for (uint32_t e = 0; e < krow; ++e) k[size_t(j) * kw + g * krow + e] = cache[(size_t(g) * cap + j) * krow + e];
  std::vector<double> want1, want2, want_lambda;  // [H][T][T], [H][T][T], V2: [H][T]
  if (v2) {
    const auto z = rounded(ref::random_normal(size_t(T) * H, c.seed + 1, c.lambda), f16);
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
          for (uint32_t j = 0; j < T; ++j) p.expect.push_back((m == 0 ? want1 : want2)[((size_t(head0) + hh) * T + i) * T + j]);
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

}  // namespace diffvk::bench::op_detail
