#include "tokenizer/tokenizer_unicode.hpp"

#include <algorithm>
#include <iterator>

namespace diffvk::tok {
namespace {

struct Range {
  uint32_t lo, hi;
  Category cat;
};
constexpr Category Lu = Category::Lu, Ll = Category::Ll, Lt = Category::Lt, Lm = Category::Lm, Lo = Category::Lo,
                   M = Category::M, N = Category::N;
constexpr Range kRanges[] = {
#include "tokenizer/tokenizer_unicode_table.inc"
};

bool white_space(uint32_t c) {
  return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

}  // namespace

Utf8Char next_utf8(std::string_view s, size_t i) {
  const auto b = [&](size_t k) { return static_cast<unsigned char>(s[i + k]); };
  const unsigned c0 = b(0);
  if (c0 < 0x80) return {c0, 1};
  size_t len;
  uint32_t cp, min;
  if ((c0 & 0xE0) == 0xC0)
    len = 2, cp = c0 & 0x1F, min = 0x80;
  else if ((c0 & 0xF0) == 0xE0)
    len = 3, cp = c0 & 0x0F, min = 0x800;
  else if ((c0 & 0xF8) == 0xF0)
    len = 4, cp = c0 & 0x07, min = 0x10000;
  else
    return {Utf8Char::invalid, 1};
  if (i + len > s.size()) return {Utf8Char::invalid, 1};
  for (size_t k = 1; k < len; ++k) {
    if ((b(k) & 0xC0) != 0x80) return {Utf8Char::invalid, 1};
    cp = (cp << 6) | (b(k) & 0x3F);
  }
  if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return {Utf8Char::invalid, 1};
  return {cp, len};
}

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += char(cp);
  } else if (cp < 0x800) {
    out += char(0xC0 | (cp >> 6));
    out += char(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += char(0xE0 | (cp >> 12));
    out += char(0x80 | ((cp >> 6) & 0x3F));
    out += char(0x80 | (cp & 0x3F));
  } else {
    out += char(0xF0 | (cp >> 18));
    out += char(0x80 | ((cp >> 12) & 0x3F));
    out += char(0x80 | ((cp >> 6) & 0x3F));
    out += char(0x80 | (cp & 0x3F));
  }
}

Category category(uint32_t cp) {
  if (cp == Utf8Char::invalid) return Category::other;
  if (white_space(cp)) return Category::space;
  auto it =
      std::upper_bound(std::begin(kRanges), std::end(kRanges), cp, [](uint32_t c, const Range& r) { return c < r.lo; });
  if (it == std::begin(kRanges)) return Category::other;
  --it;
  return cp <= it->hi ? it->cat : Category::other;
}

CharClass char_class(uint32_t cp) { return class_of(category(cp)); }

CharClass class_of(Category c) {
  switch (c) {
    case Category::Lu:
    case Category::Ll:
    case Category::Lt:
    case Category::Lm:
    case Category::Lo:
      return CharClass::letter;
    case Category::N:
      return CharClass::number;
    case Category::space:
      return CharClass::space;
    case Category::M:
    case Category::other:
      break;
  }
  return CharClass::other;
}

}  // namespace diffvk::tok
