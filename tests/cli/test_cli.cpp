// The diffvk CLI against bad flags and paths (issue 6): a usage message or an error and a non-zero
// exit; output files are written atomically (a failed run leaves no partial file and an existing
// file untouched). Runs DIFFVK_CLI_PATH on a synthesized tiny model.
#include <doctest/doctest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "model_fixture.hpp"
#include "io/npy.hpp"

using namespace diffvk;

namespace {

struct CliResult {
  int exit_code = -1;
  std::string out;  // stdout + stderr
};

CliResult run_cli(const test::TempDir& tmp, const std::string& args) {
  const std::string log = tmp / "cli.log";
  const int rc = std::system((std::string(DIFFVK_CLI_PATH) + " " + args + " > " + log + " 2>&1").c_str());
  CliResult r;
  r.exit_code = rc != -1 && WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
  std::ifstream f(log);
  r.out.assign(std::istreambuf_iterator<char>(f), {});
  std::remove(log.c_str());
  // The CLI inherits DIFFVK_VALIDATION=1 (tests/test_main.cpp): any validation message fails the test.
  CHECK_MESSAGE(r.out.find("validation: ") == std::string::npos, "validation message from the CLI: " << r.out);
  return r;
}

// A version 1.0 '<i8' .npy of token ids.
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
  test::write_text(path, bytes);
}

