// diffvk_bench: the rope_kv op's cases (RoPE on q and k, then the KV-cache append; the (pos0, rows) chunks
// recorded in order into one program: prefill, chunked prefill, decode), its table, its float64 reference
// and its record call.
#include <tuple>

#include "bench/op_run_impl.hpp"
#include "ops/rope_kv.hpp"

namespace diffvk::bench {

using namespace op_detail;

struct RopeKvCaseParams {
  uint32_t H = 0, Hkv = 0, D = 0, capacity = 0;       // heads, key/value groups, half width, cache capacity
  std::vector<std::pair<uint32_t, uint32_t>> chunks;  // (pos0, rows), recorded in order
  uint32_t rows = 0;                                  // the chunks' rows in all
  bool kv_q8 = false;                                 // a Q8_0 KV cache, against GGUF's Q8_0 of the exact values
  uint32_t wg_limit_x = 0, wg_limit_y = 0;            // capped workgroup counts (grid-stride loops); 0 = the device's
  bool ring = false;                                  // a ring cache: position p at row p mod capacity
  bool rope = true;                                   // false: no rotation (q copied, K appended as is; no table)
};

namespace {
void prepare_rope_kv(Device& dev, RopeKvKernel& kernel, const RopeKvCaseParams& c, uint64_t seed, Prepared& p) {
  constexpr double kTheta = 10000.0;
  const bool f16 = dev.fp16();
  const size_t es = storage_bytes(f16);
  const uint32_t H = c.H, Hkv = c.Hkv, D = c.D, qw = 2 * H * D, kw = 2 * Hkv * D, width = qw + 2 * kw;
  const size_t cache_elems = size_t(Hkv) * c.capacity * 2 * D;
  std::mt19937_64 rng(seed);
  // Pre-filled cache pattern: everything outside the appended rows must survive bit for bit.
  auto kpat = rounded(uniform(rng, cache_elems, -5, 5), f16), vpat = rounded(uniform(rng, cache_elems, -5, 5), f16);
  // Q8_0 KV cache: the pattern as Q8_0 blocks (every row), and the appended rows as GGUF's Q8_0 of the exact values.
  const uint32_t crows = Hkv * c.capacity, cw = 2 * D;
  const std::vector<uint8_t> kq = c.kv_q8 ? q8_cache(kpat, cw, 1, crows, crows, cw) : std::vector<uint8_t>{};
  const std::vector<uint8_t> vq = c.kv_q8 ? q8_cache(vpat, cw, 1, crows, crows, cw) : std::vector<uint8_t>{};
  std::vector<double> kexp = kpat, vexp = vpat;
  std::vector<bool> written(cache_elems, false);
  uint32_t max_pos = 0;
  for (const auto& [pos0, rows] : c.chunks) max_pos = std::max(max_pos, pos0 + rows);
  const auto table = rope_table(max_pos + 3, D, kTheta);  // a few spare positions

  Arena& a = p.arena;
  const VkDeviceSize tb = table.size() * 4, cb = c.kv_q8 ? kq.size() : cache_elems * es;
  const VkDeviceSize to = a.take(tb), ko = a.take(cb), vo = a.take(cb);
  struct Chunk {
    std::vector<double> qkv, qexp;
    VkDeviceSize in_off, q_off;
  };
  std::vector<Chunk> chunks;
  for (const auto& [pos0, rows] : c.chunks) {
    Chunk ch;
    ch.qkv = rounded(uniform(rng, size_t(rows) * width, -3, 3), f16);
    std::vector<double> q(size_t(rows) * qw), k(size_t(rows) * kw), v(size_t(rows) * kw);
    for (uint32_t r = 0; r < rows; ++r) {
      const double* row = &ch.qkv[size_t(r) * width];
      std::copy(row, row + qw, &q[size_t(r) * qw]);
      std::copy(row + qw, row + qw + kw, &k[size_t(r) * kw]);
      std::copy(row + qw + kw, row + width, &v[size_t(r) * kw]);
    }
    if (c.rope) {
      ref::rope_rows(q, int(rows), int(2 * H), int(D), int(pos0), kTheta);
      ref::rope_rows(k, int(rows), int(2 * Hkv), int(D), int(pos0), kTheta);
    }
    for (uint32_t r = 0; r < rows; ++r)
      for (uint32_t g = 0; g < Hkv; ++g)
        for (uint32_t e = 0; e < 2 * D; ++e) {  // a later chunk's row replaces an earlier one's (a ring wraps)
          const size_t dst = (size_t(g) * c.capacity + (c.ring ? (pos0 + r) % c.capacity : pos0 + r)) * 2 * D + e;
          kexp[dst] = k[size_t(r) * kw + size_t(g) * 2 * D + e];
          vexp[dst] = v[size_t(r) * kw + size_t(g) * 2 * D + e];
          written[dst] = true;
        }
    ch.qexp = std::move(q);
    ch.in_off = a.take(ch.qkv.size() * es);
    ch.q_off = a.take(ch.qexp.size() * es);
    chunks.push_back(std::move(ch));
  }
  a.create(dev, "op case rope_kv");
  a.buf->upload(to, table.data(), tb);
  for (const Chunk& ch : chunks) a.buf->upload(ch.in_off, pack(ch.qkv, f16).data(), ch.qkv.size() * es);
  kernel.limit_workgroups_for_testing(c.wg_limit_x, c.wg_limit_y);
  p.prog = std::make_unique<Program>(dev, "op case rope_kv", p.timestamps);
  RopeKvParams rp;  // the chunks differ in pos0 and rows only
  std::tie(rp.H, rp.Hkv, rp.D, rp.capacity) = std::tie(H, Hkv, D, c.capacity);
  rp.ring = c.ring ? 1 : 0, rp.rope = c.rope ? 1 : 0;
  for (size_t i = 0; i < chunks.size(); ++i) {
    std::tie(rp.pos0, rp.rows) = c.chunks[i];
    kernel.record(*p.prog, a.range(chunks[i].in_off, chunks[i].qkv.size() * es),
                  c.rope ? a.range(to, tb) : BufferRange{}, a.range(chunks[i].q_off, chunks[i].qexp.size() * es),
                  a.range(ko, cb), a.range(vo, cb), rp);
  }
  kernel.limit_workgroups_for_testing(0, 0);
  p.detail = strf("wg=%u", kernel.workgroup_size());

  // Checked: every q_out value, then the appended K rows, then the appended V rows (a copy: exact).
  std::vector<float> steps;  // Q8_0: elements that may round either way (K's, then V's)
  if (c.kv_q8) {             // rows rounded through Q8_0 as the kernel quantizes them (the rest keeps the pattern)
    steps = q8_boundary_steps(kexp, written, cw);
    const std::vector<float> vs = q8_boundary_steps(vexp, written, cw);
    steps.insert(steps.end(), vs.begin(), vs.end());
    q8_cache(kexp, cw, 1, crows, crows, cw);
    q8_cache(vexp, cw, 1, crows, crows, cw);
  }
  for (const Chunk& ch : chunks) p.expect.insert(p.expect.end(), ch.qexp.begin(), ch.qexp.end());
  for (const auto* e : {&kexp, &vexp})
    for (size_t i = 0; i < cache_elems; ++i)
      if (written[i]) p.expect.push_back((*e)[i]);
  Buffer* buf = a.buf.get();
  const auto kbytes = c.kv_q8 ? kq : pack(kpat, f16), vbytes = c.kv_q8 ? vq : pack(vpat, f16);
  const bool q8 = c.kv_q8;
  std::vector<std::pair<VkDeviceSize, VkDeviceSize>> qs;
  for (const Chunk& ch : chunks) qs.push_back({ch.q_off, ch.qexp.size() * es});
  p.reset = [=] {
    buf->upload(ko, kbytes.data(), cb);
    buf->upload(vo, vbytes.data(), cb);
    for (const auto& [off, n] : qs) buf->fill(off, n, kPoison);
  };
  const std::vector<double> expect = p.expect;
  p.out_off = 0, p.out_bytes = a.size;  // the whole arena (q_out, both caches) must replay bit for bit
  p.extract = [=](const std::vector<uint8_t>& b, size_t& pad) {
    std::vector<float> got;
    for (const auto& [off, n] : qs)
      for (size_t i = 0; i < n / es; ++i) got.push_back(value_at(b, off / es + i, es));
    const size_t first = got.size();
    for (const auto& [off, pat] : {std::make_pair(ko, &kbytes), std::make_pair(vo, &vbytes)}) {
      if (q8)
        check_q8_cache(b, off, *pat, written, crows, cw, got, pad);
      else
        check_cache(b, off, *pat, written, es, got, pad);
    }
    if (q8) accept_boundary_flips(got, expect, first, steps);
    return got;
  };
  p.bytes = uint64_t(c.rows) * width * es + uint64_t(c.rows) * (qw + 2 * kw) * es + uint64_t(c.rows) * (D / 2) * 8;
  p.flops = 6.0 * double(c.rows) * (qw + kw) / 2;
}
}  // namespace

class RopeKvCase final : public CaseOf<RopeKvCase, RopeKvCaseParams> {
 public:
  const char* op() const override { return "rope_kv"; }
  RowShape row_shape() const override { return {p.rows, p.H, p.D}; }

