/* diffvk — C ABI. Opaque handles, status codes, a thread-local last-error string; nothing is
 * thrown across this boundary. Every handle is checked against a registry of live objects, so a
 * null, foreign or already-destroyed handle gives DIFFVK_INVALID_ARGUMENT instead of a crash
 * (a freed handle whose address was reused by a new object of the same kind cannot be detected).
 *
 * THREADING. Any number of sessions of one model may run concurrently, each on its own thread; every
 * function may be called from any thread. The one rule: a session is used by one thread at a time
 * (likewise a sampler). Sessions own their KV cache, command buffers, command pools and fences; the
 * device's queue is shared and submissions to it are serialised internally (a lock held only around
 * the submit, never during GPU work). The handle registry is locked only for lookups and each call
 * keeps its handles alive until it returns, so a racing destroy cannot free memory under a call.
 * Destroy sessions before their model and models before their context (destroy fails otherwise).
 * diffvk_last_error() is per thread.
 *
 * DEVICE LOSS. Once any call returned DIFFVK_DEVICE_LOST, the context is lost for good: every later
 * call on it, its models and their sessions returns DIFFVK_DEVICE_LOST at once, with a message saying
 * to recreate the context. The *_destroy functions still work (and are needed to clean up).
 *
 * VERSIONING (v1). The ABI of libdiffvk.so.1 only grows: new functions, new status values, new fields at
 * the END of the option structs. Every options struct starts with `struct_size`; fill it with the
 * matching *_default_options() function, then change the fields you need. The library reads only the
 * fields that fit in struct_size (never the tail padding of an older layout, where a later version may have put
 * a field), so a program built against an older header keeps working. Passing
 * NULL options means all defaults. .ci/abi-check compares each build with abi/libdiffvk.abi.
 *
 * The *_default_options(options) of this header are function-like macros (since 1.1, at the end of this
 * file): diffvk_X_default_options(o) is diffvk_X_default_options_sized((o), sizeof *(o)), so the library
 * learns the size of the caller's struct and writes no byte past it, whichever of the two is newer. It
 * fills the largest layout of the struct it knows that fits in that size (the fields of that layout,
 * their padding included) and sets struct_size to that layout's size. The exported functions of the same
 * names stay (what a program built against 1.0 calls; also what taking the name's address, or writing
 * (diffvk_X_default_options)(o), calls): they fill only the struct's first layout (1.0's, or the one
 * it had when the function was added) and set struct_size to its size; the reader gives every later
 * field its default. A literal NULL does not compile through the macro (sizeof *(NULL)); a NULL pointer
 * variable is fine (nothing is written). */
#ifndef DIFFVK_H
#define DIFFVK_H

#include <stddef.h>
#include <stdint.h>

/* The one place the version is written (CMake, diffvk.pc and diffvk_version() take it from here). */
#define DIFFVK_VERSION_MAJOR 1
#define DIFFVK_VERSION_MINOR 0
#define DIFFVK_VERSION_PATCH 0
#define DIFFVK_VERSION_ENCODE(major, minor, patch) ((major)*10000 + (minor)*100 + (patch))
#define DIFFVK_VERSION DIFFVK_VERSION_ENCODE(DIFFVK_VERSION_MAJOR, DIFFVK_VERSION_MINOR, DIFFVK_VERSION_PATCH)

/* DIFFVK_API marks the exported functions; everything else in libdiffvk.so is hidden. */
#if defined(_WIN32)
#  if defined(DIFFVK_BUILDING_LIBRARY)
#    define DIFFVK_API __declspec(dllexport)
#  else
#    define DIFFVK_API
#  endif
#elif defined(__GNUC__) || defined(__clang__)
#  define DIFFVK_API __attribute__((visibility("default")))
#else
#  define DIFFVK_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

typedef enum diffvk_status {
  DIFFVK_OK = 0,
  DIFFVK_INVALID_ARGUMENT = 1,
  DIFFVK_IO_ERROR = 2,
  DIFFVK_FORMAT_ERROR = 3,
  DIFFVK_UNSUPPORTED = 4,
  DIFFVK_OUT_OF_MEMORY = 5,
  DIFFVK_DEVICE_LOST = 6,
  DIFFVK_VULKAN_ERROR = 7,
  DIFFVK_CONTEXT_OVERFLOW = 8,
  DIFFVK_INTERNAL = 9,
  DIFFVK_BUFFER_TOO_SMALL = 10,
  DIFFVK_CANCELLED = 11 /* an abort callback returned nonzero; the call had no effect */
} diffvk_status;

/* Abort callback: returns nonzero to cancel the running call (DIFFVK_CANCELLED). Called on the thread
 * of the call, between prefill chunks and between groups of GPU dispatches (one group per layer), so a
 * long prefill stops within about one layer's work. */
typedef int (*diffvk_abort_fn)(void* user);
/* Log callback. level: 0 = error, 1 = warn, 2 = info, 3 = debug. message is valid during the call. */
typedef void (*diffvk_log_fn)(void* user, int level, const char* message);
#define DIFFVK_LOG_ERROR 0
#define DIFFVK_LOG_WARN 1
#define DIFFVK_LOG_INFO 2
#define DIFFVK_LOG_DEBUG 3

typedef enum diffvk_precision {
  DIFFVK_PRECISION_AUTO = 0,
  DIFFVK_PRECISION_FP16 = 1,
  DIFFVK_PRECISION_FP32 = 2
} diffvk_precision;

typedef struct diffvk_context diffvk_context;
typedef struct diffvk_model diffvk_model;
typedef struct diffvk_session diffvk_session;
typedef struct diffvk_sampler diffvk_sampler;

