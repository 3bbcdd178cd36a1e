/* The v1 additions of the C ABI, from C, linked against libdiffvk.so (so every symbol used here must be
 * exported). One check per CTest test: c_api_v1
 * <version|options|cancel|log|load_memory|load_fd|weights|weights_sources|quant_paths|
 * rewind|state|sampler|default_options> <model dir>,
 * c_api_v1 tokenizer_sources <tests/data/tokenizer> <scratch file> */
#include <diffvk/diffvk.h>

#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../common/c_expect.h"
#include "../common/c_canary.h"

static const int32_t kPrompt[40] = {72, 101, 108, 108, 111, 32, 119, 111, 114, 108, 100, 33, 1,  2,
                                    3,  4,   5,   6,   7,   8,  9,   10,  11,  12,  13,  14, 15, 16,
                                    17, 18,  19,  20,  21,  22, 23,  24,  25,  26,  27,  28};

static diffvk_context* make_context(void) {
  diffvk_context_options o;
  diffvk_context* ctx = NULL;
  diffvk_context_default_options(&o);
  o.validation = 1;
  EXPECT(diffvk_context_create(&o, &ctx) == DIFFVK_OK);
  return ctx;
}

/* A context (make_context) and dir's model in it: 0 when both are there (a failure is reported). */
static int open_model(const char* dir, diffvk_context** ctx, diffvk_model** model) {
  *model = NULL;
  *ctx = make_context();
  if (!*ctx) return 1;
  EXPECT(diffvk_model_load(*ctx, dir, model) == DIFFVK_OK);
  return *model ? 0 : 1;
}

/* The end of a test: destroys model and ctx, returns 0. */
static int close_model(diffvk_context* ctx, diffvk_model* model) {
  EXPECT(diffvk_model_destroy(model) == DIFFVK_OK);
  EXPECT(diffvk_context_destroy(ctx) == DIFFVK_OK);
  return 0;
}

/* A logits buffer of model's vocabulary size, stored in *vocab (caller frees). */
static float* logits_buffer(const diffvk_model* model, uint32_t* vocab) {
  EXPECT(diffvk_model_vocab_size(model, vocab) == DIFFVK_OK);
  return (float*)malloc(sizeof(float) * *vocab);
}

static char* read_whole(const char* path, size_t* size) {
  FILE* f = fopen(path, "rb");
  char* buf;
  long n;
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  n = ftell(f);
  fseek(f, 0, SEEK_SET);
  buf = (char*)malloc((size_t)n + 1);
  if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
    free(buf);
    buf = NULL;
  }
  fclose(f);
  *size = (size_t)n;
  return buf;
}

/* Logits of `n` prompt tokens on a fresh session of `model` (caller frees). */
static float* logits_of(diffvk_model* model, size_t n) {
  diffvk_session* s = NULL;
  uint32_t vocab = 0;
  float* lg = logits_buffer(model, &vocab);
  EXPECT(diffvk_session_create(model, 0, 0, &s) == DIFFVK_OK);
  EXPECT(diffvk_session_prefill(s, kPrompt, n, lg, vocab) == DIFFVK_OK);
  EXPECT(diffvk_session_destroy(s) == DIFFVK_OK);
  return lg;
}

/* Prefills 5 prompt tokens on s and decodes the 6th: both succeed and the logits are not NaN. */
static void prefill_decode(const diffvk_model* model, diffvk_session* s) {
  uint32_t vocab = 0;
  float* lg = logits_buffer(model, &vocab);
  EXPECT(diffvk_session_prefill(s, kPrompt, 5, lg, vocab) == DIFFVK_OK);
  EXPECT(diffvk_session_decode(s, kPrompt[5], lg, vocab) == DIFFVK_OK);
  EXPECT(lg[0] == lg[0]); /* not NaN */
  free(lg);
}

static int same_logits(diffvk_model* a, diffvk_model* b) {
  uint32_t vocab = 0;
  float* x = logits_of(a, 5);
  float* y = logits_of(b, 5);
  int same;
  diffvk_model_vocab_size(a, &vocab);
  same = memcmp(x, y, sizeof(float) * vocab) == 0;
  free(x);
  free(y);
  return same;
}

static int test_version(const char* unused) {
  (void)unused;
  char want[32];
  snprintf(want, sizeof want, "%d.%d.%d", DIFFVK_VERSION_MAJOR, DIFFVK_VERSION_MINOR, DIFFVK_VERSION_PATCH);
  EXPECT(strcmp(diffvk_version(), want) == 0); /* the running library is the one of this header */
  EXPECT(diffvk_version_number() == (uint32_t)DIFFVK_VERSION);
  EXPECT(DIFFVK_VERSION == DIFFVK_VERSION_MAJOR * 10000 + DIFFVK_VERSION_MINOR * 100 + DIFFVK_VERSION_PATCH);
  EXPECT(strcmp(diffvk_status_string(DIFFVK_CANCELLED), "cancelled") == 0);
  printf("c_api_v1: diffvk %s (header %s)\n", diffvk_version(), want);
  return 0;
}

static int test_options(const char* dir) {
  diffvk_context_options co;
  diffvk_session_options so;
  diffvk_context* ctx = NULL;
  diffvk_model* model = NULL;
  diffvk_session* s = NULL;
  uint32_t cap = 0;
  diffvk_context_default_options(&co);
  EXPECT(co.struct_size == sizeof co && co.validation == -1 && co.precision == DIFFVK_PRECISION_AUTO && !co.device);
  diffvk_session_default_options(&so);
  EXPECT(so.struct_size == sizeof so && so.context_len == 0 && so.chunk == 0 && !so.abort_cb);
  co.struct_size = 0; /* not filled by the defaults function */
  ctx = (diffvk_context*)&co;
  EXPECT(diffvk_context_create(&co, &ctx) == DIFFVK_INVALID_ARGUMENT && ctx == NULL);
  EXPECT(strstr(diffvk_last_error(), "diffvk_context_default_options") != NULL);
  co.struct_size = sizeof co + 8; /* from a newer header */
  EXPECT(diffvk_context_create(&co, &ctx) == DIFFVK_INVALID_ARGUMENT);
  if (open_model(dir, &ctx, &model)) return 1;
  /* NULL options = defaults: the whole context */
  EXPECT(diffvk_session_create_with_options(model, NULL, &s) == DIFFVK_OK);
  EXPECT(diffvk_session_capacity(s, &cap) == DIFFVK_OK && cap == 64);
  EXPECT(diffvk_session_destroy(s) == DIFFVK_OK);
  /* an older, shorter struct: fields past struct_size are the defaults */
  so.context_len = 16;
  so.struct_size = offsetof(diffvk_session_options, chunk);
  EXPECT(diffvk_session_create_with_options(model, &so, &s) == DIFFVK_OK);
  EXPECT(diffvk_session_capacity(s, &cap) == DIFFVK_OK && cap == 16);
  EXPECT(diffvk_session_destroy(s) == DIFFVK_OK);
  so.struct_size = 3;
  EXPECT(diffvk_session_create_with_options(model, &so, &s) == DIFFVK_INVALID_ARGUMENT && s == NULL);
  /* the KV cache's format (since 1.1): DIFFVK_KV_F16 by default, Q8_0 blocks on request, anything else refused */
  diffvk_session_default_options(&so);
  EXPECT(so.kv_cache == DIFFVK_KV_F16);
  so.kv_cache = 9;
  EXPECT(diffvk_session_create_with_options(model, &so, &s) == DIFFVK_INVALID_ARGUMENT && s == NULL);
  EXPECT(strstr(diffvk_last_error(), "kv_cache") != NULL);
  so.kv_cache = DIFFVK_KV_Q8_0;
  so.context_len = 16;
  EXPECT(diffvk_session_create_with_options(model, &so, &s) == DIFFVK_OK);
  if (s) {
    prefill_decode(model, s);
    EXPECT(diffvk_session_destroy(s) == DIFFVK_OK);
  }
  return close_model(ctx, model);
}

/* ---- the defaults functions and the caller's size (since 1.1; diffvk.h VERSIONING) ----------------------- */
/* The layouts of the 1.0 header (and the first of diffvk_model_options), as a program built against it
 * declares them. */
typedef struct {
  size_t struct_size;
  const char* device;
  diffvk_precision precision;
  int validation;
  const char* pipeline_cache_path;
} context_options_1_0;
typedef struct {
  size_t struct_size;
  uint32_t context_len;
  uint32_t chunk;
  diffvk_abort_fn abort_cb;
  void* abort_user;
} session_options_1_0;
typedef struct {
  size_t struct_size;
  uint32_t weights;
} model_options_first;
typedef struct {
  size_t struct_size;
  uint32_t max_tokens;
  uint32_t stop_count;
  const char* const* stop;
  int32_t eos_token;
  diffvk_text_fn on_text;
  void* user;
  int32_t overflow;
  uint32_t keep;
} generate_options_1_1;

static void sized_context(void* o, size_t n) { diffvk_context_default_options_sized((diffvk_context_options*)o, n); }
static void sized_session(void* o, size_t n) { diffvk_session_default_options_sized((diffvk_session_options*)o, n); }
static void sized_model(void* o, size_t n) { diffvk_model_default_options_sized((diffvk_model_options*)o, n); }
static void sized_sampler(void* o, size_t n) { diffvk_sampler_default_options_sized((diffvk_sampler_options*)o, n); }
static void sized_generate(void* o, size_t n) { diffvk_generate_default_options_sized((diffvk_generate_options*)o, n); }

