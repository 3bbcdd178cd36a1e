// Conformance of the decode step's fused q/k/v projection with RoPE and the KV-cache append as its
// epilogue (linear_row.comp: linear_row_rope, LinearKernel::record_row_rope), against the float64 reference on
// fresh random inputs: pro(x)·Wᵀ rounded to the storage type (what rope_kv would read back), rotated in
// float64. Odd and GQA shapes, both prologues, float32 x, vector and scalar loads, capped workgroup counts,
// the position from the dynamic buffer; Q8_0 and Q4_0 weights (QuantRowKernel::record_rope, against the
// dequantized values; the int8 path against its int8 activations, where the device has integer dot
// products); outputs poisoned first and every cache element the op must not touch checked bit for bit.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>

#include "gpu_test.hpp"
#include "io/quant.hpp"
#include "ops/linear.hpp"
#include "ops/linear_quant.hpp"
#include "ops/rope_kv.hpp"
#include "reference/diff_attn_ref.hpp"
#include "status_of.hpp"

using namespace diffvk;

namespace {
struct RopeRowCase {
  uint32_t E, H, Hkv, D, capacity;
  bool norm, x32, scalar = false;
  uint32_t wg_limit = 0;
  QuantType wq = QuantType::f16;
  bool int8 = false;   // quantized: the int8 dot-product path
  bool v2 = false;     // DIFF V2: H output heads = 2H query heads of D, H λ logits between q and k, caches of D
  uint32_t lanes = 0;  // forced lanes per lane group (row_lanes clamps it to whole RoPE pairs per group)
};

void run_case(Device& dev, Precision precision, const RopeRowCase& c, uint64_t seed) {
  const bool fp16 = precision == Precision::fp16;
  if (c.int8 && !dev.caps().integer_dot_product) {
    test::skip("device has no integer dot products; the int8 fused q/k/v case is not run");
    return;
  }
  LinearKernel kernel(dev, KernelOptions::for_device(dev));
  const QuantRowPath path = c.int8 ? QuantRowPath::int8_dot : QuantRowPath::dequant;
  const bool quant = c.wq != QuantType::f16;
  std::unique_ptr<QuantRowKernel> qk;
  if (quant)
    qk = std::make_unique<QuantRowKernel>(dev, KernelOptions::for_device(dev), std::vector<QuantType>{c.wq}, &path);
  if (quant && c.wg_limit) qk->limit_workgroups_for_testing(c.wg_limit);
  if (c.scalar) kernel.force_row_scalar_for_testing(true);
  if (c.wg_limit) kernel.limit_workgroups_for_testing(c.wg_limit, 0);
  if (c.lanes) {
    kernel.force_row_lanes_for_testing(c.lanes);
    if (quant) qk->force_row_lanes_for_testing(c.lanes);
  }
  // V1: [q 2H·D | k 2Hkv·D | v], cache rows 2D. V2: [q 2H·D | λ H | k Hkv·D | v], cache rows D; q_out = q then λ.
  const uint32_t qcols = 2 * c.H * c.D, lcols = c.v2 ? c.H : 0, kcols = (c.v2 ? 1 : 2) * c.Hkv * c.D,
                 k0 = qcols + lcols;
  const uint32_t out = k0 + 2 * kcols, kw = (c.v2 ? 1 : 2) * c.D, ycols = qcols + lcols;
  auto round = [&](std::vector<double> v) { return fp16 ? ref::round_to_f16(v) : ref::round_to_f32(v); };
  const bool x32 = fp16 && c.x32;  // float32 x (the residual stream) on an fp16 device
  const auto x = x32 ? ref::round_to_f32(ref::random_normal(c.E, seed)) : round(ref::random_normal(c.E, seed));
  auto w = round(ref::random_normal(size_t(out) * c.E, seed + 1, 1.0 / std::sqrt(double(c.E))));
  std::vector<uint8_t> wdev;  // the weight's device bytes
  if (quant) {                // GGUF blocks; the reference sees their dequantized values
    const size_t rb = quant_row_bytes(c.wq, c.E);
    std::vector<uint8_t> blocks(size_t(out) * rb);
    std::vector<float> row(c.E);
    for (uint32_t n = 0; n < out; ++n) {
      for (uint32_t e = 0; e < c.E; ++e) row[e] = float(w[size_t(n) * c.E + e]);
      quantize_row(c.wq, row.data(), c.E, blocks.data() + n * rb);
      dequantize_row(c.wq, blocks.data() + n * rb, c.E, row.data());
      for (uint32_t e = 0; e < c.E; ++e) w[size_t(n) * c.E + e] = row[e];
    }
    wdev = pack_quant_matrix(c.wq, out, c.E, blocks.data());
  } else {
    wdev = test::pack(w, fp16);
  }
  const auto g = round(ref::random_normal(c.E, seed + 2, 0.3));
  const auto table = rope_table(c.capacity, c.D);
  const size_t es = storage_bytes(fp16), xs = x32 ? 4 : es;
  const uint64_t cache = uint64_t(c.Hkv) * c.capacity * kw * es;
  std::vector<uint8_t> xb(c.E * xs);
  if (x32)
    for (uint32_t i = 0; i < c.E; ++i) {
      const float f = static_cast<float>(x[i]);
      std::memcpy(&xb[i * 4], &f, 4);
    }
  else
    xb = test::pack(x, fp16);
  Buffer xbuf(dev, xb.size(), MemoryDomain::device, "x"), wbuf(dev, wdev.size(), MemoryDomain::device, "w"),
      gbuf(dev, c.E * es, MemoryDomain::device, "g"), tbuf(dev, table.size() * 4, MemoryDomain::device, "table"),
      qbuf(dev, ycols * es, MemoryDomain::device, "q"), kv(dev, 2 * cache + 256, MemoryDomain::device, "kv"),
      pos(dev, 16, MemoryDomain::device, "pos");
  xbuf.upload(0, xb.data(), xb.size());
  wbuf.upload(0, wdev.data(), wdev.size());
  gbuf.upload(0, test::pack(g, fp16).data(), c.E * es);
  tbuf.upload(0, table.data(), table.size() * 4);
  const BufferRange kc = kv.range(0, cache), vc = kv.range(cache + 256 - cache % 256, cache);
  LinearRowParams lp{c.E, out, c.norm ? RowPrologue::rmsnorm : RowPrologue::none, 1e-5f,
                     x32 ? Elem::f32 : Elem::storage};
  const RowRope rr{tbuf.range(), kc, vc, pos.range(0, 4), qcols, kcols, c.D, kw, c.capacity, 1, lcols};
  Program prog(dev, "linear_row_rope test");
  if (quant)
    qk->record_rope(prog, c.wq, xbuf.range(), wbuf.range(), qbuf.range(), lp, c.norm ? gbuf.range() : BufferRange{},
                    rr);
  else
    kernel.record_row_rope(prog, xbuf.range(), wbuf.range(), qbuf.range(), lp, c.norm ? gbuf.range() : BufferRange{},
                           rr);
  prog.finalize();

  // The reference row: pro(x)·Wᵀ, rounded to the storage type.
  double inv = 1.0;
  if (c.norm) {
    double ss = 0;
    for (double v : x) ss += v * v;
    inv = 1.0 / std::sqrt(ss / c.E + 1e-5);
  }
  std::vector<double> act(c.E), y(out);
  for (uint32_t e = 0; e < c.E; ++e) act[e] = x[e] * (c.norm ? g[e] : 1.0) * inv;
  if (c.int8)  // the kernel's int8 activations: Q8_0's rule per block of 32 (d = amax / 127, round half away)
    for (uint32_t b0 = 0; b0 < c.E; b0 += 32) {
      double amax = 0;
      for (uint32_t k = b0; k < b0 + 32; ++k) amax = std::max(amax, std::fabs(act[k]));
      const double d = amax / 127.0, id = d != 0 ? 1.0 / d : 0.0;
      for (uint32_t k = b0; k < b0 + 32; ++k) act[k] = std::round(act[k] * id) * d;
    }
  for (uint32_t n = 0; n < out; ++n) {
    double s = 0;
    for (uint32_t e = 0; e < c.E; ++e) s += act[e] * w[size_t(n) * c.E + e];
    y[n] = s;
  }
  y = round(y);
  for (uint32_t dyn : {0u, 3u, c.capacity - 2}) {  // position = 1 + dyn; the last one fills the final cache row
    const uint32_t p = 1 + dyn;
    pos.upload(0, &dyn, 4);
    qbuf.fill(0, ycols * es, test::kPoison);
    kv.fill(0, kv.size(), 0x5a5a5a5au);  // a pattern every untouched element must keep
    prog.run();
    auto rot = [&](uint32_t e, const std::vector<double>& row, uint32_t base) {  // RoPE of column e of a part at base
      const uint32_t i = (e % c.D) / 2, e0 = e & ~1u;
      const double cs = table[(size_t(p) * (c.D / 2) + i) * 2], sn = table[(size_t(p) * (c.D / 2) + i) * 2 + 1];
      const double x0 = row[base + e0], x1 = row[base + e0 + 1];
      return e % 2 ? x0 * sn + x1 * cs : x0 * cs - x1 * sn;
    };
    std::vector<double> expect;
    for (uint32_t e = 0; e < qcols; ++e) expect.push_back(rot(e, y, 0));
    for (uint32_t e = qcols; e < ycols; ++e) expect.push_back(y[e]);  // V2's λ logits, as computed
    std::vector<uint8_t> qgot(ycols * es), kvgot(kv.size());
    qbuf.download(0, qgot.data(), qgot.size());
    kv.download(0, kvgot.data(), kvgot.size());
    std::vector<double> got = test::unpack(qgot, fp16);
    size_t touched = 0;  // elements outside row p that changed
    for (int which = 0; which < 2; ++which) {
      const BufferRange& r = which ? vc : kc;
      const std::vector<double> all =
          test::unpack(std::vector<uint8_t>(kvgot.begin() + r.offset, kvgot.begin() + r.offset + cache), fp16);
      for (uint32_t gi = 0; gi < c.Hkv; ++gi)
        for (uint32_t row = 0; row < c.capacity; ++row)
          for (uint32_t col = 0; col < kw; ++col) {
            const size_t i = (size_t(gi) * c.capacity + row) * kw + col;
            if (row == p) {
              got.push_back(all[i]);
              const uint32_t e = gi * kw + col;
              expect.push_back(which ? y[k0 + kcols + e] : rot(e, y, k0));
            } else {
              touched += std::memcmp(&kvgot[r.offset + i * es], "\x5a\x5a\x5a\x5a", es) != 0;
            }
          }
    }
    const auto cmp = test::compare(got, expect);
    INFO(precision_name(precision) << " E=" << c.E << " H=" << c.H << "/" << c.Hkv << " D=" << c.D << " position " << p
                                   << (c.norm ? " rmsnorm" : "") << (x32 ? " x32" : "") << (c.scalar ? " scalar" : "")
                                   << " " << quant_type_name(c.wq) << (c.int8 ? " int8" : "") << (c.v2 ? " v2" : "")
                                   << " lanes " << c.lanes << ": " << cmp.summary());
    CHECK(test::within_spec(cmp, fp16));
    CHECK(touched == 0);
  }
}

void run_all(Precision precision) {
  if (precision == Precision::fp16 && !test::device_has_fp16()) {
    test::skip("device has no fp16 path; fp16 cases not run on this device");
    return;
  }
  uint64_t seed = precision == Precision::fp16 ? 9900 : 9800;
  const RopeRowCase cases[] = {
      {64, 2, 1, 16, 9, true, true},              // the model's form: norm prologue, float32 residual stream
      {96, 4, 2, 12, 7, true, false},             // D = 12, GQA 2:1, storage-type x
      {40, 1, 1, 20, 5, false, false},            // no prologue (a bare layer), in not a multiple of 8
      {256, 8, 2, 16, 6, true, true, true},       // scalar loads
      {128, 4, 4, 16, 5, true, false, false, 1},  // one workgroup grid-strides over every feature
      // Quantized weights (E a multiple of 32): dequantized in registers, then int8 dot products.
      {64, 2, 1, 16, 9, true, true, false, 0, QuantType::q8_0},
      {96, 4, 2, 12, 7, false, false, false, 0, QuantType::q4_0},
      {128, 4, 4, 16, 5, true, false, false, 1, QuantType::q4_0},
      {64, 2, 1, 16, 9, true, true, false, 0, QuantType::q8_0, true},
      {96, 4, 2, 12, 7, true, false, false, 0, QuantType::q4_0, true},
      // DIFF V2 (even H: the λ columns keep k's pairs in one workgroup): E != H·D, 1 and 2 pairs per KV head.
      {64, 2, 1, 24, 9, true, true, false, 0, QuantType::f16, false, true},
      {96, 4, 2, 16, 7, false, false, false, 0, QuantType::f16, false, true},
      {96, 2, 2, 32, 6, true, false, false, 1, QuantType::q8_0, false, true},
      {64, 4, 1, 8, 5, true, true, true, 0, QuantType::f16, false, true},
      // Forced lane groups: groups of 1, 2 and 4 lanes on consecutive features (pairs kept).
      {64, 2, 1, 16, 9, true, true, false, 0, QuantType::f16, false, false, 1},
      {40, 1, 1, 20, 5, false, false, false, 0, QuantType::f16, false, false, 2},
      {96, 4, 2, 12, 7, true, false, true, 1, QuantType::f16, false, false, 4},
      {64, 2, 1, 24, 9, true, true, false, 0, QuantType::f16, false, true, 2},
      {64, 2, 1, 16, 9, true, true, false, 0, QuantType::q8_0, false, false, 1},
      {96, 4, 2, 12, 7, false, false, false, 1, QuantType::q4_0, false, false, 2},
      {64, 2, 1, 16, 9, true, true, false, 0, QuantType::q8_0, true, false, 4},
      {96, 4, 2, 12, 7, true, false, false, 0, QuantType::q4_0, true, false, 1},
  };
  // One context for every case (a device per case cost most of this test under qemu); each case builds its own
  // kernels, so no test hook (scalar loads, workgroup caps) carries over.
  auto ctx = test::make_context(precision);
  for (const RopeRowCase& c : cases) run_case(ctx->device(), precision, c, seed++);
}
}  // namespace

