/* The check macro of the C test programs (tests/capi/c_api_test.c, tests/capi/c_api_v1_test.c,
 * tests/bench/bench_c_api_test.c): a failed condition is printed with the library's last error and
 * counted in `failures`; main() returns nonzero when any failed. Include after diffvk/diffvk.h. */
#ifndef DIFFVK_TESTS_C_EXPECT_H
#define DIFFVK_TESTS_C_EXPECT_H
#include <stdio.h>

static int failures = 0;
#define EXPECT(cond)                                                                                          \
  do {                                                                                                        \
    if (!(cond)) {                                                                                            \
      fprintf(stderr, "FAILED %s:%d: %s (last error: %s)\n", __FILE__, __LINE__, #cond, diffvk_last_error()); \
      ++failures;                                                                                             \
    }                                                                                                         \
  } while (0)

#endif
