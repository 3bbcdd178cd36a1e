// The split patterns of byte-level BPE tokenizers, as hand-written matchers (no regex engine):
//   gpt2:   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
//   llama3: (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|
//           \s*[\r\n]+|\s+(?!\S)|\s+
//   o200k:  [^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|
//           [^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|
//           \p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+
//           (OpenAI's o200k_base, GPT-4o's; the Phi-4-mini family's tokenizer.json carries it)
// Each matcher gives what a backtracking engine (Oniguruma, as Hugging Face tokenizers uses) gives: the first
// alternative that matches, each quantifier greedy and backtracking only as far as the rest needs.
// Bytes that are not valid UTF-8 count as one character each of none of the classes.
#pragma once
#include <string>
#include <string_view>
#include <vector>

namespace diffvk::tok {

enum class SplitPattern { gpt2, llama3, o200k };

// The pattern a tokenizer.json regex string is, or throws unsupported naming it.
SplitPattern split_pattern_from_regex(const std::string& regex);
extern const char* const kGpt2Pattern;
extern const char* const kLlama3Pattern;
extern const char* const kO200kPattern;

// The pieces of `text` (every match; the patterns leave no gaps), in order, covering all of it.
std::vector<std::string_view> split(std::string_view text, SplitPattern p);

}  // namespace diffvk::tok