typedef struct diffvk_context_options {
  size_t struct_size; /* sizeof(diffvk_context_options): set by diffvk_context_default_options */
  const char* device; /* NULL/"" = default; index or name substring */
  diffvk_precision precision;
  int validation; /* -1 = environment/build default, 0 off, 1 on */
  /* The driver's compiled pipelines, kept between runs (with pipeline_cache 1): this file, or NULL = the default
   * file in diffvk's cache directory (<cache dir>/pipelines/; diffvk_set_cache_dir; none where there is no cache
   * directory, as on Android before diffvk_set_cache_dir, and the log says so). */
  const char* pipeline_cache_path;
  int pipeline_cache; /* 1 (the default): a pipeline cache file; 0: none (pipeline_cache_path must be NULL). Since 1.1;
                         a 1.0 caller's struct gets 1 */
  /* DIFFVK_SELFTEST_*: the self-test at load (docs/decisions/024-selftest-at-load.md): AUTO (the default) tests
   * every op's pipelines once per device, driver version and shader build, keeps the verdict in the cache directory
   * (<cache dir>/selftest/) and reads it next time; ALWAYS tests at every create; OFF tests nothing. A failing
   * variant falls back through the tuning keys (coopmat, int_dot, attn_core, subgroup, fp16); when nothing passes,
   * the create fails with DIFFVK_UNSUPPORTED naming the op and variant. The test runs only in libdiffvk_bench.so
   * (libdiffvk.so has no cases: AUTO tests nothing there, ALWAYS fails with DIFFVK_UNSUPPORTED). Another value ->
   * DIFFVK_INVALID_ARGUMENT. Since 1.2; a 1.0 caller's struct gets AUTO. On 64-bit targets the field lies in the
   * 1.1 struct's tail padding (the size is unchanged): diffvk_context_default_options of 1.1 zeroes that padding,
   * so a 1.1 caller that filled its struct with it gets AUTO (0) */
  int selftest;
  /* The model's config.json text, NUL-terminated, or NULL (the default): the self-test then runs the attention and
   * the scan at that model's own sizes (head width, query heads per KV head, d_state), which are compiled into their
   * pipelines, instead of its case tables' sizes, which the model never records (docs/selftest.md). A model
   * directory's config.json as it is; for a .gguf file, or any load path, diffvk_model_config* gives it. A text
   * the config parser refuses -> DIFFVK_INVALID_ARGUMENT naming the key. Part of the kept verdict's key. Read during
   * diffvk_context_create only. Since the 1.3 layout; earlier callers' structs get NULL. */
  const char* selftest_model;
} diffvk_context_options;

#define DIFFVK_SELFTEST_AUTO 0   /* test once, then read the kept verdict */
#define DIFFVK_SELFTEST_ALWAYS 1 /* test at every diffvk_context_create */
#define DIFFVK_SELFTEST_OFF 2    /* no test */

/* Session options. The abort callback is consulted by every prefill/decode of the session. */
typedef struct diffvk_session_options {
  size_t struct_size;       /* sizeof(diffvk_session_options): set by diffvk_session_default_options */
  uint32_t context_len;     /* KV-cache capacity in tokens; 0 = the model's max_position_embeddings */
  uint32_t chunk;           /* prefill rows per GPU program; 0 = automatic (from the matmul tile and the memory plan) */
  diffvk_abort_fn abort_cb; /* NULL = never cancelled */
  void* abort_user;
  /* DIFFVK_KV_*: the KV cache's format (since 1.1). Another value -> DIFFVK_INVALID_ARGUMENT.
   * DIFFVK_KV_Q8_0 on a model whose cache rows (2·head_dim) are not a multiple of 32 -> DIFFVK_INVALID_ARGUMENT. */
  uint32_t kv_cache;
} diffvk_session_options;

#define DIFFVK_KV_F16 0  /* the storage type (fp16, or fp32 on the fp32 fallback) */
#define DIFFVK_KV_Q8_0 1 /* GGUF Q8_0 blocks of 32 (int8 + one fp16 scale): about half the bytes; no attention maps */

/* The format of a model's linear weights on the device (diffvk_model_options.weights). */
#define DIFFVK_WEIGHTS_F16 \
  0 /* the storage type (fp16, or fp32 on the fp32 fallback); a quantized GGUF keeps its format */
#define DIFFVK_WEIGHTS_Q8_0 1 /* GGUF Q8_0 blocks: 32 int8 + one fp16 scale */
#define DIFFVK_WEIGHTS_Q4_0 2 /* GGUF Q4_0 blocks: 32 4-bit + one fp16 scale; lm_head is Q8_0 */

/* How quantized (Q8_0 / Q4_0) weights are multiplied (since 1.1): diffvk_model_options.quant_decode and
 * .quant_prefill choose, diffvk_model_quant_paths reports what a loaded model uses. */
#define DIFFVK_QUANT_PATH_AUTO                                                                                         \
  0                                 /* options: the device's choice (INT8_DOT where it accelerates 4x8-bit integer dot \
                                     * products, else DEQUANT; logged at load). diffvk_model_quant_paths: no quantized weights */
#define DIFFVK_QUANT_PATH_DEQUANT 1 /* the weights dequantized in registers */
#define DIFFVK_QUANT_PATH_INT8_DOT                                                          \
  2 /* int8 activations (blocks of 32) and 4x8-bit integer dot products; needs the device's \
     * shaderIntegerDotProduct (else the load fails with DIFFVK_UNSUPPORTED). Its logits    \
     * differ from DEQUANT's by the rounding of the activations */

/* Model options (diffvk_model_load*_with_options). Grows at the end like the others. */
typedef struct diffvk_model_options {
  size_t struct_size; /* sizeof(diffvk_model_options): set by diffvk_model_default_options */
  /* DIFFVK_WEIGHTS_*: q/k/v/o, gate/up/down and lm_head quantized while they stream in. The embedding, norms
   * and λ stay in the storage type, as does a matrix whose input width is not a multiple of 32 and a lm_head
   * tied to the embedding (both logged). Another value -> DIFFVK_INVALID_ARGUMENT. */
  uint32_t weights;
  /* Since 1.1. A struct_size that ends at weights (the struct before these fields: 16 bytes on 64-bit targets,
   * padding included) gives them their defaults, whatever the padding held. */
  /* 1: under DIFFVK_WEIGHTS_Q4_0, lm_head (and an embedding tied to it) in Q4_0 too instead of Q8_0: about a tenth
   * fewer weight bytes with a 32k vocabulary, but the head's error reaches every logit. Ignored under the other
   * formats. 0 (default) or 1; another value -> DIFFVK_INVALID_ARGUMENT. */
  uint32_t q4_0_head;
  /* DIFFVK_QUANT_PATH_*: how decode (one row) multiplies quantized weights; quant_prefill: the same for prefill's
   * matmuls (more than one row). AUTO (default) = the device's choice. Without quantized weights (DIFFVK_WEIGHTS_F16
   * and an unquantized checkpoint) there is nothing to choose and both are ignored. Another value ->
   * DIFFVK_INVALID_ARGUMENT naming the field. */
  uint32_t quant_decode;
  uint32_t quant_prefill;
} diffvk_model_options;