static int test_default_options(const char* dir) {
  /* The exported functions, as a binary built against 1.0 calls them: through pointers, so the macros of
   * diffvk.h do not apply. */
  void (*context_1_0)(diffvk_context_options*) = diffvk_context_default_options;
  void (*session_1_0)(diffvk_session_options*) = diffvk_session_default_options;
  void (*model_first)(diffvk_model_options*) = diffvk_model_default_options;
  void (*sampler_1_1)(diffvk_sampler_options*) = diffvk_sampler_default_options;
  void (*generate_1_1)(diffvk_generate_options*) = diffvk_generate_default_options;
  /* 1.1's pipeline_cache and 1.2's selftest share one size (selftest lies in 1.1's tail padding); 1.3 adds
   * selftest_model */
  const size_t context_layouts[3] = {sizeof(context_options_1_0), offsetof(diffvk_context_options, selftest_model),
                                     sizeof(diffvk_context_options)};
  const size_t session_layouts[2] = {sizeof(session_options_1_0), sizeof(diffvk_session_options)};
  const size_t model_layouts[2] = {sizeof(model_options_first), sizeof(diffvk_model_options)};
  const size_t sampler_layouts[1] = {sizeof(diffvk_sampler_options)};
  const size_t generate_layouts[2] = {sizeof(generate_options_1_1), sizeof(diffvk_generate_options)};
  diffvk_context_options co;
  diffvk_session_options so;
  diffvk_model_options mo;
  diffvk_sampler_options po;
  diffvk_generate_options go;
  diffvk_session_options* no_options = NULL;
  diffvk_context* ctx = NULL;
  diffvk_model* model = NULL;
  diffvk_session* s = NULL;
  diffvk_sampler* sampler = NULL;
  uint32_t cap = 0, vocab = 0, decode = 9, prefill = 9;
  float* lg = NULL;

  /* the layouts this test knows are the ones of this header (a new field needs a new layout here) */
  EXPECT(sizeof(context_options_1_0) < sizeof(diffvk_context_options));
  EXPECT(sizeof(context_options_1_0) == offsetof(diffvk_context_options, pipeline_cache));
  EXPECT(sizeof(session_options_1_0) < sizeof(diffvk_session_options));
  EXPECT(sizeof(model_options_first) < sizeof(diffvk_model_options));
  EXPECT(sizeof(session_options_1_0) == offsetof(diffvk_session_options, kv_cache));
  EXPECT(sizeof(generate_options_1_1) == offsetof(diffvk_generate_options, draft));
  check_sized_defaults("context", sized_context, context_layouts, 3);
  check_sized_defaults("session", sized_session, session_layouts, 2);
  check_sized_defaults("model", sized_model, model_layouts, 2);
  check_sized_defaults("sampler", sized_sampler, sampler_layouts, 1);
  check_sized_defaults("generate", sized_generate, generate_layouts, 2);

  /* the macros: the whole struct of this header */
  memset(&co, 0x5a, sizeof co);
  diffvk_context_default_options(&co);
  EXPECT(co.struct_size == sizeof co && co.validation == -1 && co.precision == DIFFVK_PRECISION_AUTO && !co.device &&
         !co.pipeline_cache_path && co.pipeline_cache == 1 && co.selftest == DIFFVK_SELFTEST_AUTO &&
         !co.selftest_model);
  memset(&so, 0x5a, sizeof so);
  diffvk_session_default_options(&so);
  EXPECT(so.struct_size == sizeof so && so.context_len == 0 && so.chunk == 0 && !so.abort_cb && !so.abort_user &&
         so.kv_cache == DIFFVK_KV_F16);
  memset(&mo, 0x5a, sizeof mo);
  diffvk_model_default_options(&mo);
  EXPECT(mo.struct_size == sizeof mo && mo.weights == DIFFVK_WEIGHTS_F16 && mo.q4_0_head == 0 &&
         mo.quant_decode == DIFFVK_QUANT_PATH_AUTO && mo.quant_prefill == DIFFVK_QUANT_PATH_AUTO);
  memset(&po, 0x5a, sizeof po);
  diffvk_sampler_default_options(&po);
  EXPECT(po.struct_size == sizeof po && po.temperature == 0.0f && po.top_p == 1.0f && po.penalty_last_n == 64);
  memset(&go, 0x5a, sizeof go);
  diffvk_generate_default_options(&go);
  EXPECT(go.struct_size == sizeof go && go.eos_token == -2 && go.stop_count == 0 && !go.stop && !go.on_text &&
         go.overflow == DIFFVK_OVERFLOW_REFUSE && go.keep == 0 && go.draft == DIFFVK_DRAFT_NONE && go.draft_k == 7 &&
         go.draft_ngram == 3);
  diffvk_session_default_options(no_options); /* a NULL pointer through the macro: nothing */
  /* the same through the function-like macro's parenthesized name: the exported 1.0 function */
  memset(&so, 0x5a, sizeof so);
  (diffvk_session_default_options)(&so);
  EXPECT(so.struct_size == sizeof(session_options_1_0) && so.context_len == 0);

  /* A 1.0 context struct through the 1.0 function: 1.0's layout only (= this header's), then used. */
  {
    context_options_1_0* c = (context_options_1_0*)canary_fill();
    context_1_0((diffvk_context_options*)c);
    EXPECT(c->struct_size == sizeof(context_options_1_0) && canary_intact_from(sizeof(context_options_1_0)));
    EXPECT(c->validation == -1 && c->precision == DIFFVK_PRECISION_AUTO && !c->device && !c->pipeline_cache_path);
    c->validation = 1;
    EXPECT(diffvk_context_create((const diffvk_context_options*)c, &ctx) == DIFFVK_OK);
  }
  if (!ctx) return 1;
  /* The first model struct ({struct_size, weights}) through the exported function: 16 bytes on 64-bit targets,
   * the canary after it untouched; loading with it gives the 1.1 fields their defaults (the canary bytes where
   * quant_decode / quant_prefill would be, 0xA5A5A5A5, would be refused if they were read). */
  {
    model_options_first* m = (model_options_first*)canary_fill();
    model_first((diffvk_model_options*)m);
    EXPECT(m->struct_size == sizeof(model_options_first) && canary_intact_from(sizeof(model_options_first)));
    EXPECT(m->weights == DIFFVK_WEIGHTS_F16);
    EXPECT(diffvk_model_load_with_options(ctx, dir, (const diffvk_model_options*)m, &model) == DIFFVK_OK);
  }
  if (!model) return 1;
  EXPECT(diffvk_model_quant_paths(model, &decode, &prefill) == DIFFVK_OK && decode == DIFFVK_QUANT_PATH_AUTO &&
         prefill == DIFFVK_QUANT_PATH_AUTO);
  /* A 1.0 session struct through the 1.0 function: 32 bytes on 64-bit targets; kv_cache (the canary's
   * 0xA5A5A5A5 where it would be, refused if read) takes its default. */
  {
    session_options_1_0* o = (session_options_1_0*)canary_fill();
    session_1_0((diffvk_session_options*)o);
    EXPECT(o->struct_size == sizeof(session_options_1_0) && canary_intact_from(sizeof(session_options_1_0)));
    EXPECT(o->context_len == 0 && o->chunk == 0 && !o->abort_cb && !o->abort_user);
    o->context_len = 16;
    EXPECT(diffvk_session_create_with_options(model, (const diffvk_session_options*)o, &s) == DIFFVK_OK);
  }
  if (!s) return 1;
  EXPECT(diffvk_session_capacity(s, &cap) == DIFFVK_OK && cap == 16);
  prefill_decode(model, s);
  EXPECT(diffvk_session_destroy(s) == DIFFVK_OK);
  /* The structs new in 1.1 (sampler, generate): the exported function fills 1.1's layout (the sampler's whole
   * struct; the generate struct up to keep, its 1.2 fields untouched). */
  {
    diffvk_sampler_options* o = (diffvk_sampler_options*)canary_fill();
    sampler_1_1(o);
    EXPECT(o->struct_size == sizeof(diffvk_sampler_options) && canary_intact_from(sizeof(diffvk_sampler_options)));
    EXPECT(diffvk_sampler_create_with_options(o, &sampler) == DIFFVK_OK);
    EXPECT(diffvk_sampler_destroy(sampler) == DIFFVK_OK);
  }
  {
    diffvk_generate_options* o = (diffvk_generate_options*)canary_fill();
    generate_1_1(o);
    EXPECT(o->struct_size == sizeof(generate_options_1_1) && canary_intact_from(sizeof(generate_options_1_1)));
    EXPECT(o->eos_token == -2 && o->overflow == DIFFVK_OVERFLOW_REFUSE);
  }
  /* a struct_size between the layouts (a caller that set it by hand) is read up to the last field it covers whole:
   * kv_cache (refused: 9) when it covers its 4 bytes, not when it covers 2 of them */
  diffvk_session_default_options(&so);
  so.struct_size = sizeof(session_options_1_0) + 4;
  so.kv_cache = 9;
  EXPECT(diffvk_session_create_with_options(model, &so, &s) == DIFFVK_INVALID_ARGUMENT && s == NULL);
  so.struct_size = sizeof(session_options_1_0) + 2;
  EXPECT(diffvk_session_create_with_options(model, &so, &s) == DIFFVK_OK && s != NULL);
  if (s) EXPECT(diffvk_session_destroy(s) == DIFFVK_OK);
  s = NULL;
  return close_model(ctx, model);
}

/* ---- cancel ---------------------------------------------------------------------------------------- */
typedef struct {
  int calls;
  int cancel_at; /* 0 = never */
} abort_state;
static int count_and_abort(void* user) {
  abort_state* a = (abort_state*)user;
  ++a->calls;
  return a->cancel_at && a->calls >= a->cancel_at;
}

static int test_cancel(const char* dir) {
  diffvk_context* ctx;
  diffvk_model* model;
  diffvk_session* s = NULL;
  diffvk_session_options so;
  abort_state st = {0, 0};
  uint32_t vocab = 0, pos = 0;
  float *ref, *lg;
  if (open_model(dir, &ctx, &model)) return 1;
  ref = logits_of(model, 40);
  lg = logits_buffer(model, &vocab);
  diffvk_session_default_options(&so);
  so.chunk = 64; /* the 40-token prompt is ONE chunk: cancelling must work inside it */
  so.abort_cb = count_and_abort;
  so.abort_user = &st;
  EXPECT(diffvk_session_create_with_options(model, &so, &s) == DIFFVK_OK);
  if (!s) return 1;
  /* Uncancelled: asked once per layer group (2 layers + the logits group) and bit-identical. */
  EXPECT(diffvk_session_prefill(s, kPrompt, 40, lg, vocab) == DIFFVK_OK);
  EXPECT(st.calls == 3);
  EXPECT(memcmp(lg, ref, sizeof(float) * vocab) == 0);
  EXPECT(diffvk_session_reset(s) == DIFFVK_OK);
  /* Cancelled between layer 0 and layer 1 of the single chunk. */
  st.calls = 0;
  st.cancel_at = 2;
  EXPECT(diffvk_session_prefill(s, kPrompt, 40, lg, vocab) == DIFFVK_CANCELLED);
  EXPECT(st.calls == 2);
  EXPECT(strstr(diffvk_last_error(), "cancel") != NULL);
  EXPECT(diffvk_session_position(s, &pos) == DIFFVK_OK && pos == 0); /* nothing changed */
  /* Cancelled decode after a prefix: the position stays. */
  st.cancel_at = 0;
  EXPECT(diffvk_session_prefill(s, kPrompt, 5, lg, vocab) == DIFFVK_OK);
  st.calls = 0;
  st.cancel_at = 1;
  EXPECT(diffvk_session_decode(s, 65, lg, vocab) == DIFFVK_CANCELLED);
  EXPECT(diffvk_session_position(s, &pos) == DIFFVK_OK && pos == 5);
  /* Still usable: reset and the whole prompt again gives the reference logits bit for bit. */
  st.cancel_at = 0;
  EXPECT(diffvk_session_reset(s) == DIFFVK_OK);
  EXPECT(diffvk_session_prefill(s, kPrompt, 40, lg, vocab) == DIFFVK_OK);
  EXPECT(memcmp(lg, ref, sizeof(float) * vocab) == 0);
  EXPECT(diffvk_session_destroy(s) == DIFFVK_OK);
  /* Several chunks (4 rows each): cancelled between chunks 2 and 3 (2 groups per non-final chunk). */
  so.chunk = 4;
  EXPECT(diffvk_session_create_with_options(model, &so, &s) == DIFFVK_OK);
  st.cancel_at = 0; /* the reference of this chunking (other kernels than one 40-row chunk) */
  EXPECT(diffvk_session_prefill(s, kPrompt, 40, ref, vocab) == DIFFVK_OK);
  EXPECT(diffvk_session_reset(s) == DIFFVK_OK);
  st.calls = 0;
  st.cancel_at = 5;
  EXPECT(diffvk_session_prefill(s, kPrompt, 40, lg, vocab) == DIFFVK_CANCELLED);
  EXPECT(st.calls == 5);
  EXPECT(diffvk_session_position(s, &pos) == DIFFVK_OK && pos == 0);
  st.cancel_at = 0;
  EXPECT(diffvk_session_prefill(s, kPrompt, 40, lg, vocab) == DIFFVK_OK);
  EXPECT(memcmp(lg, ref, sizeof(float) * vocab) == 0);
  EXPECT(diffvk_session_destroy(s) == DIFFVK_OK);
  free(ref);
  free(lg);
  return close_model(ctx, model);
}

