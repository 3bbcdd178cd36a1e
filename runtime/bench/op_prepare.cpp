// diffvk_bench: the preparations of the elementwise and cache ops' cases (head_rmsnorm, silu_mul, embed,
// rope_kv, kv_shift) for OpRunner (op_run.cpp): inputs, the float64 reference, the recorded program, what to check.
#include <limits>

#include "bench/op_run_impl.hpp"
#include "ops/linear_quant.hpp"

namespace diffvk::bench::op_detail {

// ---------------------------------------------------------------- head_rmsnorm
void prepare_head_rmsnorm(Device& dev, const HeadRmsNormKernel& kernel, const OpCase& c, Prepared& p) {
  const bool f16 = dev.fp16(), x32 = c.x_f32;
  const uint32_t heads = c.in, D = c.out, width = 2 * D, stride = heads * width;
  std::mt19937_64 rng(c.seed);
  auto x = uniform(rng, size_t(c.rows) * stride, x32 ? -3e5 : -3.0, x32 ? 3e5 : 3.0);  // float32 x beyond fp16's range
  x = x32 ? ref::round_to_f32(x) : rounded(x, f16);
  const auto w = rounded(uniform(rng, width, 0.5, 1.5), f16);
  const int depth = int(rng() % 24);
  const double lambda_init = ref::lambda_init(depth);
  p.expect = ref::head_rmsnorm(x, int(c.rows), int(heads), int(D), w, lambda_init);

  const size_t es = storage_bytes(f16);
  const VkDeviceSize xb = x.size() * (x32 ? 4 : es), wb = w.size() * es, yb = x.size() * es;
  Arena& a = p.arena;
  const VkDeviceSize xo = a.take(xb), wo = a.take(wb), yo = a.take(yb);
  a.create(dev, "op case head_rmsnorm");
  a.buf->upload(xo, pack(x, f16 && !x32).data(), xb);
  a.buf->upload(wo, pack(w, f16).data(), wb);
  p.prog = std::make_unique<Program>(dev, "op case head_rmsnorm", p.timestamps);
  kernel.record(*p.prog, a.range(xo, xb), a.range(wo, wb), a.range(yo, yb),
                HeadRmsNormParams{c.rows, heads, width, stride, float(1.0 - lambda_init), 1e-5f}, x32 ? Elem::f32 : Elem::storage);
  p.detail = strf("wg=%u", kernel.workgroup_size());
  dense_output(p, yo, yb, x.size(), es);
  p.bytes = xb + wb + yb;
  p.flops = 5.0 * double(x.size());
}

// ---------------------------------------------------------------- silu_mul
void prepare_silu_mul(Device& dev, const SiluMulKernel& kernel, const OpCase& c, Prepared& p) {
  const bool f16 = dev.fp16();
  const uint32_t I = c.out;
  std::mt19937_64 rng(c.seed);
  const auto gu = rounded(uniform(rng, size_t(c.rows) * 2 * I, -4, 4), f16);
  p.expect.resize(size_t(c.rows) * I);
  for (uint32_t r = 0; r < c.rows; ++r)
    for (uint32_t i = 0; i < I; ++i) {
      const double g = gu[size_t(r) * 2 * I + i], u = gu[size_t(r) * 2 * I + I + i];
      p.expect[size_t(r) * I + i] = g / (1.0 + std::exp(-g)) * u;
    }
  const size_t es = storage_bytes(f16);
  const VkDeviceSize gb = gu.size() * es, ab = p.expect.size() * es;
  Arena& a = p.arena;
  const VkDeviceSize go = a.take(gb), ao = a.take(ab);
  a.create(dev, "op case silu_mul");
  a.buf->upload(go, pack(gu, f16).data(), gb);
  p.prog = std::make_unique<Program>(dev, "op case silu_mul", p.timestamps);
  kernel.record(*p.prog, a.range(go, gb), a.range(ao, ab), c.rows, I);
  dense_output(p, ao, ab, p.expect.size(), es);
  p.bytes = gb + ab;
  p.flops = 6.0 * double(p.expect.size());
}

// ---------------------------------------------------------------- embed (whole table, or split into parts)
void prepare_embed(Device& dev, const EmbedKernel& kernel, const OpCase& c, Prepared& p) {
  const bool f16 = dev.fp16();
  const uint32_t E = c.out, vocab = c.in, parts = std::max<uint32_t>(1, std::min(c.parts, vocab));
  std::mt19937_64 rng(c.seed);
  auto table = rounded(uniform(rng, size_t(vocab) * E, -2, 2), f16);
  // A quantized table (c.weights q8_0 / q4_0): its GGUF blocks, and the table becomes their dequantized values.
  const bool quant = c.weights != QuantType::f16;
  std::vector<uint8_t> blocks;
  const size_t rb = quant ? quant_row_bytes(c.weights, E) : 0;
  if (quant) {
    blocks.resize(size_t(vocab) * rb);
    std::vector<float> row(E);
    for (uint32_t v = 0; v < vocab; ++v) {
      for (uint32_t e = 0; e < E; ++e) row[e] = float(table[size_t(v) * E + e]);
      quantize_row(c.weights, row.data(), E, blocks.data() + v * rb);
      dequantize_row(c.weights, blocks.data() + v * rb, E, row.data());
      for (uint32_t e = 0; e < E; ++e) table[size_t(v) * E + e] = row[e];
    }
  }
  std::vector<uint32_t> tokens(c.rows);
  for (auto& t : tokens) t = uint32_t(rng() % (vocab + vocab / 4 + 1));  // some ids past the vocabulary: zeros
  p.expect.assign(size_t(c.rows) * E, 0.0);
  for (uint32_t r = 0; r < c.rows; ++r)
    if (tokens[r] < vocab)
      for (uint32_t e = 0; e < E; ++e) p.expect[size_t(r) * E + e] = table[size_t(tokens[r]) * E + e];
  const size_t es = storage_bytes(f16);
  Arena& a = p.arena;
  const VkDeviceSize tb = tokens.size() * 4, xb = p.expect.size() * 4;
  const VkDeviceSize to = a.take(tb), xo = a.take(xb);
  std::vector<std::pair<uint32_t, uint32_t>> part_rows;  // (first, rows)
  std::vector<VkDeviceSize> part_off;
  std::vector<std::vector<uint8_t>> part_bytes;  // each part's device bytes (storage type, or its quantized layout)
  const auto tbytes = quant ? std::vector<uint8_t>{} : pack(table, f16);
  for (uint32_t i = 0, first = 0; i < parts; ++i) {
    const uint32_t n = vocab / parts + (i < vocab % parts ? 1 : 0);
    part_rows.push_back({first, n});
    if (quant)
      part_bytes.push_back(pack_quant_matrix(c.weights, n, E, blocks.data() + size_t(first) * rb));
    else
      part_bytes.emplace_back(tbytes.begin() + size_t(first) * E * es, tbytes.begin() + size_t(first + n) * E * es);
    part_off.push_back(a.take(part_bytes.back().size()));
    first += n;
  }
  a.create(dev, "op case embed");
  a.buf->upload(to, tokens.data(), tb);
  for (uint32_t i = 0; i < parts; ++i) a.buf->upload(part_off[i], part_bytes[i].data(), part_bytes[i].size());
  p.prog = std::make_unique<Program>(dev, "op case embed", p.timestamps);
  if (parts == 1 && !quant)
    kernel.record(*p.prog, a.range(to, tb), a.range(part_off[0], tbytes.size()), a.range(xo, xb), c.rows, E, vocab);
  else
    for (uint32_t i = 0; i < parts; ++i)
      kernel.record_part(*p.prog, a.range(to, tb), a.range(part_off[i], part_bytes[i].size()), a.range(xo, xb), c.rows, E,
                         part_rows[i].second, part_rows[i].first, vocab, c.weights);
  dense_output(p, xo, xb, p.expect.size(), 4);  // x is float32 (the residual stream)
  p.bytes = tb + uint64_t(c.rows) * E * (es + 4);
  p.flops = 0;
}

// A KV cache of rope_kv / kv_shift at byte `off` of the downloaded arena: the elements the op writes
// (`written`) are appended to `got` in index order; every other one must still hold the pre-filled `pattern`
// bit for bit (each that does not counts in `pad`).
namespace {
void check_cache(const std::vector<uint8_t>& b, VkDeviceSize off, const std::vector<uint8_t>& pattern,
                 const std::vector<bool>& written, size_t es, std::vector<float>& got, size_t& pad) {
  for (size_t i = 0; i < written.size(); ++i) {
    if (written[i])
      got.push_back(value_at(b, off / es + i, es));
    else
      pad += std::memcmp(&b[off + i * es], pattern.data() + i * es, es) != 0;
  }
}

// A Q8_0 cache (ops/kv_format.hpp) of `rows` rows of `width`: the values of the elements marked in `written`
// are appended to got; every other quant byte, and the scales of every row with no element written, must
// equal the pattern's (pad counts those that differ).
void check_q8_cache(const std::vector<uint8_t>& b, VkDeviceSize off, const std::vector<uint8_t>& pattern, const std::vector<bool>& written,
                    uint32_t rows, uint32_t width, std::vector<float>& got, size_t& pad) {
  const std::vector<double> vals = q8_cache_values(&b[off], 1, rows, width);
  const uint64_t sb = uint64_t(kv_q8_scale_slots(width)) * 2, qb = uint64_t(rows) * width;
  for (uint64_t r = 0; r < rows; ++r) {
    for (uint64_t e = r * width; e < (r + 1) * width; ++e) {
      if (written[e])
        got.push_back(static_cast<float>(vals[e]));
      else
        pad += b[off + e] != pattern[e];
    }
    if (!written[r * width]) pad += std::memcmp(&b[off + qb + r * sb], &pattern[qb + r * sb], sb) != 0;
  }
}

// Q8_0 quantization on the device divides in fp32 without correct rounding (docs/maths.md "Q8_0 KV cache"),
// so a value whose x·(1/d) lies within 1e-3 of a rounding boundary may land on either side. For each
// element of `exact` (rows of `width` values, in order) marked in `written`: the block's binary16 step d
// when the element is that close to a boundary, else 0 (its quant must be the host's).
std::vector<float> q8_boundary_steps(const std::vector<double>& exact, const std::vector<bool>& written, uint32_t width) {
  std::vector<float> steps;
  for (size_t b0 = 0; b0 < exact.size(); b0 += 32) {
    float amax = 0;
    for (size_t i = b0; i < b0 + 32; ++i) amax = std::max(amax, std::fabs(static_cast<float>(exact[i])));
    const float d = amax / 127.0f, id = d != 0 ? 1.0f / d : 0.0f;
    for (size_t i = b0; i < b0 + 32; ++i) {
      if (!written[i]) continue;
      const float t = std::fabs(static_cast<float>(exact[i]) * id);
      steps.push_back(std::fabs(t - std::floor(t) - 0.5f) < 1e-3f ? half_to_float(float_to_half(d)) : 0.0f);
    }
  }
  (void)width;
  return steps;
}
// Replaces got[first + j] by expect[first + j] where steps[j] > 0 and they differ by at most that step (the other
// side of a rounding boundary).
void accept_boundary_flips(std::vector<float>& got, const std::vector<double>& expect, size_t first, const std::vector<float>& steps) {
  for (size_t j = 0; j < steps.size() && first + j < got.size() && first + j < expect.size(); ++j)
    if (steps[j] > 0 && std::fabs(got[first + j] - expect[first + j]) <= steps[j] * 1.001) got[first + j] = static_cast<float>(expect[first + j]);
}
}  // namespace

// ---------------------------------------------------------------- rope_kv (RoPE + KV-cache append, chunk by chunk)
void prepare_rope_kv(Device& dev, RopeKvKernel& kernel, const OpCase& c, Prepared& p) {
  constexpr double kTheta = 10000.0;
  const bool f16 = dev.fp16();
  const size_t es = storage_bytes(f16);
  const uint32_t H = c.in, Hkv = c.Hkv, D = c.out, qw = 2 * H * D, kw = 2 * Hkv * D, width = qw + 2 * kw;
  const size_t cache_elems = size_t(Hkv) * c.capacity * 2 * D;
  std::mt19937_64 rng(c.seed);
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
    ref::rope_rows(q, int(rows), int(2 * H), int(D), int(pos0), kTheta);
    ref::rope_rows(k, int(rows), int(2 * Hkv), int(D), int(pos0), kTheta);
    for (uint32_t r = 0; r < rows; ++r)
      for (uint32_t g = 0; g < Hkv; ++g)
        for (uint32_t e = 0; e < 2 * D; ++e) {
          const size_t dst = (size_t(g) * c.capacity + pos0 + r) * 2 * D + e;
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
  for (size_t i = 0; i < chunks.size(); ++i) {
    const auto [pos0, rows] = c.chunks[i];
    kernel.record(*p.prog, a.range(chunks[i].in_off, chunks[i].qkv.size() * es), a.range(to, tb),
                  a.range(chunks[i].q_off, chunks[i].qexp.size() * es), a.range(ko, cb), a.range(vo, cb),
                  RopeKvParams{rows, H, Hkv, D, pos0, c.capacity});
  }
  kernel.limit_workgroups_for_testing(0, 0);
  p.detail = strf("wg=%u", kernel.workgroup_size());

  // Checked: every q_out value, then the appended K rows, then the appended V rows (a copy: exact).
  std::vector<float> steps;  // Q8_0: elements that may round either way (K's, then V's)
  if (c.kv_q8) {  // rows rounded through Q8_0 as the kernel quantizes them (the rest keeps the pattern)
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

// ---------------------------------------------------------------- kv_shift (context shift of one cache, in place)
void prepare_kv_shift(Device& dev, KvShiftKernel& kernel, const OpCase& c, Prepared& p) {
  const bool f16 = dev.fp16();
  const size_t es = storage_bytes(f16);
  // two_d: the cache row width, 2D (DIFF V1: K1|K2) or D (c.v2: DIFF V2's caches)
  const uint32_t Hkv = c.Hkv, D = c.out, keep = c.pos0, d = c.rows, held = c.in, two_d = c.v2 ? D : 2 * D;
  const size_t cache_elems = size_t(Hkv) * c.capacity * two_d;
  std::mt19937_64 rng(c.seed);
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
            const uint64_t at = uint64_t(crows) * two_d + ((uint64_t(g) * c.capacity + pos) * kv_q8_scale_slots(two_d) + s) * 2;
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
        const double cs = table[(size_t(d) * (D / 2) + (e % D) / 2) * 2], sn = table[(size_t(d) * (D / 2) + (e % D) / 2) * 2 + 1];
        kexp.push_back(kpat[from] * cs + kpat[from + 1] * sn);
        kexp.push_back(kpat[from + 1] * cs - kpat[from] * sn);
        vexp.push_back(vpat[from]);
        vexp.push_back(vpat[from + 1]);
        moved[to] = moved[to + 1] = true;
      }
  const std::vector<float> steps = c.kv_q8 ? q8_boundary_steps(kexp, std::vector<bool>(kexp.size(), true), two_d) : std::vector<float>{};
  if (c.kv_q8 && !kexp.empty()) q8_cache(kexp, two_d, 1, uint32_t(kexp.size() / two_d), uint32_t(kexp.size() / two_d), two_d);
  Arena& a = p.arena;
  const VkDeviceSize tb = table.size() * 4, cb = c.kv_q8 ? kq.size() : cache_elems * es;
  const VkDeviceSize to = a.take(tb), ko = a.take(cb), vo = a.take(cb);
  a.create(dev, "op case kv_shift");
  a.buf->upload(to, table.data(), tb);
  kernel.limit_workgroups_for_testing(c.wg_limit_x, c.wg_limit_y);
  p.prog = std::make_unique<Program>(dev, "op case kv_shift", p.timestamps);
  kernel.record(*p.prog, a.range(ko, cb), a.range(vo, cb), a.range(to, tb), KvShiftParams{Hkv, D, c.capacity, keep, d, held, two_d});
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

}  // namespace diffvk::bench::op_detail
