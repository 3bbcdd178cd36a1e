// Hostile inputs, second round, at the platform file layer: size lies (read_fd_range checks
// the caller's size against fstat before allocating), non-regular targets of write_file_atomic (left as
// they are), long target names (the temporary's name fits NAME_MAX) and temporaries left by a killed run
// (removed on a later write to the same target once 10 minutes old; links never followed).
#include <doctest/doctest.h>

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "file_test_util.hpp"
#include "platform.hpp"
#include "tmp_names.hpp"

using namespace io_test;
using diffvk::Error;
using diffvk::Status;

namespace {
long max_rss_kib() {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_maxrss;
}

// A pid that no process has now: a child that has exited and been reaped.
pid_t dead_pid() {
  const pid_t p = ::fork();
  if (p == 0) ::_exit(0);
  REQUIRE(p > 0);
  int status = 0;
  REQUIRE(::waitpid(p, &status, 0) == p);
  return p;
}

// Sets the modification time of `path` itself (a link: the link, not its target) `seconds` in the past.
void age(const std::string& path, long seconds) {
  struct timespec t[2];
  REQUIRE(::clock_gettime(CLOCK_REALTIME, &t[0]) == 0);
  t[0].tv_sec -= seconds;
  t[1] = t[0];
  REQUIRE(::utimensat(AT_FDCWD, path.c_str(), t, AT_SYMLINK_NOFOLLOW) == 0);
}
}  // namespace

TEST_CASE("io: read_fd_range refuses a size larger than the file before allocating") {
  TempDir dir;
  const std::string p = dir.file("small.bin");
  put_file(p, std::string(1 << 20, 'x'));
  const int fd = ::open(p.c_str(), O_RDONLY | O_CLOEXEC);
  REQUIRE(fd >= 0);
  const uint64_t lie = 9ull << 28;  // 2.25 GiB
  // The peak memory is measured in a child process, whose peak no earlier test has raised.
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    const long start = max_rss_kib();
    try {
      diffvk::platform::read_fd_range(fd, 0, lie, "small.bin");
    } catch (const Error&) {}
    ::_exit(max_rss_kib() - start < 64 * 1024 ? 0 : 1);
  }
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  CHECK_MESSAGE((WIFEXITED(status) && WEXITSTATUS(status) == 0), "the size lie was allocated before the check");
  const long before = max_rss_kib();
  CHECK_ERROR(diffvk::platform::read_fd_range(fd, 0, lie, "small.bin"), Status::io_error,
              "the file ends after 1048576");
  CHECK_ERROR(diffvk::platform::read_fd_range(fd, 2 << 20, 1, "small.bin"), Status::io_error, "the file ends after 0");
  CHECK(diffvk::platform::read_fd_range(fd, 1000, 24, "small.bin").size() == 24);
  CHECK_MESSAGE(max_rss_kib() - before < 64 * 1024, "peak memory grew by " << (max_rss_kib() - before) << " KiB");
  ::close(fd);
}

TEST_CASE("io: write_file_atomic leaves a FIFO or a device node as it is") {
  TempDir dir;
  const std::string fifo = dir.file("out.fifo"), link = dir.file("out.null");
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  REQUIRE(::symlink("/dev/null", link.c_str()) == 0);
  CHECK_ERROR(diffvk::platform::write_file_atomic(fifo, "x", 1), Status::io_error,
              "a FIFO (named pipe), not a regular file");
  CHECK_ERROR(diffvk::platform::write_file_atomic(link, "x", 1), Status::io_error,
              "a character device, not a regular file");
  struct stat st;
  REQUIRE(::lstat(fifo.c_str(), &st) == 0);
  CHECK(S_ISFIFO(st.st_mode));
  REQUIRE(::lstat(link.c_str(), &st) == 0);
  CHECK(S_ISLNK(st.st_mode));
  CHECK(dir.entries().size() == 2);
}