/* "MAJOR.MINOR.PATCH" of the library that is running (compare with DIFFVK_VERSION_* of the header). */
DIFFVK_API const char* diffvk_version(void);
/* DIFFVK_VERSION_ENCODE(major, minor, patch) of the running library. */
DIFFVK_API uint32_t diffvk_version_number(void);

/* Message of the last failing call on this thread ("" when none). Valid until the next call. */
DIFFVK_API const char* diffvk_last_error(void);
/* A short English name of a status ("ok", "context overflow", ...); "unknown status" for values this
 * library does not know. Static storage: never freed, valid for the life of the process. */
DIFFVK_API const char* diffvk_status_string(diffvk_status status);

/* Routes the library's log (the same messages as stderr / logcat) to fn for levels <= max_level
 * (DIFFVK_LOG_*; it also sets the level of the default sink); fn NULL restores the default sink
 * (stderr, logcat on Android). Process-wide; fn is called on the thread that logs, possibly from
 * several threads at once, and must not call diffvk_set_log_callback itself. */
DIFFVK_API void diffvk_set_log_callback(diffvk_log_fn fn, void* user, int max_level);

/* The base of diffvk's cache directory (the pipeline cache files go to <base>/diffvk/pipelines/): on Android the app's
 * Context.getCacheDir() (Android has no default: without it the pipeline cache is off). NULL or "" restores the
 * default (Linux: $XDG_CACHE_HOME or ~/.cache). Not an absolute path -> DIFFVK_INVALID_ARGUMENT. Process-wide;
 * contexts created afterwards use it. Since 1.1. */
DIFFVK_API diffvk_status diffvk_set_cache_dir(const char* base);

/* Fills *options with the defaults of this library and sets options->struct_size to the size it knows
 * (call it first, then change fields). options NULL: does nothing. A macro: see VERSIONING above. */
DIFFVK_API void diffvk_context_default_options(diffvk_context_options* options);
/* The defaults of the largest layout of diffvk_context_options this library knows that fits in size bytes
 * (sizeof the caller's struct; layouts: 1.0's up to pipeline_cache_path; 1.1's up to pipeline_cache; 1.2's up to
 * selftest; 1.3's up to selftest_model); struct_size =
 * that layout's size. Nothing past it is written.
 * options NULL or size below the 1.0 struct: does nothing (since 1.1). */
DIFFVK_API void diffvk_context_default_options_sized(diffvk_context_options* options, size_t size);
/* options NULL = defaults; options->struct_size 0 or larger than this library knows -> INVALID_ARGUMENT
 * (fill it with diffvk_context_default_options). */
DIFFVK_API diffvk_status diffvk_context_create(const diffvk_context_options* options, diffvk_context** out);
/* Fails (DIFFVK_INVALID_ARGUMENT) while models created from it are alive. */
DIFFVK_API diffvk_status diffvk_context_destroy(diffvk_context* context);
/* The Vulkan device's name, NUL-terminated, into buffer (capacity bytes). Too small -> DIFFVK_BUFFER_TOO_SMALL,
 * nothing written, and diffvk_last_error() says how many bytes are needed. */
DIFFVK_API diffvk_status diffvk_context_device_name(const diffvk_context* context, char* buffer, size_t capacity);
/* The precision the context really runs (DIFFVK_PRECISION_FP16 or _FP32): AUTO resolved, and FP32 where the
 * device has no usable 16-bit storage (the log says why). */
DIFFVK_API diffvk_status diffvk_context_precision(const diffvk_context* context, diffvk_precision* out);

/* A checkpoint directory: <dir>/config.json + <dir>/model.safetensors. */
DIFFVK_API diffvk_status diffvk_model_load(diffvk_context* context, const char* dir, diffvk_model** out);
/* The same two files, already in memory (read during the call only: the buffers may be freed after it).
 * A .gguf file (docs/gguf.md) carries its own configuration: pass it as safetensors, with config_json NULL
 * and config_size 0 (since 1.1). */
DIFFVK_API diffvk_status diffvk_model_load_memory(diffvk_context* context, const char* config_json, size_t config_size,
                                                  const void* safetensors, size_t safetensors_size, diffvk_model** out);
/* The same two files as byte ranges of open file descriptors (the descriptors' offsets do not move; they are not
 * closed): config.json read with pread, the weights memory-mapped where the descriptor is a regular file (no copy
 * of them on the heap), else read with pread. Android: AAsset_openFileDescriptor64() of an uncompressed asset
 * gives (fd, offset, length). size -1 = from offset to the end of the file. A .gguf file: its range as the
 * safetensors range, with config_fd -1 (since 1.1). */
DIFFVK_API diffvk_status diffvk_model_load_fd(diffvk_context* context, int config_fd, int64_t config_offset,
                                              int64_t config_size, int safetensors_fd, int64_t safetensors_offset,
                                              int64_t safetensors_size, diffvk_model** out);
/* The model's config.json text, for diffvk_context_options.selftest_model (create the context with it, then load
 * the model), from the same arguments as diffvk_model_load and _memory: a directory's config.json as it is, and for
 * a .gguf file (a path ending in .gguf; or in memory with config_json NULL, config_size 0) the config.json its
 * metadata stands for. No weight is read. Written NUL-terminated into buffer when capacity is enough, else
 * DIFFVK_BUFFER_TOO_SMALL and nothing written; *size (required) = the bytes needed, the NUL included, in both
 * cases. buffer may be NULL with capacity 0. A file that cannot be read -> DIFFVK_IO_ERROR / DIFFVK_FORMAT_ERROR
 * naming it. Since 1.3. */
