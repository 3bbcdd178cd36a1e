/* diffvk.Diffvk: the library's version and its log, forwarded to a Java diffvk.Diffvk.LogHandler
 * (diffvk_set_log_callback). The handler is called on the thread that logs (a thread that called into
 * diffvk, hence attached; other threads are attached for the call). A Java exception thrown by the
 * handler is cleared: logging never fails a diffvk call. Messages logged while the calling thread has a
 * Java exception pending are dropped (no Java code may run then). */
#include <jni.h>
#include <stdint.h>
#include <stdlib.h>

#include "diffvk_jni.h"

static jobject g_handler;      /* global ref to the LogHandler, or NULL; guarded by g_lock */
static jmethodID g_log_method; /* LogHandler.log(int, String) */
static int g_lock;             /* spin lock (set/replace are rare; forwarding holds it briefly) */

static void lock(void) {
  while (__atomic_exchange_n(&g_lock, 1, __ATOMIC_ACQUIRE)) {}
}
static void unlock(void) { __atomic_store_n(&g_lock, 0, __ATOMIC_RELEASE); }

int djni_log_on_load(JNIEnv* env) {
  jclass c = (*env)->FindClass(env, "diffvk/Diffvk$LogHandler");
  if (!c) return -1;
  g_log_method = (*env)->GetMethodID(env, c, "log", "(ILjava/lang/String;)V");
  (*env)->DeleteLocalRef(env, c);
  return g_log_method ? 0 : -1;
}

static void forward(void* user, int level, const char* message) {
  JNIEnv* env = NULL;
  int attached = 0;
  jobject handler;
  jstring text;
  (void)user;
  if (!djni_vm) return;
  if ((*djni_vm)->GetEnv(djni_vm, (void**)&env, JNI_VERSION_1_6) == JNI_EDETACHED) {
    if ((*djni_vm)->AttachCurrentThread(djni_vm, (void**)&env, NULL) != JNI_OK) return;
    attached = 1;
  }
  if (!env || (*env)->ExceptionCheck(env)) goto done;
  lock();
  handler = g_handler ? (*env)->NewLocalRef(env, g_handler) : NULL;
  unlock();
  if (!handler) goto done;
  text = (*env)->NewStringUTF(env, message);
  if (text) {
    (*env)->CallVoidMethod(env, handler, g_log_method, (jint)level, text);
    (*env)->DeleteLocalRef(env, text);
  }
  if ((*env)->ExceptionCheck(env)) (*env)->ExceptionClear(env);
  (*env)->DeleteLocalRef(env, handler);
done:
  if (attached) (*djni_vm)->DetachCurrentThread(djni_vm);
}

diffvk_log_fn djni_log_forwarder(void) {
  diffvk_log_fn fn;
  lock();
  fn = g_handler ? forward : NULL;
  unlock();
  return fn;
}

JNIEXPORT void JNICALL Java_diffvk_Diffvk_nativeSetLogHandler(JNIEnv* env, jclass cls, jobject handler,
                                                              jint max_level) {
  jobject old, ref = handler ? (*env)->NewGlobalRef(env, handler) : NULL;
  (void)cls;
  if (handler && !ref) return; /* OutOfMemoryError pending */
  lock();
  old = g_handler;
  g_handler = ref;
  unlock();
  diffvk_set_log_callback(ref ? forward : NULL, NULL, (int)max_level);
  if (old) (*env)->DeleteGlobalRef(env, old);
}

JNIEXPORT void JNICALL Java_diffvk_Diffvk_nativeSetCacheDir(JNIEnv* env, jclass cls, jstring base) {
  int failed = 0;
  char* b;
  (void)cls;
  b = djni_dup_string(env, base, &failed);
  if (failed) return;
  djni_ok(env, diffvk_set_cache_dir(b));
  free(b);
}

JNIEXPORT jstring JNICALL Java_diffvk_Diffvk_nativeVersion(JNIEnv* env, jclass cls) {
  (void)cls;
  return (*env)->NewStringUTF(env, diffvk_version());
}
