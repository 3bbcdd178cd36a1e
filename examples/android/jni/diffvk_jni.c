/* diffvk — JNI binding for the Java classes in examples/android/java/diffvk/, written against the C ABI
 * (include/diffvk/diffvk.h) only. Handles travel to Java as jlong; 0 is "closed", which the C ABI turns
 * into DIFFVK_INVALID_ARGUMENT ("... is NULL"), so use after close surfaces as a DiffvkException like any
 * other error. Every failing status throws diffvk.DiffvkException(status, diffvk_last_error()), and
 * DIFFVK_DEVICE_LOST its subclass diffvk.DeviceLostException. The C ABI is thread-safe as documented in
 * diffvk.h (sessions on different threads); the Java classes add `synchronized` per object.
 *
 * The same file builds for the host JVM (examples/android/CMakeLists.txt, tested by SessionTest.java)
 * and for Android (the Gradle app in examples/android/app). The log callback is in diffvk_jni_log.c, the
 * benchmark in diffvk_jni_bench.c (built only with the diffvk_bench library). */
#include <jni.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "diffvk/diffvk.h"
#include "diffvk_jni.h"

static jclass g_exception_class;   /* global ref to diffvk.DiffvkException */
static jmethodID g_exception_ctor; /* DiffvkException(int status, String message) */
static jclass g_lost_class;        /* global ref to diffvk.DeviceLostException */
static jmethodID g_lost_ctor;
static jclass g_cancelled_class; /* global ref to diffvk.CancelledException */
static jmethodID g_cancelled_ctor;
JavaVM* djni_vm;

/* A global reference to the exception class `name` and its (int status, String message) constructor;
 * 0 = found, -1 = not (a Java exception is pending). */
static int find_exception(JNIEnv* env, const char* name, jclass* cls, jmethodID* ctor) {
  jclass local = (*env)->FindClass(env, name);
  if (!local) return -1;
  *cls = (jclass)(*env)->NewGlobalRef(env, local);
  (*env)->DeleteLocalRef(env, local);
  if (!*cls) return -1;
  *ctor = (*env)->GetMethodID(env, *cls, "<init>", "(ILjava/lang/String;)V");
  return *ctor ? 0 : -1;
}

JNIEXPORT jint JNICALL JNI_OnLoad(JavaVM* vm, void* reserved) {
  JNIEnv* env = NULL;
  (void)reserved;
  if ((*vm)->GetEnv(vm, (void**)&env, JNI_VERSION_1_6) != JNI_OK) return JNI_ERR;
  djni_vm = vm;
  /* Looked up here, with the class loader that loaded the library (matters on Android). */
  if (find_exception(env, "diffvk/DiffvkException", &g_exception_class, &g_exception_ctor) != 0 ||
      find_exception(env, "diffvk/DeviceLostException", &g_lost_class, &g_lost_ctor) != 0 ||
      find_exception(env, "diffvk/CancelledException", &g_cancelled_class, &g_cancelled_ctor) != 0)
    return JNI_ERR;
  if (djni_log_on_load(env) != 0) return JNI_ERR;
  return JNI_VERSION_1_6;
}

/* Throws DiffvkException(status, message); message NULL = diffvk_last_error(). */
void djni_throw_status(JNIEnv* env, diffvk_status status, const char* message) {
  jstring text;
  jobject ex;
  if ((*env)->ExceptionCheck(env)) return; /* a Java exception is already pending */
  text = (*env)->NewStringUTF(env, message ? message : diffvk_last_error());
  if (!text) return; /* OutOfMemoryError pending */
  if (status == DIFFVK_DEVICE_LOST)
    ex = (*env)->NewObject(env, g_lost_class, g_lost_ctor, (jint)status, text);
  else if (status == DIFFVK_CANCELLED)
    ex = (*env)->NewObject(env, g_cancelled_class, g_cancelled_ctor, (jint)status, text);
  else
    ex = (*env)->NewObject(env, g_exception_class, g_exception_ctor, (jint)status, text);
  if (ex) (*env)->Throw(env, (jthrowable)ex);
}

/* Returns 1 when ok; otherwise throws and returns 0. */
int djni_ok(JNIEnv* env, diffvk_status status) {
  if (status == DIFFVK_OK) return 1;
  djni_throw_status(env, status, NULL);
  return 0;
}

void djni_throw_oom(JNIEnv* env, const char* what) {
  jclass c = (*env)->FindClass(env, "java/lang/OutOfMemoryError");
  if (c) (*env)->ThrowNew(env, c, what);
}

