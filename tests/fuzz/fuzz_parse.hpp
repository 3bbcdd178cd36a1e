// The container harnesses' first step (fuzz_gguf, fuzz_safetensors): parse the input into `f`; an input may
// only be refused with diffvk::Error(format_error), any other status aborts, named by `harness`.
#pragma once

#include <cstdio>
#include <cstdlib>

#include "diffvk/error.hpp"

namespace diffvk {

// True when `parse()` returned a file (stored in f), false when it refused the input as format_error.
template <class File, class Parse>
bool parse_or_format_error(const char* harness, File& f, Parse parse) {
  try {
    f = parse();
  } catch (const Error& e) {
    if (e.status() != Status::format_error) {
      std::fprintf(stderr, "%s: rejected with status %d, not format_error: %s\n", harness, int(e.status()), e.what());
      std::abort();
    }
    return false;
  }
  return true;
}

}  // namespace diffvk
