// Temporary names of write_file_atomic (platform_posix.cpp): they fit NAME_MAX whatever the
// target's length, and the temporaries a killed run left behind are removed on the next write.
#pragma once
#include <string>

namespace diffvk::platform {

// The part before ".tmp.<pid>.<n>" of every temporary of `base` (the target's file name, no directory):
// `base` itself when the whole name fits NAME_MAX (255 bytes), else its first bytes, "~" and a 64-bit
// hash of the whole name in hex. The same target always gets the same stem.
std::string tmp_stem(const std::string& base);

// Removes every regular file "<stem>.tmp.<pid>.<n>" in `dir` whose pid is not a live process (a run
// killed during a write), logging a warning for each. Best effort: never throws.
void remove_stale_temporaries(const std::string& dir, const std::string& stem) noexcept;

}  // namespace diffvk::platform
