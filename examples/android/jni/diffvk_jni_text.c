/* diffvk JNI: the text side of the Java binding: diffvk.Tokenizer (diffvk_tokenizer_*) and
 * Session.generateText (diffvk_session_generate, its text callback calling back into Java on the same thread). */
#include <jni.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "diffvk/diffvk.h"
#include "diffvk_jni.h"

JNIEXPORT jlong JNICALL Java_diffvk_Tokenizer_nativeLoad(JNIEnv* env, jclass cls, jstring dir) {
  int failed = 0;
  char* d;
  diffvk_tokenizer* t = NULL;
  (void)cls;
  if (!dir) {
    djni_throw_status(env, DIFFVK_INVALID_ARGUMENT, "Tokenizer: dir is null");
    return 0;
  }
  d = djni_dup_string(env, dir, &failed);
  if (failed) return 0;
  djni_ok(env, diffvk_tokenizer_load(d, &t));
  free(d);
  return (jlong)(intptr_t)t;
}

JNIEXPORT jlong JNICALL Java_diffvk_Tokenizer_nativeLoadFd(JNIEnv* env, jclass cls, jint fd, jlong offset,
                                                           jlong length) {
  diffvk_tokenizer* t = NULL;
  (void)cls;
  djni_ok(env, diffvk_tokenizer_load_fd((int)fd, (int64_t)offset, (int64_t)length, &t));
  return (jlong)(intptr_t)t;
}

JNIEXPORT jlong JNICALL Java_diffvk_Tokenizer_nativeLoadJsonFd(JNIEnv* env, jclass cls, jint fd, jlong offset,
                                                               jlong length, jint tc_fd, jlong tc_offset,
                                                               jlong tc_length, jint c_fd, jlong c_offset,
                                                               jlong c_length) {
  diffvk_tokenizer* t = NULL;
  (void)cls;
  djni_ok(env, diffvk_tokenizer_load_json_fd((int)fd, (int64_t)offset, (int64_t)length, (int)tc_fd, (int64_t)tc_offset,
                                             (int64_t)tc_length, (int)c_fd, (int64_t)c_offset, (int64_t)c_length, &t));
  return (jlong)(intptr_t)t;
}

JNIEXPORT jlong JNICALL Java_diffvk_Tokenizer_nativeLoadSentencePieceFd(JNIEnv* env, jclass cls, jint fd, jlong offset,
                                                                        jlong length) {
  diffvk_tokenizer* t = NULL;
  (void)cls;
  djni_ok(env, diffvk_tokenizer_load_sentencepiece_fd((int)fd, (int64_t)offset, (int64_t)length, &t));
  return (jlong)(intptr_t)t;
}

JNIEXPORT void JNICALL Java_diffvk_Tokenizer_nativeFree(JNIEnv* env, jclass cls, jlong t) {
  (void)cls;
  djni_ok(env, diffvk_tokenizer_free((diffvk_tokenizer*)(intptr_t)t));
}

JNIEXPORT jintArray JNICALL Java_diffvk_Tokenizer_nativeEncode(JNIEnv* env, jclass cls, jlong t, jbyteArray text,
                                                               jboolean add_special) {
  jsize len;
  char* bytes;
  int32_t* ids = NULL;
  size_t n = 0;
  diffvk_status st;
  jintArray out = NULL;
  const diffvk_tokenizer* tok = (const diffvk_tokenizer*)(intptr_t)t;
  (void)cls;
  if (!text) {
    djni_throw_status(env, DIFFVK_INVALID_ARGUMENT, "Tokenizer.encode: text is null");
    return NULL;
  }
  len = (*env)->GetArrayLength(env, text);
  bytes = (char*)malloc((size_t)len + 1);
  if (!bytes) {
    djni_throw_oom(env, "diffvk: encode buffer");
    return NULL;
  }
  (*env)->GetByteArrayRegion(env, text, 0, len, (jbyte*)bytes);
  /* The size first: DIFFVK_BUFFER_TOO_SMALL (with *n set) unless the text encodes to nothing. */
  st = diffvk_tokenizer_encode(tok, bytes, (size_t)len, add_special ? 1 : 0, NULL, 0, &n);
  if (djni_ok(env, st == DIFFVK_BUFFER_TOO_SMALL ? DIFFVK_OK : st)) {
    ids = (int32_t*)malloc(sizeof(int32_t) * (n > 0 ? n : 1));
    if (!ids)
      djni_throw_oom(env, "diffvk: encode ids");
    else if (djni_ok(env, diffvk_tokenizer_encode(tok, bytes, (size_t)len, add_special ? 1 : 0, ids, n, &n))) {
      out = (*env)->NewIntArray(env, (jsize)n);
      if (out) (*env)->SetIntArrayRegion(env, out, 0, (jsize)n, (const jint*)ids);
    }
  }
  free(ids);
  free(bytes);
  return out;
}

