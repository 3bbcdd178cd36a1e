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
 * to recreate the context. The *_destroy functions still work (and are needed to clean up). */
#ifndef DIFFVK_H
#define DIFFVK_H

#include <stddef.h>
#include <stdint.h>

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
  DIFFVK_BUFFER_TOO_SMALL = 10
} diffvk_status;

typedef enum diffvk_precision { DIFFVK_PRECISION_AUTO = 0, DIFFVK_PRECISION_FP16 = 1, DIFFVK_PRECISION_FP32 = 2 } diffvk_precision;

typedef struct diffvk_context diffvk_context;
typedef struct diffvk_model diffvk_model;
typedef struct diffvk_session diffvk_session;
typedef struct diffvk_sampler diffvk_sampler;

typedef struct diffvk_context_options {
  const char* device;              /* NULL/"" = default; index or name substring */
  diffvk_precision precision;
  int validation;                  /* -1 = environment/build default, 0 off, 1 on */
  const char* pipeline_cache_path; /* NULL = none */
} diffvk_context_options;

/* Message of the last failing call on this thread ("" when none). Valid until the next call. */
const char* diffvk_last_error(void);
const char* diffvk_status_string(diffvk_status status);

diffvk_status diffvk_context_create(const diffvk_context_options* options, diffvk_context** out);
/* Fails (DIFFVK_INVALID_ARGUMENT) while models created from it are alive. */
diffvk_status diffvk_context_destroy(diffvk_context* context);
diffvk_status diffvk_context_device_name(const diffvk_context* context, char* buffer, size_t capacity);
diffvk_status diffvk_context_precision(const diffvk_context* context, diffvk_precision* out);

diffvk_status diffvk_model_load(diffvk_context* context, const char* dir, diffvk_model** out);
/* Fails while sessions created from it are alive. */
diffvk_status diffvk_model_destroy(diffvk_model* model);
diffvk_status diffvk_model_vocab_size(const diffvk_model* model, uint32_t* out);
diffvk_status diffvk_model_eos_token(const diffvk_model* model, int32_t* out); /* -1 when none */
diffvk_status diffvk_model_bos_token(const diffvk_model* model, int32_t* out); /* -1 when none */

/* context_len 0 = the model's max_position_embeddings; chunk 0 = default. */
diffvk_status diffvk_session_create(diffvk_model* model, uint32_t context_len, uint32_t chunk, diffvk_session** out);
diffvk_status diffvk_session_destroy(diffvk_session* session);
/* Appends n tokens; writes the last token's logits (vocab floats) to logits. logits_capacity is in
 * floats; too small -> DIFFVK_BUFFER_TOO_SMALL before anything runs. Checked before any token is copied
 * or any work is dispatched: n against the room left in the context (DIFFVK_CONTEXT_OVERFLOW), every
 * token against the vocabulary (DIFFVK_INVALID_ARGUMENT naming its index). All or nothing: on any
 * error (including a failure in a later chunk of a long prefill) the position and the visible KV cache
 * are exactly as before and the session stays usable (except after DIFFVK_DEVICE_LOST, see above). */
diffvk_status diffvk_session_prefill(diffvk_session* session, const int32_t* tokens, size_t n, float* logits,
                                     size_t logits_capacity);
diffvk_status diffvk_session_decode(diffvk_session* session, int32_t token, float* logits, size_t logits_capacity);
diffvk_status diffvk_session_reset(diffvk_session* session);
diffvk_status diffvk_session_position(const diffvk_session* session, uint32_t* out);
diffvk_status diffvk_session_capacity(const diffvk_session* session, uint32_t* out);

/* temperature 0 = greedy; top_k 0 = off; top_p 1 = off. temperature must be finite and >= 0, top_p
 * finite and in (0, 1] (else DIFFVK_INVALID_ARGUMENT); the CLI applies the same rules. */
diffvk_status diffvk_sampler_create(float temperature, uint32_t top_k, float top_p, uint64_t seed, diffvk_sampler** out);
diffvk_status diffvk_sampler_destroy(diffvk_sampler* sampler);
diffvk_status diffvk_sampler_sample(diffvk_sampler* sampler, const float* logits, uint32_t vocab, int32_t* out);

/* ---- Tokenizers (issue 13; include/diffvk/tokenizer.hpp) -------------------------------------------
 * Pure CPU, no context needed. A tokenizer is immutable: encode/decode may run on many threads at once.
 * dir: a model directory: tokenizer.model (SentencePiece unigram/BPE), else tokenizer.json (byte-level
 * BPE; BOS/EOS from tokenizer_config.json or config.json), else config.json alone (the bytes tokenizer
 * of the bundled tiny models). */
typedef struct diffvk_tokenizer diffvk_tokenizer;
diffvk_status diffvk_tokenizer_load(const char* dir, diffvk_tokenizer** out);
diffvk_status diffvk_tokenizer_free(diffvk_tokenizer* tokenizer);
/* text: len bytes (any bytes; NULL allowed when len is 0). add_special != 0: the special tokens the
 * tokenizer adds (e.g. BOS). *n = the number of ids the text encodes to; when cap < *n the call
 * returns DIFFVK_BUFFER_TOO_SMALL and writes nothing: call again with cap >= *n. */
diffvk_status diffvk_tokenizer_encode(const diffvk_tokenizer* tokenizer, const char* text, size_t len, int add_special,
                                      int32_t* ids, size_t cap, size_t* n);
/* The bytes of n ids (not NUL-terminated; *len of them), with the same capacity rule as encode.
 * An id outside the vocabulary -> DIFFVK_INVALID_ARGUMENT naming its index. */
diffvk_status diffvk_tokenizer_decode(const diffvk_tokenizer* tokenizer, const int32_t* ids, size_t n, char* bytes,
                                      size_t cap, size_t* len);
diffvk_status diffvk_tokenizer_bos(const diffvk_tokenizer* tokenizer, int32_t* out); /* -1 when none */
diffvk_status diffvk_tokenizer_eos(const diffvk_tokenizer* tokenizer, int32_t* out); /* -1 when none */
diffvk_status diffvk_tokenizer_vocab_size(const diffvk_tokenizer* tokenizer, uint32_t* out);

#ifdef __cplusplus
}
#endif
#endif /* DIFFVK_H */
