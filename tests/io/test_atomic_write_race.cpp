// write_file_atomic (platform) against a FIFO or a directory that appears at the target between its
// first check and the rename: on Linux the rename is an exchange, checked afterwards and undone,
// so the FIFO stays where it was and the write fails naming it. The window is the test-only seam
// platform::testing::set_after_temp_write (the write pauses with its temporary written).
#include <doctest/doctest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "diffvk/error.hpp"
#include "file_test_util.hpp"
#include "platform.hpp"
#include "platform_test_hooks.hpp"

using namespace io_test;

#if defined(__linux__)
TEST_CASE("io: a FIFO or directory that appears during an atomic write is left as it is") {
  for (const bool fifo : {true, false}) {
    CAPTURE(fifo);
    TempDir tmp;
    const std::string path = tmp.path + "/out.bin";
    put_file(path, "old");
    std::string error;
    diffvk::platform::testing::set_after_temp_write(
        [](const std::string&) { std::this_thread::sleep_for(std::chrono::milliseconds(1000)); });
    std::thread writer([&] {
      try {
        diffvk::platform::write_file_atomic(path, "new", 3);
      } catch (const diffvk::Error& e) {
        error = e.what();
      }
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(300));  // the writer has checked the target (it pauses 1 s)
    REQUIRE(::unlink(path.c_str()) == 0);
    REQUIRE((fifo ? ::mkfifo(path.c_str(), 0600) : ::mkdir(path.c_str(), 0700)) == 0);
    writer.join();
    diffvk::platform::testing::set_after_temp_write(nullptr);
    struct stat st;
    REQUIRE(::lstat(path.c_str(), &st) == 0);
    CHECK((fifo ? S_ISFIFO(st.st_mode) : S_ISDIR(st.st_mode)));
    CHECK(
        contains(error, fifo ? "it is a FIFO (named pipe), not a regular file (left as it is)" : "it is a directory"));
    CHECK(tmp.entries() == std::vector<std::string>{"out.bin"});  // the temporary is removed
  }
}

TEST_CASE("io: an atomic write over a regular file or nothing still works after the exchange") {
  TempDir tmp;
  const std::string path = tmp.path + "/out.bin";
  diffvk::platform::write_file_atomic(path, "one", 3);
  CHECK(get_file(path) == std::vector<uint8_t>{'o', 'n', 'e'});
  diffvk::platform::write_file_atomic(path, "two!", 4);
  CHECK(get_file(path) == std::vector<uint8_t>{'t', 'w', 'o', '!'});
  CHECK(tmp.entries() == std::vector<std::string>{"out.bin"});
}
#endif
