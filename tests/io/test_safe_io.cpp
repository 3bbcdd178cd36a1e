// Items 3-5: inputs that cannot hang or eat memory, outputs that never destroy inputs,
// and checks that come before any compute (CLI and C ABI).
#include <doctest/doctest.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "diffvk/diffvk.h"
#include "diffvk/model.hpp"
#include "cli_run.hpp"
#include "c_api_fixture.hpp"
#include "gpu_test.hpp"
#include "model_fixture.hpp"
#include "platform.hpp"

extern char** environ;

using namespace diffvk;

namespace {

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// Unblocks a reader that (wrongly) blocks in open() on a FIFO: for `seconds`, opens the write end
// non-blocking whenever a reader is there and closes it at once (the reader then sees EOF).
struct FifoUnblocker {
  explicit FifoUnblocker(std::string path, double seconds = 3.0) : path_(std::move(path)) {
    th_ = std::thread([this, seconds] {
      const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
      while (!stop_ && std::chrono::steady_clock::now() < end) {
        if (std::chrono::steady_clock::now() > end - std::chrono::duration<double>(seconds - 1.5)) {  // after 1.5 s
          const int fd = ::open(path_.c_str(), O_WRONLY | O_NONBLOCK);
          if (fd >= 0) ::close(fd);
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
    });
  }
  ~FifoUnblocker() {
    stop_ = true;
    th_.join();
  }
  std::string path_;
  std::atomic<bool> stop_{false};
  std::thread th_;
};

template <class F>
double seconds_of(F&& f) {
  const auto t0 = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

TEST_CASE("inputs: a FIFO, a device node, a directory and a symlink loop are refused at once, naming the file") {
  test::TempDir tmp("diffvk-safe");
  const std::string fifo = tmp / "fifo", loop = tmp / "loop";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  REQUIRE(::symlink(loop.c_str(), loop.c_str()) == 0);
  for (const std::string& path : {fifo, std::string("/dev/zero"), std::string("/dev/urandom"), tmp.path(), loop}) {
    CAPTURE(path);
    FifoUnblocker unblock(fifo);
    for (int mapped = 0; mapped < 2; ++mapped) {
      std::string what;
      const double s = seconds_of([&] {
        try {
          if (mapped)
            platform::MappedFile f(path);
          else
            platform::read_file(path, uint64_t(1) << 32);
        } catch (const Error& e) {
          what = e.what();
        }
      });
      CAPTURE(what);
      CHECK(s < 1.0);
      CHECK(contains(what, path));  // the error names the file
      if (path != loop) CHECK((contains(what, "not a regular file") || contains(what, "directory")));
    }
  }
}

TEST_CASE("inputs: a model directory whose files are a FIFO or /dev/zero fails at once") {
  test::TempDir tmp("diffvk-safe");
  const std::string dir = tmp / "model";
  test::write_tiny_model(dir);
  auto ctx = test::make_context();
  // Loading fails within a second, naming `file` as not a regular file.
  auto check_refused_at_once = [&](const char* file) {
    std::string what;
    const double s = seconds_of([&] {
      try {
        Model::load(*ctx, dir);
      } catch (const Error& e) {
        what = e.what();
      }
    });
    CAPTURE(what);
    CHECK(s < 1.0);
    CHECK(contains(what, file));
    CHECK(contains(what, "not a regular file"));
  };
  SUBCASE("config.json is a FIFO") {
    test::fs::remove(dir + "/config.json");
    REQUIRE(::mkfifo((dir + "/config.json").c_str(), 0600) == 0);
    FifoUnblocker unblock(dir + "/config.json");
    check_refused_at_once("config.json");
  }
  SUBCASE("model.safetensors links to /dev/zero") {
    test::fs::remove(dir + "/model.safetensors");
    REQUIRE(::symlink("/dev/zero", (dir + "/model.safetensors").c_str()) == 0);
    check_refused_at_once("model.safetensors");
  }
}

TEST_CASE("cli: inputs that would hang or never end are refused within a second") {
  test::TempDir tmp("diffvk-safe");
  const std::string model = tmp / "model";
  test::write_tiny_model(model);
  const std::string fifo = tmp / "tokens.fifo";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  FifoUnblocker unblock(fifo, 10.0);
  for (const std::string& tokens : {std::string("/dev/zero"), std::string("/dev/urandom"), fifo}) {
    CAPTURE(tokens);
    auto r = test::run_cli(
        tmp, "logits --model " + model + " --tokens " + tokens + " --prompt-len 1 --output " + (tmp / "o.npy"));
    CAPTURE(r.out);
    CHECK(r.exit_code != 0);
    CHECK(r.exit_code != 124);  // not killed by timeout
    CHECK(contains(r.out, tokens));
    CHECK(contains(r.out, "not a regular file"));
    CHECK(r.seconds < 5.0);  // process start included; the check itself is immediate
  }
}

TEST_CASE("cli: an output that is an input is refused before any work and the input is untouched") {
  test::TempDir tmp("diffvk-safe");
  const std::string model = tmp / "model";
  test::write_tiny_model(model);
  const std::string tokens = tmp / "t.npy";
  test::write_tokens(tokens, {2, 72, 101, 108, 108, 111});
  const auto tokens_before = test::read_bytes(tokens);
  const auto weights_before = test::read_bytes(model + "/model.safetensors");
  const std::string link = tmp / "link.npy", hard = tmp / "hard.npy";
  REQUIRE(::symlink(tokens.c_str(), link.c_str()) == 0);
  REQUIRE(::link(tokens.c_str(), hard.c_str()) == 0);
  for (const std::string& out :
       {tokens, link, hard, model + "/model.safetensors", model + "/config.json", model + "/../model/config.json"}) {
    CAPTURE(out);
    auto r = test::run_cli(tmp, "logits --model " + model + " --tokens " + tokens + " --prompt-len 2 --output " + out);
    CAPTURE(r.out);
    CHECK(r.exit_code != 0);
    CHECK(contains(r.out, "same file"));
    CHECK(!contains(r.out, " positions ("));  // nothing computed
  }
  CHECK(test::read_bytes(tokens) == tokens_before);
  CHECK(test::read_bytes(model + "/model.safetensors") == weights_before);
  // The layer command: --output equal to --input.
  auto r = test::run_cli(tmp, "layer --weights " + model + "/model.safetensors --num-heads 2 --depth 0 --input " +
                                  tokens + " --output " + link);
  CAPTURE(r.out);
  CHECK(r.exit_code != 0);
  CHECK(contains(r.out, "same file"));
  CHECK(test::read_bytes(tokens) == tokens_before);
}

TEST_CASE("cli: checks come before the compute (output directory, tokens, prompt length, context, sampling)") {
  test::TempDir tmp("diffvk-safe");
  const std::string model = tmp / "model";
  test::write_tiny_model(model);  // vocab 256 (tests/common/model_fixture.hpp), max_position_embeddings 64
  const std::string tokens = tmp / "t.npy", empty = tmp / "empty.npy", bad = tmp / "bad.npy", longer = tmp / "long.npy";
  test::write_tokens(tokens, {2, 72, 101, 108, 108, 111});
  test::write_tokens(empty, {});
  test::write_tokens(bad, {2, 72, 101, 108, 999, 111});  // index 4, a decoded token (prompt-len 2)
  test::write_tokens(longer, std::vector<int64_t>(20, 65));
  const std::string base = "logits --model " + model + " --tokens ";
  struct Case {
    std::string args, expect;
  } cases[] = {
      {base + tokens + " --prompt-len 2 --output " + tmp.path() + "/no/such/dir/o.npy", "directory"},
      {base + empty + " --prompt-len 1 --output " + (tmp / "o.npy"), "holds no tokens"},
      {base + tokens + " --prompt-len 7 --output " + (tmp / "o.npy"), "holds 6 tokens"},
      {base + bad + " --prompt-len 2 --output " + (tmp / "o.npy"), "at index 4"},
      {base + longer + " --prompt-len 2 --context 16 --output " + (tmp / "o.npy"), "exceed the context of 16"},
      {"run --model " + model + " -p hi -n 2 --temperature nan", "temperature"},
      {"run --model " + model + " -p hi -n 2 --temperature inf", "temperature"},
      {"run --model " + model + " -p hi -n 2 --temperature -1", "temperature"},
      {"run --model " + model + " -p hi -n 2 --top-p 0", "--top-p: must be a finite number in (0, 1]"},
      {"run --model " + model + " -p hi -n 2 --top-p nan", "--top-p: must be a finite number in (0, 1]"},
      {"run --model " + model + " -p hi -n 2 --top-p 1.5", "--top-p: must be a finite number in (0, 1]"},
  };
  for (const auto& c : cases) {
    CAPTURE(c.args);
    auto r = test::run_cli(tmp, c.args);
    CAPTURE(r.out);
    CHECK(r.exit_code != 0);
    CHECK(contains(r.out, c.expect));
    CHECK(!contains(r.out, " positions ("));
    CHECK(!test::fs::exists(tmp / "o.npy"));
  }
  // The same sampling rules in the C ABI.
  diffvk_sampler* s = nullptr;
  for (const auto& tp :
       {std::pair<float, float>{NAN, 1.0f}, {INFINITY, 1.0f}, {-1.0f, 1.0f}, {1.0f, 0.0f}, {1.0f, NAN}, {1.0f, 1.5f}}) {
    const float t = tp.first, p = tp.second;  // not structured bindings: CAPTURE cannot capture those (clang 14)
    CAPTURE(t);
    CAPTURE(p);
    CHECK(diffvk_sampler_create(t, 0, p, 1, &s) == DIFFVK_INVALID_ARGUMENT);
    CHECK(s == nullptr);
  }
}

TEST_CASE("c_api: prefill sizes and token ranges are checked before anything is copied or dispatched") {
  test::TempDir tmp("diffvk-safe");
  const std::string dir = tmp / "model";
  test::write_tiny_model(dir);
  test::FailOnLoggedValidation fail_on_messages;  // the C ABI context has no callback
  auto [c, m, s, lg] = test::open_c_api(dir, 16, 4);
  const int32_t toks[4] = {2, 72, 101, 108};
  // n = 2^40 with a 4-token buffer: must be refused by its size alone (old: copied -> OUT_OF_MEMORY or a crash).
  CHECK(diffvk_session_prefill(s, toks, size_t(1) << 40, lg.data(), lg.size()) == DIFFVK_CONTEXT_OVERFLOW);
  CHECK(diffvk_session_prefill(s, toks, 17, lg.data(), lg.size()) == DIFFVK_CONTEXT_OVERFLOW);
  const int32_t bad[4] = {2, 72, int32_t(lg.size()), 108};  // the vocabulary size
  CHECK(diffvk_session_prefill(s, bad, 4, lg.data(), lg.size()) == DIFFVK_INVALID_ARGUMENT);
  CHECK(std::string(diffvk_last_error()).find("at index 2") != std::string::npos);
  uint32_t pos = 99;
  CHECK(diffvk_session_position(s, &pos) == DIFFVK_OK);
  CHECK(pos == 0);
  CHECK(diffvk_session_prefill(s, toks, 4, lg.data(), lg.size()) == DIFFVK_OK);
  CHECK(diffvk_session_destroy(s) == DIFFVK_OK);
  CHECK(diffvk_model_destroy(m) == DIFFVK_OK);
  CHECK(diffvk_context_destroy(c) == DIFFVK_OK);
}

TEST_CASE("cli: SIGTERM, SIGINT or SIGHUP during the output write ends the CLI and leaves no temporary file") {
  test::TempDir tmp("diffvk-safe");
  const std::string model = tmp / "model";
  test::write_tiny_model(model);
  const std::string tokens = tmp / "t.npy";
  test::write_tokens(tokens, {2, 72, 101, 108});
  for (int sig : {SIGTERM, SIGINT, SIGHUP}) {
    CAPTURE(sig);
    const std::string outdir = tmp / ("out" + std::to_string(sig));
    test::fs::create_directory(outdir);
    const std::string out = outdir + "/o.npy";
    std::vector<std::string> args = {DIFFVK_CLI_PATH, "logits",       "--model", model,      "--tokens",
                                     tokens,          "--prompt-len", "2",       "--output", out};
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    // The write pauses with its temporary written: the test-only shim preloaded (after any preload already set).
    std::vector<std::string> env_s;
    std::string preload = DIFFVK_FSYNC_PAUSE_SHIM;
    for (char** e = environ; *e; ++e) {
      const std::string v = *e;
      if (v.rfind("LD_PRELOAD=", 0) == 0)
        preload = v.substr(11) + ":" + preload;
      else
        env_s.push_back(v);
    }
    env_s.push_back("LD_PRELOAD=" + preload);
    env_s.push_back("DIFFVK_TEST_FSYNC_PAUSE_MS=20000");
    std::vector<char*> envp;
    for (auto& e : env_s) envp.push_back(e.data());
    envp.push_back(nullptr);
    pid_t pid = 0;
    REQUIRE(posix_spawn(&pid, DIFFVK_CLI_PATH, nullptr, nullptr, argv.data(), envp.data()) == 0);
    // Wait for the temporary to appear (the write pauses with it open), then interrupt.
    bool seen = false;
    for (int i = 0; i < 1200 && !seen; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      seen = !test::entries(outdir).empty();
    }
    CHECK(seen);
    ::kill(pid, sig);
    int status = 0;
    REQUIRE(::waitpid(pid, &status, 0) == pid);
    CHECK(WIFSIGNALED(status));
    if (WIFSIGNALED(status)) CHECK(WTERMSIG(status) == sig);
    CHECK(test::entries(outdir).empty());  // neither the output nor its temporary
  }
}

// Item 6: every validation-layer or loader message of warning/error severity, of ANY type (also the
// loader's "general" ones), fails the test, except the exact loader messages on the allowlist
// (runtime/vk/instance.cpp: known_loader_messages, a foreign-architecture Mesa's ICD JSON).
TEST_CASE("validation: a general loader message fails unless it is exactly on the allowlist") {
  test::TempDir tmp("diffvk-safe");
  // An ELF header of another architecture than the host's.
  std::vector<uint8_t> elf(64, 0);
  std::memcpy(elf.data(),
              "\x7f"
              "ELF",
              4);
  elf[4] = 2;  // ELFCLASS64
  elf[5] = 1;  // little endian
  elf[6] = 1;
#if defined(__x86_64__)
  const uint16_t machine = 183;  // EM_AARCH64
#else
  const uint16_t machine = 62;  // EM_X86_64
#endif
  elf[18] = uint8_t(machine & 0xff);
  elf[19] = uint8_t(machine >> 8);
  test::write_bytes(tmp / "libvulkan_foreign.so", elf.data(), elf.size());
  auto icd = [&](const std::string& name, const std::string& lib) {
    test::write_text(tmp / name, "{\"file_format_version\": \"1.0.0\", \"ICD\": {\"library_path\": \"" + lib +
                                     "\", \"api_version\": \"1.3.0\"}}");
    return tmp / name;
  };
  const std::string foreign = icd("foreign.json", tmp / "libvulkan_foreign.so");
  const std::string missing = icd("missing.json", tmp / "libvulkan_missing.so");
  auto messages_with = [&](const std::string& json) {
    // The loader ignores VK_ADD_DRIVER_FILES while VK_DRIVER_FILES selects the drivers (CI's SwiftShader
    // pass): then the extra JSON is appended to VK_DRIVER_FILES itself.
    const char* sel = std::getenv("VK_DRIVER_FILES");
    const std::string saved = sel ? sel : "";
    const bool selected = !saved.empty();
    const char* var = selected ? "VK_DRIVER_FILES" : "VK_ADD_DRIVER_FILES";
    ::setenv(var, (selected ? saved + ":" + json : json).c_str(), 1);
    std::atomic<int> n{0};
    ContextOptions o;
    o.validation = 1;
    o.on_validation_message = [&](MessageSeverity, const std::string& m) {
      ++n;
      MESSAGE("reported: " << m);
    };
    { auto ctx = Context::create(o); }
    if (selected)
      ::setenv(var, saved.c_str(), 1);
    else
      ::unsetenv(var);
    return n.load();
  };
  CHECK(messages_with(foreign) == 0);  // allowlisted: logged only
  CHECK(messages_with(missing) > 0);   // a general loader error not on the list: reported (fails tests)
}