TEST_CASE("linear_row_rope: against the float64 reference fp32") { run_all(Precision::fp32); }
TEST_CASE("linear_row_rope: against the float64 reference fp16") { run_all(Precision::fp16); }

TEST_CASE("linear_row_rope: shapes that are not [q | k | v] and overlapping outputs are refused") {
  auto ctx = test::make_context(Precision::fp32);
  Device& dev = ctx->device();
  LinearKernel kernel(dev, KernelOptions::for_device(dev));
  Buffer a(dev, 1 << 16, MemoryDomain::device, "a"), b(dev, 1 << 16, MemoryDomain::device, "b");
  Program prog(dev, "linear_row_rope errors");
  // E = 16, H = 1, Hkv = 1, D = 4: q 8, k 8, v 8 columns.
  const LinearRowParams lp{16, 24};
  const RowRope good{b.range(0, 4096), b.range(4096, 4096), b.range(8192, 4096), b.range(12288, 4), 8, 8, 4, 8, 16, 0};
  auto status = [&](LinearRowParams p, RowRope r, BufferRange q) {
    return test::status_of(
        [&] { kernel.record_row_rope(prog, a.range(0, 64), a.range(256, 24 * 16 * 4), q, p, {}, r); });
  };
  RowRope r = good;
  r.qcols = 6;  // not a whole number of D-wide sub-heads
  CHECK(status(lp, r, a.range(4096, 32)) == Status::invalid_argument);
  CHECK(status({16, 25}, good, a.range(4096, 32)) == Status::invalid_argument);  // out != q + 2k
  CHECK(status({16, 24, RowPrologue::silu_mul}, good, a.range(4096, 32)) == Status::invalid_argument);
  r = good;
  r.v_cache = b.range(4096, 4096);  // the caches overlap
  CHECK(status(lp, r, a.range(4096, 32)) == Status::invalid_argument);
  r = good;
  r.capacity = 1000;  // caches too small for the capacity
  CHECK(status(lp, r, a.range(4096, 32)) == Status::invalid_argument);
  CHECK(status(lp, good, b.range(12288, 32)) == Status::invalid_argument);  // q_out over the position
  r = good;
  r.lcols = 1;  // an odd count of DIFF V2 λ columns would split k's rotation pairs
  CHECK(status({16, 25}, r, a.range(4096, 36)) == Status::invalid_argument);
  CHECK(prog.op_count() == 0);
  CHECK(status(lp, good, a.range(4096, 32)) == Status::ok);
  CHECK(prog.op_count() == 1);
}
