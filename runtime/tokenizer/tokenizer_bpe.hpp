// Byte-level BPE from a Hugging Face tokenizer.json (tokenizer_bpe.cpp).
#pragma once
#include <memory>
#include <string>
#include <string_view>

#include "tokenizer/tokenizer_files.hpp"
#include "tokenizer/tokenizer_impl.hpp"

namespace diffvk::tok {

// `config_dir` ("" = none): where tokenizer_config.json / config.json name BOS and EOS. Reads the files, then
// calls hf_json_with_configs.
std::unique_ptr<Tokenizer::Impl> load_hf_json(const std::string& path, const std::string& config_dir);
// tokenizer.json's bytes (`name` labels messages) with the config files' bytes that name BOS and EOS: the one
// loader of every source (a directory, memory, descriptor ranges).
std::unique_ptr<Tokenizer::Impl> hf_json_with_configs(std::string_view text, const std::string& name,
                                                      const SpecialConfigs& configs);
// tokenizer.json alone (bounded: kJsonTokenizerMaxBytes; no BOS/EOS lookup in config files): fuzzing, GGUF files.
std::unique_ptr<Tokenizer::Impl> parse_hf_json(std::string_view text, const std::string& name);

}  // namespace diffvk::tok