DIFFVK_API diffvk_status diffvk_model_config(const char* path, char* buffer, size_t capacity, size_t* size);
DIFFVK_API diffvk_status diffvk_model_config_memory(const char* config_json, size_t config_size, const void* weights,
                                                    size_t weights_size, char* buffer, size_t capacity, size_t* size);
/* Fills *options with the defaults (weights DIFFVK_WEIGHTS_F16, q4_0_head 0, quant_decode and quant_prefill
 * DIFFVK_QUANT_PATH_AUTO) and sets struct_size. NULL: does nothing. A macro (see VERSIONING above): the
 * exported function fills only the struct's first layout ({struct_size, weights}, 16 bytes on 64-bit targets). */
DIFFVK_API void diffvk_model_default_options(diffvk_model_options* options);
/* The defaults of the largest layout of diffvk_model_options this library knows that fits in size bytes
 * (layouts: {struct_size, weights} with its padding; 1.1's up to quant_prefill); struct_size = that layout's
 * size. Nothing past it is written. options NULL or size below the first layout: does nothing (since 1.1). */
DIFFVK_API void diffvk_model_default_options_sized(diffvk_model_options* options, size_t size);
/* diffvk_model_load, _memory and _fd with options (NULL = defaults; struct_size as for diffvk_context_create). */
DIFFVK_API diffvk_status diffvk_model_load_with_options(diffvk_context* context, const char* dir,
                                                        const diffvk_model_options* options, diffvk_model** out);
DIFFVK_API diffvk_status diffvk_model_load_memory_with_options(diffvk_context* context, const char* config_json,
                                                               size_t config_size, const void* safetensors,
                                                               size_t safetensors_size,
                                                               const diffvk_model_options* options, diffvk_model** out);
DIFFVK_API diffvk_status diffvk_model_load_fd_with_options(diffvk_context* context, int config_fd,
                                                           int64_t config_offset, int64_t config_size,
                                                           int safetensors_fd, int64_t safetensors_offset,
                                                           int64_t safetensors_size,
                                                           const diffvk_model_options* options, diffvk_model** out);
/* Fails while sessions created from it are alive. */
DIFFVK_API diffvk_status diffvk_model_destroy(diffvk_model* model);
/* The number of logits every prefill/decode writes (the model's vocabulary). */
DIFFVK_API diffvk_status diffvk_model_vocab_size(const diffvk_model* model, uint32_t* out);
DIFFVK_API diffvk_status diffvk_model_eos_token(const diffvk_model* model, int32_t* out); /* -1 when none */
DIFFVK_API diffvk_status diffvk_model_bos_token(const diffvk_model* model, int32_t* out); /* -1 when none */
/* The paths the model's quantized weights take (since 1.1): *decode for decode, *prefill for prefill's matmuls;
 * DIFFVK_QUANT_PATH_DEQUANT or _INT8_DOT (the option's choice, or the device's under AUTO), or
 * DIFFVK_QUANT_PATH_AUTO for both when the model has no quantized weights. decode and prefill must not be NULL. */
DIFFVK_API diffvk_status diffvk_model_quant_paths(const diffvk_model* model, uint32_t* decode, uint32_t* prefill);

/* Fills *options with the defaults (context_len 0 = the model's maximum, the default chunk, no abort
 * callback, kv_cache DIFFVK_KV_F16) and sets struct_size. options NULL: does nothing. A macro (see
 * VERSIONING above): the exported function fills only the 1.0 struct (up to abort_user). */
DIFFVK_API void diffvk_session_default_options(diffvk_session_options* options);
/* The defaults of the largest layout of diffvk_session_options this library knows that fits in size bytes
 * (layouts: 1.0's up to abort_user; 1.1's up to kv_cache); struct_size = that layout's size. Nothing past it
 * is written. options NULL or size below the 1.0 struct: does nothing (since 1.1). */
DIFFVK_API void diffvk_session_default_options_sized(diffvk_session_options* options, size_t size);
/* options NULL = defaults; struct_size as for diffvk_context_create. */
DIFFVK_API diffvk_status diffvk_session_create_with_options(diffvk_model* model, const diffvk_session_options* options,
                                                            diffvk_session** out);
/* Kept from v0: diffvk_session_create_with_options with context_len and chunk, no abort callback. */
DIFFVK_API diffvk_status diffvk_session_create(diffvk_model* model, uint32_t context_len, uint32_t chunk,
                                               diffvk_session** out);
/* Frees the session's KV cache, arena and command buffers. The handle is invalid afterwards (using it gives
 * DIFFVK_INVALID_ARGUMENT). Must not race a call on the same session. */
DIFFVK_API diffvk_status diffvk_session_destroy(diffvk_session* session);
/* Appends n tokens; writes the last token's logits (vocab floats) to logits. logits_capacity is in
 * floats; too small -> DIFFVK_BUFFER_TOO_SMALL before anything runs. Checked before any token is copied
 * or any work is dispatched: n against the room left in the context (DIFFVK_CONTEXT_OVERFLOW), every
 * token against the vocabulary (DIFFVK_INVALID_ARGUMENT naming its index). All or nothing: on any
 * error (including a failure in a later chunk of a long prefill) the position and the visible KV cache
 * are exactly as before and the session stays usable (except after DIFFVK_DEVICE_LOST, see above).
 * DIFFVK_CANCELLED when the session's abort callback returned nonzero: likewise nothing changed. */
DIFFVK_API diffvk_status diffvk_session_prefill(diffvk_session* session, const int32_t* tokens, size_t n, float* logits,
                                                size_t logits_capacity);
/* Appends one token (the one-row decode path: split-K attention over the cache) and writes its logits;
 * the same capacity, overflow, vocabulary and all-or-nothing rules as diffvk_session_prefill. */
DIFFVK_API diffvk_status diffvk_session_decode(diffvk_session* session, int32_t token, float* logits,
                                               size_t logits_capacity);
