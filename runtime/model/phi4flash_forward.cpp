// The Phi-4-mini-flash (SambaY) prompt forward pass (phi4flash_forward.hpp).
#include "model/phi4flash_forward.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <tuple>

#include "diffvk/error.hpp"
#include "graph/arena.hpp"
#include "model/recipe_sambay.hpp"
#include "model/weight_store.hpp"
#include "plan/memory_plan.hpp"

namespace diffvk {

namespace {
constexpr size_t kNone = SIZE_MAX;
}  // namespace

struct Phi4FlashForward::Impl {
  Device* dev = nullptr;
  bool fp16 = false;
  Phi4FlashConfig cfg;
  SambaYPlan plan;
  uint32_t E = 0, H = 0, Hkv = 0, D = 0, I = 0, C = 0, S = 0, K = 0, R = 0, V = 0, W = 0;
  uint32_t cap = 0, chunk = 0, ring = 0;
  ModelKernels k;
  std::unique_ptr<WeightStore> ws;   // the storage type
  std::unique_ptr<WeightStore> f32;  // float32 whatever the storage type: biases, A_log, D
  struct Layer {
    SambaYLayerKind kind = SambaYLayerKind::mamba;
    size_t ln1_w = kNone, ln1_b = kNone, ln2_w = kNone, ln2_b = kNone, fc1 = kNone, fc2 = kNone;
    size_t in_proj = kNone, conv_w = kNone, conv_b = kNone, x_proj = kNone, dt_w = kNone, out_proj = kNone;
    size_t wqkv = kNone, subln = kNone;
    size_t dt_b = kNone, A_log = kNone, Dskip = kNone, out_b = kNone, wqkv_b = kNone;  // in f32
    double lambda = 0, lambda_init = 0;
    BufferRange conv_state, scan_state, k_ring, v_ring;  // Mamba states; sliding layers' rings
  };
  std::vector<Layer> layers;
  // Where each checkpoint source of a layer goes: the storage-type store, or float32 (what the kernels read as
  // float32 whatever the storage type).
  struct Field {
    size_t Layer::*dst;
    WeightSource Phi4FlashLayer::*src;
    bool f32;
  };
  static const Field kFields[19];
  size_t embed = kNone, final_w = kNone, final_b = kNone, lm_head = kNone;
  Buffer state;  // every layer's states and caches
  BufferRange shared_k, shared_v;
  std::vector<BufferRange> mamba_states;  // reset (zeroed) before each prompt
  std::vector<BufferRange> caches;        // filled by fill_for_testing
  Buffer dyn, sync;
  uint64_t sync_bytes = 0;
  GraphPlan gplan;
  Arena arena;
  struct Recorded {
    std::unique_ptr<Program> program;
    BufferRange tokens, logits;
  };
  std::map<std::pair<uint32_t, HeadOut>, Recorded> programs;
  uint64_t last_pos = 0;  // offset of the YOCO last row's position in dyn

  AttnShape attn_shape(uint32_t capacity) const {
    return AttnShape::heads(E, H, Hkv, D).cache(capacity, chunk).norms(float(cfg.layer_norm_eps), 1e-5f);
  }

