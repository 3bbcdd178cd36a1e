// diffvk — tests of the platform file layer (platform/): read_file, write_file_atomic (failures leave no
// partial file and no temporaries), logging, cache_dir, MappedFile (a path, a descriptor's range).
#include <doctest/doctest.h>

#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "file_test_util.hpp"
#include "platform.hpp"

using namespace io_test;
using diffvk::Error;
using diffvk::Status;

TEST_CASE("io: read_file and write_file_atomic round trip") {
  TempDir dir;
  const std::string p = dir.file("blob.bin");
  std::vector<uint8_t> data(100000);
  for (size_t i = 0; i < data.size(); ++i) data[i] = uint8_t(i * 31 + 7);
  diffvk::platform::write_file_atomic(p, data.data(), data.size());
  CHECK(diffvk::platform::read_file(p, data.size()) == data);
  CHECK(get_file(p) == data);

  // Overwrite with something shorter; empty file with null data.
  const char small[] = "abc";
  diffvk::platform::write_file_atomic(p, small, 3);
  CHECK(diffvk::platform::read_file(p, 3) == std::vector<uint8_t>{'a', 'b', 'c'});
  diffvk::platform::write_file_atomic(p, nullptr, 0);
  CHECK(diffvk::platform::read_file(p, 0).empty());
  CHECK(dir.entries() == std::vector<std::string>{"blob.bin"});  // no temporaries left

  // Non-regular readable file: /proc files report size 0 but have content.
  if (fs::exists("/proc/self/status")) CHECK(!diffvk::platform::read_file("/proc/self/status", 1 << 20).empty());
}

TEST_CASE("io: read_file errors") {
  TempDir dir;
  CHECK_ERROR(diffvk::platform::read_file(dir.file("nope.bin"), 100), Status::io_error, "nope.bin");
  CHECK_ERROR(diffvk::platform::read_file(dir.file("nope.bin"), 100), Status::io_error, "No such file");
  CHECK_ERROR(diffvk::platform::read_file(dir.path, 100), Status::io_error, "directory");
  put_file(dir.file("ten.bin"), std::string("0123456789"));
  CHECK(diffvk::platform::read_file(dir.file("ten.bin"), 10).size() == 10);
  CHECK_ERROR(diffvk::platform::read_file(dir.file("ten.bin"), 9), Status::format_error, "limit of 9");
  CHECK_ERROR(diffvk::platform::read_file(dir.file("ten.bin"), 0), Status::format_error, "ten.bin");
  // /proc files report st_size 0: the limit must still hold while reading.
  if (fs::exists("/proc/self/status")) {
    CHECK_ERROR(diffvk::platform::read_file("/proc/self/status", 4), Status::format_error, "more than the limit");
  }
}

TEST_CASE("io: write_file_atomic failures leave no partial file and no temporaries") {
  TempDir dir;
  const std::string p = dir.file("keep.bin");
  put_file(p, std::string("old contents"));
  const std::vector<uint8_t> old = get_file(p);
  const char payload[] = "new";

  SUBCASE("directory does not exist") {
    CHECK_ERROR(diffvk::platform::write_file_atomic(dir.file("missing/sub/x.bin"), payload, 3), Status::io_error,
                "missing/sub/x.bin.tmp.");
    CHECK(!fs::exists(dir.file("missing")));
  }
  SUBCASE("path is a directory") {
    fs::create_directory(dir.file("adir"));
    CHECK_ERROR(diffvk::platform::write_file_atomic(dir.file("adir"), payload, 3), Status::io_error, "adir");
    CHECK(fs::is_directory(dir.file("adir")));
    CHECK(fs::is_empty(dir.file("adir")));
  }
  SUBCASE("parent is a regular file") {
    CHECK_ERROR(diffvk::platform::write_file_atomic(p + "/child", payload, 3), Status::io_error, "keep.bin/child");
  }
  SUBCASE("write fails half way (RLIMIT_FSIZE) over an existing file") {
    struct rlimit saved;
    REQUIRE(::getrlimit(RLIMIT_FSIZE, &saved) == 0);
    void (*saved_sig)(int) = ::signal(SIGXFSZ, SIG_IGN);
    struct rlimit small = saved;
    small.rlim_cur = 4096;
    if (saved.rlim_max != RLIM_INFINITY && saved.rlim_max < small.rlim_cur) small.rlim_cur = saved.rlim_max;
    REQUIRE(::setrlimit(RLIMIT_FSIZE, &small) == 0);
    std::vector<uint8_t> big(1 << 20, 0xab);
    bool threw = false;
    try {
      diffvk::platform::write_file_atomic(p, big.data(), big.size());
    } catch (const Error& e) {
      threw = true;
      CHECK(e.status() == Status::io_error);
      CHECK(contains(e.what(), "cannot write"));
    }
    ::setrlimit(RLIMIT_FSIZE, &saved);
    ::signal(SIGXFSZ, saved_sig);
    CHECK(threw);
  }
  SUBCASE("null data with a size") {
    CHECK_ERROR(diffvk::platform::write_file_atomic(p, nullptr, 5), Status::invalid_argument, "null data");
  }
  CHECK(get_file(p) == old);
  for (const auto& name : dir.entries()) CHECK_MESSAGE(!contains(name, ".tmp."), "leftover " << name);
}

