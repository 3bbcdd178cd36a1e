// `diffvk run --prompt-cache FILE`: the saved state of the prompt is restored,
// only what differs from it is prefilled, and the generated text is the same as without the cache. Also
// `--pipeline-cache FILE` (the driver's compiled pipelines between runs).
#include <doctest/doctest.h>

#include <cstdio>
#include <string>

#include "cli_run.hpp"
#include "model_fixture.hpp"

using namespace diffvk;

namespace {
const std::string kModel = std::string(DIFFVK_TEST_DATA_DIR) + "/../../examples/models/tiny-diff";

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }
// The prompt and the generated text: what `run` prints on stdout before its statistics (stdout and stderr
// share the log: loader or cache messages may come first).
std::string text_of(const std::string& out) {
  const size_t from = out.find("The cat sat");
  const size_t to = out.find("\n\ndiffvk run:");
  return from < to && to != std::string::npos ? out.substr(from, to - from) : "(no text in: " + out + ")";
}
}  // namespace

TEST_CASE("cli: run --prompt-cache reuses the saved prompt, gives the same text, and rewrites a bad cache") {
  test::TempDir tmp("diffvk-prompt-cache");
  const std::string cache = tmp.path() + "/prompt.state";
  const std::string run = "run --model " + kModel + " -n 12 --prompt-cache " + cache + " --prompt ";
  const auto plain = test::run_cli(tmp, "run --model " + kModel + " -n 12 --prompt 'The cat sat on the'");
  REQUIRE(plain.exit_code == 0);

  const auto first = test::run_cli(tmp, run + "'The cat sat on the'");
  INFO(first.out);
  REQUIRE(first.exit_code == 0);
  CHECK(contains(first.out, "prompt cache: 0 of 19 prompt tokens reused"));
  CHECK(text_of(first.out) == text_of(plain.out));

  const auto second = test::run_cli(tmp, run + "'The cat sat on the'");
  INFO(second.out);
  CHECK(second.exit_code == 0);
  CHECK(contains(second.out, "prompt cache: 18 of 19 prompt tokens reused"));
  CHECK(text_of(second.out) == text_of(plain.out));

  // Another ending: the common prefix is kept ("The cat sat " = BOS + 12 bytes).
  const auto other = test::run_cli(tmp, run + "'The cat sat by the'");
  INFO(other.out);
  CHECK(other.exit_code == 0);
  CHECK(contains(other.out, "prompt cache: 13 of 19 prompt tokens reused"));

  // A corrupt cache is named, not used, and rewritten; the run still gives the plain text.
  {
    const auto bad =
        test::run_cli(tmp, "run --model " + kModel + " -n 1 --prompt x --prompt-cache " + tmp.path() + "/none");
    CHECK(bad.exit_code == 0);  // absent: created
  }
  test::write_text(cache, std::string(100, 'z'));
  const auto corrupt = test::run_cli(tmp, run + "'The cat sat on the'");
  INFO(corrupt.out);
  CHECK(corrupt.exit_code == 0);
  CHECK(contains(corrupt.out, "--prompt-cache not used"));
  CHECK(contains(corrupt.out, "not a diffvk session state"));
  CHECK(text_of(corrupt.out) == text_of(plain.out));
  const auto after = test::run_cli(tmp, run + "'The cat sat on the'");
  CHECK(contains(after.out, "prompt cache: 18 of 19 prompt tokens reused"));

  // A directory at the path is an error before any output.
  const auto dir = test::run_cli(tmp, "run --model " + kModel + " -n 2 --prompt x --prompt-cache " + tmp.path());
  CHECK(dir.exit_code != 0);
  CHECK(contains(dir.out, "not a regular file"));
}

