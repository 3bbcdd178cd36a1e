// Tokenizers against their references: tests/data/tokenizer/<kind>/cases.json holds the ids
// and decoded bytes that Hugging Face tokenizers (npm) / python3-sentencepiece produced for each text
// (tests/python/tokenizer/make_*_fixtures.py). Pure CPU: no Vulkan.
#include <doctest/doctest.h>

#include <cstdio>
#include <fstream>
#include <random>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include "diffvk/diffvk.h"
#include "diffvk/gguf.hpp"
#include "diffvk/tokenizer.hpp"
#include "io/gguf.hpp"
#include "model/checkpoint.hpp"
#include "model/gguf_tokenizer.hpp"
#include "platform.hpp"
#include "tokenizer/tokenizer_pretok.hpp"
#include "model_fixture.hpp"
#include "status_of.hpp"

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
// Returns the number of cases compared against reference ids. Cases whose text holds `unless` (non-empty) are
// left out.
int check_fixture(const std::string& name, const Tokenizer& t, const std::string& unless = "") {
  std::ifstream f(kDir + name + "/cases.json");
  REQUIRE(f.good());
  const auto j = nlohmann::json::parse(f);
  int compared = 0;
  for (const auto& c : j["cases"]) {
    const std::string text = unhex(c["text_hex"].get<std::string>());
    if (!unless.empty() && text.find(unless) != std::string::npos) continue;
    const bool add_special = c["add_special"].get<bool>();
    CAPTURE(name);
    CAPTURE(c["name"].get<std::string>());
    CAPTURE(add_special);
    const std::vector<int32_t> ids = t.encode(text, add_special);
    if (c["ids"].is_null()) {  // not valid UTF-8, which the reference cannot take: a byte-exact round trip
      CHECK(t.decode(ids) == unhex(c["decoded_hex"].get<std::string>()));
      continue;
    }
    if (c.contains("pieces_hex")) {  // the split pattern alone, against the reference's pre-tokenizer
      const auto pattern = name == "llama3-bpe"  ? tok::SplitPattern::llama3
                           : name == "o200k-bpe" ? tok::SplitPattern::o200k
                                                 : tok::SplitPattern::gpt2;
      std::vector<std::string> pieces, want;
      const bool prefix = name == "gpt2-prefix-bpe" && !text.empty() && text[0] != ' ';  // add_prefix_space
      const std::string input = prefix ? " " + text : text;  // outlives the views split returns
      for (auto p : tok::split(input, pattern)) pieces.emplace_back(p);
      for (const auto& h : c["pieces_hex"]) want.push_back(unhex(h.get<std::string>()));
      CHECK(pieces == want);
    }
    const auto want = c["ids"].get<std::vector<int32_t>>();
    CHECK_MESSAGE(ids == want, "got  " << show(ids) << "\nwant " << show(want));
    CHECK(t.decode(want) == unhex(c["decoded_hex"].get<std::string>()));
    ++compared;
  }
  return compared;
}
int check_fixture(const std::string& name) { return check_fixture(name, Tokenizer::load(kDir + name)); }

}  // namespace

TEST_CASE("tokenizer: GPT-2 style byte-level BPE matches Hugging Face tokenizers") {
  CHECK(check_fixture("gpt2-bpe") >= 160);
  const Tokenizer t = Tokenizer::load(kDir + "gpt2-bpe");
  CHECK(t.kind() == "byte-level BPE");
  CHECK(t.vocab_size() == 657);
  CHECK(t.bos_id() == 656);
  CHECK(t.eos_id() == 656);
}

TEST_CASE("tokenizer: byte-level BPE with add_prefix_space matches Hugging Face tokenizers") {
  CHECK(check_fixture("gpt2-prefix-bpe") >= 160);
}

TEST_CASE("tokenizer: Llama-3 style byte-level BPE matches Hugging Face tokenizers") {
  CHECK(check_fixture("llama3-bpe") >= 160);
  const Tokenizer t = Tokenizer::load(kDir + "llama3-bpe");
  CHECK(t.bos_id() == 656);
  CHECK(t.eos_id() == 658);
  CHECK(t.encode("", true) == std::vector<int32_t>{656});
}

TEST_CASE("tokenizer: SentencePiece unigram matches sentencepiece") {
  CHECK(check_fixture("spm-unigram") >= 160);
  const Tokenizer t = Tokenizer::load(kDir + "spm-unigram");
  CHECK(t.kind() == "sentencepiece unigram");
  CHECK(t.bos_id() == 1);
  CHECK(t.eos_id() == 2);
}

TEST_CASE("tokenizer: SentencePiece unigram without byte fallback matches sentencepiece") {
  CHECK(check_fixture("spm-unigram-nobytes") >= 160);
}

TEST_CASE("tokenizer: SentencePiece BPE matches sentencepiece") {
  CHECK(check_fixture("spm-bpe") >= 160);
  CHECK(Tokenizer::load(kDir + "spm-bpe").kind() == "sentencepiece BPE");
}

namespace {
std::string read_file(const std::string& path);
}  // namespace

// o200k-bpe has Phi-4-mini's tokenizer.json structure: the o200k split pattern, its added tokens (the chat
// markers strip the whitespace after them), and hostile texts for the pattern (tests/python/tokenizer/texts.py).
TEST_CASE("tokenizer: o200k (Phi-4-mini) style byte-level BPE matches Hugging Face tokenizers") {
  CHECK(check_fixture("o200k-bpe") >= 270);
  const Tokenizer t = Tokenizer::load(kDir + "o200k-bpe");
  CHECK(t.kind() == "byte-level BPE");
  CHECK(t.vocab_size() == 868);
  CHECK(t.bos_id() == 856);
  CHECK(t.eos_id() == 856);
  CHECK(t.encode("", true).empty());
  // Split(Removed, invert true), as written, and Split(Isolated, invert false) give the same pieces here: the
  // pattern matches every character.
  auto j = nlohmann::json::parse(read_file(kDir + "o200k-bpe/tokenizer.json"));
  CHECK(j["pre_tokenizer"]["pretokenizers"][0]["behavior"] == "Removed");
  j["pre_tokenizer"]["pretokenizers"][0]["behavior"] = "Isolated";
  j["pre_tokenizer"]["pretokenizers"][0]["invert"] = false;
  const std::string isolated = j.dump();
  CHECK(check_fixture("o200k-bpe", Tokenizer::load_json_memory(isolated.data(), isolated.size())) >= 270);
  // Encoding then decoding gives the text back, bytes that are not UTF-8 included.
  std::mt19937 rng(7);
  for (int k = 0; k < 200; ++k) {
    std::string text;
    const int n = int(rng() % 24);
    for (int c = 0; c < n; ++c) text += char(rng() % 3 ? " aA'\r\n/1\xcc\x81\xc7\x85"[rng() % 12] : char(rng()));
    CAPTURE(text);
    CHECK(t.decode(t.encode(text, false)) == text);
  }
}

namespace {

void write_file(const std::string& path, const std::string& data) {
  std::ofstream f(path, std::ios::binary);
  f << data;
  REQUIRE(f.good());
}

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  REQUIRE(f.good());
  return std::string(std::istreambuf_iterator<char>(f), {});
}