TEST_CASE("io: logging sink and level filter") {
  using diffvk::platform::LogLevel;
  const LogLevel saved = diffvk::platform::log_level();
  std::vector<std::pair<LogLevel, std::string>> got;
  diffvk::platform::set_log_sink([&](LogLevel l, const std::string& m) { got.emplace_back(l, m); });
  diffvk::platform::set_log_level(LogLevel::warn);
  diffvk::platform::log(LogLevel::debug, "d");
  diffvk::platform::log(LogLevel::info, "i");
  diffvk::platform::log(LogLevel::warn, "w");
  diffvk::platform::log(LogLevel::error, "e");
  REQUIRE(got.size() == 2);
  CHECK(got[0].first == LogLevel::warn);
  CHECK(got[0].second == "w");
  CHECK(got[1].first == LogLevel::error);
  diffvk::platform::set_log_level(LogLevel::debug);
  diffvk::platform::log(LogLevel::debug, "d2");
  CHECK(got.size() == 3);

  // A throwing sink must not escape log().
  diffvk::platform::set_log_sink([](LogLevel, const std::string&) { throw std::runtime_error("sink"); });
  diffvk::platform::log(LogLevel::error, "x");

  // Default sink: "diffvk: [warn] msg" on stderr.
  diffvk::platform::set_log_sink(nullptr);
  TempDir dir;
  const std::string cap = dir.file("stderr.txt");
  std::fflush(stderr);
  int saved_fd = ::dup(2);
  FILE* f = std::fopen(cap.c_str(), "w");
  REQUIRE(f);
  ::dup2(::fileno(f), 2);
  diffvk::platform::log(LogLevel::warn, "hello log");
  std::fflush(stderr);
  ::dup2(saved_fd, 2);
  ::close(saved_fd);
  std::fclose(f);
  const auto text = get_file(cap);
  CHECK(std::string(text.begin(), text.end()) == "diffvk: [warn] hello log\n");
  diffvk::platform::set_log_level(saved);
  CHECK(std::string(diffvk::platform::log_level_name(LogLevel::error)) == "error");
}

TEST_CASE("io: cache_dir") {
  auto get = [](const char* k) -> std::pair<bool, std::string> {
    const char* v = std::getenv(k);
    return {v != nullptr, v ? v : ""};
  };
  auto restore = [](const char* k, const std::pair<bool, std::string>& v) {
    if (v.first) {
      ::setenv(k, v.second.c_str(), 1);
    } else {
      ::unsetenv(k);
    }
  };
  const auto xdg = get("XDG_CACHE_HOME"), home = get("HOME");
  ::setenv("XDG_CACHE_HOME", "/x/cache", 1);
  ::setenv("HOME", "/home/u", 1);
  CHECK(diffvk::platform::cache_dir() == "/x/cache/diffvk");
  ::setenv("XDG_CACHE_HOME", "relative/ignored", 1);
  CHECK(diffvk::platform::cache_dir() == "/home/u/.cache/diffvk");
  ::unsetenv("XDG_CACHE_HOME");
  CHECK(diffvk::platform::cache_dir() == "/home/u/.cache/diffvk");
  ::unsetenv("HOME");
  try {
    CHECK(!diffvk::platform::cache_dir().empty());  // from the password database
  } catch (const Error& e) {
    CHECK(e.status() == Status::io_error);  // no passwd entry / home directory
  }
  restore("XDG_CACHE_HOME", xdg);
  restore("HOME", home);
  CHECK(!fs::exists("/x/cache/diffvk"));
}