/* Java String -> malloc'd modified-UTF-8 copy (NULL for a null string; *failed on error). */
char* djni_dup_string(JNIEnv* env, jstring s, int* failed) {
  const char* chars;
  char* copy;
  *failed = 0;
  if (!s) return NULL;
  chars = (*env)->GetStringUTFChars(env, s, NULL);
  if (!chars) {
    *failed = 1;
    return NULL;
  }
  copy = (char*)malloc(strlen(chars) + 1);
  if (copy) strcpy(copy, chars);
  (*env)->ReleaseStringUTFChars(env, s, chars);
  if (!copy) {
    *failed = 1;
    djni_throw_oom(env, "diffvk: string copy");
  }
  return copy;
}

jfloatArray djni_floats(JNIEnv* env, const float* data, jint n) {
  jfloatArray out = (*env)->NewFloatArray(env, n);
  if (!out) return NULL;
  (*env)->SetFloatArrayRegion(env, out, 0, n, data);
  return out;
}

/* ---- diffvk.DiffvkException ------------------------------------------------------------------------ */

JNIEXPORT jstring JNICALL Java_diffvk_DiffvkException_nativeStatusString(JNIEnv* env, jclass cls, jint status) {
  (void)cls;
  return (*env)->NewStringUTF(env, diffvk_status_string((diffvk_status)status));
}

/* ---- diffvk.Model: context + model ------------------------------------------------------------------ */

/* Model.Options.weights, q4_0Head, quantDecode, quantPrefill -> diffvk_model_options (the C ABI checks the values). */
static diffvk_model_options djni_model_options(jint weights, jboolean q4_0_head, jint quant_decode,
                                               jint quant_prefill) {
  diffvk_model_options o;
  diffvk_model_default_options(&o);
  o.weights = (uint32_t)weights;
  o.q4_0_head = q4_0_head ? 1u : 0u;
  o.quant_decode = (uint32_t)quant_decode;
  o.quant_prefill = (uint32_t)quant_prefill;
  return o;
}

JNIEXPORT jlong JNICALL Java_diffvk_Model_nativeContextCreate(JNIEnv* env, jclass cls, jstring device, jint precision,
                                                              jint validation, jstring pipeline_cache_path,
                                                              jboolean pipeline_cache, jint selftest,
                                                              jstring selftest_model) {
  diffvk_context_options o;
  diffvk_context* ctx = NULL;
  diffvk_status st;
  int failed = 0;
  char* dev;
  char* cache;
  char* model;
  (void)cls;
  dev = djni_dup_string(env, device, &failed);
  if (failed) return 0;
  cache = djni_dup_string(env, pipeline_cache_path, &failed);
  if (failed) {
    free(dev);
    return 0;
  }
  model = djni_dup_string(env, selftest_model, &failed);
  if (failed) {
    free(dev);
    free(cache);
    return 0;
  }
  diffvk_context_default_options(&o);
  o.device = dev;
  o.precision = (diffvk_precision)precision;
  o.validation = validation;
  o.pipeline_cache_path = cache;
  o.pipeline_cache = pipeline_cache ? 1 : 0;
  o.selftest = (int)selftest;
  o.selftest_model = model;
  st = diffvk_context_create(&o, &ctx);
  free(dev);
  free(cache);
  free(model);
  if (!djni_ok(env, st)) return 0;
  return (jlong)(intptr_t)ctx;
}

/* The model's config.json text as a Java string (diffvk_model_config for a path, else diffvk_model_config_memory of
 * the config bytes or, with config NULL, a .gguf's bytes), or null where it cannot be read (the load then says why). */
static jstring djni_model_config(JNIEnv* env, const char* path, const void* config, size_t config_size,
                                 const void* weights, size_t weights_size) {
  size_t n = 0;
  char* text;
  jstring out = NULL;
  diffvk_status st =
      path ? diffvk_model_config(path, NULL, 0, &n)
           : diffvk_model_config_memory((const char*)config, config_size, weights, weights_size, NULL, 0, &n);
  if (st != DIFFVK_OK || (text = (char*)malloc(n)) == NULL) return NULL;
  st = path ? diffvk_model_config(path, text, n, &n)
            : diffvk_model_config_memory((const char*)config, config_size, weights, weights_size, text, n, &n);
  if (st == DIFFVK_OK) out = (*env)->NewStringUTF(env, text);
  free(text);
  return out;
}

