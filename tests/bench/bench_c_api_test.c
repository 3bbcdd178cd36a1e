/* diffvk_bench's C entry point, from C: misuse gives status codes, a phone-preset run with a tiny
 * budget returns a JSON document with the preset, the cool-down and the thermal readings, and an
 * abort callback that fires after the first case stops the run quickly with DIFFVK_CANCELLED.
 * usage: diffvk_bench_c_api_test */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "diffvk/diffvk.h"
#include "diffvk/diffvk_bench.h"

#include "../common/c_expect.h"
#include "../common/c_canary.h"

/* diffvk_bench_options of the 1.0 header, as a program built against it declares it. */
typedef struct {
  size_t struct_size;
  const char* preset;
  const char* model_dir;
  double budget_seconds;
  const char* plot_path;
  diffvk_abort_fn abort_cb;
  void* abort_user;
  diffvk_log_fn log_cb;
  void* log_user;
} bench_options_1_0;
static void sized_bench(void* o, size_t n) { diffvk_bench_default_options_sized((diffvk_bench_options*)o, n); }

/* The defaults functions and the caller's size (since 1.1; diffvk.h VERSIONING): the exported 1.0 function
 * (through a pointer: no macro) writes the 1.0 struct only, the sized one each known layout. */
static void check_default_options(void) {
  void (*bench_1_0)(diffvk_bench_options*) = diffvk_bench_default_options;
  const size_t layouts[3] = {sizeof(bench_options_1_0), offsetof(diffvk_bench_options, speculate),
                             sizeof(diffvk_bench_options)};
  bench_options_1_0* o = (bench_options_1_0*)canary_fill();
  EXPECT(sizeof(bench_options_1_0) < sizeof(diffvk_bench_options));
  bench_1_0((diffvk_bench_options*)o);
  EXPECT(o->struct_size == sizeof(bench_options_1_0) && canary_intact_from(sizeof(bench_options_1_0)));
  EXPECT(o->preset != NULL && strcmp(o->preset, "default") == 0 && !o->model_dir && !o->log_cb &&
         o->budget_seconds == 0);
  check_sized_defaults("bench", sized_bench, layouts, 3);
}

typedef struct {
  int cases_started; /* "[k/n] ... preparing inputs" stage lines seen */
  int cooldowns;     /* "[k/n] cool-down ..." step lines seen (before each case of the phone preset) */
  int lines;
  int abort_calls;
  time_t abort_fired_at;
} Watch;

static void on_log(void* user, int level, const char* message) {
  Watch* w = (Watch*)user;
  ++w->lines;
  if (level < 0 || level > 3 || message == NULL) ++failures;
  if (message && message[0] == '[' && strstr(message, "preparing inputs")) ++w->cases_started;
  if (message && message[0] == '[' && strstr(message, "cool-down")) ++w->cooldowns;
}

/* Asks to stop after the first case: once the cool-down before the second case has begun. */
static int on_abort(void* user) {
  Watch* w = (Watch*)user;
  ++w->abort_calls;
  if (w->cooldowns >= 2) {
    if (!w->abort_fired_at) w->abort_fired_at = time(NULL);
    return 1;
  }
  return 0;
}

/* The options of both phone runs: the phone preset with a tiny budget (the first case of each series
 * runs, the rest are skipped by the budget), its log lines counted in a cleared `w`. */
static void phone_run_options(diffvk_bench_options* o, Watch* w) {
  diffvk_bench_default_options(o);
  memset(w, 0, sizeof *w);
  o->preset = "phone";
  o->variant = "v1"; /* CI time: the budget runs every series' first case, and DIFF V2 doubles the series */
  o->budget_seconds = 0.01;
  o->log_cb = on_log;
  o->log_user = w;
}