JNIEXPORT jbyteArray JNICALL Java_diffvk_Tokenizer_nativeDecode(JNIEnv* env, jclass cls, jlong t, jintArray ids) {
  jsize n;
  int32_t* buf;
  char* bytes = NULL;
  size_t len = 0;
  diffvk_status st;
  jbyteArray out = NULL;
  const diffvk_tokenizer* tok = (const diffvk_tokenizer*)(intptr_t)t;
  (void)cls;
  if (!ids) {
    djni_throw_status(env, DIFFVK_INVALID_ARGUMENT, "Tokenizer.decode: ids is null");
    return NULL;
  }
  n = (*env)->GetArrayLength(env, ids);
  buf = (int32_t*)malloc(sizeof(int32_t) * (size_t)(n > 0 ? n : 1));
  if (!buf) {
    djni_throw_oom(env, "diffvk: decode ids");
    return NULL;
  }
  (*env)->GetIntArrayRegion(env, ids, 0, n, (jint*)buf);
  st = diffvk_tokenizer_decode(tok, buf, (size_t)n, NULL, 0, &len); /* the size first, as in encode */
  if (djni_ok(env, st == DIFFVK_BUFFER_TOO_SMALL ? DIFFVK_OK : st)) {
    bytes = (char*)malloc(len > 0 ? len : 1);
    if (!bytes)
      djni_throw_oom(env, "diffvk: decode bytes");
    else if (djni_ok(env, diffvk_tokenizer_decode(tok, buf, (size_t)n, bytes, len, &len))) {
      out = (*env)->NewByteArray(env, (jsize)len);
      if (out) (*env)->SetByteArrayRegion(env, out, 0, (jsize)len, (const jbyte*)bytes);
    }
  }
  free(bytes);
  free(buf);
  return out;
}

/* The text callback: each piece to Pieces.piece(byte[]) on the calling thread; an exception thrown by the
 * listener stops generation and is left pending for Java. */
struct djni_pieces {
  JNIEnv* env;
  jobject pieces;
  jmethodID piece;
  int failed;
};
static int djni_piece(const char* data, size_t size, void* user) {
  struct djni_pieces* p = (struct djni_pieces*)user;
  JNIEnv* env = p->env;
  jboolean go;
  jbyteArray b = (*env)->NewByteArray(env, (jsize)size);
  if (!b) {
    p->failed = 1;
    return 0;
  }
  (*env)->SetByteArrayRegion(env, b, 0, (jsize)size, (const jbyte*)data);
  go = (*env)->CallBooleanMethod(env, p->pieces, p->piece, b);
  (*env)->DeleteLocalRef(env, b);
  if ((*env)->ExceptionCheck(env)) {
    p->failed = 1;
    return 0;
  }
  return go ? 1 : 0;
}

static void free_stops(char** stops, jsize n) {
  jsize i;
  if (!stops) return;
  for (i = 0; i < n; ++i) free(stops[i]);
  free(stops);
}