/* ---- log ------------------------------------------------------------------------------------------- */
typedef struct {
  int count[4];
  int model_line; /* the info line Model::load writes */
} log_state;
static void capture(void* user, int level, const char* message) {
  log_state* l = (log_state*)user;
  if (level >= 0 && level <= 3) ++l->count[level];
  if (level == DIFFVK_LOG_INFO && strstr(message, "layers, E=64")) ++l->model_line;
}

static int test_log(const char* dir) {
  log_state l;
  diffvk_context* ctx;
  diffvk_model* model;
  memset(&l, 0, sizeof l);
  diffvk_set_log_callback(capture, &l, DIFFVK_LOG_INFO);
  if (open_model(dir, &ctx, &model)) return 1;
  EXPECT(l.model_line == 1);
  EXPECT(l.count[DIFFVK_LOG_DEBUG] == 0); /* filtered */
  EXPECT(diffvk_model_destroy(model) == DIFFVK_OK);
  /* warnings only: the info line no longer arrives */
  memset(&l, 0, sizeof l);
  diffvk_set_log_callback(capture, &l, DIFFVK_LOG_WARN);
  EXPECT(diffvk_model_load(ctx, dir, &model) == DIFFVK_OK);
  EXPECT(l.model_line == 0 && l.count[DIFFVK_LOG_INFO] == 0);
  EXPECT(diffvk_model_destroy(model) == DIFFVK_OK);
  /* removed: nothing more reaches the callback */
  diffvk_set_log_callback(NULL, NULL, DIFFVK_LOG_INFO);
  memset(&l, 0, sizeof l);
  EXPECT(diffvk_model_load(ctx, dir, &model) == DIFFVK_OK);
  EXPECT(l.model_line == 0);
  return close_model(ctx, model);
}

/* dir's config.json and model.safetensors, each read whole (*cfg, *w, freed by the caller): 0 when both are. */
static int read_sources(const char* dir, char** cfg, size_t* cs, char** w, size_t* ws) {
  char path[4096];
  snprintf(path, sizeof path, "%s/config.json", dir);
  *cfg = read_whole(path, cs);
  snprintf(path, sizeof path, "%s/model.safetensors", dir);
  *w = read_whole(path, ws);
  return *cfg && *w ? 0 : 1;
}

/* The same files, each read whole (*cfg, *w, freed by the caller) and opened (*cfd, *wfd,
 * closed by the caller). 0 on success. */
static int open_sources(const char* dir, char** cfg, size_t* cs, int* cfd, char** w, size_t* ws, int* wfd) {
  char path[4096];
  snprintf(path, sizeof path, "%s/config.json", dir);
  *cfd = open(path, O_RDONLY);
  snprintf(path, sizeof path, "%s/model.safetensors", dir);
  *wfd = open(path, O_RDONLY);
  return read_sources(dir, cfg, cs, w, ws) == 0 && *cfd >= 0 && *wfd >= 0 ? 0 : 1;
}

/* What open_sources gave: closed and freed. */
static void close_sources(char* cfg, int cfd, char* w, int wfd) {
  close(cfd);
  close(wfd);
  free(cfg);
  free(w);
}

/* ---- loading from memory and from descriptors ------------------------------------------------------- */
static int test_load_memory(const char* dir) {
  size_t cs = 0, ws = 0;
  char *cfg, *w;
  diffvk_context* ctx = make_context();
  diffvk_model *from_dir = NULL, *from_mem = NULL, *bad = NULL;
  if (!ctx) return 1;
  EXPECT(read_sources(dir, &cfg, &cs, &w, &ws) == 0);
  if (!cfg || !w) return 1;
  EXPECT(diffvk_model_load(ctx, dir, &from_dir) == DIFFVK_OK);
  EXPECT(diffvk_model_load_memory(ctx, cfg, cs, NULL, ws, &bad) == DIFFVK_INVALID_ARGUMENT && bad == NULL);
  EXPECT(diffvk_model_load_memory(ctx, cfg, cs, w, ws / 2, &bad) == DIFFVK_FORMAT_ERROR && bad == NULL); /* truncated */
  EXPECT(strstr(diffvk_last_error(), "model.safetensors") != NULL);
  EXPECT(diffvk_model_load_memory(ctx, cfg, cs / 2, w, ws, &bad) == DIFFVK_FORMAT_ERROR &&
         bad == NULL); /* broken JSON */
  EXPECT(strstr(diffvk_last_error(), "config.json") != NULL);
  EXPECT(diffvk_model_load_memory(ctx, cfg, cs, w, ws, &from_mem) == DIFFVK_OK);
  memset(w, 0xff, ws); /* read during the call only */
  free(w);
  free(cfg);
  if (!from_dir || !from_mem) return 1;
  EXPECT(same_logits(from_dir, from_mem));
  EXPECT(diffvk_model_destroy(from_mem) == DIFFVK_OK);
  EXPECT(diffvk_model_destroy(from_dir) == DIFFVK_OK);
  EXPECT(diffvk_context_destroy(ctx) == DIFFVK_OK);
  return 0;
}

/* ---- a .gguf from a path, from memory and from a descriptor range, without config.json ---- */
static int test_gguf(const char* gguf) {
  size_t n = 0;
  char* bytes = read_whole(gguf, &n);
  int fd;
  diffvk_context* ctx = make_context();
  diffvk_model *from_path = NULL, *from_mem = NULL, *from_fd = NULL, *bad = NULL;
  if (!ctx || !bytes) return 1;
  EXPECT(diffvk_model_load(ctx, gguf, &from_path) == DIFFVK_OK);
  EXPECT(diffvk_model_load_memory(ctx, NULL, 0, bytes, n, &from_mem) == DIFFVK_OK);
  EXPECT(diffvk_model_load_memory(ctx, "{}", 2, bytes, n, &bad) == DIFFVK_INVALID_ARGUMENT && bad == NULL);
  EXPECT(strstr(diffvk_last_error(), "carries its own configuration") != NULL);
  EXPECT(diffvk_model_load_memory(ctx, NULL, 2, bytes, n, &bad) == DIFFVK_INVALID_ARGUMENT && bad == NULL);
  EXPECT(diffvk_model_load_memory(ctx, NULL, 0, bytes, n / 2, &bad) != DIFFVK_OK && bad == NULL); /* truncated */
  fd = open(gguf, O_RDONLY);
  EXPECT(fd >= 0);
  if (fd >= 0) {
    EXPECT(diffvk_model_load_fd(ctx, -1, 0, 0, fd, 0, -1, &from_fd) == DIFFVK_OK);
    close(fd);
  }
  memset(bytes, 0xff, n); /* read during the call only */
  free(bytes);
  if (!from_path || !from_mem || !from_fd) return 1;
  EXPECT(same_logits(from_path, from_mem));
  EXPECT(same_logits(from_path, from_fd));
  EXPECT(diffvk_model_destroy(from_fd) == DIFFVK_OK);
  EXPECT(diffvk_model_destroy(from_mem) == DIFFVK_OK);
  EXPECT(diffvk_model_destroy(from_path) == DIFFVK_OK);
  EXPECT(diffvk_context_destroy(ctx) == DIFFVK_OK);
  return 0;
}

static int test_load_fd(const char* dir, const char* scratch) {
  char path[4096];
  size_t cs = 0, ws = 0;
  char *cfg, *w;
  const char junk[37] = "an asset pack: other files around us";
  int fd, cfd;
  int64_t coff, woff;
  diffvk_context* ctx = make_context();
  diffvk_model *from_dir = NULL, *from_fd = NULL, *bad = NULL;
  FILE* f;
  if (!ctx) return 1;
  if (read_sources(dir, &cfg, &cs, &w, &ws) != 0) return 1;
  /* one file holding both, between other bytes, like an APK's uncompressed assets */
  f = fopen(scratch, "wb");
  EXPECT(f != NULL);
  if (!f) return 1;
  fwrite(junk, 1, sizeof junk, f);
  coff = (int64_t)sizeof junk;
  fwrite(cfg, 1, cs, f);
  fwrite(junk, 1, 11, f);
  woff = coff + (int64_t)cs + 11;
  fwrite(w, 1, ws, f);
  fwrite(junk, 1, sizeof junk, f);
  fclose(f);
  fd = open(scratch, O_RDONLY);
  EXPECT(fd >= 0);
  EXPECT(diffvk_model_load(ctx, dir, &from_dir) == DIFFVK_OK);
  EXPECT(diffvk_model_load_fd(ctx, -1, coff, (int64_t)cs, fd, woff, (int64_t)ws, &bad) == DIFFVK_INVALID_ARGUMENT &&
         !bad);
  EXPECT(diffvk_model_load_fd(ctx, fd, coff, (int64_t)cs, fd, woff + 1, (int64_t)ws, &bad) == DIFFVK_FORMAT_ERROR &&
         !bad);
  EXPECT(diffvk_model_load_fd(ctx, fd, coff, (int64_t)cs, fd, woff, (int64_t)ws + 4096, &bad) == DIFFVK_IO_ERROR &&
         !bad);
  EXPECT(diffvk_model_load_fd(ctx, fd, coff, (int64_t)cs, fd, woff, -2, &bad) == DIFFVK_INVALID_ARGUMENT && !bad);
  EXPECT(diffvk_model_load_fd(ctx, fd, coff, (int64_t)cs, fd, woff, (int64_t)ws, &from_fd) == DIFFVK_OK);
  EXPECT(lseek(fd, 0, SEEK_CUR) == 0); /* pread: the descriptor's offset did not move */
  if (from_dir && from_fd) EXPECT(same_logits(from_dir, from_fd));
  EXPECT(diffvk_model_destroy(from_fd) == DIFFVK_OK);
  /* size -1 = to the end of the file: plain files */
  snprintf(path, sizeof path, "%s/config.json", dir);
  cfd = open(path, O_RDONLY);
  snprintf(path, sizeof path, "%s/model.safetensors", dir);
  from_fd = NULL;
  {
    int wfd = open(path, O_RDONLY);
    EXPECT(diffvk_model_load_fd(ctx, cfd, 0, -1, wfd, 0, -1, &from_fd) == DIFFVK_OK);
    if (from_dir && from_fd) EXPECT(same_logits(from_dir, from_fd));
    close(wfd);
  }
  close(cfd);
  close(fd);
  unlink(scratch);
  free(cfg);
  free(w);
  EXPECT(diffvk_model_destroy(from_fd) == DIFFVK_OK);
  EXPECT(diffvk_model_destroy(from_dir) == DIFFVK_OK);
  EXPECT(diffvk_context_destroy(ctx) == DIFFVK_OK);
  return 0;
}