// Loading `dir` fails with `status` and a message holding `text`.
// The ids the C ABI's tokenizer gives `text` with special tokens.
std::vector<int32_t> c_encode(const diffvk_tokenizer* c, const std::string& text) {
  std::vector<int32_t> ids(text.size() + 8);
  size_t n = 0;
  REQUIRE(diffvk_tokenizer_encode(c, text.data(), text.size(), 1, ids.data(), ids.size(), &n) == DIFFVK_OK);
  ids.resize(n);
  return ids;
}

void expect_load_error(const std::string& dir, Status status, const std::string& text) {
  try {
    Tokenizer::load(dir);
    FAIL("loaded without an error; expected: " << text);
  } catch (const Error& e) {
    CHECK_MESSAGE(e.status() == status, e.what());
    CHECK_MESSAGE(std::string(e.what()).find(text) != std::string::npos, e.what());
  }
}

}  // namespace

TEST_CASE("tokenizer: the bytes tokenizer of the bundled tiny model") {
  const Tokenizer t = Tokenizer::load(std::string(DIFFVK_TEST_DATA_DIR) + "/model_tiny");
  CHECK(t.kind() == "bytes");
  CHECK(t.vocab_size() == 256);
  CHECK(t.bos_id() == 2);
  CHECK(t.eos_id() == 3);
  CHECK(t.encode("hi\xff", true) == std::vector<int32_t>{2, 'h', 'i', 255});
  CHECK(t.encode("hi", false) == std::vector<int32_t>{'h', 'i'});
  CHECK(t.decode({'h', 'i', 255}) == "hi\xff");
  CHECK_THROWS_AS(t.decode({256}), Error);
}

TEST_CASE("tokenizer: decode refuses ids outside the vocabulary") {
  for (const char* name : {"gpt2-bpe", "llama3-bpe", "spm-unigram", "spm-bpe"}) {
    CAPTURE(name);
    const Tokenizer t = Tokenizer::load(kDir + name);
    for (int32_t bad : {-1, int32_t(t.vocab_size()), 1 << 30}) {
      try {
        t.decode({0, bad});
        FAIL("decoded id " << bad);
      } catch (const Error& e) {
        CHECK(e.status() == Status::invalid_argument);
        CHECK(std::string(e.what()).find("at index 1") != std::string::npos);
      }
    }
  }
}

TEST_CASE("tokenizer: hostile tokenizer.json files give clear errors") {
  test::TempDir tmp("diffvk-tok");
  const std::string good = read_file(kDir + "gpt2-bpe/tokenizer.json");
  auto with = [&](const std::string& text) { write_file(tmp / "tokenizer.json", text); };
  with(good.substr(0, good.size() / 2));
  expect_load_error(tmp.path(), Status::format_error, "invalid JSON");
  with("[1, 2]");
  expect_load_error(tmp.path(), Status::format_error, "top level must be an object");
  auto j = nlohmann::json::parse(good);
  auto edit = [&](auto&& change) {
    auto k = j;
    change(k);
    with(k.dump());
  };
  edit([](auto& k) { k["model"]["vocab"]["!"] = 1ll << 40; });
  expect_load_error(tmp.path(), Status::format_error, "ids must be integers");
  edit([](auto& k) { k["model"]["vocab"]["!"] = "zero"; });
  expect_load_error(tmp.path(), Status::format_error, "ids must be integers");
  edit([](auto& k) { k["added_tokens"][0]["id"] = -5; });
  expect_load_error(tmp.path(), Status::format_error, "added token");
  edit([](auto& k) { k["model"]["merges"].push_back("nosuchtoken x"); });
  expect_load_error(tmp.path(), Status::format_error, "not in the vocab");
  edit([](auto& k) { k["model"]["merges"].push_back(42); });
  expect_load_error(tmp.path(), Status::format_error, "merge 400");
  edit([](auto& k) { k["model"]["vocab"].erase("!"); });
  expect_load_error(tmp.path(), Status::format_error, "merge");  // merges name "!" too
  edit([](auto& k) {
    k["model"]["merges"] = nlohmann::json::array();
    k["model"]["vocab"].erase("!");
  });
  expect_load_error(tmp.path(), Status::format_error, "byte-level character of byte 33");
  edit([](auto& k) { k["model"]["vocab"] = 7; });
  expect_load_error(tmp.path(), Status::format_error, "'model.vocab' must be an object");
  edit([](auto& k) { k["model"]["type"] = "WordPiece"; });
  expect_load_error(tmp.path(), Status::unsupported, "only BPE");
  edit([](auto& k) { k["normalizer"] = {{"type", "NFC"}}; });
  expect_load_error(tmp.path(), Status::unsupported, "normalizer");
  edit([](auto& k) { k["pre_tokenizer"] = {{"type", "Whitespace"}}; });
  expect_load_error(tmp.path(), Status::unsupported, "pre_tokenizer");
  edit([](auto& k) {
    k["pre_tokenizer"] = nlohmann::json::parse(R"({"type": "Sequence", "pretokenizers": [
      {"type": "Split", "pattern": {"Regex": "\\d+"}, "behavior": "Isolated", "invert": false},
      {"type": "ByteLevel", "use_regex": false}]})");
  });
  expect_load_error(tmp.path(), Status::unsupported, "split regex '\\d+' is not supported");
  edit([](auto& k) {
    k["pre_tokenizer"] = nlohmann::json::parse(R"({"type": "Sequence", "pretokenizers": [
      {"type": "Split", "pattern": {"Regex": "\\s+"}, "behavior": "Removed", "invert": false},
      {"type": "ByteLevel", "use_regex": false}]})");
  });
  expect_load_error(tmp.path(), Status::unsupported, "Removed with invert true");
  edit([](auto& k) {  // the o200k pattern with one character changed
    const std::string o200k = tok::kO200kPattern;
    k["pre_tokenizer"] = {{"type", "Sequence"},
                          {"pretokenizers",
                           {{{"type", "Split"},
                             {"pattern", {{"Regex", o200k.substr(0, o200k.size() - 1) + "*"}}},
                             {"behavior", "Isolated"},
                             {"invert", false}},
                            {{"type", "ByteLevel"}, {"use_regex", false}}}}};
  });
  expect_load_error(tmp.path(), Status::unsupported, "\\s+(?!\\S)|\\s*' is not supported");
  edit([](auto& k) {
    k["post_processor"] = {{"type", "TemplateProcessing"}, {"single", {{{"SpecialToken", {{"id", "<x>"}}}}}}};
  });
  expect_load_error(tmp.path(), Status::format_error, "special token '<x>'");
  edit([](auto& k) { k["model"]["type"] = nullptr; });
  expect_load_error(tmp.path(), Status::format_error, "tokenizer.json");
  // tokenizer_config.json naming a token that is not there
  with(good);
  write_file(tmp / "tokenizer_config.json", R"({"bos_token": "<nope>"})");
  expect_load_error(tmp.path(), Status::format_error, "'bos_token' = '<nope>' is not a token");
  write_file(tmp / "tokenizer_config.json", "{");
  expect_load_error(tmp.path(), Status::format_error, "invalid JSON");
}

