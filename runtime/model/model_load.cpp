// Loading a model (include/diffvk/model.hpp): checkpoint sources, validation, the streamed upload of the
// weights and the kernels of the config. Sessions are in session.cpp, sampling in sampling.cpp.
#include "diffvk/model.hpp"

#include <chrono>
#include <cmath>
#include <limits>
#include <algorithm>

#include "io/storage.hpp"
#include "model/checkpoint.hpp"
#include "model/model_impl.hpp"
#include "model/phi4flash_checkpoint.hpp"
#include "platform.hpp"

namespace diffvk {

namespace {
constexpr uint64_t kMaxConfigBytes = 1 << 20;

// [offset, offset + size) of a descriptor; size -1 = to the end of the file.
std::vector<uint8_t> read_range(const Model::FdRange& r, uint64_t max_bytes, const std::string& name) {
  return platform::read_fd_span(r.fd, r.offset, r.size, max_bytes, name);
}
// The weights' range: memory-mapped where the descriptor is a regular file (an app's file or uncompressed asset), so
// a model's bytes are not copied onto the heap (a 2.4 GB Q4_0 Phi-4-mini-flash .gguf was read whole before the
// upload); read otherwise.
FileBytes map_range(const Model::FdRange& r, const std::string& name) {
  return FileBytes::map_fd(r.fd, r.offset, r.size, name);
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
    throw Error(Status::invalid_argument, name +
                                              ": a Hugging Face DiffLlama checkpoint loads from its directory "
                                              "(Model::load / diffvk_model_load), not from memory or descriptors");
  return parse_model_config(text, name);
}
}  // namespace

std::unique_ptr<Model> Model::load_memory(Context& ctx, const void* config_json, size_t config_size,
                                          const void* safetensors, size_t safetensors_size, const std::string& name) {
  return load_memory(ctx, config_json, config_size, safetensors, safetensors_size, name, LoadOptions{});
}

std::unique_ptr<Model> Model::load_memory(Context& ctx, const void* config_json, size_t config_size,
                                          const void* safetensors, size_t safetensors_size, const std::string& name,
                                          const LoadOptions& options) {
  const auto t0 = std::chrono::steady_clock::now();
  if (!safetensors) throw Error(Status::invalid_argument, name + ": the weights buffer is NULL");
  if (GgufFile::has_magic(safetensors, safetensors_size)) {  // a .gguf carries its own configuration
    if (config_json || config_size)
      throw Error(Status::invalid_argument,
                  name +
                      ": the weights are a .gguf, which carries its own configuration: pass no "
                      "config.json (NULL, 0)");
    ctx.device().check_not_lost();
    Checkpoint ck = open_gguf_checkpoint(
        std::make_unique<GgufFile>(GgufFile::from_view(safetensors, safetensors_size, name + " (gguf)")));
    return load_checkpoint(ctx, ck, options, name, t0);
  }
  if (!config_json)
    throw Error(Status::invalid_argument,
                name + ": the config.json buffer is NULL (only a .gguf carries its own configuration)");
  if (config_size > kMaxConfigBytes)
    throw Error(Status::format_error, name + " config.json: " + std::to_string(config_size) +
                                          " bytes, more than the limit of " + std::to_string(kMaxConfigBytes));
  ctx.device().check_not_lost();
  const std::string text(static_cast<const char*>(config_json), config_size);
  if (is_phi4flash_config(text)) {
    Checkpoint ck = phi4flash_as_checkpoint(
        open_phi4flash_checkpoint(std::make_unique<SafetensorsFile>(SafetensorsFile::from_view(
                                      safetensors, safetensors_size, name + " model.safetensors")),
                                  parse_phi4flash_config(text, name + " config.json")));
    return load_checkpoint(ctx, ck, options, name, t0);
  }
  ModelConfig cfg = parse_native_config_bytes(config_json, config_size, name + " config.json");
  Checkpoint ck = open_native_checkpoint(std::make_unique<SafetensorsFile>(SafetensorsFile::from_view(
                                             safetensors, safetensors_size, name + " model.safetensors")),
                                         std::move(cfg));
  return load_checkpoint(ctx, ck, options, name, t0);
}

std::unique_ptr<Model> Model::load_fd(Context& ctx, FdRange config_json, FdRange safetensors) {
  return load_fd(ctx, config_json, safetensors, LoadOptions{});
}

std::unique_ptr<Model> Model::load_fd(Context& ctx, FdRange config_json, FdRange safetensors,
                                      const LoadOptions& options) {
  const auto t0 = std::chrono::steady_clock::now();
  ctx.device().check_not_lost();
  const std::string cname = "config.json (fd " + std::to_string(config_json.fd) + ")",
                    wname = "model.safetensors (fd " + std::to_string(safetensors.fd) + ")";
  if (config_json.fd < 0) {  // only a .gguf carries its own configuration
    const std::string gname = "gguf (fd " + std::to_string(safetensors.fd) + ")";
    FileBytes bytes = map_range(safetensors, gname);
    if (!GgufFile::has_magic(bytes.bytes, bytes.size))
      throw Error(Status::invalid_argument,
                  gname +
                      ": no config.json descriptor (-1), and the weights are not a .gguf (only a "
                      ".gguf carries its own configuration)");
    Checkpoint ck = open_gguf_checkpoint(std::make_unique<GgufFile>(GgufFile::from_file(std::move(bytes))));
    return load_checkpoint(ctx, ck, options, "fd " + std::to_string(safetensors.fd), t0);
  }
  const auto cfg_bytes = read_range(config_json, kMaxConfigBytes, cname);
  const std::string cfg_text(cfg_bytes.begin(), cfg_bytes.end());
  const bool phi4flash = is_phi4flash_config(cfg_text);
  ModelConfig cfg;
  if (!phi4flash) cfg = parse_native_config_bytes(cfg_bytes.data(), cfg_bytes.size(), cname);
  FileBytes weights = map_range(safetensors, wname);
  if (GgufFile::has_magic(weights.bytes, weights.size))
    throw Error(Status::invalid_argument,
                wname + ": the weights are a .gguf, which carries its own configuration: pass config fd -1");
  if (phi4flash) {
    Checkpoint ck = phi4flash_as_checkpoint(
        open_phi4flash_checkpoint(std::make_unique<SafetensorsFile>(SafetensorsFile::from_file(std::move(weights))),
                                  parse_phi4flash_config(cfg_text, cname)));
    return load_checkpoint(ctx, ck, options, "fd " + std::to_string(safetensors.fd), t0);
  }
  auto st = std::make_unique<SafetensorsFile>(SafetensorsFile::from_file(std::move(weights)));
  Checkpoint ck = open_native_checkpoint(std::move(st), std::move(cfg));
  return load_checkpoint(ctx, ck, options, "fd " + std::to_string(safetensors.fd), t0);
}

namespace {
// The format of each linear weight under LoadOptions::weights; every weight left in the
// storage type while quantization was asked for is logged.
class WeightFormats {
 public:
  WeightFormats(QuantKind k, bool q4_0_head, bool fp16, const std::string& dir)
      : dir_(dir), storage_(fp16 ? "fp16" : "fp32"), q4_head_(q4_0_head) {
    if (int(k) < 0 || int(k) > int(QuantKind::q4_0))
      throw Error(Status::invalid_argument,
                  "LoadOptions::weights: unknown weight format " + std::to_string(int(k)) + " (f16, q8_0, q4_0)");
    q_ = static_cast<QuantType>(k);
  }
  QuantType linear(const WeightSource& w, QuantType want) {
    if (w.stored != QuantType::f16) {  // a quantized GGUF: its blocks as they are (f16 = the file's formats)
      if (q_ != QuantType::f16 && want != w.stored)
        throw Error(Status::invalid_argument,
                    dir_ + ": " + w.name + " is " + quant_type_name(w.stored) + " in the file but weights " +
                        quant_type_name(q_) + " needs it " + quant_type_name(want) +
                        ": load the file with the default weights (f16: the file's own formats) or "
                        "the kind it was written with (diffvk quantize --type)");
      want = w.stored;
    }
    if (want == QuantType::f16) return want;
    if (w.cols % kQuantBlockWeights != 0) {
      platform::log(platform::LogLevel::warn, dir_ + ": " + w.name + " stays " + storage_ + ": its input width " +
                                                  std::to_string(w.cols) + " is not a multiple of 32 (" +
                                                  quant_type_name(want) + " blocks)");
      return QuantType::f16;
    }
    if (std::find(used_.begin(), used_.end(), want) == used_.end()) used_.push_back(want);
    return want;
  }
  QuantType linear(const WeightSource& w) { return linear(w, q_); }
  // lm_head: Q8_0 when the linears are Q4_0 (its error reaches every logit; llama.cpp does the same),
  // unless LoadOptions::q4_0_head.
  QuantType head(const WeightSource& w) { return linear(w, q_ == QuantType::q4_0 && !q4_head_ ? QuantType::q8_0 : q_); }
  // The embedding table: quantized like the linears, or, when it is also the head (tied), like the head
  // (Q8_0 under q4_0); a quantized GGUF's blocks as they are. The embed kernel dequantizes the rows it copies.
  QuantType embed(const WeightSource& w, bool tied) { return tied ? head(w) : linear(w); }
  const std::vector<QuantType>& used() const { return used_; }
  std::string describe() const {
    std::string s;
    for (QuantType t : used_) s += std::string(s.empty() ? ", linear weights " : "/") + quant_type_name(t);
    return s;
  }

