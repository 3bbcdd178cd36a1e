// The Phi-4-mini-flash (SambaY) forward pass (phi4flash_forward.hpp).
#include "model/phi4flash_forward.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <mutex>
#include <tuple>

#include "diffvk/error.hpp"
#include "diffvk/generate.hpp"  // kMaxDraftTokens
#include "graph/arena.hpp"
#include "io/quant.hpp"
#include "model/model_impl.hpp"  // device_heap_bytes
#include "model/model_kernels.hpp"
#include "model/recipe_sambay.hpp"
#include "model/weight_store.hpp"
#include "ops/linear_quant.hpp"
#include "platform.hpp"
#include "plan/memory_plan.hpp"
#include "vk/pipeline_cache_file.hpp"  // fnv1a64

namespace diffvk {

namespace {
constexpr size_t kNone = SIZE_MAX;
constexpr uint32_t kUnknown = UINT32_MAX;

// What the device heap (device-local, else the largest: device_heap_bytes) has left.
uint64_t heap_left(const DeviceCaps& caps) {
  const uint64_t heap = device_heap_bytes(caps);
  return heap - std::min(heap, device_bytes_allocated());
}
}  // namespace

struct Phi4FlashWeights {
  Device* dev = nullptr;
  bool fp16 = false;
  Phi4FlashConfig cfg;
  SambaYPlan plan;
  uint32_t E = 0, H = 0, Hkv = 0, D = 0, I = 0, C = 0, S = 0, K = 0, R = 0, V = 0, W = 0;
  // mutable: the Q8_0 KV cache's kernels (k.rope_q8, k.attn_q8) are added by the first session that asks for one
  // (ensure_kv_q8, under kv_q8_mutex); everything else is built at upload.
  mutable ModelKernels k;
  mutable std::mutex kv_q8_mutex;
  std::unique_ptr<WeightStore> ws;   // the storage type
  std::unique_ptr<WeightStore> f32;  // float32 whatever the storage type: biases, A_log, D
  struct Layer {
    SambaYLayerKind kind = SambaYLayerKind::mamba;
    size_t ln1_w = kNone, ln1_b = kNone, ln2_w = kNone, ln2_b = kNone, fc1 = kNone, fc2 = kNone;
    size_t in_proj = kNone, conv_w = kNone, conv_b = kNone, x_proj = kNone, dt_w = kNone, out_proj = kNone;
    size_t wqkv = kNone, subln = kNone;
    size_t dt_b = kNone, A_log = kNone, Dskip = kNone, out_b = kNone, wqkv_b = kNone;  // in f32
    double lambda = 0, lambda_init = 0;
  };
  std::vector<Layer> layers;
  // Where each checkpoint source of a layer goes: the storage-type store, or float32 (what the kernels read as
  // float32 whatever the storage type).
  struct Field {
    size_t Layer::*dst;
    WeightSource Phi4FlashLayer::*src;
    bool f32;
    bool linear = false;  // quantized under Phi4FlashLoad::weights
  };
  static const Field kFields[19];
  std::vector<QuantType> quant;  // the block formats used
  size_t embed = kNone, final_w = kNone, final_b = kNone, lm_head = kNone;
  uint64_t per_token = 0;
};

const Phi4FlashWeights::Field Phi4FlashWeights::kFields[19] = {
    {&Layer::ln1_w, &Phi4FlashLayer::ln1_w, false},
    {&Layer::ln1_b, &Phi4FlashLayer::ln1_b, false},
    {&Layer::ln2_w, &Phi4FlashLayer::ln2_w, false},
    {&Layer::ln2_b, &Phi4FlashLayer::ln2_b, false},
    {&Layer::fc1, &Phi4FlashLayer::fc1, false, true},
    {&Layer::fc2, &Phi4FlashLayer::fc2, false, true},
    {&Layer::in_proj, &Phi4FlashLayer::in_proj, false, true},
    {&Layer::conv_w, &Phi4FlashLayer::conv_w, false},
    {&Layer::conv_b, &Phi4FlashLayer::conv_b, false},
    {&Layer::x_proj, &Phi4FlashLayer::x_proj, false},
    {&Layer::dt_w, &Phi4FlashLayer::dt_w, false},
    {&Layer::dt_b, &Phi4FlashLayer::dt_b, true},
    {&Layer::A_log, &Phi4FlashLayer::A_log, true},
    {&Layer::Dskip, &Phi4FlashLayer::D, true},
    {&Layer::out_proj, &Phi4FlashLayer::out_proj, false, true},
    {&Layer::out_b, &Phi4FlashLayer::out_b, true},
    {&Layer::wqkv, &Phi4FlashLayer::wqkv, false, true},
    {&Layer::wqkv_b, &Phi4FlashLayer::wqkv_b, true},
    {&Layer::subln, &Phi4FlashLayer::subln, false},
};

namespace {
// The format a linear is stored in: a quantized GGUF's blocks as they are (the asked kind must be the file's or f16);
// else the asked one, where the width holds whole blocks.
QuantType linear_format(const WeightSource& w, QuantType asked, std::vector<QuantType>& used) {
  QuantType f = asked;
  if (w.stored != QuantType::f16) {
    if (asked != QuantType::f16 && asked != w.stored)
      throw Error(Status::invalid_argument, "phi4flash: " + w.name + " is " + quant_type_name(w.stored) +
                                                " in the file but the weights asked are " + quant_type_name(asked) +
                                                ": load with f16 (the file's own formats) or " +
                                                quant_type_name(w.stored));
    f = w.stored;
  } else if (f != QuantType::f16 && w.cols % kQuantBlockWeights != 0) {
    platform::log(platform::LogLevel::warn, "phi4flash: " + w.name + " stays in the storage type: its input width " +
                                                std::to_string(w.cols) + " is not a multiple of 32");
    f = QuantType::f16;
  }
  if (f != QuantType::f16 && std::find(used.begin(), used.end(), f) == used.end()) used.push_back(f);
  return f;
}
}  // namespace

std::shared_ptr<const Phi4FlashWeights> upload_phi4flash(Device& dev, const Phi4FlashCheckpoint& ck,
                                                         const Phi4FlashLoad& load) {
  const uint64_t staging_bytes = load.staging_bytes;
  if (int(load.weights) < 0 || int(load.weights) > int(QuantKind::q4_0))
    throw Error(Status::invalid_argument, "phi4flash: unknown weight format " + std::to_string(int(load.weights)));
  const QuantType asked = static_cast<QuantType>(load.weights),
                  head = asked == QuantType::q4_0 && !load.q4_0_head ? QuantType::q8_0 : asked;
  auto m = std::make_shared<Phi4FlashWeights>();
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

  // Weights: the storage type, and float32 for what the kernels read as float32.
  const uint64_t max_binding = dev.caps().max_storage_buffer_range;
  m->ws = std::make_unique<WeightStore>(dev, m->fp16, max_binding);
  m->f32 = std::make_unique<WeightStore>(dev, false, max_binding);
  WeightStore &ws = *m->ws, &wf = *m->f32;
  const bool tied = !ck.lm_head.rows();
  m->embed = ws.add(ck.embed, linear_format(ck.embed, tied ? head : asked, m->quant));
  for (size_t l = 0; l < ck.layers.size(); ++l) {
    const Phi4FlashLayer& S = ck.layers[l];
    Phi4FlashWeights::Layer L;
    L.kind = S.kind;
    if (S.kind != m->plan.kinds[l]) throw Error(Status::internal, "phi4flash: layer kinds differ from the plan");
    // Every tensor the layer's kind has (the checkpoint leaves the others without rows).
    for (const Phi4FlashWeights::Field& fd : Phi4FlashWeights::kFields)
      if ((S.*fd.src).rows())
        L.*fd.dst = fd.f32      ? wf.add(S.*fd.src)
                    : fd.linear ? ws.add(S.*fd.src, linear_format(S.*fd.src, asked, m->quant))
                                : ws.add(S.*fd.src);
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
  m->lm_head = tied ? m->embed : ws.add(ck.lm_head, linear_format(ck.lm_head, head, m->quant));
  m->k = build_phi4flash_kernels(dev, c, m->quant, load.decode_path, load.prefill_path);
  const uint64_t need = ws.planned_bytes() + wf.planned_bytes(), heap = heap_left(dev.caps());
  if (need > heap)
    throw Error(Status::out_of_memory, "phi4flash: the weights need " + std::to_string(need) +
                                           " bytes of device memory but " + std::to_string(heap) +
                                           " remain on the device heap; nothing was allocated");
  ws.upload(staging_bytes);
  wf.upload(staging_bytes);
  // A decode step reads every weight once, but one row of an untied embedding.
  uint64_t embed_bytes = 0;
  for (const WeightPart& part : ws.parts(m->embed)) embed_bytes += part.range.size;
  m->per_token =
      ws.total() + wf.total() - (m->lm_head == m->embed ? 0 : embed_bytes) + uint64_t(m->E) * (m->fp16 ? 2 : 4);
  return m;
}

const Phi4FlashConfig& phi4flash_config(const Phi4FlashWeights& w) { return w.cfg; }
uint64_t phi4flash_weight_bytes(const Phi4FlashWeights& w) { return w.ws->total() + w.f32->total(); }
uint64_t phi4flash_per_token_bytes(const Phi4FlashWeights& w) { return w.per_token; }
std::string phi4flash_quant_decode(const Phi4FlashWeights& w) {
  return w.k.qrow ? quant_row_path_name(w.k.qrow->choice().path) : "";
}
std::string phi4flash_quant_prefill(const Phi4FlashWeights& w) {
  return w.quant.empty() ? "" : quant_row_path_name(w.k.linear->quant_choice().path);
}
std::string phi4flash_quant_formats(const Phi4FlashWeights& w) {
  std::string s;
  for (QuantType t : w.quant) s += std::string(s.empty() ? "" : "/") + quant_type_name(t);
  return s;
}

uint64_t phi4flash_fingerprint(const Phi4FlashWeights& w) {
  const Phi4FlashConfig& c = w.cfg;
  uint64_t h = fnv1a64("diffvk phi4flash", 16);
  auto mix = [&](const auto& v) { h = fnv1a64(&v, sizeof v, h); };
  for (uint32_t v : {c.vocab_size, c.hidden_size, c.intermediate_size, c.num_layers, c.num_attention_heads,
                     c.num_key_value_heads, c.head_dim, c.max_position_embeddings, c.sliding_window, c.mamba_d_state,
                     c.mamba_d_conv, c.mamba_expand, c.mamba_dt_rank, uint32_t(w.fp16)})
    mix(v);
  mix(c.layer_norm_eps);
  auto bytes = [&](size_t i) {
    if (i == kNone) return;
    const std::vector<uint8_t> b = w.ws->download(i);
    h = fnv1a64(b.data(), b.size(), h);
  };
  for (const auto& L : w.layers) {
    mix(L.lambda);
    mix(L.lambda_init);
    for (size_t i : {L.ln1_w, L.ln1_b, L.ln2_w, L.ln2_b}) bytes(i);
  }
  bytes(w.final_w);
  bytes(w.final_b);
  return h;
}

namespace {
// The Q8_0 KV cache's kernels, added to the model's kernels by the first session that asks (build_kv_q8_kernels:
// invalid_argument, naming the width, where cache rows cannot hold Q8_0 blocks).
void ensure_kv_q8(const Phi4FlashWeights& w) {
  const std::lock_guard<std::mutex> lock(w.kv_q8_mutex);
  build_kv_q8_kernels(*w.dev, w.cfg, w.k);
}
}  // namespace

struct Phi4FlashForward::Impl {
  std::shared_ptr<const Phi4FlashWeights> wp;
  const Phi4FlashWeights* w = nullptr;
  Device* dev = nullptr;
  uint32_t cap = 0, chunk = 0, piece = 0, ring = 0;  // piece: the rows a sliding layer appends and attends at once
  KvFormat kv = KvFormat::storage;                   // the shared cache's and the rings' format
  struct LayerState {
    BufferRange conv_state, scan_state, k_ring, v_ring;  // Mamba states; sliding layers' rings
  };
  std::vector<LayerState> ls;
  Buffer state;                     // every layer's states and caches, the recurrent states first
  BufferRange recurrent, snapshot;  // the Mamba states (contiguous) and their copy at the last run's start
  BufferRange shared_k, shared_v;
  std::vector<BufferRange> caches;  // filled by fill_for_testing
  Buffer dyn, sync;
  uint64_t sync_bytes = 0, last_pos = 0;  // last_pos: offset of the YOCO last row's position in dyn
  Buffer sample_io;  // device sampling: {position, u, temperature, top_k} at 0, the id at picked_at
  uint64_t picked_at = 0;
  std::vector<uint32_t> dyn_host;  // dyn's contents, filled at each run (no allocation there)
  GraphPlan gplan;
  Arena arena;
  struct Recorded {
    std::unique_ptr<Program> program;
    BufferRange tokens, logits;
  };
  std::map<std::pair<uint32_t, HeadOut>, Recorded> programs;
  std::unique_ptr<Program> restore_prog;  // snapshot -> recurrent states
  uint32_t state_pos = 0, snap_pos = 0;
  bool snap_valid = false;
  bool yoco_prefill = true;       // Phi4FlashForwardOptions::yoco
  bool profile = false;           // Phi4FlashForwardOptions::profile
  const Program* last = nullptr;  // the program of the last run

  AttnShape attn_shape(uint32_t capacity) const {
    return AttnShape::heads(w->E, w->H, w->Hkv, w->D).cache(capacity, chunk).norms(float(w->cfg.layer_norm_eps), 1e-5f);
  }
  // One cache's bytes of `rows` rows per KV group ([Hkv][rows][2D]; Q8_0: the quants, then the scales).
  uint64_t cache_bytes(uint32_t rows) const { return kv_cache_bytes(kv, w->fp16, w->Hkv, rows, 2 * w->D); }
  // A cache row's bytes: storage-type elements, or (Q8_0) its quants; q8_scale_bytes() its scales (0 otherwise).
  uint64_t row_bytes() const { return kv == KvFormat::q8_0 ? 2ull * w->D : 2ull * w->D * (w->fp16 ? 2 : 4); }
  uint64_t q8_scale_bytes() const { return kv == KvFormat::q8_0 ? 2ull * kv_q8_scale_slots(2 * w->D) : 0; }
  // The whole model over `rows` rows at the position in `dyn` (out all: every row's logits), or YOCO (last: the
  // rows run layers 0 … L/2 and the full-attention layer's K/V append, the last row alone the rest and the head;
  // none: the rows stop after that append, no head). Returns (tokens, logits; invalid for none).
  std::pair<TensorRef, TensorRef> build(Graph& g, uint32_t rows, HeadOut wanted) const {
    // sample: one row through every layer and the head (as all), then device sampling of its logits.
    const HeadOut out = wanted == HeadOut::sample ? HeadOut::all : wanted;
    if (wanted == HeadOut::sample && rows != 1) throw Error(Status::internal, "phi4flash: device sampling of one row");
    const Phi4FlashWeights& M = *w;
    const uint32_t E = M.E, H = M.H, Hkv = M.Hkv, D = M.D, I = M.I, C = M.C, S = M.S, K = M.K, R = M.R, V = M.V,
                   W = M.W;
    const ModelKernels& k = M.k;
    const bool fp16 = M.fp16;
    const WeightStore *ws = M.ws.get(), *f32 = M.f32.get();
    Forward f{g, k};
    f.fp16 = fp16;
    f.kv = kv;
    f.rows = rows;
    f.row = false;
    f.pos = g.bind("position", TensorRole::external, ElemType::u32, {1}, dyn.range(0, 4));
    f.attn_sync = g.bind("attention arrival counters", TensorRole::external, ElemType::u32, {sync_bytes / 4},
                         sync.range(0, sync_bytes));
    Forward f1{g, k};  // YOCO's one-row pass at the last row's position
    f1.fp16 = fp16;
    f1.kv = kv;
    f1.rows = 1;
    f1.row = false;
    f1.attn_sync = f.attn_sync;
    const bool yoco = out != HeadOut::all && yoco_prefill;
    if (out != HeadOut::all)
      f1.pos = g.bind("last position", TensorRole::external, ElemType::u32, {1}, dyn.range(last_pos, 4));
    const float eps = float(M.cfg.layer_norm_eps);
    // The recurrent states as they are before this run (seek's rewind point), copied first.
    const TensorRef rec = g.bind("recurrent states", TensorRole::kv_cache, ElemType::f32, {recurrent.size / 4},
                                 recurrent),
                    snap = g.bind("recurrent snapshot", TensorRole::kv_cache, ElemType::f32, {snapshot.size / 4},
                                  snapshot);
    g.add("snapshot recurrent states", {rec}, {snap},
          [=](Program& p, const GraphBinding& b) { p.copy(b[rec], b[snap], "snapshot recurrent states"); });
    const TensorRef tokens = g.tensor("tokens", TensorRole::input, ElemType::u32, {rows});
    const LinearWeight embed_w = bind_linear(f, "embed", E, ws->parts(M.embed), ws->format(M.embed));
    TensorRef x = add_embed(f, tokens, embed_w, "x");
    auto vec = [&](const std::string& name, size_t i, uint32_t n) { return bind_vector(f, name, n, ws->range(i)); };
    auto lin = [&](const std::string& name, size_t i, uint32_t in, size_t bias = kNone) {
      LinearWeight lw = bind_linear(f, name, in, ws->parts(i), ws->format(i));
      if (bias != kNone) lw.bias = bind_f32(f, name + ".bias", {lw.out}, f32->range(bias));
      return lw;
    };
    const uint64_t kv_row = 2ull * D;
    // A cache of `rows` rows: [Hkv][rows][2D] in the storage type, or Q8_0's quants and scales bound as bytes.
    auto bind_cache = [&](const std::string& name, uint32_t n, BufferRange r) {
      if (kv == KvFormat::q8_0) return g.bind(name, TensorRole::kv_cache, ElemType::bytes, {cache_bytes(n)}, r);
      return g.bind(name, TensorRole::kv_cache, f.storage(), {Hkv, n, kv_row}, r);
    };
    const TensorRef shared_kc = bind_cache("shared.k_cache", cap, shared_k),
                    shared_vc = bind_cache("shared.v_cache", cap, shared_v);
    MambaShape ms;
    std::tie(ms.E, ms.C, ms.S, ms.K, ms.R, ms.eps) = std::tie(E, C, S, K, R, eps);
    TensorRef memory;
    Forward* cur = &f;  // the pass the next block runs in (YOCO: f1 from the full-attention layer's attention on)
    for (size_t l = 0; l < M.layers.size(); ++l) {
      const Phi4FlashWeights::Layer& L = M.layers[l];
      const LayerState& St = ls[l];
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
          mb.conv_state = g.bind(P + "conv_state", TensorRole::kv_cache, ElemType::f32, {K - 1ull, C}, St.conv_state);
          mb.scan_state = g.bind(P + "scan_state", TensorRole::kv_cache, ElemType::f32, {C, S}, St.scan_state);
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
            ab.k_cache = bind_cache(P + "k_ring", ring, St.k_ring);
            ab.v_cache = bind_cache(P + "v_ring", ring, St.v_ring);
            ab.window = W;
            ab.piece = piece;
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
    if (out == HeadOut::none) {
      if (yoco) throw Error(Status::internal, "phi4flash: YOCO without a full-attention layer (the plan has one)");
      return {tokens, {}};
    }
    if (!yoco && out == HeadOut::last) {  // yoco off: every row ran every layer; the head the last row
      x = add_last_row(f, x, "x.last");
      cur = &f1;
    }
    Head hd;
    hd.norm = vec("final_layernorm.weight", M.final_w, E);
    hd.norm_b = vec("final_layernorm.bias", M.final_b, E);
    hd.lm_head =
        M.lm_head == M.embed ? embed_w : bind_linear(f, "lm_head", E, ws->parts(M.lm_head), ws->format(M.lm_head));
    hd.eps = eps;
    hd.E = E;
    hd.vocab = V;
    const TensorRef logits = add_head(*cur, x, hd, HeadOut::all);
    if (wanted == HeadOut::sample)
      add_sample(*cur, logits,
                 g.bind("sample parameters", TensorRole::external, ElemType::u32, {4}, sample_io.range(0, 16)),
                 g.bind("sampled token", TensorRole::external, ElemType::u32, {1}, sample_io.range(picked_at, 4)), V);
    return {tokens, logits};
  }

  static std::string variant(HeadOut out) { return std::string("phi4flash logits=") + head_out_name(out); }
  // Programs of chunk rows, or fewer (fitted into the chunk's plan of the same output).
  Recorded& program(uint32_t rows, HeadOut out) {
    const auto key = std::make_pair(rows, out);
    auto it = programs.find(key);
    if (it != programs.end()) return it->second;
    Graph g(variant(out));
    const auto tl = build(g, rows, out);
    // Device sampling adds only bound tensors to the one-row `all` graph: it fits that variant's plan.
    const HeadOut planned = out == HeadOut::sample ? HeadOut::all : out;
    const auto placed = fit_graph(g, gplan, variant(planned), arena.handles(), dev->caps().max_storage_buffer_range,
                                  dev->caps().min_storage_buffer_offset_alignment);
    Recorded r{std::make_unique<Program>(*dev, variant(out) + " rows=" + std::to_string(rows), profile),
               placed[tl.first.id], tl.second.valid() ? placed[tl.second.id] : BufferRange{}};
    record_graph(g, placed, *r.program);
    r.program->finalize();
    return programs.emplace(key, std::move(r)).first->second;
  }
  void reset_states() {
    state.fill(recurrent.offset, recurrent.size, 0);
    state_pos = 0;
    snap_valid = false;
  }
  // out sample (one row): `sample` is {u, temperature (float bits), top_k}, and the chosen id goes to *picked.
  void run(const int32_t* tokens, uint32_t rows, HeadOut out, float* logits, const std::function<bool()>& abort,
           const uint32_t* sample = nullptr, uint32_t* picked = nullptr);
  std::vector<float> prompt(const std::vector<int32_t>& tokens, bool last_only);
  // The saved state (Phi4FlashForward::save) at n positions, in file order: each part a piece of one state range; a
  // ring's rows (ring true) are pieces of a ring, in position order.
  struct SavedPart {
    const BufferRange* range;
    uint64_t offset, bytes;
    bool ring;
  };
  std::vector<SavedPart> saved_parts(uint32_t n) const;
  uint32_t ring_saved_rows(uint32_t n) const { return std::min(n, w->W - 1); }
};

std::unique_ptr<Phi4FlashForward> Phi4FlashForward::create(std::shared_ptr<const Phi4FlashWeights> weights,
                                                           const Phi4FlashForwardOptions& o) {
  auto m = std::make_unique<Impl>();
  m->wp = std::move(weights);
  m->w = m->wp.get();
  const Phi4FlashWeights& W = *m->w;
  Device& dev = *W.dev;
  m->dev = &dev;
  const Phi4FlashConfig& c = W.cfg;
  if (o.max_positions > c.max_position_embeddings)
    throw Error(Status::invalid_argument, "phi4flash: max_positions " + std::to_string(o.max_positions) +
                                              " exceeds max_position_embeddings " +
                                              std::to_string(c.max_position_embeddings));
  m->cap = o.max_positions ? o.max_positions : c.max_position_embeddings;
  m->chunk = std::min(o.chunk ? o.chunk : m->cap, m->cap);
  // The sliding layers append and attend at most a speculative verify pass's rows at once (k + 1), so that their
  // rings stay near the window (window + piece − 1 rows, not window + chunk − 1: docs/phi4flash.md, session memory).
  // A piece's rows start at a multiple of `piece` in the q, [q | k | v] and output tensors, bound at that offset: it
  // must be a multiple of minStorageBufferOffsetAlignment (up to 256 bytes), else fewer rows, else no pieces.
  const AttnShape as = m->attn_shape(0);
  const uint64_t es = W.fp16 ? 2 : 4, al_rows = dev.caps().min_storage_buffer_offset_alignment;
  m->piece =
      sambay_piece_rows(m->chunk, kMaxDraftTokens + 1, {sambay_q_width(as) * es, sambay_qkv_width(as) * es}, al_rows);
  m->ring = W.W + m->piece - 1;
  m->yoco_prefill = o.yoco;
  m->profile = o.profile;
  m->kv = o.kv;
  if (o.kv == KvFormat::q8_0) ensure_kv_q8(W);

  // States: one buffer, every range aligned; the recurrent states first, contiguous (one copy snapshots them).
  const uint64_t al = dev.caps().min_storage_buffer_offset_alignment;
  const uint64_t conv_bytes = uint64_t(W.K - 1) * W.C * 4, scan_bytes = uint64_t(W.C) * W.S * 4;
  const uint64_t ring_bytes = m->cache_bytes(m->ring), shared_bytes = m->cache_bytes(m->cap);
  m->ls.resize(W.layers.size());
  uint64_t total = 0;
  std::vector<std::pair<BufferRange*, uint64_t>> slots;  // (range, offset)
  auto place = [&](BufferRange* r, uint64_t bytes) {
    slots.emplace_back(r, total);
    r->size = bytes;
    total = align_up(total + bytes, al);
  };
  for (size_t l = 0; l < W.layers.size(); ++l)
    if (W.layers[l].kind == SambaYLayerKind::mamba || W.layers[l].kind == SambaYLayerKind::memory_mamba) {
      place(&m->ls[l].conv_state, conv_bytes);
      place(&m->ls[l].scan_state, scan_bytes);
    }
  const uint64_t recurrent_bytes = total;
  m->recurrent.size = recurrent_bytes;
  place(&m->snapshot, recurrent_bytes);
  place(&m->shared_k, shared_bytes);
  place(&m->shared_v, shared_bytes);
  for (size_t l = 0; l < W.layers.size(); ++l)
    if (W.layers[l].kind == SambaYLayerKind::sliding_attention) {
      place(&m->ls[l].k_ring, ring_bytes);
      place(&m->ls[l].v_ring, ring_bytes);
    }
  m->last_pos = std::max<uint64_t>(al, 4);
  m->sync_bytes = attn_sync_bytes(m->attn_shape(m->cap), false);
  const uint64_t max_binding = dev.caps().max_storage_buffer_range;
  {  // the variants never run at once: one arena (planned before anything is allocated: the graphs bind no memory)
    Graph all(Impl::variant(HeadOut::all)), last(Impl::variant(HeadOut::last)), none(Impl::variant(HeadOut::none));
    m->build(all, m->chunk, HeadOut::all);
    m->build(last, m->chunk, HeadOut::last);
    m->build(none, m->chunk, HeadOut::none);
    m->gplan = plan_graphs({&all, &last, &none}, max_binding, al);
  }
  const uint64_t need = total + m->gplan.plan.arena_bytes + 2 * m->last_pos + m->sync_bytes,
                 left = heap_left(dev.caps());
  if (need > left)
    throw Error(Status::out_of_memory,
                "phi4flash: a sequence of " + std::to_string(m->cap) + " positions needs " + std::to_string(total) +
                    " bytes of caches and states plus " + std::to_string(m->gplan.plan.arena_bytes) +
                    " of activations, but only " + std::to_string(left) +
                    " remain on the device heap; nothing was allocated (use a shorter context or chunk)");
  m->state = Buffer(dev, total, MemoryDomain::device, "phi4flash states");
  for (auto& [r, offset] : slots) *r = m->state.range(offset, r->size);
  m->recurrent = m->state.range(0, recurrent_bytes);
  m->caches = {m->shared_k, m->shared_v};
  for (const auto& L : m->ls)
    if (L.k_ring.size) m->caches.insert(m->caches.end(), {L.k_ring, L.v_ring});
  m->dyn = Buffer(dev, 2 * m->last_pos, MemoryDomain::device, "phi4flash positions");
  m->dyn_host.assign(2 * m->last_pos / 4, 0);
  m->picked_at = std::max<uint64_t>(al, 16);
  m->sample_io = Buffer(dev, m->picked_at + 16, MemoryDomain::device, "phi4flash sampling");
  m->sync = Buffer(dev, m->sync_bytes, MemoryDomain::device, "phi4flash attention arrival counters");
  m->sync.fill(0, m->sync_bytes, 0);
  m->arena = Arena(dev, m->gplan.plan, "phi4flash");
  m->restore_prog = std::make_unique<Program>(dev, "phi4flash restore snapshot");
  m->restore_prog->copy(m->snapshot, m->recurrent, "restore recurrent states");
  m->reset_states();
  return std::unique_ptr<Phi4FlashForward>(new Phi4FlashForward(std::move(m)));
}

std::unique_ptr<Phi4FlashForward> Phi4FlashForward::load(Device& dev, const Phi4FlashCheckpoint& ck,
                                                         const Phi4FlashForwardOptions& o) {
  if (o.max_positions > ck.config.max_position_embeddings)  // before the upload
    throw Error(Status::invalid_argument, "phi4flash: max_positions " + std::to_string(o.max_positions) +
                                              " exceeds max_position_embeddings " +
                                              std::to_string(ck.config.max_position_embeddings));
  Phi4FlashLoad load;
  load.staging_bytes = o.staging_bytes;
  return create(upload_phi4flash(dev, ck, load), o);
}

Phi4FlashForward::Phi4FlashForward(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Phi4FlashForward::~Phi4FlashForward() = default;

void Phi4FlashForward::Impl::run(const int32_t* tokens, uint32_t rows, HeadOut out, float* logits,
                                 const std::function<bool()>& abort, const uint32_t* sample, uint32_t* picked) {
  if (state_pos == kUnknown) throw Error(Status::internal, "phi4flash: run with unknown states (seek first)");
  if (out == HeadOut::sample && (rows != 1 || !sample || !picked))
    throw Error(Status::internal, "phi4flash: device sampling takes one row, its parameters and a place for the id");
  if (rows == 0 || rows > chunk || uint64_t(state_pos) + rows > cap)
    throw Error(Status::internal, "phi4flash: " + std::to_string(rows) + " rows at " + std::to_string(state_pos) +
                                      " (chunk " + std::to_string(chunk) + ", capacity " + std::to_string(cap) + ")");
  if (rows == 1 && out == HeadOut::last) out = HeadOut::all;  // one row: the same logits without YOCO's copies
  Recorded& r = program(rows, out);
  arena.owner(r.tokens).upload(r.tokens.offset, tokens, size_t(rows) * 4);
  dyn_host[0] = state_pos;  // the positions of the first and of the last row (YOCO's one-row pass)
  dyn_host[last_pos / 4] = state_pos + rows - 1;
  dyn.upload(0, dyn_host.data(), dyn_host.size() * 4);
  if (out == HeadOut::sample) {
    const uint32_t p[4] = {state_pos, sample[0], sample[1], sample[2]};
    sample_io.upload(0, p, sizeof p);
  }
  const uint32_t start = state_pos;
  state_pos = kUnknown;  // until the run completes
  snap_valid = false;
  last = r.program.get();
  r.program->run(abort);
  state_pos = start + rows;
  snap_pos = start;
  snap_valid = true;
  if (out == HeadOut::all)
    arena.owner(r.logits).download(r.logits.offset, logits, size_t(rows) * w->V * 4);
  else if (out == HeadOut::last)
    arena.owner(r.logits).download(r.logits.offset, logits, size_t(w->V) * 4);
  else if (out == HeadOut::sample)
    sample_io.download(picked_at, picked, 4);
}

std::vector<float> Phi4FlashForward::Impl::prompt(const std::vector<int32_t>& tokens, bool last_only) {
  const uint32_t V = w->V;
  if (tokens.empty()) throw Error(Status::invalid_argument, "phi4flash: an empty prompt");
  if (tokens.size() > cap)
    throw Error(Status::context_overflow, "phi4flash: a prompt of " + std::to_string(tokens.size()) +
                                              " tokens exceeds max_positions " + std::to_string(cap));
  for (size_t i = 0; i < tokens.size(); ++i)
    if (tokens[i] < 0 || uint32_t(tokens[i]) >= V)
      throw Error(Status::invalid_argument, "phi4flash: token " + std::to_string(tokens[i]) + " at " +
                                                std::to_string(i) + " is outside the vocabulary of " +
                                                std::to_string(V));
  reset_states();  // a fresh sequence
  const uint32_t T = uint32_t(tokens.size());
  std::vector<float> logits(size_t(last_only ? 1 : T) * V);
  for (uint32_t r0 = 0; r0 < T; r0 += chunk) {
    const uint32_t rows = std::min(chunk, T - r0);
    const HeadOut out = !last_only ? HeadOut::all : r0 + rows == T ? HeadOut::last : HeadOut::none;
    run(tokens.data() + r0, rows, out, logits.data() + (last_only ? 0 : size_t(r0) * V), {});
  }
  return logits;
}

std::vector<float> Phi4FlashForward::prompt(const std::vector<int32_t>& tokens) { return impl_->prompt(tokens, false); }
std::vector<float> Phi4FlashForward::prompt_last(const std::vector<int32_t>& tokens) {
  return impl_->prompt(tokens, true);
}

const Program* Phi4FlashForward::last_program() const { return impl_->last; }

void Phi4FlashForward::seek(const int32_t* held, uint32_t n) {
  Impl& m = *impl_;
  if (n > m.cap) throw Error(Status::internal, "phi4flash: seek past the capacity");
  if (m.state_pos == n) return;
  // Back into the last run: its snapshot and at most one chunk of rows again, where the rings still hold every key
  // the rows before it need: a run of at most `piece` rows overwrites only positions older than its start − window
  // + 1. After a longer run (a prefill chunk), from position 0 (decision 025).
  if (m.snap_valid && m.state_pos != kUnknown && m.snap_pos <= n && n <= m.state_pos &&
      m.state_pos - m.snap_pos <= m.piece) {
    m.restore_prog->run();
    m.state_pos = m.snap_pos;
  } else {
    m.reset_states();
  }
  while (m.state_pos < n) {  // the self-decoder alone (YOCO none): the cross-decoder keeps no state
    const uint32_t rows = std::min(m.chunk, n - m.state_pos);
    m.run(held + m.state_pos, rows, HeadOut::none, nullptr, {});
  }
}

void Phi4FlashForward::run(const int32_t* tokens, uint32_t rows, HeadOut out, float* logits,
                           const std::function<bool()>& should_abort) {
  impl_->run(tokens, rows, out, logits, should_abort);
}

uint32_t Phi4FlashForward::run_sample(int32_t token, const uint32_t sample[3],
                                      const std::function<bool()>& should_abort) {
  uint32_t id = 0;
  impl_->run(&token, 1, HeadOut::sample, nullptr, should_abort, sample, &id);
  return id;
}
uint32_t Phi4FlashForward::position() const { return impl_->state_pos; }

std::vector<Phi4FlashForward::Impl::SavedPart> Phi4FlashForward::Impl::saved_parts(uint32_t n) const {
  // Q8_0 (sb > 0): each row's quants, then its scales, which lie after every quant of the cache.
  const uint64_t rb = row_bytes(), sb = q8_scale_bytes(), Hkv = w->Hkv;
  std::vector<SavedPart> parts;
  for (const BufferRange* r : {&shared_k, &shared_v})  // per KV head its rows 0 … n−1
    for (uint64_t h = 0; h < Hkv && n; ++h) {
      parts.push_back({r, h * cap * rb, n * rb, false});
      if (sb) parts.push_back({r, Hkv * cap * rb + h * cap * sb, n * sb, false});
    }
  const uint32_t keep = ring_saved_rows(n);
  for (const auto& L : ls) {
    if (L.k_ring.size)
      for (const BufferRange* r : {&L.k_ring, &L.v_ring})  // per KV head positions n − keep … n − 1
        for (uint64_t h = 0; h < Hkv; ++h)
          for (uint32_t p = n - keep; p < n; ++p) {
            parts.push_back({r, (h * ring + p % ring) * rb, rb, true});
            if (sb) parts.push_back({r, Hkv * ring * rb + (h * ring + p % ring) * sb, sb, true});
          }
    if (L.conv_state.size)
      for (const BufferRange* r : {&L.conv_state, &L.scan_state}) parts.push_back({r, 0, r->size, false});
  }
  return parts;
}

uint64_t Phi4FlashForward::saved_bytes(uint32_t n) const {
  uint64_t bytes = 0;
  for (const auto& p : impl_->saved_parts(n)) bytes += p.bytes;
  return bytes;
}

void Phi4FlashForward::save(uint8_t* out) const {
  const Impl& m = *impl_;
  if (m.state_pos == kUnknown) throw Error(Status::internal, "phi4flash: save with unknown states");
  std::vector<uint8_t> ring;  // the ring the last parts came from, downloaded once
  const BufferRange* in_ring = nullptr;
  for (const auto& p : m.saved_parts(m.state_pos)) {
    if (!p.ring) {
      m.state.download(p.range->offset + p.offset, out, p.bytes);
    } else {
      if (in_ring != p.range) {
        ring.resize(p.range->size);
        m.state.download(p.range->offset, ring.data(), ring.size());
        in_ring = p.range;
      }
      std::memcpy(out, ring.data() + p.offset, p.bytes);
    }
    out += p.bytes;
  }
}

void Phi4FlashForward::restore(uint32_t n, const uint8_t* in) {
  Impl& m = *impl_;
  if (n > m.cap) throw Error(Status::internal, "phi4flash: restore past the capacity");
  m.state_pos = kUnknown;  // until every part is in
  m.snap_valid = false;
  std::vector<uint8_t> ring;  // the ring being filled, uploaded whole when the next part is elsewhere
  const BufferRange* in_ring = nullptr;
  auto flush = [&] {
    if (in_ring) m.state.upload(in_ring->offset, ring.data(), ring.size());
    in_ring = nullptr;
  };
  for (const auto& p : m.saved_parts(n)) {
    if (in_ring != (p.ring ? p.range : nullptr)) flush();
    if (!p.ring) {
      m.state.upload(p.range->offset + p.offset, in, p.bytes);
    } else {
      if (!in_ring) {
        ring.assign(p.range->size, 0);
        in_ring = p.range;
      }
      std::memcpy(ring.data() + p.offset, in, p.bytes);
    }
    in += p.bytes;
  }
  flush();
  m.state_pos = n;
}

void Phi4FlashForward::zero_states(uint32_t n) {
  Impl& m = *impl_;
  if (n > m.cap) throw Error(Status::internal, "phi4flash: zero_states past the capacity");
  m.state_pos = kUnknown;
  m.snap_valid = false;
  m.state.fill(0, m.state.size(), 0);
  m.state_pos = n;
}

uint32_t Phi4FlashForward::chunk() const { return impl_->chunk; }
uint32_t Phi4FlashForward::max_positions() const { return impl_->cap; }
uint32_t Phi4FlashForward::ring_rows() const { return impl_->ring; }
uint32_t Phi4FlashForward::vocab() const { return impl_->w->V; }
uint64_t Phi4FlashForward::state_bytes() const { return impl_->state.size(); }
uint64_t Phi4FlashForward::arena_bytes() const { return impl_->gplan.plan.arena_bytes; }
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
