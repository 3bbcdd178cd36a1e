// `diffvk chat` through a pseudo-terminal (util-linux `script`): replies stream, /regenerate
// reuses the prompt's prefix, /save and /load keep a conversation, a conversation longer than the context is
// refused with a message and the chat goes on.
#include <doctest/doctest.h>
#include <sys/wait.h>

#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>
#include <tuple>

#include "cli_run.hpp"
#include "gpu_test.hpp"
#include "model_fixture.hpp"
#include "phi4flash_model.hpp"

using namespace diffvk;

namespace {
const std::string kModel = std::string(DIFFVK_TEST_DATA_DIR) + "/../../examples/models/tiny-diff";
bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }
size_t count(const std::string& s, const std::string& part) {
  size_t n = 0;
  for (size_t at = s.find(part); at != std::string::npos; at = s.find(part, at + 1)) ++n;
  return n;
}
// util-linux `script` gives the CLI a pseudo-terminal; without it the test is skipped (test::skip), not passed.
bool have_script() {
  if (std::system("command -v script > /dev/null 2>&1") == 0) return true;
  test::skip("util-linux 'script' (a pseudo-terminal) is not installed");
  return false;
}
// Types `input` into `diffvk chat <args>` running on a pseudo-terminal; returns the exit code and the terminal's text.
std::pair<int, std::string> chat(const test::TempDir& tmp, const std::string& args, const std::string& input,
                                 const std::string& model = kModel) {
  const std::string in = tmp / "in.txt", out = tmp / "out.txt";
  test::write_text(in, input);
  // script runs its command through $SHELL. dash (CI's /bin/sh) does not exec the last command, so a plain
  // `timeout` would put the CLI in a background process group, and its first read of the terminal would stop it
  // (SIGTTIN) until the timeout: --foreground keeps it in the terminal's foreground group, and SHELL is pinned.
  const std::string cmd = "SHELL=/bin/sh script -qefc \"timeout --foreground 120 " + std::string(DIFFVK_CLI_PATH) +
                          " chat --model " + model + " " + args + "\" /dev/null < " + in + " > " + out + " 2>&1";
  const int rc = std::system(cmd.c_str());
  std::ifstream f(out);
  std::string text(std::istreambuf_iterator<char>(f), {});
  CHECK_MESSAGE(text.find("validation: ") == std::string::npos, "validation message from the CLI: " << text);
  return {rc != -1 && WIFEXITED(rc) ? WEXITSTATUS(rc) : -1, text};
}
}  // namespace

TEST_CASE("cli: chat through a pseudo-terminal: replies, /regenerate, /save and /load, a full context") {
  if (!have_script()) return;
  test::TempDir tmp("diffvk-chat");
  const std::string saved = tmp / "chat.json";
  int rc = 0;  // plain variables, not structured bindings: INFO's lambda cannot capture those (clang 14)
  std::string out;
  std::tie(rc, out) =
      chat(tmp, "--chat-template chatml --system 'Be brief.' -n 8",
           "Hello there\n/regenerate\n/save " + saved + "\n/reset\n/load " + saved + "\nAnd then?\n/bogus\n/quit\n");
  INFO(out);
  CHECK(rc == 0);
  CHECK(contains(out, "chat template chatml"));
  CHECK(count(out, "[8 tokens,") + count(out, "eos]") + count(out, "stop string]") == 3);  // three replies
  CHECK(contains(out, "0 reused"));                                                        // the first turn
  CHECK(contains(out, "[saved 3 messages to " + saved + "]"));
  CHECK(contains(out, "[loaded 3 messages,"));
  CHECK(contains(out, "[unknown command /bogus]"));
  std::ifstream sf(saved);
  CHECK(std::string(std::istreambuf_iterator<char>(sf), {}).find("\"role\": \"assistant\"") != std::string::npos);

  // A context too small for the next turn: refused with a message, and the chat goes on to /quit.
  std::tie(rc, out) = chat(tmp, "--chat-template chatml -n 8 --context 64", std::string(80, 'x') + "\n/help\n/quit\n");
  INFO(out);
  CHECK(rc == 0);
  CHECK(contains(out, "positions; the session holds 64: /reset, or a larger --context"));
  CHECK(contains(out, "/regenerate  answer the last message again"));

  std::tie(rc, out) = chat(tmp, "-n 8", "/quit\n");  // the bundled model ships no chat template
  CHECK(rc != 0);
  CHECK(contains(out, "has no chat template"));
}

