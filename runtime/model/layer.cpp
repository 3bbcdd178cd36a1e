// One MultiheadDiffAttn (DIFF V1) or MultiheadFlashDiffV2 (DIFF V2) layer on the GPU (see include/diffvk/layer.hpp).
#include "diffvk/layer.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

#include <map>

#include "graph/arena.hpp"
#include "model/recipe.hpp"
#include "platform.hpp"
#include "io/safetensors.hpp"
#include "io/storage.hpp"

namespace diffvk {

struct DiffAttnLayer::Impl {
  Device* dev = nullptr;
  bool fp16 = false;
  bool v2 = false;  // DIFF V2 (docs/maths.md "DIFF V2"): wqkv = [Wq; Wλ; Wk; Wv], caches D wide, no subln
  uint32_t E = 0, H = 0, Hkv = 0, D = 0, cap = 0, chunk = 0, qkv_width = 0;
  double lambda = 0, lambda_init = 0;
  uint32_t pos = 0;
  ModelKernels k;           // linear, rope_kv and attention only
  Buffer weights, kv, dyn;  // dyn: the 4-byte position the programs read at run time
  Buffer sync;              // the split-K attention's arrival counters (zeroed once)
  BufferRange wqkv, wo, subln, table, kcache, vcache;
  GraphPlan plan;  // derived from the recipe's attention block
  Arena arena;
  struct Recorded {
    std::unique_ptr<Program> program;
    BufferRange x, y;  // where the program reads its input and leaves its output
  };
  std::map<uint32_t, Recorded> programs;  // recorded once per row count