TEST_CASE("tokenizer: hostile tokenizer.model files give clear errors") {
  test::TempDir tmp("diffvk-tok");
  const std::string good = read_file(kDir + "spm-unigram/tokenizer.model");
  // Every truncation either loads (a cut between fields can leave a smaller valid model) or throws a
  // diffvk::Error naming the file: never a crash (ASan/UBSan builds check the reads).
  int errors = 0;
  for (size_t n = 0; n < good.size(); n += (n < 64 ? 1 : 97)) {
    write_file(tmp / "tokenizer.model", good.substr(0, n));
    try {
      Tokenizer::load(tmp.path());
    } catch (const Error& e) {
      ++errors;
      CHECK(std::string(e.what()).find("tokenizer.model") != std::string::npos);
    }
  }
  CHECK(errors > 20);
  // Random byte corruptions (fixed seed): load, encode and decode either work or throw diffvk::Error.
  std::mt19937 rng(13);
  int loaded = 0;
  for (int round = 0; round < 300; ++round) {
    std::string bad = good;
    for (int k = 0; k < 4; ++k) bad[rng() % bad.size()] = char(rng());
    write_file(tmp / "tokenizer.model", bad);
    try {
      const Tokenizer t = Tokenizer::load(tmp.path());
      ++loaded;
      t.decode(t.encode("Hello w\xc3\xb6rld <sep> \xff 123", true));
    } catch (const Error&) {}
  }
  CHECK(loaded > 0);
  write_file(tmp / "tokenizer.model", "");
  expect_load_error(tmp.path(), Status::format_error, "no pieces");
  write_file(tmp / "tokenizer.model", std::string("\x0a\xff\xff\xff\xff\x0f", 6));
  expect_load_error(tmp.path(), Status::format_error, "runs past the end");
  write_file(tmp / "tokenizer.model", std::string("\x0b\x01", 2));  // wire type 3 (groups)
  expect_load_error(tmp.path(), Status::format_error, "wire type");
  write_file(tmp / "tokenizer.model", std::string(12, '\xff'));
  expect_load_error(tmp.path(), Status::format_error, "varint");
  write_file(tmp / "tokenizer.model", "{\"not\": \"protobuf\"}");
  expect_load_error(tmp.path(), Status::format_error, "not a SentencePiece model");
  // A valid model with a normalizer character map (nmt_nfkc): refused, not silently mis-normalised.
  // NormalizerSpec (field 3) holding precompiled_charsmap (field 2) = "x".
  write_file(tmp / "tokenizer.model", good + std::string("\x1a\x03\x12\x01x", 5));
  expect_load_error(tmp.path(), Status::unsupported, "nmt_nfkc");
}

TEST_CASE("tokenizer: the C ABI encodes and decodes with the capacity protocol") {
  diffvk_tokenizer* t = nullptr;
  REQUIRE(diffvk_tokenizer_load((kDir + "llama3-bpe").c_str(), &t) == DIFFVK_OK);
  const std::string text = "Hello<|eot_id|> w\xc3\xb6rld";
  const std::vector<int32_t> want = Tokenizer::load(kDir + "llama3-bpe").encode(text, true);
  size_t n = 0;
  CHECK(diffvk_tokenizer_encode(t, text.data(), text.size(), 1, nullptr, 0, &n) == DIFFVK_BUFFER_TOO_SMALL);
  CHECK(n == want.size());
  std::vector<int32_t> ids(n + 2, -7);
  CHECK(diffvk_tokenizer_encode(t, text.data(), text.size(), 1, ids.data(), n - 1, &n) == DIFFVK_BUFFER_TOO_SMALL);
  CHECK(ids[0] == -7);  // nothing written
  REQUIRE(diffvk_tokenizer_encode(t, text.data(), text.size(), 1, ids.data(), ids.size(), &n) == DIFFVK_OK);
  ids.resize(n);
  CHECK(ids == want);
  size_t len = 0;
  CHECK(diffvk_tokenizer_decode(t, ids.data() + 1, n - 1, nullptr, 0, &len) == DIFFVK_BUFFER_TOO_SMALL);
  CHECK(len == text.size());
  std::string bytes(len, '\0');
  REQUIRE(diffvk_tokenizer_decode(t, ids.data() + 1, n - 1, bytes.data(), bytes.size(), &len) == DIFFVK_OK);
  CHECK(bytes == text);
  int32_t bos = 0, eos = 0, bad = 1 << 30;
  uint32_t vocab = 0;
  CHECK(diffvk_tokenizer_bos(t, &bos) == DIFFVK_OK);
  CHECK(diffvk_tokenizer_eos(t, &eos) == DIFFVK_OK);
  CHECK(diffvk_tokenizer_vocab_size(t, &vocab) == DIFFVK_OK);
  CHECK(bos == 656);
  CHECK(eos == 658);
  CHECK(vocab == 660);
  CHECK(diffvk_tokenizer_decode(t, &bad, 1, bytes.data(), bytes.size(), &len) == DIFFVK_INVALID_ARGUMENT);
  CHECK(std::string(diffvk_last_error()).find("diffvk_tokenizer_decode: decode: id 1073741824 at index 0") == 0);
  CHECK(diffvk_tokenizer_encode(t, nullptr, 3, 0, ids.data(), ids.size(), &n) == DIFFVK_INVALID_ARGUMENT);
  CHECK(diffvk_tokenizer_encode(t, nullptr, 0, 0, nullptr, 0, &n) == DIFFVK_OK);
  CHECK(n == 0);
  CHECK(diffvk_tokenizer_free(t) == DIFFVK_OK);
  CHECK(diffvk_tokenizer_free(t) == DIFFVK_INVALID_ARGUMENT);
  CHECK(diffvk_tokenizer_encode(t, "a", 1, 0, ids.data(), ids.size(), &n) == DIFFVK_INVALID_ARGUMENT);
  CHECK(std::string(diffvk_last_error()).find("not a live tokenizer") != std::string::npos);
  diffvk_tokenizer* none = reinterpret_cast<diffvk_tokenizer*>(1);
  CHECK(diffvk_tokenizer_load("/nonexistent-dir", &none) == DIFFVK_IO_ERROR);
  CHECK(none == nullptr);
  CHECK(std::string(diffvk_last_error()).find("/nonexistent-dir") != std::string::npos);
}

