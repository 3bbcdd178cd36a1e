// diffvk_bench: the diff_attn op's cases (seeded q, k, v in the cache layout; the float64 reference:
// differential attention + head norm; the fused prefill, the split prefill on loop-limited devices, or the
// split-K decode + merge with forced split shapes), its table and its record call.
#include "bench/cases/diff_attn.hpp"

#include "diffvk/error.hpp"
#include "ops/diff_attn.hpp"
#include "reference/model_ref.hpp"

namespace diffvk::bench {

using namespace op_detail;

namespace op_detail {
const DiffAttnKernel& cached_diff_attn_kernel(Device& dev, KernelCache& kernels, const char* op, uint32_t H,
                                              uint32_t Hkv, uint32_t D, bool sg, bool kv_q8, AttnSoftmax softmax) {
  const bool v2 = softmax == AttnSoftmax::v2;
  if (Hkv == 0 || H % Hkv != 0)
    throw Error(Status::invalid_argument,
                strf("%s case: %s", op, v2 ? "Hkv must divide H" : "H must be a multiple of Hkv"));
  const uint32_t n_rep = (v2 ? 2 * H : H) / Hkv;  // query heads per KV head
  return kernels.get<DiffAttnKernel>(strf("%s D=%u n_rep=%u sg=%d kv_q8=%d", op, D, n_rep, int(sg), int(kv_q8)), [&] {
    return std::make_unique<DiffAttnKernel>(dev, options_for(dev, sg), D, n_rep, 8, softmax,
                                            kv_q8 ? KvFormat::q8_0 : KvFormat::storage);
  });
}

void record_diff_attn(const DiffAttnKernel& kernel, Program& prog, bool decode, const AttnCall& call, uint32_t splits,
                      uint32_t split_len, BufferRange q, BufferRange k, BufferRange v, BufferRange subln, BufferRange o,
                      const AttnSplitScratch& scratch) {
  if (decode)
    kernel.record_decode(prog, q, k, v, subln, o, scratch, call, splits, split_len);
  else if (splits > 0)
    kernel.record_prefill(prog, q, k, v, subln, o, call, scratch);
  else
    kernel.record_prefill(prog, q, k, v, subln, o, call);
}
}  // namespace op_detail

namespace {
// A ring KV cache of cap rows as the appends leave it after positions 0 .. T − 1: position j at row j mod cap for
// the last cap positions, rows never written hold 1000 (reading one wrecks the result). lin: [groups][T][width].
std::vector<double> ring_cache(const std::vector<double>& lin, uint32_t groups, uint32_t cap, uint32_t T,
                               uint32_t width) {
  std::vector<double> c(size_t(groups) * cap * width, 1000.0);
  for (uint32_t g = 0; g < groups; ++g)
    for (uint32_t j = T > cap ? T - cap : 0; j < T; ++j)
      std::copy_n(&lin[(size_t(g) * T + j) * width], width, &c[(size_t(g) * cap + j % cap) * width]);
  return c;
}

void prepare_diff_attn(Device& dev, const DiffAttnKernel& kernel, const DiffAttnCaseParams& c, uint64_t seed,
                       Prepared& p) {
  const bool f16 = dev.fp16();
  const uint32_t H = c.H, Hkv = c.Hkv, D = c.D, S = c.S, DV = 2 * D, T = c.pos0 + S, cap = c.ring ? c.ring : T + 3;
  // Inputs rounded to the storage type (the reference sees what the GPU reads).
  const auto q = rounded(ref::random_normal(size_t(S) * 2 * H * D, seed), f16);
  auto k = rounded(ref::random_normal(size_t(T) * 2 * Hkv * D, seed + 1), f16);
  auto v = rounded(ref::random_normal(size_t(T) * Hkv * DV, seed + 2), f16);
  // Q8_0 KV cache: K and V rounded through Q8_0 (the reference sees the dequantized cache).
  const bool ring = c.ring > 0;
  const std::vector<uint8_t> kq = c.kv_q8 ? q8_cache(k, 2 * Hkv * D, Hkv, cap, T, DV, ring) : std::vector<uint8_t>{};
  const std::vector<uint8_t> vq = c.kv_q8 ? q8_cache(v, Hkv * DV, Hkv, cap, T, DV, ring) : std::vector<uint8_t>{};
  std::mt19937_64 rng(seed + 3);
  const auto subln = rounded(uniform(rng, DV, 0.7, 1.3), f16);
  const int depth = int(seed % 12);
  const double gain = 1.0 - ref::lambda_init(depth);
  // The cache layout [g][cap][2D] (a ring: position j at row j mod cap).
  const auto kc = c.ring ? ring_cache(attn_cache(k, 2 * Hkv * D, Hkv, T, T, DV), Hkv, cap, T, DV)
                         : attn_cache(k, 2 * Hkv * D, Hkv, cap, T, DV),
             vc = c.ring ? ring_cache(attn_cache(v, Hkv * DV, Hkv, T, T, DV), Hkv, cap, T, DV)
                         : attn_cache(v, Hkv * DV, Hkv, cap, T, DV);
  p.expect = ref::head_rmsnorm(
      ref::diff_attention(q, k, v, int(S), int(T), int(H), int(Hkv), int(D), c.lambda, int(c.pos0), int(c.window)),
      int(S), int(H), int(D), subln, ref::lambda_init(depth));

  AttnCall call;
  call.S = S;
  call.pos0 = c.pos0;
  call.H = H;
  call.Hkv = Hkv;
  call.capacity = cap;
  call.q_stride = 2 * H * D;
  call.o_stride = H * DV;
  call.lambda = float(c.lambda);
  call.gain = float(gain);
  call.window = c.window;
  call.ring = c.ring > 0;
  const uint64_t keys = DiffAttnKernel::call_keys(call);  // keys the call streams (fewer with a window)
  uint32_t split_len = 0, splits = 0;
  const bool on_prefill = c.decode && c.model_keys && kernel.decode_on_prefill(S, c.model_keys);
  const bool decode = c.decode && !on_prefill;
  if (decode) {
    splits = kernel.decode_splits(call, &split_len);
    const uint32_t bc = kernel.decode_tiles(S).bc;
    if (c.max_splits) split_len = bc, splits = static_cast<uint32_t>((keys + bc - 1) / bc);
    if (c.one_split) split_len = static_cast<uint32_t>((keys + bc - 1) / bc * bc), splits = 1;
  } else {
    splits = kernel.prefill_splits(call, &split_len);  // nonzero on loop-limited devices for long prefills
  }
  const bool split = splits > 0;
  const size_t es = storage_bytes(f16);
  const VkDeviceSize qb = q.size() * es, kb = c.kv_q8 ? kq.size() : kc.size() * es, wb = DV * es,
                     ob = p.expect.size() * es;
  const VkDeviceSize pb = split ? DiffAttnKernel::part_bytes(call, D, splits) : 4,
                     sb = split ? DiffAttnKernel::stat_bytes(call, splits) : 4, yb = DiffAttnKernel::sync_bytes(call);
  Arena& a = p.arena;
  const VkDeviceSize qo = a.take(qb), ko = a.take(kb), vo = a.take(kb), wo = a.take(wb), oo = a.take(ob),
                     po = a.take(pb), so = a.take(sb), yo = a.take(yb);
  a.create(dev, "op case diff_attn");
  a.buf->fill(yo, yb, 0);  // the split kernel's arrival counters start at zero (and every replay leaves them so)
  a.buf->upload(qo, pack(q, f16).data(), qb);
  a.buf->upload(ko, c.kv_q8 ? kq.data() : pack(kc, f16).data(), kb);
  a.buf->upload(vo, c.kv_q8 ? vq.data() : pack(vc, f16).data(), kb);
  a.buf->upload(wo, pack(subln, f16).data(), wb);
  p.prog = std::make_unique<Program>(dev, "op case diff_attn", p.timestamps);
  const BufferRange rq = a.range(qo, qb), rk = a.range(ko, kb), rv = a.range(vo, kb), rw = a.range(wo, wb),
                    ro = a.range(oo, ob), rp = a.range(po, pb), rs = a.range(so, sb), ry = a.range(yo, yb);
  record_diff_attn(kernel, *p.prog, decode, call, splits, split_len, rq, rk, rv, rw, ro, {rp, rs, ry});
  p.detail = strf("splits=%u split_len=%u%s", splits, split_len, on_prefill ? " decode on the prefill kernel" : "");
  dense_output(p, oo, ob, p.expect.size(), es);
  if (split) poison_split_scratch(p, oo, ob, po, pb, so, sb);
  // The bytes that must move (Q, K1, K2, V of the live keys, the output) and the useful flops (causal):
  // 12·D per visible (query, key) pair and head, as the attention cases count them (cases.hpp).
  p.bytes = qb + 2 * kv_cache_bytes(c.kv_q8 ? KvFormat::q8_0 : KvFormat::storage, f16, Hkv, uint32_t(keys), DV) + ob;
  double pairs = causal_pairs(S, c.pos0);
  if (c.window) {
    pairs = 0;
    for (uint32_t i = 0; i < S; ++i) pairs += std::min<double>(c.window, double(c.pos0) + i + 1);
  }
  p.flops = pairs * H * 12.0 * D;
}
}  // namespace

std::string DiffAttnCase::describe() const {
  std::string s = describe_attn_case(fp16, p, "lambda", p.lambda, p.one_split ? " one-split" : "");
  if (p.window) s += strf(" window=%u", p.window);
  if (p.ring) s += strf(" ring=%u", p.ring);
  return s;
}

void DiffAttnCase::prepare(Device& dev, KernelCache& kernels, bool sg, Prepared& pr) const {
  const DiffAttnKernel& kernel =
      cached_diff_attn_kernel(dev, kernels, "diff_attn", p.H, p.Hkv, p.D, sg, p.kv_q8, AttnSoftmax::differential);
  prepare_diff_attn(dev, kernel, p, seed, pr);
}

constexpr AttnCaseParams<DiffAttnCaseParams, &DiffAttnCaseParams::lambda> attn{};

DiffAttnCase diff_attn_case(bool fp16, uint32_t H, uint32_t Hkv, uint32_t D, uint32_t S, uint32_t pos0, double lambda,
                            bool decode, uint64_t seed) {
  DiffAttnCase c;
  c.p = attn(H, Hkv, D, S, pos0, lambda, decode);
  c.fp16 = fp16;
  c.seed = seed;
  c.name = c.describe();
  return c;
}

OpCases diff_attn_cases(OpMode mode) {
  CaseTable<DiffAttnCase> b(100);
  using P = DiffAttnCaseParams;
  if (mode == OpMode::bench) {
    b.add(attn(16, 4, 64, 1, 2047, 0.5, true));  // a decode step at T = 2048
    b.add(attn(16, 4, 64, 512, 0, 0.5, false));  // a 512-row prefill
    // The Q8_0 KV cache beside the storage type: a decode step at T = 4096, and the prefill.
    P d4k = attn(16, 4, 64, 1, 4095, 0.5, true), p512 = attn(16, 4, 64, 512, 0, 0.5, false);
    b.add(d4k);
    d4k.kv_q8 = p512.kv_q8 = true;
    b.add(d4k);
    b.add(p512);
    return b.take();
  }
  // Odd S and T, GQA n_rep 1..64, lambda < 0 and > 1, D = 2/6/8/12/16/20/32/64/128 (16-byte, 4-element and
  // element-wise loads).
  const P prefill[] = {
      attn(1, 1, 16, 1, 0, 0.3, false), attn(2, 2, 32, 7, 0, -0.4, false), attn(4, 2, 16, 33, 0, 1.3, false),
      attn(4, 1, 32, 17, 0, 0.8, false), attn(8, 1, 16, 9, 0, 0.5, false), attn(2, 1, 64, 40, 0, 0.6, false),
      attn(2, 2, 128, 19, 0, 0.2, false), attn(8, 2, 16, 129, 0, 0.7, false),
      attn(1, 1, 128, 900, 0, 0.4,
           false),  // long: beyond llvmpipe's per-invocation loop budget (quirk loop_iteration_limit)
      // D not a multiple of 8 (fp16) or 4 (fp32): element-wise loads instead of 16-byte chunks
      attn(3, 3, 6, 11, 0, 0.5, false), attn(4, 1, 12, 13, 0, -0.7, false), attn(2, 1, 20, 9, 0, 0.9, false),
      attn(2, 2, 2, 5, 0, 0.3, false),
      attn(64, 1, 8, 3, 0, 0.6, false),  // GQA n_rep = 64: slots split across workgroups
  };
  const P chunked[] = {
      // prefill of S rows after pos0 cached rows
      attn(2, 2, 32, 7, 9, 0.5, false),  attn(4, 2, 16, 13, 33, -0.9, false),  attn(8, 1, 16, 5, 60, 1.6, false),
      attn(2, 1, 64, 31, 2, 0.4, false), attn(2, 1, 64, 20, 1000, 0.5, false),  // a chunk whose queries see > 1000 keys
  };
  const P decode[] = {
      attn(3, 3, 6, 1, 40, 0.5, true),
      attn(4, 1, 12, 3, 65, -0.7, true),
      attn(2, 1, 20, 1, 129, 0.9, true),
      attn(64, 1, 8, 2, 70, 0.6, true),
      attn(32, 8, 16, 1, 100, 0.4, true),
      attn(1, 1, 32, 1, 0, 0.3, true),
      attn(2, 2, 32, 1, 70, -0.5, true),
      attn(4, 2, 16, 3, 130, 1.2, true),
      attn(8, 1, 16, 8, 51, 0.6, true),
      attn(4, 1, 64, 5, 90, 0.9, true),
      attn(2, 2, 128, 2, 40, 0.1, true),
      attn(8, 8, 16, 4, 200, 0.7, true),
      attn(4, 4, 16, 7, 0, 0.5, true),
      attn(4, 2, 16, 6, 77, 0.8, true, true),
      attn(1, 1, 64, 8, 33, -0.2, true, true),
      attn(8, 1, 64, 8, 3000, 0.6, true),  // long cache: splits capped per invocation on loop-limited devices
  };
  for (const P& s : prefill) b.add(s);
  for (const P& s : chunked) b.add(s);
  for (const P& s : decode) b.add(s);
  // The shared-memory reduction instead of the subgroup one (where the device has subgroups).
  for (P s :
       {attn(4, 2, 32, 3, 45, 0.6, true), attn(2, 2, 64, 1, 100, -0.3, true, true), attn(4, 2, 16, 33, 0, 1.3, false),
        attn(8, 1, 16, 5, 60, 1.6, false), attn(2, 1, 64, 40, 0, 0.6, false)}) {
    s.subgroup = false;
    b.add(s);
  }
  // Q8_0 KV cache (2D a multiple of 32): prefill, chunks after cached rows, decode, GQA up to
  // 64, D = 16 (one block per row, a padded scale word), 48 (an odd block count), 64, 128. (The loads are the
  // only change: the long, loop-limited cases of the storage type cover the split paths.)
  for (P s :
       {attn(2, 2, 16, 7, 0, -0.4, false), attn(4, 1, 48, 17, 0, 0.8, false), attn(2, 1, 64, 40, 0, 0.6, false),
        attn(2, 2, 128, 19, 0, 0.2, false), attn(4, 2, 16, 13, 33, -0.9, false), attn(64, 1, 16, 3, 0, 0.6, false),
        attn(1, 1, 16, 1, 0, 0.3, true), attn(4, 1, 48, 3, 65, -0.7, true), attn(8, 1, 64, 8, 51, 0.6, true),
        attn(2, 2, 128, 2, 40, 0.1, true), attn(4, 2, 16, 6, 77, 0.8, true, true)}) {
    s.kv_q8 = true;
    b.add(s);
  }
  P shared = attn(4, 2, 32, 3, 45, 0.6, true);
  shared.kv_q8 = true, shared.subgroup = false;
  b.add(shared);
  // Sliding window (Phi-4-mini-flash's first half of layers), with and without a ring cache of window + S − 1 or more
  // rows (position j at row j mod ring), on (D, n_rep) shapes above (no pipeline of their own): a window smaller
  // than the keys, window 1, window = keys, chunks and decode steps whose ring has wrapped, max-splits decode
  // (splits that see only masked keys), and the long cases of the split paths.
  auto win = [](P s, uint32_t window, uint32_t ring = 0) {
    s.window = window, s.ring = ring;
    return s;
  };
  for (const P& s :
       {win(attn(4, 2, 16, 33, 0, 0.7, false), 8), win(attn(2, 2, 32, 9, 5, -0.4, false), 1),
        win(attn(2, 2, 32, 7, 9, 0.5, false), 16), win(attn(4, 2, 16, 13, 40, -0.9, false), 10, 22),
        win(attn(8, 1, 16, 5, 60, 1.6, false), 7, 13),
        win(attn(1, 1, 128, 900, 0, 0.4, false), 300),        // the split prefill where loop-limited
        win(attn(2, 1, 64, 20, 1000, 0.5, false), 700, 719),  // ... a wrapped ring, 719 keys
        win(attn(4, 1, 64, 1, 100, 0.9, true), 32, 32), win(attn(8, 1, 16, 8, 77, 0.6, true, true), 20, 27),
        win(attn(2, 2, 32, 1, 70, -0.5, true), 1), win(attn(4, 2, 16, 3, 130, 1.2, true), 131),
        win(attn(8, 1, 64, 8, 3000, 0.6, true), 512, 519)})  // Phi-4-flash's window, long split decode
    b.add(s);
  // The same over a Q8_0 KV cache (Phi-4-mini-flash's rings and shared cache with SessionOptions::kv_cache q8_0):
  // a window over a linear cache, chunks and decode steps over wrapped rings, one block per row (D = 16) and the
  // model's D = 64. Seeds after every other case's.
  for (P s : {win(attn(4, 2, 16, 33, 0, 0.7, false), 8), win(attn(4, 2, 16, 13, 40, -0.9, false), 10, 22),
              win(attn(2, 1, 64, 20, 100, 0.5, false), 70, 89), win(attn(4, 1, 64, 1, 100, 0.9, true), 32, 32),
              win(attn(8, 1, 16, 8, 77, 0.6, true, true), 20, 27)}) {
    s.kv_q8 = true;
    b.add(s);
  }
  return b.take();
}

// The model's attention (op_registry.cpp, model_shape_cases; attn_model_cases), over a Q8_0 KV cache too where its
// cache rows (2D) hold Q8_0 blocks.
OpCases diff_attn_model_cases(const ModelShape& m) {
  const bool q8 = kv_format_problem(KvFormat::q8_0, 2 * m.head_dim).empty();
  return attn_model_cases<DiffAttnCase>(m, 900, attn, {0.6, -0.4, 0.9}, q8);
}

}  // namespace diffvk::bench