TEST_CASE("cli: chat --overflow shift goes on past the context, keeping the system message") {
  if (!have_script()) return;
  test::TempDir tmp("diffvk-chat-shift");
  std::string input;
  for (int i = 0; i < 4; ++i)
    input += "Tell me more about the number " + std::to_string(i) + " and its friends, please.\n";
  input += "/regenerate\n/quit\n";
  int rc = 0;
  std::string out;
  std::tie(rc, out) =
      chat(tmp, "--chat-template chatml --system 'Be brief.' -n 40 --context 96 --overflow shift", input);
  INFO(out);
  CHECK(rc == 0);
  CHECK(
      contains(out, "context shift keeping 39 tokens"));  // "<|im_start|>system\nBe brief.<|im_end|>\n", a byte a token
  CHECK(contains(out, "context shifts]"));
  CHECK(count(out, "[40 tokens,") + count(out, "eos]") + count(out, "stop string]") + count(out, "context shifts]") >=
        5);
  CHECK_FALSE(contains(out, "[error: "));
  CHECK_FALSE(contains(out, "positions; the session holds"));
}

#if DIFFVK_LARGE_TESTS
// The target: a 10,000-token conversation through `diffvk chat` at capacity 512 runs to its end under
// the shift policy (and, in the ASan build, with no leak). Label "large"; minutes under ASan.
TEST_SUITE("large") {
  TEST_CASE("cli: chat, a 10,000-token conversation at capacity 512 under --overflow shift") {
    if (!have_script()) return;
    test::TempDir tmp("diffvk-chat-10k");
    std::string input;
    for (int i = 0; i < 40; ++i)
      input +=
          "Message " + std::to_string(i) + ": here is some more text for the model to read, and a question about it?\n";
    input += "/quit\n";
    const std::string cmd_args = "--chat-template chatml --system 'Be brief.' -n 256 --context 512 --overflow shift";
    int rc = 0;
    std::string out;
    std::tie(rc, out) = chat(tmp, cmd_args, input);
    INFO(out.substr(out.size() > 4000 ? out.size() - 4000 : 0));
    CHECK(rc == 0);
    CHECK_FALSE(contains(out, "[error: "));
    // The last reply's statistics: "prompt P tokens": the whole conversation before it.
    const size_t at = out.rfind("; prompt ");
    REQUIRE(at != std::string::npos);
    const unsigned long prompt = std::stoul(out.substr(at + 9));
    const size_t n_at = out.rfind("\n[");
    const unsigned long last = std::stoul(out.substr(n_at + 2));
    MESSAGE("conversation: " << prompt + last << " tokens");
    CHECK(prompt + last >= 10000);
  }
}
#endif

// A Phi-4-mini-flash (SambaY) checkpoint with Phi-4-mini's tokenizer structure (the o200k-bpe fixture) and the phi4
// chat template: two turns (the second reuses the first's prefix: a SambaY session's rewind), /save and /load.
TEST_CASE("cli: chat with a phi4flash model and the phi4 template: two turns, /save and /load") {
  if (!have_script()) return;
  test::TempDir tmp("diffvk-chat-phi4flash");
  const std::string model = tmp / "model", saved = tmp / "chat.json";
  test::write_tiny_phi4flash(model, 868, 512, 3, std::string(DIFFVK_TEST_DATA_DIR) + "/tokenizer/o200k-bpe");
  int rc = 0;
  std::string out;
  std::tie(rc, out) = chat(tmp, "--chat-template phi4 --system 'Be brief.' -n 6",
                           "Hello there\nAnd then?\n/save " + saved + "\n/reset\n/load " + saved + "\n/quit\n", model);
  INFO(out);
  CHECK(rc == 0);
  CHECK(contains(out, "chat template phi4"));
  CHECK(count(out, "[6 tokens,") + count(out, "eos]") + count(out, "stop string]") == 2);  // two replies
  CHECK(contains(out, "[saved 5 messages to " + saved + "]"));
  CHECK(contains(out, "[loaded 5 messages,"));
}