/* Forgets every token: position 0, an empty KV cache; the session's buffers and programs are kept. */
DIFFVK_API diffvk_status diffvk_session_reset(diffvk_session* session);
/* Rewind (regenerate, edit a turn; since 1.1): keeps the first n tokens (n <= position) and forgets the
 * rest, without recomputing the kept prefix; the next prefill or decode continues at position n.
 * n > position: DIFFVK_INVALID_ARGUMENT, nothing changes. */
DIFFVK_API diffvk_status diffvk_session_rewind(diffvk_session* session, uint32_t n);
/* The ids of the tokens the session holds (positions 0 .. position-1; since 1.1): *n = position, and
 * tokens[0 .. position) when token_capacity >= position (else DIFFVK_BUFFER_TOO_SMALL, nothing written;
 * tokens may be NULL with token_capacity 0 to ask for the count only: then *n is set and OK is returned). */
DIFFVK_API diffvk_status diffvk_session_tokens(const diffvk_session* session, int32_t* tokens, size_t token_capacity,
                                               size_t* n);
/* Prompt-prefix reuse (since 1.1): keeps the longest common prefix of the session's tokens and tokens[0..n)
 * (at most n - 1 of them, so the last token is computed), prefills only the rest and writes the last token's
 * logits: those diffvk_session_prefill of the same n tokens gives on a fresh session. *reused (may be NULL)
 * = the tokens kept. Checked first, leaving the session as it was: logits capacity, n against the context
 * (the whole sequence must fit), every token against the vocabulary. A failure while running (device,
 * cancel) leaves the session holding the kept prefix. */
DIFFVK_API diffvk_status diffvk_session_prefill_reusing(diffvk_session* session, const int32_t* tokens, size_t n,
                                                        float* logits, size_t logits_capacity, uint32_t* reused);
/* Context shift (since 1.1; docs/context-overflow.md): drops the tokens at positions keep ..
 * keep + discard - 1 and moves the later ones down, their cached keys re-rotated by -discard on the device
 * (nothing is recomputed); the position drops by discard. The moved rows are approximate (they attended to the
 * dropped tokens), so diffvk_session_prefill_reusing keeps no more than keep of them afterwards.
 * discard == 0 or keep + discard > position: DIFFVK_INVALID_ARGUMENT, nothing changes. The self-test (auto) tests
 * the shift kernel at its first use on a context: where it fails, DIFFVK_UNSUPPORTED naming the op and the variant,
 * nothing changes (the next context created on the device tests it at load and takes its fallback). */
DIFFVK_API diffvk_status diffvk_session_shift(diffvk_session* session, uint32_t keep, uint32_t discard);
/* Every token given to the session since reset: its tokens plus those shifts dropped, in order (since 1.1);
 * the buffer rules of diffvk_session_tokens. */
DIFFVK_API diffvk_status diffvk_session_history(const diffvk_session* session, int32_t* tokens, size_t token_capacity,
                                                size_t* n);
/* Prefill under the shift policy (since 1.1): keeps the longest common prefix of the history and tokens[0..n)
 * when it reaches what the session still holds (a conversation that only grew continues), else the exact
 * prefix; prefills the rest, shifting out half of what follows keep (at least what the next chunk needs)
 * whenever it does not fit. n may exceed the context. keep >= capacity or a bad token: DIFFVK_INVALID_ARGUMENT
 * before any work. *reused (may be NULL) = the tokens kept. */
DIFFVK_API diffvk_status diffvk_session_prefill_shifting(diffvk_session* session, const int32_t* tokens, size_t n,
                                                         uint32_t keep, float* logits, size_t logits_capacity,
                                                         uint32_t* reused);
/* Saved state (since 1.1; app suspend/resume, a saved system prompt): the tokens the session holds and
 * their KV cache rows, in a versioned, checksummed format (docs/session-state.md).
 * diffvk_session_save_state writes it to path atomically (an existing regular file is replaced only when
 * the whole state is written; anything else at path is left alone). diffvk_session_restore_state(_buffer)
 * refuses with DIFFVK_INVALID_ARGUMENT, naming what differs, a state of another model, precision or format
 * version, a corrupt or truncated one, or one longer than the session's capacity, and then changes
 * nothing; a device failure while uploading leaves the session empty (position 0). A restored session
 * continues exactly as the saved one would (the same logits, bit for bit). */
DIFFVK_API diffvk_status diffvk_session_save_state(const diffvk_session* session, const char* path);
DIFFVK_API diffvk_status diffvk_session_restore_state(diffvk_session* session, const char* path);
/* The state's size now; writes it to buffer when capacity >= that size (else DIFFVK_BUFFER_TOO_SMALL, nothing
 * written). *size (required) = the state's size in both cases. buffer may be NULL with capacity 0. */
DIFFVK_API diffvk_status diffvk_session_save_state_buffer(const diffvk_session* session, void* buffer, size_t capacity,
                                                          size_t* size);
DIFFVK_API diffvk_status diffvk_session_restore_state_buffer(diffvk_session* session, const void* data, size_t size);
/* The number of tokens in the session's KV cache (prefilled + decoded since the last reset). */
DIFFVK_API diffvk_status diffvk_session_position(const diffvk_session* session, uint32_t* out);
/* The session's context length: position may grow to it; one more token is DIFFVK_CONTEXT_OVERFLOW. */
DIFFVK_API diffvk_status diffvk_session_capacity(const diffvk_session* session, uint32_t* out);

/* temperature 0 = greedy; top_k 0 = off; top_p 1 = off. temperature must be finite and >= 0, top_p
 * finite and in (0, 1] (else DIFFVK_INVALID_ARGUMENT); the CLI applies the same rules. */
DIFFVK_API diffvk_status diffvk_sampler_create(float temperature, uint32_t top_k, float top_p, uint64_t seed,
                                               diffvk_sampler** out);
