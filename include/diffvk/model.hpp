// diffvk — whole Differential Transformer inference: checkpoint loading, sessions with a KV cache,
// sampling. Checkpoint formats: a directory with config.json and model.safetensors (see README), or a
// Hugging Face DiffLlama directory (config.json with model_type "diffllama", model.safetensors or shards
// listed by model.safetensors.index.json), converted to the runtime's layout while it streams in.
#pragma once
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "diffvk/device.hpp"
#include "diffvk/gguf.hpp"

namespace diffvk {

struct Checkpoint;  // runtime/model/checkpoint.hpp

struct ModelConfig {
  uint32_t vocab_size = 0;
  uint32_t hidden_size = 0;  // E
  uint32_t num_layers = 0;
  uint32_t num_heads = 0;     // H (differential heads)
  uint32_t num_kv_heads = 0;  // Hkv
  uint32_t intermediate_size = 0;
  double rope_theta = 10000.0;
  double rms_norm_eps = 1e-5;  // block norms
  double subln_eps = 1e-5;     // headwise sub-norm: 1e-5 (docs/maths.md); DiffLlama: rms_norm_eps
  uint32_t max_position_embeddings = 0;
  bool tie_word_embeddings = false;
  int64_t bos_token_id = -1, eos_token_id = -1;
  std::string tokenizer = "bytes";  // "bytes", or "none" (token ids only: Hugging Face checkpoints)
  std::string format = "diffvk";    // "diffvk" (native) or "diffllama" (Hugging Face, converted at load)
  // RoPE frequency scaling (Hugging Face rope_scaling / rope_parameters): "default" (none) or "llama3".
  std::string rope_type = "default";
  double rope_factor = 1.0, rope_low_freq_factor = 1.0, rope_high_freq_factor = 4.0;
  uint32_t rope_original_max_positions = 0;
  // The differential attention (docs/maths.md): 1 = DIFF V1 (the paper's layer: E = 2·H·D, λ vectors and
  // the headwise norm), 2 = DIFF V2 (the authors' MultiheadFlashDiffV2: 2H query heads of head_dim, one λ
  // per token and head from lambda_proj, no headwise norm; E need not equal H·D). config.json "diff_version".
  uint32_t diff_version = 1;
  // config.json "head_dim": required for DIFF V2; for DIFF V1 optional and equal to E / H / 2. 0 = absent.
  uint32_t head_dim_key = 0;
  bool v2() const { return diff_version == 2; }
  uint32_t head_dim() const { return head_dim_key ? head_dim_key : hidden_size / num_heads / 2; }
  // Width of one KV-cache row of one KV head: 2·head_dim in DIFF V1 (K1|K2, V's two halves), head_dim in V2.
  uint32_t kv_row() const { return v2() ? head_dim() : 2 * head_dim(); }
};

// Parses and validates config.json text; errors name the key at fault.
ModelConfig parse_model_config(const std::string& json_text, const std::string& name = "config.json");

// <dir>/config.json in either checkpoint format (native, or Hugging Face DiffLlama converted to the runtime's config).
ModelConfig read_model_config(const std::string& dir);

// The sizes that a model's pipelines take as specialization constants, from its config.json text of any kind (native,
// Hugging Face DiffLlama, phi4flash): what the self-test at load runs them at (ContextOptions::selftest_model;
// docs/selftest.md). Throws what the config's parser throws, naming the key.
struct ModelPipelineShape {
  std::string kind;                                // "v1", "v2" or "phi4flash"
  uint32_t heads = 0, kv_heads = 0, head_dim = 0;  // the attention kernel's H, Hkv and D (query heads per KV head:
                                                   // heads / kv_heads, twice that for DIFF V2)
  uint32_t d_state = 0;                            // phi4flash: the selective scan's state size
  bool unaligned_width = false;  // a linear's input width is not a multiple of 8: its element-wise loads
  uint32_t max_positions = 0;    // max_position_embeddings: the most keys a decode call may see (the tuning's
                                 // attn_decode takes the prefill kernel only where they fit one invocation)
};
ModelPipelineShape model_pipeline_shape(const std::string& config_json);

// A model's config.json text, what ContextOptions::selftest_model takes: a model directory's config.json as it is,
// or for a .gguf file the config.json its metadata stands for (diffllama.* / phi4flash.* keys; docs/gguf.md). No
// weight is read. Throws Error naming the file (and the key) it cannot read.
std::string model_config_text(const std::string& path);
// The same for a model in memory: a .gguf file's bytes (they begin "GGUF"), or config.json text, given back as is.
std::string model_config_text(const void* data, size_t size);

// How Model::load streams the weights in.
struct LoadOptions {
  uint64_t staging_bytes = 16ull << 20;  // host conversion slice per upload (at least one row)
  // Convert through the host slice and a staging buffer even where device memory is host-mapped (where the
  // loader otherwise converts in place): the discrete-GPU path, testable on CPU drivers.
  bool force_staging = false;
  // Linear weights (q/k/v/o, gate/up/down, lm_head) and the embedding table on the device: f16 =
  // the storage type (fp16, or fp32 on the fp32 fallback), as before; q8_0 / q4_0 = quantized row by row
  // while they stream in (GGUF's blocks). Norm gains and λ stay in the storage type; a matrix whose input
  // width is not a multiple of 32 stays too (logged); in q4_0 mode lm_head is Q8_0 (as llama.cpp does), and
  // an embedding table tied to lm_head takes the head's format (Q8_0 under q4_0).
  QuantKind weights = QuantKind::f16;
  // Under weights = q4_0: lm_head (and an embedding table tied to it) in Q4_0 too instead of Q8_0. Q8_0 is
  // the default because the head's error reaches every logit; Q4_0 saves about a tenth of the weight bytes
  // of a model with a 32k vocabulary. Ignored in other modes.
  bool q4_0_head = false;
  // How decode multiplies Q8_0 / Q4_0 weights: automatic = int8 activations (per block of 32,
  // Q8_0's rule) with 4x8-bit integer dot products where the device accelerates them, else the weights
  // dequantized in registers (the choice is logged at load); dequant / int8_dot force one (int8_dot needs
  // the shaderIntegerDotProduct feature: Error(unsupported) otherwise). The int8 path rounds the
  // activations, so its logits differ from the dequantizing path's by that rounding.
  enum class QuantDecode { automatic, dequant, int8_dot };
  QuantDecode quant_decode = QuantDecode::automatic;
  // The same choice for the matmuls of prefill (more than one row, LinearKernel::record_quant): automatic =
  // int8 activations with integer dot products where the device accelerates them, else dequantized weights.
  QuantDecode quant_prefill = QuantDecode::automatic;
};
// What loading cost on the host (Model::load_stats).
struct LoadStats {
  std::string format;                 // "diffvk", "diffllama" or "gguf"
  uint32_t files = 0;                 // safetensors files (shards)
  uint64_t staging_peak_bytes = 0;    // host conversion + staging bytes held at once (0: device memory mapped)
  uint64_t largest_tensor_bytes = 0;  // largest device tensor (as stored: storage type or quantized)
  uint64_t weight_bytes = 0;          // bytes uploaded
  uint32_t split_tensors = 0;         // tensors split across bindings (larger than maxStorageBufferRange)
  // Wall time of Model::load. Most pipelines are not in it: they compile when a session first runs a row count
  // (prefill chunk, decode step) that records them, so that first call is slower than the next.
  double seconds = 0;
  // Quantized decode's path (LoadOptions::quant_decode): "int8_dot" or "dequant"; "" without quantized weights.
  std::string quant_decode;
  // Quantized prefill's path (LoadOptions::quant_prefill): "int8_dot" or "dequant"; "" without quantized weights.
  std::string quant_prefill;
};

// Thread-safe: any number of Sessions of one Model may run concurrently on different threads
// (see the threading model in diffvk/device.hpp). The Model must outlive its Sessions.
class Model {
 public:
  // Loads and validates <dir>/config.json and <dir>/model.safetensors, uploads the weights.
  static std::unique_ptr<Model> load(Context& context, const std::string& dir);
  // The same two files from memory (read during the call only); `name` is used in messages. A .gguf file
  // (docs/gguf.md) carries its own configuration: pass it as `safetensors` with config_json nullptr and
  // config_size 0.
  static std::unique_ptr<Model> load_memory(Context& context, const void* config_json, size_t config_size,
                                            const void* safetensors, size_t safetensors_size,
                                            const std::string& name = "memory");
  // The same two files as byte ranges of open descriptors (the offsets do not move, nothing is closed):
  // config.json read with pread, the weights' range memory-mapped where the descriptor is a regular file (read
  // otherwise). size < 0 = from offset to the end of the file (Android: AAsset_openFileDescriptor64). A .gguf
  // file: its range as `safetensors`, and config_json.fd = -1.
  struct FdRange {
    int fd = -1;
    int64_t offset = 0, size = -1;
  };
  static std::unique_ptr<Model> load_fd(Context& context, FdRange config_json, FdRange safetensors);
  static std::unique_ptr<Model> load(Context& context, const std::string& dir, const LoadOptions& options);
  static std::unique_ptr<Model> load_memory(Context& context, const void* config_json, size_t config_size,
                                            const void* safetensors, size_t safetensors_size, const std::string& name,
                                            const LoadOptions& options);
  static std::unique_ptr<Model> load_fd(Context& context, FdRange config_json, FdRange safetensors,
                                        const LoadOptions& options);
  // A model of the config's exact shape with seeded random weights (linear weights uniform with standard deviation
  // 0.02, norms of ones): what `diffvk bench --shape` times, without a checkpoint's download. config_json is a
  // native or Hugging Face DiffLlama config.json text, checked as a loaded one is; the weights are generated on
  // the host a staging slice at a time as they stream to the device (options.weights quantizes them at load, as for
  // a file). Its logits mean nothing; its speed and memory are those of the real model.
  static std::unique_ptr<Model> synthesize(Context& context, const std::string& config_json, const LoadOptions& options,
                                           uint64_t seed = 1, const std::string& name = "synthesized");
  ~Model();
  const ModelConfig& config() const;
  const LoadStats& load_stats() const;
  uint64_t weight_bytes() const;  // bytes of weights read per token, as stored on the device (quantized or not)
  struct Impl;
  Impl& impl() { return *impl_; }

