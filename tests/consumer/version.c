/* A C program using only the C ABI, linked against libdiffvk.so: the running library must be the
 * version of the header it was compiled with. */
#include <diffvk/diffvk.h>
#include <stdio.h>

int main(void) {
  if (diffvk_version_number() != DIFFVK_VERSION) {
    fprintf(stderr, "consumer_c: header %d, library %s\n", DIFFVK_VERSION, diffvk_version());
    return 1;
  }
  printf("consumer_c: diffvk %s\n", diffvk_version());
  return 0;
}