TEST_CASE("tokenizer: diffvk run encodes the prompt with the model directory's tokenizer") {
  test::TempDir tmp("diffvk-tok-run");
  test::TinySpec spec;
  spec.vocab = 800;  // the SentencePiece fixtures' size
  test::write_tiny_model(tmp.path(), spec);
  test::write_bytes(tmp / "tokenizer.model", read_file(kDir + "spm-bpe/tokenizer.model").data(),
                    read_file(kDir + "spm-bpe/tokenizer.model").size());
  const std::string prompt = "Grüße, мир";
  const size_t n_prompt = Tokenizer::load(tmp.path()).encode(prompt, true).size();
  const std::string out = tmp / "out.txt", err = tmp / "err.txt";
  const std::string cmd =
      std::string(DIFFVK_CLI_PATH) + " run --model " + tmp.path() + " -p '" + prompt + "' -n 6 > " + out + " 2> " + err;
  CHECK(std::system(cmd.c_str()) == 0);
  const std::string o = read_file(out), e = read_file(err);
  CHECK_MESSAGE(o.compare(0, prompt.size(), prompt) == 0, o);
  CHECK_MESSAGE(e.find("prefill: " + std::to_string(n_prompt) + " tokens") != std::string::npos, e);
  CHECK_MESSAGE(e.find("validation: ") == std::string::npos, e);
  // A tokenizer larger than the model's vocabulary is refused before anything runs.
  write_file(tmp / "tokenizer.model", "");
  std::remove((tmp / "tokenizer.model").c_str());
  test::write_bytes(tmp / "tokenizer.json", read_file(kDir + "gpt2-bpe/tokenizer.json").data(),
                    read_file(kDir + "gpt2-bpe/tokenizer.json").size());
  spec.vocab = 300;
  test::write_tiny_model(tmp.path(), spec);
  CHECK(std::system(cmd.c_str()) != 0);
  CHECK_MESSAGE(read_file(err).find("is larger than the model's vocab_size 300") != std::string::npos, read_file(err));
}

TEST_CASE("tokenizer: a directory with both files uses tokenizer.model") {
  test::TempDir tmp("diffvk-tok");
  write_file(tmp / "tokenizer.json", read_file(kDir + "gpt2-bpe/tokenizer.json"));
  CHECK(Tokenizer::load(tmp.path()).kind() == "byte-level BPE");
  write_file(tmp / "tokenizer.model", read_file(kDir + "spm-bpe/tokenizer.model"));
  CHECK(Tokenizer::load(tmp.path()).kind() == "sentencepiece BPE");
  CHECK(Tokenizer::load_file(tmp / "tokenizer.json").kind() == "byte-level BPE");
}

// GGUF files (docs/gguf.md "Tokenizer"): each fixture's tokenizer written as diffvk quantize writes it, read back by
// Tokenizer::load(FILE.gguf), gives the reference's ids on every case (the same check as the directory load).
namespace {

GgufWriter gguf_header(uint32_t vocab) {
  GgufWriter w;
  w.add_string("general.architecture", "diffllama");
  w.add_u32("diffllama.vocab_size", vocab);
  return w;
}

std::string write_gguf(const test::TempDir& tmp, const GgufWriter& w, const std::string& name = "t.gguf") {
  const std::string path = tmp / name;
  w.write(path);
  return path;
}

}  // namespace

TEST_CASE("tokenizer: every fixture read back from a GGUF file matches its reference") {
  test::TempDir tmp("diffvk-tok-gguf");
  for (const char* name :
       {"gpt2-bpe", "gpt2-prefix-bpe", "llama3-bpe", "o200k-bpe", "spm-unigram", "spm-unigram-nobytes", "spm-bpe"}) {
    CAPTURE(name);
    const Tokenizer dir = Tokenizer::load(kDir + name);
    GgufWriter w = gguf_header(dir.vocab_size());
    std::string why;
    GgufTokenIds ids;
    REQUIRE_MESSAGE(add_gguf_tokenizer(w, kDir + name, "none", dir.bos_id(), dir.eos_id(), &ids, &why), why);
    CHECK(ids.bos == dir.bos_id());
    CHECK(ids.eos == dir.eos_id());
    const std::string path = write_gguf(tmp, w);
    const Tokenizer t = Tokenizer::load(path);
    CHECK(t.kind() == dir.kind());
    CHECK(t.vocab_size() == dir.vocab_size());
    CHECK(t.bos_id() == dir.bos_id());
    CHECK(t.eos_id() == dir.eos_id());
    CHECK(check_fixture(name, t) >= 40);
    // The keys other GGUF readers use: llama.cpp's names and array lengths.
    const GgufFile f = GgufFile::open(path);
    const bool spm = std::string(name).compare(0, 3, "spm") == 0;
    CHECK(f.require_value("tokenizer.ggml.model").str == (std::string(name) == "spm-bpe" ? "llama"
                                                          : spm                          ? "t5"
                                                                                         : "gpt2"));
    CHECK(f.require_value("tokenizer.ggml.tokens").count == dir.vocab_size());
    CHECK(f.require_value("tokenizer.ggml.token_type").count == dir.vocab_size());
    if (spm) {
      CHECK(f.require_value("tokenizer.ggml.scores").count == dir.vocab_size());
      CHECK(f.find_value("tokenizer.huggingface.json") == nullptr);
    } else {
      CHECK(f.require_value("tokenizer.ggml.merges").count > 100);
      const std::string pre = std::string(name) == "llama3-bpe"  ? "llama-bpe"
                              : std::string(name) == "o200k-bpe" ? "gpt-4o"
                                                                 : "gpt-2";
      CHECK(f.require_value("tokenizer.ggml.pre").str == pre);
      CHECK(f.require_value("tokenizer.huggingface.json").str == read_file(kDir + name + "/tokenizer.json"));
      // The same file as another writer makes it, with llama.cpp's arrays only: tokenizer.huggingface.json's key
      // renamed (same length, so the file stays valid). The tokenizer built from the arrays gives the same ids.
      std::string bytes = read_file(path);
      const size_t at = bytes.find("tokenizer.huggingface.json");
      REQUIRE(at != std::string::npos);
      bytes.replace(at, 26, "tokenizer.huggingface.xxxx");
      const std::string arrays = tmp / "arrays.gguf";
      std::ofstream(arrays, std::ios::binary) << bytes;
      const Tokenizer a = Tokenizer::load(arrays);
      CHECK(a.kind() == dir.kind());
      CHECK(a.vocab_size() == dir.vocab_size());
      CHECK(a.bos_id() == dir.bos_id());
      CHECK(a.eos_id() == dir.eos_id());
      // Not in the arrays: an added token's lstrip/rstrip (llama3-bpe's user-defined [MASK] strips the spaces
      // around it in tokenizer.json; from the arrays it matches alone). Every other case gives the same ids.
      // o200k-bpe: Phi-4's role markers (<|end|>, <|user|>, ...) strip the spaces after them (rstrip), likewise.
      CHECK(check_fixture(name, a, std::string(name) == "o200k-bpe" ? "<|" : "[MASK]") >= 36);
    }
  }
}

// A byte-level BPE from the arrays alone with a split pattern diffvk does not implement, or a token type a
// byte-level BPE does not have, is refused naming it.
TEST_CASE("tokenizer: a GGUF byte-level BPE without tokenizer.huggingface.json needs a known pre and token types") {
  test::TempDir tmp("diffvk-tok-gguf-arrays");
  auto with = [&](const std::string& pre, int32_t type0) {
    GgufWriter w = gguf_header(300);
    std::vector<std::string> tokens;
    for (int i = 0; i < 256; ++i) tokens.push_back("t" + std::to_string(i));
    std::vector<int32_t> types(tokens.size(), 1);
    types[0] = type0;
    w.add_string("tokenizer.ggml.model", "gpt2");
    w.add_string("tokenizer.ggml.pre", pre);
    w.add_string_array("tokenizer.ggml.tokens", tokens);
    w.add_i32_array("tokenizer.ggml.token_type", types);
    w.add_string_array("tokenizer.ggml.merges", {});
    return write_gguf(tmp, w);
  };
  expect_load_error(with("qwen2", 1), Status::unsupported, "tokenizer.ggml.pre 'qwen2'");
  expect_load_error(with("gpt-2", 6), Status::format_error, "token_type[0] is 6");
  expect_load_error(with("gpt-2", 1), Status::format_error, "byte-level character");  // no byte-level alphabet
}