 private:
  explicit Model(std::unique_ptr<Impl> impl);
  // Every load path ends here: the checkpoint's row sources are converted and uploaded (streaming).
  static std::unique_ptr<Model> load_checkpoint(Context& context, Checkpoint& checkpoint, const LoadOptions& options,
                                                const std::string& name, std::chrono::steady_clock::time_point t0);
  std::unique_ptr<Impl> impl_;
};

// The KV cache's element format (docs/maths.md "Q8_0 KV cache").
//   f16:  the storage type (fp16, or fp32 on the fp32 fallback).
//   q8_0: GGUF Q8_0 blocks of 32 along each cache row (int8 + one fp16 scale per block: 1.0625 bytes per
//         element against 2), quantized at append and dequantized inside attention. Needs cache rows whose
//         width (2·head_dim) is a multiple of 32; attention maps are not available with it.
enum class KvCacheType : uint32_t { f16 = 0, q8_0 = 1 };
const char* kv_cache_type_name(KvCacheType t);  // "f16", "q8_0"

struct SessionOptions {
  uint32_t context = 0;  // KV-cache capacity in tokens; 0 = max_position_embeddings
  // Prefill chunk (rows per recorded program). 0 = automatic: the longest of 256, 128, 64, 32, 16 rows
  // (a multiple of the matmul's row tile, at most the context) whose planned activations stay within
  // max(32 MiB, a quarter of the weight bytes); Session::chunk() says which.
  uint32_t chunk = 0;
  bool profile = false;  // record GPU timestamps between dispatches (Session::last_profile)
  // Asked before every prefill chunk and between layers of a chunk (one GPU submission per layer
  // while it is set); returning true makes the call throw Error(cancelled) with nothing changed.
  std::function<bool()> should_abort;
  KvCacheType kv_cache = KvCacheType::f16;  // the KV cache's format (q8_0: about half the bytes of f16)
  // phi4flash (SambaY) only: a prompt's rows run the cross-decoder (the layers past the full-attention layer's K/V
  // append) only where their logits are asked (YOCO prefill, docs/phi4flash.md). false: every row runs every layer,
  // the baseline `bench` measures YOCO against. The logits and the state after the prompt are the same either way.
  bool yoco = true;
};

// Top-k limit of device sampling (Session::decode_sample).
constexpr uint32_t kDeviceTopKMax = 64;

// GPU time of one dispatch of the last program a session ran (SessionOptions::profile).
struct DispatchTime {
  std::string op;  // the kernel's label, e.g. "linear_row+rmsnorm"
  double us = 0;
};

// Longest prompt whose attention maps Session::attention_maps computes (its output is heads · 2 · T² floats).
constexpr uint32_t kAttentionMapMaxTokens = 256;

// The two causal softmax matrices of each head of one layer (docs/maths.md), as Session::attention_maps returns them.
// DIFF V1: A1, A2 of the differential pair, one λ for the layer; the map is A1 − λ·A2.
// DIFF V2 (v2, docs/maths.md "DIFF V2"): A1 = the map of query head 2h, A2 = of query head 2h + 1, and λ per query
// row (lambda_rows); the map is A1 − λ_i·A2 for row i. lambda and lambda_init are 0.
struct AttentionMaps {
  uint32_t layer = 0, head0 = 0, heads = 0, tokens = 0;  // heads head0 … head0 + heads − 1; T = tokens
  double lambda = 0, lambda_init = 0;                    // DIFF V1: the layer's λ and λ_init
  // heads x T x T each, row-major: a1[((h − head0)·T + i)·T + j] = A1 of query i and key j (0 for j > i).
  std::vector<float> a1, a2;
  bool v2 = false;                 // a DIFF V2 layer
  std::vector<float> lambda_rows;  // DIFF V2: heads x T, lambda_rows[(h − head0)·T + i] = λ of query i; empty for V1
  // The λ that weighs A2 in row i of head head0 + hh: the map is a1 − lambda_at(hh, i)·a2 there.
  double lambda_at(uint32_t hh, uint32_t i) const { return v2 ? lambda_rows[std::size_t(hh) * tokens + i] : lambda; }
};

// Not thread-safe by itself: one Session is used by one thread at a time (different Sessions of the
// same Model may run concurrently). After Status::device_lost every call throws device_lost.
class Session {
 public:
  static std::unique_ptr<Session> create(Model& model, const SessionOptions& options = {});
  ~Session();
  // Appends tokens (chunked); returns logits of the last token (vocab), or of every token
  // (n x vocab) when all_logits. All or nothing: any error (context overflow, bad token id, a Vulkan
  // failure in any chunk) leaves the position and the visible KV cache exactly as before.
  std::vector<float> prefill(const std::vector<int32_t>& tokens, bool all_logits = false);
  // Appends one token (the one-row decode program) and returns its logits (vocab). decode(token, logits, n) writes
  // them into the caller's buffer of n >= vocab floats instead and allocates nothing once the decode program is
  // recorded (the first decode records it). Errors as prefill's; all or nothing.
  std::vector<float> decode(int32_t token);
  void decode(int32_t token, float* logits, size_t n);
  // Decodes `token`, then picks the next token on the device from its logits and reads back only that
  // id: greedy (the first maximum) when temperature <= 0, else top-k with 1 <= top_k <= kDeviceTopKMax
  // and the uniform draw u in [0, 1), the choice of sample_top_k() on the same logits and draw.
  // Throws invalid_argument for a top_k outside that range (use decode() and a host Sampler then).
  int32_t decode_sample(int32_t token, float temperature = 0.0f, uint32_t top_k = 0, float u = 0.0f);
  // Whether decode_sample is available: every model kind today (a phi4flash session samples the logits that follow
  // its head's LayerNorm; the others sample after the final RMSNorm fused into lm_head).
  bool device_sampling() const;
  // Per-dispatch GPU times of the last call (empty unless SessionOptions::profile and the device has timestamps).
  std::vector<DispatchTime> last_profile() const;
  void reset();
  // Rewind (regenerate, edit a turn): keeps the first n tokens (n <= position()) and forgets the rest,
  // without recomputing the kept prefix; the next prefill or decode continues at position n. n > position()
  // is invalid_argument and changes nothing.
  void rewind(uint32_t n);
  // The ids of the tokens the session holds, positions 0 ... position()-1 (prefilled, decoded or sampled).
  std::vector<int32_t> tokens() const;
  // Prompt-prefix reuse: keeps the longest common prefix of tokens() and `tokens` (at most tokens.size() - 1
  // of them, so that the last token is computed), prefills only the rest and returns the logits of the last
  // token, those of prefill(tokens) on a fresh session. *reused (when given) = the tokens kept. The checks
  // (no tokens, vocabulary, context) come first and leave the session as it was; a failure while running
  // (device, cancel) leaves it holding the kept prefix.
  // Rows that a context shift (below) made approximate are never kept: only the prefix whose rows equal a
  // fresh prefill's is.
  std::vector<float> prefill_reusing(const std::vector<int32_t>& tokens, uint32_t* reused = nullptr);
  // Context shift (docs/context-overflow.md): drops the tokens at positions keep … keep + discard − 1 and
  // moves the later ones down, re-rotating their cached keys by −discard on the device (RoPE composes:
  // R(−d)·R(p) = R(p − d)), without recomputing anything. Afterwards position() is discard lower and
  // tokens() lacks the dropped ones. The moved rows are not what a fresh prefill of tokens() would give
  // (they attended to the dropped tokens): that is the approximation every context shift makes.
  // invalid_argument (nothing changed) unless 0 < discard and keep + discard <= position(); unsupported (nothing
  // changed) where the self-test of the shift kernel at its first record fails (SelftestReport::deferred).
  void shift(uint32_t keep, uint32_t discard);
  // The shift policy's step: when `rows` more tokens do not fit, shift(min(keep, position()), max(half of
  // what follows, what the rows need)) and return true; false (nothing done) when they fit. invalid_argument
  // when they cannot fit next to the kept tokens. prefill_shifting and generate use it.
  bool make_room(uint32_t keep, uint32_t rows);
  // Every token given to the session since reset(): tokens() plus those context shifts dropped, in order
  // (a rewind below the last shift's kept tokens forgets the dropped ones).
  std::vector<int32_t> history() const;
  // Prefill under the shift policy: like prefill_reusing, but the common prefix is taken with history(),
  // so a conversation that only grew continues after a shift without recomputing; and whenever the next
  // chunk does not fit, make_room(keep, chunk) shifts.
  // A prompt longer than the context is prefilled to its end, the oldest tokens after `keep` dropped.
  // invalid_argument for keep >= capacity() or a bad token (before any work). A failure while running
  // leaves the session holding what was computed. Returns the logits of the last token.
  std::vector<float> prefill_shifting(const std::vector<int32_t>& tokens, uint32_t keep, uint32_t* reused = nullptr);
  // Saved state (app suspend/resume, a saved system prompt): the tokens held and their KV cache rows, in
  // a versioned, checksummed format (docs/session-state.md). save_state_file writes atomically.
  // restore_state refuses (invalid_argument naming what differs) a state of another model, precision or
  // format version, a corrupt or truncated one, or one longer than capacity(), leaving the session as it
  // was; a device failure while uploading leaves it empty (position 0). A restored session continues
  // exactly as the saved one would: the same logits, bit for bit.
  std::vector<uint8_t> save_state() const;
  uint64_t state_bytes() const;  // the size save_state() would return now
  void save_state_file(const std::string& path) const;
  void restore_state(const uint8_t* data, size_t size);
  void restore_state_file(const std::string& path);
  // Benchmarks only (`diffvk bench --context-fill zeros`): the session then holds n positions (token 0 each) whose
  // caches and recurrent states are all zero, as if restored from such a state, without computing them. What it
  // computes next is no model's output, but a decode step costs what it costs after a real prefill of n tokens (no
  // kernel's work depends on the values). context_overflow past capacity(); the session's tokens are replaced.
  void fill_for_timing(uint32_t n);
  uint32_t position() const;
  uint32_t capacity() const;
  uint32_t chunk() const;        // the prefill chunk in use (SessionOptions::chunk, or the automatic choice)
  KvCacheType kv_cache() const;  // SessionOptions::kv_cache
  // The KV cache's bytes on the device: every layer's K and V (alignment padding excluded). phi4flash: every state
  // the session keeps (the shared cache, the rings, the Mamba states and their snapshot; alignment included).
  uint64_t kv_cache_bytes() const;
  std::string plan_report() const;  // every intermediate: lifetime, offset, size; arena vs bounds
  // Debug path: resets the session, prefills `tokens` (1 … kAttentionMapMaxTokens of them, within the
  // context) and returns A1 and A2 of layer `layer` for head `head` (−1: every head), computed on the
  // device (shaders/attn_probs.comp, recorded after that layer's RoPE). Afterwards the session holds the
  // prompt (position = tokens.size()). Bad arguments (invalid_argument, context_overflow) leave the
  // session as it was; a failure while running resets it (position 0). The self-test tests the map kernel at its
  // first record (SelftestReport::deferred): where it fails, unsupported (naming the op and the variant), the
  // session as it was.
  AttentionMaps attention_maps(const std::vector<int32_t>& tokens, uint32_t layer, int32_t head = -1);
  struct Impl;

