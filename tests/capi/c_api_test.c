/* The C ABI exercised from C: misuse gives status codes (never a crash), and a model generates.
 * usage: diffvk_c_api_test <model dir> */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "diffvk/diffvk.h"

#include "../common/c_expect.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s <model dir>\n", argv[0]);
    return 2;
  }
  diffvk_context_options opts;
  diffvk_context* ctx = NULL;
  diffvk_model* model = NULL;
  diffvk_session* session = NULL;
  diffvk_sampler* sampler = NULL;
  uint32_t vocab = 0, pos = 0;
  char name[256];
  float* logits;
  float tiny[4];
  int32_t tok = 0, prompt[5] = {72, 101, 108, 108, 111};
  int i;

  diffvk_context_default_options(&opts);
  opts.validation = 1;
  /* misuse before anything exists */
  EXPECT(diffvk_context_create(&opts, NULL) == DIFFVK_INVALID_ARGUMENT);
  EXPECT(strstr(diffvk_last_error(), "out") != NULL);
  EXPECT(diffvk_model_load(NULL, argv[1], &model) == DIFFVK_INVALID_ARGUMENT);
  EXPECT(diffvk_session_decode(NULL, 1, tiny, 4) == DIFFVK_INVALID_ARGUMENT);
  EXPECT(diffvk_context_destroy((diffvk_context*)&opts) == DIFFVK_INVALID_ARGUMENT); /* foreign pointer */
  EXPECT(diffvk_context_destroy(NULL) == DIFFVK_INVALID_ARGUMENT);
  EXPECT(diffvk_model_destroy(NULL) == DIFFVK_INVALID_ARGUMENT);
  EXPECT(diffvk_session_destroy(NULL) == DIFFVK_INVALID_ARGUMENT);
  EXPECT(diffvk_sampler_destroy(NULL) == DIFFVK_INVALID_ARGUMENT);
  EXPECT(strcmp(diffvk_status_string((diffvk_status)-1), "unknown status") == 0);
  EXPECT(strcmp(diffvk_status_string((diffvk_status)1000), "unknown status") == 0);
  EXPECT(strlen(diffvk_status_string(DIFFVK_DEVICE_LOST)) > 0);
  {
    /* bad options: unknown precision enum, a device selector that matches nothing */
    diffvk_context_options bad = opts;
    bad.precision = (diffvk_precision)7;
    ctx = (diffvk_context*)&bad; /* must be reset to NULL on failure */
    EXPECT(diffvk_context_create(&bad, &ctx) == DIFFVK_INVALID_ARGUMENT);
    EXPECT(ctx == NULL);
    bad.precision = DIFFVK_PRECISION_AUTO;
    bad.device = "no-such-vulkan-device-xyz";
    EXPECT(diffvk_context_create(&bad, &ctx) == DIFFVK_INVALID_ARGUMENT);
    EXPECT(ctx == NULL);
    EXPECT(strstr(diffvk_last_error(), "no-such-vulkan-device-xyz") != NULL);
    bad.device = "999999";
    EXPECT(diffvk_context_create(&bad, &ctx) == DIFFVK_INVALID_ARGUMENT);
    EXPECT(ctx == NULL);
  }
  /* sampler parameters: NaN / negative / infinite temperature, top_p outside (0, 1] */
  EXPECT(diffvk_sampler_create(NAN, 0, 1.0f, 1, &sampler) == DIFFVK_INVALID_ARGUMENT);
  EXPECT(sampler == NULL);
  EXPECT(diffvk_sampler_create(-0.5f, 0, 1.0f, 1, &sampler) == DIFFVK_INVALID_ARGUMENT);
  EXPECT(diffvk_sampler_create(-INFINITY, 0, 1.0f, 1, &sampler) == DIFFVK_INVALID_ARGUMENT);
  EXPECT(diffvk_sampler_create(1.0f, 0, NAN, 1, &sampler) == DIFFVK_INVALID_ARGUMENT);
  EXPECT(diffvk_sampler_create(1.0f, 0, 0.0f, 1, &sampler) == DIFFVK_INVALID_ARGUMENT);
  EXPECT(diffvk_sampler_create(1.0f, 0, 1.5f, 1, &sampler) == DIFFVK_INVALID_ARGUMENT);
  EXPECT(diffvk_sampler_create(1.0f, 0, 1.0f, 1, NULL) == DIFFVK_INVALID_ARGUMENT);
  EXPECT(sampler == NULL);
  {
    /* a live sampler: bad arguments, hostile logits (NaN, infinities) never crash or leave the vocabulary */
    float weird[8] = {0.0f, NAN, 1.0f, INFINITY, -INFINITY, NAN, 3.0f, -1.0f};
    float nans[4] = {NAN, NAN, NAN, NAN};
    diffvk_sampler* hot = NULL;
    diffvk_status st;
    EXPECT(diffvk_sampler_create(0.8f, 3, 0.9f, 11, &hot) == DIFFVK_OK);
    EXPECT(diffvk_sampler_sample(hot, weird, 0, &tok) == DIFFVK_INVALID_ARGUMENT); /* empty vocabulary */
    EXPECT(diffvk_sampler_sample(hot, NULL, 8, &tok) == DIFFVK_INVALID_ARGUMENT);
    EXPECT(diffvk_sampler_sample(hot, weird, 8, NULL) == DIFFVK_INVALID_ARGUMENT);
    EXPECT(diffvk_session_reset((diffvk_session*)hot) == DIFFVK_INVALID_ARGUMENT); /* handle of another kind */
    /* Non-finite logits are rejected (one rule, no "either status" escape): INVALID_ARGUMENT naming the
     * first bad index, and *out is not written. */
    for (i = 0; i < 20; ++i) {
      tok = -7;
      st = diffvk_sampler_sample(hot, weird, 8, &tok);
      EXPECT(st == DIFFVK_INVALID_ARGUMENT);
      EXPECT(strstr(diffvk_last_error(), "logit 1 ") != NULL);
      EXPECT(tok == -7);
      st = diffvk_sampler_sample(hot, nans, 4, &tok);
      EXPECT(st == DIFFVK_INVALID_ARGUMENT);
      EXPECT(strstr(diffvk_last_error(), "logit 0 ") != NULL);
      EXPECT(tok == -7);
    }
    /* finite logits sample inside the vocabulary, and only among the top 3 (top_k = 3) */
    {
      float fine[8] = {0.0f, 5.0f, 1.0f, 4.0f, -3.0f, 4.5f, 3.0f, -1.0f};
      for (i = 0; i < 50; ++i) {
        tok = -7;
        EXPECT(diffvk_sampler_sample(hot, fine, 8, &tok) == DIFFVK_OK);
        EXPECT(tok == 1 || tok == 3 || tok == 5);
      }
    }
    EXPECT(diffvk_sampler_destroy(hot) == DIFFVK_OK);
    EXPECT(diffvk_sampler_sample(hot, weird, 8, &tok) == DIFFVK_INVALID_ARGUMENT); /* stale */
  }

  EXPECT(diffvk_context_create(&opts, &ctx) == DIFFVK_OK);
  if (!ctx) return 1;
  EXPECT(diffvk_context_device_name(ctx, name, 2) == DIFFVK_BUFFER_TOO_SMALL);
  EXPECT(diffvk_context_device_name(ctx, name, sizeof name) == DIFFVK_OK);
  EXPECT(diffvk_model_load(ctx, "/nonexistent/model", &model) == DIFFVK_IO_ERROR);
  EXPECT(model == NULL);
  EXPECT(diffvk_model_load(ctx, NULL, &model) == DIFFVK_INVALID_ARGUMENT);
  EXPECT(diffvk_model_load(ctx, argv[1], NULL) == DIFFVK_INVALID_ARGUMENT);
  EXPECT(diffvk_model_load((diffvk_context*)name, argv[1], &model) == DIFFVK_INVALID_ARGUMENT); /* foreign */
  EXPECT(model == NULL);
  EXPECT(diffvk_context_device_name(ctx, NULL, 16) == DIFFVK_INVALID_ARGUMENT);
  EXPECT(diffvk_context_precision(ctx, NULL) == DIFFVK_INVALID_ARGUMENT);
  EXPECT(diffvk_model_load(ctx, argv[1], &model) == DIFFVK_OK);
  if (!model) return 1;
  EXPECT(diffvk_context_destroy(ctx) == DIFFVK_INVALID_ARGUMENT); /* wrong order: model alive */
  EXPECT(diffvk_model_vocab_size(model, &vocab) == DIFFVK_OK && vocab >= 256);
  session = (diffvk_session*)&opts;
  EXPECT(diffvk_session_create(model, 1u << 30, 0, &session) ==
         DIFFVK_INVALID_ARGUMENT); /* > max_position_embeddings */
  EXPECT(session == NULL);
  EXPECT(strstr(diffvk_last_error(), "max_position_embeddings") != NULL);
  EXPECT(diffvk_session_create(model, 32, 0, NULL) == DIFFVK_INVALID_ARGUMENT);
  EXPECT(diffvk_session_create((diffvk_model*)ctx, 32, 0, &session) == DIFFVK_INVALID_ARGUMENT); /* a context */
  EXPECT(diffvk_session_create(model, 32, 0, &session) == DIFFVK_OK);
  EXPECT(strcmp(diffvk_last_error(), "") == 0); /* cleared by a successful call */
  if (!session) return 1;
  logits = (float*)malloc(sizeof(float) * vocab);
  EXPECT(diffvk_session_prefill(session, prompt, 5, tiny, 4) == DIFFVK_BUFFER_TOO_SMALL);
  EXPECT(diffvk_session_prefill(session, prompt, 0, logits, vocab) == DIFFVK_INVALID_ARGUMENT); /* no tokens */
  EXPECT(diffvk_session_prefill(session, NULL, 5, logits, vocab) == DIFFVK_INVALID_ARGUMENT);
  EXPECT(diffvk_session_prefill(session, prompt, 5, NULL, vocab) == DIFFVK_INVALID_ARGUMENT);
  {
    int32_t neg[2] = {72, -1};
    EXPECT(diffvk_session_prefill(session, neg, 2, logits, vocab) == DIFFVK_INVALID_ARGUMENT); /* negative id */
  }
  EXPECT(diffvk_session_decode(session, INT32_MIN, logits, vocab) == DIFFVK_INVALID_ARGUMENT);
  EXPECT(diffvk_session_position(session, NULL) == DIFFVK_INVALID_ARGUMENT);
  EXPECT(diffvk_session_capacity(session, &pos) == DIFFVK_OK && pos == 32);
  EXPECT(diffvk_session_position(session, &pos) == DIFFVK_OK && pos == 0);
  EXPECT(diffvk_session_prefill(session, prompt, 5, logits, vocab) == DIFFVK_OK);
  EXPECT(diffvk_sampler_create(0.0f, 0, 1.0f, 7, &sampler) == DIFFVK_OK);
  for (i = 0; i < 10; ++i) {
    EXPECT(diffvk_sampler_sample(sampler, logits, vocab, &tok) == DIFFVK_OK);
    EXPECT(tok >= 0 && (uint32_t)tok < vocab);
    EXPECT(diffvk_session_decode(session, tok, logits, vocab) == DIFFVK_OK);
    {
      uint32_t k, finite = 0;
      for (k = 0; k < vocab; ++k) finite += isfinite(logits[k]) ? 1u : 0u;
      EXPECT(finite == vocab); /* every logit written and finite, not just the first */
    }
  }
  EXPECT(diffvk_session_position(session, &pos) == DIFFVK_OK && pos == 15);
  /* bad token and context overflow: errors, session unchanged and usable */
  EXPECT(diffvk_session_decode(session, (int32_t)vocab, logits, vocab) == DIFFVK_INVALID_ARGUMENT);
  {
    int32_t many[40];
    memset(many, 0, sizeof many);
    EXPECT(diffvk_session_prefill(session, many, 40, logits, vocab) == DIFFVK_CONTEXT_OVERFLOW);
    EXPECT(strstr(diffvk_last_error(), "context") != NULL);
  }
  EXPECT(diffvk_session_position(session, &pos) == DIFFVK_OK && pos == 15);
  EXPECT(diffvk_session_decode(session, 65, logits, vocab) == DIFFVK_OK);
  EXPECT(diffvk_model_destroy(model) == DIFFVK_INVALID_ARGUMENT); /* session alive */
  EXPECT(diffvk_session_destroy(session) == DIFFVK_OK);
  EXPECT(diffvk_session_destroy(session) == DIFFVK_INVALID_ARGUMENT); /* stale handle */
  EXPECT(diffvk_session_decode(session, 1, logits, vocab) == DIFFVK_INVALID_ARGUMENT);
  EXPECT(diffvk_sampler_destroy(sampler) == DIFFVK_OK);
  EXPECT(diffvk_model_destroy(model) == DIFFVK_OK);
  EXPECT(diffvk_context_destroy(ctx) == DIFFVK_OK);
  EXPECT(diffvk_context_destroy(ctx) == DIFFVK_INVALID_ARGUMENT);
  free(logits);
  printf("c_api_test on %s: %s\n", name, failures ? "FAILED" : "passed");
  return failures ? 1 : 0;
}
