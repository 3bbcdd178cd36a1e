#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdio>

#include "gpu_test.hpp"

int main(int argc, char** argv) {
  doctest::Context context;
  context.applyCommandLine(argc, argv);
  const int rc = context.run();
  if (diffvk::test::validation_message_count() > 0) {
    std::fprintf(stderr, "diffvk tests: %d Vulkan validation message(s) -- failing\n", diffvk::test::validation_message_count());
    return rc ? rc : 1;
  }
  return rc;
}
