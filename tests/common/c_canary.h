/* The checks of the *_default_options_sized functions (diffvk.h VERSIONING) shared by the C test programs
 * (tests/capi/c_api_v1_test.c, tests/bench/bench_c_api_test.c): an options struct at the start of a buffer
 * filled with a canary byte, so a write past the caller's struct shows. Include after c_expect.h. */
#ifndef DIFFVK_TESTS_C_CANARY_H
#define DIFFVK_TESTS_C_CANARY_H
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define CANARY_BYTE 0xA5
#define CANARY_BYTES 256
/* Aligned for every options struct. */
static union {
  unsigned char b[CANARY_BYTES];
  void* p;
  uint64_t u;
  double d;
  long double ld;
} canary_mem;

static void* canary_fill(void) {
  memset(canary_mem.b, CANARY_BYTE, sizeof canary_mem.b);
  return canary_mem.b;
}
/* 1 when no byte from `from` on was written. */
static int canary_intact_from(size_t from) {
  size_t i;
  for (i = from; i < sizeof canary_mem.b; ++i)
    if (canary_mem.b[i] != CANARY_BYTE) return 0;
  return 1;
}
/* The struct_size the call wrote (the first size_t of the buffer). */
static size_t canary_struct_size(void) {
  size_t s;
  memcpy(&s, canary_mem.b, sizeof s);
  return s;
}

/* A diffvk_X_default_options_sized through a wrapper of this type (no cast of the function's own type). */
typedef void (*sized_defaults_fn)(void* options, size_t size);

/* fn against the struct's known layouts (ascending; the last = sizeof the struct of this header): every
 * layout's size exactly, a size between two layouts (or past the last), one too small, 0, and one larger
 * than the library's struct. struct_size is always a layout's size, and no byte past it (so none past the
 * size given) is written; a size below the first layout writes nothing. */
static void check_sized_defaults(const char* name, sized_defaults_fn fn, const size_t* layouts, size_t n) {
  size_t i;
  for (i = 0; i < n; ++i) {
    const size_t l = layouts[i];
    const size_t between = i + 1 < n ? l + (layouts[i + 1] - l) / 2 : l + 4; /* not a layout's size */
    fn(canary_fill(), l);
    if (canary_struct_size() != l || !canary_intact_from(l))
      fprintf(stderr, "  %s_default_options_sized(%zu): struct_size %zu\n", name, l, canary_struct_size());
    EXPECT(canary_struct_size() == l && canary_intact_from(l));
    fn(canary_fill(), between);
    if (canary_struct_size() != l || !canary_intact_from(l))
      fprintf(stderr, "  %s_default_options_sized(%zu): struct_size %zu\n", name, between, canary_struct_size());
    EXPECT(canary_struct_size() == l && canary_intact_from(l) && canary_intact_from(between));
  }
  fn(canary_fill(), layouts[0] - 1); /* smaller than any layout: nothing */
  EXPECT(canary_intact_from(0));
  fn(canary_fill(), sizeof(size_t));
  EXPECT(canary_intact_from(0));
  fn(canary_fill(), 0);
  EXPECT(canary_intact_from(0));
  fn(NULL, layouts[n - 1]); /* NULL: nothing (no crash) */
  /* a struct larger than the library's (a newer header): the library's struct only */
  fn(canary_fill(), layouts[n - 1] + 64);
  EXPECT(canary_struct_size() == layouts[n - 1] && canary_intact_from(layouts[n - 1]));
}

#endif
