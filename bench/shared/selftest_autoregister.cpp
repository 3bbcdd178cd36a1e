// libdiffvk_bench.so only (not the static diffvk_bench, whose programs call install_selftest themselves): registers
// the self-test at load's runner when the library is loaded, so that a C or Java caller's diffvk_context_create
// runs it (diffvk_context_options.selftest; docs/decisions/024-selftest-at-load.md).
#include "diffvk/bench.hpp"

namespace {
const bool registered = [] {
  diffvk::bench::install_selftest();
  return true;
}();
}  // namespace