/* ---- the weight format: diffvk_model_options.weights ----------------------------------- */
/* Logits after prefilling the first n bytes of a sentence (caller frees). */
static float* text_logits(diffvk_model* model, size_t n) {
  static const char kText[] = "Debian is a free operating system";
  int32_t t[sizeof kText];
  size_t i;
  diffvk_session* s = NULL;
  uint32_t vocab = 0;
  float* lg;
  for (i = 0; i < n; ++i) t[i] = (unsigned char)kText[i];
  EXPECT(diffvk_model_vocab_size(model, &vocab) == DIFFVK_OK);
  lg = (float*)malloc(sizeof(float) * vocab);
  EXPECT(diffvk_session_create(model, 0, 0, &s) == DIFFVK_OK);
  EXPECT(diffvk_session_prefill(s, t, n, lg, vocab) == DIFFVK_OK);
  EXPECT(diffvk_session_destroy(s) == DIFFVK_OK);
  return lg;
}
static uint32_t argmax(const float* x, uint32_t n) {
  uint32_t i, b = 0;
  for (i = 1; i < n; ++i)
    if (x[i] > x[b]) b = i;
  return b;
}
static diffvk_model* load_weights(diffvk_context* ctx, const char* dir, uint32_t weights) {
  diffvk_model_options mo;
  diffvk_model* m = NULL;
  diffvk_model_default_options(&mo);
  mo.weights = weights;
  EXPECT(diffvk_model_load_with_options(ctx, dir, &mo, &m) == DIFFVK_OK);
  return m;
}

/* dir: the bundled trained model (examples/models/tiny-diff), so that the top-1 token means something. */
static int test_weights(const char* dir) {
  static const size_t kLens[4] = {4, 9, 17, 33};
  /* Max |logit - f16 logit| allowed: the tiny-diff logits span about +-15; Q8_0 rounds each weight to
   * 1/254 of its block's max (measured worst case 0.025 on lavapipe), Q4_0 to 1/16 (measured 0.45 through
   * 4 layers); the bounds (10x and 4.5x) leave room for another GPU's summation order and stay far below
   * what a wrong scale, a swapped nibble or unquantized rows read as blocks give (logits off by whole units). */
  static const float kBound[3] = {0.0f, 0.25f, 2.0f};
  diffvk_context* ctx = make_context();
  diffvk_model_options mo;
  diffvk_model *f16 = NULL, *m = NULL, *bad = NULL;
  uint32_t vocab = 0, w, i, k;
  if (!ctx) return 1;
  diffvk_model_default_options(&mo);
  EXPECT(mo.struct_size == sizeof mo && mo.weights == DIFFVK_WEIGHTS_F16);
  EXPECT(diffvk_model_load_with_options(ctx, dir, NULL, &f16) == DIFFVK_OK); /* NULL = defaults */
  if (!f16) return 1;
  EXPECT(diffvk_model_vocab_size(f16, &vocab) == DIFFVK_OK);
  /* an unknown format is refused and named */
  mo.weights = 3;
  bad = (diffvk_model*)&mo;
  EXPECT(diffvk_model_load_with_options(ctx, dir, &mo, &bad) == DIFFVK_INVALID_ARGUMENT && bad == NULL);
  EXPECT(strstr(diffvk_last_error(), "weights value 3") != NULL);
  mo.weights = 0xffffffffu;
  EXPECT(diffvk_model_load_memory_with_options(ctx, "{}", 2, "", 1, &mo, &bad) == DIFFVK_INVALID_ARGUMENT &&
         bad == NULL);
  EXPECT(strstr(diffvk_last_error(), "4294967295") != NULL);
  EXPECT(diffvk_model_load_fd_with_options(ctx, -1, 0, -1, -1, 0, -1, &mo, &bad) == DIFFVK_INVALID_ARGUMENT &&
         bad == NULL);
  /* an older struct without the field: the default (f16), bit for bit */
  mo.weights = DIFFVK_WEIGHTS_Q4_0;
  mo.struct_size = offsetof(diffvk_model_options, weights);
  EXPECT(diffvk_model_load_with_options(ctx, dir, &mo, &m) == DIFFVK_OK);
  if (m) {
    EXPECT(same_logits(f16, m));
    EXPECT(diffvk_model_destroy(m) == DIFFVK_OK);
  }
  for (w = DIFFVK_WEIGHTS_Q8_0; w <= DIFFVK_WEIGHTS_Q4_0; ++w) {
    float worst = 0;
    int differs = 0;
    m = load_weights(ctx, dir, w);
    if (!m) return 1;
    for (k = 0; k < 4; ++k) {
      float* ref = text_logits(f16, kLens[k]);
      float* q = text_logits(m, kLens[k]);
      for (i = 0; i < vocab; ++i) {
        float d = q[i] - ref[i];
        if (d < 0) d = -d;
        EXPECT(q[i] == q[i] && d < 1e30f); /* finite */
        if (d > worst) worst = d;
        if (q[i] != ref[i]) differs = 1;
      }
      EXPECT(argmax(q, vocab) == argmax(ref, vocab)); /* the same next token */
      free(ref);
      free(q);
    }
    printf("c_api_v1 weights: %s: max |logit - f16| = %.4f (bound %.2f)\n", w == DIFFVK_WEIGHTS_Q8_0 ? "q8_0" : "q4_0",
           (double)worst, (double)kBound[w]);
    EXPECT(differs); /* the option reached the loader: the weights really are quantized */
    EXPECT(worst < kBound[w]);
    EXPECT(diffvk_model_destroy(m) == DIFFVK_OK);
  }
  EXPECT(diffvk_model_destroy(f16) == DIFFVK_OK);
  EXPECT(diffvk_context_destroy(ctx) == DIFFVK_OK);
  return 0;
}

/* The memory and descriptor loaders honour the option too: bit-identical to the directory load. */
static int test_weights_sources(const char* dir) {
  size_t cs = 0, ws = 0;
  char *cfg, *w;
  int cfd, wfd;
  diffvk_context* ctx = make_context();
  diffvk_model_options mo;
  diffvk_model *from_dir, *from_mem = NULL, *from_fd = NULL;
  if (!ctx) return 1;
  if (open_sources(dir, &cfg, &cs, &cfd, &w, &ws, &wfd) != 0) return 1;
  diffvk_model_default_options(&mo);
  mo.weights = DIFFVK_WEIGHTS_Q8_0;
  from_dir = load_weights(ctx, dir, DIFFVK_WEIGHTS_Q8_0);
  EXPECT(diffvk_model_load_memory_with_options(ctx, cfg, cs, w, ws, &mo, &from_mem) == DIFFVK_OK);
  EXPECT(diffvk_model_load_fd_with_options(ctx, cfd, 0, -1, wfd, 0, -1, &mo, &from_fd) == DIFFVK_OK);
  if (!from_dir || !from_mem || !from_fd) return 1;
  EXPECT(same_logits(from_dir, from_mem));
  EXPECT(same_logits(from_dir, from_fd));
  close_sources(cfg, cfd, w, wfd);
  EXPECT(diffvk_model_destroy(from_fd) == DIFFVK_OK);
  EXPECT(diffvk_model_destroy(from_mem) == DIFFVK_OK);
  EXPECT(diffvk_model_destroy(from_dir) == DIFFVK_OK);
  EXPECT(diffvk_context_destroy(ctx) == DIFFVK_OK);
  return 0;
}

/* ---- q4_0_head, quant_decode, quant_prefill and diffvk_model_quant_paths (since 1.1) --------------------- */
/* diffvk_model_options before the fields of 1.1 (what a program built against that header passes). */
typedef struct {
  size_t struct_size;
  uint32_t weights;
} model_options_before_1_1;

/* diffvk_model_quant_paths of m as decode * 10 + prefill (-1 on failure). */
static int paths_of(const diffvk_model* m) {
  uint32_t d = 99, p = 99;
  if (diffvk_model_quant_paths(m, &d, &p) != DIFFVK_OK) return -1;
  return (int)(d * 10 + p);
}

/* dir: tests/data/model_tiny (every width a multiple of 32, lm_head not tied: every linear is quantized). The
 * options reach every loader; forced DEQUANT is reported; bad values are refused by name and load nothing; the
 * struct of before 1.1 gets the defaults whatever its padding holds. The AUTO and INT8_DOT paths against the
 * device are tests/capi/test_c_api_quant.cpp (C++: they need Model::load_stats and the device's features). */
