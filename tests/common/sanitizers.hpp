// DIFFVK_TEST_ASAN is 1 in AddressSanitizer builds (.ci/sanitize): tests that measure host RSS only report
// it there, since ASan's quarantine keeps freed memory resident.
#pragma once
#if defined(__SANITIZE_ADDRESS__)
#  define DIFFVK_TEST_ASAN 1
#elif defined(__has_feature)
#  if __has_feature(address_sanitizer)
#    define DIFFVK_TEST_ASAN 1
#  endif
#endif