/* Model.configOf and the path and memory loads' self-test (djni_model_config). */
JNIEXPORT jstring JNICALL Java_diffvk_Model_nativeModelConfig(JNIEnv* env, jclass cls, jstring path, jobject config,
                                                              jobject weights) {
  const void *c = NULL, *w = NULL;
  jlong cn = 0, wn = 0;
  char* p;
  int failed = 0;
  jstring out;
  (void)cls;
  if (path) {
    p = djni_dup_string(env, path, &failed);
    if (failed) return NULL;
    out = djni_model_config(env, p, NULL, 0, NULL, 0);
    free(p);
    return out;
  }
  if (config) {
    c = (*env)->GetDirectBufferAddress(env, config);
    cn = (*env)->GetDirectBufferCapacity(env, config);
  }
  if (weights) {
    w = (*env)->GetDirectBufferAddress(env, weights);
    wn = (*env)->GetDirectBufferCapacity(env, weights);
  }
  if ((config && (!c || cn < 0)) || (!config && (!w || wn < 0))) return NULL;
  return djni_model_config(env, NULL, c, (size_t)cn, w, (size_t)wn);
}

/* Model.configOfFds and the descriptor loads' self-test: the config.json range read with pread (at most 1 MiB), or with
 * config_fd -1 the .gguf range mapped read-only (its metadata is read, no copy); null where it cannot be read. */
JNIEXPORT jstring JNICALL Java_diffvk_Model_nativeModelConfigFd(JNIEnv* env, jclass cls, jint config_fd,
                                                                jlong config_offset, jlong config_size, jint weights_fd,
                                                                jlong weights_offset, jlong weights_size) {
  const int fd = config_fd >= 0 ? config_fd : weights_fd;
  const jlong offset = config_fd >= 0 ? config_offset : weights_offset;
  jlong size = config_fd >= 0 ? config_size : weights_size;
  struct stat st;
  char* bytes = NULL;
  void* map = MAP_FAILED;
  long page = sysconf(_SC_PAGESIZE);
  jlong lead = 0;
  jstring out = NULL;
  (void)cls;
  if (fd < 0 || offset < 0 || size < -1 || fstat(fd, &st) != 0 || page <= 0) return NULL;
  if (size == -1) size = (jlong)st.st_size - offset;
  if (size <= 0 || offset + size > (jlong)st.st_size) return NULL;
  if (config_fd >= 0) {
    jlong got = 0;
    if (size > (1 << 20) || (bytes = (char*)malloc((size_t)size)) == NULL) return NULL;
    while (got < size) {
      const ssize_t r = pread(fd, bytes + got, (size_t)(size - got), (off_t)(offset + got));
      if (r <= 0) break;
      got += r;
    }
    if (got == size) out = djni_model_config(env, NULL, bytes, (size_t)size, NULL, 0);
  } else {
    lead = offset % page;
    map = mmap(NULL, (size_t)(size + lead), PROT_READ, MAP_PRIVATE, fd, (off_t)(offset - lead));
    if (map == MAP_FAILED) return NULL;
    out = djni_model_config(env, NULL, NULL, 0, (const char*)map + lead, (size_t)size);
  }
  if (map != MAP_FAILED)
    munmap(map, (size_t)(size + lead));
  else
    free(bytes);
  return out;
}

JNIEXPORT void JNICALL Java_diffvk_Model_nativeContextDestroy(JNIEnv* env, jclass cls, jlong ctx) {
  (void)cls;
  djni_ok(env, diffvk_context_destroy((diffvk_context*)(intptr_t)ctx));
}

JNIEXPORT jstring JNICALL Java_diffvk_Model_nativeDeviceName(JNIEnv* env, jclass cls, jlong ctx) {
  char name[512];
  (void)cls;
  if (!djni_ok(env, diffvk_context_device_name((const diffvk_context*)(intptr_t)ctx, name, sizeof name))) return NULL;
  return (*env)->NewStringUTF(env, name);
}

JNIEXPORT jint JNICALL Java_diffvk_Model_nativePrecision(JNIEnv* env, jclass cls, jlong ctx) {
  diffvk_precision p = DIFFVK_PRECISION_AUTO;
  (void)cls;
  if (!djni_ok(env, diffvk_context_precision((const diffvk_context*)(intptr_t)ctx, &p))) return -1;
  return (jint)p;
}

