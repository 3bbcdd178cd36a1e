// diffvk — the pipeline cache file: the default path, and checking a path before naming it
// ContextOptions::pipeline_cache_path.
#pragma once
#include <string>

#include "diffvk/device.hpp"

namespace diffvk {

// A context with a pipeline_cache_path rewrites that file when it closes (and on save_pipeline_cache()),
// whatever was there. Callers that take the path from a user check it first: true when the path does not
// exist, or is an empty regular file, or a regular file that starts as diffvk's pipeline caches do (the
// magic of runtime/vk/pipeline_cache_file.hpp's format). Otherwise false, and *why (if given) says what is
// there: "not a regular file", "not a diffvk pipeline cache", or the error of opening it. Reads at most
// 8 bytes; never writes.
bool pipeline_cache_path_replaceable(const std::string& path, std::string* why = nullptr);

// The file a context uses when ContextOptions::pipeline_cache_path is "" (and pipeline_cache is on):
// `<platform cache dir>/pipelines/<vendor id>-<device id>-<pipelineCacheUUID>.vkpc`, ids (8 digits) and UUID in
// lower-case hex. "" (logged at info) where there is no cache directory (Android before set_cache_dir, no home
// directory).
std::string default_pipeline_cache_path(const DeviceCaps& caps);

}  // namespace diffvk
