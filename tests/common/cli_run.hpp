// Running the diffvk CLI (DIFFVK_CLI_PATH, set by tests/CMakeLists.txt) from a test, and the small files
// its runs need. Shared by tests/cli, tests/io, tests/model and tests/vk.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "model_fixture.hpp"

namespace diffvk::test {

struct CliResult {
  int exit_code = -1;  // -1: killed by a signal or not started; 124: killed by the time limit
  std::string out;     // stdout + stderr
  double seconds = 0;  // wall time, process start included
};

// Runs `<env> timeout <limit> DIFFVK_CLI_PATH <args>` through the shell (`env` is "" or a prefix such as
// "env NAME=value"), with stdout and stderr in a log inside `tmp`. The CLI inherits DIFFVK_VALIDATION=1
// (tests/common/test_main.cpp): a validation message in its output fails the calling test.
CliResult run_cli(const TempDir& tmp, const std::string& args, const std::string& env = "");

// A version 1.0 '<i8' .npy file of token ids.
void write_tokens(const std::string& path, const std::vector<int64_t>& ids);

// The names in `dir` (an atomic write must leave no temporary behind).
std::vector<std::string> entries(const std::string& dir);

}  // namespace diffvk::test
