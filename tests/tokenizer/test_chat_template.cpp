// Chat templates against the strings Hugging Face's own Jinja renders from the published
// templates (tests/data/chat_templates/: templates.json, fixtures.json from make_fixtures.mjs with
// @huggingface/jinja). Host only.
#include <doctest/doctest.h>

#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "diffvk/chat_template.hpp"
#include "diffvk/error.hpp"
#include "diffvk/tokenizer.hpp"
#include "io/bounded_json.hpp"
#include "file_test_util.hpp"
#include "status_of.hpp"

using namespace diffvk;

namespace {
const std::string kDir = std::string(DIFFVK_TEST_DATA_DIR) + "/chat_templates";
nlohmann::json read_json(const std::string& name) {
  std::ifstream f(kDir + "/" + name);
  REQUIRE(f.good());
  return nlohmann::json::parse(f);
}
std::vector<ChatMessage> messages_of(const nlohmann::json& conversation) {
  std::vector<ChatMessage> m;
  for (const auto& e : conversation) m.push_back({e["role"].get<std::string>(), e["content"].get<std::string>()});
  return m;
}
}  // namespace

TEST_CASE("chat template: every published template renders what Hugging Face's Jinja renders, byte for byte") {
  const auto templates = read_json("templates.json");
  const auto fixtures = read_json("fixtures.json");
  size_t checked = 0, refused = 0;
  for (const auto& c : fixtures["cases"]) {
    const auto& t = templates[c["template"].get<std::string>()];
    INFO(c["template"].get<std::string>()
         << ", conversation " << c["conversation"] << ", add_generation_prompt " << c["add_generation_prompt"]);
    const ChatTemplate tpl = ChatTemplate::from_source(t["source"], t["bos_token"], t["eos_token"]);
    CHECK(tpl.family() == t["family"].get<std::string>());
    const auto messages = messages_of(fixtures["conversations"][c["conversation"].get<size_t>()]);
    if (c["expected"].is_null()) {  // the template raises an exception
      CHECK(test::status_of([&] { tpl.apply(messages, c["add_generation_prompt"]); }) == Status::invalid_argument);
      ++refused;
    } else {
      CHECK(tpl.apply(messages, c["add_generation_prompt"]) == c["expected"].get<std::string>());
      ++checked;
    }
  }
  CHECK(checked >= 70);
  CHECK(refused == 4);  // Llama-2 with two user turns in a row, and with a second system message
}

TEST_CASE("chat template: an unsupported template is refused with an error naming it, not rendered another way") {
  const auto templates = read_json("templates.json");
  for (const auto& item : templates.items()) {
    const std::string name = item.key();  // not structured bindings: INFO cannot capture those (clang 14)
    const auto& t = item.value();
    if (t["supported"]) continue;
    INFO(name);
    CHECK_ERROR(ChatTemplate::from_source(t["source"], t["bos_token"], t["eos_token"]), Status::unsupported,
                "chat template not supported: '{{ bos_token }}");
  }
  // One character of a string literal changed: no longer the published template.
  std::string chatml = templates["chatml (teknium/OpenHermes-2.5-Mistral-7B)"]["source"];
  chatml.replace(chatml.find("<|im_end|>"), 10, "<|im_stop|>");
  CHECK_ERROR(ChatTemplate::from_source(chatml, "", ""), Status::unsupported, "uses ChatML's markers");
  CHECK(test::status_of([] { ChatTemplate::builtin("vicuna", "", ""); }) == Status::invalid_argument);
  CHECK(test::status_of([] { ChatTemplate::builtin("chatml", "", "").apply({}, true); }) == Status::invalid_argument);
}

TEST_CASE("chat template: from a model directory's tokenizer_config.json, string or named list") {
  const auto templates = read_json("templates.json");
  io_test::TempDir dir;
  const std::string llama3 = templates["llama3 (meta-llama/Meta-Llama-3-8B-Instruct)"]["source"];
  nlohmann::json cfg = {{"chat_template", llama3},
                        {"bos_token", "<|begin_of_text|>"},
                        {"eos_token", {{"content", "<|eot_id|>"}, {"special", true}}}};
  io_test::put_file(dir.file("tokenizer_config.json"), cfg.dump());
  ChatTemplate t = ChatTemplate::load(dir.path);
  CHECK(t.family() == "llama3");
  CHECK(t.end_of_turn() == "<|eot_id|>");
  CHECK(t.apply({{"user", "hi"}}, true) ==
        "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nhi<|eot_id|><|start_header_id|>assistant<|end_"
        "header_id|>\n\n");

  cfg["chat_template"] = nlohmann::json::array(
      {{{"name", "tool_use"}, {"template", "{{ tools }}"}}, {{"name", "default"}, {"template", llama3}}});
  io_test::put_file(dir.file("tokenizer_config.json"), cfg.dump());
  CHECK(ChatTemplate::load(dir.path).family() == "llama3");
  cfg["chat_template"] = nlohmann::json::array({{{"name", "tool_use"}, {"template", "{{ tools }}"}}});
  io_test::put_file(dir.file("tokenizer_config.json"), cfg.dump());
  CHECK_ERROR(ChatTemplate::load(dir.path), Status::unsupported, "no chat_template named 'default' (it has tool_use)");
  cfg["chat_template"] = 7;
  io_test::put_file(dir.file("tokenizer_config.json"), cfg.dump());
  CHECK_ERROR(ChatTemplate::load(dir.path), Status::format_error, "chat_template must be a string");
  for (const char* key : {"bos_token", "eos_token"}) {  // a malformed special token names its key
    nlohmann::json bad = {{"chat_template", llama3}, {key, 7}};
    io_test::put_file(dir.file("tokenizer_config.json"), bad.dump());
    CHECK_ERROR(ChatTemplate::load(dir.path), Status::format_error,
                std::string("'") + key + "' must be a string or an object with a string 'content'");
  }
  cfg.erase("chat_template");
  io_test::put_file(dir.file("tokenizer_config.json"), cfg.dump());
  CHECK_ERROR(ChatTemplate::load(dir.path), Status::invalid_argument, "has no chat template");
  io_test::TempDir empty;
  CHECK_ERROR(ChatTemplate::load(empty.path), Status::invalid_argument, "no tokenizer_config.json");
  CHECK(ChatTemplate::builtin("chatml", "", "").end_of_turn() == "<|im_end|>");
  CHECK(ChatTemplate::builtin("llama2", "<s>", "</s>").end_of_turn() == "</s>");
}