  // The whole model over `rows` rows at the position in `dyn` (out all: every row's logits), or YOCO (last: the
  // rows run layers 0 … L/2 and the full-attention layer's K/V append, the last row alone the rest and the head;
  // none: the rows stop after that append, no head). Returns (tokens, logits; invalid for none).
  std::pair<TensorRef, TensorRef> build(Graph& g, uint32_t rows, HeadOut out) const {
    Forward f{g, k};
    f.fp16 = fp16;
    f.rows = rows;
    f.row = false;
    f.pos = g.bind("position", TensorRole::external, ElemType::u32, {1}, dyn.range(0, 4));
    f.attn_sync = g.bind("attention arrival counters", TensorRole::external, ElemType::u32, {sync_bytes / 4},
                         sync.range(0, sync_bytes));
    Forward f1{g, k};  // YOCO's one-row pass at the last row's position
    f1.fp16 = fp16;
    f1.rows = 1;
    f1.row = false;
    f1.attn_sync = f.attn_sync;
    const bool yoco = out != HeadOut::all;
    if (yoco) f1.pos = g.bind("last position", TensorRole::external, ElemType::u32, {1}, dyn.range(last_pos, 4));
    const float eps = float(cfg.layer_norm_eps);
    const TensorRef tokens = g.tensor("tokens", TensorRole::input, ElemType::u32, {rows});
    const LinearWeight embed_w = bind_linear(f, "embed", E, ws->parts(embed));
    TensorRef x = add_embed(f, tokens, embed_w, "x");
    auto vec = [&](const std::string& name, size_t i, uint32_t n) { return bind_vector(f, name, n, ws->range(i)); };
    auto lin = [&](const std::string& name, size_t i, uint32_t in, size_t bias = kNone) {
      LinearWeight w = bind_linear(f, name, in, ws->parts(i));
      if (bias != kNone) w.bias = bind_f32(f, name + ".bias", {w.out}, f32->range(bias));
      return w;
    };
    const uint64_t kv_row = 2ull * D;
    const TensorRef shared_kc =
                        g.bind("shared.k_cache", TensorRole::kv_cache, f.storage(), {Hkv, cap, kv_row}, shared_k),
                    shared_vc =
                        g.bind("shared.v_cache", TensorRole::kv_cache, f.storage(), {Hkv, cap, kv_row}, shared_v);
    MambaShape ms;
    std::tie(ms.E, ms.C, ms.S, ms.K, ms.R, ms.eps) = std::tie(E, C, S, K, R, eps);
    TensorRef memory;
    Forward* cur = &f;  // the pass the next block runs in (YOCO: f1 from the full-attention layer's attention on)
    for (size_t l = 0; l < layers.size(); ++l) {
      const Layer& L = layers[l];
      const std::string P = "layers." + std::to_string(l) + ".";
      SambaNorm pre;
      pre.prefix = P;
      pre.w = vec(P + "input_layernorm.weight", L.ln1_w, E);
      pre.b = vec(P + "input_layernorm.bias", L.ln1_b, E);
      switch (L.kind) {
        case SambaYLayerKind::mamba:
        case SambaYLayerKind::memory_mamba: {
          MambaBlock mb;
          mb.pre = pre;
          mb.in_proj = lin(P + "in_proj", L.in_proj, E);
          mb.conv_w = g.bind(P + "conv1d.weight", TensorRole::weight, f.storage(), {C, K}, ws->range(L.conv_w));
          mb.conv_b = vec(P + "conv1d.bias", L.conv_b, C);
          mb.x_proj = lin(P + "x_proj", L.x_proj, C);
          mb.dt_proj = lin(P + "dt_proj", L.dt_w, R, L.dt_b);
          mb.A_log = bind_f32(f, P + "A_log", {C, S}, f32->range(L.A_log));
          mb.D = bind_f32(f, P + "D", {C}, f32->range(L.Dskip));
          mb.out_proj = lin(P + "out_proj", L.out_proj, C);
          mb.conv_state = g.bind(P + "conv_state", TensorRole::kv_cache, ElemType::f32, {K - 1ull, C}, L.conv_state);
          mb.scan_state = g.bind(P + "scan_state", TensorRole::kv_cache, ElemType::f32, {C, S}, L.scan_state);
          const bool mem = L.kind == SambaYLayerKind::memory_mamba;
          const TensorRef m = add_mamba_block(*cur, x, ms, mb, mem, "memory");
          if (mem) memory = m;
          break;
        }
        case SambaYLayerKind::gated_memory: {
          GmuBlock gb;
          gb.pre = pre;
          gb.in_proj = lin(P + "in_proj", L.in_proj, E);
          gb.out_proj = lin(P + "out_proj", L.out_proj, C);
          add_gmu_block(*cur, x, ms, gb, memory);
          break;
        }
        case SambaYLayerKind::sliding_attention:
        case SambaYLayerKind::full_attention:
        case SambaYLayerKind::cross_attention: {
          SambaAttnBlock ab;
          ab.pre = pre;
          ab.kind = L.kind == SambaYLayerKind::sliding_attention ? SambaAttnKind::sliding
                    : L.kind == SambaYLayerKind::full_attention  ? SambaAttnKind::full
                                                                 : SambaAttnKind::cross;
          ab.wqkv = lin(P + "Wqkv", L.wqkv, E, L.wqkv_b);
          ab.wo = lin(P + "attn.out_proj", L.out_proj, 2 * H * D, L.out_b);
          ab.subln = vec(P + "subln", L.subln, 2 * D);
          ab.lambda = L.lambda;
          ab.lambda_init = L.lambda_init;
          uint32_t capacity = cap;
          if (ab.kind == SambaAttnKind::sliding) {
            ab.k_cache = g.bind(P + "k_ring", TensorRole::kv_cache, f.storage(), {Hkv, ring, kv_row}, L.k_ring);
            ab.v_cache = g.bind(P + "v_ring", TensorRole::kv_cache, f.storage(), {Hkv, ring, kv_row}, L.v_ring);
            ab.window = W;
            capacity = ring;
          } else {
            ab.k_cache = shared_kc;
            ab.v_cache = shared_vc;
          }
          if (yoco && ab.kind == SambaAttnKind::full) {  // every row appends its K/V; the last row goes on alone
            const TensorRef q = add_sambay_qkv(f, x, attn_shape(capacity), ab, eps);
            if (out == HeadOut::none) return {tokens, {}};
            const TensorRef q1 = add_last_row(f, q, P + "q.last");
            x = add_last_row(f, x, "x.last");
            memory = add_last_row(f, memory, "memory.last");
            cur = &f1;
            add_sambay_attention_out(f1, x, q1, attn_shape(capacity), ab);
          } else {
            add_sambay_attention_block(*cur, x, attn_shape(capacity), ab, eps);
          }
          break;
        }
      }
      MlpBlock mlp;
      mlp.prefix = P;
      mlp.norm = vec(P + "post_attention_layernorm.weight", L.ln2_w, E);
      mlp.norm_b = vec(P + "post_attention_layernorm.bias", L.ln2_b, E);
      mlp.wgu = lin(P + "mlp.fc1", L.fc1, E);
      mlp.wdown = lin(P + "mlp.fc2", L.fc2, I);
      mlp.I = I;
      mlp.eps = eps;
      add_mlp_block(*cur, x, E, mlp);
      g.end_group();
    }
    if (out == HeadOut::none)
      throw Error(Status::internal, "phi4flash: YOCO without a full-attention layer (the plan always has one)");
    Head hd;
    hd.norm = vec("final_layernorm.weight", final_w, E);
    hd.norm_b = vec("final_layernorm.bias", final_b, E);
    hd.lm_head = lm_head == embed ? embed_w : bind_linear(f, "lm_head", E, ws->parts(lm_head));
    hd.eps = eps;
    hd.E = E;
    hd.vocab = V;
    return {tokens, add_head(*cur, x, hd, HeadOut::all)};
  }