/* Every sampling control (since 1.1). Fill with diffvk_sampler_default_options, then set fields. */
typedef struct diffvk_sampler_options {
  size_t struct_size;   /* sizeof(diffvk_sampler_options): set by diffvk_sampler_default_options */
  float temperature;    /* 0 = greedy (default); finite, >= 0 */
  uint32_t top_k;       /* 0 = off (default) */
  float top_p;          /* 1 = off (default); in (0, 1] */
  uint64_t seed;        /* 0 (default) */
  float min_p;          /* drop tokens below min_p x the top token's probability; 0 = off (default); in [0, 1] */
  float repeat_penalty; /* CTRL penalty over the last penalty_last_n accepted tokens; 1 = off (default); in (0, 100] */
  float frequency_penalty; /* subtracted per occurrence; 0 = off (default); in [-2, 2] */
  float presence_penalty;  /* subtracted once per token seen; 0 = off (default); in [-2, 2] */
  uint32_t penalty_last_n; /* how many accepted tokens the penalties look back over; 64 (default); at most 1048576 */
} diffvk_sampler_options;
/* Fills *options with the defaults above and sets struct_size. NULL: does nothing. A macro (see VERSIONING). */
DIFFVK_API void diffvk_sampler_default_options(diffvk_sampler_options* options);
/* The defaults of the largest layout of diffvk_sampler_options this library knows that fits in size bytes
 * (layouts: 1.1's); struct_size = that layout's size. options NULL or a smaller size: does nothing (since 1.1). */
DIFFVK_API void diffvk_sampler_default_options_sized(diffvk_sampler_options* options, size_t size);
/* The rules of diffvk_sampler_create plus the ranges above (DIFFVK_INVALID_ARGUMENT naming the field). */
DIFFVK_API diffvk_status diffvk_sampler_create_with_options(const diffvk_sampler_options* options,
                                                            diffvk_sampler** out);
/* Records a token of the sequence (the prompt's, then each one used) for the penalties. */
DIFFVK_API diffvk_status diffvk_sampler_accept(diffvk_sampler* sampler, int32_t token);
/* Frees the sampler; the handle is invalid afterwards. */
DIFFVK_API diffvk_status diffvk_sampler_destroy(diffvk_sampler* sampler);
/* Picks a token id in [0, vocab) from vocab logits (host memory, e.g. what prefill/decode wrote). The sampler
 * owns its random state (seeded at creation): one sampler is used by one thread at a time. */
DIFFVK_API diffvk_status diffvk_sampler_sample(diffvk_sampler* sampler, const float* logits, uint32_t vocab,
                                               int32_t* out);

/* ---- Tokenizers (include/diffvk/tokenizer.hpp) -------------------------------------------
 * Pure CPU, no context needed. A tokenizer is immutable: encode/decode may run on many threads at once.
 * dir: a model directory: tokenizer.model (SentencePiece unigram/BPE), else tokenizer.json (byte-level
 * BPE; BOS/EOS from tokenizer_config.json or config.json), else config.json alone (the bytes tokenizer
 * of the bundled tiny models); or a path ending in .gguf: the tokenizer written into it by diffvk quantize
 * (docs/gguf.md; DIFFVK_FORMAT_ERROR when it has none). */
typedef struct diffvk_tokenizer diffvk_tokenizer;
DIFFVK_API diffvk_status diffvk_tokenizer_load(const char* dir, diffvk_tokenizer** out);
/* The tokenizer of a .gguf file in memory (read during the call only: the buffer may be freed after it) or as
 * a byte range of an open descriptor (pread; the descriptor's offset does not move and it is not closed; size -1 =
 * from offset to the end of the file): what diffvk_model_load_memory / _fd load from the same bytes, e.g. an
 * uncompressed Android asset (since 1.1). DIFFVK_FORMAT_ERROR when the bytes are not a .gguf or it has no tokenizer. */
DIFFVK_API diffvk_status diffvk_tokenizer_load_memory(const void* gguf, size_t size, diffvk_tokenizer** out);
DIFFVK_API diffvk_status diffvk_tokenizer_load_fd(int fd, int64_t offset, int64_t size, diffvk_tokenizer** out);
/* A Hugging Face tokenizer.json or a SentencePiece tokenizer.model as bytes (read during the call only) or as
 * descriptor ranges (the rules of diffvk_tokenizer_load_fd), e.g. an app's uncompressed assets (since 1.1): the
 * tokenizer diffvk_tokenizer_load gives for a directory holding those files, with the same limits and errors.
 * tokenizer_config / config_json: the optional tokenizer_config.json and config.json that name BOS and EOS
 * (NULL with size 0 = absent; a descriptor of -1 = absent). DIFFVK_INVALID_ARGUMENT for a NULL buffer with a size,
 * a NULL tokenizer.json / tokenizer.model, a negative descriptor or offset, or size < -1; DIFFVK_IO_ERROR for a
 * range past the end of the file; DIFFVK_FORMAT_ERROR for bytes that do not parse or are over the size limit;
 * DIFFVK_UNSUPPORTED for a tokenizer kind diffvk does not implement. The message names the file. */
DIFFVK_API diffvk_status diffvk_tokenizer_load_json_memory(const void* tokenizer_json, size_t size,
                                                           const void* tokenizer_config, size_t tokenizer_config_size,
                                                           const void* config_json, size_t config_json_size,
                                                           diffvk_tokenizer** out);
DIFFVK_API diffvk_status diffvk_tokenizer_load_json_fd(int fd, int64_t offset, int64_t size, int tokenizer_config_fd,
                                                       int64_t tokenizer_config_offset, int64_t tokenizer_config_size,
                                                       int config_json_fd, int64_t config_json_offset,
                                                       int64_t config_json_size, diffvk_tokenizer** out);
DIFFVK_API diffvk_status diffvk_tokenizer_load_sentencepiece_memory(const void* tokenizer_model, size_t size,
                                                                    diffvk_tokenizer** out);
DIFFVK_API diffvk_status diffvk_tokenizer_load_sentencepiece_fd(int fd, int64_t offset, int64_t size,
                                                                diffvk_tokenizer** out);
