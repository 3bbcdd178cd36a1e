// Byte-level BPE from a Hugging Face tokenizer.json (tokenizer_bpe.cpp).
#pragma once
#include <memory>
#include <string>

#include "tokenizer/tokenizer_impl.hpp"

namespace diffvk::tok {

// `config_dir` ("" = none): where tokenizer_config.json / config.json name BOS and EOS.
std::unique_ptr<Tokenizer::Impl> load_hf_json(const std::string& path, const std::string& config_dir);
// The same from memory (`name` labels messages; no BOS/EOS lookup in config files): fuzzing.
std::unique_ptr<Tokenizer::Impl> parse_hf_json(const std::string& text, const std::string& name);

}  // namespace diffvk::tok