static int test_quant_paths(const char* dir) {
  size_t cs = 0, ws = 0;
  char *cfg, *w;
  int cfd, wfd;
  uint32_t d = 0, p = 0;
  diffvk_context* ctx = make_context();
  diffvk_model_options mo;
  diffvk_model *f16 = NULL, *deq = NULL, *m = NULL, *bad = NULL;
  if (!ctx) return 1;
  if (open_sources(dir, &cfg, &cs, &cfd, &w, &ws, &wfd) != 0) return 1;
  diffvk_model_default_options(&mo);
  EXPECT(mo.q4_0_head == 0 && mo.quant_decode == DIFFVK_QUANT_PATH_AUTO && mo.quant_prefill == DIFFVK_QUANT_PATH_AUTO);
  /* no quantized weights: AUTO for both, whatever was asked */
  mo.quant_decode = mo.quant_prefill = DIFFVK_QUANT_PATH_DEQUANT;
  EXPECT(diffvk_model_load_with_options(ctx, dir, &mo, &f16) == DIFFVK_OK);
  if (!f16) return 1;
  EXPECT(paths_of(f16) == DIFFVK_QUANT_PATH_AUTO * 10 + DIFFVK_QUANT_PATH_AUTO);
  EXPECT(diffvk_model_quant_paths(NULL, &d, &p) == DIFFVK_INVALID_ARGUMENT);
  EXPECT(diffvk_model_quant_paths(f16, NULL, &p) == DIFFVK_INVALID_ARGUMENT && strstr(diffvk_last_error(), "decode"));
  EXPECT(diffvk_model_quant_paths(f16, &d, NULL) == DIFFVK_INVALID_ARGUMENT && strstr(diffvk_last_error(), "prefill"));
  /* unknown values: DIFFVK_INVALID_ARGUMENT naming the field and the value, nothing loaded, from every loader */
  diffvk_model_default_options(&mo);
  mo.weights = DIFFVK_WEIGHTS_Q8_0;
  mo.quant_decode = 3;
  bad = (diffvk_model*)&mo;
  EXPECT(diffvk_model_load_with_options(ctx, dir, &mo, &bad) == DIFFVK_INVALID_ARGUMENT && bad == NULL);
  EXPECT(strstr(diffvk_last_error(), "quant_decode value 3") != NULL);
  mo.quant_decode = DIFFVK_QUANT_PATH_AUTO;
  mo.quant_prefill = 0xffffffffu;
  bad = (diffvk_model*)&mo;
  EXPECT(diffvk_model_load_memory_with_options(ctx, cfg, cs, w, ws, &mo, &bad) == DIFFVK_INVALID_ARGUMENT &&
         bad == NULL);
  EXPECT(strstr(diffvk_last_error(), "quant_prefill value 4294967295") != NULL);
  mo.quant_prefill = DIFFVK_QUANT_PATH_AUTO;
  mo.q4_0_head = 2;
  bad = (diffvk_model*)&mo;
  EXPECT(diffvk_model_load_fd_with_options(ctx, cfd, 0, -1, wfd, 0, -1, &mo, &bad) == DIFFVK_INVALID_ARGUMENT &&
         bad == NULL);
  EXPECT(strstr(diffvk_last_error(), "q4_0_head value 2") != NULL);
  /* forced DEQUANT for both, from every loader: reported, the same logits */
  diffvk_model_default_options(&mo);
  mo.weights = DIFFVK_WEIGHTS_Q8_0;
  mo.quant_decode = mo.quant_prefill = DIFFVK_QUANT_PATH_DEQUANT;
  EXPECT(diffvk_model_load_with_options(ctx, dir, &mo, &deq) == DIFFVK_OK);
  if (!deq) return 1;
  EXPECT(paths_of(deq) == DIFFVK_QUANT_PATH_DEQUANT * 10 + DIFFVK_QUANT_PATH_DEQUANT);
  EXPECT(!same_logits(f16, deq)); /* quantized */
  EXPECT(diffvk_model_load_memory_with_options(ctx, cfg, cs, w, ws, &mo, &m) == DIFFVK_OK);
  if (m) {
    EXPECT(paths_of(m) == DIFFVK_QUANT_PATH_DEQUANT * 10 + DIFFVK_QUANT_PATH_DEQUANT);
    EXPECT(same_logits(deq, m));
    EXPECT(diffvk_model_destroy(m) == DIFFVK_OK);
    m = NULL;
  }
  EXPECT(diffvk_model_load_fd_with_options(ctx, cfd, 0, -1, wfd, 0, -1, &mo, &m) == DIFFVK_OK);
  if (m) {
    EXPECT(paths_of(m) == DIFFVK_QUANT_PATH_DEQUANT * 10 + DIFFVK_QUANT_PATH_DEQUANT);
    EXPECT(same_logits(deq, m));
    EXPECT(diffvk_model_destroy(m) == DIFFVK_OK);
    m = NULL;
  }
  /* one forced, the other the device's choice (DEQUANT or INT8_DOT) */
  mo.quant_prefill = DIFFVK_QUANT_PATH_AUTO;
  EXPECT(diffvk_model_load_with_options(ctx, dir, &mo, &m) == DIFFVK_OK);
  EXPECT(diffvk_model_quant_paths(m, &d, &p) == DIFFVK_OK && d == DIFFVK_QUANT_PATH_DEQUANT &&
         (p == DIFFVK_QUANT_PATH_DEQUANT || p == DIFFVK_QUANT_PATH_INT8_DOT));
  EXPECT(diffvk_model_destroy(m) == DIFFVK_OK);
  m = NULL;
  /* the struct of before 1.1 (struct_size = its size: weights and the padding where q4_0_head lies now): the new
   * fields are the defaults however the padding and the bytes after it are set */
  memset(&mo, 0x7f, sizeof mo); /* q4_0_head, quant_decode and quant_prefill: 0x7f7f7f7f, refused if read */
  mo.struct_size = sizeof(model_options_before_1_1);
  mo.weights = DIFFVK_WEIGHTS_Q4_0;
  EXPECT(diffvk_model_load_with_options(ctx, dir, &mo, &m) == DIFFVK_OK);
  if (m) {
    diffvk_model* want = NULL;
    diffvk_model_default_options(&mo);
    mo.weights = DIFFVK_WEIGHTS_Q4_0;
    EXPECT(diffvk_model_load_with_options(ctx, dir, &mo, &want) == DIFFVK_OK);
    if (want) {
      EXPECT(same_logits(m, want)); /* q4_0_head 0: lm_head Q8_0 */
      EXPECT(paths_of(m) == paths_of(want));
      EXPECT(diffvk_model_destroy(want) == DIFFVK_OK);
    }
    EXPECT(diffvk_model_destroy(m) == DIFFVK_OK);
    m = NULL;
  }
  /* q4_0_head: lm_head in Q4_0 instead of Q8_0 changes the logits under Q4_0, and is ignored under Q8_0 */
  {
    diffvk_model *head8 = NULL, *head4 = NULL;
    diffvk_model_default_options(&mo);
    mo.weights = DIFFVK_WEIGHTS_Q4_0;
    EXPECT(diffvk_model_load_with_options(ctx, dir, &mo, &head8) == DIFFVK_OK);
    mo.q4_0_head = 1;
    EXPECT(diffvk_model_load_with_options(ctx, dir, &mo, &head4) == DIFFVK_OK);
    if (head8 && head4) EXPECT(!same_logits(head8, head4));
    EXPECT(diffvk_model_destroy(head4) == DIFFVK_OK);
    EXPECT(diffvk_model_destroy(head8) == DIFFVK_OK);
    mo.weights = DIFFVK_WEIGHTS_Q8_0;
    mo.quant_decode = mo.quant_prefill = DIFFVK_QUANT_PATH_DEQUANT;
    EXPECT(diffvk_model_load_with_options(ctx, dir, &mo, &m) == DIFFVK_OK);
    if (m) EXPECT(same_logits(deq, m));
    EXPECT(diffvk_model_destroy(m) == DIFFVK_OK);
  }
  close_sources(cfg, cfd, w, wfd);
  EXPECT(diffvk_model_destroy(deq) == DIFFVK_OK);
  EXPECT(diffvk_model_destroy(f16) == DIFFVK_OK);
  EXPECT(diffvk_context_destroy(ctx) == DIFFVK_OK);
  return 0;
}

/* ---- rewind, tokens, prefill_reusing ---------------------------------------- */
static int test_rewind(const char* dir) {
  diffvk_context* ctx;
  diffvk_model* model;
  diffvk_session *s = NULL, *fresh = NULL;
  uint32_t vocab = 0, pos = 0, reused = 99;
  size_t n = 0;
  int32_t held[40];
  int32_t other[12];
  float *want, *lg;
  int i;
  if (open_model(dir, &ctx, &model)) return 1;
  want = logits_buffer(model, &vocab);
  lg = logits_buffer(model, &vocab);
  for (i = 0; i < 12; ++i) other[i] = kPrompt[i];
  other[8] = 90;
  other[9] = 91;
  other[10] = 92;
  other[11] = 93; /* shares 8 tokens with kPrompt */
  EXPECT(diffvk_session_create(model, 64, 0, &s) == DIFFVK_OK);
  EXPECT(diffvk_session_create(model, 64, 0, &fresh) == DIFFVK_OK);
  if (!s || !fresh) return 1;
  /* The reference: prefix, then the new turn, on a session that never held anything else. */
  EXPECT(diffvk_session_prefill(fresh, kPrompt, 8, want, vocab) == DIFFVK_OK);
  EXPECT(diffvk_session_prefill(fresh, other + 8, 4, want, vocab) == DIFFVK_OK);
  /* Prefix, a turn of 12, rewind to the prefix, the new turn: bit-identical. */
  EXPECT(diffvk_session_prefill(s, kPrompt, 8, lg, vocab) == DIFFVK_OK);
  EXPECT(diffvk_session_prefill(s, kPrompt + 8, 12, lg, vocab) == DIFFVK_OK);
  EXPECT(diffvk_session_tokens(s, NULL, 0, &n) == DIFFVK_OK && n == 20);
  EXPECT(diffvk_session_tokens(s, held, 19, &n) == DIFFVK_BUFFER_TOO_SMALL);
  EXPECT(strstr(diffvk_last_error(), "tokens buffer") != NULL);
  EXPECT(diffvk_session_tokens(s, held, 40, &n) == DIFFVK_OK && n == 20 && memcmp(held, kPrompt, 20 * 4) == 0);
  EXPECT(diffvk_session_rewind(s, 21) == DIFFVK_INVALID_ARGUMENT);
  EXPECT(strstr(diffvk_last_error(), "rewind") != NULL);
  EXPECT(diffvk_session_position(s, &pos) == DIFFVK_OK && pos == 20); /* nothing changed */
  EXPECT(diffvk_session_rewind(s, 8) == DIFFVK_OK);
  EXPECT(diffvk_session_position(s, &pos) == DIFFVK_OK && pos == 8);
  EXPECT(diffvk_session_prefill(s, other + 8, 4, lg, vocab) == DIFFVK_OK);
  EXPECT(memcmp(lg, want, sizeof(float) * vocab) == 0);
  /* Prefix reuse: the session holds kPrompt[0..8) + other[8..12); given kPrompt[0..20) it keeps 8. */
  EXPECT(diffvk_session_rewind(s, 8) == DIFFVK_OK);
  EXPECT(diffvk_session_prefill(s, kPrompt + 8, 12, want, vocab) == DIFFVK_OK); /* reference: 8 then 12 */
  EXPECT(diffvk_session_rewind(s, 0) == DIFFVK_OK);
  EXPECT(diffvk_session_prefill(s, other, 8, lg, vocab) == DIFFVK_OK);
  EXPECT(diffvk_session_prefill(s, other + 8, 4, lg, vocab) == DIFFVK_OK);
  EXPECT(diffvk_session_prefill_reusing(s, kPrompt, 20, lg, vocab, &reused) == DIFFVK_OK && reused == 8);
  EXPECT(memcmp(lg, want, sizeof(float) * vocab) == 0);
  /* Bad input is refused before anything changes. */
  EXPECT(diffvk_session_prefill_reusing(s, kPrompt, 65, lg, vocab, &reused) == DIFFVK_CONTEXT_OVERFLOW);
  EXPECT(diffvk_session_prefill_reusing(s, kPrompt, 0, lg, vocab, &reused) == DIFFVK_INVALID_ARGUMENT);
  EXPECT(diffvk_session_prefill_reusing(s, kPrompt, 20, lg, vocab - 1, &reused) == DIFFVK_BUFFER_TOO_SMALL);
  held[0] = 1;
  held[1] = -5;
  EXPECT(diffvk_session_prefill_reusing(s, held, 2, lg, vocab, NULL) == DIFFVK_INVALID_ARGUMENT);
  EXPECT(strstr(diffvk_last_error(), "index 1") != NULL);
  EXPECT(diffvk_session_position(s, &pos) == DIFFVK_OK && pos == 20);
  EXPECT(diffvk_session_rewind(NULL, 0) == DIFFVK_INVALID_ARGUMENT);
  EXPECT(diffvk_session_tokens(s, held, 40, NULL) == DIFFVK_INVALID_ARGUMENT);
  EXPECT(diffvk_session_destroy(fresh) == DIFFVK_OK);
  EXPECT(diffvk_session_destroy(s) == DIFFVK_OK);
  free(want);
  free(lg);
  return close_model(ctx, model);
}