  // The bare attention block of `rows` rows (no block norm, no residual): y = attention(x)·Woᵀ.
  std::pair<TensorRef, TensorRef> build(Graph& g, uint32_t rows) const {
    Forward f{g, k, fp16, rows, rows == 1, {}};
    f.pos = g.bind("position", TensorRole::external, ElemType::u32, {1}, dyn.range(0, 4));
    const TensorRef x = g.tensor("x", TensorRole::input, f.storage(), {rows, E});
    AttnBlock a;
    a.v2 = v2;
    const uint32_t kvw = v2 ? D : 2 * D;  // cache row width
    a.wqkv = bind_linear(f, "wqkv", E, {WeightPart{0, qkv_width, wqkv}});
    a.wo = bind_linear(f, "wo", v2 ? H * D : E, {WeightPart{0, E, wo}});
    if (!v2) a.subln = bind_vector(f, "subln", 2 * D, subln);
    a.lambda = lambda;
    a.lambda_init = lambda_init;
    a.k_cache = g.bind("k_cache", TensorRole::kv_cache, f.storage(), {Hkv, cap, kvw}, kcache);
    a.v_cache = g.bind("v_cache", TensorRole::kv_cache, f.storage(), {Hkv, cap, kvw}, vcache);
    a.rope_table = g.bind("rope table", TensorRole::weight, ElemType::f32, {table.size / 4}, table);
    const AttnShape shape = AttnShape::heads(E, H, Hkv, D).cache(cap, chunk);
    const uint64_t sync_bytes = attn_sync_bytes(shape, v2);
    f.attn_sync = g.bind("attention arrival counters", TensorRole::external, ElemType::u32, {sync_bytes / 4},
                         sync.range(0, sync_bytes));
    return {x, add_attention_block(f, x, shape, a, "y", TensorRole::output)};
  }
  // The planned variants: one-row programs (their own graph: the fused q/k/v + RoPE node has other tensors and
  // lifetimes) and programs of 2 … chunk rows, which fit the chunk-row plan.
  std::string variant(uint32_t rows) const { return rows == 1 ? "rows=1" : "rows=" + std::to_string(chunk); }
  Recorded& program(uint32_t rows) {
    auto it = programs.find(rows);
    if (it != programs.end()) return it->second;
    Graph g(variant(rows));
    const auto xy = build(g, rows);
    const auto placed = fit_graph(g, plan, variant(rows), arena.handles(), dev->caps().max_storage_buffer_range,
                                  dev->caps().min_storage_buffer_offset_alignment);
    Recorded r{std::make_unique<Program>(*dev, "layer rows=" + std::to_string(rows)), placed[xy.first.id],
               placed[xy.second.id]};
    record_graph(g, placed, *r.program);
    r.program->finalize();
    return programs.emplace(rows, std::move(r)).first->second;
  }
};

namespace {
// A layer's host-side weights before upload: the fused projection, the output projection and (DIFF V1)
// the headwise norm gain.
struct HostLayer {
  std::vector<float> wqkv, wo, subln;
};

// DIFF V1: exactly the 9 MultiheadDiffAttn state_dict entries.
HostLayer parse_v1(DiffAttnLayer::Impl& im, const SafetensorsFile& st, const std::string& path, const LayerOptions& o) {
  static const char* kNames[] = {"q_proj.weight", "k_proj.weight", "v_proj.weight", "out_proj.weight", "lambda_q1",
                                 "lambda_k1",     "lambda_q2",     "lambda_k2",     "subln.weight"};
  for (const auto& t : st.tensors())
    if (std::find_if(std::begin(kNames), std::end(kNames), [&](const char* n) { return t.name == n; }) ==
        std::end(kNames))
      throw Error(Status::format_error, path + ": unexpected tensor '" + t.name +
                                            "' (a layer file holds exactly the 9 "
                                            "MultiheadDiffAttn state_dict entries)");
  const TensorInfo* q = st.find("q_proj.weight");
  if (!q) throw Error(Status::format_error, path + ": missing tensor 'q_proj.weight'");
  if (q->shape.size() != 2 || q->shape[0] != q->shape[1] || q->shape[0] <= 0 || q->shape[0] > 65536)
    throw Error(Status::format_error, path + ": q_proj.weight must be square (E, E) with 0 < E <= 65536");
  const uint32_t E = static_cast<uint32_t>(q->shape[0]);
  const uint32_t H = o.num_heads, Hkv = o.num_kv_heads ? o.num_kv_heads : o.num_heads;
  if (H == 0 || E % (2 * H))
    throw Error(Status::invalid_argument,
                "num_heads=" + std::to_string(H) + " does not divide E/2 (E=" + std::to_string(E) + ")");
  if (Hkv == 0 || H % Hkv)
    throw Error(Status::invalid_argument,
                "num_kv_heads=" + std::to_string(Hkv) + " must divide num_heads=" + std::to_string(H));
  const uint32_t D = E / H / 2;
  if (D % 2)
    throw Error(Status::invalid_argument, "head_dim D=" + std::to_string(D) + " must be even (RoPE rotates pairs)");
  const int64_t e = E, d = D, kvw = 2 * int64_t(Hkv) * D;
  HostLayer h;
  h.wqkv = st.to_float(st.require("q_proj.weight", {e, e}));
  auto wk = st.to_float(st.require("k_proj.weight", {kvw, e}));
  auto wv = st.to_float(st.require("v_proj.weight", {kvw, e}));
  h.wo = st.to_float(st.require("out_proj.weight", {e, e}));
  std::vector<float> lam[4];
  const char* lnames[] = {"lambda_q1", "lambda_k1", "lambda_q2", "lambda_k2"};
  for (int i = 0; i < 4; ++i) lam[i] = st.to_float(st.require(lnames[i], {d}));
  h.subln = st.to_float(st.require("subln.weight", {2 * d}));
  for (int i = 0; i < 4; ++i)
    for (float x : lam[i])
      if (!std::isfinite(x)) throw Error(Status::format_error, path + ": non-finite value in " + lnames[i]);
  for (float x : h.subln)
    if (!std::isfinite(x)) throw Error(Status::format_error, path + ": non-finite value in subln.weight");
  h.wqkv.insert(h.wqkv.end(), wk.begin(), wk.end());
  h.wqkv.insert(h.wqkv.end(), wv.begin(), wv.end());

  im.E = E;
  im.H = H;
  im.Hkv = Hkv;
  im.D = D;
  im.qkv_width = E + 2 * static_cast<uint32_t>(kvw);
  im.lambda_init = 0.8 - 0.6 * std::exp(-0.3 * o.depth);
  double d1 = 0, d2 = 0;
  for (uint32_t i = 0; i < D; ++i) {
    d1 += double(lam[0][i]) * lam[1][i];
    d2 += double(lam[2][i]) * lam[3][i];
  }
  im.lambda = std::exp(d1) - std::exp(d2) + im.lambda_init;
  if (!std::isfinite(im.lambda)) throw Error(Status::format_error, path + ": lambda is not finite");
  return h;
}

// DIFF V2: the authors' MultiheadFlashDiffV2 names (q_proj, k_proj, v_proj, o_proj, lambda_proj; no biases).
// D comes from q_proj's shape; every other tensor is checked against (E, H, Hkv, D) by name.
HostLayer parse_v2(DiffAttnLayer::Impl& im, const SafetensorsFile& st, const std::string& path, const LayerOptions& o) {
  static const char* kNames[] = {"q_proj.weight", "k_proj.weight", "v_proj.weight", "o_proj.weight",
                                 "lambda_proj.weight"};
  for (const auto& t : st.tensors())
    if (std::find_if(std::begin(kNames), std::end(kNames), [&](const char* n) { return t.name == n; }) ==
        std::end(kNames))
      throw Error(Status::format_error, path + ": unexpected tensor '" + t.name +
                                            "' in a DIFF V2 layer (it holds exactly "
                                            "q_proj, k_proj, v_proj, o_proj and lambda_proj .weight; a DIFF V1 name "
                                            "means a mixed file)");
  const TensorInfo* q = st.find("q_proj.weight");
  if (!q) throw Error(Status::format_error, path + ": missing tensor 'q_proj.weight'");
  if (q->shape.size() != 2 || q->shape[0] <= 0 || q->shape[1] <= 0 || q->shape[1] > 65536 ||
      q->shape[0] > (int64_t(1) << 20))
    throw Error(Status::format_error, path + ": q_proj.weight must be 2-D (2·H·D, E) with 0 < E <= 65536");
  const uint32_t E = static_cast<uint32_t>(q->shape[1]), rows = static_cast<uint32_t>(q->shape[0]);
  const uint32_t H = o.num_heads, Hkv = o.num_kv_heads ? o.num_kv_heads : o.num_heads;
  if (H == 0 || rows % (2 * H))
    throw Error(Status::invalid_argument, "num_heads=" + std::to_string(H) + ": q_proj.weight has " +
                                              std::to_string(rows) +
                                              " rows, not a multiple of 2·H (2H query heads of width D)");
  if (Hkv == 0 || H % Hkv)
    throw Error(Status::invalid_argument,
                "num_kv_heads=" + std::to_string(Hkv) + " must divide num_heads=" + std::to_string(H) +
                    " (otherwise the two query heads of an output head read different KV heads)");
  const uint32_t D = rows / (2 * H);
  if (D % 2)
    throw Error(Status::invalid_argument, "head_dim D=" + std::to_string(D) + " must be even (RoPE rotates pairs)");
  const int64_t e = E, kvw = int64_t(Hkv) * D;
  HostLayer h;
  h.wqkv = st.to_float(st.require("q_proj.weight", {int64_t(rows), e}));
  auto wl = st.to_float(st.require("lambda_proj.weight", {int64_t(H), e}));
  auto wk = st.to_float(st.require("k_proj.weight", {kvw, e}));
  auto wv = st.to_float(st.require("v_proj.weight", {kvw, e}));
  h.wo = st.to_float(st.require("o_proj.weight", {e, int64_t(H) * D}));
  for (const auto* part : {&wl, &wk, &wv}) h.wqkv.insert(h.wqkv.end(), part->begin(), part->end());
  im.v2 = true;
  im.E = E;
  im.H = H;
  im.Hkv = Hkv;
  im.D = D;
  im.qkv_width = rows + H + 2 * static_cast<uint32_t>(kvw);
  return h;
}
}  // namespace

std::unique_ptr<DiffAttnLayer> DiffAttnLayer::load(Context& ctx, const std::string& path, const LayerOptions& o) {
  auto im = std::make_unique<Impl>();
  Device& dev = ctx.device();
  im->dev = &dev;
  im->fp16 = dev.fp16();
  SafetensorsFile st = SafetensorsFile::open(path);
  if (o.max_positions == 0 || o.chunk == 0)
    throw Error(Status::invalid_argument, "max_positions and chunk must be positive");
  // DIFF V2 is recognised by its own names (lambda_proj, o_proj); anything else is read as DIFF V1.
  const bool v2 = st.find("lambda_proj.weight") || st.find("o_proj.weight");
  HostLayer h = v2 ? parse_v2(*im, st, path, o) : parse_v1(*im, st, path, o);
  const uint32_t E = im->E, H = im->H, Hkv = im->Hkv, D = im->D;
  im->cap = o.max_positions;
  im->chunk = o.chunk;

  // Kernels (all pipelines are created here, at load time).
  const KernelOptions ko = KernelOptions::for_op(dev, "attention");
  im->k.linear = std::make_unique<LinearKernel>(dev, KernelOptions::for_op(dev, "linear"));
  im->k.rope = std::make_unique<RopeKvKernel>(dev, KernelOptions::for_device(dev));
  im->k.attn = v2 ? std::make_unique<DiffAttnKernel>(dev, ko, D, 2 * H / Hkv, 8, AttnSoftmax::v2)
                  : std::make_unique<DiffAttnKernel>(dev, ko, D, H / Hkv);

  // Weights: the fused projection, Wo, subln (DIFF V1) in the storage type; the RoPE table in fp32.
  const bool f16 = im->fp16;
  const uint64_t es = f16 ? 2 : 4, al = dev.caps().min_storage_buffer_offset_alignment;
  const auto table = rope_table(o.max_positions, D, o.rope_theta);
  const uint64_t sz[4] = {h.wqkv.size() * es, h.wo.size() * es, h.subln.size() * es, table.size() * 4};
  uint64_t off[5] = {0};
  for (int i = 0; i < 4; ++i) off[i + 1] = align_up(off[i] + sz[i], al);
  im->weights = Buffer(dev, off[4], MemoryDomain::device, "layer weights");
  im->weights.upload(off[0], to_storage(h.wqkv, f16).data(), sz[0]);
  im->weights.upload(off[1], to_storage(h.wo, f16).data(), sz[1]);
  if (sz[2]) im->weights.upload(off[2], to_storage(h.subln, f16).data(), sz[2]);
  im->weights.upload(off[3], table.data(), sz[3]);
  im->wqkv = im->weights.range(off[0], sz[0]);
  im->wo = im->weights.range(off[1], sz[1]);
  if (sz[2]) im->subln = im->weights.range(off[2], sz[2]);
  im->table = im->weights.range(off[3], sz[3]);

  const uint64_t cache_bytes = uint64_t(Hkv) * o.max_positions * (v2 ? 1 : 2) * D * es;
  im->kv = Buffer(dev, 2 * align_up(cache_bytes, al), MemoryDomain::device, "KV cache");
  im->kcache = im->kv.range(0, cache_bytes);
  im->vcache = im->kv.range(align_up(cache_bytes, al), cache_bytes);

  im->dyn = Buffer(dev, 16, MemoryDomain::device, "layer position");
  im->chunk = std::min(o.chunk, o.max_positions);
  {
    const uint64_t sync_bytes = attn_sync_bytes(AttnShape::heads(E, H, Hkv, D).cache(o.max_positions, im->chunk), v2);
    im->sync = Buffer(dev, sync_bytes, MemoryDomain::device, "layer attention arrival counters");
    im->sync.fill(0, sync_bytes, 0);
  }
  // The static plan of one chunk's intermediates and of a one-row step, derived from the recipe (programs of
  // 2 … chunk rows fit the chunk's; the variants never run at once, so they share the arena).
  {
    Graph g(im->variant(im->chunk)), g1(im->variant(1));
    im->build(g, im->chunk);
    std::vector<const Graph*> variants{&g};
    if (im->chunk > 1) {
      im->build(g1, 1);
      variants.push_back(&g1);
    }
    im->plan = plan_graphs(variants, dev.caps().max_storage_buffer_range, al);
  }
  im->arena = Arena(dev, im->plan.plan, "layer");
  platform::log(platform::LogLevel::info,
                std::string("layer: DIFF ") + (v2 ? "V2" : "V1") + " E=" + std::to_string(E) +
                    " H=" + std::to_string(H) + " Hkv=" + std::to_string(Hkv) + " D=" + std::to_string(D) +
                    (v2 ? std::string(" (lambda per token)") : " lambda=" + std::to_string(im->lambda)) + ", arena " +
                    std::to_string(im->plan.plan.arena_bytes) + " bytes (lower bound " +
                    std::to_string(im->plan.plan.lower_bound) + ", naive " + std::to_string(im->plan.plan.naive_bytes) +
                    ")");
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
    Impl::Recorded& r = m.program(rows);
    const auto xs = to_storage(x + size_t(r0) * m.E, size_t(rows) * m.E, f16);
    m.arena.owner(r.x).upload(r.x.offset, xs.data(), xs.size());
    m.dyn.upload(0, &m.pos, 4);
    r.program->run();
    m.pos += rows;
    std::vector<uint8_t> ys(uint64_t(rows) * m.E * es);
    m.arena.owner(r.y).download(r.y.offset, ys.data(), ys.size());
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
bool DiffAttnLayer::is_v2() const { return impl_->v2; }
uint32_t DiffAttnLayer::head_dim() const { return impl_->D; }
std::string DiffAttnLayer::describe_plan() const { return format_plan(impl_->plan.lifetimes, impl_->plan.plan); }

}  // namespace diffvk
