// diffvk_bench: the diff_v2_attn op's cases (DIFF V2, docs/maths.md "DIFF V2": 2H query heads and H λ logits
// per q row, caches of D-wide rows; the fused or split prefill, the split-K decode + merge), its table, its
// float64 reference and its record call.
#include "bench/cases/diff_v2_attn.hpp"

#include "bench/cases/diff_attn.hpp"

#include "diffvk/error.hpp"
#include "ops/diff_attn.hpp"
#include "reference/diff_v2_ref.hpp"

namespace diffvk::bench {

using namespace op_detail;

namespace {
void prepare_diff_v2_attn(Device& dev, const DiffAttnKernel& kernel, const DiffV2AttnCaseParams& c, uint64_t seed,
                          Prepared& p) {
  const bool f16 = dev.fp16();
  const uint32_t H = c.H, Hkv = c.Hkv, D = c.D, S = c.S, T = c.pos0 + S, cap = T + 3;
  const uint32_t qw = 2 * H * D + H, kw = Hkv * D;  // a q row: the 2H query heads, then the H λ logits
  const auto q = rounded(ref::random_normal(size_t(S) * 2 * H * D, seed), f16);
  const auto z = rounded(ref::random_normal(size_t(S) * H, seed + 3, c.z_std), f16);
  auto k = rounded(ref::random_normal(size_t(T) * kw, seed + 1), f16);
  auto v = rounded(ref::random_normal(size_t(T) * kw, seed + 2), f16);
  const std::vector<uint8_t> kq = c.kv_q8 ? q8_cache(k, kw, Hkv, cap, T, D) : std::vector<uint8_t>{};
  const std::vector<uint8_t> vq = c.kv_q8 ? q8_cache(v, kw, Hkv, cap, T, D) : std::vector<uint8_t>{};
  std::vector<double> qz(size_t(S) * qw);
  for (uint32_t i = 0; i < S; ++i) {
    std::copy_n(q.begin() + size_t(i) * 2 * H * D, 2 * H * D, qz.begin() + size_t(i) * qw);
    std::copy_n(z.begin() + size_t(i) * H, H, qz.begin() + size_t(i) * qw + 2 * H * D);
  }
  // The cache layout [g][cap][D].
  const auto kc = attn_cache(k, kw, Hkv, cap, T, D), vc = attn_cache(v, kw, Hkv, cap, T, D);
  p.expect = ref::diff_v2_attention(q, k, v, z, int(S), int(T), int(H), int(Hkv), int(D), int(c.pos0));

  AttnCall call;
  call.S = S;
  call.pos0 = c.pos0;
  call.H = 2 * H;
  call.Hkv = Hkv;
  call.capacity = cap;
  call.q_stride = qw;
  call.o_stride = H * D;
  uint32_t split_len = 0, splits = 0;
  const bool on_prefill = c.decode && c.model_keys && kernel.decode_on_prefill(S, c.model_keys);
  const bool decode = c.decode && !on_prefill;
  if (decode) {
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
                     sb = split ? DiffAttnKernel::stat_bytes(call, splits, AttnSoftmax::v2) : 4,
                     yb = DiffAttnKernel::sync_bytes(call);
  Arena& a = p.arena;
  const VkDeviceSize qo = a.take(qb), ko = a.take(kb), vo = a.take(kb), oo = a.take(ob), po = a.take(pb),
                     so = a.take(sb), yo = a.take(yb);
  a.create(dev, "op case diff_v2_attn");
  a.buf->fill(yo, yb, 0);  // arrival counters (see prepare_diff_attn)
  a.buf->upload(qo, pack(qz, f16).data(), qb);
  a.buf->upload(ko, c.kv_q8 ? kq.data() : pack(kc, f16).data(), kb);
  a.buf->upload(vo, c.kv_q8 ? vq.data() : pack(vc, f16).data(), kb);
  p.prog = std::make_unique<Program>(dev, "op case diff_v2_attn", p.timestamps);
  const BufferRange rq = a.range(qo, qb), rk = a.range(ko, kb), rv = a.range(vo, kb), ro = a.range(oo, ob),
                    rp = a.range(po, pb), rs = a.range(so, sb), ry = a.range(yo, yb);
  record_diff_attn(kernel, *p.prog, decode, call, splits, split_len, rq, rk, rv, {}, ro, {rp, rs, ry});
  p.detail = strf("splits=%u split_len=%u%s", splits, split_len, on_prefill ? " decode on the prefill kernel" : "");
  dense_output(p, oo, ob, p.expect.size(), es);
  if (split) poison_split_scratch(p, oo, ob, po, pb, so, sb);
  // Bytes: Q (+ logits), K and V of the live keys, the output. Flops: 4·D per visible (query, key) pair and
  // query head (Q·K and P·V), as the attention cases count them.
  p.bytes = qb + 2 * kv_cache_bytes(c.kv_q8 ? KvFormat::q8_0 : KvFormat::storage, f16, Hkv, T, D) + ob;
  p.flops = causal_pairs(S, c.pos0) * 2 * H * 4.0 * D;
}
}  // namespace

std::string DiffV2AttnCase::describe() const { return describe_attn_case(fp16, p, "z-std", p.z_std, ""); }

void DiffV2AttnCase::prepare(Device& dev, KernelCache& kernels, bool sg, Prepared& pr) const {
  const DiffAttnKernel& kernel =
      cached_diff_attn_kernel(dev, kernels, "diff_v2_attn", p.H, p.Hkv, p.D, sg, p.kv_q8, AttnSoftmax::v2);
  prepare_diff_v2_attn(dev, kernel, p, seed, pr);
}

constexpr AttnCaseParams<DiffV2AttnCaseParams, &DiffV2AttnCaseParams::z_std> attn{};

// DIFF V2 (docs/maths.md "DIFF V2"): H output heads (2H query heads), Hkv dividing H, head width D; z_std
// is the standard deviation of the λ logits (50: saturated, λ at 0 or 1).
OpCases diff_v2_attn_cases(OpMode mode) {
  CaseTable<DiffV2AttnCase> b(300);
  using P = DiffV2AttnCaseParams;
  if (mode == OpMode::bench) {
    b.add(attn(4, 1, 64, 1, 2047, 1.0, true));  // a decode step at T = 2048 (8 query heads, 1 KV head)
    b.add(attn(4, 1, 64, 512, 0, 1.0, false));  // a 512-row prefill
    return b.take();
  }
  // Odd S and T; 1, 2, 4 and 32 pairs per KV head; D = 6/8/16/32/64/128 (element-wise, 4- and 8-element loads).
  const P cases[] = {
      attn(1, 1, 16, 1, 0, 1.0, false),       attn(2, 2, 32, 7, 0, 1.0, false),     attn(4, 2, 16, 33, 0, 1.0, false),
      attn(4, 1, 64, 17, 0, 1.0, false),      attn(2, 1, 128, 19, 0, 1.0, false),   attn(3, 3, 6, 11, 0, 1.0, false),
      attn(32, 1, 8, 5, 0, 1.0, false),       attn(2, 2, 16, 9, 0, 50.0, false),  // saturated λ
      attn(1, 1, 64, 900, 0, 1.0, false),  // beyond llvmpipe's per-invocation loop budget: split prefill there
      attn(4, 2, 16, 13, 33, 1.0, false),     attn(2, 1, 64, 20, 1000, 1.0, false),  // chunks after cached rows
      attn(2, 1, 16, 1, 40, 1.0, true),       attn(4, 1, 32, 3, 65, 1.0, true),     attn(4, 2, 16, 8, 51, 1.0, true),
      attn(2, 2, 128, 2, 40, 1.0, true),      attn(3, 1, 6, 5, 90, 50.0, true),     attn(32, 1, 8, 2, 70, 1.0, true),
      attn(4, 2, 16, 6, 77, 1.0, true, true), attn(2, 1, 64, 1, 3000, 1.0, true),
  };
  for (const P& c : cases) b.add(c);
  for (P c : {attn(4, 2, 32, 3, 45, 1.0, true), attn(4, 1, 16, 33, 0, 1.0, false)}) {  // shared-memory lane sums
    c.subgroup = false;
    b.add(c);
  }
  // Q8_0 KV cache (D a multiple of 32): prefill, a chunk, decode, 1/2/4 pairs per KV head, saturated λ.
  for (P c :
       {attn(2, 2, 32, 7, 0, 1.0, false), attn(4, 1, 64, 17, 0, 1.0, false), attn(2, 1, 128, 19, 0, 50.0, false),
        attn(4, 2, 32, 13, 33, 1.0, false), attn(4, 1, 32, 3, 65, 1.0, true), attn(2, 2, 128, 2, 40, 1.0, true)}) {
    c.kv_q8 = true;
    b.add(c);
  }
  return b.take();
}

// The model's attention (op_registry.cpp, model_shape_cases; attn_model_cases).
OpCases diff_v2_attn_model_cases(const ModelShape& m) {
  const bool q8 = kv_format_problem(KvFormat::q8_0, m.head_dim).empty();
  return attn_model_cases<DiffV2AttnCase>(m, 1300, attn, {1.0, 1.0, 1.0}, q8);
}

}  // namespace diffvk::bench