  static std::string variant(HeadOut out) { return std::string("phi4flash logits=") + head_out_name(out); }
  // Programs of chunk rows, or fewer (fitted into the chunk's plan of the same output).
  Recorded& program(uint32_t rows, HeadOut out) {
    const auto key = std::make_pair(rows, out);
    auto it = programs.find(key);
    if (it != programs.end()) return it->second;
    Graph g(variant(out));
    const auto tl = build(g, rows, out);
    const auto placed = fit_graph(g, gplan, variant(out), arena.handles(), dev->caps().max_storage_buffer_range,
                                  dev->caps().min_storage_buffer_offset_alignment);
    Recorded r{std::make_unique<Program>(*dev, variant(out) + " rows=" + std::to_string(rows)), placed[tl.first.id],
               tl.second.valid() ? placed[tl.second.id] : BufferRange{}};
    record_graph(g, placed, *r.program);
    r.program->finalize();
    return programs.emplace(key, std::move(r)).first->second;
  }
  std::vector<float> run(const std::vector<int32_t>& tokens, bool yoco);
};

const Phi4FlashForward::Impl::Field Phi4FlashForward::Impl::kFields[19] = {
    {&Layer::ln1_w, &Phi4FlashLayer::ln1_w, false},       {&Layer::ln1_b, &Phi4FlashLayer::ln1_b, false},
    {&Layer::ln2_w, &Phi4FlashLayer::ln2_w, false},       {&Layer::ln2_b, &Phi4FlashLayer::ln2_b, false},
    {&Layer::fc1, &Phi4FlashLayer::fc1, false},           {&Layer::fc2, &Phi4FlashLayer::fc2, false},
    {&Layer::in_proj, &Phi4FlashLayer::in_proj, false},   {&Layer::conv_w, &Phi4FlashLayer::conv_w, false},
    {&Layer::conv_b, &Phi4FlashLayer::conv_b, false},     {&Layer::x_proj, &Phi4FlashLayer::x_proj, false},
    {&Layer::dt_w, &Phi4FlashLayer::dt_w, false},         {&Layer::dt_b, &Phi4FlashLayer::dt_b, true},
    {&Layer::A_log, &Phi4FlashLayer::A_log, true},        {&Layer::Dskip, &Phi4FlashLayer::D, true},
    {&Layer::out_proj, &Phi4FlashLayer::out_proj, false}, {&Layer::out_b, &Phi4FlashLayer::out_b, true},
    {&Layer::wqkv, &Phi4FlashLayer::wqkv, false},         {&Layer::wqkv_b, &Phi4FlashLayer::wqkv_b, true},
    {&Layer::subln, &Phi4FlashLayer::subln, false},
};

std::unique_ptr<Phi4FlashForward> Phi4FlashForward::load(Device& dev, const Phi4FlashCheckpoint& ck,
                                                         const Phi4FlashForwardOptions& o) {
  auto m = std::make_unique<Impl>();
  m->dev = &dev;
  m->fp16 = dev.fp16();
  m->cfg = ck.config;
  m->plan = ck.plan;
  const Phi4FlashConfig& c = m->cfg;
  if (ck.layers.size() != c.num_layers || m->plan.kinds.size() != c.num_layers)
    throw Error(Status::internal, "phi4flash: the checkpoint's layers do not match its config");
  m->E = c.hidden_size;
  m->H = c.diff_heads();
  m->Hkv = c.kv_groups();
  m->D = c.head_dim;
  m->I = c.intermediate_size;
  m->C = c.d_inner();
  m->S = c.mamba_d_state;
  m->K = c.mamba_d_conv;
  m->R = c.mamba_dt_rank;
  m->V = c.vocab_size;
  m->W = c.sliding_window;
  if (o.max_positions > c.max_position_embeddings)
    throw Error(Status::invalid_argument, "phi4flash: max_positions " + std::to_string(o.max_positions) +
                                              " exceeds max_position_embeddings " +
                                              std::to_string(c.max_position_embeddings));
  m->cap = o.max_positions ? o.max_positions : c.max_position_embeddings;
  m->chunk = std::min(o.chunk ? o.chunk : m->cap, m->cap);
  m->ring = m->W + m->chunk - 1;

  m->k = build_phi4flash_kernels(dev, c);

  // Weights: the storage type, and float32 for what the kernels read as float32.
  const uint64_t max_binding = dev.caps().max_storage_buffer_range;
  m->ws = std::make_unique<WeightStore>(dev, m->fp16, max_binding);
  m->f32 = std::make_unique<WeightStore>(dev, false, max_binding);
  WeightStore &ws = *m->ws, &wf = *m->f32;
  m->embed = ws.add(ck.embed);
  for (size_t l = 0; l < ck.layers.size(); ++l) {
    const Phi4FlashLayer& S = ck.layers[l];
    Impl::Layer L;
    L.kind = S.kind;
    if (S.kind != m->plan.kinds[l]) throw Error(Status::internal, "phi4flash: layer kinds differ from the plan");
    // Every tensor the layer's kind has (the checkpoint leaves the others without rows).
    for (const Impl::Field& fd : Impl::kFields)
      if ((S.*fd.src).rows()) L.*fd.dst = (fd.f32 ? wf : ws).add(S.*fd.src);
    if (S.kind == SambaYLayerKind::sliding_attention || S.kind == SambaYLayerKind::full_attention ||
        S.kind == SambaYLayerKind::cross_attention) {
      // λ = exp(λq1·λk1) − exp(λq2·λk2) + λ_init, λ_init of the absolute layer index (docs/maths.md).
      const auto q1 = source_floats(S.lambda_q1), k1 = source_floats(S.lambda_k1), q2 = source_floats(S.lambda_q2),
                 k2 = source_floats(S.lambda_k2);
      double d1 = 0, d2 = 0;
      for (size_t i = 0; i < q1.size(); ++i) {
        d1 += double(q1[i]) * k1[i];
        d2 += double(q2[i]) * k2[i];
      }
      L.lambda_init = 0.8 - 0.6 * std::exp(-0.3 * double(l));
      L.lambda = std::exp(d1) - std::exp(d2) + L.lambda_init;
      if (!std::isfinite(L.lambda))
        throw Error(Status::format_error, "phi4flash: lambda of layer " + std::to_string(l) + " is not finite");
    }
    m->layers.push_back(L);
  }
  m->final_w = ws.add(ck.final_w);
  m->final_b = ws.add(ck.final_b);
  m->lm_head = ck.lm_head.rows() ? ws.add(ck.lm_head) : m->embed;
  ws.upload(o.staging_bytes);
  wf.upload(o.staging_bytes);

  // States: one buffer, every range aligned.
  const uint64_t al = dev.caps().min_storage_buffer_offset_alignment, es = m->fp16 ? 2 : 4;
  const uint64_t conv_bytes = uint64_t(m->K - 1) * m->C * 4, scan_bytes = uint64_t(m->C) * m->S * 4;
  const uint64_t ring_bytes = uint64_t(m->Hkv) * m->ring * 2 * m->D * es,
                 shared_bytes = uint64_t(m->Hkv) * m->cap * 2 * m->D * es;
  struct Slot {
    BufferRange* r;
    uint64_t bytes;
    bool mamba;
  };
  std::vector<Slot> slots{{&m->shared_k, shared_bytes, false}, {&m->shared_v, shared_bytes, false}};
  for (auto& L : m->layers) {
    if (L.kind == SambaYLayerKind::mamba || L.kind == SambaYLayerKind::memory_mamba) {
      slots.push_back({&L.conv_state, conv_bytes, true});
      slots.push_back({&L.scan_state, scan_bytes, true});
    } else if (L.kind == SambaYLayerKind::sliding_attention) {
      slots.push_back({&L.k_ring, ring_bytes, false});
      slots.push_back({&L.v_ring, ring_bytes, false});
    }
  }
  uint64_t total = 0;
  std::vector<uint64_t> offsets;
  for (const Slot& s : slots) {
    offsets.push_back(total);
    total = align_up(total + s.bytes, al);
  }
  m->state = Buffer(dev, total, MemoryDomain::device, "phi4flash states");
  for (size_t i = 0; i < slots.size(); ++i) {
    *slots[i].r = m->state.range(offsets[i], slots[i].bytes);
    (slots[i].mamba ? m->mamba_states : m->caches).push_back(*slots[i].r);
  }
  m->last_pos = std::max<uint64_t>(al, 4);
  m->dyn = Buffer(dev, 2 * m->last_pos, MemoryDomain::device, "phi4flash positions");
  m->sync_bytes = attn_sync_bytes(m->attn_shape(m->cap), false);
  m->sync = Buffer(dev, m->sync_bytes, MemoryDomain::device, "phi4flash attention arrival counters");
  m->sync.fill(0, m->sync_bytes, 0);
  {  // the variants never run at once: one arena
    Graph all(Impl::variant(HeadOut::all)), last(Impl::variant(HeadOut::last)), none(Impl::variant(HeadOut::none));
    m->build(all, m->chunk, HeadOut::all);
    m->build(last, m->chunk, HeadOut::last);
    m->build(none, m->chunk, HeadOut::none);
    m->gplan = plan_graphs({&all, &last, &none}, max_binding, al);
  }
  m->arena = Arena(dev, m->gplan.plan, "phi4flash");
  return std::unique_ptr<Phi4FlashForward>(new Phi4FlashForward(std::move(m)));
}

Phi4FlashForward::Phi4FlashForward(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Phi4FlashForward::~Phi4FlashForward() = default;

std::vector<float> Phi4FlashForward::Impl::run(const std::vector<int32_t>& tokens, bool yoco) {
  if (tokens.empty()) throw Error(Status::invalid_argument, "phi4flash: an empty prompt");
  if (tokens.size() > cap)
    throw Error(Status::context_overflow, "phi4flash: a prompt of " + std::to_string(tokens.size()) +
                                              " tokens exceeds max_positions " + std::to_string(cap));
  for (size_t i = 0; i < tokens.size(); ++i)
    if (tokens[i] < 0 || uint32_t(tokens[i]) >= V)
      throw Error(Status::invalid_argument, "phi4flash: token " + std::to_string(tokens[i]) + " at " +
                                                std::to_string(i) + " is outside the vocabulary of " +
                                                std::to_string(V));
  for (const BufferRange& r : mamba_states) state.fill(r.offset, r.size, 0);  // a fresh sequence
  const uint32_t T = uint32_t(tokens.size());
  std::vector<float> logits(size_t(yoco ? 1 : T) * V);
  for (uint32_t r0 = 0; r0 < T; r0 += chunk) {
    const uint32_t rows = std::min(chunk, T - r0), last = r0 + rows - 1;
    const HeadOut out = !yoco ? HeadOut::all : last + 1 == T ? HeadOut::last : HeadOut::none;
    Recorded& r = program(rows, out);
    arena.owner(r.tokens).upload(r.tokens.offset, tokens.data() + r0, size_t(rows) * 4);
    dyn.upload(0, &r0, 4);
    dyn.upload(last_pos, &last, 4);
    r.program->run();
    if (out == HeadOut::all)
      arena.owner(r.logits).download(r.logits.offset, logits.data() + size_t(r0) * V, size_t(rows) * V * 4);
    else if (out == HeadOut::last)
      arena.owner(r.logits).download(r.logits.offset, logits.data(), size_t(V) * 4);
  }
  return logits;
}

std::vector<float> Phi4FlashForward::prompt(const std::vector<int32_t>& tokens) { return impl_->run(tokens, false); }
std::vector<float> Phi4FlashForward::prompt_last(const std::vector<int32_t>& tokens) {
  return impl_->run(tokens, true);
}

uint32_t Phi4FlashForward::chunk() const { return impl_->chunk; }
uint32_t Phi4FlashForward::max_positions() const { return impl_->cap; }
uint32_t Phi4FlashForward::ring_rows() const { return impl_->ring; }
uint32_t Phi4FlashForward::vocab() const { return impl_->V; }
std::string Phi4FlashForward::describe_plan() const { return format_plan(impl_->gplan.lifetimes, impl_->gplan.plan); }

void Phi4FlashForward::fill_for_testing(uint32_t word) {
  Impl& m = *impl_;
  for (const BufferRange& r : m.caches) m.state.fill(r.offset, r.size, word);
  for (size_t i = 0; i < m.gplan.plan.buffer_sizes.size(); ++i) {
    const BufferRange all{m.arena.handles()[i], 0, m.gplan.plan.buffer_sizes[i]};
    m.arena.owner(all).fill(0, all.size, word);
  }
}

}  // namespace diffvk
