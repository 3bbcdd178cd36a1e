// Hooks for C entry points defined outside the core library (diffvk_bench's diffvk_bench_run): the
// same handle checks, error mapping and thread-local diffvk_last_error() as the core's own functions.
#pragma once
#include <functional>
#include <memory>
#include <string>

#include "diffvk/device.hpp"
#include "diffvk/diffvk.h"
#include "diffvk/tokenizer.hpp"

namespace diffvk::capi {

// Checks `context` (a live handle whose device is not lost), keeps it alive while `body` runs and
// returns DIFFVK_OK, or the status of what body threw (diffvk::Error -> its status) with the message
// in diffvk_last_error() prefixed by `fn`. Nothing escapes.
diffvk_status with_context(const char* fn, diffvk_context* context, const std::function<void(Context&)>& body);

// The tokenizer of a live diffvk_tokenizer handle, kept alive while the pointer is held (fails with
// DIFFVK_INVALID_ARGUMENT otherwise; runtime/capi/c_api_tokenizer.cpp).
std::shared_ptr<const Tokenizer> tokenizer_of(const diffvk_tokenizer* tokenizer);

// Sets diffvk_last_error() to "fn: message" and returns `status`.
diffvk_status report_error(const char* fn, diffvk_status status, const std::string& message);

}  // namespace diffvk::capi