TEST_CASE("io: MappedFile") {
  TempDir dir;
  std::vector<uint8_t> data(10000);
  for (size_t i = 0; i < data.size(); ++i) data[i] = uint8_t(i ^ (i >> 8));
  put_file(dir.file("m.bin"), data);
  diffvk::platform::MappedFile m(dir.file("m.bin"));
  REQUIRE(m.is_open());
  CHECK(m.size() == data.size());
  CHECK(m.is_mapped());
  CHECK(std::memcmp(m.data(), data.data(), data.size()) == 0);
  CHECK(m.path() == dir.file("m.bin"));
  diffvk::platform::MappedFile moved = std::move(m);
  CHECK(moved.size() == data.size());
  CHECK(std::memcmp(moved.data(), data.data(), data.size()) == 0);
  CHECK(!m.is_open());  // NOLINT(bugprone-use-after-move): moved-from is empty by contract
  CHECK(m.size() == 0);

  put_file(dir.file("empty.bin"), std::vector<uint8_t>{});
  auto e = diffvk::platform::MappedFile::open(dir.file("empty.bin"));
  CHECK(e.size() == 0);
  CHECK(e.data() != nullptr);

  CHECK_ERROR(diffvk::platform::MappedFile(dir.file("none.bin")), Status::io_error, "none.bin");
  CHECK_ERROR(diffvk::platform::MappedFile(dir.path), Status::io_error, "directory");
  if (fs::exists("/proc/self/status")) {  // not mappable: read instead
    diffvk::platform::MappedFile s("/proc/self/status");
    CHECK(!s.is_mapped());
    CHECK(s.size() > 0);
  }
}

TEST_CASE("io: MappedFile::map_fd_range maps a descriptor's range and checks it as read_fd_span does") {
  namespace pf = diffvk::platform;
  TempDir dir;
  std::vector<uint8_t> data(3 * 4096 + 123);
  for (size_t i = 0; i < data.size(); ++i) data[i] = uint8_t(i * 7 ^ (i >> 9));
  put_file(dir.file("r.bin"), data);
  const int fd = ::open(dir.file("r.bin").c_str(), O_RDONLY);
  REQUIRE(fd >= 0);
  // An offset inside a page (an asset's range in an APK rarely starts on one), a range to the end (-1), the whole
  // file, an empty range at the end.
  struct Case {
    int64_t offset, size;
    size_t want;
  };
  for (const Case c : {Case{4097, 5000, 5000}, Case{100, -1, data.size() - 100}, Case{0, -1, data.size()},
                       Case{int64_t(data.size()), -1, 0}}) {
    CAPTURE(c.offset);
    CAPTURE(c.size);
    pf::MappedFile m = pf::MappedFile::map_fd_range(fd, c.offset, c.size, "r.bin");
    REQUIRE(m.size() == c.want);
    CHECK(m.is_mapped() == (c.want > 0));
    CHECK(m.data() != nullptr);
    if (c.want) {
      CHECK(std::memcmp(m.data(), data.data() + c.offset, c.want) == 0);
      m.release(0, c.want);  // pages dropped, the contents read again from the file
      CHECK(std::memcmp(m.data(), data.data() + c.offset, c.want) == 0);
    }
  }
  {  // the mapping outlives the descriptor
    const int fd2 = ::dup(fd);
    pf::MappedFile m = pf::MappedFile::map_fd_range(fd2, 10, 20, "r.bin");
    ::close(fd2);
    CHECK(std::memcmp(m.data(), data.data() + 10, 20) == 0);
  }
  // A range past the end would fault on access once mapped: refused before, with read_fd_span's message.
  CHECK_ERROR(pf::MappedFile::map_fd_range(fd, 100, int64_t(data.size()), "r.bin"), Status::io_error,
              "the file ends after");
  CHECK_ERROR(pf::MappedFile::map_fd_range(fd, int64_t(data.size()) + 1, -1, "r.bin"), Status::io_error,
              "past the end");
  CHECK_ERROR(pf::MappedFile::map_fd_range(fd, -1, 10, "r.bin"), Status::invalid_argument, "negative offset");
  CHECK_ERROR(pf::MappedFile::map_fd_range(fd, 0, -2, "r.bin"), Status::invalid_argument, "size -2");
  CHECK_ERROR(pf::MappedFile::map_fd_range(-1, 0, 10, "r.bin"), Status::invalid_argument, "invalid file descriptor");
  ::close(fd);
  int p[2];
  REQUIRE(::pipe(p) == 0);  // not a regular file: size -1 refused as read_fd_span refuses it
  CHECK_ERROR(pf::MappedFile::map_fd_range(p[0], 0, -1, "pipe"), Status::invalid_argument, "regular file");
  ::close(p[0]);
  ::close(p[1]);
}