JNIEXPORT jlong JNICALL Java_diffvk_Model_nativeModelLoad(JNIEnv* env, jclass cls, jlong ctx, jstring dir, jint weights,
                                                          jboolean q4_0_head, jint quant_decode, jint quant_prefill) {
  const diffvk_model_options mo = djni_model_options(weights, q4_0_head, quant_decode, quant_prefill);
  diffvk_model* model = NULL;
  diffvk_status st;
  int failed = 0;
  char* path;
  (void)cls;
  if (!dir) {
    djni_throw_status(env, DIFFVK_INVALID_ARGUMENT, "Model.load: the model directory is null");
    return 0;
  }
  path = djni_dup_string(env, dir, &failed);
  if (failed) return 0;
  st = diffvk_model_load_with_options((diffvk_context*)(intptr_t)ctx, path, &mo, &model);
  free(path);
  if (!djni_ok(env, st)) return 0;
  return (jlong)(intptr_t)model;
}

/* Model.loadFromMemory: direct ByteBuffers, read during the call only. */
JNIEXPORT jlong JNICALL Java_diffvk_Model_nativeModelLoadMemory(JNIEnv* env, jclass cls, jlong ctx, jobject config,
                                                                jobject weights, jint weight_format, jboolean q4_0_head,
                                                                jint quant_decode, jint quant_prefill) {
  const diffvk_model_options mo = djni_model_options(weight_format, q4_0_head, quant_decode, quant_prefill);
  diffvk_model* model = NULL;
  void *c = NULL, *w;
  jlong cn = 0, wn;
  (void)cls;
  if (!weights) { /* config null: a .gguf (Model.loadGgufFromMemory), which carries its own configuration */
    djni_throw_status(env, DIFFVK_INVALID_ARGUMENT, "Model.loadFromMemory: the weights buffer is null");
    return 0;
  }
  if (config) {
    c = (*env)->GetDirectBufferAddress(env, config);
    cn = (*env)->GetDirectBufferCapacity(env, config);
  }
  w = (*env)->GetDirectBufferAddress(env, weights);
  wn = (*env)->GetDirectBufferCapacity(env, weights);
  if ((config && !c) || !w || cn < 0 || wn < 0) {
    djni_throw_status(env, DIFFVK_INVALID_ARGUMENT, "Model.loadFromMemory: the buffers must be direct ByteBuffers");
    return 0;
  }
  if (!djni_ok(env, diffvk_model_load_memory_with_options((diffvk_context*)(intptr_t)ctx, (const char*)c, (size_t)cn, w,
                                                          (size_t)wn, &mo, &model)))
    return 0;
  return (jlong)(intptr_t)model;
}

/* Model.loadFromFds: byte ranges of descriptors (Android: AssetFileDescriptor of uncompressed assets). */
JNIEXPORT jlong JNICALL Java_diffvk_Model_nativeModelLoadFd(JNIEnv* env, jclass cls, jlong ctx, jint config_fd,
                                                            jlong config_offset, jlong config_size, jint weights_fd,
                                                            jlong weights_offset, jlong weights_size,
                                                            jint weight_format, jboolean q4_0_head, jint quant_decode,
                                                            jint quant_prefill) {
  const diffvk_model_options mo = djni_model_options(weight_format, q4_0_head, quant_decode, quant_prefill);
  diffvk_model* model = NULL;
  (void)cls;
  if (!djni_ok(env,
               diffvk_model_load_fd_with_options((diffvk_context*)(intptr_t)ctx, config_fd, config_offset, config_size,
                                                 weights_fd, weights_offset, weights_size, &mo, &model)))
    return 0;
  return (jlong)(intptr_t)model;
}

JNIEXPORT void JNICALL Java_diffvk_Model_nativeModelDestroy(JNIEnv* env, jclass cls, jlong model) {
  (void)cls;
  djni_ok(env, diffvk_model_destroy((diffvk_model*)(intptr_t)model));
}

JNIEXPORT jint JNICALL Java_diffvk_Model_nativeVocabSize(JNIEnv* env, jclass cls, jlong model) {
  uint32_t v = 0;
  (void)cls;
  if (!djni_ok(env, diffvk_model_vocab_size((const diffvk_model*)(intptr_t)model, &v))) return 0;
  return (jint)v;
}

/* Model.quantDecodePath() / quantPrefillPath(): one of diffvk_model_quant_paths' two values. */
JNIEXPORT jint JNICALL Java_diffvk_Model_nativeQuantPath(JNIEnv* env, jclass cls, jlong model, jboolean prefill) {
  uint32_t d = 0, p = 0;
  (void)cls;
  if (!djni_ok(env, diffvk_model_quant_paths((const diffvk_model*)(intptr_t)model, &d, &p))) return -1;
  return (jint)(prefill ? p : d);
}

