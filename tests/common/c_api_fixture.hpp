// The C ABI objects a test starts from: a context with validation on, a model and one session.
// Shared by tests/io/test_safe_io.cpp and tests/model/test_atomic.cpp.
#pragma once
#include <doctest/doctest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "diffvk/diffvk.h"

namespace diffvk::test {

struct CApiObjects {
  diffvk_context* c = nullptr;
  diffvk_model* m = nullptr;
  diffvk_session* s = nullptr;
  std::vector<float> logits;  // one row: the model's vocabulary size
};

// Creates the three objects (REQUIREs each step). The test destroys them itself, checking each status,
// and keeps a test::FailOnLoggedValidation alive meanwhile (the C ABI context has no callback).
inline CApiObjects open_c_api(const std::string& model_dir, uint32_t context, uint32_t batch) {
  CApiObjects o;
  diffvk_context_options opt{};
  opt.validation = 1;
  REQUIRE(diffvk_context_create(&opt, &o.c) == DIFFVK_OK);
  REQUIRE(diffvk_model_load(o.c, model_dir.c_str(), &o.m) == DIFFVK_OK);
  REQUIRE(diffvk_session_create(o.m, context, batch, &o.s) == DIFFVK_OK);
  uint32_t vocab = 0;
  REQUIRE(diffvk_model_vocab_size(o.m, &vocab) == DIFFVK_OK);
  o.logits.resize(vocab);
  return o;
}

}  // namespace diffvk::test
