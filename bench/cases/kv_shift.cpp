// diffvk_bench: the kv_shift op's cases (the context shift of one KV cache, in place: of the `held` rows,
// [keep, keep + discard) are dropped, the rest moved down and K re-rotated), its table, its float64
// reference and its record call.
#include <limits>

#include <tuple>

#include "bench/op_run_impl.hpp"
#include "ops/kv_shift.hpp"
#include "ops/rope_kv.hpp"

namespace diffvk::bench {

using namespace op_detail;

struct KvShiftCaseParams {
  uint32_t Hkv = 0, D = 0, capacity = 0;     // key/value groups, half width (v2: head width), cache capacity
  uint32_t held = 0, keep = 0, discard = 0;  // of the held rows, [keep, keep + discard) dropped
  bool v2 = false;                           // DIFF V2's caches: rows of D (one head per row) instead of 2D
  bool kv_q8 = false;                        // a Q8_0 KV cache: K blocks re-rotated and quantized again, V copied
  uint32_t wg_limit_x = 0, wg_limit_y = 0;   // capped workgroup counts (grid-stride loops); 0 = the device's
};

namespace {
void prepare_kv_shift(Device& dev, KvShiftKernel& kernel, const KvShiftCaseParams& c, uint64_t seed, Prepared& p) {
  const bool f16 = dev.fp16();
  const size_t es = storage_bytes(f16);
  // two_d: the cache row width, 2D (DIFF V1: K1|K2) or D (c.v2: DIFF V2's caches)
  const uint32_t Hkv = c.Hkv, D = c.D, keep = c.keep, d = c.discard, held = c.held, two_d = c.v2 ? D : 2 * D;
  const size_t cache_elems = size_t(Hkv) * c.capacity * two_d;
  std::mt19937_64 rng(seed);
  auto kpat = rounded(uniform(rng, cache_elems, -5, 5), f16), vpat = rounded(uniform(rng, cache_elems, -5, 5), f16);
  // The dropped rows are never read: poisoned (NaN), so rows the op should write and does not are caught.
  for (uint32_t g = 0; g < Hkv; ++g)
    for (uint32_t pos = keep; pos < keep + d; ++pos)
      for (uint32_t e = 0; e < two_d; ++e) {
        const size_t at = (size_t(g) * c.capacity + pos) * two_d + e;
        kpat[at] = vpat[at] = c.kv_q8 ? 0.0 : std::numeric_limits<double>::quiet_NaN();
      }
  // Q8_0 KV cache: the pattern as Q8_0 blocks; the dropped rows' scales NaN (poison).
  const uint32_t crows = Hkv * c.capacity;
  std::vector<uint8_t> kq = c.kv_q8 ? q8_cache(kpat, two_d, 1, crows, crows, two_d) : std::vector<uint8_t>{};
  std::vector<uint8_t> vq = c.kv_q8 ? q8_cache(vpat, two_d, 1, crows, crows, two_d) : std::vector<uint8_t>{};
  if (c.kv_q8)
    for (uint32_t g = 0; g < Hkv; ++g)
      for (uint32_t pos = keep; pos < keep + d; ++pos)
        for (uint32_t s = 0; s < kv_q8_scale_slots(two_d); ++s)
          for (auto* img : {&kq, &vq}) {
            const uint64_t at =
                uint64_t(crows) * two_d + ((uint64_t(g) * c.capacity + pos) * kv_q8_scale_slots(two_d) + s) * 2;
            (*img)[at] = 0x00, (*img)[at + 1] = 0x7e;  // fp16 NaN
          }
  const auto table = rope_table(d + 1, D, 10000.0);  // rows 0 ... d: the kernel reads row d
  // The moved rows: K rotated by -d with the table's float (cos, sin) in double, V copied.
  std::vector<double> kexp, vexp;
  std::vector<bool> moved(cache_elems, false);
  for (uint32_t g = 0; g < Hkv; ++g)
    for (uint32_t pos = keep; pos + d < held; ++pos)
      for (uint32_t e = 0; e < two_d; e += 2) {
        const size_t to = (size_t(g) * c.capacity + pos) * two_d + e, from = to + size_t(d) * two_d;
        const double cs = table[(size_t(d) * (D / 2) + (e % D) / 2) * 2],
                     sn = table[(size_t(d) * (D / 2) + (e % D) / 2) * 2 + 1];
        kexp.push_back(kpat[from] * cs + kpat[from + 1] * sn);
        kexp.push_back(kpat[from + 1] * cs - kpat[from] * sn);
        vexp.push_back(vpat[from]);
        vexp.push_back(vpat[from + 1]);
        moved[to] = moved[to + 1] = true;
      }
  const std::vector<float> steps =
      c.kv_q8 ? q8_boundary_steps(kexp, std::vector<bool>(kexp.size(), true), two_d) : std::vector<float>{};
  if (c.kv_q8 && !kexp.empty())
    q8_cache(kexp, two_d, 1, uint32_t(kexp.size() / two_d), uint32_t(kexp.size() / two_d), two_d);
  Arena& a = p.arena;
  const VkDeviceSize tb = table.size() * 4, cb = c.kv_q8 ? kq.size() : cache_elems * es;
  const VkDeviceSize to = a.take(tb), ko = a.take(cb), vo = a.take(cb);
  a.create(dev, "op case kv_shift");
  a.buf->upload(to, table.data(), tb);
  kernel.limit_workgroups_for_testing(c.wg_limit_x, c.wg_limit_y);
  p.prog = std::make_unique<Program>(dev, "op case kv_shift", p.timestamps);
  KvShiftParams sp;
  std::tie(sp.Hkv, sp.D, sp.capacity) = std::tie(Hkv, D, c.capacity);
  sp.keep = keep;
  sp.discard = d;
  sp.end = held;
  sp.row = two_d;
  kernel.record(*p.prog, a.range(ko, cb), a.range(vo, cb), a.range(to, tb), sp);
  kernel.limit_workgroups_for_testing(0, 0);
  p.detail = strf("wg=%u", kernel.workgroup_size());
  p.expect = kexp;
  p.expect.insert(p.expect.end(), vexp.begin(), vexp.end());
  Buffer* buf = a.buf.get();
  const auto kbytes = c.kv_q8 ? kq : pack(kpat, f16), vbytes = c.kv_q8 ? vq : pack(vpat, f16);
  const bool q8 = c.kv_q8;
  p.reset = [=] {
    buf->upload(ko, kbytes.data(), cb);
    buf->upload(vo, vbytes.data(), cb);
  };
  const std::vector<double> expect = p.expect;
  p.out_off = 0, p.out_bytes = a.size;  // both caches must replay bit for bit
  // Checked: the moved K rows, then the moved V rows (a copy: within the tolerance, in fact exact); every other
  // row (below keep, and from held - discard on: never written) keeps the pattern bit for bit.
  p.extract = [=](const std::vector<uint8_t>& b, size_t& pad) {
    std::vector<float> got;
    for (const auto& [off, pat] : {std::make_pair(ko, &kbytes), std::make_pair(vo, &vbytes)}) {
      if (q8)
        check_q8_cache(b, off, *pat, moved, crows, two_d, got, pad);
      else
        check_cache(b, off, *pat, moved, es, got, pad);
    }
    if (q8) accept_boundary_flips(got, expect, 0, steps);  // the K values come first
    return got;
  };
  const uint64_t moved_rows = held > keep + d ? held - keep - d : 0;
  p.bytes = 2 * 2 * moved_rows * Hkv * two_d * es;  // K and V, read and written
  p.flops = 6.0 * double(moved_rows) * Hkv * D;
}
}  // namespace

class KvShiftCase final : public CaseOf<KvShiftCase, KvShiftCaseParams> {
 public:
  const char* op() const override { return "kv_shift"; }
  RowShape row_shape() const override { return {p.discard, p.held, p.D}; }