TEST_CASE("chat template: from tokenizer_config.json's bytes, as from its directory") {
  const auto templates = read_json("templates.json");
  const std::string llama3 = templates["llama3 (meta-llama/Meta-Llama-3-8B-Instruct)"]["source"];
  nlohmann::json cfg = {{"chat_template", llama3}, {"bos_token", "<|begin_of_text|>"}, {"eos_token", "<|eot_id|>"}};
  std::string text = cfg.dump();
  const ChatTemplate t = ChatTemplate::load_memory(text.data(), text.size());
  text.assign(text.size(), 'x');  // read during the call only
  io_test::TempDir dir;
  io_test::put_file(dir.file("tokenizer_config.json"), cfg.dump());
  const ChatTemplate d = ChatTemplate::load(dir.path);
  CHECK(t.family() == d.family());
  CHECK(t.end_of_turn() == d.end_of_turn());
  const std::vector<ChatMessage> chat{{"system", "be brief"}, {"user", "hi"}, {"assistant", "hello"}, {"user", "bye"}};
  CHECK(t.apply(chat, true) == d.apply(chat, true));
  CHECK_ERROR(ChatTemplate::load_memory(nullptr, 5), Status::invalid_argument, "NULL data");
  CHECK_ERROR(ChatTemplate::load_memory("", 0), Status::format_error, "tokenizer_config.json (memory)");
  CHECK_ERROR(ChatTemplate::load_memory("{\"chat_", 8), Status::format_error, "tokenizer_config.json (memory)");
  CHECK_ERROR(ChatTemplate::load_memory("{}", 2), Status::invalid_argument, "has no chat template");
  CHECK_ERROR(ChatTemplate::load_memory("[1]", 3), Status::format_error, "top level must be an object");
  const std::string big(kJsonConfigMaxBytes + 1, ' ');
  CHECK_ERROR(ChatTemplate::load_memory(big.data(), big.size(), "big"), Status::format_error, "more than the limit");
}

// Phi-4-mini (microsoft/Phi-4-mini-instruct and Phi-4-mini-reasoning; Phi-4-mini-flash-reasoning is of this family):
// no newline after the markers, the content as is, <|assistant|> or EOS at the end; the prompt encodes to the
// markers' ids with the Phi-4-mini-style tokenizer fixture.
TEST_CASE("chat template: Phi-4-mini, its markers and its tokens") {
  const auto templates = read_json("templates.json");
  const ChatTemplate t = ChatTemplate::from_source(templates["phi4 (microsoft/Phi-4-mini-instruct)"]["source"],
                                                   "<|endoftext|>", "<|endoftext|>");
  CHECK(t.family() == "phi4");
  CHECK(t.end_of_turn() == "<|end|>");
  const std::vector<ChatMessage> chat{{"system", "Be brief."}, {"user", "What is 2+2?"}};
  const std::string text = t.apply(chat, true);
  CHECK(text == "<|system|>Be brief.<|end|><|user|>What is 2+2?<|end|><|assistant|>");
  CHECK(ChatTemplate::builtin("phi4", "<|endoftext|>", "<|endoftext|>").apply(chat, true) == text);
  const ChatTemplate r = ChatTemplate::from_source(templates["phi4 (microsoft/Phi-4-mini-reasoning)"]["source"],
                                                   "<|endoftext|>", "<|endoftext|>");
  CHECK(r.family() == "phi4");
  CHECK(r.apply({{"user", "hi"}}, false) ==
        "<|system|>Your name is Phi, an AI math expert developed by Microsoft.<|end|><|user|>hi<|end|><|endoftext|>");
  // A Phi-4 template with one literal changed is refused, with a hint.
  std::string changed = templates["phi4 (microsoft/Phi-4-mini-instruct)"]["source"];
  changed.replace(changed.find("'|>'"), 4, "'|>\\n'");
  CHECK_ERROR(ChatTemplate::from_source(changed, "", ""), Status::unsupported, "uses Phi-4's markers");
  // The markers are added tokens of the Phi-4-mini-style tokenizer (tests/data/tokenizer/o200k-bpe): each one id.
  const Tokenizer tok = Tokenizer::load(std::string(DIFFVK_TEST_DATA_DIR) + "/tokenizer/o200k-bpe");
  const std::vector<int32_t> ids = tok.encode(text, false);
  REQUIRE(ids.size() > 4);
  CHECK(ids.front() == 861);          // <|system|>
  CHECK(ids[ids.size() - 2] == 859);  // <|end|>
  CHECK(ids.back() == 858);           // <|assistant|>
  CHECK(tok.decode(ids) == text);
}