/* Frees the tokenizer; the handle is invalid afterwards. */
DIFFVK_API diffvk_status diffvk_tokenizer_free(diffvk_tokenizer* tokenizer);
/* text: len bytes (any bytes; NULL allowed when len is 0). add_special != 0: the special tokens the
 * tokenizer adds (e.g. BOS). *n = the number of ids the text encodes to; when cap < *n the call
 * returns DIFFVK_BUFFER_TOO_SMALL and writes nothing: call again with cap >= *n. */
DIFFVK_API diffvk_status diffvk_tokenizer_encode(const diffvk_tokenizer* tokenizer, const char* text, size_t len,
                                                 int add_special, int32_t* ids, size_t cap, size_t* n);
/* The bytes of n ids (not NUL-terminated; *len of them), with the same capacity rule as encode.
 * An id outside the vocabulary -> DIFFVK_INVALID_ARGUMENT naming its index. */
DIFFVK_API diffvk_status diffvk_tokenizer_decode(const diffvk_tokenizer* tokenizer, const int32_t* ids, size_t n,
                                                 char* bytes, size_t cap, size_t* len);
DIFFVK_API diffvk_status diffvk_tokenizer_bos(const diffvk_tokenizer* tokenizer, int32_t* out); /* -1 when none */
DIFFVK_API diffvk_status diffvk_tokenizer_eos(const diffvk_tokenizer* tokenizer, int32_t* out); /* -1 when none */
/* The number of ids the tokenizer knows (added tokens included); decode accepts ids below it. */
DIFFVK_API diffvk_status diffvk_tokenizer_vocab_size(const diffvk_tokenizer* tokenizer, uint32_t* out);

/* ---- Chat templates (since 1.1; include/diffvk/chat_template.hpp; docs/chat-templates.md) ---
 * A conversation to the prompt text of a chat model: the checkpoint's template is recognised as one of the
 * families diffvk renders (ChatML, Llama-2 chat, Llama-3 instruct, Phi-4), else refused (DIFFVK_UNSUPPORTED naming
 * it). Pure CPU, immutable. Encode the text without special tokens (add_special 0): BOS is in the text. */
typedef struct diffvk_chat_template diffvk_chat_template;
typedef struct diffvk_chat_message {
  const char* role;    /* "system", "user", "assistant"; NUL-terminated */
  const char* content; /* NUL-terminated UTF-8 */
} diffvk_chat_message;
/* tokenizer_config.json's chat_template, bos_token and eos_token in model_dir. No template ->
 * DIFFVK_INVALID_ARGUMENT ("has no chat template"); one of no supported family -> DIFFVK_UNSUPPORTED. */
DIFFVK_API diffvk_status diffvk_chat_template_load(const char* model_dir, diffvk_chat_template** out);
/* The same from tokenizer_config.json's bytes (read during the call only; an Android asset). NULL data with a
 * size -> DIFFVK_INVALID_ARGUMENT. */
DIFFVK_API diffvk_status diffvk_chat_template_load_memory(const void* tokenizer_config, size_t size,
                                                          diffvk_chat_template** out);
/* A family by name: "chatml", "llama2", "llama3" or "phi4" (bos_token / eos_token: the tokens' text; NULL = ""). */
DIFFVK_API diffvk_status diffvk_chat_template_builtin(const char* family, const char* bos_token, const char* eos_token,
                                                      diffvk_chat_template** out);
DIFFVK_API diffvk_status diffvk_chat_template_free(diffvk_chat_template* chat_template);
/* The family's name (static storage: valid for the life of the process). */
DIFFVK_API diffvk_status diffvk_chat_template_family(const diffvk_chat_template* chat_template, const char** out);
/* The end of an assistant turn ("<|im_end|>", the EOS token, "<|eot_id|>", "<|end|>"): a stop string for generation.
 * Copied into text (NUL-terminated) when cap > its length; *len = its length; DIFFVK_BUFFER_TOO_SMALL otherwise. */
DIFFVK_API diffvk_status diffvk_chat_template_end_of_turn(const diffvk_chat_template* chat_template, char* text,
                                                          size_t cap, size_t* len);
/* The prompt text of n messages, with the opening of the assistant's turn when add_generation_prompt != 0.
 * *len = its size in bytes (not NUL-terminated); when cap < *len -> DIFFVK_BUFFER_TOO_SMALL and nothing written.
 * Llama-2 with roles that do not alternate user/assistant -> DIFFVK_INVALID_ARGUMENT. */
DIFFVK_API diffvk_status diffvk_chat_template_apply(const diffvk_chat_template* chat_template,
                                                    const diffvk_chat_message* messages, size_t n,
                                                    int add_generation_prompt, char* text, size_t cap, size_t* len);

/* ---- Generation (since 1.1; include/diffvk/generate.hpp) -------------------------------
 * The text callback gets each piece of generated text once it is final (not NUL-terminated; size bytes, valid
 * during the call): a trailing incomplete UTF-8 sequence, and a tail that could still start a stop string,
 * are held back. Return nonzero to go on, 0 to stop (DIFFVK_STOP_CANCELLED): nothing more is emitted, sampled
 * or decoded. It runs on the calling thread and must not call diffvk functions on the same session or
 * sampler. */