JNIEXPORT jint JNICALL Java_diffvk_Model_nativeEosToken(JNIEnv* env, jclass cls, jlong model) {
  int32_t t = -1;
  (void)cls;
  if (!djni_ok(env, diffvk_model_eos_token((const diffvk_model*)(intptr_t)model, &t))) return -1;
  return (jint)t;
}

JNIEXPORT jint JNICALL Java_diffvk_Model_nativeBosToken(JNIEnv* env, jclass cls, jlong model) {
  int32_t t = -1;
  (void)cls;
  if (!djni_ok(env, diffvk_model_bos_token((const diffvk_model*)(intptr_t)model, &t))) return -1;
  return (jint)t;
}

/* ---- diffvk.Session ---------------------------------------------------------------------------------- */

/* Session.cancel(): a flag per Session, set from any thread; the abort callback consumes it, so it
 * cancels the call in progress, or the next call when none is running. */
int djni_consume_flag(void* user) { return __atomic_exchange_n((int*)user, 0, __ATOMIC_SEQ_CST) != 0; }

JNIEXPORT jlong JNICALL Java_diffvk_Session_nativeNewCancelFlag(JNIEnv* env, jclass cls) {
  int* flag = (int*)calloc(1, sizeof(int));
  (void)cls;
  if (!flag) djni_throw_oom(env, "diffvk: cancel flag");
  return (jlong)(intptr_t)flag;
}
JNIEXPORT void JNICALL Java_diffvk_Session_nativeFreeCancelFlag(JNIEnv* env, jclass cls, jlong flag) {
  (void)env;
  (void)cls;
  free((int*)(intptr_t)flag);
}
JNIEXPORT void JNICALL Java_diffvk_Session_nativeCancel(JNIEnv* env, jclass cls, jlong flag) {
  (void)env;
  (void)cls;
  if (flag) __atomic_store_n((int*)(intptr_t)flag, 1, __ATOMIC_SEQ_CST);
}

JNIEXPORT jlong JNICALL Java_diffvk_Session_nativeCreate(JNIEnv* env, jclass cls, jlong model, jint context_len,
                                                         jint chunk, jint kv_cache, jlong cancel_flag) {
  diffvk_session* s = NULL;
  diffvk_session_options o;
  (void)cls;
  if (context_len < 0 || chunk < 0) {
    djni_throw_status(env, DIFFVK_INVALID_ARGUMENT, "Session: contextLength and chunk must be >= 0");
    return 0;
  }
  diffvk_session_default_options(&o);
  o.context_len = (uint32_t)context_len;
  o.chunk = (uint32_t)chunk;
  o.kv_cache = (uint32_t)kv_cache; /* the C ABI checks the value */
  if (cancel_flag) {
    o.abort_cb = djni_consume_flag;
    o.abort_user = (void*)(intptr_t)cancel_flag;
  }
  if (!djni_ok(env, diffvk_session_create_with_options((diffvk_model*)(intptr_t)model, &o, &s))) return 0;
  return (jlong)(intptr_t)s;
}

JNIEXPORT void JNICALL Java_diffvk_Session_nativeDestroy(JNIEnv* env, jclass cls, jlong session) {
  (void)cls;
  djni_ok(env, diffvk_session_destroy((diffvk_session*)(intptr_t)session));
}

/* The token copy and the logits buffer of a prefill (Session.prefill, Session.prefillReusing): 1 when both are
 * allocated (free them), else 0 with an exception thrown. jint is int32_t on every JNI platform; copy, never
 * pin: the call may run for a long time. */
static int prefill_buffers(JNIEnv* env, jintArray tokens, jint vocab, const char* what, int32_t** buf, float** logits,
                           jsize* n) {
  char msg[96];
  *buf = NULL;
  *logits = NULL;
  if (!tokens || vocab <= 0) {
    snprintf(msg, sizeof msg, "Session.%s: %s", what, !tokens ? "tokens is null" : "bad vocabulary size");
    djni_throw_status(env, DIFFVK_INVALID_ARGUMENT, msg);
    return 0;
  }
  *n = (*env)->GetArrayLength(env, tokens);
  *buf = (int32_t*)malloc(sizeof(int32_t) * (size_t)(*n > 0 ? *n : 1));
  *logits = (float*)malloc(sizeof(float) * (size_t)vocab);
  if (!*buf || !*logits) {
    free(*buf);
    free(*logits);
    djni_throw_oom(env, "diffvk: prefill buffers");
    return 0;
  }
  (*env)->GetIntArrayRegion(env, tokens, 0, *n, (jint*)*buf);
  return 1;
}

