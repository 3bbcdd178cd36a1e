// One MultiheadDiffAttn layer on the GPU (see include/diffvk/layer.hpp).
#include "diffvk/layer.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "ops/diff_attn.hpp"
#include "ops/linear.hpp"
#include "ops/rope_kv.hpp"
#include "plan/memory_plan.hpp"
#include "platform.hpp"
#include "io/safetensors.hpp"
#include "io/storage.hpp"

namespace diffvk {

namespace {
uint64_t align_up(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }
}  // namespace

struct DiffAttnLayer::Impl {
  Device* dev = nullptr;
  bool fp16 = false;
  uint32_t E = 0, H = 0, Hkv = 0, D = 0, cap = 0, chunk = 0, qkv_width = 0;
  double lambda = 0, lambda_init = 0;
  uint32_t pos = 0;
  std::unique_ptr<LinearKernel> linear;
  std::unique_ptr<RopeKvKernel> rope;
  std::unique_ptr<DiffAttnKernel> attn;
  Buffer weights, kv;
  BufferRange wqkv, wo, subln, table, kcache, vcache;
  // Static plan of the per-chunk intermediates.
  enum Tensor { X, QKV, Q, PART, STAT, O, Y, kTensors };
  std::vector<TensorLifetime> lifetimes;
  MemoryPlan plan;
  std::vector<Buffer> arena;
  BufferRange t[kTensors];