JNIEXPORT void JNICALL Java_diffvk_Session_nativeGenerate(JNIEnv* env, jclass cls, jlong session, jlong sampler,
                                                          jlong tokenizer, jintArray prompt, jint max_tokens,
                                                          jobjectArray stop, jint eos, jint overflow, jint keep,
                                                          jint draft, jint draft_k, jint draft_ngram,
                                                          jlong draft_session, jobject pieces, jintArray out) {
  jsize n, n_stop, i;
  int32_t* buf;
  char** stops = NULL;
  char msg[96];
  diffvk_generate_options o;
  diffvk_generate_result r;
  diffvk_status st;
  struct djni_pieces p;
  jclass pieces_cls;
  (void)cls;
  if (!prompt || !stop || !pieces || !out || (*env)->GetArrayLength(env, out) < 8 || max_tokens < 0 || keep < 0 ||
      draft_k < 0 || draft_ngram < 0) {
    djni_throw_status(env, DIFFVK_INVALID_ARGUMENT,
                      "Session.generateText: a null argument, or maxTokens, keep, draftK or draftNgram < 0");
    return;
  }
  pieces_cls = (*env)->GetObjectClass(env, pieces);
  p.env = env;
  p.pieces = pieces;
  p.piece = (*env)->GetMethodID(env, pieces_cls, "piece", "([B)Z");
  p.failed = 0;
  if (!p.piece) return; /* NoSuchMethodError pending */
  n_stop = (*env)->GetArrayLength(env, stop);
  if (n_stop > DIFFVK_MAX_STOP_STRINGS) {
    snprintf(msg, sizeof msg, "Session.generateText: %d stop strings; at most %d", (int)n_stop,
             DIFFVK_MAX_STOP_STRINGS);
    djni_throw_status(env, DIFFVK_INVALID_ARGUMENT, msg);
    return;
  }
  stops = (char**)calloc((size_t)(n_stop > 0 ? n_stop : 1), sizeof(char*));
  if (!stops) {
    djni_throw_oom(env, "diffvk: stop strings");
    return;
  }
  for (i = 0; i < n_stop; ++i) {
    jbyteArray s = (jbyteArray)(*env)->GetObjectArrayElement(env, stop, i);
    jsize len = s ? (*env)->GetArrayLength(env, s) : 0;
    stops[i] = (char*)malloc((size_t)len + 1);
    if (!stops[i]) {
      free_stops(stops, n_stop);
      djni_throw_oom(env, "diffvk: a stop string");
      return;
    }
    if (s) (*env)->GetByteArrayRegion(env, s, 0, len, (jbyte*)stops[i]);
    stops[i][len] = 0;
    if (s) (*env)->DeleteLocalRef(env, s);
    if (strlen(stops[i]) != (size_t)len) {
      snprintf(msg, sizeof msg, "Session.generateText: stop[%d] holds a NUL character", (int)i);
      free_stops(stops, n_stop);
      djni_throw_status(env, DIFFVK_INVALID_ARGUMENT, msg);
      return;
    }
  }
  n = (*env)->GetArrayLength(env, prompt);
  buf = (int32_t*)malloc(sizeof(int32_t) * (size_t)(n > 0 ? n : 1));
  if (!buf) {
    free_stops(stops, n_stop);
    djni_throw_oom(env, "diffvk: prompt buffer");
    return;
  }
  (*env)->GetIntArrayRegion(env, prompt, 0, n, (jint*)buf);
  diffvk_generate_default_options(&o);
  o.max_tokens = (uint32_t)max_tokens;
  o.stop_count = (uint32_t)n_stop;
  o.stop = (const char* const*)stops;
  o.eos_token = (int32_t)eos;
  o.overflow = (int32_t)overflow;
  o.keep = (uint32_t)keep;
  o.draft = (int32_t)draft;
  o.draft_k = (uint32_t)draft_k;
  o.draft_ngram = (uint32_t)draft_ngram;
  o.draft_session = (diffvk_session*)(intptr_t)draft_session;
  o.on_text = djni_piece;
  o.user = &p;
  memset(&r, 0, sizeof r);
  r.struct_size = sizeof r;
  st = diffvk_session_generate((diffvk_session*)(intptr_t)session, (diffvk_sampler*)(intptr_t)sampler,
                               (const diffvk_tokenizer*)(intptr_t)tokenizer, buf, (size_t)n, &o, &r);
  free(buf);
  free_stops(stops, n_stop);
  if (p.failed) {
    if (!(*env)->ExceptionCheck(env)) djni_throw_oom(env, "diffvk: a text piece");
    return;
  }
  if (djni_ok(env, st)) {
    jint v[8];
    v[0] = (jint)r.tokens;
    v[1] = (jint)r.reused;
    v[2] = (jint)r.stop_reason;
    v[3] = (jint)r.stop_index;
    v[4] = (jint)r.shifts;
    v[5] = (jint)r.verify_passes;
    v[6] = (jint)r.drafted;
    v[7] = (jint)r.accepted;
    (*env)->SetIntArrayRegion(env, out, 0, 8, v);
  }
}

/* ---- diffvk.ChatTemplate (diffvk_chat_template_*) ------------------------------------------------------ */
JNIEXPORT jlong JNICALL Java_diffvk_ChatTemplate_nativeLoad(JNIEnv* env, jclass cls, jstring dir) {
  int failed = 0;
  char* d;
  diffvk_chat_template* t = NULL;
  (void)cls;
  if (!dir) {
    djni_throw_status(env, DIFFVK_INVALID_ARGUMENT, "ChatTemplate.load: dir is null");
    return 0;
  }
  d = djni_dup_string(env, dir, &failed);
  if (failed) return 0;
  djni_ok(env, diffvk_chat_template_load(d, &t));
  free(d);
  return (jlong)(intptr_t)t;
}

JNIEXPORT jlong JNICALL Java_diffvk_ChatTemplate_nativeBuiltin(JNIEnv* env, jclass cls, jstring family, jstring bos,
                                                               jstring eos) {
  int failed = 0;
  char *f, *b = NULL, *e = NULL;
  diffvk_chat_template* t = NULL;
  (void)cls;
  if (!family) {
    djni_throw_status(env, DIFFVK_INVALID_ARGUMENT, "ChatTemplate.builtin: family is null");
    return 0;
  }
  f = djni_dup_string(env, family, &failed);
  if (!failed && bos) b = djni_dup_string(env, bos, &failed);
  if (!failed && eos) e = djni_dup_string(env, eos, &failed);
  if (!failed) djni_ok(env, diffvk_chat_template_builtin(f, b, e, &t));
  free(f);
  free(b);
  free(e);
  return (jlong)(intptr_t)t;
}

