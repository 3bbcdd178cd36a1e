#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdio>
#include <cstdlib>

#include "gpu_test.hpp"

int main(int argc, char** argv) {
  // Validation (with synchronization validation) for everything this process and its children run.
  setenv("DIFFVK_VALIDATION", "1", 1);
  setenv("XDG_RUNTIME_DIR", "/tmp", 0);
  doctest::Context context;
  context.applyCommandLine(argc, argv);
  const int rc = context.run();
  if (diffvk::test::validation_message_count() > 0) {
    std::fprintf(stderr, "diffvk tests: %d Vulkan validation message(s) -- failing\n", diffvk::test::validation_message_count());
    return rc ? rc : 1;
  }
  return rc;
}
