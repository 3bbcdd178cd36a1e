// diffvk — checking a path before naming it ContextOptions::pipeline_cache_path.
#pragma once
#include <string>

namespace diffvk {

// A context with a pipeline_cache_path rewrites that file when it closes (and on save_pipeline_cache()),
// whatever was there. Callers that take the path from a user check it first: true when the path does not
// exist, or is an empty regular file, or a regular file that starts as diffvk's pipeline caches do (the
// magic of runtime/vk/pipeline_cache_file.hpp's format). Otherwise false, and *why (if given) says what is
// there: "not a regular file", "not a diffvk pipeline cache", or the error of opening it. Reads at most
// 8 bytes; never writes.
bool pipeline_cache_path_replaceable(const std::string& path, std::string* why = nullptr);

}  // namespace diffvk
