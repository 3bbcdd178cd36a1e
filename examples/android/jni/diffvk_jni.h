/* Helpers shared by the JNI sources (diffvk_jni.c defines them). */
#ifndef DIFFVK_JNI_H
#define DIFFVK_JNI_H
#include <jni.h>

#include "diffvk/diffvk.h"

extern JavaVM* djni_vm;
/* Throws diffvk.DiffvkException (DeviceLostException, CancelledException) for status; message NULL =
 * diffvk_last_error(). */
void djni_throw_status(JNIEnv* env, diffvk_status status, const char* message);
/* 1 when ok; otherwise throws and returns 0. */
int djni_ok(JNIEnv* env, diffvk_status status);
void djni_throw_oom(JNIEnv* env, const char* what);
/* Java String -> malloc'd modified-UTF-8 copy (NULL for a null string; *failed on error, exception thrown). */
char* djni_dup_string(JNIEnv* env, jstring s, int* failed);
jfloatArray djni_floats(JNIEnv* env, const float* data, jint n);
/* An abort callback (diffvk_abort_fn) over an int flag: returns and clears it (Session.cancel, Bench.cancel). */
int djni_consume_flag(void* user);
/* diffvk_jni_log.c: JNI_OnLoad part, and the diffvk_log_fn forwarding to the Java handler (NULL when none). */
int djni_log_on_load(JNIEnv* env);
diffvk_log_fn djni_log_forwarder(void);
#endif
