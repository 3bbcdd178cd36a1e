// What every C ABI entry point shares (runtime/capi/c_api.cpp, runtime/capi/c_api_tokenizer.cpp):
// errors become a status code + the thread-local message that diffvk_last_error() returns.
#pragma once
#include <new>
#include <string>

#include "diffvk/diffvk.h"
#include "diffvk/error.hpp"

namespace diffvk::capi {

std::string& last_error();  // this thread's message (defined in c_api.cpp)

struct ApiError {
  diffvk_status status;
  std::string message;
};
[[noreturn]] inline void fail(diffvk_status s, const std::string& m) { throw ApiError{s, m}; }
inline void need(const void* p, const char* what) {
  if (!p) fail(DIFFVK_INVALID_ARGUMENT, std::string(what) + " is NULL");
}

// Runs f; every exception becomes a status and a message naming the entry point `fn`.
template <class F>
diffvk_status guarded(const char* fn, F&& f) {
  std::string& err = last_error();
  err.clear();
  try {
    f();
    return DIFFVK_OK;
  } catch (const ApiError& e) {
    err = std::string(fn) + ": " + e.message;
    return e.status;
  } catch (const Error& e) {
    err = std::string(fn) + ": " + e.what();
    return static_cast<diffvk_status>(e.status());
  } catch (const std::bad_alloc&) {
    err = std::string(fn) + ": out of host memory";
    return DIFFVK_OUT_OF_MEMORY;
  } catch (const std::exception& e) {
    err = std::string(fn) + ": " + e.what();
    return DIFFVK_INTERNAL;
  } catch (...) {
    err = std::string(fn) + ": unknown error";
    return DIFFVK_INTERNAL;
  }
}

}  // namespace diffvk::capi