/* ---- saved state ------------------------------------------------------------------- */
static int test_state(const char* dir, const char* scratch) {
  diffvk_context* ctx;
  diffvk_model* model;
  diffvk_session *a = NULL, *b = NULL;
  uint32_t vocab = 0, pos = 0;
  size_t size = 0, size2 = 0;
  unsigned char* buf;
  float *want, *lg;
  if (open_model(dir, &ctx, &model)) return 1;
  want = logits_buffer(model, &vocab);
  lg = logits_buffer(model, &vocab);
  EXPECT(diffvk_session_create(model, 64, 8, &a) == DIFFVK_OK);
  EXPECT(diffvk_session_create(model, 64, 8, &b) == DIFFVK_OK);
  if (!a || !b) return 1;
  EXPECT(diffvk_session_prefill(a, kPrompt, 20, lg, vocab) == DIFFVK_OK);
  /* Buffer: the size first, a too-small buffer refused, then the state. */
  EXPECT(diffvk_session_save_state_buffer(a, NULL, 0, &size) == DIFFVK_OK && size > 80);
  buf = (unsigned char*)malloc(size);
  EXPECT(diffvk_session_save_state_buffer(a, buf, size - 1, &size2) == DIFFVK_BUFFER_TOO_SMALL && size2 == size);
  EXPECT(diffvk_session_save_state_buffer(a, buf, size, &size2) == DIFFVK_OK && size2 == size);
  EXPECT(diffvk_session_save_state(a, scratch) == DIFFVK_OK);
  EXPECT(diffvk_session_decode(a, 65, want, vocab) == DIFFVK_OK);
  /* Restored from the buffer, then from the file: the next decode is bit-identical. */
  EXPECT(diffvk_session_restore_state_buffer(b, buf, size) == DIFFVK_OK);
  EXPECT(diffvk_session_position(b, &pos) == DIFFVK_OK && pos == 20);
  EXPECT(diffvk_session_decode(b, 65, lg, vocab) == DIFFVK_OK);
  EXPECT(memcmp(lg, want, sizeof(float) * vocab) == 0);
  EXPECT(diffvk_session_restore_state(b, scratch) == DIFFVK_OK);
  EXPECT(diffvk_session_decode(b, 65, lg, vocab) == DIFFVK_OK);
  EXPECT(memcmp(lg, want, sizeof(float) * vocab) == 0);
  /* A corrupt state is refused naming the problem, and the session is unchanged. */
  buf[size / 2] ^= 1;
  EXPECT(diffvk_session_restore_state_buffer(b, buf, size) == DIFFVK_INVALID_ARGUMENT);
  EXPECT(strstr(diffvk_last_error(), "checksum") != NULL);
  EXPECT(diffvk_session_position(b, &pos) == DIFFVK_OK && pos == 21);
  EXPECT(diffvk_session_restore_state_buffer(b, buf, 7) == DIFFVK_INVALID_ARGUMENT);
  EXPECT(diffvk_session_restore_state_buffer(b, NULL, 7) == DIFFVK_INVALID_ARGUMENT);
  EXPECT(diffvk_session_save_state(a, NULL) == DIFFVK_INVALID_ARGUMENT);
  EXPECT(diffvk_session_save_state_buffer(a, buf, size, NULL) == DIFFVK_INVALID_ARGUMENT);
  EXPECT(diffvk_session_destroy(a) == DIFFVK_OK);
  EXPECT(diffvk_session_destroy(b) == DIFFVK_OK);
  remove(scratch);
  free(buf);
  free(want);
  free(lg);
  return close_model(ctx, model);
}

/* ---- sampler options ---------------------------------------------------------------- */
static int test_sampler(const char* unused) {
  (void)unused;
  diffvk_sampler_options o;
  diffvk_sampler* s = NULL;
  const float logits[4] = {2.0f, 1.9f, -1.0f, -1.2f};
  int32_t t = -1;
  diffvk_sampler_default_options(&o);
  EXPECT(o.struct_size == sizeof o && o.repeat_penalty == 1.0f && o.penalty_last_n == 64 && o.min_p == 0.0f);
  o.repeat_penalty = 2.0f;
  EXPECT(diffvk_sampler_create_with_options(&o, &s) == DIFFVK_OK);
  if (!s) return 1;
  EXPECT(diffvk_sampler_sample(s, logits, 4, &t) == DIFFVK_OK && t == 0);
  EXPECT(diffvk_sampler_accept(s, 0) == DIFFVK_OK);
  EXPECT(diffvk_sampler_sample(s, logits, 4, &t) == DIFFVK_OK && t == 1); /* 2 / 2 < 1.9 */
  EXPECT(diffvk_sampler_destroy(s) == DIFFVK_OK);
  o.min_p = 2.0f;
  EXPECT(diffvk_sampler_create_with_options(&o, &s) == DIFFVK_INVALID_ARGUMENT);
  EXPECT(strstr(diffvk_last_error(), "min_p") != NULL);
  o.struct_size = sizeof o + 8;
  EXPECT(diffvk_sampler_create_with_options(&o, &s) == DIFFVK_INVALID_ARGUMENT);
  EXPECT(diffvk_sampler_create_with_options(NULL, &s) == DIFFVK_OK); /* NULL: the defaults */
  EXPECT(diffvk_sampler_accept(NULL, 1) == DIFFVK_INVALID_ARGUMENT);
  EXPECT(diffvk_sampler_destroy(s) == DIFFVK_OK);
  return 0;
}

/* ---- generation: streaming, stop strings, cancel ------------------------------------ */
struct collected {
  char text[512];
  size_t size;
  int pieces, cancel_after;
};
static int collect(const char* piece, size_t size, void* user) {
  struct collected* c = (struct collected*)user;
  if (c->size + size <= sizeof c->text) memcpy(c->text + c->size, piece, size);
  c->size += size;
  c->pieces++;
  return c->cancel_after == 0 || c->pieces < c->cancel_after;
}
static int test_generate(const char* dir) {
  diffvk_context* ctx;
  diffvk_model* model;
  diffvk_session* s = NULL;
  diffvk_sampler* greedy = NULL;
  diffvk_tokenizer* tok = NULL;
  diffvk_generate_options o;
  diffvk_generate_result r;
  struct collected all, part;
  char stop[4] = {0};
  const char* stops[1];
  const char* bad[2] = {"", "x"};
  size_t at = 0, k;
  uint32_t pos = 0;
  if (open_model(dir, &ctx, &model)) return 1;
  EXPECT(diffvk_tokenizer_load(dir, &tok) == DIFFVK_OK);
  EXPECT(diffvk_sampler_create(0.0f, 0, 1.0f, 0, &greedy) == DIFFVK_OK);
  if (!tok || !greedy) return 1;
  EXPECT(diffvk_session_create(model, 64, 8, &s) == DIFFVK_OK);
  if (!s) return 1;
  memset(&r, 0, sizeof r);
  r.struct_size = sizeof r;
  diffvk_generate_default_options(&o);
  EXPECT(o.struct_size == sizeof o && o.max_tokens == 64 && o.eos_token == -2 && o.stop_count == 0 &&
         o.on_text == NULL);
  /* No stop string: max_tokens tokens, the text streamed in pieces. */
  memset(&all, 0, sizeof all);
  o.max_tokens = 16;
  o.eos_token = -1;
  o.on_text = collect;
  o.user = &all;
  EXPECT(diffvk_session_generate(s, greedy, tok, kPrompt, 12, &o, &r) == DIFFVK_OK);
  EXPECT(r.stop_reason == DIFFVK_STOP_MAX_TOKENS && r.tokens == 16 && r.stop_index == -1 && r.reused == 0);
  EXPECT(diffvk_session_position(s, &pos) == DIFFVK_OK && pos == 12 + 15); /* every sampled token but the last */
  EXPECT(all.size > 0 && all.size <= sizeof all.text);
  /* Speculative decoding with prompt-lookup drafts (the 1.2 layout): the same text, the same session. */
  memset(&part, 0, sizeof part);
  o.user = &part;
  o.draft = DIFFVK_DRAFT_LOOKUP;
  EXPECT(diffvk_session_reset(s) == DIFFVK_OK);
  EXPECT(diffvk_session_generate(s, greedy, tok, kPrompt, 12, &o, &r) == DIFFVK_OK);
  EXPECT(r.stop_reason == DIFFVK_STOP_MAX_TOKENS && r.tokens == 16 && r.accepted <= r.drafted);
  EXPECT(part.size == all.size && memcmp(part.text, all.text, all.size) == 0);
  EXPECT(diffvk_session_position(s, &pos) == DIFFVK_OK && pos == 12 + 15);
  o.draft = 7;
  EXPECT(diffvk_session_generate(s, greedy, tok, kPrompt, 12, &o, &r) == DIFFVK_INVALID_ARGUMENT);
  EXPECT(strstr(diffvk_last_error(), "options->draft") != NULL);
  o.draft = DIFFVK_DRAFT_LOOKUP;
  o.draft_k = 0;
  EXPECT(diffvk_session_generate(s, greedy, tok, kPrompt, 12, &o, &r) == DIFFVK_INVALID_ARGUMENT);
  o.draft = DIFFVK_DRAFT_NONE;
  o.draft_k = 8;
  o.user = &all;
  /* A stop string of three bytes from the middle of that text (the bundled tokenizer: one byte per token,
   * so it spans tokens): the same prompt again on the reset session stops there and emits only what
   * precedes it. */
  for (k = 2; k + 3 <= all.size && !stop[0]; ++k)
    if (all.text[k] && all.text[k + 1] && all.text[k + 2]) memcpy(stop, all.text + k, 3);
  EXPECT(stop[0] != 0);
  while (at + 3 <= all.size && memcmp(all.text + at, stop, 3) != 0) ++at; /* its first occurrence */
  stops[0] = stop;
  memset(&part, 0, sizeof part);
  o.stop = stops;
  o.stop_count = 1;
  o.user = &part;
  EXPECT(diffvk_session_reset(s) == DIFFVK_OK);
  EXPECT(diffvk_session_generate(s, greedy, tok, kPrompt, 12, &o, &r) == DIFFVK_OK);
  EXPECT(r.stop_reason == DIFFVK_STOP_STRING && r.stop_index == 0 && r.reused == 0);
  EXPECT(part.size == at && memcmp(part.text, all.text, at) == 0);
  /* Cancel from the callback after its first piece. */
  memset(&part, 0, sizeof part);
  part.cancel_after = 1;
  o.stop_count = 0;
  EXPECT(diffvk_session_generate(s, greedy, tok, kPrompt, 12, &o, &r) == DIFFVK_OK);
  EXPECT(r.stop_reason == DIFFVK_STOP_CANCELLED && part.pieces == 1 && r.reused == 11); /* the prompt was held */
  /* Bad options are refused before any work, naming the field. */
  EXPECT(diffvk_session_position(s, &pos) == DIFFVK_OK);
  o.stop = bad;
  o.stop_count = 2;
  EXPECT(diffvk_session_generate(s, greedy, tok, kPrompt, 12, &o, &r) == DIFFVK_INVALID_ARGUMENT);
  EXPECT(strstr(diffvk_last_error(), "stop string 0") != NULL);
  o.stop_count = 17;
  EXPECT(diffvk_session_generate(s, greedy, tok, kPrompt, 12, &o, &r) == DIFFVK_INVALID_ARGUMENT);
  EXPECT(strstr(diffvk_last_error(), "stop_count") != NULL);
  o.stop_count = 0;
  o.max_tokens = 60;
  EXPECT(diffvk_session_generate(s, greedy, tok, kPrompt, 12, &o, &r) == DIFFVK_CONTEXT_OVERFLOW);
  o.max_tokens = 4;
  o.eos_token = -3;
  EXPECT(diffvk_session_generate(s, greedy, tok, kPrompt, 12, &o, &r) == DIFFVK_INVALID_ARGUMENT);
  o.eos_token = -1;
  EXPECT(diffvk_session_generate(s, greedy, tok, kPrompt, 0, &o, &r) == DIFFVK_INVALID_ARGUMENT);
  EXPECT(diffvk_session_generate(s, greedy, NULL, kPrompt, 12, &o, &r) == DIFFVK_INVALID_ARGUMENT);
  EXPECT(diffvk_session_generate(s, NULL, tok, kPrompt, 12, &o, &r) == DIFFVK_INVALID_ARGUMENT);
  o.struct_size = sizeof o + 8;
  EXPECT(diffvk_session_generate(s, greedy, tok, kPrompt, 12, &o, &r) == DIFFVK_INVALID_ARGUMENT);
  o.struct_size = sizeof o;
  r.struct_size = 0;
  EXPECT(diffvk_session_generate(s, greedy, tok, kPrompt, 12, &o, &r) == DIFFVK_INVALID_ARGUMENT);
  EXPECT(strstr(diffvk_last_error(), "result->struct_size") != NULL);
  r.struct_size = sizeof r;
  {
    uint32_t pos2 = 0;
    EXPECT(diffvk_session_position(s, &pos2) == DIFFVK_OK && pos2 == pos);
  }
  /* Context shift: the same 60 new tokens run past the context of 64 under the shift
   * policy; the history keeps the whole conversation; shift and prefill_shifting directly. */
  o.overflow = 2;
  EXPECT(diffvk_session_generate(s, greedy, tok, kPrompt, 12, &o, &r) == DIFFVK_INVALID_ARGUMENT);
  EXPECT(strstr(diffvk_last_error(), "overflow") != NULL);
  o.overflow = DIFFVK_OVERFLOW_SHIFT;
  o.keep = 4;
  o.max_tokens = 100;
  o.on_text = NULL;
  EXPECT(diffvk_session_reset(s) == DIFFVK_OK);
  EXPECT(diffvk_session_generate(s, greedy, tok, kPrompt, 12, &o, &r) == DIFFVK_OK);
  EXPECT(r.tokens == 100 && r.shifts >= 2 && r.stop_reason == DIFFVK_STOP_MAX_TOKENS);
  {
    size_t n_hist = 0, n_held = 0;
    int32_t hist[128];
    float* logits = (float*)malloc(sizeof(float) * 256);
    uint32_t kept = 0;
    EXPECT(diffvk_session_history(s, NULL, 0, &n_hist) == DIFFVK_OK && n_hist == 12 + 99);
    EXPECT(diffvk_session_history(s, hist, 128, &n_hist) == DIFFVK_OK &&
           memcmp(hist, kPrompt, sizeof(int32_t) * 12) == 0);
    EXPECT(diffvk_session_tokens(s, NULL, 0, &n_held) == DIFFVK_OK && n_held <= 64);
    EXPECT(diffvk_session_shift(s, 4, 0) == DIFFVK_INVALID_ARGUMENT);
    EXPECT(diffvk_session_shift(s, 4, (uint32_t)n_held) == DIFFVK_INVALID_ARGUMENT);
    EXPECT(diffvk_session_shift(s, 4, 10) == DIFFVK_OK);
    EXPECT(diffvk_session_position(s, &pos) == DIFFVK_OK && pos == n_held - 10);
    /* The conversation so far plus one token: only that token runs. */
    hist[n_hist] = 7;
    EXPECT(logits != NULL);
    if (logits) {
      EXPECT(diffvk_session_prefill_shifting(s, hist, n_hist + 1, 4, logits, 256, &kept) == DIFFVK_OK && kept == pos);
      EXPECT(diffvk_session_prefill_shifting(s, hist, n_hist + 1, 64, logits, 256, &kept) == DIFFVK_INVALID_ARGUMENT);
    }
    free(logits);
  }
  EXPECT(diffvk_session_destroy(s) == DIFFVK_OK);
  EXPECT(diffvk_sampler_destroy(greedy) == DIFFVK_OK);
  EXPECT(diffvk_tokenizer_free(tok) == DIFFVK_OK);
  return close_model(ctx, model);
}

