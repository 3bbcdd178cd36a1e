// Tokenizers against their references (issue 13): tests/data/tokenizer/<kind>/cases.json holds the ids
// and decoded bytes that Hugging Face tokenizers (npm) / python3-sentencepiece produced for each text
// (tests/tokenizer/make_*_fixtures.py). Pure CPU: no Vulkan.
#include <doctest/doctest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "diffvk/tokenizer.hpp"

using namespace diffvk;

namespace {

const std::string kDir = std::string(DIFFVK_TEST_DATA_DIR) + "/tokenizer/";

std::string unhex(const std::string& h) {
  std::string out;
  for (size_t i = 0; i + 1 < h.size(); i += 2) out += char(std::stoi(h.substr(i, 2), nullptr, 16));
  return out;
}

std::string show(const std::vector<int32_t>& v) {
  std::ostringstream s;
  for (int32_t x : v) s << x << ' ';
  return s.str();
}

// Every case: encode gives the reference's ids exactly, and decoding them gives the reference's bytes.
// Returns the number of cases compared against reference ids.
int check_fixture(const std::string& name) {
  const Tokenizer t = Tokenizer::load(kDir + name);
  std::ifstream f(kDir + name + "/cases.json");
  REQUIRE(f.good());
  const auto j = nlohmann::json::parse(f);
  int compared = 0;
  for (const auto& c : j["cases"]) {
    const std::string text = unhex(c["text_hex"].get<std::string>());
    const bool add_special = c["add_special"].get<bool>();
    CAPTURE(name);
    CAPTURE(c["name"].get<std::string>());
    CAPTURE(add_special);
    const std::vector<int32_t> ids = t.encode(text, add_special);
    if (c["ids"].is_null()) {  // not valid UTF-8, which the reference cannot take: a byte-exact round trip
      CHECK(t.decode(ids) == text);
      continue;
    }
    const auto want = c["ids"].get<std::vector<int32_t>>();
    CHECK_MESSAGE(ids == want, "got  " << show(ids) << "\nwant " << show(want));
    CHECK(t.decode(want) == unhex(c["decoded_hex"].get<std::string>()));
    ++compared;
  }
  return compared;
}

}  // namespace

TEST_CASE("tokenizer: GPT-2 style byte-level BPE matches Hugging Face tokenizers") {
  CHECK(check_fixture("gpt2-bpe") >= 40);
  const Tokenizer t = Tokenizer::load(kDir + "gpt2-bpe");
  CHECK(t.kind() == "byte-level BPE");
  CHECK(t.vocab_size() == 657);
  CHECK(t.bos_id() == 656);
  CHECK(t.eos_id() == 656);
}

TEST_CASE("tokenizer: Llama-3 style byte-level BPE matches Hugging Face tokenizers") {
  CHECK(check_fixture("llama3-bpe") >= 40);
  const Tokenizer t = Tokenizer::load(kDir + "llama3-bpe");
  CHECK(t.bos_id() == 656);
  CHECK(t.eos_id() == 658);
  CHECK(t.encode("", true) == std::vector<int32_t>{656});
}

TEST_CASE("tokenizer: SentencePiece unigram matches sentencepiece") {
  CHECK(check_fixture("spm-unigram") >= 40);
  const Tokenizer t = Tokenizer::load(kDir + "spm-unigram");
  CHECK(t.kind() == "sentencepiece unigram");
  CHECK(t.bos_id() == 1);
  CHECK(t.eos_id() == 2);
}

TEST_CASE("tokenizer: SentencePiece BPE matches sentencepiece") {
  CHECK(check_fixture("spm-bpe") >= 40);
  CHECK(Tokenizer::load(kDir + "spm-bpe").kind() == "sentencepiece BPE");
}