int main(void) {
  diffvk_context_options copts;
  diffvk_context* ctx = NULL;
  diffvk_bench_options o;
  char* json = (char*)&o;
  Watch w;

  diffvk_context_default_options(&copts);
  copts.validation = 1;
  diffvk_bench_default_options(&o);
  EXPECT(o.struct_size == sizeof(diffvk_bench_options));
  EXPECT(o.preset != NULL && strcmp(o.preset, "default") == 0);
  EXPECT(o.model_dir == NULL && o.plot_path == NULL && o.abort_cb == NULL && o.log_cb == NULL && o.budget_seconds == 0);
  EXPECT(o.variant == NULL && o.shape == NULL);
  check_default_options();

  /* misuse */
  EXPECT(diffvk_bench_run(NULL, &o, &json) == DIFFVK_INVALID_ARGUMENT);
  EXPECT(json == NULL);
  EXPECT(strstr(diffvk_last_error(), "context") != NULL);
  EXPECT(diffvk_context_create(&copts, &ctx) == DIFFVK_OK);
  if (!ctx) return 1;
  EXPECT(diffvk_bench_run(ctx, &o, NULL) == DIFFVK_INVALID_ARGUMENT);
  EXPECT(diffvk_bench_run((diffvk_context*)&o, &o, &json) == DIFFVK_INVALID_ARGUMENT); /* foreign pointer */
  o.struct_size = sizeof(diffvk_bench_options) + 8; /* newer caller than this library */
  EXPECT(diffvk_bench_run(ctx, &o, &json) == DIFFVK_INVALID_ARGUMENT);
  EXPECT(strstr(diffvk_last_error(), "struct_size") != NULL);
  EXPECT(json == NULL);
  o.struct_size = 0;
  EXPECT(diffvk_bench_run(ctx, &o, &json) == DIFFVK_INVALID_ARGUMENT);
  diffvk_bench_default_options(&o);
  o.preset = "tablet";
  EXPECT(diffvk_bench_run(ctx, &o, &json) == DIFFVK_INVALID_ARGUMENT);
  EXPECT(strstr(diffvk_last_error(), "tablet") != NULL);
  o.preset = "phone";
  o.budget_seconds = -1;
  EXPECT(diffvk_bench_run(ctx, &o, &json) == DIFFVK_INVALID_ARGUMENT);
  /* shape (since 1.1): checked before any work, as the CLI's --shape */
  diffvk_bench_default_options(&o);
  EXPECT(o.shape == NULL);
  o.shape = "no-such-shape";
  EXPECT(diffvk_bench_run(ctx, &o, &json) == DIFFVK_INVALID_ARGUMENT);
  EXPECT(strstr(diffvk_last_error(), "no-such-shape") != NULL && strstr(diffvk_last_error(), "diffllama-1b") != NULL);
  o.shape = "diffllama-1b";
  o.model_dir = "/nonexistent";
  EXPECT(diffvk_bench_run(ctx, &o, &json) == DIFFVK_INVALID_ARGUMENT);
  EXPECT(strstr(diffvk_last_error(), "model_dir and shape") != NULL);
  EXPECT(json == NULL);
  /* speculate and draft_k (since 1.2): checked before any work, as the CLI's --speculate and --draft-k */
  diffvk_bench_default_options(&o);
  EXPECT(o.speculate == NULL && o.draft_k == 0);
  o.speculate = "bogus";
  EXPECT(diffvk_bench_run(ctx, &o, &json) == DIFFVK_INVALID_ARGUMENT);
  EXPECT(strstr(diffvk_last_error(), "speculate") != NULL);
  o.speculate = "lookup";
  o.shape = "diffllama-1b";
  o.draft_k = 17;
  EXPECT(diffvk_bench_run(ctx, &o, &json) == DIFFVK_INVALID_ARGUMENT);
  EXPECT(strstr(diffvk_last_error(), "draft_k") != NULL);
  EXPECT(json == NULL);

  /* a phone run with a tiny budget: the first case of each series runs, the rest are skipped by the budget */
  phone_run_options(&o, &w);
  EXPECT(diffvk_bench_run(ctx, &o, &json) == DIFFVK_OK);
  EXPECT(json != NULL);
  if (json) {
    EXPECT(strstr(json, "\"preset\": \"phone\"") != NULL);
    EXPECT(strstr(json, "\"cooldown_s\"") != NULL);
    EXPECT(strstr(json, "\"thermal\"") != NULL);
    EXPECT(strstr(json, "\"before\"") != NULL && strstr(json, "\"after\"") != NULL);
    EXPECT(strstr(json, "\"outputs_checked\": true") != NULL);
    EXPECT(strstr(json, "\"outputs_checked\": false") == NULL);
    EXPECT(strstr(json, "skipped by the time budget") != NULL);
    diffvk_bench_free_string(json);
    json = NULL;
  }
  EXPECT(w.cases_started >= 2);
  EXPECT(w.cooldowns == w.cases_started);
  EXPECT(w.lines > w.cases_started);

  /* an older caller: struct_size covers only up to plot_path; the callbacks it lacks are off */
  diffvk_bench_default_options(&o);
  o.struct_size = (uint32_t)offsetof(diffvk_bench_options, abort_cb);
  o.preset = "no-such-preset";
  EXPECT(diffvk_bench_run(ctx, &o, &json) == DIFFVK_INVALID_ARGUMENT); /* the prefix is read */

  /* cancel after the first case */
  phone_run_options(&o, &w);
  o.abort_cb = on_abort;
  o.abort_user = &w;
  json = (char*)&o;
  EXPECT(diffvk_bench_run(ctx, &o, &json) == DIFFVK_CANCELLED);
  EXPECT(json == NULL);
  EXPECT(strstr(diffvk_last_error(), "cancelled") != NULL);
  EXPECT(w.abort_fired_at != 0);
  EXPECT(w.abort_fired_at == 0 || time(NULL) - w.abort_fired_at <= 2); /* stopped at the next check, not at the end */
  EXPECT(w.cases_started == 1);
  EXPECT(w.cooldowns == 2);
  EXPECT(strcmp(diffvk_status_string(DIFFVK_CANCELLED), "cancelled") == 0);

  EXPECT(diffvk_context_destroy(ctx) == DIFFVK_OK);
  if (failures) fprintf(stderr, "%d failure(s)\n", failures);
  return failures ? 1 : 0;
}