JNIEXPORT void JNICALL Java_diffvk_ChatTemplate_nativeFree(JNIEnv* env, jclass cls, jlong t) {
  (void)cls;
  djni_ok(env, diffvk_chat_template_free((diffvk_chat_template*)(intptr_t)t));
}

JNIEXPORT jstring JNICALL Java_diffvk_ChatTemplate_nativeFamily(JNIEnv* env, jclass cls, jlong t) {
  const char* name = NULL;
  (void)cls;
  if (!djni_ok(env, diffvk_chat_template_family((const diffvk_chat_template*)(intptr_t)t, &name))) return NULL;
  return (*env)->NewStringUTF(env, name);
}

JNIEXPORT jstring JNICALL Java_diffvk_ChatTemplate_nativeEndOfTurn(JNIEnv* env, jclass cls, jlong t) {
  char text[64];
  size_t len = 0;
  (void)cls;
  if (!djni_ok(env,
               diffvk_chat_template_end_of_turn((const diffvk_chat_template*)(intptr_t)t, text, sizeof text, &len)))
    return NULL;
  return (*env)->NewStringUTF(env, text); /* the tokens' text: ASCII in every supported family */
}

/* A byte[] of an array of byte[] as a NUL-terminated string (malloc'ed); NULL with an exception thrown. */
static char* element_string(JNIEnv* env, jobjectArray a, jsize i) {
  jbyteArray b = (jbyteArray)(*env)->GetObjectArrayElement(env, a, i);
  jsize len = b ? (*env)->GetArrayLength(env, b) : 0;
  char* s = (char*)malloc((size_t)len + 1);
  if (!s) {
    djni_throw_oom(env, "diffvk: a chat message");
    return NULL;
  }
  if (b) {
    (*env)->GetByteArrayRegion(env, b, 0, len, (jbyte*)s);
    (*env)->DeleteLocalRef(env, b);
  }
  s[len] = 0;
  if (strlen(s) != (size_t)len) {
    free(s);
    djni_throw_status(env, DIFFVK_INVALID_ARGUMENT, "ChatTemplate.apply: a message holds a NUL character");
    return NULL;
  }
  return s;
}

JNIEXPORT jbyteArray JNICALL Java_diffvk_ChatTemplate_nativeApply(JNIEnv* env, jclass cls, jlong t, jobjectArray roles,
                                                                  jobjectArray contents,
                                                                  jboolean add_generation_prompt) {
  jsize n, i;
  diffvk_chat_message* m;
  char* text = NULL;
  size_t len = 0;
  diffvk_status st;
  jbyteArray out = NULL;
  const diffvk_chat_template* tpl = (const diffvk_chat_template*)(intptr_t)t;
  (void)cls;
  if (!roles || !contents || (*env)->GetArrayLength(env, roles) != (*env)->GetArrayLength(env, contents)) {
    djni_throw_status(env, DIFFVK_INVALID_ARGUMENT, "ChatTemplate.apply: roles and contents differ");
    return NULL;
  }
  n = (*env)->GetArrayLength(env, roles);
  m = (diffvk_chat_message*)calloc((size_t)(n > 0 ? n : 1), sizeof *m);
  if (!m) {
    djni_throw_oom(env, "diffvk: chat messages");
    return NULL;
  }
  for (i = 0; i < n; ++i) {
    m[i].role = element_string(env, roles, i);
    if (!m[i].role) break;
    m[i].content = element_string(env, contents, i);
    if (!m[i].content) break;
  }
  if (i == n) {
    st = diffvk_chat_template_apply(tpl, m, (size_t)n, add_generation_prompt ? 1 : 0, NULL, 0,
                                    &len); /* the size first */
    if (djni_ok(env, st == DIFFVK_BUFFER_TOO_SMALL ? DIFFVK_OK : st)) {
      text = (char*)malloc(len > 0 ? len : 1);
      if (!text)
        djni_throw_oom(env, "diffvk: chat text");
      else if (djni_ok(env,
                       diffvk_chat_template_apply(tpl, m, (size_t)n, add_generation_prompt ? 1 : 0, text, len, &len))) {
        out = (*env)->NewByteArray(env, (jsize)len);
        if (out) (*env)->SetByteArrayRegion(env, out, 0, (jsize)len, (const jbyte*)text);
      }
    }
  }
  for (i = 0; i < n; ++i) {
    free((void*)m[i].role);
    free((void*)m[i].content);
  }
  free(m);
  free(text);
  return out;
}