typedef int (*diffvk_text_fn)(const char* piece, size_t size, void* user);
#define DIFFVK_STOP_EOS 0        /* the end-of-sequence token (not emitted) */
#define DIFFVK_STOP_STRING 1     /* a stop string appeared (neither it nor anything after it emitted) */
#define DIFFVK_STOP_MAX_TOKENS 2 /* max_tokens tokens were sampled */
#define DIFFVK_STOP_CANCELLED 3  /* the text callback returned 0 */
#define DIFFVK_OVERFLOW_REFUSE 0 /* a conversation beyond the context is DIFFVK_CONTEXT_OVERFLOW */
#define DIFFVK_OVERFLOW_SHIFT 1  /* context shift: keep the first `keep` tokens, drop the oldest half of the rest */
#define DIFFVK_MAX_STOP_STRINGS 16
#define DIFFVK_MAX_STOP_STRING_BYTES 256
#define DIFFVK_DRAFT_NONE 0   /* plain decoding */
#define DIFFVK_DRAFT_LOOKUP 1 /* speculative decoding, prompt-lookup drafts (docs/sessions.md) */
#define DIFFVK_DRAFT_MODEL 2  /* speculative decoding, a draft model's greedy tokens (draft_session; since 1.3) */
#define DIFFVK_MAX_DRAFT_TOKENS 16
#define DIFFVK_MAX_DRAFT_NGRAM 16
typedef struct diffvk_generate_options {
  size_t struct_size;      /* sizeof(diffvk_generate_options): set by diffvk_generate_default_options */
  uint32_t max_tokens;     /* tokens to sample at most; 64 (default) */
  uint32_t stop_count;     /* stop strings in stop; at most DIFFVK_MAX_STOP_STRINGS */
  const char* const* stop; /* NUL-terminated, non-empty, at most DIFFVK_MAX_STOP_STRING_BYTES each; may span tokens */
  int32_t eos_token;       /* the token that ends generation: -2 = the model's (default), -1 = none */
  diffvk_text_fn on_text;  /* NULL = no streaming */
  void* user;              /* passed to on_text */
  int32_t overflow;        /* DIFFVK_OVERFLOW_REFUSE (default) or DIFFVK_OVERFLOW_SHIFT (docs/context-overflow.md) */
  uint32_t keep;           /* shift: tokens at the start never dropped (a system prompt); < the capacity. 0 (default) */
  /* Since the 1.2 layout. Speculative decoding (generate.hpp SpeculateOptions): up to draft_k drafted tokens checked
   * in one pass of draft_k + 1 rows, the drafted tokens the sampler keeps kept (greedy: the same tokens as plain
   * decoding; sampling: the speculative sampling rule, the same distribution). */
  int32_t draft;        /* DIFFVK_DRAFT_NONE (default) or DIFFVK_DRAFT_LOOKUP */
  uint32_t draft_k;     /* drafted tokens per pass at most, 1 ... DIFFVK_MAX_DRAFT_TOKENS; 7 (default: a pass of 8
                           rows, the most the matrix-vector linears take) */
  uint32_t draft_ngram; /* lookup: the longest n-gram matched, 1 ... DIFFVK_MAX_DRAFT_NGRAM; 3 (default) */
  /* Since the 1.3 layout. DIFFVK_DRAFT_MODEL: a session of a second, smaller model sharing the tokenizer (not
   * `session`): brought to the context before each pass (its held prefix kept), it decodes draft_k tokens greedily.
   * NULL (default) otherwise. Must not be used by another call during the generate call. */
  diffvk_session* draft_session;
} diffvk_generate_options;
typedef struct diffvk_generate_result {
  size_t struct_size;  /* set by the caller: sizeof(diffvk_generate_result); the call fills the fields it covers */
  uint32_t tokens;     /* tokens sampled (an EOS included) */
  uint32_t reused;     /* prompt tokens the session already held and did not recompute */
  int32_t stop_reason; /* DIFFVK_STOP_* */
  int32_t stop_index;  /* the stop string that matched (index into options->stop), else -1 */
  uint32_t shifts;     /* context shifts made while sampling (DIFFVK_OVERFLOW_SHIFT) */
  /* Since the 1.2 layout: speculation's passes of drafted rows, tokens drafted, drafted tokens kept. */
  uint32_t verify_passes;
  uint32_t drafted;
  uint32_t accepted;
} diffvk_generate_result;
/* Fills *options with the defaults above and sets struct_size. NULL: does nothing. A macro (see VERSIONING). */
DIFFVK_API void diffvk_generate_default_options(diffvk_generate_options* options);
/* The defaults of the largest layout of diffvk_generate_options this library knows that fits in size bytes
 * (layouts: 1.1's up to keep; 1.2's up to draft_ngram; 1.3's up to draft_session); struct_size = that layout's size.
 * options NULL or a smaller size: does nothing (since 1.1). */
DIFFVK_API void diffvk_generate_default_options_sized(diffvk_generate_options* options, size_t size);
/* Prefills the n_prompt prompt ids with prompt-prefix reuse (what the session already holds of them is not
 * recomputed; diffvk_session_prefill_reusing), then samples up to max_tokens tokens with the sampler (which
 * first accepts the prompt's ids for its penalties), decoding each into the session but the last. Afterwards
 * the session holds the prompt and every sampled token but the last: a chat's next turn passes the whole
 * conversation again. Text is the tokenizer's decoding of prompt + generated minus that of the prompt.
 * options NULL = defaults; result may be NULL (else its struct_size set, as for the option structs). Bad options are
 * refused before any work (DIFFVK_INVALID_ARGUMENT naming the field); prompt + max_tokens - 1 beyond the capacity ->
 * DIFFVK_CONTEXT_OVERFLOW before any work, unless overflow is DIFFVK_OVERFLOW_SHIFT: then the prompt goes through
 * diffvk_session_prefill_shifting and a decode at the capacity first shifts out half of what follows keep; the history
 * keeps the whole conversation, so the next turn again passes all of it. */
DIFFVK_API diffvk_status diffvk_session_generate(diffvk_session* session, diffvk_sampler* sampler,
                                                 const diffvk_tokenizer* tokenizer, const int32_t* prompt,
                                                 size_t n_prompt, const diffvk_generate_options* options,
                                                 diffvk_generate_result* result);

/* The defaults functions as macros that pass the size of the caller's struct (since 1.1; VERSIONING above).
 * After every declaration, so that the declarations above name the exported 1.0 functions. */
#define diffvk_context_default_options(o) diffvk_context_default_options_sized((o), sizeof *(o))
#define diffvk_session_default_options(o) diffvk_session_default_options_sized((o), sizeof *(o))
#define diffvk_model_default_options(o) diffvk_model_default_options_sized((o), sizeof *(o))
#define diffvk_sampler_default_options(o) diffvk_sampler_default_options_sized((o), sizeof *(o))
#define diffvk_generate_default_options(o) diffvk_generate_default_options_sized((o), sizeof *(o))

#ifdef __cplusplus
}
#endif
#endif /* DIFFVK_H */