// The tokenizer of a .gguf given as bytes or as a descriptor range (Android assets: what Model::load_memory /
// load_fd load), in C++ and through the C ABI: the same ids as the path, nothing kept of the caller's buffer, and
// bad ranges or bytes that are not a .gguf refused with the status that names them.
TEST_CASE("tokenizer: a GGUF file's tokenizer loads from memory and from a descriptor range") {
  test::TempDir tmp("diffvk-tok-gguf-mem");
  for (const char* name : {"spm-unigram", "gpt2-bpe"}) {
    CAPTURE(name);
    const Tokenizer dir = Tokenizer::load(kDir + name);
    GgufWriter w = gguf_header(dir.vocab_size());
    std::string why;
    GgufTokenIds written;
    REQUIRE_MESSAGE(add_gguf_tokenizer(w, kDir + name, "none", dir.bos_id(), dir.eos_id(), &written, &why), why);
    const std::string path = write_gguf(tmp, w);
    const std::string file = read_file(path);
    std::vector<uint8_t> bytes(file.begin(), file.end());
    const Tokenizer mem = Tokenizer::load_gguf_memory(bytes.data(), bytes.size());
    std::fill(bytes.begin(), bytes.end(), uint8_t(0xAB));  // the caller's buffer, reused after the call
    CHECK(mem.kind() == dir.kind());
    CHECK(check_fixture(name, mem) >= 40);
    // The file inside a larger one (an asset in an APK): 13 bytes before it, junk after it.
    const std::string packed = tmp / "packed.bin";
    {
      std::ofstream o(packed, std::ios::binary);
      o << std::string(13, 'x') << file << "trailing junk";
    }
    FILE* f = std::fopen(packed.c_str(), "rb");
    REQUIRE(f);
    const int fd = fileno(f);
    const Tokenizer ranged = Tokenizer::load_gguf_fd(fd, 13, int64_t(file.size()));
    CHECK(check_fixture(name, ranged) >= 40);
    CHECK(::lseek(fd, 0, SEEK_CUR) == 0);  // pread: the descriptor's offset did not move
    {                                      // size -1: from the offset to the end of the file
      const std::string tail = tmp / "tail.bin";
      std::ofstream(tail, std::ios::binary) << std::string(5, 'y') << file;
      FILE* t = std::fopen(tail.c_str(), "rb");
      REQUIRE(t);
      CHECK(Tokenizer::load_gguf_fd(fileno(t), 5, -1).encode("Hello world", true) == dir.encode("Hello world", true));
      std::fclose(t);
    }
    using test::status_of;
    CHECK(status_of([&] { Tokenizer::load_gguf_fd(fd, 0, int64_t(file.size())); }) ==
          Status::format_error);  // 'xxxx', not GGUF
    CHECK(status_of([&] { Tokenizer::load_gguf_fd(fd, 13, -2); }) == Status::invalid_argument);
    CHECK(status_of([&] { Tokenizer::load_gguf_fd(fd, -1, 10); }) == Status::invalid_argument);
    CHECK(status_of([&] { Tokenizer::load_gguf_fd(fd, 1 << 30, -1); }) == Status::io_error);
    CHECK(status_of([&] { Tokenizer::load_gguf_fd(fd, 13, int64_t(file.size()) + 100); }) == Status::io_error);
    CHECK(status_of([&] { Tokenizer::load_gguf_fd(-1, 0, 10); }) == Status::invalid_argument);
    CHECK(status_of([&] { Tokenizer::load_gguf_memory(nullptr, 10); }) == Status::invalid_argument);
    const std::string json =
        read_file(kDir + name + (std::string(name) == "gpt2-bpe" ? "/tokenizer.json" : "/tokenizer.model"));
    CHECK(status_of([&] { Tokenizer::load_gguf_memory(json.data(), json.size()); }) == Status::format_error);
    // The C ABI: the same ids; its statuses.
    diffvk_tokenizer* c = nullptr;
    REQUIRE(diffvk_tokenizer_load_fd(fd, 13, int64_t(file.size()), &c) == DIFFVK_OK);
    CHECK(c_encode(c, "Hello world, 123") == dir.encode("Hello world, 123", true));
    diffvk_tokenizer_free(c);
    c = nullptr;
    REQUIRE(diffvk_tokenizer_load_memory(file.data(), file.size(), &c) == DIFFVK_OK);
    diffvk_tokenizer_free(c);
    c = reinterpret_cast<diffvk_tokenizer*>(&c);  // a failed call leaves NULL
    CHECK(diffvk_tokenizer_load_memory(json.data(), json.size(), &c) == DIFFVK_FORMAT_ERROR);
    CHECK(c == nullptr);
    CHECK(diffvk_tokenizer_load_memory(nullptr, 4, &c) == DIFFVK_INVALID_ARGUMENT);
    CHECK(diffvk_tokenizer_load_memory(file.data(), file.size(), nullptr) == DIFFVK_INVALID_ARGUMENT);
    CHECK(diffvk_tokenizer_load_fd(fd, 13, -7, &c) == DIFFVK_INVALID_ARGUMENT);
    CHECK(diffvk_tokenizer_load_fd(-1, 0, -1, &c) == DIFFVK_INVALID_ARGUMENT);
    std::fclose(f);
  }
}