JNIEXPORT jfloatArray JNICALL Java_diffvk_Session_nativePrefill(JNIEnv* env, jclass cls, jlong session,
                                                                jintArray tokens, jint vocab) {
  jsize n = 0;
  int32_t* buf;
  float* logits;
  jfloatArray out = NULL;
  (void)cls;
  if (!prefill_buffers(env, tokens, vocab, "prefill", &buf, &logits, &n)) return NULL;
  if (djni_ok(env, diffvk_session_prefill((diffvk_session*)(intptr_t)session, buf, (size_t)n, logits, (size_t)vocab)))
    out = djni_floats(env, logits, vocab);
  free(buf);
  free(logits);
  return out;
}

JNIEXPORT jfloatArray JNICALL Java_diffvk_Session_nativeDecode(JNIEnv* env, jclass cls, jlong session, jint token,
                                                               jint vocab) {
  float* logits;
  jfloatArray out = NULL;
  (void)cls;
  if (vocab <= 0) {
    djni_throw_status(env, DIFFVK_INVALID_ARGUMENT, "Session.decode: bad vocabulary size");
    return NULL;
  }
  logits = (float*)malloc(sizeof(float) * (size_t)vocab);
  if (!logits) {
    djni_throw_oom(env, "diffvk: decode buffer");
    return NULL;
  }
  if (djni_ok(env, diffvk_session_decode((diffvk_session*)(intptr_t)session, (int32_t)token, logits, (size_t)vocab)))
    out = djni_floats(env, logits, vocab);
  free(logits);
  return out;
}

JNIEXPORT void JNICALL Java_diffvk_Session_nativeReset(JNIEnv* env, jclass cls, jlong session) {
  (void)cls;
  djni_ok(env, diffvk_session_reset((diffvk_session*)(intptr_t)session));
}

JNIEXPORT void JNICALL Java_diffvk_Session_nativeRewind(JNIEnv* env, jclass cls, jlong session, jint n) {
  (void)cls;
  if (n < 0) {
    djni_throw_status(env, DIFFVK_INVALID_ARGUMENT, "Session.rewind: n < 0");
    return;
  }
  djni_ok(env, diffvk_session_rewind((diffvk_session*)(intptr_t)session, (uint32_t)n));
}

typedef diffvk_status (*djni_ids_fn)(const diffvk_session*, int32_t*, size_t, size_t*);
static jintArray session_ids(JNIEnv* env, jlong session, djni_ids_fn get) {
  size_t n = 0;
  int32_t* buf;
  jintArray out = NULL;
  if (!djni_ok(env, get((const diffvk_session*)(intptr_t)session, NULL, 0, &n))) return NULL;
  buf = (int32_t*)malloc(sizeof(int32_t) * (n > 0 ? n : 1));
  if (!buf) {
    djni_throw_oom(env, "diffvk: tokens buffer");
    return NULL;
  }
  if (djni_ok(env, get((const diffvk_session*)(intptr_t)session, buf, n, &n))) {
    out = (*env)->NewIntArray(env, (jsize)n);
    if (out) (*env)->SetIntArrayRegion(env, out, 0, (jsize)n, (const jint*)buf);
  }
  free(buf);
  return out;
}

JNIEXPORT jintArray JNICALL Java_diffvk_Session_nativeTokens(JNIEnv* env, jclass cls, jlong session) {
  (void)cls;
  return session_ids(env, session, diffvk_session_tokens);
}

JNIEXPORT jintArray JNICALL Java_diffvk_Session_nativeHistory(JNIEnv* env, jclass cls, jlong session) {
  (void)cls;
  return session_ids(env, session, diffvk_session_history);
}

JNIEXPORT void JNICALL Java_diffvk_Session_nativeShift(JNIEnv* env, jclass cls, jlong session, jint keep,
                                                       jint discard) {
  (void)cls;
  if (keep < 0 || discard < 0) {
    djni_throw_status(env, DIFFVK_INVALID_ARGUMENT, "Session.shift: keep or discard < 0");
    return;
  }
  djni_ok(env, diffvk_session_shift((diffvk_session*)(intptr_t)session, (uint32_t)keep, (uint32_t)discard));
}

