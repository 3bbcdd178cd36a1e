// diffvk attn-map on a synthesized tiny model: the PNG is a PNG, the JSON holds one
// T x T matrix per head and map (rows of A1 and A2 sum to 1, nothing above the diagonal, the
// difference is A1 − λ·A2), bad arguments give a message and a non-zero exit. The numbers themselves
// are checked against the float64 reference in test_attn_probs.cpp.
#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <string>

#include "cli_run.hpp"
#include "gpu_test.hpp"

using namespace diffvk;

namespace {
int attn_map(const test::TempDir& tmp, const std::string& args, std::string* out) {
  const test::CliResult r = test::run_cli(tmp, "attn-map " + args);
  *out = r.out;
  return r.exit_code;
}
// Row i of head h of the JSON: A1 and A2 sum to 1, nothing above the diagonal, the difference is A1 − λ·A2.
void check_map_row(const nlohmann::json& h, size_t i, size_t T, double lambda) {
  double s1 = 0, s2 = 0;
  for (size_t k = 0; k < T; ++k) {
    const double a1 = h["a1"][i][k], a2 = h["a2"][i][k], d = h["a1_minus_lambda_a2"][i][k];
    s1 += a1;
    s2 += a2;
    if (k > i) CHECK((a1 == 0 && a2 == 0));
    CHECK(std::fabs(d - (a1 - lambda * a2)) <= 1e-6);
  }
  CHECK(std::fabs(s1 - 1) <= 1e-3);
  CHECK(std::fabs(s2 - 1) <= 1e-3);
}
}  // namespace

TEST_CASE("cli: attn-map writes a PNG and the numbers as JSON") {
  test::TempDir tmp("diffvk-attn-map");
  const std::string model = tmp / "model";
  test::write_tiny_model(model);  // 2 layers, H = 2, bos 2
  std::string out;
  const std::string base = "--model " + model + " --prompt 'Hi there' --layer 1";
  REQUIRE_MESSAGE(attn_map(tmp, base + " --output " + (tmp / "m.png") + " --json " + (tmp / "m.json"), &out) == 0, out);
  const auto png = test::read_bytes(tmp / "m.png");
  REQUIRE(png.size() > 8);
  CHECK(std::string(png.begin() + 1, png.begin() + 4) == "PNG");
  const auto text = test::read_bytes(tmp / "m.json");
  const auto j = nlohmann::json::parse(text.begin(), text.end());
  const size_t T = 9;  // <bos> + 8 bytes
  REQUIRE(j["tokens"].size() == T);
  CHECK(j["labels"][0] == "<bos>");
  CHECK(j["labels"][3] == "_");  // the space
  REQUIRE(j["heads"].size() == 2);
  const double lambda = j["lambda"];
  for (const auto& h : j["heads"])
    for (size_t i = 0; i < T; ++i) check_map_row(h, i, T, lambda);
  // One head only.
  REQUIRE_MESSAGE(attn_map(tmp, base + " --head 1 --json " + (tmp / "h.json"), &out) == 0, out);
  const auto t1 = test::read_bytes(tmp / "h.json");
  const auto j1 = nlohmann::json::parse(t1.begin(), t1.end());
  REQUIRE(j1["heads"].size() == 1);
  CHECK(j1["heads"][0]["a1"] == j["heads"][1]["a1"]);

  // Bad arguments: a message naming the problem and a non-zero exit.
  CHECK(attn_map(tmp, base, &out) != 0);
  CHECK(out.find("--output") != std::string::npos);
  CHECK(attn_map(tmp, "--model " + model + " --prompt x --layer 2 --json " + (tmp / "e.json"), &out) != 0);
  CHECK(out.find("layer 2") != std::string::npos);
  CHECK(attn_map(tmp, base + " --head 2 --json " + (tmp / "e.json"), &out) != 0);
  CHECK(out.find("head 2") != std::string::npos);
  CHECK(attn_map(tmp,
                 "--model " + model + " --prompt " + std::string(300, 'a') + " --layer 0 --json " + (tmp / "e.json"),
                 &out) != 0);
  CHECK(out.find("at most 256") != std::string::npos);
}

