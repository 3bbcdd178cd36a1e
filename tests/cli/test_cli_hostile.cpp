// Hostile inputs, second round, through the diffvk command: standard output on a full device
// (a non-zero exit and a message, not a silent loss), numeric options with a sign or past their type's
// range (refused before any work), --context/--chunk/-n past the model's context (refused naming the option),
// a --top-k past the vocabulary (the whole vocabulary), signed and floating-point options that are NaN, infinite,
// negative or absurd (refused at parse time, naming the option and its range), a 250-byte output file name (works), a
// FIFO as the model's tokenizer (an error, not a hang).
#include <doctest/doctest.h>

#include <sys/stat.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "cli_run.hpp"
#include "diffvk/npy.hpp"

using namespace diffvk;

namespace {
bool has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// The CLI with standard output on `out` and standard error in a log: {exit code, stderr}.
std::pair<int, std::string> run_to(const test::TempDir& tmp, const std::string& args, const std::string& out) {
  const std::string log = tmp / "stderr.log";
  const int rc =
      std::system(("timeout 120 " + std::string(DIFFVK_CLI_PATH) + " " + args + " > " + out + " 2> " + log).c_str());
  std::ifstream f(log);
  return {WIFEXITED(rc) ? WEXITSTATUS(rc) : -1, std::string(std::istreambuf_iterator<char>(f), {})};
}

// A command line the CLI must refuse, naming `option` and, when given, its `range`.
struct Refusal {
  std::string args, option, range;
};

// Each case exits non-zero with its option (and range) in the output; with `at_parse`, within 10 s.
void check_refused(const test::TempDir& tmp, const std::vector<Refusal>& cases, bool at_parse) {
  for (const auto& c : cases) {
    CAPTURE(c.args);
    const auto r = test::run_cli(tmp, c.args);
    INFO(r.out);
    CHECK(r.exit_code != 0);
    CHECK(has(r.out, c.option));
    if (!c.range.empty()) CHECK(has(r.out, c.range));
    if (at_parse) CHECK(r.seconds < 10);  // refused at parse time: no device, no model load
  }
}

void check_accepted(const test::TempDir& tmp, const std::string& args) {
  CAPTURE(args);
  const auto ok = test::run_cli(tmp, args);
  INFO(ok.out);
  CHECK(ok.exit_code == 0);
}
}  // namespace

TEST_CASE("cli: standard output on a full device gives a non-zero exit and a message") {
  test::TempDir tmp("diffvk-cli-full");
  const std::string model = tmp / "model";
  test::write_tiny_model(model);
  for (const std::string& args : {"run --model " + model + " --prompt hi -n 2", "plan --model " + model}) {
    CAPTURE(args);
    const auto ok = run_to(tmp, args, "/dev/null");
    INFO(ok.second);
    REQUIRE(ok.first == 0);
    const auto full = run_to(tmp, args, "/dev/full");
    INFO(full.second);
    CHECK(full.first == 1);
    CHECK(has(full.second, "cannot write to standard output"));
  }
}

TEST_CASE("cli: numeric options with a sign or out of range are refused") {
  test::TempDir tmp("diffvk-cli-range");
  const std::string model = tmp / "model";
  test::write_tiny_model(model);
  const std::string run = "run --model " + model + " --prompt hi -n 1";
  check_refused(tmp,
                {
                    {run + " --seed -1", "--seed"},
                    {run + " --seed 99999999999999999999999", "--seed"},
                    {run + " --seed +5", "--seed"},
                    {run + " --top-k -1", "--top-k"},
                    {run + " --context -5", "--context"},
                    {run + " --chunk -1", "--chunk"},
                    {"run --model " + model + " --prompt hi -n -1", "-n"},
                    {"plan --model " + model + " --context -1", "--context"},
                    {"bench --runs -1", "--runs"},
                    {"shader-stats --heads -4", "--heads"},
                    // Against the model (max_position_embeddings 64), before any session.
                    {run + " --context 4294967295", "--context", "max_position_embeddings 64"},
                    {run + " --chunk 4294967295", "--chunk", "exceeds the context of 64 tokens"},
                    {run + " --context 16 --chunk 17", "--chunk", "exceeds the context of 16 tokens"},
                    {"perplexity --model " + model + " --text " + model + "/config.json --context 32 --chunk 33",
                     "--chunk", "exceeds the context of 32 tokens"},
                    {"perplexity --model " + model + " --text " + model + "/config.json --context 4", "--context",
                     "must be in [8, 64]"},
                    {"run --model " + model + " --prompt hi -n 4294967295", "-n", "exceed the context of 64"},
                    {"chat --model " + model + " -n 64 < /dev/null", "-n", "no room for a prompt"},
                },
                false);
  check_accepted(tmp, run + " --seed 18446744073709551615");
  check_accepted(tmp, run + " --top-k 4294967295 --temperature 1");  // the whole vocabulary
}