/* ---- tokenizer.json / tokenizer.model from memory and from descriptor ranges ----------------- */
/* The same ids and decoded bytes from both tokenizers on a few texts (with and without special tokens). */
static int same_tokens(const diffvk_tokenizer* a, const diffvk_tokenizer* b) {
  static const char* const kTexts[4] = {"Hello world! <|eot_id|> 123", "  spaces\tand\nlines ", "",
                                        "\xc3\xa9t\xc3\xa9 \xe6\x9d\xb1\xe4\xba\xac \xf0\x9f\x99\x82"};
  int32_t x[256], y[256];
  char bx[1024], by[1024];
  size_t i, nx = 0, ny = 0, lx = 0, ly = 0;
  int special, same = 1;
  uint32_t va = 0, vb = 0;
  int32_t ba = 0, bb = 0, ea = 0, eb = 0;
  EXPECT(diffvk_tokenizer_vocab_size(a, &va) == DIFFVK_OK && diffvk_tokenizer_vocab_size(b, &vb) == DIFFVK_OK);
  EXPECT(diffvk_tokenizer_bos(a, &ba) == DIFFVK_OK && diffvk_tokenizer_bos(b, &bb) == DIFFVK_OK);
  EXPECT(diffvk_tokenizer_eos(a, &ea) == DIFFVK_OK && diffvk_tokenizer_eos(b, &eb) == DIFFVK_OK);
  if (va != vb || ba != bb || ea != eb) return 0;
  for (i = 0; i < 4; ++i)
    for (special = 0; special < 2; ++special) {
      EXPECT(diffvk_tokenizer_encode(a, kTexts[i], strlen(kTexts[i]), special, x, 256, &nx) == DIFFVK_OK);
      EXPECT(diffvk_tokenizer_encode(b, kTexts[i], strlen(kTexts[i]), special, y, 256, &ny) == DIFFVK_OK);
      if (nx != ny || memcmp(x, y, nx * sizeof(int32_t)) != 0) same = 0;
      EXPECT(diffvk_tokenizer_decode(a, x, nx, bx, sizeof bx, &lx) == DIFFVK_OK);
      EXPECT(diffvk_tokenizer_decode(b, x, nx, by, sizeof by, &ly) == DIFFVK_OK);
      if (lx != ly || memcmp(bx, by, lx) != 0) same = 0;
    }
  return same;
}

