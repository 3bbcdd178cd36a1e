// libFuzzer harness for the tokenizer file readers (runtime/tokenizer/tokenizer_*.cpp,
// runtime/io/sentencepiece_model.cpp). The first byte picks the format (even: tokenizer.model protobuf,
// odd: tokenizer.json); the rest is the file. Any input must load or throw diffvk::Error; a loaded
// tokenizer must encode a fixed multilingual text (with invalid UTF-8) and decode the ids it produced,
// again only failing with diffvk::Error. Seeds (tests/fuzz/corpus/tokenizer): one byte (0 or 1) followed by
// tests/data/tokenizer/{spm-unigram,spm-bpe}/tokenizer.model or {gpt2,llama3,o200k}-bpe/tokenizer.json.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "tokenizer/tokenizer_bpe.hpp"
#include "tokenizer/tokenizer_spm.hpp"

using namespace diffvk;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  std::unique_ptr<Tokenizer::Impl> t;
  try {
    if (data[0] % 2 == 0)
      t = tok::parse_sentencepiece(data + 1, size - 1, "fuzz.model");
    else
      t = tok::parse_hf_json(std::string(reinterpret_cast<const char*>(data + 1), size - 1), "fuzz.json");
  } catch (const Error&) {
    return 0;
  }
  try {
    const auto ids =
        t->encode("Hello w\xc3\xb6rld 12345 \xe6\x9d\xb1\xe4\xba\xac  \n\t<sep> <|endoftext|> \xff\xc3 'll", true);
    for (int32_t id : ids)
      if (id < 0 || uint32_t(id) >= t->vocab_size) {
        std::fprintf(stderr, "fuzz_tokenizer: encode produced id %d outside the vocabulary %u\n", id, t->vocab_size);
        std::abort();
      }
    t->decode(ids.data(), ids.size());
  } catch (const Error&) {}
  return 0;
}
