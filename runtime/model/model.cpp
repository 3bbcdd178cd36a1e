// Whole-model inference (include/diffvk/model.hpp): checkpoint validation and upload, sessions with
// a per-layer KV cache, one static plan for every intermediate, programs recorded once per row
// count and replayed (positions travel in a small buffer, not in the recording), sampling.
#include "diffvk/model.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <numeric>

#include "ops/diff_attn.hpp"
#include "ops/embed.hpp"
#include "ops/head_rmsnorm.hpp"
#include "ops/linear.hpp"
#include "ops/rope_kv.hpp"
#include "ops/sample.hpp"
#include "ops/silu_mul.hpp"
#include "plan/memory_plan.hpp"
#include "model/model_kernels.hpp"
#include "platform.hpp"
#include "model/checkpoint.hpp"
#include "model/weight_store.hpp"
#include "io/storage.hpp"

namespace diffvk {

// ---- model -------------------------------------------------------------------------------
namespace {
uint64_t align_up(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

// Largest device-local heap (where MemoryDomain::device buffers live), else the largest heap.
uint64_t device_heap_bytes(const DeviceCaps& c) {
  uint64_t local = 0, any = 0;
  for (const auto& h : c.heaps) {
    any = std::max(any, h.size);
    if (h.device_local) local = std::max(local, h.size);
  }
  return local ? local : any;
}

}  // namespace

struct Model::Impl {
  Device* dev = nullptr;
  bool fp16 = false;
  ModelConfig cfg;
  struct Layer {
    size_t attn_norm, wqkv, wo, subln, ffn_norm, wgu, wdown;
    double lambda, lambda_init;
  };
  std::vector<Layer> layers;
  size_t embed = 0, norm = 0, lm_head = 0;
  std::unique_ptr<WeightStore> weights;
  Buffer rope_table;
  uint64_t per_token_bytes = 0;
  std::unique_ptr<LinearKernel> linear;
  std::unique_ptr<RopeKvKernel> rope;
  std::unique_ptr<DiffAttnKernel> attn;
  std::unique_ptr<HeadRmsNormKernel> norm_k;
  std::unique_ptr<EmbedKernel> embed_k;
  std::unique_ptr<SiluMulKernel> silu;
  std::unique_ptr<SampleKernel> sample;
  std::unique_ptr<AttnProbsKernel> probs;
  LoadStats stats;
};

namespace {
constexpr uint64_t kMaxConfigBytes = 1 << 20;

// [offset, offset + size) of a descriptor; size < 0 = to the end of the file.
std::vector<uint8_t> read_range(const Model::FdRange& r, uint64_t max_bytes, const std::string& name) {
  if (r.fd < 0) throw Error(Status::invalid_argument, name + ": invalid file descriptor " + std::to_string(r.fd));
  if (r.offset < 0) throw Error(Status::invalid_argument, name + ": negative offset " + std::to_string(r.offset));
  uint64_t size = 0;
  if (r.size < 0) {
    struct stat st;
    if (::fstat(r.fd, &st) != 0 || !S_ISREG(st.st_mode))
      throw Error(Status::invalid_argument, name + ": size -1 (to the end) needs a regular file; give the size");
    if (st.st_size < r.offset)
      throw Error(Status::io_error, name + ": offset " + std::to_string(r.offset) + " is past the end of the file (" +
                                        std::to_string(st.st_size) + " bytes)");
    size = uint64_t(st.st_size - r.offset);
  } else {
    size = uint64_t(r.size);
  }
  if (size > max_bytes)
    throw Error(Status::format_error, name + ": " + std::to_string(size) + " bytes, more than the limit of " + std::to_string(max_bytes));
  return platform::read_fd_range(r.fd, uint64_t(r.offset), size, name);
}
}  // namespace

std::unique_ptr<Model> Model::load(Context& ctx, const std::string& dir) { return load(ctx, dir, LoadOptions{}); }

std::unique_ptr<Model> Model::load(Context& ctx, const std::string& dir, const LoadOptions& options) {
  const auto t0 = std::chrono::steady_clock::now();
  ctx.device().check_not_lost();
  // Sources only: names, shapes and row permutations are checked here, nothing is converted yet.
  Checkpoint ck = open_checkpoint(dir);  // runtime/model/checkpoint_native.cpp, hf_loader.cpp
  return load_checkpoint(ctx, ck, options, dir, t0);
}

namespace {
// config.json given as bytes (memory, descriptors): the native format only; a Hugging Face directory
// is mapped shard by shard and loads through Model::load(dir).
ModelConfig parse_native_config_bytes(const void* data, size_t size, const std::string& name) {
  const std::string text(static_cast<const char*>(data), size);
  if (is_hf_diffllama(text))
    throw Error(Status::invalid_argument, name + ": a Hugging Face DiffLlama checkpoint loads from its directory "
                                                 "(Model::load / diffvk_model_load), not from memory or descriptors");
  return parse_model_config(text, name);
}
}  // namespace

std::unique_ptr<Model> Model::load_memory(Context& ctx, const void* config_json, size_t config_size, const void* safetensors,
                                          size_t safetensors_size, const std::string& name) {
  const auto t0 = std::chrono::steady_clock::now();
  if (!config_json || !safetensors) throw Error(Status::invalid_argument, name + ": config or safetensors buffer is NULL");
  if (config_size > kMaxConfigBytes)
    throw Error(Status::format_error, name + " config.json: " + std::to_string(config_size) + " bytes, more than the limit of " +
                                          std::to_string(kMaxConfigBytes));
  ctx.device().check_not_lost();
  ModelConfig cfg = parse_native_config_bytes(config_json, config_size, name + " config.json");
  Checkpoint ck = open_native_checkpoint(
      std::make_unique<SafetensorsFile>(SafetensorsFile::from_view(safetensors, safetensors_size, name + " model.safetensors")),
      std::move(cfg));
  return load_checkpoint(ctx, ck, LoadOptions{}, name, t0);
}

std::unique_ptr<Model> Model::load_fd(Context& ctx, FdRange config_json, FdRange safetensors) {
  const auto t0 = std::chrono::steady_clock::now();
  ctx.device().check_not_lost();
  const std::string cname = "config.json (fd " + std::to_string(config_json.fd) + ")",
                    wname = "model.safetensors (fd " + std::to_string(safetensors.fd) + ")";
  const auto cfg_bytes = read_range(config_json, kMaxConfigBytes, cname);
  ModelConfig cfg = parse_native_config_bytes(cfg_bytes.data(), cfg_bytes.size(), cname);
  auto st = std::make_unique<SafetensorsFile>(
      SafetensorsFile::from_bytes(read_range(safetensors, std::numeric_limits<uint64_t>::max(), wname), wname));
  Checkpoint ck = open_native_checkpoint(std::move(st), std::move(cfg));
  return load_checkpoint(ctx, ck, LoadOptions{}, "fd " + std::to_string(safetensors.fd), t0);
}

std::unique_ptr<Model> Model::load_checkpoint(Context& ctx, Checkpoint& ck, const LoadOptions& options, const std::string& dir,
                                              std::chrono::steady_clock::time_point t0) {
  auto m = std::make_unique<Impl>();
  Device& dev = ctx.device();
  dev.check_not_lost();
  m->dev = &dev;
  m->fp16 = dev.fp16();
  m->cfg = ck.config;
  const ModelConfig& c = m->cfg;
  const int64_t E = c.hidden_size, D = c.head_dim(), Hkv = c.num_kv_heads, I = c.intermediate_size, V = c.vocab_size;
  m->weights = std::make_unique<WeightStore>(dev, m->fp16, dev.caps().max_storage_buffer_range);
  WeightStore& ws = *m->weights;
  m->embed = ws.add(std::move(ck.embed));
  for (uint32_t l = 0; l < c.num_layers; ++l) {
    CheckpointLayer& S = ck.layers[l];
    Impl::Layer L{};
    L.attn_norm = ws.add(std::move(S.attn_norm));
    L.wqkv = ws.add(std::move(S.wqkv));
    L.wo = ws.add(std::move(S.wo));
    L.subln = ws.add(std::move(S.subln));
    L.ffn_norm = ws.add(std::move(S.ffn_norm));
    L.wgu = ws.add(std::move(S.wgu));
    L.wdown = ws.add(std::move(S.wdown));
    double d1 = 0, d2 = 0;
    for (int64_t k = 0; k < D; ++k) {
      d1 += double(S.lambda[0][k]) * S.lambda[1][k];
      d2 += double(S.lambda[2][k]) * S.lambda[3][k];
    }
    L.lambda_init = 0.8 - 0.6 * std::exp(-0.3 * l);
    L.lambda = std::exp(d1) - std::exp(d2) + L.lambda_init;
    if (!std::isfinite(L.lambda)) throw Error(Status::format_error, dir + ": lambda of layer " + std::to_string(l) + " is not finite");
    m->layers.push_back(L);
  }
  m->norm = ws.add(std::move(ck.norm));
  m->lm_head = c.tie_word_embeddings ? m->embed : ws.add(std::move(ck.lm_head));
  const uint64_t table_bytes = uint64_t(c.max_position_embeddings) * (D / 2) * 2 * 4;
  const uint64_t need = ws.planned_bytes() + table_bytes, heap = device_heap_bytes(dev.caps());
  if (need > heap)
    throw Error(Status::out_of_memory, dir + ": the model needs " + std::to_string(need) + " bytes of device memory (weights + RoPE table) "
                                            "but the device heap has " + std::to_string(heap) + " bytes; nothing was allocated");
  const WeightUploadStats up = ws.upload(options.staging_bytes, options.force_staging);
  for (const auto& L : m->layers)  // only the embedding and lm_head may be split across bindings
    for (size_t w : {L.attn_norm, L.wqkv, L.wo, L.subln, L.ffn_norm, L.wgu, L.wdown}) ws.range(w);
  ws.range(m->norm);
  const uint64_t es = m->fp16 ? 2 : 4;
  m->per_token_bytes = ws.total() - uint64_t(V) * E * es * (c.tie_word_embeddings ? 0 : 1) + uint64_t(E) * es;

  const auto table = rope_table(c.max_position_embeddings, rope_inv_freq(c));
  m->rope_table = Buffer(dev, table.size() * 4, MemoryDomain::device, "rope table");
  m->rope_table.upload(0, table.data(), table.size() * 4);

  ModelKernels k = build_model_kernels(dev, c);  // runtime/model/model_kernels.cpp (shared with shader-stats)
  m->linear = std::move(k.linear);
  m->rope = std::move(k.rope);
  m->attn = std::move(k.attn);
  m->norm_k = std::move(k.norm);
  m->embed_k = std::move(k.embed);
  m->silu = std::move(k.silu);
  m->sample = std::move(k.sample);
  m->probs = std::move(k.probs);
  m->stats.format = c.format;
  m->stats.files = static_cast<uint32_t>(ck.files.size());
  m->stats.staging_peak_bytes = up.staging_peak_bytes;
  m->stats.largest_tensor_bytes = up.largest_tensor_bytes;
  m->stats.weight_bytes = up.bytes;
  m->stats.split_tensors = up.split_tensors;
  m->stats.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  platform::log(platform::LogLevel::info, "model " + dir + " (" + c.format + ", " + std::to_string(ck.files.size()) + " file(s)): " +
                                              std::to_string(c.num_layers) + " layers, E=" + std::to_string(E) +
                                              ", H=" + std::to_string(c.num_heads) + ", Hkv=" + std::to_string(Hkv) + ", I=" +
                                              std::to_string(I) + ", vocab " + std::to_string(V) + ", " +
                                              std::to_string(ws.total()) + " weight bytes (" + (m->fp16 ? "fp16" : "fp32") +
                                              "), host staging peak " + std::to_string(up.staging_peak_bytes) + " bytes");
  return std::unique_ptr<Model>(new Model(std::move(m)));
}
Model::Model(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Model::~Model() = default;
const ModelConfig& Model::config() const { return impl_->cfg; }
uint64_t Model::weight_bytes() const { return impl_->per_token_bytes; }
const LoadStats& Model::load_stats() const { return impl_->stats; }

// ---- session -----------------------------------------------------------------------------
struct Session::Impl {
  // What a program computes after the last layer: logits of every row, of the last row only, none
  // (a prefill chunk that is not the last), or the last row's logits plus a device-sampled token.
  enum class Out { all, last, none, sample };
  Model::Impl* m = nullptr;
  uint32_t cap = 0, chunk = 0, pos = 0;
  bool profile = false;
  std::function<bool()> should_abort;
  std::vector<Buffer> kv;  // per layer: K then V
  std::vector<BufferRange> kc, vc;
  Buffer tokens, dyn, picked;  // dyn: {position, u, temperature, top_k}; picked: the sampled token id
  uint32_t sample_params[3] = {0, 0, 0};  // u, temperature (float bits), top_k: uploaded with the position
  std::vector<TensorLifetime> lifetimes;
  MemoryPlan plan;
  std::vector<Buffer> arena;
  std::vector<BufferRange> t;  // placed tensors, same order as lifetimes
  size_t X = 0, XF = 0, LOGITS = 0;
  struct LayerT {
    size_t xn, qkv, q, part, stat, o, hn, gu, a;
  };
  std::vector<LayerT> lt;
  uint32_t splits = 1, split_len = 0;
  std::map<std::pair<uint32_t, Out>, std::unique_ptr<Program>> programs;  // recorded once per (rows, out)
  Program* last = nullptr;  // the program of the last run (profile)

  BufferRange T(size_t i, uint64_t bytes) const { return {t[i].buffer, t[i].offset, bytes}; }
  // The attention-map tap of a debug run: layer `layer`'s softmaxes for heads head0 … head0 + heads − 1
  // of a T-token prompt, written into `out` (AttnProbsKernel).
  struct MapTap {
    uint32_t layer, head0, heads, T;
    BufferRange out;
  };
  Program& program(uint32_t rows, Out out);
  // Records one forward pass of `rows` tokens (what program() caches), with the optional tap.
  void record_forward(Program& prog, uint32_t rows, Out out, const MapTap* tap) const;
  void check_tokens(const std::vector<int32_t>& toks, const char* what) const;
  // Runs `rows` tokens; returns the logits `out` asks for (rows x vocab, or the last row's, or none).
  std::vector<float> run(const int32_t* tok, uint32_t rows, Out out);
};

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
  s->chunk = std::max(1u, std::min(o.chunk, s->cap));
  s->profile = o.profile;
  s->should_abort = o.should_abort;
  const uint64_t es = m.fp16 ? 2 : 4, al = dev.caps().min_storage_buffer_offset_alignment;
  const uint32_t E = c.hidden_size, D = c.head_dim(), H = c.num_heads, Hkv = c.num_kv_heads, I = c.intermediate_size;
  const uint64_t cache = uint64_t(Hkv) * s->cap * 2 * D * es;
  // Static plan: step 0 embed; per layer 9 steps; then final norm and lm_head.
  const uint64_t R = s->chunk;
  AttnCall worst{std::min<uint32_t>(8, s->chunk), 0, H, Hkv, s->cap, E, E};
  s->splits = m.attn->decode_splits_for_capacity(AttnCall{1, 0, H, Hkv, s->cap, E, E}, &s->split_len);
  uint32_t maxs = s->splits;
  for (uint32_t r = 2; r <= std::min<uint32_t>(8, s->chunk); ++r) {
    uint32_t len;
    maxs = std::max(maxs, m.attn->decode_splits_for_capacity(AttnCall{r, 0, H, Hkv, s->cap, E, E}, &len));
  }
  uint64_t part_bytes = DiffAttnKernel::part_bytes(worst, D, maxs), stat_bytes = DiffAttnKernel::stat_bytes(worst, maxs);
  if (s->chunk > m.attn->max_decode_rows()) {  // prefill chunks through split-K on loop-limited devices
    const AttnCall pc{s->chunk, 0, H, Hkv, s->cap, E, E};
    uint32_t len = 0;
    if (const uint32_t ps = m.attn->prefill_splits_for_keys(s->cap, &len)) {  // any position up to the capacity
      part_bytes = std::max(part_bytes, DiffAttnKernel::part_bytes(pc, D, ps));
      stat_bytes = std::max(stat_bytes, DiffAttnKernel::stat_bytes(pc, ps));
    }
  }
  const int F = 1 + 9 * static_cast<int>(c.num_layers);
  auto add = [&](const std::string& name, uint64_t bytes, int first, int last) {
    s->lifetimes.push_back({name, std::max<uint64_t>(bytes, 4), al, first, last});
    return s->lifetimes.size() - 1;
  };
  // x lives until lm_head (F + 1): one-row programs read it there (final norm fused into lm_head).
  // The residual stream and the logits are float32 in every precision (issue 13: fp16 overflows at 65504).
  s->X = add("x (residual stream) [f32]", R * E * 4, 0, F + 1);
  for (uint32_t l = 0; l < c.num_layers; ++l) {
    const int b = 1 + 9 * static_cast<int>(l);
    const std::string p = "layers." + std::to_string(l) + ".";
    Impl::LayerT L{};
    L.xn = add(p + "attn_norm.out", R * E * es, b, b + 1);
    L.qkv = add(p + "qkv", R * (E + 4ull * Hkv * D) * es, b + 1, b + 2);
    L.q = add(p + "q.roped", R * E * es, b + 2, b + 3);
    L.part = add(p + "attn.split_part", part_bytes, b + 3, b + 3);
    L.stat = add(p + "attn.split_stat", stat_bytes, b + 3, b + 3);
    L.o = add(p + "attn.out", R * E * es, b + 3, b + 4);
    L.hn = add(p + "ffn_norm.out", R * E * es, b + 5, b + 6);
    L.gu = add(p + "ffn.gate_up", R * 2ull * I * es, b + 6, b + 8);  // one-row programs: read by down (SwiGLU fused)
    L.a = add(p + "ffn.act", R * I * es, b + 7, b + 8);
    s->lt.push_back(L);
  }
  // norm.out also stages the float32 last row of x for the one-row lm_head (see program()).
  s->XF = add("norm.out", std::max<uint64_t>(R * E * es, uint64_t(E) * 4), F, F + 1);
  s->LOGITS = add("logits [f32]", R * c.vocab_size * 4, F + 1, F + 2);
  s->plan = plan_memory(s->lifetimes, dev.caps().max_storage_buffer_range, al);

  // Everything this session allocates, checked against what the heap has left before allocating.
  const uint64_t kv_bytes = uint64_t(c.num_layers) * 2 * align_up(cache, al);
  const uint64_t need = kv_bytes + s->plan.arena_bytes + align_up(std::max<uint64_t>(s->chunk * 4ull, 16), al) + 32;
  const uint64_t heap = device_heap_bytes(dev.caps()), used = device_bytes_allocated();
  if (need > heap - std::min(heap, used))
    throw Error(Status::out_of_memory, "session: the KV cache (" + std::to_string(kv_bytes) + " bytes for a context of " +
                                           std::to_string(s->cap) + ") plus activations (" + std::to_string(s->plan.arena_bytes) +
                                           " bytes) need " + std::to_string(need) + " bytes but only " +
                                           std::to_string(heap - std::min(heap, used)) + " of the device heap's " +
                                           std::to_string(heap) + " remain; nothing was allocated (use a shorter context)");
  for (uint32_t l = 0; l < c.num_layers; ++l) {
    s->kv.emplace_back(dev, 2 * align_up(cache, al), MemoryDomain::device, "KV cache layer " + std::to_string(l));
    s->kc.push_back(s->kv.back().range(0, cache));
    s->vc.push_back(s->kv.back().range(align_up(cache, al), cache));
  }
  s->tokens = Buffer(dev, std::max<uint64_t>(s->chunk * 4ull, 16), MemoryDomain::device, "tokens");
  s->dyn = Buffer(dev, 16, MemoryDomain::device, "position and sampling parameters");
  s->picked = Buffer(dev, 16, MemoryDomain::device, "sampled token");
  for (size_t i = 0; i < s->plan.buffer_sizes.size(); ++i)
    s->arena.emplace_back(dev, s->plan.buffer_sizes[i], MemoryDomain::device, "session arena " + std::to_string(i));
  for (size_t i = 0; i < s->lifetimes.size(); ++i) {
    const auto& pl = s->plan.placements[i];
    s->t.push_back(s->arena[pl.buffer].range(pl.offset, s->lifetimes[i].bytes));
  }
  return std::unique_ptr<Session>(new Session(std::move(s)));
}

Session::Session(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Session::~Session() = default;

Program& Session::Impl::program(uint32_t rows, Out out) {
  auto it = programs.find({rows, out});
  if (it != programs.end()) return *it->second;
  auto prog = std::make_unique<Program>(*m->dev, "model rows=" + std::to_string(rows), profile);
  record_forward(*prog, rows, out, nullptr);
  prog->finalize();
  return *programs.emplace(std::make_pair(rows, out), std::move(prog)).first->second;
}

void Session::Impl::record_forward(Program& program, uint32_t rows, Out out, const MapTap* tap) const {
  Program* prog = &program;
  const Model::Impl& M = *m;
  const ModelConfig& c = M.cfg;
  Device& dev = *M.dev;
  const uint64_t es = M.fp16 ? 2 : 4;
  const uint32_t E = c.hidden_size, D = c.head_dim(), H = c.num_heads, Hkv = c.num_kv_heads, I = c.intermediate_size;
  const uint32_t qkvw = E + 4 * Hkv * D, V = c.vocab_size;
  const BufferRange dynr = dyn.range(0, 4), x = T(X, uint64_t(rows) * E * 4);  // float32 (residual stream)
  const Elem f32 = Elem::f32, st = Elem::storage;
  const float eps = static_cast<float>(c.rms_norm_eps);
  // One row (decode): the block norms run inside the projections that follow them (linear_row's
  // rmsnorm prologue) and SwiGLU inside the down projection, so a layer is 7 dispatches (attention = split + reduce), not 10.
  const bool fused = rows == 1;
  for (const WeightPart& part : M.weights->parts(M.embed))  // one part unless the table exceeds a binding
    M.embed_k->record_part(*prog, tokens.range(0, rows * 4ull), part.range, x, rows, E, uint32_t(part.rows), uint32_t(part.row0), V);
  for (uint32_t l = 0; l < c.num_layers; ++l) {
    const auto& W = M.layers[l];
    const auto& L = lt[l];
    const BufferRange xn = T(L.xn, uint64_t(rows) * E * es), qkv = T(L.qkv, uint64_t(rows) * qkvw * es),
                      q = T(L.q, uint64_t(rows) * E * es), o = T(L.o, uint64_t(rows) * E * es),
                      hn = T(L.hn, uint64_t(rows) * E * es), gu = T(L.gu, uint64_t(rows) * 2 * I * es),
                      a = T(L.a, uint64_t(rows) * I * es);
    if (fused) {
      M.linear->record_row(*prog, x, M.weights->range(W.wqkv), qkv, {E, qkvw, RowPrologue::rmsnorm, eps, f32, st}, {},
                           M.weights->range(W.attn_norm));
    } else {
      M.norm_k->record(*prog, x, M.weights->range(W.attn_norm), xn, {rows, 1, E, E, 1.0f, eps}, f32);
      M.linear->record(*prog, xn, M.weights->range(W.wqkv), qkv, {rows, E, qkvw, E, qkvw});
    }
    M.rope->record(*prog, qkv, M.rope_table.range(), q, kc[l], vc[l], {rows, H, Hkv, D, 0, cap}, dynr);
    if (tap && tap->layer == l)
      M.probs->record(*prog, q, kc[l], dynr, tap->out, {rows, H, Hkv, D, cap, tap->T, 0, tap->head0, tap->heads});
    AttnCall call{rows, 0, H, Hkv, cap, E, E, static_cast<float>(W.lambda), static_cast<float>(1.0 - W.lambda_init), static_cast<float>(c.subln_eps), dynr};
    if (rows <= M.attn->max_decode_rows()) {
      uint32_t len = 0;
      const uint32_t sp = M.attn->decode_splits_for_capacity(call, &len);
      M.attn->record_decode(*prog, q, kc[l], vc[l], M.weights->range(W.subln), o, t[L.part], t[L.stat], call, sp, len);
    } else {
      M.attn->record_prefill(*prog, q, kc[l], vc[l], M.weights->range(W.subln), o, call, t[L.part], t[L.stat]);
    }
    if (fused) {
      M.linear->record_row(*prog, o, M.weights->range(W.wo), x, {E, E, RowPrologue::none, eps, st, f32}, x);
      M.linear->record_row(*prog, x, M.weights->range(W.wgu), gu, {E, 2 * I, RowPrologue::rmsnorm, eps, f32, st}, {},
                           M.weights->range(W.ffn_norm));
      M.linear->record_row(*prog, gu, M.weights->range(W.wdown), x, {I, E, RowPrologue::silu_mul, eps, st, f32}, x);
    } else {
      M.linear->record(*prog, o, M.weights->range(W.wo), x, {rows, E, E, E, E}, x, f32);
      M.norm_k->record(*prog, x, M.weights->range(W.ffn_norm), hn, {rows, 1, E, E, 1.0f, eps}, f32);
      M.linear->record(*prog, hn, M.weights->range(W.wgu), gu, {rows, E, 2 * I, E, 2 * I});
      M.silu->record(*prog, gu, a, rows, I);
      M.linear->record(*prog, a, M.weights->range(W.wdown), x, {rows, I, E, I, E}, x, f32);
    }
    prog->checkpoint();  // a group per layer: the abort callback is asked between them
  }
  if (out == Out::all) {
    const BufferRange xf = T(XF, uint64_t(rows) * E * es), logits = T(LOGITS, uint64_t(rows) * V * 4);
    M.norm_k->record(*prog, x, M.weights->range(M.norm), xf, {rows, 1, E, E, 1.0f, eps}, f32);
    for (const WeightPart& part : M.weights->parts(M.lm_head))  // split lm_head: disjoint column slices of the logits
      M.linear->record(*prog, xf, part.range, logits.sub(part.row0 * 4, logits.size - part.row0 * 4),
                       {rows, E, uint32_t(part.rows), E, V}, {}, f32);
  } else if (out != Out::none) {  // the last row only: final norm fused into lm_head
    BufferRange xl{x.buffer, x.offset + uint64_t(rows - 1) * E * 4, uint64_t(E) * 4};
    const BufferRange logits = T(LOGITS, uint64_t(V) * 4);
    const uint64_t align = std::max<uint64_t>(1, dev.caps().min_storage_buffer_offset_alignment);
    if (xl.offset % align) {  // a storage binding must start aligned: stage the last row at the aligned XF
      const BufferRange staged = T(XF, uint64_t(E) * 4);
      prog->copy(xl, staged, "last row");
      xl = staged;
    }
    for (const WeightPart& part : M.weights->parts(M.lm_head))
      M.linear->record_row(*prog, xl, part.range, logits.sub(part.row0 * 4, part.rows * 4),
                           {E, uint32_t(part.rows), RowPrologue::rmsnorm, eps, f32, f32}, {}, M.weights->range(M.norm));
    if (out == Out::sample) M.sample->record(*prog, logits, dyn.range(0, 16), picked.range(0, 4), V);
  }
}

std::vector<float> Session::Impl::run(const int32_t* tok, uint32_t rows, Out out) {
  const ModelConfig& c = m->cfg;
  std::vector<uint32_t> ids(tok, tok + rows);
  Program& prog = program(rows, out);
  tokens.upload(0, ids.data(), rows * 4ull);
  const uint32_t d[4] = {pos, sample_params[0], sample_params[1], sample_params[2]};
  dyn.upload(0, d, sizeof d);
  last = &prog;
  prog.run(should_abort);
  pos += rows;
  if (out == Out::none || out == Out::sample) return {};
  const uint64_t n = uint64_t(out == Out::all ? rows : 1) * c.vocab_size;
  std::vector<float> logits(n);  // float32 in every precision
  arena[plan.placements[LOGITS].buffer].download(t[LOGITS].offset, logits.data(), n * 4);
  return logits;
}

void Session::Impl::check_tokens(const std::vector<int32_t>& toks, const char* what) const {
  const uint32_t V = m->cfg.vocab_size;
  if (toks.empty()) throw Error(Status::invalid_argument, std::string(what) + ": no tokens");
  if (uint64_t(pos) + toks.size() > cap)
    throw Error(Status::context_overflow, std::string(what) + ": " + std::to_string(toks.size()) + " tokens after " + std::to_string(pos) +
                                              " exceed the context of " + std::to_string(cap));
  for (size_t i = 0; i < toks.size(); ++i)
    if (toks[i] < 0 || uint32_t(toks[i]) >= V)
      throw Error(Status::invalid_argument, "token " + std::to_string(toks[i]) + " at index " + std::to_string(i) +
                                                " is outside the vocabulary [0, " + std::to_string(V) + ")");
}

std::vector<float> Session::prefill(const std::vector<int32_t>& toks, bool all_logits) {
  Impl& s = *impl_;
  s.m->dev->check_not_lost();
  s.check_tokens(toks, "prefill");
  // All or nothing: a failure in any chunk puts the position back where it was (device loss is marked
  // by Device::submit_and_wait). The KV rows the earlier chunks wrote lie at or beyond that position,
  // where nothing reads them before they are written again, so the visible cache is exactly as before.
  struct Restore {
    Impl& s;
    const uint32_t start;
    bool done = false;
    ~Restore() {
      if (!done) s.pos = start;
    }
  } restore{s, s.pos};
  std::vector<float> out;
  for (size_t i = 0; i < toks.size(); i += s.chunk) {
    const uint32_t rows = static_cast<uint32_t>(std::min<size_t>(s.chunk, toks.size() - i));
    const bool final = i + rows == toks.size();
    auto lg = s.run(toks.data() + i, rows, all_logits ? Impl::Out::all : final ? Impl::Out::last : Impl::Out::none);
    if (all_logits) out.insert(out.end(), lg.begin(), lg.end());
    else if (final) out = std::move(lg);
  }
  restore.done = true;
  return out;
}

std::vector<float> Session::decode(int32_t token) { return prefill({token}); }

int32_t Session::decode_sample(int32_t token, float temperature, uint32_t top_k, float u) {
  Impl& s = *impl_;
  const uint32_t V = s.m->cfg.vocab_size;
  s.m->dev->check_not_lost();
  const bool greedy = !(temperature > 0.0f);
  if (!greedy && (top_k == 0 || !s.m->sample->supports(V, top_k)))
    throw Error(Status::invalid_argument, "decode_sample: top_k " + std::to_string(top_k) + " is outside [1, " +
                                              std::to_string(std::min(kDeviceTopKMax, V)) + "] for device sampling");
  if (!greedy && !(u >= 0.0f && u < 1.0f)) throw Error(Status::invalid_argument, "decode_sample: the draw u must be in [0, 1)");
  if (uint64_t(s.pos) + 1 > s.cap)
    throw Error(Status::context_overflow, "decode: position " + std::to_string(s.pos) + " is at the context of " + std::to_string(s.cap));
  if (token < 0 || uint32_t(token) >= V)
    throw Error(Status::invalid_argument, "token " + std::to_string(token) + " is outside the vocabulary [0, " + std::to_string(V) + ")");
  std::memcpy(&s.sample_params[0], &u, 4);
  std::memcpy(&s.sample_params[1], &temperature, 4);
  s.sample_params[2] = greedy ? 1u : top_k;
  const uint32_t start = s.pos;
  uint32_t id = 0;
  try {  // all or nothing, like prefill
    s.run(&token, 1, Impl::Out::sample);
    s.picked.download(0, &id, 4);
  } catch (...) {
    s.pos = start;
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
  if (layer >= c.num_layers)
    throw Error(Status::invalid_argument, "attention_maps: layer " + std::to_string(layer) + " is outside [0, " + std::to_string(c.num_layers) + ")");
  if (head < -1 || head >= int32_t(c.num_heads))
    throw Error(Status::invalid_argument, "attention_maps: head " + std::to_string(head) + " is outside [0, " + std::to_string(c.num_heads) +
                                              ") (-1 = every head)");
  if (toks.size() > kAttentionMapMaxTokens)
    throw Error(Status::invalid_argument, "attention_maps: " + std::to_string(toks.size()) + " tokens exceed the limit of " +
                                              std::to_string(kAttentionMapMaxTokens));
  const uint32_t was = s.pos;
  s.pos = 0;  // the maps are of a fresh prefill
  try {
    s.check_tokens(toks, "attention_maps");
  } catch (...) {
    s.pos = was;  // bad arguments leave the session as it was
    throw;
  }
  AttentionMaps r;
  r.layer = layer;
  r.head0 = head < 0 ? 0 : uint32_t(head);
  r.heads = head < 0 ? c.num_heads : 1;
  r.tokens = static_cast<uint32_t>(toks.size());
  r.lambda = M.layers[layer].lambda;
  r.lambda_init = M.layers[layer].lambda_init;
  const uint64_t T = r.tokens, plane = T * T;
  Buffer maps(*M.dev, r.heads * 2 * plane * 4, MemoryDomain::device, "attention maps");
  maps.fill(0, r.heads * 2 * plane * 4, 0x7fc07fc0u);  // NaN: an entry the kernel missed cannot pass for a probability
  const Impl::MapTap tap{layer, r.head0, r.heads, r.tokens, maps.range(0, r.heads * 2 * plane * 4)};
  try {
    for (size_t i = 0; i < toks.size(); i += s.chunk) {  // the prefill's chunks, each with the tap
      const uint32_t rows = static_cast<uint32_t>(std::min<size_t>(s.chunk, toks.size() - i));
      Program prog(*M.dev, "attention maps rows=" + std::to_string(rows));
      s.record_forward(prog, rows, Impl::Out::none, &tap);
      std::vector<uint32_t> ids(toks.begin() + i, toks.begin() + i + rows);
      s.tokens.upload(0, ids.data(), rows * 4ull);
      const uint32_t d[4] = {s.pos, 0, 0, 0};
      s.dyn.upload(0, d, sizeof d);
      prog.run();
      s.pos += rows;
    }
    std::vector<float> all(r.heads * 2 * plane);
    maps.download(0, all.data(), all.size() * 4);
    for (uint32_t h = 0; h < r.heads; ++h) {
      r.a1.insert(r.a1.end(), all.begin() + (2 * h) * plane, all.begin() + (2 * h + 1) * plane);
      r.a2.insert(r.a2.end(), all.begin() + (2 * h + 1) * plane, all.begin() + (2 * h + 2) * plane);
    }
  } catch (...) {
    s.pos = 0;
    throw;
  }
  return r;
}

std::vector<DispatchTime> Session::last_profile() const {
  std::vector<DispatchTime> out;
  if (!impl_->last) return out;
  for (const auto& t : impl_->last->timings()) out.push_back({t.label, t.us});
  return out;
}
void Session::reset() {
  impl_->m->dev->check_not_lost();
  impl_->pos = 0;
}
uint32_t Session::position() const { return impl_->pos; }
uint32_t Session::capacity() const { return impl_->cap; }
std::string Session::plan_report() const { return format_plan(impl_->lifetimes, impl_->plan); }

// ---- sampling ----------------------------------------------------------------------------
int32_t sample_top_k(const float* logits, uint32_t vocab, float temperature, uint32_t top_k, float u) {
  if (vocab == 0) throw Error(Status::invalid_argument, "sample: empty vocabulary");
  const uint32_t k = temperature > 0.0f && top_k ? std::min(top_k, vocab) : 1u;
  std::vector<uint32_t> idx(vocab);
  std::iota(idx.begin(), idx.end(), 0u);
  auto before = [&](uint32_t a, uint32_t b) { return logits[a] > logits[b] || (logits[a] == logits[b] && a < b); };
  std::partial_sort(idx.begin(), idx.begin() + k, idx.end(), before);
  if (k == 1) return static_cast<int32_t>(idx[0]);
  std::vector<double> w(k);
  double total = 0;
  for (uint32_t j = 0; j < k; ++j) total += w[j] = std::exp((double(logits[idx[j]]) - logits[idx[0]]) / temperature);
  const double target = double(u) * total;
  double acc = 0;
  for (uint32_t j = 0; j < k; ++j)
    if (target < (acc += w[j])) return static_cast<int32_t>(idx[j]);
  return static_cast<int32_t>(idx[k - 1]);
}

void validate_sampling(const SamplingOptions& o) {
  if (!std::isfinite(o.temperature) || o.temperature < 0.0f)
    throw Error(Status::invalid_argument, "temperature " + std::to_string(o.temperature) + " must be a finite number >= 0 (0 = greedy)");
  if (!std::isfinite(o.top_p) || !(o.top_p > 0.0f && o.top_p <= 1.0f))
    throw Error(Status::invalid_argument, "top_p " + std::to_string(o.top_p) + " must be a finite number in (0, 1] (1 = off)");
}

Sampler::Sampler(const SamplingOptions& o) : o_(o), rng_(o.seed) { validate_sampling(o); }

bool Sampler::device_capable() const {
  return o_.temperature <= 0.0f || (o_.top_k >= 1 && o_.top_k <= kDeviceTopKMax && o_.top_p >= 1.0f);
}

float Sampler::draw() {
  float u = std::generate_canonical<float, 24>(rng_);
  return u < 1.0f ? u : 0.0f;  // generate_canonical may round up to 1
}

int32_t Sampler::sample(const float* logits, uint32_t vocab) {
  if (vocab == 0) throw Error(Status::invalid_argument, "sample: empty vocabulary");
  for (uint32_t i = 0; i < vocab; ++i)  // NaN would also break the ordering the sort below relies on
    if (!std::isfinite(logits[i]))
      throw Error(Status::invalid_argument, "sample: logit " + std::to_string(i) + " is not finite");
  if (o_.temperature <= 0.0f) return static_cast<int32_t>(std::max_element(logits, logits + vocab) - logits);
  std::vector<uint32_t> idx(vocab);
  std::iota(idx.begin(), idx.end(), 0u);
  std::sort(idx.begin(), idx.end(), [&](uint32_t a, uint32_t b) { return logits[a] > logits[b]; });
  uint32_t n = o_.top_k ? std::min(o_.top_k, vocab) : vocab;
  std::vector<double> p(n);
  const double mx = logits[idx[0]];
  double sum = 0;
  for (uint32_t i = 0; i < n; ++i) sum += p[i] = std::exp((double(logits[idx[i]]) - mx) / o_.temperature);
  if (o_.top_p < 1.0f) {
    double acc = 0;
    uint32_t keep = 0;
    while (keep < n && acc < o_.top_p * sum) acc += p[keep++];
    n = std::max(1u, keep);
    p.resize(n);
  }
  std::discrete_distribution<uint32_t> dist(p.begin(), p.end());
  return static_cast<int32_t>(idx[dist(rng_)]);
}

}  // namespace diffvk