/* tok_dir: tests/data/tokenizer (llama3-bpe: tokenizer.json + tokenizer_config.json; spm-unigram: tokenizer.model). */
static int test_tokenizer_sources(const char* tok_dir, const char* scratch) {
  char path[4096];
  size_t js = 0, ts = 0, ms = 0;
  char *json, *tc, *model;
  const char junk[8] = "junk!..";
  int64_t joff, toff, moff;
  int fd;
  FILE* f;
  diffvk_tokenizer *bpe_dir = NULL, *spm_dir = NULL, *t = NULL, *bad = NULL;
  snprintf(path, sizeof path, "%s/llama3-bpe/tokenizer.json", tok_dir);
  json = read_whole(path, &js);
  snprintf(path, sizeof path, "%s/llama3-bpe/tokenizer_config.json", tok_dir);
  tc = read_whole(path, &ts);
  snprintf(path, sizeof path, "%s/spm-unigram/tokenizer.model", tok_dir);
  model = read_whole(path, &ms);
  EXPECT(json && tc && model);
  if (!json || !tc || !model) return 1;
  snprintf(path, sizeof path, "%s/llama3-bpe", tok_dir);
  EXPECT(diffvk_tokenizer_load(path, &bpe_dir) == DIFFVK_OK);
  snprintf(path, sizeof path, "%s/spm-unigram", tok_dir);
  EXPECT(diffvk_tokenizer_load(path, &spm_dir) == DIFFVK_OK);
  if (!bpe_dir || !spm_dir) return 1;

  /* memory: the directory's tokenizer */
  EXPECT(diffvk_tokenizer_load_json_memory(json, js, tc, ts, NULL, 0, &t) == DIFFVK_OK);
  if (t) {
    int32_t bos = 0;
    EXPECT(same_tokens(bpe_dir, t));
    EXPECT(diffvk_tokenizer_bos(t, &bos) == DIFFVK_OK && bos == 656); /* from tokenizer_config.json */
    EXPECT(diffvk_tokenizer_free(t) == DIFFVK_OK);
  }
  t = NULL;
  EXPECT(diffvk_tokenizer_load_sentencepiece_memory(model, ms, &t) == DIFFVK_OK);
  if (t) {
    EXPECT(same_tokens(spm_dir, t));
    EXPECT(diffvk_tokenizer_free(t) == DIFFVK_OK);
  }
  /* descriptor ranges of one file holding all three between other bytes (an APK's uncompressed assets) */
  f = fopen(scratch, "wb");
  EXPECT(f != NULL);
  if (!f) return 1;
  fwrite(junk, 1, 7, f);
  joff = 7;
  fwrite(json, 1, js, f);
  fwrite(junk, 1, 3, f);
  toff = joff + (int64_t)js + 3;
  fwrite(tc, 1, ts, f);
  fwrite(junk, 1, 5, f);
  moff = toff + (int64_t)ts + 5;
  fwrite(model, 1, ms, f);
  fwrite(junk, 1, 8, f);
  fclose(f);
  fd = open(scratch, O_RDONLY);
  EXPECT(fd >= 0);
  t = NULL;
  EXPECT(diffvk_tokenizer_load_json_fd(fd, joff, (int64_t)js, fd, toff, (int64_t)ts, -1, 0, 0, &t) == DIFFVK_OK);
  if (t) {
    EXPECT(same_tokens(bpe_dir, t));
    EXPECT(diffvk_tokenizer_free(t) == DIFFVK_OK);
  }
  t = NULL;
  EXPECT(diffvk_tokenizer_load_sentencepiece_fd(fd, moff, (int64_t)ms, &t) == DIFFVK_OK);
  if (t) {
    EXPECT(same_tokens(spm_dir, t));
    EXPECT(diffvk_tokenizer_free(t) == DIFFVK_OK);
  }
  EXPECT(lseek(fd, 0, SEEK_CUR) == 0); /* pread: the descriptor's offset did not move */

  /* misuse and hostile input: a status, the message naming the file, *out left NULL */
  EXPECT(diffvk_tokenizer_load_json_memory(json, js, NULL, 0, NULL, 0, NULL) == DIFFVK_INVALID_ARGUMENT);
  EXPECT(diffvk_tokenizer_load_sentencepiece_memory(model, ms, NULL) == DIFFVK_INVALID_ARGUMENT);
  EXPECT(diffvk_tokenizer_load_json_fd(fd, joff, (int64_t)js, -1, 0, 0, -1, 0, 0, NULL) == DIFFVK_INVALID_ARGUMENT);
  EXPECT(diffvk_tokenizer_load_sentencepiece_fd(fd, moff, (int64_t)ms, NULL) == DIFFVK_INVALID_ARGUMENT);
  bad = (diffvk_tokenizer*)&bad;
  EXPECT(diffvk_tokenizer_load_json_memory(NULL, 0, NULL, 0, NULL, 0, &bad) == DIFFVK_INVALID_ARGUMENT && bad == NULL);
  EXPECT(strstr(diffvk_last_error(), "tokenizer_json is NULL") != NULL);
  EXPECT(diffvk_tokenizer_load_sentencepiece_memory(NULL, 4, &bad) == DIFFVK_INVALID_ARGUMENT && bad == NULL);
  EXPECT(diffvk_tokenizer_load_json_memory(json, js, NULL, 3, NULL, 0, &bad) == DIFFVK_INVALID_ARGUMENT && bad == NULL);
  EXPECT(strstr(diffvk_last_error(), "tokenizer_config.json (memory): the buffer is NULL") != NULL);
  EXPECT(diffvk_tokenizer_load_json_memory(json, js / 2, NULL, 0, NULL, 0, &bad) == DIFFVK_FORMAT_ERROR && bad == NULL);
  EXPECT(strstr(diffvk_last_error(), "tokenizer.json (memory): invalid JSON") != NULL);
  EXPECT(diffvk_tokenizer_load_json_memory(json, js, tc, ts / 2, NULL, 0, &bad) == DIFFVK_FORMAT_ERROR && bad == NULL);
  EXPECT(strstr(diffvk_last_error(), "tokenizer_config.json (memory)") != NULL);
  EXPECT(diffvk_tokenizer_load_json_memory(json, 0, NULL, 0, NULL, 0, &bad) == DIFFVK_FORMAT_ERROR && bad == NULL);
  EXPECT(diffvk_tokenizer_load_json_memory(model, ms, NULL, 0, NULL, 0, &bad) == DIFFVK_FORMAT_ERROR && bad == NULL);
  EXPECT(diffvk_tokenizer_load_sentencepiece_memory(json, js, &bad) == DIFFVK_FORMAT_ERROR && bad == NULL);
  EXPECT(strstr(diffvk_last_error(), "tokenizer.model (memory)") != NULL);
  EXPECT(diffvk_tokenizer_load_sentencepiece_memory(model, 0, &bad) == DIFFVK_FORMAT_ERROR && bad == NULL);
  EXPECT(diffvk_tokenizer_load_json_fd(-1, 0, 10, -1, 0, 0, -1, 0, 0, &bad) == DIFFVK_INVALID_ARGUMENT && bad == NULL);
  EXPECT(diffvk_tokenizer_load_json_fd(fd, joff, (int64_t)js, -7, 0, 0, -1, 0, 0, &bad) == DIFFVK_INVALID_ARGUMENT &&
         bad == NULL);
  EXPECT(strstr(diffvk_last_error(), "tokenizer_config.json (fd -7)") != NULL);
  EXPECT(diffvk_tokenizer_load_json_fd(fd, joff, -2, -1, 0, 0, -1, 0, 0, &bad) == DIFFVK_INVALID_ARGUMENT &&
         bad == NULL);
  EXPECT(diffvk_tokenizer_load_json_fd(fd, -1, 10, -1, 0, 0, -1, 0, 0, &bad) == DIFFVK_INVALID_ARGUMENT && bad == NULL);
  EXPECT(diffvk_tokenizer_load_json_fd(fd, joff + 1, (int64_t)js, -1, 0, 0, -1, 0, 0, &bad) == DIFFVK_FORMAT_ERROR &&
         bad == NULL);
  EXPECT(diffvk_tokenizer_load_sentencepiece_fd(fd, moff, (int64_t)ms + 64, &bad) == DIFFVK_IO_ERROR &&
         bad == NULL); /* past the end */
  EXPECT(strstr(diffvk_last_error(), "tokenizer.model (fd") != NULL);
  EXPECT(diffvk_tokenizer_load_sentencepiece_fd(fd, moff + (int64_t)ms + 100, -1, &bad) == DIFFVK_IO_ERROR &&
         bad == NULL);
  EXPECT(diffvk_tokenizer_load_sentencepiece_fd(-1, 0, -1, &bad) == DIFFVK_INVALID_ARGUMENT && bad == NULL);
  EXPECT(diffvk_tokenizer_load_sentencepiece_fd(fd, 0, 7, &bad) == DIFFVK_FORMAT_ERROR && bad == NULL); /* "junk!.." */
  close(fd);
  unlink(scratch);
  free(json);
  free(tc);
  free(model);
  EXPECT(diffvk_tokenizer_free(spm_dir) == DIFFVK_OK);
  EXPECT(diffvk_tokenizer_free(bpe_dir) == DIFFVK_OK);
  return 0;
}

/* ---- chat templates ------------------------------------------------------------------- */
static int test_chat_template(const char* data_dir) {
  diffvk_chat_template* t = NULL;
  const diffvk_chat_message m[2] = {{"system", "Be brief."}, {"user", "Hi"}};
  const diffvk_chat_message bad[1] = {{"user", NULL}};
  const char* want = "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n";
  const char* family = NULL;
  char text[256], eot[16];
  size_t len = 0;
  (void)data_dir;
  EXPECT(diffvk_chat_template_builtin("chatml", NULL, NULL, &t) == DIFFVK_OK);
  if (!t) return 1;
  EXPECT(diffvk_chat_template_family(t, &family) == DIFFVK_OK && family && strcmp(family, "chatml") == 0);
  EXPECT(diffvk_chat_template_apply(t, m, 2, 1, NULL, 0, &len) == DIFFVK_BUFFER_TOO_SMALL && len == strlen(want));
  EXPECT(diffvk_chat_template_apply(t, m, 2, 1, text, sizeof text, &len) == DIFFVK_OK && len == strlen(want));
  EXPECT(memcmp(text, want, strlen(want)) == 0);
  EXPECT(diffvk_chat_template_end_of_turn(t, eot, sizeof eot, &len) == DIFFVK_OK && strcmp(eot, "<|im_end|>") == 0 &&
         len == 10);
  EXPECT(diffvk_chat_template_end_of_turn(t, eot, 10, &len) == DIFFVK_BUFFER_TOO_SMALL && len == 10);
  EXPECT(diffvk_chat_template_apply(t, bad, 1, 1, text, sizeof text, &len) == DIFFVK_INVALID_ARGUMENT);
  EXPECT(strstr(diffvk_last_error(), "messages[0].content") != NULL);
  EXPECT(diffvk_chat_template_apply(t, m, 0, 1, text, sizeof text, &len) == DIFFVK_INVALID_ARGUMENT);
  EXPECT(diffvk_chat_template_free(t) == DIFFVK_OK);
  EXPECT(diffvk_chat_template_free(t) == DIFFVK_INVALID_ARGUMENT);
  EXPECT(diffvk_chat_template_builtin("vicuna", NULL, NULL, &t) == DIFFVK_INVALID_ARGUMENT && t == NULL);
  EXPECT(diffvk_chat_template_load("/nonexistent-dir", &t) == DIFFVK_INVALID_ARGUMENT && t == NULL);
  EXPECT(strstr(diffvk_last_error(), "no chat template") != NULL);
  { /* tokenizer_config.json's bytes (an Android asset); the recognised families: the C++ tests */
    static const char odd[] = "{\"chat_template\": \"{{ messages }}\"}";
    EXPECT(diffvk_chat_template_load_memory(odd, sizeof odd - 1, &t) == DIFFVK_UNSUPPORTED && t == NULL);
    EXPECT(diffvk_chat_template_load_memory(NULL, 5, &t) == DIFFVK_INVALID_ARGUMENT && t == NULL);
    EXPECT(diffvk_chat_template_load_memory("{}", 2, &t) == DIFFVK_INVALID_ARGUMENT && t == NULL);
    EXPECT(strstr(diffvk_last_error(), "no chat template") != NULL);
    EXPECT(diffvk_chat_template_load_memory("{}", 2, NULL) == DIFFVK_INVALID_ARGUMENT);
  }
  return 0;
}

/* The checks by name: c_api_v1 <name> <arg> (one), c_api_v1 <name> <arg> <scratch file> (two). */
static const struct {
  const char* name;
  int (*one)(const char* arg);
  int (*two)(const char* arg, const char* scratch);
} kTests[] = {
    {"version", test_version, NULL},
    {"options", test_options, NULL},
    {"cancel", test_cancel, NULL},
    {"log", test_log, NULL},
    {"load_memory", test_load_memory, NULL},
    {"gguf", test_gguf, NULL},
    {"load_fd", NULL, test_load_fd},
    {"weights", test_weights, NULL},
    {"weights_sources", test_weights_sources, NULL},
    {"quant_paths", test_quant_paths, NULL},
    {"rewind", test_rewind, NULL},
    {"sampler", test_sampler, NULL},
    {"default_options", test_default_options, NULL},
    {"generate", test_generate, NULL},
    {"chat_template", test_chat_template, NULL},
    {"state", NULL, test_state},
    {"tokenizer_sources", NULL, test_tokenizer_sources},
};

int main(int argc, char** argv) {
  int rc = 2;
  size_t i;
  const size_t n = sizeof kTests / sizeof kTests[0];
  if (argc < 3) {
    fprintf(stderr,
            "usage: %s <version|options|cancel|log|load_memory|load_fd|gguf|weights|weights_sources|quant_paths|...> "
            "<model dir or .gguf> [scratch file]\n",
            argv[0]);
    return 2;
  }
  for (i = 0; i < n; ++i)
    if (!strcmp(argv[1], kTests[i].name) && (kTests[i].one || argc > 3)) break;
  if (i == n)
    fprintf(stderr, "c_api_v1: unknown test %s\n", argv[1]);
  else
    rc = kTests[i].one ? kTests[i].one(argv[2]) : kTests[i].two(argv[2], argv[3]);
  if (rc == 0 && failures == 0) {
    printf("c_api_v1 %s: all checks passed\n", argv[1]);
    return 0;
  }
  fprintf(stderr, "c_api_v1 %s: %d failure(s)\n", argv[1], failures);
  return 1;
}
