/* diffvk_bench — C entry point of the on-device benchmark (library diffvk_bench, not the core diffvk).
 * Shared: libdiffvk_bench.so.1 (CMake target diffvk::diffvk_bench_shared) exports this header's functions
 * AND all of diffvk.h: link it instead of libdiffvk.so (not both: each library keeps its own handles).
 * Static: libdiffvk_bench.a with libdiffvk.a (diffvk::diffvk_bench). Same ABI rules as diffvk.h, checked
 * by .ci/abi-check against abi/libdiffvk_bench.abi.
 * One call runs the preset on the context's device and returns the JSON document `diffvk bench --json`
 * writes (ceilings, then the attention cases, each checked before it is timed; or, with model_dir or shape,
 * the whole-model benchmark). Errors as in diffvk.h: a status code and diffvk_last_error().
 *
 * struct_size: set by diffvk_bench_default_options. A caller compiled against an older, shorter
 * struct passes its smaller size and the fields it lacks take their defaults; a size larger than this
 * library knows is DIFFVK_INVALID_ARGUMENT. The run blocks the calling thread; the callbacks are
 * called on it. fp32_fallback in the report assumes the context was created with automatic precision. */
#ifndef DIFFVK_BENCH_H
#define DIFFVK_BENCH_H

#include "diffvk/diffvk.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct diffvk_bench_options {
  size_t struct_size;    /* sizeof(diffvk_bench_options); set by diffvk_bench_default_options */
  const char* preset;    /* "default" or "phone" */
  const char* model_dir; /* NULL: attention/copy cases only */
  double budget_seconds; /* 0 = the preset's */
  const char* plot_path; /* NULL = no PNG */
  diffvk_abort_fn abort_cb;
  void* abort_user; /* nonzero return = cancel */
  diffvk_log_fn log_cb;
  void* log_user;
  const char* variant; /* attention cases: "v1", "v2" or "both" (NULL = both; since 1.1) */
  /* The whole-model benchmark on a published model's exact shape with random weights made on the device (no
   * file): "diffllama-1b", ... (`diffvk bench --help` lists them); NULL = none. Not with model_dir. Since 1.1. */
  const char* shape;
  /* Since 1.2. The whole-model benchmark also measures speculative decoding: "lookup" (prompt-lookup drafts) or
   * "draft:DIR" (a draft model's directory); NULL = none. draft_k: drafted tokens per pass, 1 ... 16; 0 = 7 (a pass of
   * 8 rows). */
  const char* speculate;
  uint32_t draft_k;
} diffvk_bench_options;

/* Defaults: struct_size set, preset "default", everything else NULL / 0. A function-like macro like the
 * *_default_options of diffvk.h (see VERSIONING there): the exported function fills only the 1.0 struct (up
 * to log_user); the macro passes sizeof *(out) to diffvk_bench_default_options_sized. */
DIFFVK_API void diffvk_bench_default_options(diffvk_bench_options* out);
/* The defaults of the largest layout of diffvk_bench_options this library knows that fits in size bytes
 * (layouts: 1.0's up to log_user; 1.1's up to shape; 1.2's up to draft_k); struct_size = that layout's size. Nothing
 * past it is written. out NULL or size below the 1.0 struct: does nothing (since 1.1). */
DIFFVK_API void diffvk_bench_default_options_sized(diffvk_bench_options* out, size_t size);

/* Runs the benchmark on `context`'s device. On DIFFVK_OK *json_out is a NUL-terminated string to free
 * with diffvk_bench_free_string; on any error it is NULL. abort_cb is consulted between cases and
 * between timed repetitions: a nonzero return stops the run with DIFFVK_CANCELLED. log_cb receives
 * the progress (level 2 info: stages and the report's text lines, 3 debug: steps) and warnings (1). */
DIFFVK_API diffvk_status diffvk_bench_run(diffvk_context* context, const diffvk_bench_options* opts, char** json_out);

/* Frees a string diffvk_bench_run returned; NULL is allowed. */
DIFFVK_API void diffvk_bench_free_string(char* s);

/* After the declarations (since 1.1): the caller's size travels with the call. */
#define diffvk_bench_default_options(o) diffvk_bench_default_options_sized((o), sizeof *(o))

#ifdef __cplusplus
}
#endif
#endif /* DIFFVK_BENCH_H */
