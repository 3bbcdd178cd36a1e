// Sessions (include/diffvk/model.hpp): a per-layer KV cache, one static plan of every intermediate, and
// programs recorded once per (row count, head output) from the one forward recipe (model/recipe.hpp)
// and replayed; the position travels in a small buffer, not in the recording.
#include <algorithm>
#include <cstring>
#include <cstdio>

#include "model/session_impl.hpp"
#include "ops/kv_shift.hpp"
#include "ops/linear.hpp"

namespace diffvk {

TensorRef Session::Impl::build(Graph& g, uint32_t rows, HeadOut out, const MapTap* tap) const {
  const Model::Impl& M = *m;
  const ModelConfig& c = M.cfg;
  const WeightStore& ws = *M.weights;
  const uint32_t E = c.hidden_size, D = c.head_dim(), Hkv = c.num_kv_heads, I = c.intermediate_size;
  const float eps = static_cast<float>(c.rms_norm_eps);
  Forward f{g, M.k, M.fp16, rows, rows == 1, {}};
  f.kv = kv_format;
  f.pos = g.bind("position", TensorRole::external, ElemType::u32, {1}, dyn.range(0, 4));
  const TensorRef tok = g.bind("tokens", TensorRole::external, ElemType::u32, {rows}, tokens.range(0, rows * 4ull));
  const TensorRef table =
      g.bind("rope table", TensorRole::weight, ElemType::f32, {M.rope_table.size() / 4}, M.rope_table.range());
  const AttnShape shape =
      AttnShape::heads(E, c.num_heads, Hkv, D).cache(cap, chunk).norms(eps, static_cast<float>(c.subln_eps));
  const uint64_t sync_bytes = attn_sync_bytes(shape, c.v2());
  f.attn_sync = g.bind("attention arrival counters", TensorRole::external, ElemType::u32, {sync_bytes / 4},
                       sync.range(0, sync_bytes));
  const TensorRef x =
      add_embed(f, tok, bind_linear(f, "embed", E, ws.parts(M.embed), ws.format(M.embed)), "x (residual stream) [f32]");
  for (uint32_t l = 0; l < c.num_layers; ++l) {
    const auto& W = M.layers[l];
    const std::string p = "layers." + std::to_string(l) + ".";
    AttnBlock a;
    a.prefix = p;
    a.norm = bind_vector(f, p + "attn_norm", E, ws.range(W.attn_norm));
    a.wqkv = bind_linear(f, p + "wqkv", E, ws.parts(W.wqkv), ws.format(W.wqkv));
    a.v2 = c.v2();  // DIFF V2: wqkv = [Wq; Wλ; Wk; Wv], wo of H·D inputs, no subln or λ scalar
    a.wo = bind_linear(f, p + "wo", a.v2 ? c.num_heads * D : E, ws.parts(W.wo), ws.format(W.wo));
    if (!a.v2) a.subln = bind_vector(f, p + "subln", 2 * D, ws.range(W.subln));
    a.lambda = W.lambda;
    a.lambda_init = W.lambda_init;
    const bool q8 = kv_format == KvFormat::q8_0;  // Q8_0: quants and scales, bound as bytes
    const std::vector<uint64_t> kv_shape =
        q8 ? std::vector<uint64_t>{diffvk::kv_cache_bytes(kv_format, M.fp16, Hkv, cap, c.kv_row())}
           : std::vector<uint64_t>{Hkv, cap, c.kv_row()};
    const ElemType kv_type = q8 ? ElemType::bytes : f.storage();
    a.k_cache = g.bind(p + "k_cache", TensorRole::kv_cache, kv_type, kv_shape, kc.empty() ? BufferRange{} : kc[l]);
    a.v_cache = g.bind(p + "v_cache", TensorRole::kv_cache, kv_type, kv_shape, vc.empty() ? BufferRange{} : vc[l]);
    a.rope_table = table;
    a.tap = tap && tap->layer == l ? tap : nullptr;
    add_attention_block(f, x, shape, a);
    MlpBlock b;
    b.prefix = p;
    b.norm = bind_vector(f, p + "ffn_norm", E, ws.range(W.ffn_norm));
    b.wgu = bind_linear(f, p + "wgu", E, ws.parts(W.wgu), ws.format(W.wgu));
    b.wdown = bind_linear(f, p + "wdown", I, ws.parts(W.wdown), ws.format(W.wdown));
    b.I = I;
    b.eps = eps;
    add_mlp_block(f, x, E, b);
    g.end_group();  // a group per layer: the abort callback is asked between them
  }
  Head h;
  h.norm = bind_vector(f, "norm", E, ws.range(M.norm));
  h.lm_head = bind_linear(f, "lm_head", E, ws.parts(M.lm_head), ws.format(M.lm_head));
  h.eps = eps;
  h.E = E;
  h.vocab = c.vocab_size;
  if (out == HeadOut::sample) {
    h.params = g.bind("sampling parameters", TensorRole::external, ElemType::u32, {4}, dyn.range(0, 16));
    h.picked = g.bind("sampled token", TensorRole::external, ElemType::u32, {1}, picked.range(0, 4));
  }
  return add_head(f, x, h, out);
}

void Session::Impl::refuse_sambay(const char* what, const char* why) const {
  if (sambay) throw Error(Status::unsupported, std::string(what) + ": not for a phi4flash (SambaY) model: " + why);
}

std::unique_ptr<Session> Session::create(Model& model, const SessionOptions& o) {
  auto s = std::make_unique<Impl>();
  Model::Impl& m = model.impl();
  Device& dev = *m.dev;
  const ModelConfig& c = m.cfg;
  dev.check_not_lost();
  s->m = &m;
  s->cap = o.context ? o.context : c.max_position_embeddings;
  if (s->cap > c.max_position_embeddings)
    throw Error(Status::invalid_argument, "context " + std::to_string(s->cap) + " exceeds max_position_embeddings " +
                                              std::to_string(c.max_position_embeddings));
  s->profile = o.profile;
  if (o.kv_cache != KvCacheType::f16 && o.kv_cache != KvCacheType::q8_0)
    throw Error(Status::invalid_argument, "session: unknown KV cache type " + std::to_string(uint32_t(o.kv_cache)));
  s->should_abort = o.should_abort;
  if (m.sambay) {  // Phi-4-mini-flash: its own states and programs
    Phi4FlashForwardOptions fo;
    if (o.kv_cache == KvCacheType::q8_0) fo.kv = s->kv_format = KvFormat::q8_0;
    fo.max_positions = s->cap;
    fo.yoco = o.yoco;
    fo.profile = o.profile;
    // The automatic chunk: 64 rows. The sliding-window layers append and attend at most 17 rows at once, so their
    // rings (window + 16 rows) do not grow with the chunk (docs/phi4flash.md, session memory).
    fo.chunk = o.chunk ? std::min(o.chunk, s->cap) : std::min(64u, s->cap);
    s->sambay = Phi4FlashForward::create(m.sambay, fo);
    s->chunk = s->sambay->chunk();
    s->held.reserve(s->cap);
    s->history.reserve(s->cap);
    return std::unique_ptr<Session>(new Session(std::move(s)));
  }
  if (o.kv_cache == KvCacheType::q8_0) {
    s->kv_format = KvFormat::q8_0;
    const std::lock_guard<std::mutex> lock(m.kv_q8_mutex);
    build_kv_q8_kernels(dev, c, m.k);
  }
  const uint64_t al = dev.caps().min_storage_buffer_offset_alignment;
  const uint64_t cache = diffvk::kv_cache_bytes(s->kv_format, m.fp16, c.num_kv_heads, s->cap, c.kv_row());
  // The static plan, derived from the recipe: every program variant a session runs (one-row programs,
  // and chunk-row ones when the chunk is longer), with each head output. Variants never run at once, so
  // they share the arena; a program of fewer rows is placed where its variant's tensors are (fit_graph).
  auto plan_with_chunk = [&](uint32_t chunk) {
    s->chunk = chunk;
    std::vector<Graph> graphs;
    graphs.reserve(8);
    for (const uint32_t rows : chunk > 1 ? std::vector<uint32_t>{chunk, 1} : std::vector<uint32_t>{1})
      for (const HeadOut out : {HeadOut::all, HeadOut::last, HeadOut::none, HeadOut::sample}) {
        if (out == HeadOut::sample && rows != 1) continue;  // decode_sample runs one row
        graphs.emplace_back(s->variant(rows, out));
        s->build(graphs.back(), rows, out, nullptr);
      }
    std::vector<const Graph*> variants;
    for (const Graph& g : graphs) variants.push_back(&g);
    s->plan = plan_graphs(variants, dev.caps().max_storage_buffer_range, al);
  };
  if (o.chunk) {
    plan_with_chunk(std::max(1u, std::min(o.chunk, s->cap)));
  } else {
    // Automatic chunk: the longest of 256, 128, 64, 32, 16 rows (clipped to the context) whose planned
    // activations stay within max(32 MiB, a quarter of the weights). Longer chunks read the weights
    // fewer times per token and give the matmul more row tiles; every candidate is a multiple of the
    // matmul's row tile (16 on CPU drivers, 32 or 64 on GPUs) down to that tile.
    const uint32_t tile = std::max(1u, choose_linear_tiles(dev.caps(), 256, c.hidden_size, c.hidden_size).bm);
    const uint64_t budget = std::max<uint64_t>(32ull << 20, model.weight_bytes() / 4);
    for (uint32_t cand = 256;; cand /= 2) {
      const uint32_t chunk = std::min(std::max(cand, std::min(tile, 256u)), s->cap);
      plan_with_chunk(chunk);
      if (s->plan.plan.arena_bytes <= budget || cand <= 16 || chunk <= tile) break;
    }
  }

  // Everything this session allocates, checked against what the heap has left before allocating.
  const uint64_t kv_bytes = uint64_t(c.num_layers) * 2 * align_up(cache, al);
  const AttnShape shape =
      AttnShape::heads(c.hidden_size, c.num_heads, c.num_kv_heads, c.head_dim()).cache(s->cap, s->chunk);
  const uint64_t sync_bytes = attn_sync_bytes(shape, c.v2());
  const uint64_t need = kv_bytes + s->plan.plan.arena_bytes + align_up(std::max<uint64_t>(s->chunk * 4ull, 16), al) +
                        32 + align_up(sync_bytes, al);
  const uint64_t heap = device_heap_bytes(dev.caps()), used = device_bytes_allocated();
  if (need > heap - std::min(heap, used))
    throw Error(Status::out_of_memory,
                "session: the KV cache (" + std::to_string(kv_bytes) + " bytes for a context of " +
                    std::to_string(s->cap) + ") plus activations (" + std::to_string(s->plan.plan.arena_bytes) +
                    " bytes) need " + std::to_string(need) + " bytes but only " +
                    std::to_string(heap - std::min(heap, used)) + " of the device heap's " + std::to_string(heap) +
                    " remain; nothing was allocated (use a shorter context)");
  for (uint32_t l = 0; l < c.num_layers; ++l) {
    s->kv.emplace_back(dev, 2 * align_up(cache, al), MemoryDomain::device, "KV cache layer " + std::to_string(l));
    s->kc.push_back(s->kv.back().range(0, cache));
    s->vc.push_back(s->kv.back().range(align_up(cache, al), cache));
  }
  s->tokens = Buffer(dev, std::max<uint64_t>(s->chunk * 4ull, 16), MemoryDomain::device, "tokens");
  s->dyn = Buffer(dev, 16, MemoryDomain::device, "position and sampling parameters");
  s->picked = Buffer(dev, 16, MemoryDomain::device, "sampled token");
  s->sync = Buffer(dev, sync_bytes, MemoryDomain::device, "attention arrival counters");
  s->sync.fill(0, sync_bytes, 0);  // once: every attention dispatch leaves them zero (AttnSplitScratch)
  s->arena = Arena(dev, s->plan.plan, "session");
  s->held.reserve(s->cap);  // decode appends to these without allocating
  s->history.reserve(s->cap);
  return std::unique_ptr<Session>(new Session(std::move(s)));
}

KvCacheType Session::kv_cache() const {
  return impl_->kv_format == KvFormat::q8_0 ? KvCacheType::q8_0 : KvCacheType::f16;
}
uint64_t Session::kv_cache_bytes() const {
  if (impl_->sambay) return impl_->sambay->state_bytes();  // the shared cache, rings, recurrent states
  const ModelConfig& c = impl_->m->cfg;
  return uint64_t(c.num_layers) * 2 *
         diffvk::kv_cache_bytes(impl_->kv_format, impl_->m->fp16, c.num_kv_heads, impl_->cap, c.kv_row());
}

const char* kv_cache_type_name(KvCacheType t) { return t == KvCacheType::q8_0 ? "q8_0" : "f16"; }

Session::Session(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Session::~Session() = default;

Session::Impl::Recorded Session::Impl::record(uint32_t rows, HeadOut out, const MapTap* tap) const {
  Device& dev = *m->dev;
  Graph g(variant(rows, out) + (tap ? " (attention maps)" : ""));
  const TensorRef logits = build(g, rows, out, tap);
  const auto placed = fit_graph(g, plan, variant(rows, out), arena.handles(), dev.caps().max_storage_buffer_range,
                                dev.caps().min_storage_buffer_offset_alignment);
  Recorded r;
  r.program = std::make_unique<Program>(dev, (tap ? "attention maps rows=" : "model rows=") + std::to_string(rows),
                                        profile && !tap);
  record_graph(g, placed, *r.program);
  if (logits.valid()) r.logits = placed[logits.id];
  return r;
}

Program& Session::Impl::program(uint32_t rows, HeadOut out) {
  auto it = programs.find({rows, out});
  if (it != programs.end()) return *it->second.program;
  Recorded r = record(rows, out, nullptr);
  r.program->finalize();
  return *programs.emplace(std::make_pair(rows, out), std::move(r)).first->second.program;
}

std::vector<float> Session::Impl::run(const int32_t* tok, uint32_t rows, HeadOut out) {
  if (out == HeadOut::none || out == HeadOut::sample) {
    run_into(tok, rows, out, nullptr);
    return {};
  }
  std::vector<float> logits(uint64_t(out == HeadOut::all ? rows : 1) *
                            m->cfg.vocab_size);  // float32 in every precision
  run_into(tok, rows, out, logits.data());
  return logits;
}

void Session::Impl::run_into(const int32_t* tok, uint32_t rows, HeadOut out, float* logits) {
  if (sambay) {
    if (out == HeadOut::sample) throw Error(Status::internal, "phi4flash: device sampling goes through decode_sample");
    sambay->seek(held.data(), pos);  // after a rewind: the states of held[0 … pos)
    sambay->run(tok, rows, out, logits, should_abort);
    advance(tok, rows);
    return;
  }
  Program& prog = program(rows, out);
  // Token ids are checked to lie in [0, vocab): their int32 bits are the shader's uint32 ids.
  static_assert(sizeof(int32_t) == sizeof(uint32_t), "token ids are 4 bytes");
  tokens.upload(0, tok, rows * 4ull);
  const uint32_t d[4] = {pos, sample_params[0], sample_params[1], sample_params[2]};
  dyn.upload(0, d, sizeof d);
  last = &prog;
  prog.run(should_abort);
  advance(tok, rows);
  if (out == HeadOut::none || out == HeadOut::sample) return;
  const uint64_t n = uint64_t(out == HeadOut::all ? rows : 1) * m->cfg.vocab_size;
  const BufferRange where = programs.find({rows, out})->second.logits;
  arena.owner(where).download(where.offset, logits, n * 4);
}

void Session::Impl::advance(const int32_t* tok, uint32_t rows) {
  held.resize(pos);
  held.insert(held.end(), tok, tok + rows);
  history.insert(history.end(), tok, tok + rows);
  if (exact == pos) exact += rows;  // computed on an exact prefix: exact too
  pos += rows;
}

void Session::Impl::truncate(uint32_t n, bool keep_dropped) {
  const uint64_t dropped = history.size() - pos;
  if (n > tail_at || (n == tail_at && keep_dropped)) {
    history.resize(n + dropped);
  } else {  // below the last shift's tail: only the held tokens are known to precede
    history.assign(held.begin(), held.begin() + n);
    tail_at = 0;
  }
  exact = std::min(exact, n);
  pos = n;
}

void Session::Impl::check_vocab(const std::vector<int32_t>& toks, const char* what) const {
  const uint32_t V = m->cfg.vocab_size;
  if (toks.empty()) throw Error(Status::invalid_argument, std::string(what) + ": no tokens");
  for (size_t i = 0; i < toks.size(); ++i)
    if (toks[i] < 0 || uint32_t(toks[i]) >= V)
      throw Error(Status::invalid_argument, "token " + std::to_string(toks[i]) + " at index " + std::to_string(i) +
                                                " is outside the vocabulary [0, " + std::to_string(V) + ")");
}

void Session::Impl::check_tokens(const std::vector<int32_t>& toks, const char* what, uint32_t at) const {
  if (!toks.empty() && uint64_t(at) + toks.size() > cap)
    throw Error(Status::context_overflow, std::string(what) + ": " + std::to_string(toks.size()) + " tokens after " +
                                              std::to_string(at) + " exceed the context of " + std::to_string(cap));
  check_vocab(toks, what);
}

std::vector<float> Session::prefill(const std::vector<int32_t>& toks, bool all_logits) {
  Impl& s = *impl_;
  s.m->dev->check_not_lost();
  s.check_tokens(toks, "prefill", s.pos);
  // All or nothing: a failure in any chunk puts the position back where it was (device loss is marked
  // by Device::submit_and_wait). The KV rows the earlier chunks wrote lie at or beyond that position,
  // where nothing reads them before they are written again, so the visible cache is exactly as before.
  struct Restore {
    Impl& s;
    const uint32_t start;
    bool done = false;
    ~Restore() {
      if (!done) s.truncate(start, true);
    }
  } restore{s, s.pos};
  std::vector<float> out;
  for (size_t i = 0; i < toks.size(); i += s.chunk) {
    const uint32_t rows = static_cast<uint32_t>(std::min<size_t>(s.chunk, toks.size() - i));
    const bool final = i + rows == toks.size();
    auto lg = s.run(toks.data() + i, rows, all_logits ? HeadOut::all : final ? HeadOut::last : HeadOut::none);
    if (all_logits)
      out.insert(out.end(), lg.begin(), lg.end());
    else if (final)
      out = std::move(lg);
  }
  restore.done = true;
  return out;
}

std::vector<float> Session::decode(int32_t token) {
  std::vector<float> logits(impl_->m->cfg.vocab_size);
  decode(token, logits.data(), logits.size());
  return logits;
}

void Session::decode(int32_t token, float* logits, size_t capacity) {
  Impl& s = *impl_;
  const uint32_t V = s.m->cfg.vocab_size;
  s.m->dev->check_not_lost();
  if (!logits) throw Error(Status::invalid_argument, "decode: logits is null");
  if (capacity < V)
    throw Error(Status::invalid_argument,
                "decode: the logits buffer holds " + std::to_string(capacity) + " floats, need " + std::to_string(V));
  if (uint64_t(s.pos) + 1 > s.cap)
    throw Error(Status::context_overflow,
                "decode: 1 tokens after " + std::to_string(s.pos) + " exceed the context of " + std::to_string(s.cap));
  if (token < 0 || uint32_t(token) >= V)
    throw Error(Status::invalid_argument, "token " + std::to_string(token) +
                                              " at index 0 is outside the vocabulary [0, " + std::to_string(V) + ")");
  const uint32_t start = s.pos;
  try {  // all or nothing, like prefill
    s.run_into(&token, 1, HeadOut::last, logits);
  } catch (...) {
    s.truncate(start, true);
    throw;
  }
}

bool Session::device_sampling() const { return true; }

int32_t Session::decode_sample(int32_t token, float temperature, uint32_t top_k, float u) {
  Impl& s = *impl_;
  const uint32_t V = s.m->cfg.vocab_size;
  s.m->dev->check_not_lost();
  const bool greedy = !(temperature > 0.0f);
  if (!greedy && (top_k == 0 || !SampleKernel::supports(s.m->dev->caps(), V, top_k)))
    throw Error(Status::invalid_argument, "decode_sample: top_k " + std::to_string(top_k) + " is outside [1, " +
                                              std::to_string(std::min(kDeviceTopKMax, V)) + "] for device sampling");
  if (!greedy && !(u >= 0.0f && u < 1.0f))
    throw Error(Status::invalid_argument, "decode_sample: the draw u must be in [0, 1)");
  if (uint64_t(s.pos) + 1 > s.cap)
    throw Error(Status::context_overflow,
                "decode: position " + std::to_string(s.pos) + " is at the context of " + std::to_string(s.cap));
  if (token < 0 || uint32_t(token) >= V)
    throw Error(Status::invalid_argument,
                "token " + std::to_string(token) + " is outside the vocabulary [0, " + std::to_string(V) + ")");
  std::memcpy(&s.sample_params[0], &u, 4);
  std::memcpy(&s.sample_params[1], &temperature, 4);
  s.sample_params[2] = greedy ? 1u : top_k;
  const uint32_t start = s.pos;
  uint32_t id = 0;
  try {              // all or nothing, like prefill
    if (s.sambay) {  // its head's LayerNorm is not fused: the one-row logits, then the sampler on them
      s.sambay->seek(s.held.data(), s.pos);
      id = s.sambay->run_sample(token, s.sample_params, s.should_abort);
      s.advance(&token, 1);
    } else {
      s.run(&token, 1, HeadOut::sample);
      s.picked.download(0, &id, 4);
    }
  } catch (...) {
    s.truncate(start, true);
    throw;
  }
  if (id >= V) throw Error(Status::internal, "decode_sample: the device returned token " + std::to_string(id));
  return static_cast<int32_t>(id);
}

AttentionMaps Session::attention_maps(const std::vector<int32_t>& toks, uint32_t layer, int32_t head) {
  Impl& s = *impl_;
  const Model::Impl& M = *s.m;
  const ModelConfig& c = M.cfg;
  M.dev->check_not_lost();
  s.refuse_sambay("attention_maps", "its attention layers have no map tap yet");
  if (layer >= c.num_layers)
    throw Error(Status::invalid_argument, "attention_maps: layer " + std::to_string(layer) + " is outside [0, " +
                                              std::to_string(c.num_layers) + ")");
  if (head < -1 || head >= int32_t(c.num_heads))
    throw Error(Status::invalid_argument, "attention_maps: head " + std::to_string(head) + " is outside [0, " +
                                              std::to_string(c.num_heads) + ") (-1 = every head)");
  if (toks.size() > kAttentionMapMaxTokens)
    throw Error(Status::invalid_argument, "attention_maps: " + std::to_string(toks.size()) +
                                              " tokens exceed the limit of " + std::to_string(kAttentionMapMaxTokens));
  s.check_tokens(toks, "attention_maps", 0);   // the maps are of a fresh prefill; bad arguments change nothing
  M.dev->test_before_first_use("attn_probs");  // the self-test left it to here (SelftestReport::deferred)
  s.truncate(0);
  AttentionMaps r;
  r.layer = layer;
  r.head0 = head < 0 ? 0 : uint32_t(head);
  r.heads = head < 0 ? c.num_heads : 1;
  r.tokens = static_cast<uint32_t>(toks.size());
  r.v2 = c.v2();  // V2: λ per query row (lambda_rows), no layer λ
  r.lambda = r.v2 ? 0.0 : M.layers[layer].lambda;
  r.lambda_init = r.v2 ? 0.0 : M.layers[layer].lambda_init;
  const uint64_t T = r.tokens, plane = T * T, bytes = AttnProbsKernel::out_bytes(r.heads, r.tokens, r.v2);
  Buffer maps(*M.dev, bytes, MemoryDomain::device, "attention maps");
  maps.fill(0, bytes, 0x7fc07fc0u);  // NaN: an entry the kernel missed cannot pass for a probability
  const MapTap tap{layer, r.head0, r.heads, r.tokens, maps.range(0, bytes)};
  try {
    for (size_t i = 0; i < toks.size(); i += s.chunk) {  // the prefill's chunks, each with the tap
      const uint32_t rows = static_cast<uint32_t>(std::min<size_t>(s.chunk, toks.size() - i));
      Impl::Recorded rec = s.record(rows, HeadOut::none, &tap);
      std::vector<uint32_t> ids(toks.begin() + i, toks.begin() + i + rows);
      s.tokens.upload(0, ids.data(), rows * 4ull);
      const uint32_t d[4] = {s.pos, 0, 0, 0};
      s.dyn.upload(0, d, sizeof d);
      rec.program->run();
      s.advance(toks.data() + i, rows);
    }
    std::vector<float> all(bytes / 4);
    maps.download(0, all.data(), bytes);
    for (uint32_t h = 0; h < r.heads; ++h) {
      r.a1.insert(r.a1.end(), all.begin() + (2 * h) * plane, all.begin() + (2 * h + 1) * plane);
      r.a2.insert(r.a2.end(), all.begin() + (2 * h + 1) * plane, all.begin() + (2 * h + 2) * plane);
    }
    if (r.v2) r.lambda_rows.assign(all.begin() + r.heads * 2 * plane, all.end());  // [heads][T] after the maps
  } catch (...) {
    s.truncate(0);
    throw;
  }
  return r;
}

std::vector<DispatchTime> Session::last_profile() const {
  std::vector<DispatchTime> out;
  const Program* last = impl_->sambay ? impl_->sambay->last_program() : impl_->last;
  if (!last) return out;
  for (const auto& t : last->timings()) out.push_back({t.label, t.us});
  return out;
}
void Session::reset() {
  impl_->m->dev->check_not_lost();
  impl_->truncate(0);
}
void Session::rewind(uint32_t n) {
  Impl& s = *impl_;
  s.m->dev->check_not_lost();
  if (n > s.pos)
    throw Error(Status::invalid_argument,
                "rewind: " + std::to_string(n) + " tokens to keep, but the session holds " + std::to_string(s.pos));
  // The KV rows at n and beyond are not read again before a prefill writes them (attention reads rows < position).
  s.truncate(n);
}
std::vector<int32_t> Session::tokens() const {
  const Impl& s = *impl_;
  return {s.held.begin(), s.held.begin() + s.pos};
}
std::vector<float> Session::prefill_reusing(const std::vector<int32_t>& toks, uint32_t* reused) {
  Impl& s = *impl_;
  s.m->dev->check_not_lost();
  uint32_t keep = 0;
  // Rows past `exact` (after a context shift) are not those of a fresh prefill: never reused here.
  const size_t limit = std::min<size_t>(s.exact, toks.empty() ? 0 : toks.size() - 1);
  while (keep < limit && s.held[keep] == toks[keep]) ++keep;
  // The checks of prefill on the whole sequence (kept + rest = tokens), before anything changes.
  s.check_tokens(toks, "prefill_reusing", 0);
  s.truncate(keep);
  if (reused) *reused = keep;
  return prefill(std::vector<int32_t>(toks.begin() + keep, toks.end()));
}
std::vector<int32_t> Session::history() const { return impl_->history; }

void Session::shift(uint32_t keep, uint32_t discard) {
  Impl& s = *impl_;
  const Model::Impl& M = *s.m;
  const ModelConfig& c = M.cfg;
  M.dev->check_not_lost();
  s.refuse_sambay("shift",
                  "a recurrent (Mamba) state cannot drop tokens from its past, so no context shift is "
                  "exact; start a new session or rewind");
  if (discard == 0 || uint64_t(keep) + discard > s.pos)
    throw Error(Status::invalid_argument, "shift: dropping positions " + std::to_string(keep) + " ... " +
                                              std::to_string(uint64_t(keep) + discard) + " - 1 needs " +
                                              std::to_string(discard) + " > 0 tokens after the " +
                                              std::to_string(keep) + " kept, but the session holds " +
                                              std::to_string(s.pos));
  const uint32_t end = s.pos;
  if (keep + discard < end) {                  // rows to move
    M.dev->test_before_first_use("kv_shift");  // the self-test left it to here (SelftestReport::deferred)
    Program prog(*M.dev, "context shift");
    KvShiftParams p;
    p.Hkv = c.num_kv_heads;
    p.D = c.head_dim();
    p.capacity = s.cap;
    p.keep = keep;
    p.discard = discard;
    p.end = end;
    p.row = c.kv_row();
    for (uint32_t l = 0; l < c.num_layers; ++l)
      M.k.shift_for(s.kv_format).record(prog, s.kc[l], s.vc[l], M.rope_table.range(), p);
    // A failure here (device loss) leaves rows [keep, end) part moved: the session keeps only what is intact.
    try {
      prog.run();
    } catch (...) {
      s.truncate(keep);
      throw;
    }
  }
  // held and history: held[keep ...] loses `discard` tokens; they stay in history (see Impl::tail_at).
  s.held.resize(end);
  s.held.erase(s.held.begin() + keep, s.held.begin() + keep + discard);
  s.tail_at = std::max<int64_t>(keep, int64_t(s.tail_at) - discard);
  s.exact = std::min(s.exact, keep);
  s.pos = end - discard;
}

bool Session::make_room(uint32_t keep, uint32_t rows) {
  Impl& s = *impl_;
  if (uint64_t(s.pos) + rows <= s.cap) return false;
  const uint32_t k = std::min(keep, s.pos);
  if (rows > s.cap - k)
    throw Error(Status::invalid_argument, "make_room: " + std::to_string(rows) + " tokens do not fit next to the " +
                                              std::to_string(k) + " kept in a context of " + std::to_string(s.cap));
  // Half of what follows keep, and at least what the rows need.
  shift(k, std::max((s.pos - k) / 2, s.pos + rows - s.cap));
  return true;
}

std::vector<float> Session::prefill_shifting(const std::vector<int32_t>& toks, uint32_t keep, uint32_t* reused) {
  Impl& s = *impl_;
  s.m->dev->check_not_lost();
  if (keep >= s.cap)
    throw Error(Status::invalid_argument, "prefill_shifting: keep " + std::to_string(keep) +
                                              " leaves no room in a context of " + std::to_string(s.cap));
  s.check_vocab(toks, "prefill_shifting");  // no context check: a prompt longer than the context is shifted through
  // The longest common prefix with the history, the last token always computed.
  size_t common = 0;
  const size_t limit = std::min(s.history.size(), toks.size() - 1);
  while (common < limit && s.history[common] == toks[common]) ++common;
  const uint64_t dropped = s.history.size() - s.pos;
  uint32_t at;  // the position the rest is prefilled at; toks[from ...] is the rest
  size_t from;
  if (common >= s.tail_at + dropped) {  // the match reaches the tail the session still holds
    at = static_cast<uint32_t>(common - dropped);
    from = common;
    s.truncate(at, true);
  } else {  // only the exact prefix can be kept
    at = static_cast<uint32_t>(std::min<size_t>(common, s.exact));
    from = at;
    s.truncate(at);
  }
  if (reused) *reused = at;
  std::vector<float> out;
  while (from < toks.size()) {
    const uint32_t rows = static_cast<uint32_t>(std::min<size_t>({toks.size() - from, s.chunk, s.cap - keep}));
    make_room(keep, rows);
    const bool final = from + rows == toks.size();
    out = s.run(toks.data() + from, rows, final ? HeadOut::last : HeadOut::none);
    from += rows;
  }
  return out;
}

uint32_t Session::position() const { return impl_->pos; }
uint32_t Session::capacity() const { return impl_->cap; }
uint32_t Session::chunk() const { return impl_->chunk; }
std::string Session::plan_report() const {
  if (impl_->sambay) return impl_->sambay->describe_plan();
  std::string out = format_plan(impl_->plan.lifetimes, impl_->plan.plan);
  // The kernel of every node: the ops' choice functions under the device's tuning (Device::tuning()), for a
  // prefill chunk and a decode step.
  std::vector<uint32_t> rows_list;
  if (impl_->chunk > 1) rows_list.push_back(impl_->chunk);
  rows_list.push_back(1);
  for (const uint32_t rows : rows_list) {
    Graph g(impl_->variant(rows, HeadOut::last));
    impl_->build(g, rows, HeadOut::last, nullptr);
    out += "kernels, " + g.name() + ":\n";
    size_t w = 4;
    for (const GraphNode& n : g.nodes()) w = std::max(w, n.label.size());
    for (size_t i = 0; i < g.nodes().size(); ++i) {
      const GraphNode& n = g.nodes()[i];
      char step[32];
      std::snprintf(step, sizeof step, "%5zu  ", i);
      out += step + n.label + std::string(w - n.label.size(), ' ') + "  " + (n.kernel.empty() ? "-" : n.kernel) + "\n";
    }
  }
  return out;
}

}  // namespace diffvk
