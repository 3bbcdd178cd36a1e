// diffvk perplexity on the bundled model (examples/models/tiny-diff) with the first
// kilobyte of README.md: text report, JSON with the same numbers, --kl-base f16, and the errors (missing
// file, a text shorter than one window, an unknown --kl-base) named with a non-zero exit.
#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <string>

#include "cli_run.hpp"
#include "model_fixture.hpp"

using namespace diffvk;

namespace {
bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }
const std::string kBundled = std::string(DIFFVK_TEST_DATA_DIR) + "/../../examples/models/tiny-diff";
}  // namespace

TEST_CASE("cli: perplexity of the bundled model with --kl-base f16") {
  test::TempDir tmp("diffvk-ppl-cli");
  const auto readme = test::read_bytes(std::string(DIFFVK_TEST_DATA_DIR) + "/../../README.md");
  REQUIRE(readme.size() >= 1024);
  const std::string text = tmp / "text.txt";
  test::write_bytes(text, readme.data(), 1024);
  const std::string model_text = "perplexity --model " + kBundled + " --text " + text;
  const std::string base = model_text + " --context 128";

  const auto r = test::run_cli(tmp, base + " --weights q8_0 --kl-base f16 --json " + (tmp / "p.json"));
  INFO(r.out);
  REQUIRE(r.exit_code == 0);
  CHECK(contains(r.out, "perplexity: "));
  CHECK(contains(r.out, "top-1 agreement"));
  CHECK_FALSE(contains(r.out, "validation:"));
  const auto bytes = test::read_bytes(tmp / "p.json");
  const auto j = nlohmann::json::parse(bytes.begin(), bytes.end());
  CHECK(j["tokens"] == 1025);  // BOS + 1024 bytes
  CHECK(j["windows"] == 8);
  CHECK(j["scored"] == 8 * 63);
  CHECK(j["weights"] == "q8_0");
  const double ppl = j["ppl"], nll = j["mean_nll"];
  CHECK(ppl == doctest::Approx(std::exp(nll)));
  CHECK(ppl > 1.0);
  CHECK(ppl < 100.0);  // README.md's Markdown is not the training prose, but far below the 256 of a uniform guess
  CHECK(double(j["ppl_se"]) > 0.0);
  REQUIRE(j.contains("kl_base"));
  CHECK(double(j["kl_base"]["kl_mean"]) >= 0.0);
  CHECK(double(j["kl_base"]["kl_mean"]) < 0.05);
  CHECK(double(j["kl_base"]["top1_agreement"]) > 0.9);
  CHECK(test::entries(tmp.path()).size() == 2);  // text.txt and p.json: no temporary left

  SUBCASE("errors name the problem") {
    auto e = test::run_cli(tmp, "perplexity --model " + kBundled + " --text " + (tmp / "missing.txt"));
    CHECK(e.exit_code != 0);
    CHECK(contains(e.out, "missing.txt"));
    e = test::run_cli(tmp, model_text + " --context 2000");
    CHECK(e.exit_code != 0);
    CHECK(contains(e.out, "max_position_embeddings"));
    const std::string short_text = tmp / "short.txt";
    test::write_bytes(short_text, readme.data(), 100);
    e = test::run_cli(tmp, "perplexity --model " + kBundled + " --text " + short_text + " --context 128");
    CHECK(e.exit_code != 0);
    CHECK(contains(e.out, "shorter than one window"));
    e = test::run_cli(tmp, base + " --kl-base q4_0");
    CHECK(e.exit_code != 0);
    e = test::run_cli(tmp, "perplexity --model " + kBundled + " --text " + tmp.path());
    CHECK(e.exit_code != 0);
    CHECK(contains(e.out, "not a regular file"));
  }
}
