// The binding's self-test at load (Model.Options.selftest; docs/decisions/024-selftest-at-load.md): where the
// binding is built with the benchmark library, its runner is registered when the library loads, so that
// diffvk_context_create runs the self-test (the static diffvk_bench registers nothing by itself).
#include "diffvk/bench.hpp"

namespace {
const bool registered = [] {
  diffvk::bench::install_selftest();
  return true;
}();
}  // namespace