/* prefillReusing (keep < 0) and prefillShifting (keep >= 0): the logits, and the tokens kept in reused[0]. */
static jfloatArray prefill_keeping(JNIEnv* env, jlong session, jintArray tokens, jint vocab, jintArray reused,
                                   jint keep, const char* what) {
  jsize n = 0;
  int32_t* buf;
  float* logits;
  uint32_t kept = 0;
  jint kept_j;
  jfloatArray out = NULL;
  diffvk_session* s = (diffvk_session*)(intptr_t)session;
  if (!reused || (*env)->GetArrayLength(env, reused) < 1) {
    djni_throw_status(env, DIFFVK_INVALID_ARGUMENT, "Session.prefillReusing: no room for the reused count");
    return NULL;
  }
  if (!prefill_buffers(env, tokens, vocab, what, &buf, &logits, &n)) return NULL;
  if (djni_ok(env, keep < 0 ? diffvk_session_prefill_reusing(s, buf, (size_t)n, logits, (size_t)vocab, &kept)
                            : diffvk_session_prefill_shifting(s, buf, (size_t)n, (uint32_t)keep, logits, (size_t)vocab,
                                                              &kept))) {
    out = djni_floats(env, logits, vocab);
    kept_j = (jint)kept;
    (*env)->SetIntArrayRegion(env, reused, 0, 1, &kept_j);
  }
  free(buf);
  free(logits);
  return out;
}

JNIEXPORT jfloatArray JNICALL Java_diffvk_Session_nativePrefillReusing(JNIEnv* env, jclass cls, jlong session,
                                                                       jintArray tokens, jint vocab, jintArray reused) {
  (void)cls;
  return prefill_keeping(env, session, tokens, vocab, reused, -1, "prefillReusing");
}

JNIEXPORT jfloatArray JNICALL Java_diffvk_Session_nativePrefillShifting(JNIEnv* env, jclass cls, jlong session,
                                                                        jintArray tokens, jint keep, jint vocab,
                                                                        jintArray reused) {
  (void)cls;
  if (keep < 0) {
    djni_throw_status(env, DIFFVK_INVALID_ARGUMENT, "Session.prefillShifting: keep < 0");
    return NULL;
  }
  return prefill_keeping(env, session, tokens, vocab, reused, keep, "prefillShifting");
}

JNIEXPORT jbyteArray JNICALL Java_diffvk_Session_nativeSaveState(JNIEnv* env, jclass cls, jlong session) {
  size_t size = 0;
  void* buf;
  jbyteArray out = NULL;
  (void)cls;
  if (!djni_ok(env, diffvk_session_save_state_buffer((const diffvk_session*)(intptr_t)session, NULL, 0, &size)))
    return NULL;
  if (size > 0x7fffffff) {
    djni_throw_status(env, DIFFVK_INVALID_ARGUMENT, "Session.saveState: the state is larger than a Java array");
    return NULL;
  }
  buf = malloc(size > 0 ? size : 1);
  if (!buf) {
    djni_throw_oom(env, "diffvk: state buffer");
    return NULL;
  }
  if (djni_ok(env, diffvk_session_save_state_buffer((const diffvk_session*)(intptr_t)session, buf, size, &size))) {
    out = (*env)->NewByteArray(env, (jsize)size);
    if (out) (*env)->SetByteArrayRegion(env, out, 0, (jsize)size, (const jbyte*)buf);
  }
  free(buf);
  return out;
}

JNIEXPORT void JNICALL Java_diffvk_Session_nativeRestoreState(JNIEnv* env, jclass cls, jlong session,
                                                              jbyteArray state) {
  jsize n;
  void* buf;
  (void)cls;
  if (!state) {
    djni_throw_status(env, DIFFVK_INVALID_ARGUMENT, "Session.restoreState: state is null");
    return;
  }
  n = (*env)->GetArrayLength(env, state);
  buf = malloc(n > 0 ? (size_t)n : 1);
  if (!buf) {
    djni_throw_oom(env, "diffvk: state buffer");
    return;
  }
  (*env)->GetByteArrayRegion(env, state, 0, n, (jbyte*)buf);
  djni_ok(env, diffvk_session_restore_state_buffer((diffvk_session*)(intptr_t)session, buf, (size_t)n));
  free(buf);
}

static void state_file(JNIEnv* env, jlong session, jstring path, int save) {
  int failed = 0;
  char* p;
  if (!path) {
    djni_throw_status(env, DIFFVK_INVALID_ARGUMENT, "Session state: path is null");
    return;
  }
  p = djni_dup_string(env, path, &failed);
  if (failed) return;
  if (save)
    djni_ok(env, diffvk_session_save_state((const diffvk_session*)(intptr_t)session, p));
  else
    djni_ok(env, diffvk_session_restore_state((diffvk_session*)(intptr_t)session, p));
  free(p);
}

JNIEXPORT void JNICALL Java_diffvk_Session_nativeSaveStateFile(JNIEnv* env, jclass cls, jlong session, jstring path) {
  (void)cls;
  state_file(env, session, path, 1);
}

