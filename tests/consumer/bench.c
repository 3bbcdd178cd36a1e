/* A C program that ships the benchmark: linked against libdiffvk_bench.so alone, which exports the whole
 * C ABI (diffvk.h) and the benchmark entry point (diffvk_bench.h). No device work: the symbols resolve,
 * the versions agree and the options come back with their size. */
#include <diffvk/diffvk.h>
#include <diffvk/diffvk_bench.h>
#include <stdio.h>
#include <string.h>

int main(void) {
  diffvk_bench_options o;
  memset(&o, 0xff, sizeof o);
  diffvk_bench_default_options(&o);
  if (o.struct_size != sizeof o || o.preset == NULL || strcmp(o.preset, "default") != 0) {
    fprintf(stderr, "consumer_bench: diffvk_bench_default_options gave size %zu, preset %s\n", o.struct_size,
            o.preset ? o.preset : "(null)");
    return 1;
  }
  if (diffvk_version_number() != DIFFVK_VERSION) {
    fprintf(stderr, "consumer_bench: header %d, library %s\n", DIFFVK_VERSION, diffvk_version());
    return 1;
  }
  char* json = NULL;
  if (diffvk_bench_run(NULL, &o, &json) != DIFFVK_INVALID_ARGUMENT || json != NULL) {
    fprintf(stderr, "consumer_bench: a NULL context was not refused\n");
    return 1;
  }
  diffvk_bench_free_string(NULL);
  printf("consumer_bench: diffvk %s with the benchmark entry point\n", diffvk_version());
  return 0;
}