// tokenizer.json (+ tokenizer_config.json / config.json) and tokenizer.model given as bytes or as descriptor ranges
// (Android assets): the directory load's parsers, so every fixture gives the reference's ids, and the same BOS/EOS.
namespace {

bool is_spm(const std::string& name) { return name.compare(0, 3, "spm") == 0; }

// The files a directory load of `dir` reads: [tokenizer.json or tokenizer.model, tokenizer_config.json, config.json]
// ("" = absent; SentencePiece reads no config).
std::vector<std::string> tokenizer_files(const std::string& dir, bool spm) {
  auto opt = [&](const std::string& f) {
    return platform::file_exists(dir + "/" + f) ? read_file(dir + "/" + f) : std::string();
  };
  if (spm) return {read_file(dir + "/tokenizer.model"), "", ""};
  return {read_file(dir + "/tokenizer.json"), opt("tokenizer_config.json"), opt("config.json")};
}

const void* ptr_or_null(const std::string& s) { return s.empty() ? nullptr : s.data(); }

void same_tokenizer(const Tokenizer& a, const Tokenizer& b) {
  CHECK(b.kind() == a.kind());
  CHECK(b.vocab_size() == a.vocab_size());
  CHECK(b.bos_id() == a.bos_id());
  CHECK(b.eos_id() == a.eos_id());
  for (const char* text :
       {"Hello world! <|eot_id|> 123 456", "  spaces\tand\nlines ", "", "\xC3\xA9t\xC3\xA9 \xF0\x9F\x99\x82",
        "\xE6\x9D\xB1\xE4\xBA\xAC [MASK] \xff\xfe", "<s>a</s>"})
    for (bool special : {false, true}) {
      CAPTURE(text);
      CAPTURE(special);
      const auto ids = a.encode(text, special);
      CHECK(b.encode(text, special) == ids);
      CHECK(b.decode(ids) == a.decode(ids));
    }
}

// Loading fails with `status` and a message holding `text`.
template <class F>
void expect_error(F&& load, Status status, const std::string& text) {
  try {
    load();
    FAIL("loaded without an error; expected: " << text);
  } catch (const Error& e) {
    CHECK_MESSAGE(e.status() == status, e.what());
    CHECK_MESSAGE(std::string(e.what()).find(text) != std::string::npos, e.what());
  }
}

// A file of `size` bytes that occupies no disk (a hole): the size checks must refuse it before reading.
struct SparseFile {
  SparseFile(const std::string& path, uint64_t size) {
    fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC, 0600);
    REQUIRE(fd >= 0);
    REQUIRE(::ftruncate(fd, off_t(size)) == 0);
  }
  ~SparseFile() { ::close(fd); }
  int fd = -1;
};

}  // namespace

TEST_CASE(
    "tokenizer: tokenizer.json and tokenizer.model load from memory and from descriptor ranges as from their "
    "directory") {
  test::TempDir tmp("diffvk-tok-mem");
  const std::string hf_tok =
      std::string(DIFFVK_TEST_DATA_DIR) + "/hf_tok";  // all three JSON files (config.json's EOS differs)
  for (const std::string dir_path : {kDir + "gpt2-bpe", kDir + "gpt2-prefix-bpe", kDir + "llama3-bpe",
                                     kDir + "spm-unigram", kDir + "spm-unigram-nobytes", kDir + "spm-bpe", hf_tok}) {
    const std::string name = dir_path.substr(dir_path.find_last_of('/') + 1);
    const bool spm = is_spm(name), fixture = dir_path != hf_tok;
    CAPTURE(name);
    const Tokenizer dir = Tokenizer::load(dir_path);
    const std::vector<std::string> files = tokenizer_files(dir_path, spm);
    // Memory: the caller's buffers are reused after the call.
    {
      std::vector<std::string> copy = files;
      const Tokenizer mem = spm ? Tokenizer::load_sentencepiece_memory(copy[0].data(), copy[0].size())
                                : Tokenizer::load_json_memory(copy[0].data(), copy[0].size(), ptr_or_null(copy[1]),
                                                              copy[1].size(), ptr_or_null(copy[2]), copy[2].size());
      for (auto& f : copy) std::fill(f.begin(), f.end(), '\xAB');
      same_tokenizer(dir, mem);
      if (fixture) CHECK(check_fixture(name, mem) >= 160);
    }
    // Descriptor ranges inside one larger file (an APK's uncompressed assets): junk before, between and after.
    const std::string packed = tmp / "packed.bin";
    int64_t off[3] = {-1, -1, -1};
    {
      std::ofstream o(packed, std::ios::binary);
      int64_t at = 13;
      o << std::string(13, 'x');
      for (int i = 0; i < 3; ++i) {
        if (files[i].empty()) continue;
        off[i] = at;
        o << files[i] << "junk!";
        at += int64_t(files[i].size()) + 5;
      }
      o << "trailing junk";
    }
    const int fd = ::open(packed.c_str(), O_RDONLY);
    REQUIRE(fd >= 0);
    auto range = [&](int i) {
      return files[i].empty() ? Tokenizer::FdRange{} : Tokenizer::FdRange{fd, off[i], int64_t(files[i].size())};
    };
    const Tokenizer ranged = spm ? Tokenizer::load_sentencepiece_fd(fd, off[0], int64_t(files[0].size()))
                                 : Tokenizer::load_json_fd(range(0), range(1), range(2));
    CHECK(::lseek(fd, 0, SEEK_CUR) == 0);  // pread: the descriptor's offset did not move
    same_tokenizer(dir, ranged);
    if (fixture) CHECK(check_fixture(name, ranged) >= 160);
    ::close(fd);
    {  // size -1: from the offset to the end of the file (the file's own descriptor, at an offset)
      const std::string tail = tmp / "tail.bin";
      std::ofstream(tail, std::ios::binary) << std::string(5, 'y') << files[0];
      const int t = ::open(tail.c_str(), O_RDONLY);
      REQUIRE(t >= 0);
      const Tokenizer whole = spm ? Tokenizer::load_sentencepiece_fd(t, 5, -1) : Tokenizer::load_json_fd({t, 5, -1});
      CHECK(whole.encode("Hello world, 123", false) == dir.encode("Hello world, 123", false));
      ::close(t);
    }
  }
  // Only the configs that are given count: hf_tok's tokenizer.json without tokenizer_config.json takes config.json's
  // ids (EOS 657), as a directory without that file does; with neither, no BOS/EOS.
  const std::vector<std::string> files = tokenizer_files(hf_tok, false);
  const Tokenizer no_tc =
      Tokenizer::load_json_memory(files[0].data(), files[0].size(), nullptr, 0, files[2].data(), files[2].size());
  CHECK(no_tc.bos_id() == 656);
  CHECK(no_tc.eos_id() == 657);
  {
    write_file(tmp / "tokenizer.json", files[0]);
    write_file(tmp / "config.json", files[2]);
    CHECK(Tokenizer::load(tmp.path()).eos_id() == 657);
  }
  const Tokenizer bare = Tokenizer::load_json_memory(files[0].data(), files[0].size());
  CHECK(bare.bos_id() == -1);
  CHECK(bare.eos_id() == -1);
  CHECK(bare.encode("Hello", false) == no_tc.encode("Hello", false));
}

