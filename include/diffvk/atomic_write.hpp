// diffvk — writing output files atomically (implemented in platform/; platform.hpp includes this header).
// Public because programs built on the library (the CLI, apps) write their outputs the way the library
// writes its caches: never a partial file, and no temporary left behind on Ctrl-C.
#pragma once
#include <cstddef>
#include <string>

namespace diffvk::platform {

// Writes "path.tmp.<pid>.<n>", fsyncs it, renames it over `path`. On any failure
// the temporary is removed and io_error is thrown; `path` is then untouched (it
// is never left holding a partial file). data may be nullptr when size == 0.
void write_file_atomic(const std::string& path, const void* data, size_t size);

// For programs (the CLI): installs SIGINT/SIGTERM/SIGHUP handlers that remove the temporary files of
// write_file_atomic calls in flight, then end the process by the same signal (default action). Signals
// the process ignores stay ignored. A library never calls this by itself.
void install_interrupt_cleanup();

}  // namespace diffvk::platform