TEST_CASE("io: write_file_atomic takes target names up to NAME_MAX") {
  TempDir dir;
  for (size_t len : {size_t(200), size_t(229), size_t(230), size_t(250), size_t(255)}) {
    CAPTURE(len);
    const std::string name = std::string(len - 4, 'n') + ".bin";
    const std::string p = dir.file(name);
    diffvk::platform::write_file_atomic(p, "abc", 3);
    CHECK(get_file(p) == std::vector<uint8_t>{'a', 'b', 'c'});
    diffvk::platform::write_file_atomic(p, "de", 2);  // and over it
    CHECK(get_file(p) == std::vector<uint8_t>{'d', 'e'});
  }
  // Two long names that share their first 229 bytes get different temporaries and both work.
  const std::string a = std::string(240, 'm') + "a", b = std::string(240, 'm') + "b";
  diffvk::platform::write_file_atomic(dir.file(a), "1", 1);
  diffvk::platform::write_file_atomic(dir.file(b), "2", 1);
  CHECK(get_file(dir.file(a)) == std::vector<uint8_t>{'1'});
  CHECK(get_file(dir.file(b)) == std::vector<uint8_t>{'2'});
  for (const auto& e : dir.entries()) CHECK_MESSAGE(!contains(e, ".tmp."), "leftover " << e);
}

// Only regular files of the target's pattern, of a dead pid, not modified for 10 minutes: a fresh one, a link
// (not followed) and other names are kept.
TEST_CASE("io: write_file_atomic removes the temporaries a killed run left for the same target") {
  TempDir dir;
  const std::string target = dir.file("out.npy");
  const std::string dead = std::to_string(dead_pid());
  const std::string stale = "out.npy.tmp." + dead + ".0", stale2 = "out.npy.tmp." + dead + ".17";
  const std::string other = "other.npy.tmp." + dead + ".0";                       // another target's: kept
  const std::string alive = "out.npy.tmp." + std::to_string(::getppid()) + ".0";  // a live process's: kept
  const std::string odd = "out.npy.tmp.x.0";                                      // not a temporary's name: kept
  const std::string fresh = "out.npy.tmp." + dead + ".5";  // modified less than 10 minutes ago: kept
  const std::string link = "out.npy.tmp." + dead + ".6";   // a link with the pattern: kept, not followed
  const std::string victim = "victim.bin";                 // what the link points to: kept
  for (const auto& n : {stale, stale2, other, alive, odd, fresh, victim}) put_file(dir.file(n), std::string("partial"));
  REQUIRE(::symlink(dir.file(victim).c_str(), dir.file(link).c_str()) == 0);
  for (const auto& n : {stale, stale2, other, alive, odd, victim, link}) age(dir.file(n), 11 * 60);
  std::vector<std::string> logs;
  diffvk::platform::set_log_sink([&](diffvk::platform::LogLevel, const std::string& m) { logs.push_back(m); });
  diffvk::platform::write_file_atomic(target, "new", 3);
  diffvk::platform::set_log_sink(nullptr);
  auto present = [&](const std::string& n) { return fs::exists(dir.file(n)); };
  CHECK_FALSE(present(stale));
  CHECK_FALSE(present(stale2));
  CHECK(present(other));
  CHECK(present(alive));
  CHECK(present(odd));
  CHECK(present(fresh));
  struct stat st;
  CHECK((::lstat(dir.file(link).c_str(), &st) == 0 && S_ISLNK(st.st_mode)));
  CHECK(get_file(dir.file(victim)) == std::vector<uint8_t>{'p', 'a', 'r', 't', 'i', 'a', 'l'});
  CHECK(get_file(target) == std::vector<uint8_t>{'n', 'e', 'w'});
  REQUIRE(logs.size() == 2);
  CHECK(contains(logs[0], "a temporary file left by a run that ended during a write (pid " + dead + ")"));
  // The same for a long target name, whose temporaries have a shortened stem.
  const std::string long_name = std::string(250, 'L');
  const std::string stem = diffvk::platform::tmp_stem(long_name);
  CHECK(stem.size() + 26 <= 255);
  const std::string long_stale = stem + ".tmp." + dead + ".3";
  put_file(dir.file(long_stale), std::string("partial"));
  age(dir.file(long_stale), 11 * 60);
  diffvk::platform::write_file_atomic(dir.file(long_name), "1", 1);
  CHECK_FALSE(present(long_stale));
  CHECK(present(long_name));
}