JNIEXPORT void JNICALL Java_diffvk_Session_nativeRestoreStateFile(JNIEnv* env, jclass cls, jlong session,
                                                                  jstring path) {
  (void)cls;
  state_file(env, session, path, 0);
}

JNIEXPORT jint JNICALL Java_diffvk_Session_nativePosition(JNIEnv* env, jclass cls, jlong session) {
  uint32_t p = 0;
  (void)cls;
  if (!djni_ok(env, diffvk_session_position((const diffvk_session*)(intptr_t)session, &p))) return -1;
  return (jint)p;
}

JNIEXPORT jint JNICALL Java_diffvk_Session_nativeCapacity(JNIEnv* env, jclass cls, jlong session) {
  uint32_t c = 0;
  (void)cls;
  if (!djni_ok(env, diffvk_session_capacity((const diffvk_session*)(intptr_t)session, &c))) return -1;
  return (jint)c;
}

/* ---- diffvk.Sampler ---------------------------------------------------------------------------------- */

JNIEXPORT jlong JNICALL Java_diffvk_Sampler_nativeCreate(JNIEnv* env, jclass cls, jfloat temperature, jint top_k,
                                                         jfloat top_p, jlong seed) {
  diffvk_sampler* s = NULL;
  (void)cls;
  if (top_k < 0) {
    djni_throw_status(env, DIFFVK_INVALID_ARGUMENT, "Sampler: topK must be >= 0");
    return 0;
  }
  if (!djni_ok(env, diffvk_sampler_create(temperature, (uint32_t)top_k, top_p, (uint64_t)seed, &s))) return 0;
  return (jlong)(intptr_t)s;
}

JNIEXPORT jlong JNICALL Java_diffvk_Sampler_nativeCreateWithOptions(JNIEnv* env, jclass cls, jfloat temperature,
                                                                    jint top_k, jfloat top_p, jlong seed, jfloat min_p,
                                                                    jfloat repeat_penalty, jfloat frequency_penalty,
                                                                    jfloat presence_penalty, jint penalty_last_n) {
  diffvk_sampler_options o;
  diffvk_sampler* s = NULL;
  (void)cls;
  if (top_k < 0 || penalty_last_n < 0) {
    djni_throw_status(env, DIFFVK_INVALID_ARGUMENT, "Sampler: topK and penaltyLastN must be >= 0");
    return 0;
  }
  diffvk_sampler_default_options(&o);
  o.temperature = temperature;
  o.top_k = (uint32_t)top_k;
  o.top_p = top_p;
  o.seed = (uint64_t)seed;
  o.min_p = min_p;
  o.repeat_penalty = repeat_penalty;
  o.frequency_penalty = frequency_penalty;
  o.presence_penalty = presence_penalty;
  o.penalty_last_n = (uint32_t)penalty_last_n;
  if (!djni_ok(env, diffvk_sampler_create_with_options(&o, &s))) return 0;
  return (jlong)(intptr_t)s;
}

JNIEXPORT void JNICALL Java_diffvk_Sampler_nativeAccept(JNIEnv* env, jclass cls, jlong sampler, jint token) {
  (void)cls;
  djni_ok(env, diffvk_sampler_accept((diffvk_sampler*)(intptr_t)sampler, (int32_t)token));
}

JNIEXPORT void JNICALL Java_diffvk_Sampler_nativeDestroy(JNIEnv* env, jclass cls, jlong sampler) {
  (void)cls;
  djni_ok(env, diffvk_sampler_destroy((diffvk_sampler*)(intptr_t)sampler));
}

JNIEXPORT jint JNICALL Java_diffvk_Sampler_nativeSample(JNIEnv* env, jclass cls, jlong sampler, jfloatArray logits) {
  jsize n;
  float* buf;
  int32_t tok = -1;
  diffvk_status st;
  (void)cls;
  if (!logits) {
    djni_throw_status(env, DIFFVK_INVALID_ARGUMENT, "Sampler.sample: logits is null");
    return -1;
  }
  n = (*env)->GetArrayLength(env, logits);
  buf = (float*)malloc(sizeof(float) * (size_t)(n > 0 ? n : 1));
  if (!buf) {
    djni_throw_oom(env, "diffvk: sample buffer");
    return -1;
  }
  (*env)->GetFloatArrayRegion(env, logits, 0, n, buf);
  st = diffvk_sampler_sample((diffvk_sampler*)(intptr_t)sampler, buf, (uint32_t)n, &tok);
  free(buf);
  if (!djni_ok(env, st)) return -1;
  return (jint)tok;
}