TEST_CASE("cli: run --stop ends the text where a stop string (across tokens) begins, and says why it stopped") {
  test::TempDir tmp("diffvk-run-stop");
  const std::string prompt = "The cat sat on the";
  const auto plain = test::run_cli(tmp, "run --model " + kModel + " -n 24 --prompt '" + prompt + "'");
  INFO(plain.out);
  REQUIRE(plain.exit_code == 0);
  CHECK(contains(plain.out, "stopped: max tokens"));
  const std::string text = text_of(plain.out);
  REQUIRE(text.size() >= prompt.size() + 8);
  // Three printable ASCII bytes of the generated text, not quotes (the shell) nor newlines.
  std::string stop;
  for (size_t k = prompt.size() + 2; k + 3 <= text.size() && stop.empty(); ++k) {
    const std::string c = text.substr(k, 3);
    bool ok = true;
    for (char ch : c) ok = ok && ch >= 0x20 && ch < 0x7F && ch != '\'' && ch != '\\';
    if (ok) stop = c;
  }
  if (stop.empty()) return;  // nothing printable came out (the bundled model's text is bytes)
  const size_t at = text.find(stop, prompt.size());
  const auto cut = test::run_cli(
      tmp, "run --model " + kModel + " -n 24 --stop '" + stop + "' --stop 'never, ever' --prompt '" + prompt + "'");
  INFO(cut.out);
  CHECK(cut.exit_code == 0);
  CHECK(contains(cut.out, "stopped: stop string \"" + stop + "\""));
  CHECK(text_of(cut.out) == text.substr(0, at));
  const auto bad = test::run_cli(tmp, "run --model " + kModel + " -n 4 --stop '' --prompt x");
  CHECK(bad.exit_code != 0);
  CHECK(contains(bad.out, "stop string 0 is empty"));
}

TEST_CASE("cli: run --chat-template puts the prompt in the chat format, and auto needs the model template") {
  test::TempDir tmp("diffvk-run-chat");
  const auto chat =
      test::run_cli(tmp, "run --model " + kModel + " -n 4 --chat-template chatml --system 'Be brief.' --prompt 'Hi'");
  INFO(chat.out);
  CHECK(chat.exit_code == 0);
  CHECK(contains(chat.out, "chat template chatml"));
  CHECK(contains(chat.out,
                 "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"));
  const auto none = test::run_cli(tmp, "run --model " + kModel + " -n 4 --chat-template auto --prompt 'Hi'");
  CHECK(none.exit_code != 0);
  CHECK(contains(none.out, "has no chat template"));
  const auto unknown = test::run_cli(tmp, "run --model " + kModel + " -n 4 --chat-template vicuna --prompt 'Hi'");
  CHECK(unknown.exit_code != 0);
  CHECK(contains(unknown.out, "no chat template family 'vicuna'"));
  const auto lone = test::run_cli(tmp, "run --model " + kModel + " -n 4 --system 'Be brief.' --prompt 'Hi'");
  CHECK(lone.exit_code != 0);
  CHECK(contains(lone.out, "--system needs --chat-template"));
}

TEST_CASE("cli: --pipeline-cache creates the driver's cache, reuses it, and refuses a file that is not one") {
  test::TempDir tmp("diffvk-pipeline-cache");
  const std::string cache = tmp.path() + "/pipelines.bin";
  const std::string run = "run --model " + kModel + " -n 2 --prompt x --pipeline-cache ";
  const auto first = test::run_cli(tmp, run + cache);
  INFO(first.out);
  REQUIRE(first.exit_code == 0);
  CHECK(contains(first.out, "pipeline cache miss (missing"));
  const auto second = test::run_cli(tmp, run + cache);
  INFO(second.out);
  CHECK(second.exit_code == 0);
  CHECK(contains(second.out, "pipeline cache hit"));
  // Anything else at the path is refused before any work, and left as it was.
  const std::string other = tmp.path() + "/notes.txt";
  test::write_text(other, "keep me\n");
  const auto refused = test::run_cli(tmp, run + other);
  CHECK(refused.exit_code != 0);
  CHECK(contains(refused.out, "is not a diffvk pipeline cache"));
  const auto dir = test::run_cli(tmp, run + tmp.path());
  CHECK(dir.exit_code != 0);
  CHECK(contains(dir.out, "not a regular file"));
  std::FILE* f = std::fopen(other.c_str(), "rb");
  REQUIRE(f);
  char buf[16] = {};
  const size_t n = std::fread(buf, 1, sizeof buf, f);
  std::fclose(f);
  CHECK(std::string(buf, n) == "keep me\n");
}
