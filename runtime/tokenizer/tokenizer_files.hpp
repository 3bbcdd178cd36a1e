// What the tokenizer kinds share (tokenizer_files.cpp): bounded file reads, messages, and the BOS/EOS
// ids named by the configs of a model directory. Includes no other tokenizer file.
#pragma once
#include <cstdint>
#include <functional>
#include <string>

#include "io/printable.hpp"

namespace diffvk::tok {

// Special-token ids named by tokenizer_config.json (bos_token / eos_token) or config.json
// (bos_token_id / eos_token_id) in `dir`; `lookup` maps a token's text to its id (-1 if absent).
struct SpecialIds {
  int32_t bos = -1, eos = -1;
};
SpecialIds read_special_ids(const std::string& dir, uint32_t vocab_size,
                            const std::function<int32_t(const std::string&)>& lookup);

// Text from a file, bounded and with control / non-ASCII bytes escaped, for messages.
using diffvk::printable;  // io/printable.hpp
bool exists(const std::string& path);
std::string read_text_file(const std::string& path, uint64_t max_bytes);

}  // namespace diffvk::tok