  std::string describe() const override {
    std::string s = precision_prefix(fp16) + strf("%sHkv=%u D=%u capacity=%u held=%u keep=%u discard=%u",
                                                  p.v2 ? "v2 " : "", p.Hkv, p.D, p.capacity, p.held, p.keep, p.discard);
    s += wg_limit_name(p.wg_limit_x, p.wg_limit_y);
    if (p.kv_q8) s += " kv=q8_0";
    return s;
  }

  void prepare(Device& dev, KernelCache& kernels, bool, Prepared& pr) const override {
    KvShiftKernel& kernel = kernels.get<KvShiftKernel>(p.kv_q8 ? "kv_shift q8_0" : "kv_shift", [&] {
      return std::make_unique<KvShiftKernel>(dev, options_for(dev, true), p.kv_q8 ? KvFormat::q8_0 : KvFormat::storage);
    });
    prepare_kv_shift(dev, kernel, p, seed, pr);
  }
};

namespace {
KvShiftCaseParams shift(uint32_t Hkv, uint32_t D, uint32_t capacity, uint32_t held, uint32_t keep, uint32_t discard) {
  KvShiftCaseParams c;
  c.Hkv = Hkv, c.D = D, c.capacity = capacity, c.held = held, c.keep = keep, c.discard = discard;
  return c;
}
}  // namespace

OpCases kv_shift_cases(OpMode mode) {
  CaseTable<KvShiftCase> b(9500);
  using P = KvShiftCaseParams;
  if (mode == OpMode::bench) {
    b.add(shift(4, 64, 4096, 4096, 4, 2046));  // the shift policy at a full 4096 context: half of what follows keep
    return b.take();
  }
  // Rows below keep and from held - discard on must keep their pre-filled pattern bit for bit.
  const P shapes[] = {
      shift(1, 8, 40, 40, 4, 18),  // one pass (the 18 moved rows fit in d)
      shift(3, 6, 37, 33, 5, 7),   // odd shapes; 21 moved rows in three ordered passes of <= 7
      shift(2, 16, 64, 64, 0, 1),  // d = 1: 63 passes, keep = 0
      shift(2, 32, 130, 129, 17, 50), shift(1, 64, 20, 12, 2, 10),  // nothing moves: the last 10 rows go
  };
  for (const P& s : shapes) b.add(s);
  P capped = shift(4, 16, 50, 45, 3, 20);  // grid-stride loops
  capped.wg_limit_x = 1, capped.wg_limit_y = 2;
  b.add(capped);
  // Q8_0 KV cache: K blocks re-rotated and quantized again, V copied (rows of 32, 96 and 128).
  for (P s : {shift(1, 16, 40, 40, 4, 18), shift(3, 48, 37, 33, 5, 7), shift(2, 64, 64, 64, 0, 1),
              shift(4, 16, 50, 45, 3, 20)}) {
    s.kv_q8 = true;
    if (s.Hkv == 4) s.wg_limit_x = 1, s.wg_limit_y = 2;
    b.add(s);
  }
  // DIFF V2's caches: rows of D (one head per row), f16/f32 and Q8_0 (D = 32, 64, 96).
  for (P s : {shift(3, 6, 37, 33, 5, 7), shift(2, 16, 64, 64, 0, 1), shift(1, 32, 40, 40, 4, 18),
              shift(2, 96, 30, 29, 3, 11)}) {
    s.v2 = true;
    b.add(s);
    if (s.D % 32 == 0) {
      s.kv_q8 = true;
      b.add(s);
    }
  }
  return b.take();
}

}  // namespace diffvk::bench
