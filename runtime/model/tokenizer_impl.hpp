// The interface every tokenizer kind implements, and the loaders (include/diffvk/tokenizer.hpp).
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "diffvk/tokenizer.hpp"
#include "io/printable.hpp"

namespace diffvk {

class Tokenizer::Impl {
 public:
  virtual ~Impl() = default;
  virtual std::vector<int32_t> encode(std::string_view text, bool add_special) const = 0;
  virtual std::string decode(const int32_t* ids, size_t n) const = 0;
  int32_t bos = -1, eos = -1;
  uint32_t vocab_size = 0;
  std::string kind;
};

namespace tok {
// Special-token ids named by tokenizer_config.json (bos_token / eos_token) or config.json
// (bos_token_id / eos_token_id) in `dir`; `lookup` maps a token's text to its id (-1 if absent).
struct SpecialIds {
  int32_t bos = -1, eos = -1;
};
SpecialIds read_special_ids(const std::string& dir, uint32_t vocab_size,
                            const std::function<int32_t(const std::string&)>& lookup);

std::unique_ptr<Tokenizer::Impl> load_hf_json(const std::string& path, const std::string& config_dir);
std::unique_ptr<Tokenizer::Impl> load_sentencepiece(const std::string& path);
// The same from memory (`name` labels messages; no BOS/EOS lookup in config files): fuzzing.
std::unique_ptr<Tokenizer::Impl> parse_hf_json(const std::string& text, const std::string& name);
std::unique_ptr<Tokenizer::Impl> parse_sentencepiece(const uint8_t* data, size_t size, const std::string& name);
std::unique_ptr<Tokenizer::Impl> make_bytes(uint32_t vocab_size, int32_t bos, int32_t eos);

// Text from a file, bounded and with control / non-ASCII bytes escaped, for messages.
using diffvk::printable;  // io/printable.hpp
bool exists(const std::string& path);
std::string read_text_file(const std::string& path, uint64_t max_bytes);
}  // namespace tok

}  // namespace diffvk