 private:
  explicit Session(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

struct SamplingOptions {
  float temperature = 0.0f;  // 0 = greedy
  uint32_t top_k = 0;        // 0 = off
  float top_p = 1.0f;        // 1 = off
  uint64_t seed = 0;
  // min-p: after temperature, tokens whose probability is below min_p x the most likely token's are dropped
  // (0 = off; in [0, 1]).
  float min_p = 0.0f;
  // Penalties over the last penalty_last_n tokens given to Sampler::accept (the prompt and what was
  // generated), applied to the logits before anything else: repeat_penalty r (> 0; 1 = off) divides a
  // positive logit of a token seen there by r and multiplies a negative one by r (CTRL); frequency_penalty f
  // subtracts f x its count; presence_penalty q subtracts q once (both in [-2, 2]; 0 = off).
  float repeat_penalty = 1.0f;
  float frequency_penalty = 0.0f;
  float presence_penalty = 0.0f;
  uint32_t penalty_last_n = 64;
};
// Host reference of device top-k sampling: order the logits by (value descending, index ascending), keep
// the first top_k (1 when temperature <= 0), weight them by exp((l - l_max) / temperature) in float64 and
// return the first whose cumulative weight exceeds u · total.
int32_t sample_top_k(const float* logits, uint32_t vocab, float temperature, uint32_t top_k, float u);

// Throws Error(invalid_argument) naming the parameter unless temperature is finite and >= 0 and top_p is
// finite and in (0, 1]. The one rule for the C++ API, the C ABI and the CLI (checked before any work).
void validate_sampling(const SamplingOptions& options);

// One thread at a time (it owns a random generator). The constructor calls validate_sampling.
class Sampler {
 public:
  explicit Sampler(const SamplingOptions& options);
  // Picks a token from vocab logits: penalties (from the accepted tokens), then greedy, or temperature,
  // top-k, top-p and min-p. Does not accept the token it returns: call accept() with the token used.
  int32_t sample(const float* logits, uint32_t vocab);
  // Speculative sampling of a drafted token (a draft proposed with certainty, as prompt lookup proposes): with p the
  // distribution sample() draws from, returns `draft` with probability p(draft), else a token drawn from p without
  // the draft, renormalized; so the token returned is distributed as p (greedy: the first maximum). Does not accept.
  int32_t sample_draft(const float* logits, uint32_t vocab, int32_t draft);
  // Records a token of the sequence (prompt or generated) for the penalties; keeps the last penalty_last_n.
  void accept(int32_t token);
  bool penalties_active() const;
  // True when Session::decode_sample can do this sampler's job (greedy, or top-k <= kDeviceTopKMax without
  // top-p), with no min-p and no penalty.
  bool device_capable() const;
  // Next uniform draw in [0, 1) from this sampler's generator (for Session::decode_sample).
  float draw();
  const SamplingOptions& options() const { return o_; }

 private:
  void distribution(const float* logits, uint32_t vocab, std::vector<uint32_t>& ids, std::vector<double>& p) const;
  SamplingOptions o_;
  std::mt19937_64 rng_;
  std::vector<int32_t> recent_;  // the last penalty_last_n accepted tokens (a ring once full)
  size_t next_ = 0;
};

}  // namespace diffvk