  std::string describe() const override {
    std::string s = precision_prefix(fp16) + strf("H=%u/%u D=%u capacity=%u", p.H, p.Hkv, p.D, p.capacity);
    for (const auto& [pos0, rows] : p.chunks) s += strf(" [%u+%u]", pos0, rows);
    s += wg_limit_name(p.wg_limit_x, p.wg_limit_y);
    if (p.kv_q8) s += " kv=q8_0";
    if (p.ring) s += " ring";
    if (!p.rope) s += " no-rope";
    return s;
  }

  void prepare(Device& dev, KernelCache& kernels, bool, Prepared& pr) const override {
    RopeKvKernel& kernel = kernels.get<RopeKvKernel>(p.kv_q8 ? "rope_kv q8_0" : "rope_kv", [&] {
      return std::make_unique<RopeKvKernel>(dev, options_for(dev, true), p.kv_q8 ? KvFormat::q8_0 : KvFormat::storage);
    });
    prepare_rope_kv(dev, kernel, p, seed, pr);
  }
};

namespace {
RopeKvCaseParams rope(uint32_t H, uint32_t Hkv, uint32_t D, uint32_t capacity,
                      std::vector<std::pair<uint32_t, uint32_t>> chunks) {
  RopeKvCaseParams c;
  c.H = H, c.Hkv = Hkv, c.D = D, c.capacity = capacity, c.chunks = std::move(chunks);
  for (const auto& ch : c.chunks) c.rows += ch.second;
  return c;
}
}  // namespace

OpCases rope_kv_cases(OpMode mode) {
  CaseTable<RopeKvCase> b(9100);
  using P = RopeKvCaseParams;
  if (mode == OpMode::bench) {
    b.add(rope(16, 4, 64, 4096, {{2047, 1}}));  // a decode step
    b.add(rope(16, 4, 64, 4096, {{0, 512}}));   // a prefill chunk
    return b.take();
  }
  // Cache rows outside [pos0, pos0 + rows) must keep their pre-filled pattern bit for bit.
  const P shapes[] = {
      rope(4, 2, 16, 8, {{0, 5}}),     // prefill from 0, rows after it untouched
      rope(4, 2, 32, 16, {{3, 7}}),    // chunk after a prefix
      rope(8, 1, 16, 50, {{10, 33}}),  // GQA 8:1
      rope(2, 2, 64, 20, {{17, 1}}),   // decode step
      rope(2, 2, 32, 9, {{0, 9}}),     // fills the cache exactly
      rope(8, 1, 64, 12, {{5, 3}}),
      rope(4, 2, 64, 140, {{2, 130}}),                         // many rows
      rope(2, 2, 16, 24, {{0, 6}, {6, 4}, {10, 1}, {11, 1}}),  // prefill, chunked prefill, two decode steps
  };
  for (const P& s : shapes) b.add(s);
  // Grid-stride loops: workgroup counts capped below the device limit.
  P capped = rope(8, 1, 32, 40, {{4, 9}});
  capped.wg_limit_x = 1, capped.wg_limit_y = 2;
  b.add(capped);
  // A ring cache (position p at row p mod capacity: a sliding-window layer's), chunks that wrap it, with and without
  // RoPE (Phi-4-mini-flash has none), Q8_0 too.
  P ring = rope(4, 2, 16, 7, {{0, 5}, {5, 4}, {9, 1}, {10, 1}, {11, 6}}), plain = ring;
  ring.ring = plain.ring = true, plain.rope = false;
  b.add(ring);
  b.add(plain);
  plain.kv_q8 = true;
  b.add(plain);
  // Q8_0 KV cache: rows of 2D = 32 (one block, a padded scale word), 64, 96 (an odd
  // block count), 128; chunked prefill and decode; grid-stride loops.
  for (P s : {rope(4, 2, 16, 8, {{0, 5}}), rope(8, 1, 32, 50, {{10, 33}}), rope(2, 2, 48, 20, {{17, 1}}),
              rope(4, 2, 64, 24, {{0, 6}, {6, 4}, {10, 1}}), rope(8, 1, 32, 40, {{4, 9}})}) {
    s.kv_q8 = true;
    if (s.chunks.size() == 1 && s.chunks[0].first == 4) s.wg_limit_x = 1, s.wg_limit_y = 2;
    b.add(s);
  }
  return b.take();
}

}  // namespace diffvk::bench