  BufferRange tensor(Tensor i, uint64_t bytes) const { return {t[i].buffer, t[i].offset, bytes}; }
};

std::unique_ptr<DiffAttnLayer> DiffAttnLayer::load(Context& ctx, const std::string& path, const LayerOptions& o) {
  auto im = std::make_unique<Impl>();
  Device& dev = ctx.device();
  im->dev = &dev;
  im->fp16 = dev.fp16();
  SafetensorsFile st = SafetensorsFile::open(path);
  static const char* kNames[] = {"q_proj.weight", "k_proj.weight", "v_proj.weight", "out_proj.weight", "lambda_q1",
                                 "lambda_k1",     "lambda_q2",     "lambda_k2",     "subln.weight"};
  for (const auto& t : st.tensors())
    if (std::find_if(std::begin(kNames), std::end(kNames), [&](const char* n) { return t.name == n; }) == std::end(kNames))
      throw Error(Status::format_error, path + ": unexpected tensor '" + t.name + "' (a layer file holds exactly the 9 "
                                               "MultiheadDiffAttn state_dict entries)");
  const TensorInfo* q = st.find("q_proj.weight");
  if (!q) throw Error(Status::format_error, path + ": missing tensor 'q_proj.weight'");
  if (q->shape.size() != 2 || q->shape[0] != q->shape[1] || q->shape[0] <= 0 || q->shape[0] > 65536)
    throw Error(Status::format_error, path + ": q_proj.weight must be square (E, E) with 0 < E <= 65536");
  const uint32_t E = static_cast<uint32_t>(q->shape[0]);
  const uint32_t H = o.num_heads, Hkv = o.num_kv_heads ? o.num_kv_heads : o.num_heads;
  if (H == 0 || E % (2 * H))
    throw Error(Status::invalid_argument, "num_heads=" + std::to_string(H) + " does not divide E/2 (E=" + std::to_string(E) + ")");
  if (Hkv == 0 || H % Hkv)
    throw Error(Status::invalid_argument, "num_kv_heads=" + std::to_string(Hkv) + " must divide num_heads=" + std::to_string(H));
  const uint32_t D = E / H / 2;
  if (D % 2) throw Error(Status::invalid_argument, "head_dim D=" + std::to_string(D) + " must be even (RoPE rotates pairs)");
  if (o.max_positions == 0 || o.chunk == 0) throw Error(Status::invalid_argument, "max_positions and chunk must be positive");
  const int64_t e = E, d = D, kvw = 2 * int64_t(Hkv) * D;
  auto wq = st.to_float(st.require("q_proj.weight", {e, e}));
  auto wk = st.to_float(st.require("k_proj.weight", {kvw, e}));
  auto wv = st.to_float(st.require("v_proj.weight", {kvw, e}));
  auto wo = st.to_float(st.require("out_proj.weight", {e, e}));
  std::vector<float> lam[4];
  const char* lnames[] = {"lambda_q1", "lambda_k1", "lambda_q2", "lambda_k2"};
  for (int i = 0; i < 4; ++i) lam[i] = st.to_float(st.require(lnames[i], {d}));
  auto subln = st.to_float(st.require("subln.weight", {2 * d}));
  for (int i = 0; i < 4; ++i)
    for (float x : lam[i])
      if (!std::isfinite(x)) throw Error(Status::format_error, path + ": non-finite value in " + lnames[i]);
  for (float x : subln)
    if (!std::isfinite(x)) throw Error(Status::format_error, path + ": non-finite value in subln.weight");

  im->E = E;
  im->H = H;
  im->Hkv = Hkv;
  im->D = D;
  im->cap = o.max_positions;
  im->chunk = o.chunk;
  im->qkv_width = E + 2 * static_cast<uint32_t>(kvw);
  im->lambda_init = 0.8 - 0.6 * std::exp(-0.3 * o.depth);
  double d1 = 0, d2 = 0;
  for (uint32_t i = 0; i < D; ++i) {
    d1 += double(lam[0][i]) * lam[1][i];
    d2 += double(lam[2][i]) * lam[3][i];
  }
  im->lambda = std::exp(d1) - std::exp(d2) + im->lambda_init;
  if (!std::isfinite(im->lambda)) throw Error(Status::format_error, path + ": lambda is not finite");

  // Kernels (all pipelines are created here, at load time).
  const KernelOptions ko = KernelOptions::for_device(dev);
  im->linear = std::make_unique<LinearKernel>(dev, ko);
  im->rope = std::make_unique<RopeKvKernel>(dev, ko);
  im->attn = std::make_unique<DiffAttnKernel>(dev, ko, D, H / Hkv);

  // Weights: [Wq; Wk; Wv] fused, Wo, subln in the storage type; the RoPE table in fp32.
  const bool f16 = im->fp16;
  const uint64_t es = f16 ? 2 : 4, al = dev.caps().min_storage_buffer_offset_alignment;
  std::vector<float> wqkv;
  wqkv.reserve(wq.size() + wk.size() + wv.size());
  wqkv.insert(wqkv.end(), wq.begin(), wq.end());
  wqkv.insert(wqkv.end(), wk.begin(), wk.end());
  wqkv.insert(wqkv.end(), wv.begin(), wv.end());
  const auto table = rope_table(o.max_positions, D, o.rope_theta);
  const uint64_t sz[4] = {wqkv.size() * es, wo.size() * es, subln.size() * es, table.size() * 4};
  uint64_t off[5] = {0};
  for (int i = 0; i < 4; ++i) off[i + 1] = align_up(off[i] + sz[i], al);
  im->weights = Buffer(dev, off[4], MemoryDomain::device, "layer weights");
  im->weights.upload(off[0], to_storage(wqkv, f16).data(), sz[0]);
  im->weights.upload(off[1], to_storage(wo, f16).data(), sz[1]);
  im->weights.upload(off[2], to_storage(subln, f16).data(), sz[2]);
  im->weights.upload(off[3], table.data(), sz[3]);
  im->wqkv = im->weights.range(off[0], sz[0]);
  im->wo = im->weights.range(off[1], sz[1]);
  im->subln = im->weights.range(off[2], sz[2]);
  im->table = im->weights.range(off[3], sz[3]);

  const uint64_t cache_bytes = uint64_t(Hkv) * o.max_positions * 2 * D * es;
  im->kv = Buffer(dev, 2 * align_up(cache_bytes, al), MemoryDomain::device, "KV cache");
  im->kcache = im->kv.range(0, cache_bytes);
  im->vcache = im->kv.range(align_up(cache_bytes, al), cache_bytes);

  // Static plan of one chunk's intermediates. Steps: 0 upload x, 1 QKV projection, 2 RoPE + cache
  // append, 3 attention (decode uses the split scratch), 4 out_proj, 5 read back y.
  const uint64_t rows = o.chunk;
  uint32_t max_splits = 1;
  for (uint32_t s = 1; s <= std::min<uint32_t>(8, o.chunk); ++s) {
    uint32_t len = 0;
    AttnCall c{s, o.max_positions - s, H, Hkv, o.max_positions, E, E};
    max_splits = std::max(max_splits, im->attn->decode_splits(c, &len));
  }
  AttnCall worst{std::min<uint32_t>(8, o.chunk), 0, H, Hkv, o.max_positions, E, E};
  // A prefill chunk may need split-K scratch too (devices with a per-invocation loop limit).
  uint64_t part_bytes = DiffAttnKernel::part_bytes(worst, D, max_splits), stat_bytes = DiffAttnKernel::stat_bytes(worst, max_splits);
  const uint32_t rows_max = std::min(o.chunk, o.max_positions);
  if (rows_max > im->attn->max_decode_rows()) {
    AttnCall pc{rows_max, o.max_positions - rows_max, H, Hkv, o.max_positions, E, E};
    uint32_t len = 0;
    if (const uint32_t ps = im->attn->prefill_splits(pc, &len)) {
      part_bytes = std::max(part_bytes, DiffAttnKernel::part_bytes(pc, D, ps));
      stat_bytes = std::max(stat_bytes, DiffAttnKernel::stat_bytes(pc, ps));
    }
  }
  im->lifetimes = {
      {"x", rows * E * es, al, 0, 1},
      {"qkv", rows * im->qkv_width * es, al, 1, 2},
      {"q", rows * E * es, al, 2, 3},
      {"attn.part", part_bytes, al, 3, 3},
      {"attn.stat", stat_bytes, al, 3, 3},
      {"o", rows * E * es, al, 3, 4},
      {"y", rows * E * es, al, 4, 5},
  };
  im->plan = plan_memory(im->lifetimes, dev.caps().max_storage_buffer_range, al);
  for (size_t i = 0; i < im->plan.buffer_sizes.size(); ++i)
    im->arena.emplace_back(dev, im->plan.buffer_sizes[i], MemoryDomain::device, "layer arena " + std::to_string(i));
  for (int i = 0; i < Impl::kTensors; ++i) {
    const auto& pl = im->plan.placements[i];
    im->t[i] = im->arena[pl.buffer].range(pl.offset, im->lifetimes[i].bytes);
  }
  platform::log(platform::LogLevel::info, "layer: E=" + std::to_string(E) + " H=" + std::to_string(H) + " Hkv=" +
                                              std::to_string(Hkv) + " D=" + std::to_string(D) + " lambda=" +
                                              std::to_string(im->lambda) + ", arena " + std::to_string(im->plan.arena_bytes) +
                                              " bytes (lower bound " + std::to_string(im->plan.lower_bound) + ", naive " +
                                              std::to_string(im->plan.naive_bytes) + ")");
  return std::unique_ptr<DiffAttnLayer>(new DiffAttnLayer(std::move(im)));
}

DiffAttnLayer::DiffAttnLayer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
DiffAttnLayer::~DiffAttnLayer() = default;

std::vector<float> DiffAttnLayer::forward(const float* x, uint32_t S) {
  Impl& m = *impl_;
  if (S == 0) return {};
  if (uint64_t(m.pos) + S > m.cap)
    throw Error(Status::context_overflow, "layer: " + std::to_string(S) + " new rows after " + std::to_string(m.pos) +
                                              " cached exceed the KV cache capacity " + std::to_string(m.cap));
  const bool f16 = m.fp16;
  const uint64_t es = f16 ? 2 : 4;
  std::vector<float> y(size_t(S) * m.E);
  for (uint32_t r0 = 0; r0 < S; r0 += m.chunk) {
    const uint32_t rows = std::min(m.chunk, S - r0);
    const uint64_t act = uint64_t(rows) * m.E * es;
    BufferRange x_r = m.tensor(Impl::X, act), qkv_r = m.tensor(Impl::QKV, uint64_t(rows) * m.qkv_width * es);
    BufferRange q_r = m.tensor(Impl::Q, act), o_r = m.tensor(Impl::O, act), y_r = m.tensor(Impl::Y, act);
    const auto xs = to_storage(x + size_t(r0) * m.E, size_t(rows) * m.E, f16);
    m.arena[m.plan.placements[Impl::X].buffer].upload(x_r.offset, xs.data(), xs.size());

    Program prog(*m.dev, "layer");
    m.linear->record(prog, x_r, m.wqkv, qkv_r, {rows, m.E, m.qkv_width, m.E, m.qkv_width});
    m.rope->record(prog, qkv_r, m.table, q_r, m.kcache, m.vcache, {rows, m.H, m.Hkv, m.D, m.pos, m.cap});
    AttnCall call{rows, m.pos, m.H, m.Hkv, m.cap, m.E, m.E, static_cast<float>(m.lambda),
                  static_cast<float>(1.0 - m.lambda_init)};
    if (rows <= m.attn->max_decode_rows()) {
      uint32_t len = 0;
      const uint32_t splits = m.attn->decode_splits(call, &len);
      m.attn->record_decode(prog, q_r, m.kcache, m.vcache, m.subln, o_r, m.t[Impl::PART], m.t[Impl::STAT], call, splits, len);
    } else {
      m.attn->record_prefill(prog, q_r, m.kcache, m.vcache, m.subln, o_r, call, m.t[Impl::PART], m.t[Impl::STAT]);
    }
    m.linear->record(prog, o_r, m.wo, y_r, {rows, m.E, m.E, m.E, m.E});
    prog.run();
    m.pos += rows;
    std::vector<uint8_t> ys(act);
    m.arena[m.plan.placements[Impl::Y].buffer].download(y_r.offset, ys.data(), ys.size());
    const auto yf = from_storage(ys, f16);
    std::copy(yf.begin(), yf.end(), y.begin() + size_t(r0) * m.E);
  }
  return y;
}

void DiffAttnLayer::reset() { impl_->pos = 0; }
uint32_t DiffAttnLayer::hidden() const { return impl_->E; }
uint32_t DiffAttnLayer::position() const { return impl_->pos; }
double DiffAttnLayer::lambda() const { return impl_->lambda; }
double DiffAttnLayer::lambda_init() const { return impl_->lambda_init; }
std::string DiffAttnLayer::describe_plan() const { return format_plan(impl_->lifetimes, impl_->plan); }

}  // namespace diffvk
