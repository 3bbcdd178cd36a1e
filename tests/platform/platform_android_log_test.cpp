// platform/android.cpp on Linux: logging through __android_log_write (Debian's liblog from
// android-liblog-dev, which prints "diffvk I <date> <time> <pid> <tid> message" on stderr), the level
// filter, the sink, and the app-provided cache directory; plus read_fd / read_fd_range.
// Built with DIFFVK_PLATFORM_ANDROID_ON_HOST (tests/CMakeLists.txt), so platform_posix.cpp leaves
// logging and cache_dir to android.cpp exactly as on Android.
#include <android/log.h>
#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "platform.hpp"

#if !DIFFVK_PLATFORM_ANDROID
#  error "build with DIFFVK_PLATFORM_ANDROID_ON_HOST"
#endif

namespace p = diffvk::platform;
using diffvk::Error;
using diffvk::Status;

static int g_failures = 0;
#define CHECK(cond)                                                 \
  do {                                                              \
    if (!(cond)) {                                                  \
      std::printf("FAILED %s:%d: %s\n", __FILE__, __LINE__, #cond); \
      ++g_failures;                                                 \
    }                                                               \
  } while (0)

template <class F>
static Status status_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.status();
  }
  return Status::ok;
}

// Runs f with fd 2 redirected to a temporary file; returns what was written there.
template <class F>
static std::string capture_stderr(F&& f) {
  char path[] = "/tmp/diffvk-logtest.XXXXXX";
  int tmp = ::mkstemp(path);
  if (tmp < 0) return "<mkstemp failed>";
  std::fflush(stderr);
  int saved = ::dup(2);
  ::dup2(tmp, 2);
  f();
  std::fflush(stderr);
  ::dup2(saved, 2);
  ::close(saved);
  ::close(tmp);
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  ::unlink(path);
  return ss.str();
}

static std::vector<std::string> lines_of(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string line;
  while (std::getline(ss, line)) out.push_back(line);
  return out;
}

// A liblog line for tag diffvk with this priority letter that ends with msg.
static bool has_line(const std::vector<std::string>& lines, char prio, const std::string& msg) {
  const std::string head = std::string("diffvk ") + prio + " ";
  for (const auto& l : lines)
    if (l.compare(0, head.size(), head) == 0 && l.size() >= msg.size() &&
        l.compare(l.size() - msg.size(), msg.size(), msg) == 0)
      return true;
  return false;
}

