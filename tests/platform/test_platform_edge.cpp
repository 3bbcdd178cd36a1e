// Platform additions for edge platforms on Linux: set_cache_dir overrides the XDG default,
// read_fd / read_fd_range (used by Android apps for content:// URIs and uncompressed APK assets).
// platform/android.cpp itself is checked by tests/platform/platform_android_log_test.cpp.
#include <doctest/doctest.h>
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "status_of.hpp"
#include "diffvk/error.hpp"
#include "platform.hpp"

using diffvk::Error;
using diffvk::Status;
namespace p = diffvk::platform;

namespace {
using diffvk::test::status_of;
std::string str(const std::vector<uint8_t>& v) { return std::string(v.begin(), v.end()); }
}  // namespace

TEST_CASE("platform: set_cache_dir overrides the XDG default and can be reset") {
  const char* old_xdg = std::getenv("XDG_CACHE_HOME");
  const std::string saved = old_xdg ? old_xdg : "";
  ::setenv("XDG_CACHE_HOME", "/x/cache", 1);
  CHECK(p::cache_dir() == "/x/cache/diffvk");
  p::set_cache_dir("/data/app/cache/");
  CHECK(p::cache_dir() == "/data/app/cache/diffvk");
  CHECK(status_of([] { p::set_cache_dir("not/absolute"); }) == Status::invalid_argument);
  CHECK(p::cache_dir() == "/data/app/cache/diffvk");  // unchanged by the failed call
  p::set_cache_dir("/");
  CHECK(p::cache_dir() == "/diffvk");
  p::set_cache_dir("");
  CHECK(p::cache_dir() == "/x/cache/diffvk");
  if (old_xdg) {
    ::setenv("XDG_CACHE_HOME", saved.c_str(), 1);
  } else {
    ::unsetenv("XDG_CACHE_HOME");
  }
}

TEST_CASE("platform: read_fd and read_fd_range") {
  char path[] = "/tmp/diffvk-readfd.XXXXXX";
  int fd = ::mkstemp(path);
  REQUIRE(fd >= 0);
  const std::string data = "0123456789abcdef";
  REQUIRE(::write(fd, data.data(), data.size()) == ssize_t(data.size()));

  SUBCASE("from the current offset to EOF; the offset advances") {
    REQUIRE(::lseek(fd, 6, SEEK_SET) == 6);
    CHECK(str(p::read_fd(fd, 10, path)) == "6789abcdef");
    CHECK(p::read_fd(fd, 10, path).empty());  // at EOF now
  }
  SUBCASE("limit") {
    REQUIRE(::lseek(fd, 0, SEEK_SET) == 0);
    CHECK(status_of([&] { p::read_fd(fd, 15, path); }) == Status::format_error);
    REQUIRE(::lseek(fd, 0, SEEK_SET) == 0);
    CHECK(p::read_fd(fd, 16, path).size() == 16);
  }
  SUBCASE("range reads do not move the offset") {
    REQUIRE(::lseek(fd, 2, SEEK_SET) == 2);
    CHECK(str(p::read_fd_range(fd, 10, 6, path)) == "abcdef");
    CHECK(p::read_fd_range(fd, 16, 0, path).empty());
    CHECK(::lseek(fd, 0, SEEK_CUR) == 2);
  }
  SUBCASE("errors") {
    CHECK(status_of([&] { p::read_fd_range(fd, 10, 7, path); }) == Status::io_error);  // past EOF
    CHECK(status_of([] { p::read_fd(-1, 1); }) == Status::invalid_argument);
    CHECK(status_of([] { p::read_fd_range(-1, 0, 1); }) == Status::invalid_argument);
    CHECK(status_of([&] { p::read_fd_range(fd, ~0ull, 2, path); }) == Status::invalid_argument);
    int wfd = ::open(path, O_WRONLY | O_CLOEXEC);
    REQUIRE(wfd >= 0);
    CHECK(status_of([&] { p::read_fd(wfd, 100, path); }) == Status::io_error);  // EBADF: not readable
    ::close(wfd);
  }
  SUBCASE("pipes") {
    int pfd[2];
    REQUIRE(::pipe(pfd) == 0);
    REQUIRE(::write(pfd[1], "through a pipe", 14) == 14);
    ::close(pfd[1]);
    CHECK(str(p::read_fd(pfd[0], 14)) == "through a pipe");
    ::close(pfd[0]);
  }
  ::close(fd);
  ::unlink(path);
}
