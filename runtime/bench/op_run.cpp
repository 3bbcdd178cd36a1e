// diffvk_bench: OpRunner (op_cases.hpp) — inputs, the float64 reference, the poisoned run, the check,
// the replay, and (bench mode, after the check) the timing of one case of an op's table.

#include "bench/op_run_impl.hpp"
#include <map>
#include <tuple>

#include "diffvk/error.hpp"
#include "ops/embed.hpp"
#include "ops/head_rmsnorm.hpp"
#include "ops/rope_kv.hpp"
#include "ops/silu_mul.hpp"

namespace diffvk::bench {

using namespace op_detail;

struct OpRunner::Kernels {
  std::unique_ptr<LinearKernel> linear[2];  // [subgroup]
  std::unique_ptr<QuantRowKernel> qrow[2][2];  // [subgroup][int8_dot]: Q8_0 and Q4_0
  std::unique_ptr<HeadRmsNormKernel> norm[2];
  std::unique_ptr<SiluMulKernel> silu;
  std::unique_ptr<EmbedKernel> embed;
  std::unique_ptr<RopeKvKernel> rope[2];    // [kv_q8]
  std::unique_ptr<KvShiftKernel> shift[2];  // [kv_q8]
  std::map<std::tuple<uint32_t, uint32_t, int, bool>, std::unique_ptr<DiffAttnKernel>> attn, attn_v2;  // [(D, n_rep, subgroup, kv_q8)]
  std::unique_ptr<AttnProbsKernel> probs;
};

OpRunner::OpRunner(Device& device) : dev_(device), k_(std::make_unique<Kernels>()) {}
OpRunner::~OpRunner() = default;

namespace {

KernelOptions options_for(const Device& dev, bool subgroup) { return {dev.fp16(), subgroup && dev.subgroup_arithmetic()}; }

// The residual argument of a linear case: none, a separate range, or y itself (in place).
BufferRange residual_of(const OpCase& c, BufferRange y, BufferRange separate) {
  return c.residual == OpResidual::none ? BufferRange{} : c.residual == OpResidual::separate ? separate : y;
}

// ---------------------------------------------------------------- linear (matrix-matrix / matrix-vector)
// The linear kernels' test hooks for a case (undone after the run), and the case's program.
void start_linear_program(Device& dev, LinearKernel& kernel, const OpCase& c, Prepared& p, const char* name) {
  kernel.force_row_scalar_for_testing(c.scalar_loads);
  kernel.limit_workgroups_for_testing(c.wg_limit_x, c.wg_limit_y);
  kernel.force_row_lanes_for_testing(c.row_lanes);
  p.prog = std::make_unique<Program>(dev, name, p.timestamps);
}

// Quantized weights (c.weights q8_0 / q4_0): w becomes its GGUF blocks' dequantized values (what the
// reference sees) and `bytes` the device layout (ops/linear_quant.hpp); otherwise `bytes` = w packed.
std::vector<uint8_t> weight_bytes(const OpCase& c, bool f16, std::vector<double>& w) {
  if (c.weights == QuantType::f16) return pack(w, f16);
  const size_t rb = quant_row_bytes(c.weights, c.in);
  std::vector<uint8_t> blocks(size_t(c.out) * rb);
  std::vector<float> row(c.in);
  for (uint32_t n = 0; n < c.out; ++n) {
    for (uint32_t k = 0; k < c.in; ++k) row[k] = float(w[size_t(n) * c.in + k]);
    quantize_row(c.weights, row.data(), c.in, blocks.data() + n * rb);
    dequantize_row(c.weights, blocks.data() + n * rb, c.in, row.data());
    for (uint32_t k = 0; k < c.in; ++k) w[size_t(n) * c.in + k] = row[k];
  }
  return pack_quant_matrix(c.weights, c.out, c.in, blocks.data());
}

// The int8 paths' activations (c.int8_dot): Q8_0's rule per block of 32 of v[off, off + n) (d = amax / 127,
// q = round half away; the shaders' q8_0.glsl), the values replaced by q·d. In fp32 as the shaders compute it
// (d, 1/d and v·(1/d) rounded to float): a rounding in double put values that lie within an ulp of a half-step
// on the other side, one quantum off (seen in the 20 x 16384 matmul case, 9.5e-5 against the fp32 bound).
void int8_round_blocks(std::vector<double>& v, size_t off, uint32_t n) {
  for (size_t b0 = off; b0 < off + n; b0 += 32) {
    float amax = 0;
    for (size_t k = b0; k < b0 + 32; ++k) amax = std::max(amax, std::fabs(float(v[k])));
    const float d = amax / 127.0f, id = d != 0 ? 1.0f / d : 0.0f;
    for (size_t k = b0; k < b0 + 32; ++k) v[k] = double(std::round(float(v[k]) * id)) * double(d);
  }
}

void prepare_linear(Device& dev, LinearKernel& kernel, const OpCase& c, Prepared& p) {
  const bool f16 = dev.fp16(), y32 = c.y_f32;
  std::mt19937_64 rng(c.seed);
  const uint32_t xs = c.in + c.x_pad, ys = c.out + c.y_pad;
  const auto x = rounded(uniform(rng, size_t(c.rows) * xs, -1, 1), f16);
  const double ws = 1.7 / std::sqrt(double(c.in));
  auto w = rounded(uniform(rng, size_t(c.out) * c.in, -ws, ws), f16);
  const std::vector<uint8_t> wbytes = weight_bytes(c, f16, w);  // quantized: w becomes the dequantized values
  auto r = uniform(rng, size_t(c.rows) * ys, y32 ? -2e5 : -2.0, y32 ? 2e5 : 2.0);  // float32 residuals exceed fp16's range
  r = y32 ? ref::round_to_f32(r) : rounded(r, f16);
  std::vector<double> xd(size_t(c.rows) * c.in);
  for (uint32_t i = 0; i < c.rows; ++i)
    for (uint32_t k = 0; k < c.in; ++k) xd[size_t(i) * c.in + k] = x[size_t(i) * xs + k];
  if (c.int8_dot)  // the int8 matmul's activations, per row
    for (uint32_t i = 0; i < c.rows; ++i) int8_round_blocks(xd, size_t(i) * c.in, c.in);
  p.expect = ref::linear(xd, int(c.rows), int(c.in), w, int(c.out));
  if (c.residual != OpResidual::none)
    for (uint32_t i = 0; i < c.rows; ++i)
      for (uint32_t n = 0; n < c.out; ++n) p.expect[size_t(i) * c.out + n] += r[size_t(i) * ys + n];

  const size_t es = storage_bytes(f16), yes = y32 ? 4 : es;
  const VkDeviceSize xb = x.size() * es, wb = wbytes.size(), yb = r.size() * yes;  // y / r: full padded rows
  Arena& a = p.arena;
  const VkDeviceSize xo = a.take(xb), wo = a.take(wb), yo = a.take(yb), ro = a.take(yb);
  a.create(dev, "op case linear");
  const auto rbytes = pack(r, f16 && !y32);
  a.buf->upload(xo, pack(x, f16).data(), xb);
  a.buf->upload(wo, wbytes.data(), wb);
  a.buf->upload(ro, rbytes.data(), yb);

  start_linear_program(dev, kernel, c, p, "op case linear");
  const LinearParams lp{c.rows, c.in, c.out, xs, ys};
  const BufferRange ry = a.range(yo, yb);
  const BufferRange res = residual_of(c, ry, a.range(ro, yb));
  const Elem ye = y32 ? Elem::f32 : Elem::storage;
  if (c.int8_dot)
    kernel.record_quant_path(*p.prog, QuantRowPath::int8_dot, c.weights, a.range(xo, xb), a.range(wo, wb), ry, lp, res, ye);
  else if (c.weights != QuantType::f16 && c.variant >= 0)
    kernel.record_quant_variant(*p.prog, uint32_t(c.variant), c.weights, a.range(xo, xb), a.range(wo, wb), ry, lp, res, ye);
  else if (c.weights != QuantType::f16)
    kernel.record_quant(*p.prog, c.weights, a.range(xo, xb), a.range(wo, wb), ry, lp, res, ye);
  else if (c.variant < 0)
    kernel.record(*p.prog, a.range(xo, xb), a.range(wo, wb), ry, lp, res, ye);
  else
    kernel.record_variant(*p.prog, uint32_t(c.variant), a.range(xo, xb), a.range(wo, wb), ry, lp, res, ye);
  kernel.force_row_scalar_for_testing(false);
  kernel.limit_workgroups_for_testing(0, 0);

  const LinearTiles t = c.int8_dot                  ? kernel.candidates()[kLinearRegVariant]
                        : c.variant >= 0            ? kernel.candidates()[size_t(c.variant)]
                        : c.weights != QuantType::f16 ? choose_quant_linear_tiles(dev.caps(), c.rows, c.in, c.out)
                                                      : choose_linear_tiles(dev.caps(), c.rows, c.in, c.out, f16);
  p.detail = t.coop ? strf("coopmat %ux%ux%u wg=%u nsg=%u bm=%u bn=%u bk=%u variant=%u", t.cm, t.cn, t.ck, t.wg, t.nsg, t.bm, t.bn, t.bk, t.variant)
                    : strf("%s wg=%u bm=%u bn=%u bk=%u ku=%u rm=%u rn=%u variant=%u", t.vec ? "vec" : t.reg ? "reg" : "mm", t.wg, t.bm, t.bn,
                           t.bk, t.ku, t.rm, t.rn, t.variant);
  if (c.weights != QuantType::f16)
    p.detail += std::string(" ") + quant_type_name(c.weights) + (c.int8_dot ? " int8_dot" : " dequant");
  Buffer* buf = a.buf.get();
  const bool in_place = c.residual == OpResidual::in_place;
  p.reset = [=] {
    // Poison y; in place, y starts as r except in the stride padding, which stays poisoned.
    buf->fill(yo, yb, kPoison);
    if (in_place)
      for (uint32_t i = 0; i < c.rows; ++i) buf->upload(yo + size_t(i) * ys * yes, rbytes.data() + size_t(i) * ys * yes, size_t(c.out) * yes);
  };
  p.out_off = yo, p.out_bytes = yb;
  p.extract = [=](const std::vector<uint8_t>& b, size_t& pad) {
    std::vector<float> got(size_t(c.rows) * c.out);
    for (uint32_t i = 0; i < c.rows; ++i) {
      for (uint32_t n = 0; n < c.out; ++n) got[size_t(i) * c.out + n] = value_at(b, size_t(i) * ys + n, yes);
      for (uint32_t n = c.out; n < ys; ++n) pad += !poisoned(b, size_t(i) * ys + n, yes);
    }
    return got;
  };
  p.bytes = uint64_t(c.rows) * c.in * es + wb + uint64_t(c.rows) * c.out * yes * (c.residual == OpResidual::none ? 1 : 2);
  p.flops = 2.0 * c.rows * c.in * c.out;
}

// ---------------------------------------------------------------- linear_row (one row, fused prologues)

void prepare_linear_row(Device& dev, LinearKernel& kernel, QuantRowKernel& qk, const OpCase& c, Prepared& p) {
  const bool f16 = dev.fp16(), x32 = c.x_f32, y32 = c.y_f32;
  std::mt19937_64 rng(c.seed);
  const bool silu = c.pro == RowPrologue::silu_mul;
  const double xk = x32 ? 1e5 : 1.0, rk = y32 ? 1e5 : 1.0;  // float32 x / residual beyond fp16's 65504
  const uint32_t xn = silu ? 2 * c.in : c.in;
  auto x = uniform(rng, xn, (silu ? -4.0 : -3.0) * xk, 3.0 * xk);
  x = x32 ? ref::round_to_f32(x) : rounded(x, f16);
  const double ws = 1.7 / std::sqrt(double(c.in));
  auto w = rounded(uniform(rng, size_t(c.out) * c.in, -ws, ws), f16);
  const auto wbytes = weight_bytes(c, f16, w);
  const auto g = rounded(uniform(rng, c.in, 0.5, 1.5), f16);
  auto r = uniform(rng, c.out, -2.0 * rk, 2.0 * rk);
  r = y32 ? ref::round_to_f32(r) : rounded(r, f16);
  const double eps = 1e-5;
  std::vector<double> act(c.in);
  double ss = 0;
  for (uint32_t k = 0; k < c.in; ++k) ss += x[k] * x[k];
  const double inv = 1.0 / std::sqrt(ss / c.in + eps);
  for (uint32_t k = 0; k < c.in; ++k)
    act[k] = c.pro == RowPrologue::none ? x[k] : c.pro == RowPrologue::rmsnorm ? x[k] * inv * g[k] : x[k] / (1.0 + std::exp(-x[k])) * x[c.in + k];
  if (c.int8_dot) int8_round_blocks(act, 0, c.in);  // the kernel's int8 activations
  p.expect = ref::linear(act, 1, int(c.in), w, int(c.out));
  if (c.residual != OpResidual::none)
    for (uint32_t n = 0; n < c.out; ++n) p.expect[n] += r[n];

  const size_t es = storage_bytes(f16), xes = x32 ? 4 : es, yes = y32 ? 4 : es;
  const VkDeviceSize xb = x.size() * xes, wb = wbytes.size(), gb = g.size() * es, yb = r.size() * yes;
  Arena& a = p.arena;
  // x at an offset that is a multiple of the device alignment but not of 16 bytes (x_misaligned).
  const VkDeviceSize xo = a.take(xb, c.x_misaligned ? dev.caps().min_storage_buffer_offset_alignment : 0);
  const VkDeviceSize wo = a.take(wb), go = a.take(gb), yo = a.take(yb), ro = a.take(yb);
  a.create(dev, "op case linear_row");
  const auto rbytes = pack(r, f16 && !y32);
  a.buf->upload(xo, pack(x, f16 && !x32).data(), xb);
  a.buf->upload(wo, wbytes.data(), wb);
  a.buf->upload(go, pack(g, f16).data(), gb);
  a.buf->upload(ro, rbytes.data(), yb);

  start_linear_program(dev, kernel, c, p, "op case linear_row");
  const BufferRange ry = a.range(yo, yb);
  const BufferRange res = residual_of(c, ry, a.range(ro, yb));
  const LinearRowParams lp{c.in, c.out, c.pro, float(eps), x32 ? Elem::f32 : Elem::storage, y32 ? Elem::f32 : Elem::storage};
  const BufferRange nw = c.pro == RowPrologue::rmsnorm ? a.range(go, gb) : BufferRange{};
  if (c.weights == QuantType::f16) {
    kernel.record_row(*p.prog, a.range(xo, xb), a.range(wo, wb), ry, lp, res, nw);
  } else {
    qk.limit_workgroups_for_testing(c.wg_limit_x);
    qk.force_row_lanes_for_testing(c.row_lanes);
    qk.record(*p.prog, c.weights, a.range(xo, xb), a.range(wo, wb), ry, lp, res, nw);
    qk.limit_workgroups_for_testing(0);
  }
  const uint32_t lanes = c.weights == QuantType::f16 ? kernel.row_lanes_for(c.in) : qk.lanes_for(c.weights, c.in);
  qk.force_row_lanes_for_testing(0);
  kernel.force_row_scalar_for_testing(false);
  kernel.limit_workgroups_for_testing(0, 0);
  kernel.force_row_lanes_for_testing(0);
  p.detail = strf("wg=%u nf=%u lanes=%u x_offset=%llu %s%s", kernel.row_workgroup_size(), kernel.row_features(), lanes, (unsigned long long)xo,
                  quant_type_name(c.weights), c.weights == QuantType::f16 ? "" : c.int8_dot ? " int8_dot" : " dequant");
  Buffer* buf = a.buf.get();
  const bool in_place = c.residual == OpResidual::in_place;
  p.reset = [=] {
    buf->fill(yo, yb, kPoison);
    if (in_place) buf->upload(yo, rbytes.data(), yb);
  };
  p.out_off = yo, p.out_bytes = yb;
  p.extract = [=](const std::vector<uint8_t>& b, size_t&) {
    std::vector<float> got(c.out);
    for (uint32_t n = 0; n < c.out; ++n) got[n] = value_at(b, n, yes);
    return got;
  };
  p.bytes = xn * xes + wb + (c.pro == RowPrologue::rmsnorm ? c.in * es : 0) +
            uint64_t(c.out) * yes * (c.residual == OpResidual::none ? 1 : 2);
  p.flops = 2.0 * c.in * c.out;
}

}  // namespace

OpCaseRun OpRunner::run(const OpCase& c, const OpTiming* timing) {
  OpCaseRun out;
  if (c.fp16 != dev_.fp16()) {
    out.skipped = strf("the case needs %s storage, the device runs %s", c.fp16 ? "fp16" : "fp32", dev_.fp16() ? "fp16" : "fp32");
    return out;
  }
  if (c.int8_dot && !dev_.caps().integer_dot_product) {
    out.skipped = "the device has no shaderIntegerDotProduct: no int8 dot-product path";
    return out;
  }
  if (c.op == "linear" && c.variant == int(kLinearCoopVariant) && !dev_.coopmat()) {
    std::string why;
    linear_uses_coopmat(dev_.caps(), dev_.fp16(), &why);
    out.skipped = "no cooperative-matrix path on this device (" + why + ")";
    return out;
  }
  if (c.x_misaligned && dev_.caps().min_storage_buffer_offset_alignment >= 16) {
    out.skipped = "the device's storage offset alignment is >= 16 bytes: no misaligned binding exists";
    return out;
  }
  const int sg = c.subgroup && dev_.subgroup_arithmetic() ? 1 : 0;
  Prepared p(dev_);
  p.timestamps = timing && timing->timestamps;
  if (c.op == "linear" || c.op == "linear_row") {
    auto& k = k_->linear[sg];
    if (!k) k = std::make_unique<LinearKernel>(dev_, options_for(dev_, sg), std::vector<QuantType>{QuantType::q8_0, QuantType::q4_0},
                                                 /*all_variants=*/true);
    auto& q = k_->qrow[sg][c.int8_dot];
    const QuantRowPath path = c.int8_dot ? QuantRowPath::int8_dot : QuantRowPath::dequant;
    if (!q && c.op == "linear_row")
      q = std::make_unique<QuantRowKernel>(dev_, options_for(dev_, sg), std::vector<QuantType>{QuantType::q8_0, QuantType::q4_0}, &path);
    if (c.op == "linear")
      prepare_linear(dev_, *k, c, p);
    else
      prepare_linear_row(dev_, *k, *q, c, p);
  } else if (c.op == "head_rmsnorm") {
    auto& k = k_->norm[sg];
    if (!k) k = std::make_unique<HeadRmsNormKernel>(dev_, options_for(dev_, sg));
    prepare_head_rmsnorm(dev_, *k, c, p);
  } else if (c.op == "silu_mul") {
    if (!k_->silu) k_->silu = std::make_unique<SiluMulKernel>(dev_, options_for(dev_, true));
    prepare_silu_mul(dev_, *k_->silu, c, p);
  } else if (c.op == "embed") {
    if (!k_->embed)
      k_->embed = std::make_unique<EmbedKernel>(dev_, options_for(dev_, true), std::vector<QuantType>{QuantType::q8_0, QuantType::q4_0});
    prepare_embed(dev_, *k_->embed, c, p);
  } else if (c.op == "rope_kv") {
    auto& k = k_->rope[c.kv_q8];
    if (!k) k = std::make_unique<RopeKvKernel>(dev_, options_for(dev_, true), c.kv_q8 ? KvFormat::q8_0 : KvFormat::storage);
    prepare_rope_kv(dev_, *k, c, p);
  } else if (c.op == "kv_shift") {
    auto& k = k_->shift[c.kv_q8];
    if (!k) k = std::make_unique<KvShiftKernel>(dev_, options_for(dev_, true), c.kv_q8 ? KvFormat::q8_0 : KvFormat::storage);
    prepare_kv_shift(dev_, *k, c, p);
  } else if (c.op == "diff_attn") {
    if (c.Hkv == 0 || c.in % c.Hkv != 0) throw Error(Status::invalid_argument, "diff_attn case: H must be a multiple of Hkv");
    const KvFormat kv = c.kv_q8 ? KvFormat::q8_0 : KvFormat::storage;
    auto& k = k_->attn[{c.out, c.in / c.Hkv, sg, c.kv_q8}];
    if (!k) k = std::make_unique<DiffAttnKernel>(dev_, options_for(dev_, sg), c.out, c.in / c.Hkv, 8, AttnSoftmax::differential, kv);
    prepare_diff_attn(dev_, *k, c, p);
  } else if (c.op == "diff_v2_attn") {
    if (c.Hkv == 0 || c.in % c.Hkv != 0) throw Error(Status::invalid_argument, "diff_v2_attn case: Hkv must divide H");
    const uint32_t n_rep = 2 * c.in / c.Hkv;  // query heads per KV head
    auto& k = k_->attn_v2[{c.out, n_rep, sg, c.kv_q8}];
    if (!k)
      k = std::make_unique<DiffAttnKernel>(dev_, options_for(dev_, sg), c.out, n_rep, 8, AttnSoftmax::v2,
                                           c.kv_q8 ? KvFormat::q8_0 : KvFormat::storage);
    prepare_diff_v2_attn(dev_, *k, c, p);
  } else if (c.op == "attn_probs") {
    if (!k_->probs) k_->probs = std::make_unique<AttnProbsKernel>(dev_, options_for(dev_, true));
    prepare_attn_probs(dev_, *k_->probs, c, p);
  } else {
    throw Error(Status::invalid_argument, "no case table for op '" + c.op + "'");
  }
  p.detail = strf("%s%s", sg ? "subgroup " : "shared ", p.detail.c_str());
  out.detail = p.detail;
  out.bytes = p.bytes;
  out.flops = p.flops;

  if (plant_ == Plant::wrong_value && !p.expect.empty()) {
    double& e = p.expect[p.expect.size() / 2];
    e += 1e-2 * std::max(1.0, std::fabs(e));
  }
  if (plant_ == Plant::no_dispatch) p.prog = std::make_unique<Program>(dev_, "op case (planted: nothing recorded)");
  std::vector<uint8_t> first(p.out_bytes), again(p.out_bytes);
  p.reset();
  p.prog->run();
  p.arena.buf->download(p.out_off, first.data(), first.size());
  const std::vector<float> got = p.extract(first, out.padding_changed);
  out.check = compare("float64 reference", got, p.expect, dev_.fp16(), 1.0);
  p.reset();
  p.prog->run();  // a replayed program must give identical bits
  p.arena.buf->download(p.out_off, again.data(), again.size());
  out.replay_identical = again == first;

  if (timing && out.ok()) {  // verify before timing
    for (int i = 0; i < timing->warmup; ++i) p.prog->run();
    std::vector<double> us;
    for (int i = 0; i < timing->runs; ++i) us.push_back(run_timed(*p.prog, timing->timestamps));
    out.us = stats_of(us);
    out.timed = true;
  }
  return out;
}

}  // namespace diffvk::bench
