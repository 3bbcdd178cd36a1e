/* Test-only LD_PRELOAD shim: fsync() of a regular file first sleeps DIFFVK_TEST_FSYNC_PAUSE_MS milliseconds (unset:
 * no pause). A CLI started with it pauses in write_file_atomic with its temporary written, the window in which
 * tests/io/test_safe_io.cpp interrupts it; the shipped programs have no such hook. Built uninstrumented (a
 * sanitizer runtime in a preloaded library would clash with the executables' static one). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

int fsync(int fd) {
  static int (*real_fsync)(int);
  if (!real_fsync) real_fsync = (int (*)(int))dlsym(RTLD_NEXT, "fsync");
  const char* ms = getenv("DIFFVK_TEST_FSYNC_PAUSE_MS");
  struct stat st;
  if (ms && *ms && fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) usleep((useconds_t)strtoul(ms, NULL, 10) * 1000u);
  return real_fsync ? real_fsync(fd) : -1;
}
