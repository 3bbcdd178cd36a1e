#include "cli_run.hpp"

#include <doctest/doctest.h>
#include <sys/wait.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>

namespace diffvk::test {

CliResult run_cli(const TempDir& tmp, const std::string& args, const std::string& env) {
  const std::string log = tmp / "cli.log";
  const auto t0 = std::chrono::steady_clock::now();
  const int rc =
      std::system((env + " timeout 120 " + std::string(DIFFVK_CLI_PATH) + " " + args + " > " + log + " 2>&1").c_str());
  CliResult r;
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  r.exit_code = rc != -1 && WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
  std::ifstream f(log);
  r.out.assign(std::istreambuf_iterator<char>(f), {});
  std::remove(log.c_str());
  CHECK_MESSAGE(r.out.find("validation: ") == std::string::npos, "validation message from the CLI: " << r.out);
  return r;
}

void write_tokens(const std::string& path, const std::vector<int64_t>& ids) {
  std::string dict = "{'descr': '<i8', 'fortran_order': False, 'shape': (" + std::to_string(ids.size()) + ",), }";
  const size_t total = 10 + dict.size() + 1, padded = (total + 63) / 64 * 64;
  dict.append(padded - total, ' ');
  dict += '\n';
  std::string bytes = "\x93NUMPY";
  bytes += '\x01';
  bytes += '\0';
  bytes += char(dict.size() & 0xff);
  bytes += char(dict.size() >> 8);
  bytes += dict;
  bytes.append(reinterpret_cast<const char*>(ids.data()), ids.size() * 8);
  write_text(path, bytes);
}

std::vector<std::string> entries(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
  return names;
}

}  // namespace diffvk::test
