// Temporary names of write_file_atomic (platform_posix.cpp): they fit NAME_MAX whatever the
// target's length, and the temporaries a killed run left behind are removed on a later write once stale.
#pragma once
#include <string>

namespace diffvk::platform {

// The part before ".tmp.<pid>.<n>" of every temporary of `base` (the target's file name, no directory):
// `base` itself when the whole name fits NAME_MAX (255 bytes), else its first bytes, "~" and a 64-bit
// hash of the whole name in hex. The same target always gets the same stem.
std::string tmp_stem(const std::string& base);

// Temporaries younger than this are never removed (seconds since their last modification).
constexpr long kStaleSeconds = 600;

// Removes every regular file "<stem>.tmp.<pid>.<n>" in `dir` whose pid is not a live process (a run
// killed during a write) and that was last modified kStaleSeconds or more ago, logging a warning for
// each. Links and other non-regular entries are left as they are (never followed). Best effort: never throws.
void remove_stale_temporaries(const std::string& dir, const std::string& stem) noexcept;

}  // namespace diffvk::platform
