// What the tokenizer kinds share (tokenizer_files.cpp): bounded file reads, messages, and the BOS/EOS
// ids named by the configs of a model directory. Includes no other tokenizer file.
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "io/printable.hpp"

namespace diffvk::tok {

// The files beside tokenizer.json that name BOS and EOS, as bytes: tokenizer_config.json (bos_token /
// eos_token) first, then config.json (bos_token_id / eos_token_id). `text` absent = no such file; `name`
// labels messages (the path, or e.g. "tokenizer_config.json (memory)"). The views must outlive the call.
struct ConfigText {
  std::optional<std::string_view> text;
  std::string name;
};
struct SpecialConfigs {
  ConfigText tokenizer_config, config;
};
// The config files of a model directory ("" = none): those that exist, read (bounded: kJsonConfigMaxBytes) into
// this object, which `configs` views (so it is neither copied nor moved).
struct DirConfigs {
  explicit DirConfigs(const std::string& dir);
  DirConfigs(const DirConfigs&) = delete;
  DirConfigs& operator=(const DirConfigs&) = delete;
  SpecialConfigs configs;

 private:
  std::string bytes_[2];
};

// Special-token ids named by the config files; `lookup` maps a token's text to its id (-1 if absent).
// format_error naming the file for a config that is not a JSON object (limit kJsonConfigMaxBytes), a
// bos_token/eos_token that is not a token, or an id outside the vocabulary.
struct SpecialIds {
  int32_t bos = -1, eos = -1;
};
SpecialIds special_ids(const SpecialConfigs& configs, uint32_t vocab_size,
                       const std::function<int32_t(const std::string&)>& lookup);

// Text from a file, bounded and with control / non-ASCII bytes escaped, for messages.
using diffvk::printable;  // io/printable.hpp
bool exists(const std::string& path);
std::string read_text_file(const std::string& path, uint64_t max_bytes);

}  // namespace diffvk::tok
