// UTF-8 decoding and the few Unicode classes the tokenizers need (no ICU: a generated table).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace diffvk::tok {

// One step of strict UTF-8 decoding at s[i]: shortest form only, no surrogates, <= U+10FFFF.
// An invalid or truncated sequence yields {invalid, 1}: one byte, as SentencePiece and the
// byte-level pre-tokenizers treat it.
struct Utf8Char {
  static constexpr uint32_t invalid = 0xFFFFFFFFu;
  uint32_t cp;
  size_t len;
};
Utf8Char next_utf8(std::string_view s, size_t i);
void append_utf8(std::string& out, uint32_t cp);

enum class CharClass : uint8_t { other, letter, number, space };
// \p{L}, \p{N}, and \s (the Unicode White_Space property); invalid bytes are `other`.
CharClass char_class(uint32_t cp);

// The general categories the o200k split pattern tells apart: the letters by subcategory, the marks M (Mn, Mc,
// Me), the numbers N, and \s (White_Space, which is none of the others); invalid bytes and the rest are `other`.
enum class Category : uint8_t { other, Lu, Ll, Lt, Lm, Lo, M, N, space };
Category category(uint32_t cp);
CharClass class_of(Category c);  // char_class(cp) == class_of(category(cp))

}  // namespace diffvk::tok
