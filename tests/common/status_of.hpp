// The status of a call that must fail with a diffvk::Error (tests of argument checks).
#pragma once
#include "diffvk/error.hpp"

namespace diffvk::test {

// The status `fn` throws as diffvk::Error, or Status::ok when it returns.
template <class F>
Status status_of(F&& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.status();
  }
  return Status::ok;
}

}  // namespace diffvk::test
