// SentencePiece tokenizer.model, unigram and BPE (tokenizer_spm.cpp).
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "io/sentencepiece_model.hpp"
#include "tokenizer/tokenizer_impl.hpp"

namespace diffvk::tok {

// The size limit of a tokenizer.model (from any source); larger is a format_error naming it.
inline constexpr size_t kSentencePieceMaxBytes = size_t(256) << 20;

// Reads the file (bounded), then calls parse_sentencepiece.
std::unique_ptr<Tokenizer::Impl> load_sentencepiece(const std::string& path);
// The same from bytes (`name` labels messages): the one loader of every source (a directory, memory, a
// descriptor range; fuzzing). Refuses more than kSentencePieceMaxBytes before reading anything.
std::unique_ptr<Tokenizer::Impl> parse_sentencepiece(const uint8_t* data, size_t size, const std::string& name);
// From the pieces and settings themselves (a GGUF file's tokenizer.ggml.* arrays); the same checks.
std::unique_ptr<Tokenizer::Impl> make_sentencepiece(SentencePieceModel model, const std::string& name);

}  // namespace diffvk::tok