TEST_CASE("cli: signed and floating-point options out of range are refused before any work") {
  test::TempDir tmp("diffvk-cli-float");
  const std::string model = tmp / "model";
  test::write_tiny_model(model);
  const std::string run = "run --model " + model + " --prompt hi -n 1";
  const std::string logits =
      "logits --model " + model + " --tokens " + (tmp / "t.npy") + " --output " + (tmp / "o.npy");
  test::write_tokens(tmp / "t.npy", {1, 2, 3});
  // Each command prefix and option with the values it refuses, naming the option and its range.
  struct Bad {
    std::string command, option, range;
    std::vector<std::string> values;
  };
  const Bad bad[] = {
      {run, "--temperature", "[0, 100]", {"nan", "-0.5", "inf", "1e30", "1x"}},
      {run, "--top-p", "(0, 1]", {"nan", "0", "1.5", "-inf"}},
      {logits, "--prompt-len", "1", {"-1", "0", "99999999999"}},
      {"bench", "--budget", "(0, 86400]", {"nan", "-1", "inf"}},
      {"bench", "--cooldown", "[0, 600]", {"nan", "-1", "1e9"}},
      {"bench", "--copy-mib", "[1, 65536]", {"nan", "0", "inf"}},
      {"bench", "--runs", "1", {"-3", "0"}},
      {"bench", "--warmup", "0", {"-1", "1000000000"}},
  };
  std::vector<Refusal> cases;
  for (const Bad& b : bad)
    for (const std::string& v : b.values) cases.push_back({b.command + " " + b.option + " " + v, b.option, b.range});
  const std::string layer = "layer --weights " + model + "/model.safetensors --num-heads 2 --depth ";
  const std::string layer_io = " --input " + model + "/config.json --output " + (tmp / "y.npy");
  cases.push_back({"attn-map --model " + model + " --prompt hi --layer 0 --head -2", "--head", "0"});
  cases.push_back({layer + "-1" + layer_io, "--depth", "0"});
  cases.push_back({layer + "0 --rope-theta nan" + layer_io, "--rope-theta", "(0, 1e+09]"});
  check_refused(tmp, cases, true);
  check_accepted(tmp, run + " --temperature 0.7 --top-p 0.9");
  check_accepted(tmp, run + " --temperature 0 --top-p 1");
}

TEST_CASE("cli: a 250-byte output file name works") {
  test::TempDir tmp("diffvk-cli-long");
  const std::string model = tmp / "model";
  test::write_tiny_model(model);
  const std::string tokens = tmp / "tokens.npy";
  test::write_tokens(tokens, {2, 72, 101, 108});
  const std::string name = std::string(246, 'o') + ".npy";
  const auto r = test::run_cli(
      tmp, "logits --model " + model + " --tokens " + tokens + " --prompt-len 2 --output " + (tmp / name));
  INFO(r.out);
  REQUIRE(r.exit_code == 0);
  CHECK(read_npy(tmp / name).shape == std::vector<int64_t>{4, 256});
  for (const auto& e : test::entries(tmp.path())) CHECK_MESSAGE(e.find(".tmp.") == std::string::npos, "leftover " << e);
}

TEST_CASE("cli: a FIFO as the model's tokenizer file is an error and not a hang") {
  test::TempDir tmp("diffvk-cli-fifo");
  const std::string model = tmp / "model";
  test::write_tiny_model(model);
  REQUIRE(::mkfifo((model + "/tokenizer.json").c_str(), 0600) == 0);
  const auto r = test::run_cli(tmp, "run --model " + model + " --prompt hi -n 1");
  INFO(r.out);
  CHECK(r.exit_code == 1);
  CHECK(has(r.out, "FIFO"));
  CHECK(r.seconds < 60);
}
