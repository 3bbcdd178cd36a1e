// The diffvk CLI against bad flags and paths: a usage message or an error and a non-zero
// exit; output files are written atomically (a failed run leaves no partial file and an existing
// file untouched). Runs DIFFVK_CLI_PATH on a synthesized tiny model.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "cli_run.hpp"
#include "model_fixture.hpp"
#include "diffvk/npy.hpp"

using namespace diffvk;

namespace {

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("cli: logits rejects bad flags and paths with a message and a non-zero exit") {
  test::TempDir tmp("diffvk-cli");
  const std::string model = tmp / "model";
  test::write_tiny_model(model);
  const std::string tokens = tmp / "tokens.npy";
  test::write_tokens(tokens, {2, 72, 101, 108, 108, 111});
  const std::string outdir = tmp / "out";
  test::fs::create_directories(outdir);
  const std::string out = outdir + "/logits.npy";
  const std::string base = "logits --model " + model + " --tokens " + tokens + " --output " + out;

  SUBCASE("the valid command works and leaves only its output") {
    const auto r = test::run_cli(tmp, base + " --prompt-len 3");
    INFO(r.out);
    REQUIRE(r.exit_code == 0);
    CHECK_FALSE(contains(r.out, "validation:"));
    const NpyArray a = read_npy(out);
    CHECK(a.shape == std::vector<int64_t>{6, 256});
    CHECK(test::entries(outdir) == std::vector<std::string>{"logits.npy"});
  }
  SUBCASE("bad --prompt-len values") {
    for (const char* bad : {"0", "7", "-1", "abc", "1e99", "99999999999999999999"}) {
      CAPTURE(bad);
      const auto r = test::run_cli(tmp, base + " --prompt-len " + bad);
      INFO(r.out);
      CHECK(r.exit_code != 0);
      CHECK(contains(r.out, "prompt-len"));
      CHECK_FALSE(test::fs::exists(out));
    }
  }
  SUBCASE("usage errors print the usage hint") {
    for (const std::string& args :
         {std::string("logits"), std::string("logits --bogus"), base + " --prompt-len 3 --bogus",
          base.substr(0, base.find(" --output")) + " --prompt-len 3", std::string("")}) {
      CAPTURE(args);
      const auto r = test::run_cli(tmp, args);
      INFO(r.out);
      CHECK(r.exit_code != 0);
      CHECK(contains(r.out, "--help"));
    }
  }
  SUBCASE("a missing model directory or one without the checkpoint files") {
    test::fs::create_directories(tmp / "empty-model");
    const struct {
      const char* model;
      const char* phrase;  // the message names what is missing
    } cases[] = {{"no-such-model", "no-such-model"}, {"empty-model", "config.json"}};
    for (const auto& c : cases) {
      CAPTURE(c.model);
      const auto r = test::run_cli(
          tmp, "logits --model " + (tmp / c.model) + " --tokens " + tokens + " --output " + out + " --prompt-len 3");
      INFO(r.out);
      CHECK(r.exit_code != 0);
      CHECK(contains(r.out, c.phrase));
      CHECK_FALSE(test::fs::exists(out));
    }
  }
  SUBCASE("missing or malformed tokens") {
    auto r = test::run_cli(
        tmp, "logits --model " + model + " --tokens " + (tmp / "none.npy") + " --output " + out + " --prompt-len 3");
    CHECK(r.exit_code != 0);
    CHECK(contains(r.out, "none.npy"));
    test::write_text(tmp / "garbage.npy", "not an npy file");
    r = test::run_cli(
        tmp, "logits --model " + model + " --tokens " + (tmp / "garbage.npy") + " --output " + out + " --prompt-len 3");
    INFO(r.out);
    CHECK(r.exit_code != 0);
    CHECK(contains(r.out, "garbage.npy"));
    CHECK_FALSE(test::fs::exists(out));
  }
  SUBCASE("an output path in a nonexistent directory fails with no partial file") {
    const std::string missing = tmp / "no-such-dir";
    const auto r = test::run_cli(
        tmp, "logits --model " + model + " --tokens " + tokens + " --output " + missing + "/logits.npy --prompt-len 3");
    INFO(r.out);
    CHECK(r.exit_code != 0);
    CHECK(contains(r.out, "no-such-dir"));
    CHECK_FALSE(test::fs::exists(missing));
  }
  SUBCASE("an output path that is a directory fails and leaves it alone") {
    const auto r = test::run_cli(
        tmp, "logits --model " + model + " --tokens " + tokens + " --output " + outdir + " --prompt-len 3");
    INFO(r.out);
    CHECK(r.exit_code != 0);
    CHECK(test::fs::is_directory(outdir));
    CHECK(test::entries(outdir).empty());
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
    CHECK(test::entries(outdir) == std::vector<std::string>{"logits.npy"});  // no temporaries left behind
  };
  const std::string good = tmp / "tokens.npy", bad_id = tmp / "bad_id.npy", too_long = tmp / "long.npy";
  test::write_tokens(good, {2, 72, 101});
  test::write_tokens(bad_id, {2, 72, 256, 101});               // 256 is outside the vocabulary: fails in prefill
  test::write_tokens(too_long, std::vector<int64_t>(65, 65));  // longer than max_position_embeddings (64)

  const struct {
    const char* label;
    std::string tokens, args;
    const char* phrase;  // the message names the problem ("" when any message will do)
  } failures[] = {
      {"token outside the vocabulary", bad_id, "--prompt-len 2", "256"},
      {"longer than the context", too_long, "--prompt-len 60", "context"},
      {"prompt-len past the tokens", good, "--prompt-len 9", ""},
      {"context shorter than the tokens", good, "--prompt-len 2 --context 2", ""},
  };
  for (const auto& c : failures) {
    CAPTURE(c.label);
    const auto r =
        test::run_cli(tmp, "logits --model " + model + " --tokens " + c.tokens + " --output " + out + " " + c.args);
    INFO(r.out);
    CHECK(r.exit_code != 0);
    if (*c.phrase) CHECK(contains(r.out, c.phrase));
    unchanged();
  }
  // And a successful run replaces it atomically.
  const auto r =
      test::run_cli(tmp, "logits --model " + model + " --tokens " + good + " --output " + out + " --prompt-len 2");
  INFO(r.out);
  REQUIRE(r.exit_code == 0);
  CHECK(read_npy(out).shape == std::vector<int64_t>{3, 256});
  CHECK(test::entries(outdir) == std::vector<std::string>{"logits.npy"});
}
