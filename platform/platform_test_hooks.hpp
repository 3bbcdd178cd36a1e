// Test-only seams of platform/: included by tests only, never by shipped code or a public header. A seam is a
// function pointer that is null in every shipped program; only a test sets it.
#pragma once
#include <string>

namespace diffvk::platform::testing {

// Called by write_file_atomic with the temporary's path once its bytes are written and before it is synced and
// renamed: a window in which the temporary exists (tests interrupt or race the write there). nullptr: none.
using AfterTempWrite = void (*)(const std::string& tmp);
void set_after_temp_write(AfterTempWrite hook);

}  // namespace diffvk::platform::testing