// Names in `dir` other than the expected ones (leftover temporaries of an atomic write).
std::vector<std::string> entries(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& e : test::fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
  return names;
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("cli: logits rejects bad flags and paths with a message and a non-zero exit") {
  test::TempDir tmp("diffvk-cli");
  const std::string model = tmp / "model";
  test::write_tiny_model(model);
  const std::string tokens = tmp / "tokens.npy";
  write_tokens(tokens, {2, 72, 101, 108, 108, 111});
  const std::string outdir = tmp / "out";
  test::fs::create_directories(outdir);
  const std::string out = outdir + "/logits.npy";
  const std::string base = "logits --model " + model + " --tokens " + tokens + " --output " + out;

  SUBCASE("the valid command works and leaves only its output") {
    const auto r = run_cli(tmp, base + " --prompt-len 3");
    INFO(r.out);
    REQUIRE(r.exit_code == 0);
    CHECK_FALSE(contains(r.out, "validation:"));
    const NpyArray a = read_npy(out);
    CHECK(a.shape == std::vector<int64_t>{6, 256});
    CHECK(entries(outdir) == std::vector<std::string>{"logits.npy"});
  }
  SUBCASE("bad --prompt-len values") {
    for (const char* bad : {"0", "7", "-1", "abc", "1e99", "99999999999999999999"}) {
      CAPTURE(bad);
      const auto r = run_cli(tmp, base + " --prompt-len " + bad);
      INFO(r.out);
      CHECK(r.exit_code != 0);
      CHECK(contains(r.out, "prompt-len"));
      CHECK_FALSE(test::fs::exists(out));
    }
  }
  SUBCASE("usage errors print the usage hint") {
    for (const std::string& args : {std::string("logits"), std::string("logits --bogus"), base + " --prompt-len 3 --bogus",
                                    base.substr(0, base.find(" --output")) + " --prompt-len 3", std::string("")}) {
      CAPTURE(args);
      const auto r = run_cli(tmp, args);
      INFO(r.out);
      CHECK(r.exit_code != 0);
      CHECK(contains(r.out, "--help"));
    }
  }
  SUBCASE("a missing model directory") {
    const auto r = run_cli(tmp, "logits --model " + (tmp / "no-such-model") + " --tokens " + tokens + " --output " + out +
                                    " --prompt-len 3");
    INFO(r.out);
    CHECK(r.exit_code != 0);
    CHECK(contains(r.out, "no-such-model"));
    CHECK_FALSE(test::fs::exists(out));
  }
  SUBCASE("a model directory without the checkpoint files") {
    test::fs::create_directories(tmp / "empty-model");
    const auto r = run_cli(tmp, "logits --model " + (tmp / "empty-model") + " --tokens " + tokens + " --output " + out +
                                    " --prompt-len 3");
    INFO(r.out);
    CHECK(r.exit_code != 0);
    CHECK(contains(r.out, "config.json"));
    CHECK_FALSE(test::fs::exists(out));
  }
  SUBCASE("missing or malformed tokens") {
    auto r = run_cli(tmp, "logits --model " + model + " --tokens " + (tmp / "none.npy") + " --output " + out + " --prompt-len 3");
    CHECK(r.exit_code != 0);
    CHECK(contains(r.out, "none.npy"));
    test::write_text(tmp / "garbage.npy", "not an npy file");
    r = run_cli(tmp, "logits --model " + model + " --tokens " + (tmp / "garbage.npy") + " --output " + out + " --prompt-len 3");
    INFO(r.out);
    CHECK(r.exit_code != 0);
    CHECK(contains(r.out, "garbage.npy"));
    CHECK_FALSE(test::fs::exists(out));
  }
  SUBCASE("an output path in a nonexistent directory fails with no partial file") {
    const std::string missing = tmp / "no-such-dir";
    const auto r = run_cli(tmp, "logits --model " + model + " --tokens " + tokens + " --output " + missing +
                                    "/logits.npy --prompt-len 3");
    INFO(r.out);
    CHECK(r.exit_code != 0);
    CHECK(contains(r.out, "no-such-dir"));
    CHECK_FALSE(test::fs::exists(missing));
  }
  SUBCASE("an output path that is a directory fails and leaves it alone") {
    const auto r = run_cli(tmp, "logits --model " + model + " --tokens " + tokens + " --output " + outdir + " --prompt-len 3");
    INFO(r.out);
    CHECK(r.exit_code != 0);
    CHECK(test::fs::is_directory(outdir));
    CHECK(entries(outdir).empty());
  }
}

TEST_CASE("cli: a failed logits run leaves an existing output file untouched") {
  test::TempDir tmp("diffvk-cli");
  const std::string model = tmp / "model";
  test::write_tiny_model(model);
  const std::string outdir = tmp / "out";
  test::fs::create_directories(outdir);
  const std::string out = outdir + "/logits.npy";
  const std::string keep = "previous results, must survive a failed run\n";
  test::write_text(out, keep);
  auto unchanged = [&] {
    const auto now = test::read_bytes(out);
    CHECK(std::string(now.begin(), now.end()) == keep);
    CHECK(entries(outdir) == std::vector<std::string>{"logits.npy"});  // no temporaries left behind
  };
  const std::string good = tmp / "tokens.npy", bad_id = tmp / "bad_id.npy", too_long = tmp / "long.npy";
  write_tokens(good, {2, 72, 101});
  write_tokens(bad_id, {2, 72, 256, 101});              // 256 is outside the vocabulary: fails in prefill
  write_tokens(too_long, std::vector<int64_t>(65, 65));  // longer than max_position_embeddings (64)

  auto r = run_cli(tmp, "logits --model " + model + " --tokens " + bad_id + " --output " + out + " --prompt-len 2");
  INFO(r.out);
  CHECK(r.exit_code != 0);
  CHECK(contains(r.out, "256"));
  unchanged();
  r = run_cli(tmp, "logits --model " + model + " --tokens " + too_long + " --output " + out + " --prompt-len 60");
  INFO(r.out);
  CHECK(r.exit_code != 0);
  CHECK(contains(r.out, "context"));
  unchanged();
  r = run_cli(tmp, "logits --model " + model + " --tokens " + good + " --output " + out + " --prompt-len 9");
  CHECK(r.exit_code != 0);
  unchanged();
  r = run_cli(tmp, "logits --model " + model + " --tokens " + good + " --output " + out + " --prompt-len 2 --context 2");
  INFO(r.out);
  CHECK(r.exit_code != 0);
  unchanged();
  // And a successful run replaces it atomically.
  r = run_cli(tmp, "logits --model " + model + " --tokens " + good + " --output " + out + " --prompt-len 2");
  INFO(r.out);
  REQUIRE(r.exit_code == 0);
  CHECK(read_npy(out).shape == std::vector<int64_t>{3, 256});
  CHECK(entries(outdir) == std::vector<std::string>{"logits.npy"});
}