int main() {
  // Debian's host liblog drops priorities below INFO unless told otherwise (a device shows DEBUG for
  // app tags by default). __android_log_set_minimum_priority exists on Android only from API 30, so
  // android.cpp itself never calls it.
  __android_log_set_minimum_priority(ANDROID_LOG_VERBOSE);

  // 1. Every level reaches liblog with the right priority; the level filter applies first.
  p::set_log_level(p::LogLevel::debug);
  std::string out = capture_stderr([] {
    p::log(p::LogLevel::debug, "message at debug");
    p::log(p::LogLevel::info, "message at info");
    p::log(p::LogLevel::warn, "message at warn");
    p::log(p::LogLevel::error, "message at error");
  });
  std::printf("liblog output:\n%s", out.c_str());
  auto lines = lines_of(out);
  CHECK(has_line(lines, 'D', "message at debug"));
  CHECK(has_line(lines, 'I', "message at info"));
  CHECK(has_line(lines, 'W', "message at warn"));
  CHECK(has_line(lines, 'E', "message at error"));

  p::set_log_level(p::LogLevel::warn);
  out = capture_stderr([] {
    p::log(p::LogLevel::info, "filtered info");
    p::log(p::LogLevel::warn, "kept warn");
  });
  lines = lines_of(out);
  CHECK(out.find("filtered info") == std::string::npos);
  CHECK(has_line(lines, 'W', "kept warn"));
  CHECK(p::log_level() == p::LogLevel::warn);

  // 2. A message longer than a logcat entry is split (at newlines when possible, else at the limit)
  // and nothing is lost.
  p::set_log_level(p::LogLevel::info);
  std::string big(9000, 'x');
  std::string multi = std::string(3000, 'a') + "\n" + std::string(3000, 'b') + "\n" + std::string(3000, 'c');
  out = capture_stderr([&] {
    p::log(p::LogLevel::info, big);
    p::log(p::LogLevel::info, multi);
  });
  lines = lines_of(out);
  size_t xs = 0, entries_x = 0;
  bool a_line = false, b_line = false, c_line = false;
  for (const auto& l : lines) {
    if (l.find("xxxx") != std::string::npos) {
      ++entries_x;
      for (char ch : l.substr(l.find("xxxx"))) xs += ch == 'x';
    }
    a_line |= l.size() >= 3000 && l.compare(l.size() - 3000, 3000, std::string(3000, 'a')) == 0;
    b_line |= l.size() >= 3000 && l.compare(l.size() - 3000, 3000, std::string(3000, 'b')) == 0;
    c_line |= l.size() >= 3000 && l.compare(l.size() - 3000, 3000, std::string(3000, 'c')) == 0;
  }
  std::printf("9000-byte message: %zu entries, %zu bytes; 3 x 3000-byte lines: %s\n", entries_x, xs,
              a_line && b_line && c_line ? "3 entries" : "NOT split at newlines");
  CHECK(entries_x == 3);
  CHECK(xs == 9000);
  CHECK(a_line && b_line && c_line);

  // 3. A sink replaces logcat; nullptr restores it.
  std::vector<std::string> captured;
  out = capture_stderr([&] {
    p::set_log_sink([&](p::LogLevel, const std::string& m) { captured.push_back(m); });
    p::log(p::LogLevel::error, "to the sink");
    p::set_log_sink(nullptr);
    p::log(p::LogLevel::error, "back to liblog");
  });
  CHECK(captured.size() == 1 && captured[0] == "to the sink");
  CHECK(out.find("to the sink") == std::string::npos);
  CHECK(has_line(lines_of(out), 'E', "back to liblog"));

  // 4. cache_dir: unset on Android -> io_error naming set_cache_dir; then "<base>/diffvk".
  CHECK(status_of([] { (void)p::cache_dir(); }) == Status::io_error);
  p::set_cache_dir("/data/user/0/org.example.diffvk/cache/");
  CHECK(p::cache_dir() == "/data/user/0/org.example.diffvk/cache/diffvk");
  CHECK(status_of([] { p::set_cache_dir("relative/dir"); }) == Status::invalid_argument);
  CHECK(p::cache_dir() == "/data/user/0/org.example.diffvk/cache/diffvk");
  p::set_cache_dir("");
  CHECK(status_of([] { (void)p::cache_dir(); }) == Status::io_error);

  // 5. read_fd / read_fd_range (POSIX, shared with Android).
  char path[] = "/tmp/diffvk-fdtest.XXXXXX";
  int fd = ::mkstemp(path);
  CHECK(fd >= 0);
  const std::string data = "0123456789abcdef";
  CHECK(::write(fd, data.data(), data.size()) == ssize_t(data.size()));
  CHECK(::lseek(fd, 4, SEEK_SET) == 4);
  auto rest = p::read_fd(fd, 100, path);
  CHECK(std::string(rest.begin(), rest.end()) == "456789abcdef");
  auto mid = p::read_fd_range(fd, 10, 3, path);
  CHECK(std::string(mid.begin(), mid.end()) == "abc");
  CHECK(::lseek(fd, 0, SEEK_SET) == 0);
  CHECK(status_of([&] { p::read_fd(fd, 8, path); }) == Status::format_error);
  CHECK(status_of([&] { p::read_fd_range(fd, 10, 100, path); }) == Status::io_error);
  CHECK(status_of([] { p::read_fd(-1, 8); }) == Status::invalid_argument);
  ::close(fd);
  ::unlink(path);
  int pipefd[2];
  CHECK(::pipe(pipefd) == 0);
  CHECK(::write(pipefd[1], "pipe!", 5) == 5);
  ::close(pipefd[1]);
  auto piped = p::read_fd(pipefd[0], 5);
  CHECK(std::string(piped.begin(), piped.end()) == "pipe!");
  ::close(pipefd[0]);

  std::printf("platform_android_log_test: %s\n", g_failures ? "FAILED" : "passed");
  return g_failures ? 1 : 0;
}