TEST_CASE("tokenizer: hostile tokenizer bytes and descriptor ranges give clear errors") {
  test::TempDir tmp("diffvk-tok-mem-bad");
  const std::string json = read_file(kDir + "llama3-bpe/tokenizer.json"),
                    tc = read_file(kDir + "llama3-bpe/tokenizer_config.json"),
                    model = read_file(kDir + "spm-unigram/tokenizer.model");
  const auto J = [](const std::string& j, const std::string& c = "") {
    return [j, c] { Tokenizer::load_json_memory(j.data(), j.size(), c.empty() ? nullptr : c.data(), c.size()); };
  };
  const auto M = [](const std::string& m) { return [m] { Tokenizer::load_sentencepiece_memory(m.data(), m.size()); }; };
  // NULL and empty buffers.
  expect_error([] { Tokenizer::load_json_memory(nullptr, 10); }, Status::invalid_argument,
               "tokenizer.json (memory): the buffer is NULL");
  expect_error([] { Tokenizer::load_json_memory(nullptr, 0); }, Status::invalid_argument,
               "tokenizer.json (memory): the buffer is NULL");
  expect_error([] { Tokenizer::load_sentencepiece_memory(nullptr, 0); }, Status::invalid_argument,
               "tokenizer.model (memory): the buffer is NULL");
  expect_error([&] { Tokenizer::load_json_memory(json.data(), json.size(), nullptr, 5); }, Status::invalid_argument,
               "tokenizer_config.json (memory): the buffer is NULL with a size of 5");
  expect_error([&] { Tokenizer::load_json_memory(json.data(), json.size(), nullptr, 0, nullptr, 3); },
               Status::invalid_argument, "config.json (memory): the buffer is NULL");
  expect_error(J(""), Status::format_error, "tokenizer.json (memory): invalid JSON");
  expect_error(M(""), Status::format_error, "tokenizer.model (memory)");
  expect_error([&] { Tokenizer::load_json_memory(json.data(), json.size(), tc.data(), 0); }, Status::format_error,
               "tokenizer_config.json (memory): invalid JSON");  // present but empty
  // Truncated, garbage, the other kind's bytes, broken configs.
  expect_error(J(json.substr(0, json.size() / 2)), Status::format_error, "tokenizer.json (memory): invalid JSON");
  std::string garbage(4096, '\0');
  std::mt19937 rng(7);
  for (char& c : garbage) c = char(rng());
  expect_error(J(garbage), Status::format_error, "tokenizer.json (memory): invalid JSON");
  expect_error(M(garbage), Status::format_error, "tokenizer.model (memory)");
  expect_error(J(model), Status::format_error, "tokenizer.json (memory): invalid JSON");
  expect_error(M(json), Status::format_error, "tokenizer.model (memory)");
  expect_error(J("[1, 2]"), Status::format_error, "tokenizer.json (memory): top level must be an object");
  expect_error(J(json, "{"), Status::format_error, "tokenizer_config.json (memory): invalid JSON");
  expect_error(J(json, "[]"), Status::format_error, "tokenizer_config.json (memory): top level must be an object");
  expect_error(J(json, R"({"bos_token": "<nope>"})"), Status::format_error, "'bos_token' = '<nope>' is not a token");
  // A malformed special token names its key; pad_token and unk_token are not read (any form loads).
  expect_error(J(json, R"({"bos_token": 7})"), Status::format_error,
               "tokenizer_config.json (memory): 'bos_token' must be a string or an object with a string 'content'");
  expect_error(J(json, R"({"eos_token": {"content": 5}})"), Status::format_error, "'eos_token' must be a string");
  expect_error(J(json, R"({"eos_token": ["</s>"]})"), Status::format_error, "'eos_token' must be a string");
  const std::string unread = R"({"pad_token": 7, "unk_token": [1]})";
  CHECK(Tokenizer::load_json_memory(json.data(), json.size(), unread.data(), unread.size()).vocab_size() > 0);
  expect_error(
      [&] { Tokenizer::load_json_memory(json.data(), json.size(), nullptr, 0, "{\"eos_token_id\": 99999}", 23); },
      Status::format_error, "config.json (memory): 'eos_token_id' is not a token id");
  for (size_t n = 0; n < model.size(); n += 211) {  // every truncation loads or names the source; no crash
    try {
      Tokenizer::load_sentencepiece_memory(model.data(), n);
    } catch (const Error& e) {
      CHECK(std::string(e.what()).find("tokenizer.model (memory)") != std::string::npos);
    }
  }
  // Descriptor ranges.
  const std::string path = tmp / "t.json";
  write_file(path, json);
  const int fd = ::open(path.c_str(), O_RDONLY);
  REQUIRE(fd >= 0);
  const int64_t n = int64_t(json.size());
  using R = Tokenizer::FdRange;
  expect_error(
      [&] {
        Tokenizer::load_json_fd({fd, 0, n + 1});
      },
      Status::io_error, "requested, the file ends after");  // past the end
  expect_error([&] { Tokenizer::load_json_fd({fd, n + 10, -1}); }, Status::io_error, "past the end of the file");
  expect_error([&] { Tokenizer::load_sentencepiece_fd(fd, 1, n); }, Status::io_error, "tokenizer.model (fd");
  expect_error(
      [&] {
        Tokenizer::load_json_fd({-1, 0, 10});
      },
      Status::invalid_argument, "tokenizer.json (fd -1): invalid file descriptor");
  expect_error([&] { Tokenizer::load_sentencepiece_fd(-3, 0, -1); }, Status::invalid_argument,
               "invalid file descriptor -3");
  expect_error([&] { Tokenizer::load_json_fd({fd, -1, 10}); }, Status::invalid_argument, "negative offset");
  expect_error([&] { Tokenizer::load_json_fd({fd, 0, -2}); }, Status::invalid_argument, "size -2");
  expect_error(
      [&] {
        Tokenizer::load_json_fd(R{fd, 0, n}, R{-2, 0, 5}, R{});
      },
      Status::invalid_argument, "tokenizer_config.json (fd -2): invalid file descriptor");
  expect_error(
      [&] {
        Tokenizer::load_json_fd(R{fd, 0, n}, R{}, R{fd, 0, n + 1});
      },
      Status::io_error, "config.json (fd");
  expect_error(
      [&] {
        Tokenizer::load_json_fd(R{fd, 0, n}, R{fd, 0, 100}, R{});
      },
      Status::format_error,
      "tokenizer_config.json (fd");  // a range inside tokenizer.json: not a JSON text
  expect_error([&] { Tokenizer::load_json_fd({fd, 1, n - 1}); }, Status::format_error, "tokenizer.json (fd");
  CHECK(Tokenizer::load_json_fd(R{fd, 0, n}, R{}, R{}).vocab_size() == 660);
  {  // size -1 needs a regular file; a pipe is refused before anything is read
    int p[2];
    REQUIRE(::pipe(p) == 0);
    expect_error([&] { Tokenizer::load_sentencepiece_fd(p[0], 0, -1); }, Status::invalid_argument,
                 "needs a regular file");
    ::close(p[0]);
    ::close(p[1]);
  }
  ::close(fd);
  // Over the size limits (docs/limits.md), refused before anything is read: a sparse file, by descriptor and mapped.
  const uint64_t big = (uint64_t(256) << 20) + 1;
  SparseFile sparse(tmp / "sparse.bin", big);
  expect_error(
      [&] {
        Tokenizer::load_json_fd({sparse.fd, 0, -1});
      },
      Status::format_error, "more than the limit of 268435456");
  expect_error([&] { Tokenizer::load_sentencepiece_fd(sparse.fd, 0, -1); }, Status::format_error,
               "more than the limit of 268435456");
  expect_error(
      [&] {
        Tokenizer::load_json_fd(R{-1, 0, 0}, R{sparse.fd, 0, -1}, R{});
      },
      Status::invalid_argument, "tokenizer.json (fd -1)");
  const int jfd = ::open(path.c_str(), O_RDONLY);
  REQUIRE(jfd >= 0);
  expect_error(
      [&] {
        Tokenizer::load_json_fd(R{jfd, 0, -1}, R{sparse.fd, 0, (16 << 20) + 1}, R{});
      },
      Status::format_error, "tokenizer_config.json (fd");
  ::close(jfd);
  void* map = ::mmap(nullptr, big, PROT_READ, MAP_PRIVATE, sparse.fd, 0);
  REQUIRE(map != MAP_FAILED);
  expect_error([&] { Tokenizer::load_json_memory(map, big); }, Status::format_error,
               "larger than the limit of 268435456");
  expect_error([&] { Tokenizer::load_sentencepiece_memory(map, big); }, Status::format_error,
               "more than the limit of 268435456");
  expect_error([&] { Tokenizer::load_json_memory(json.data(), json.size(), map, (16 << 20) + 1); },
               Status::format_error,
               "tokenizer_config.json (memory): JSON text of 16777217 bytes is larger than the limit");
  ::munmap(map, big);
}