// Attn-map on the DIFF V2 fixture (tests/data/model_tiny_v2): the JSON says diff_version 2 and holds,
// per head, the query heads 2h and 2h + 1 and λ of every query row in (0, 1); rows of A1 and A2 sum to 1 and the
// difference is A1 − λ_i·A2.
TEST_CASE("cli: attn-map on a DIFF V2 model writes the lambda rows") {
  const std::string model = test::shared_tiny_v2_model_dir();
  REQUIRE(!model.empty());
  test::TempDir tmp("diffvk-attn-map-v2");
  std::string out;
  const int rc = attn_map(
      tmp,
      "--model " + model + " --prompt 'Hi there' --layer 1 --output " + (tmp / "m.png") + " --json " + (tmp / "m.json"),
      &out);
  REQUIRE_MESSAGE(rc == 0, out);
  CHECK_MESSAGE(out.find("DIFF V2") != std::string::npos, out);
  const auto png = test::read_bytes(tmp / "m.png");
  REQUIRE(png.size() > 8);
  CHECK(std::string(png.begin() + 1, png.begin() + 4) == "PNG");
  const auto text = test::read_bytes(tmp / "m.json");
  const auto j = nlohmann::json::parse(text.begin(), text.end());
  CHECK(j["diff_version"] == 2);
  const size_t T = 9;  // <bos> + 8 bytes
  REQUIRE(j["tokens"].size() == T);
  REQUIRE(j["heads"].size() == 2);
  for (const auto& h : j["heads"]) {
    const unsigned head = h["head"];
    CHECK(h["query_heads"] == nlohmann::json::array({2 * head, 2 * head + 1}));
    REQUIRE(h["lambda_rows"].size() == T);
    for (size_t i = 0; i < T; ++i) {
      const double lambda = h["lambda_rows"][i];
      CHECK((lambda > 0 && lambda < 1));
      check_map_row(h, i, T, lambda);
    }
  }
}

// Every command that takes a checkpoint takes a .gguf (attn-map, chat and bench --model here;
// run, logits and perplexity have their own tests). An output path that is the .gguf itself is refused.
TEST_CASE("cli: attn-map, chat and bench --model take a .gguf file") {
  test::TempDir tmp("diffvk-gguf-cli");
  const std::string model = tmp / "model", gguf = tmp / "model.gguf";
  test::write_tiny_model(model);
  test::CliResult r = test::run_cli(tmp, "quantize --type q8_0 " + model + " " + gguf);
  REQUIRE_MESSAGE(r.exit_code == 0, r.out);
  std::string out;
  CHECK_MESSAGE(attn_map(tmp, "--model " + gguf + " --prompt 'Hi' --layer 0 --output " + (tmp / "g.png"), &out) == 0,
                out);
  CHECK(test::read_bytes(tmp / "g.png").size() > 8);
  CHECK(attn_map(tmp, "--model " + gguf + " --prompt 'Hi' --layer 0 --output " + gguf, &out) !=
        0);  // not over the model
  CHECK_MESSAGE(out.find("refusing to replace an input") != std::string::npos, out);
  // The smallest run that loads and times the model (its ceilings probe dominated this test under ASan).
  r = test::run_cli(tmp, "bench --model " + gguf + " --prompt-tokens 8 --decode-tokens 4 --runs 1 --copy-mib 4");
  CHECK_MESSAGE(r.exit_code == 0, r.out);
  CHECK_MESSAGE(r.out.find("decode") != std::string::npos, r.out);
  r = test::run_cli(tmp, "chat --model " + gguf + " --chat-template chatml < /dev/null");
  CHECK_MESSAGE(r.exit_code == 0, r.out);
  CHECK_MESSAGE(r.out.find("chat template chatml") != std::string::npos, r.out);
}