 private:
  std::string dir_, storage_;
  QuantType q_ = QuantType::f16;
  bool q4_head_ = false;
  std::vector<QuantType> used_;
};

// A forced quantized path (LoadOptions::quant_decode / quant_prefill), or nullptr for the device's choice.
const QuantRowPath* forced_path(LoadOptions::QuantDecode q, QuantRowPath& path) {
  if (q == LoadOptions::QuantDecode::automatic) return nullptr;
  path = q == LoadOptions::QuantDecode::int8_dot ? QuantRowPath::int8_dot : QuantRowPath::dequant;
  return &path;
}
}  // namespace

std::unique_ptr<Model> Model::load_checkpoint(Context& ctx, Checkpoint& ck, const LoadOptions& options,
                                              const std::string& dir, std::chrono::steady_clock::time_point t0) {
  auto m = std::make_unique<Impl>();
  Device& dev = ctx.device();
  dev.check_not_lost();
  m->dev = &dev;
  m->fp16 = dev.fp16();
  m->cfg = ck.config;
  if (ck.phi4flash) {  // Phi-4-mini-flash (SambaY): model/phi4flash_forward.hpp
    const Phi4FlashCheckpoint& pk = *ck.phi4flash;
    QuantRowPath decode_path, prefill_path;
    Phi4FlashLoad load;
    load.staging_bytes = options.staging_bytes;
    load.weights = options.weights;
    load.q4_0_head = options.q4_0_head;
    load.decode_path = forced_path(options.quant_decode, decode_path);
    load.prefill_path = forced_path(options.quant_prefill, prefill_path);
    m->sambay = upload_phi4flash(dev, pk, load);
    m->stats.quant_decode = phi4flash_quant_decode(*m->sambay);
    m->stats.quant_prefill = phi4flash_quant_prefill(*m->sambay);
    const std::string formats = phi4flash_quant_formats(*m->sambay);
    m->per_token_bytes = phi4flash_per_token_bytes(*m->sambay);
    m->stats.format = pk.gguf ? "gguf" : "phi4flash";
    m->stats.files = static_cast<uint32_t>(pk.files.size() + (pk.gguf ? 1 : 0));
    m->stats.weight_bytes = phi4flash_weight_bytes(*m->sambay);
    m->stats.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    platform::log(platform::LogLevel::info,
                  "model " + dir + " (phi4flash, SambaY, " + std::to_string(m->stats.files) +
                      " file(s)): " + std::to_string(pk.config.num_layers) +
                      " layers, E=" + std::to_string(pk.config.hidden_size) + ", vocab " +
                      std::to_string(pk.config.vocab_size) + ", window " + std::to_string(pk.config.sliding_window) +
                      ", " + std::to_string(m->stats.weight_bytes) + " weight bytes (" + (m->fp16 ? "fp16" : "fp32") +
                      (formats.empty() ? "" : ", linear weights " + formats) + ")");
    return std::unique_ptr<Model>(new Model(std::move(m)));
  }
  const ModelConfig& c = m->cfg;
  const int64_t E = c.hidden_size, D = c.head_dim(), Hkv = c.num_kv_heads, I = c.intermediate_size, V = c.vocab_size;
  m->weights = std::make_unique<WeightStore>(dev, m->fp16, dev.caps().max_storage_buffer_range);
  WeightStore& ws = *m->weights;
  WeightFormats wf(options.weights, options.q4_0_head, m->fp16, dir);
  const QuantType f_embed = wf.embed(ck.embed, c.tie_word_embeddings);
  m->embed = ws.add(std::move(ck.embed), f_embed);
  for (uint32_t l = 0; l < c.num_layers; ++l) {
    CheckpointLayer& S = ck.layers[l];
    Impl::Layer L{};
    L.attn_norm = ws.add(std::move(S.attn_norm));
    const QuantType f_wqkv = wf.linear(S.wqkv);
    L.wqkv = ws.add(std::move(S.wqkv), f_wqkv);
    const QuantType f_wo = wf.linear(S.wo);
    L.wo = ws.add(std::move(S.wo), f_wo);
    if (!c.v2()) L.subln = ws.add(std::move(S.subln));  // DIFF V2 has no headwise norm (Impl::kNone)
    L.ffn_norm = ws.add(std::move(S.ffn_norm));
    const QuantType f_wgu = wf.linear(S.wgu);
    L.wgu = ws.add(std::move(S.wgu), f_wgu);
    const QuantType f_wdown = wf.linear(S.wdown);
    L.wdown = ws.add(std::move(S.wdown), f_wdown);
    if (!c.v2()) {  // DIFF V1's λ scalar (V2's λ is per token: the lambda_proj rows inside wqkv)
      double d1 = 0, d2 = 0;
      for (int64_t k = 0; k < D; ++k) {
        d1 += double(S.lambda[0][k]) * S.lambda[1][k];
        d2 += double(S.lambda[2][k]) * S.lambda[3][k];
      }
      L.lambda_init = 0.8 - 0.6 * std::exp(-0.3 * l);
      L.lambda = std::exp(d1) - std::exp(d2) + L.lambda_init;
      if (!std::isfinite(L.lambda))
        throw Error(Status::format_error, dir + ": lambda of layer " + std::to_string(l) + " is not finite");
    }
    m->layers.push_back(L);
  }
  m->norm = ws.add(std::move(ck.norm));
  if (c.tie_word_embeddings) {
    m->lm_head = m->embed;  // the same table, in the same format
  } else {
    const QuantType f_head = wf.head(ck.lm_head);
    m->lm_head = ws.add(std::move(ck.lm_head), f_head);
  }
  const uint64_t table_bytes = uint64_t(c.max_position_embeddings) * (D / 2) * 2 * 4;
  const uint64_t need = ws.planned_bytes() + table_bytes, heap = device_heap_bytes(dev.caps());
  if (need > heap)
    throw Error(Status::out_of_memory, dir + ": the model needs " + std::to_string(need) +
                                           " bytes of device memory (weights + RoPE table) "
                                           "but the device heap has " +
                                           std::to_string(heap) + " bytes; nothing was allocated");
  const WeightUploadStats up = ws.upload(options.staging_bytes, options.force_staging);
  for (const auto& L : m->layers)  // only the embedding and lm_head may be split across bindings
    for (size_t w : {L.attn_norm, L.wqkv, L.wo, L.subln, L.ffn_norm, L.wgu, L.wdown})
      if (w != Impl::kNone) ws.range(w);
  ws.range(m->norm);
  // Bytes a decode step reads: every weight once, but one row of an untied embedding table.
  const uint64_t es = m->fp16 ? 2 : 4;
  uint64_t embed_bytes = 0;
  for (const WeightPart& part : ws.parts(m->embed)) embed_bytes += part.range.size;
  const uint64_t embed_row = f_embed == QuantType::f16 ? uint64_t(E) * es : quant_row_bytes(f_embed, uint64_t(E));
  m->per_token_bytes = ws.total() - (c.tie_word_embeddings ? 0 : embed_bytes) + embed_row;

  const auto table = rope_table(c.max_position_embeddings, rope_inv_freq(c));
  m->rope_table = Buffer(dev, table.size() * 4, MemoryDomain::device, "rope table");
  m->rope_table.upload(0, table.data(), table.size() * 4);

  QuantRowPath decode_path, prefill_path;
  m->k = build_model_kernels(
      dev, c, wf.used(), forced_path(options.quant_decode, decode_path),
      forced_path(options.quant_prefill, prefill_path));  // runtime/model/model_kernels.cpp (shared with shader-stats)
  m->stats.format = c.format;
  m->stats.files = static_cast<uint32_t>(ck.files.size() + (ck.gguf ? 1 : 0));
  m->stats.staging_peak_bytes = up.staging_peak_bytes;
  m->stats.largest_tensor_bytes = up.largest_tensor_bytes;
  m->stats.weight_bytes = up.bytes;
  m->stats.split_tensors = up.split_tensors;
  if (m->k.qrow) {
    m->stats.quant_decode = quant_row_path_name(m->k.qrow->choice().path);
    m->stats.quant_prefill = quant_row_path_name(m->k.linear->quant_choice().path);
  }
  m->stats.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  platform::log(platform::LogLevel::info,
                "model " + dir + " (" + c.format + ", " + std::to_string(ck.files.size() + (ck.gguf ? 1 : 0)) +
                    " file(s)): " + std::to_string(c.num_layers) + " layers, E=" + std::to_string(E) +
                    ", H=" + std::to_string(c.num_heads) + ", D=" + std::to_string(D) + (c.v2() ? " (DIFF V2)" : "") +
                    ", Hkv=" + std::to_string(Hkv) + ", I=" + std::to_string(I) + ", vocab " + std::to_string(V) +
                    ", " + std::to_string(ws.total()) + " weight bytes (" + (m->fp16 ? "fp16" : "fp32") +
                    wf.describe() + "), host staging peak " + std::to_string(up.staging_peak_bytes) + " bytes");
  return std::unique_ptr<Model>(new Model(std::move(m)));
}
Model::Model(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Model::~Model() = default;
const ModelConfig& Model::config() const { return impl_->cfg; }
uint64_t Model::weight_bytes() const { return impl_->per_token_bytes; }
const LoadStats& Model::load_stats() const { return impl_->stats; }

}  // namespace diffvk