TEST_CASE("tokenizer: a GGUF file without a usable tokenizer is a clear error") {
  test::TempDir tmp("diffvk-tok-gguf");
  auto expect = [&](const GgufWriter& w, Status status, const std::string& text) {
    expect_load_error(write_gguf(tmp, w), status, text);
  };
  const std::string T = "tokenizer.ggml.";
  expect(gguf_header(300), Status::format_error, "no tokenizer (no tokenizer.ggml.model)");
  {
    GgufWriter w = gguf_header(100);
    w.add_string(T + "model", "bytes");
    expect(w, Status::format_error, "diffllama.vocab_size 100 < 256 for the bytes tokenizer");
  }
  {
    GgufWriter w = gguf_header(300);
    w.add_string(T + "model", "wordpiece");
    expect(w, Status::unsupported, "tokenizer.ggml.model 'wordpiece'");
  }
  {
    GgufWriter w = gguf_header(300);
    w.add_string(T + "model", "gpt2");
    w.add_string_array(T + "tokens", {"a", "b"});  // no tokenizer.huggingface.json: the arrays must be complete
    expect(w, Status::format_error, "tokenizer.ggml.token_type is missing");
  }
  {
    GgufWriter w = gguf_header(300);
    w.add_string(T + "model", "gpt2");
    w.add_string("tokenizer.huggingface.json", "{\"model\": 3}");
    expect(w, Status::format_error, "tokenizer.huggingface.json");
  }
  // SentencePiece arrays: each missing, mistyped or of the wrong length names its key.
  const std::vector<std::string> tokens = {"<unk>", "<s>", "</s>",
                                           "\xE2\x96\x81"
                                           "a",
                                           "b"};
  auto spm = [&](int drop, bool bad_len, bool bad_type) {
    GgufWriter w = gguf_header(300);
    w.add_string(T + "model", "llama");
    if (drop != 0) w.add_string_array(T + "tokens", tokens);
    if (drop != 1) {
      if (bad_type)
        w.add_i32_array(T + "scores", {0, 0, 0, 0, 0});
      else
        w.add_f32_array(T + "scores", std::vector<float>(bad_len ? 4 : 5, 0.0f));
    }
    if (drop != 2) w.add_i32_array(T + "token_type", {2, 3, 3, 1, 1});
    if (drop != 3) w.add_u32(T + "unknown_token_id", 0);
    return w;
  };
  expect(spm(0, false, false), Status::format_error, "tokenizer.ggml.tokens is missing");
  expect(spm(1, false, false), Status::format_error, "tokenizer.ggml.scores is missing");
  expect(spm(2, false, false), Status::format_error, "tokenizer.ggml.token_type is missing");
  expect(spm(3, false, false), Status::format_error, "tokenizer.ggml.unknown_token_id is missing");
  expect(spm(-1, true, false), Status::format_error, "tokenizer.ggml.scores has 4 entries");
  expect(spm(-1, false, true), Status::format_error, "tokenizer.ggml.scores must be an array of float32");
  {
    GgufWriter w = spm(2, false, false);
    w.add_i32_array(T + "token_type", {2, 3, 3, 9, 1});
    expect(w, Status::format_error, "tokenizer.ggml.token_type[3] is 9");
  }
  {
    GgufWriter w = spm(3, false, false);
    w.add_u32(T + "unknown_token_id", 7);
    expect(w, Status::format_error, "tokenizer.ggml.unknown_token_id 7 is outside the vocabulary");
  }
  {
    GgufWriter w = spm(3, false, false);
    w.add_u32(T + "unknown_token_id", 3);  // a normal piece
    expect(w, Status::format_error, "unk_id 3 is not the id of an unknown piece");
  }
  {  // more pieces than the model has rows
    GgufWriter small = gguf_header(4);
    small.add_string(T + "model", "llama");
    small.add_string_array(T + "tokens", tokens);
    expect(small, Status::format_error, "diffllama.vocab_size is 4");
  }
  {  // the valid one loads and encodes
    const Tokenizer t = Tokenizer::load(write_gguf(tmp, spm(-1, false, false)));
    CHECK(t.kind() == "sentencepiece BPE");
    CHECK(t.encode("ab", false) == std::vector<int32_t>{3, 4});
  }
}

TEST_CASE("tokenizer: diffvk quantize carries a byte-level BPE model's tokenizer into the GGUF file") {
  test::TempDir tmp("diffvk-tok-gguf");
  const std::string dir = std::string(DIFFVK_TEST_DATA_DIR) + "/hf_tok", out = tmp / "m.gguf";
  quantize_model(dir, out, QuantKind::f16);
  const Tokenizer a = Tokenizer::load(dir), b = Tokenizer::load(out);
  CHECK(b.kind() == a.kind());
  CHECK(b.bos_id() == a.bos_id());
  CHECK(b.eos_id() == a.eos_id());
  // The tokenizer's EOS (<|eot_id|>, 658: tokenizer_config.json) is not config.json's (657): both survive, the model's
  // as diffllama.eos_token_id.
  CHECK(a.eos_id() == 658);
  const Checkpoint ck = open_checkpoint(out);
  CHECK(ck.config.bos_token_id == 656);
  CHECK(ck.config.eos_token_id == 657);
  for (const char* text :
       {"Hello world! <|eot_id|> 123 456", "  spaces\tand\nlines ", "", "\xC3\xA9t\xC3\xA9 \xF0\x9F\x99\x82"})
    for (bool special : {false, true}) {
      CAPTURE(text);
      CHECK(b.encode(text, special) == a.encode(text, special));
    }
  {  // the C ABI's loader takes the file too
    diffvk_tokenizer* c = nullptr;
    REQUIRE(diffvk_tokenizer_load(out.c_str(), &c) == DIFFVK_OK);
    const std::string text = "Hello<|eot_id|> w\xc3\xb6rld";
    CHECK(c_encode(c, text) == a.encode(text, true));
    diffvk_tokenizer_free(c);
    CHECK(diffvk_tokenizer_load((tmp / "none.gguf").c_str(), &c) == DIFFVK_IO_ERROR);
  }
  // Re-quantizing the GGUF file keeps the tokenizer.
  const std::string again = tmp / "m2.gguf";
  quantize_model(out, again, QuantKind::q8_0);
  CHECK(Tokenizer::load(again).encode("Hello world!", true) == a.encode("Hello world!", true));
}
