// diffvk — the directory of diffvk's own cache files (the pipeline cache files: ContextOptions::pipeline_cache).
#pragma once
#include <string>

namespace diffvk::platform {

// The directory for diffvk's own cache files. Not created (the pipeline cache creates its folder when it writes).
//   - After set_cache_dir(base) with a non-empty base: "<base>/diffvk" (every platform).
//   - Linux and other POSIX systems otherwise: "$XDG_CACHE_HOME/diffvk" (when set, non-empty and
//     absolute) or "$HOME/.cache/diffvk" (HOME, else the password database). Throws io_error when
//     no home directory can be determined.
//   - Android otherwise: throws io_error (an app has no usable HOME; it must call set_cache_dir
//     with Context.getCacheDir().getAbsolutePath(): Java diffvk.Diffvk.setCacheDir, C diffvk_set_cache_dir).
std::string cache_dir();

// Sets the base directory that cache_dir() uses (it returns "<base>/diffvk"), overriding the XDG
// default on Linux. "" restores the default. Throws invalid_argument for a relative path.
// Thread-safe; contexts created afterwards use it.
void set_cache_dir(const std::string& base);

}  // namespace diffvk::platform
