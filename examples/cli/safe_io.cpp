// Checks every output path of a CLI command before any work: an output never
// replaces an input, and an unwritable output fails at once instead of after the compute.
#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "commands.hpp"

namespace diffvk::cli {

namespace {
std::string parent_of(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}
bool same_file(const struct stat& a, const struct stat& b) { return a.st_dev == b.st_dev && a.st_ino == b.st_ino; }
}  // namespace

void check_output(const std::string& output, const std::string& option, const std::vector<std::string>& inputs,
                  const std::string& model_dir) {
  if (output.empty()) throw Error(Status::invalid_argument, option + ": empty path");
  // Files the output must not be: every input, and every file in the model directory.
  std::vector<std::string> protect = inputs;
  if (!model_dir.empty()) {
    if (DIR* d = ::opendir(model_dir.c_str())) {
      while (const dirent* e = ::readdir(d))
        if (std::strcmp(e->d_name, ".") && std::strcmp(e->d_name, "..")) protect.push_back(model_dir + "/" + e->d_name);
      ::closedir(d);
    } else {
      protect.push_back(model_dir);  // a .gguf model is one file
    }
  }
  struct stat out_st;
  if (::stat(output.c_str(), &out_st) == 0) {  // follows symlinks: a link to an input is the input
    if (S_ISDIR(out_st.st_mode)) throw Error(Status::invalid_argument, option + " '" + output + "' is a directory");
    for (const auto& in : protect) {
      struct stat in_st;
      if (::stat(in.c_str(), &in_st) == 0 && same_file(in_st, out_st))
        throw Error(Status::invalid_argument, option + " '" + output + "' is the same file as the input '" + in +
                                                  "'; refusing to replace an input (nothing was computed)");
    }
    if (!S_ISREG(out_st.st_mode))
      throw Error(Status::invalid_argument, option + " '" + output + "' exists and is not a regular file");
  }
  // The file is replaced by a rename from a temporary in the same directory: that directory must exist
  // and be writable.
  const std::string dir = parent_of(output);
  struct stat dir_st;
  if (::stat(dir.c_str(), &dir_st) != 0)
    throw Error(Status::io_error, option + " '" + output + "': directory '" + dir + "': " + std::strerror(errno));
  if (!S_ISDIR(dir_st.st_mode))
    throw Error(Status::io_error, option + " '" + output + "': '" + dir + "' is not a directory");
  if (::access(dir.c_str(), W_OK | X_OK) != 0)
    throw Error(Status::io_error, option + " '" + output + "': directory '" + dir + "' is not writable (" +
                                      std::strerror(errno) + "); nothing was computed");
}

}  // namespace diffvk::cli
