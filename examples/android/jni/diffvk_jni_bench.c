/* diffvk.Bench: the benchmark library (diffvk_bench_run, include/diffvk/diffvk_bench.h) from Java.
 * Built only when the diffvk_bench library exists (examples/android/CMakeLists.txt); without it,
 * Bench.available() is false. Runs on the caller's thread (the app uses a background thread);
 * Bench.cancel() from any thread stops it through the abort callback; the log goes to the Java
 * LogHandler when one is set (diffvk.Diffvk.setLogHandler). */
#include <jni.h>
#include <stdint.h>
#include <stdlib.h>

#include "diffvk/diffvk_bench.h"
#include "diffvk_jni.h"

JNIEXPORT jboolean JNICALL Java_diffvk_Bench_nativeAvailable(JNIEnv* env, jclass cls) {
  (void)env;
  (void)cls;
  return JNI_TRUE;
}

/* Returns the JSON report; the PNG goes to plotPath when it is not null. */
JNIEXPORT jstring JNICALL Java_diffvk_Bench_nativeRun(JNIEnv* env, jclass cls, jlong ctx, jstring preset,
                                                      jstring model_dir, jstring shape, jdouble budget_seconds,
                                                      jstring plot_path, jlong cancel_flag) {
  diffvk_bench_options o;
  char *p = NULL, *m = NULL, *sh = NULL, *plot = NULL, *json = NULL;
  int failed = 0;
  diffvk_status st;
  jstring out = NULL;
  (void)cls;
  p = djni_dup_string(env, preset, &failed);
  if (!failed) m = djni_dup_string(env, model_dir, &failed);
  if (!failed) sh = djni_dup_string(env, shape, &failed);
  if (!failed) plot = djni_dup_string(env, plot_path, &failed);
  if (failed) goto done;
  diffvk_bench_default_options(&o);
  if (p) o.preset = p;
  o.model_dir = m;
  o.shape = sh;
  if (budget_seconds > 0) o.budget_seconds = budget_seconds;
  o.plot_path = plot;
  if (cancel_flag) {
    o.abort_cb = djni_consume_flag;
    o.abort_user = (void*)(intptr_t)cancel_flag;
  }
  o.log_cb = djni_log_forwarder();
  o.log_user = NULL;
  /* The benchmark's device is the context Bench.run created (see Bench.java). */
  st = diffvk_bench_run((diffvk_context*)(intptr_t)ctx, &o, &json);
  if (djni_ok(env, st)) out = (*env)->NewStringUTF(env, json ? json : "");
  if (json) diffvk_bench_free_string(json);
done:
  free(p);
  free(m);
  free(sh);
  free(plot);
  return out;
}
