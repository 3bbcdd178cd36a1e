// Hooks for C entry points defined outside the core library (diffvk_bench's diffvk_bench_run): the
// same handle checks, error mapping and thread-local diffvk_last_error() as the core's own functions.
#pragma once
#include <cstddef>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <type_traits>

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

// The size of an options struct that ended at byte `end` (the end of its last field): rounded up to the
// struct's alignment, as the compiler pads it. A layout of before a field was added is
// layout_size(offsetof(T, first_new_field), alignof(T)) (the new fields are no more aligned than the old).
constexpr size_t layout_size(size_t end, size_t align) { return (end + align - 1) / align * align; }
// One version's layout of an options struct: where its last field ends, and its size (end padded to the struct's
// alignment: what a caller compiled against that version has in struct_size). A later version's field may lie in
// the padding; reading a caller's struct copies only up to `end`.
struct Layout {
  size_t end, size;
};
constexpr Layout layout(size_t end, size_t align) { return {end, layout_size(end, align)}; }
// The bytes of a caller's struct to read: up to the end of the last layout that struct_size covers (whole fields,
// never an older layout's tail padding); struct_size itself where it is below the first layout's end.
template <size_t N>
size_t fields_covered(const Layout (&layouts)[N], size_t struct_size) {
  size_t copy = struct_size;
  for (const Layout& l : layouts)
    if (l.end <= struct_size) copy = l.end;
  return copy;
}

// The body of every diffvk_X_default_options_sized (diffvk.h VERSIONING): of `layouts` (the struct's sizes
// at each version, ascending, the last sizeof(T)) the largest that is <= size; that many bytes of `defaults`
// (padding included) into *o and struct_size = that size. Never a byte past it. o NULL or size below
// layouts[0]: nothing.
template <class T, size_t N>
void write_defaults(T* o, size_t size, const T& defaults, const Layout (&layouts)[N]) {
  static_assert(std::is_trivially_copyable_v<T> && std::is_same_v<decltype(T::struct_size), size_t> &&
                offsetof(T, struct_size) == 0);
  if (!o) return;
  size_t k = 0;
  for (const Layout& l : layouts)
    if (l.size <= size) k = l.size;
  if (k == 0) return;
  // Byte copies: *o may be an older, shorter struct than T.
  std::memcpy(static_cast<void*>(o), &defaults, k);
  std::memcpy(static_cast<void*>(o), &k, sizeof k);
}
// A T whose every byte, padding included, is 0 (the defaults start from it).
template <class T>
T zeroed() {
  static_assert(std::is_trivially_copyable_v<T>);
  T t;
  std::memset(static_cast<void*>(&t), 0, sizeof t);
  return t;
}

}  // namespace diffvk::capi
