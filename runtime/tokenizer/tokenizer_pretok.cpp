#include "tokenizer/tokenizer_pretok.hpp"

#include "diffvk/error.hpp"
#include "io/printable.hpp"
#include "tokenizer/tokenizer_unicode.hpp"

namespace diffvk::tok {

const char* const kGpt2Pattern = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
const char* const kLlama3Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

const char* const kO200kPattern =
    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|)"
    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|)"
    R"(\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

SplitPattern split_pattern_from_regex(const std::string& regex) {
  if (regex == kGpt2Pattern) return SplitPattern::gpt2;
  if (regex == kLlama3Pattern) return SplitPattern::llama3;
  if (regex == kO200kPattern) return SplitPattern::o200k;
  throw Error(Status::unsupported,
              "pre-tokenizer split regex '" + printable(regex, 400) +
                  "' is not supported (only the GPT-2, Llama-3 and o200k (GPT-4o, Phi-4-mini) patterns are "
                  "implemented)");
}

namespace {

struct Char {
  uint32_t cp;
  Category cat;
  CharClass cls;
  size_t begin, end;  // bytes
};

class Matcher {
 public:
  explicit Matcher(std::string_view text) {
    for (size_t i = 0; i < text.size();) {
      const auto u = next_utf8(text, i);
      const Category cat = category(u.cp);
      c_.push_back({u.cp, cat, class_of(cat), i, i + u.len});
      i += u.len;
    }
  }
  size_t size() const { return c_.size(); }
  size_t byte(size_t i) const { return i < c_.size() ? c_[i].begin : (c_.empty() ? 0 : c_.back().end); }

  // Each returns the end (in characters) of the match at i, or 0 when the alternative fails.
  size_t contraction(size_t i, bool any_case) const {
    if (!is(i, '\'')) return 0;
    // (?i) as Oniguruma folds case: also U+017F (long s) for 's'.
    const auto eq = [&](size_t k, char ch) {
      return is(k, ch) ||
             (any_case && (is(k, char(ch - 'a' + 'A')) || (ch == 's' && k < c_.size() && c_[k].cp == 0x17F)));
    };
    for (char ch : {'s', 't', 'm', 'd'})
      if (eq(i + 1, ch)) return i + 2;
    if ((eq(i + 1, 'r') || eq(i + 1, 'v')) && eq(i + 2, 'e')) return i + 3;
    if (eq(i + 1, 'l') && eq(i + 2, 'l')) return i + 3;
    return 0;
  }
  // ` ?C+` for class C (`other` = [^\s\p{L}\p{N}]).
  size_t space_then_run(size_t i, CharClass cls) const {
    const size_t j = is(i, ' ') && cls_at(i + 1) == cls ? i + 1 : i;
    return cls_at(j) == cls ? run(j, cls) : 0;
  }
  // `\s+(?!\S)` then `\s+`.
  size_t spaces(size_t i) const {
    if (cls_at(i) != CharClass::space) return 0;
    const size_t j = run(i, CharClass::space);
    if (j == size() || j - i == 1) return j;  // at the end, or the (?!\S) alternative fails and \s+ takes the one
    return j - 1;
  }
  // `[^\r\n\p{L}\p{N}]?\p{L}+`
  size_t llama_letters(size_t i) const {
    const CharClass c = cls_at(i);
    if (i < size() && c != CharClass::letter && c != CharClass::number && !is(i, '\r') && !is(i, '\n') &&
        cls_at(i + 1) == CharClass::letter)
      return run(i + 1, CharClass::letter);
    return c == CharClass::letter ? run(i, CharClass::letter) : 0;
  }
  size_t llama_digits(size_t i) const {
    size_t j = i;
    while (j < i + 3 && cls_at(j) == CharClass::number) ++j;
    return j == i ? 0 : j;
  }
  // ` ?[^\s\p{L}\p{N}]+[\r\n]*`
  size_t llama_other(size_t i) const {
    size_t j = space_then_run(i, CharClass::other);
    if (!j) return 0;
    while (is(j, '\r') || is(j, '\n')) ++j;
    return j;
  }
  // `\s*[\r\n]+`: through the last \r or \n of the whitespace run.
  size_t llama_newlines(size_t i) const {
    const size_t j = run(i, CharClass::space);
    for (size_t k = j; k > i; --k)
      if (is(k - 1, '\r') || is(k - 1, '\n')) return k;
    return 0;
  }
  // o200k's two word alternatives, `[^\r\n\p{L}\p{N}]?` + `U*W+` (upper_first false) or `U+W*` (true), then
  // `(?i:'s|'t|'re|'ve|'m|'ll|'d)?`, with U = [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}] and W = [\p{Ll}\p{Lm}\p{Lo}\p{M}].
  // The optional first character is tried taken, then not taken (a mark can be it, or U, or W).
  size_t o200k_word(size_t i, bool upper_first) const {
    for (const size_t j : {i + 1, i}) {
      if (j > i && !(i < size() && cls_at(i) != CharClass::letter && cls_at(i) != CharClass::number && !is(i, '\r') &&
                     !is(i, '\n')))
        continue;
      const size_t e = upper_first ? upper_then_lower(j) : lower_after_upper(j);
      if (e) {
        const size_t c = contraction(e, true);
        return c ? c : e;
      }
    }
    return 0;
  }
  // ` ?[^\s\p{L}\p{N}]+[\r\n/]*`
  size_t o200k_other(size_t i) const {
    const size_t j = is(i, ' ') && i + 1 < size() && cls_at(i + 1) == CharClass::other ? i + 1 : i;
    if (j >= size() || cls_at(j) != CharClass::other) return 0;
    size_t k = run(j, CharClass::other);
    while (is(k, '\r') || is(k, '\n') || is(k, '/')) ++k;
    return k;
  }

 private:
  bool is(size_t i, char ch) const { return i < c_.size() && c_[i].cp == uint32_t(uint8_t(ch)); }
  CharClass cls_at(size_t i) const { return i < c_.size() ? c_[i].cls : CharClass::other; }
  size_t run(size_t i, CharClass cls) const {
    while (i < c_.size() && c_[i].cls == cls) ++i;
    return i;
  }
  bool upper(size_t i) const {  // [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]
    if (i >= c_.size()) return false;
    const Category c = c_[i].cat;
    return c == Category::Lu || c == Category::Lt || c == Category::Lm || c == Category::Lo || c == Category::M;
  }
  bool lower(size_t i) const {  // [\p{Ll}\p{Lm}\p{Lo}\p{M}]
    if (i >= c_.size()) return false;
    const Category c = c_[i].cat;
    return c == Category::Ll || c == Category::Lm || c == Category::Lo || c == Category::M;
  }
  // `U*W+` at j: U* takes all it can, then gives back until W+ matches; W+ takes all it can. 0 when it fails.
  size_t lower_after_upper(size_t j) const {
    size_t u = j;
    while (upper(u)) ++u;
    for (size_t k = u + 1; k-- > j;) {
      if (!lower(k)) continue;
      while (lower(k)) ++k;
      return k;
    }
    return 0;
  }
  // `U+W*` at j.
  size_t upper_then_lower(size_t j) const {
    if (!upper(j)) return 0;
    size_t k = j;
    while (upper(k)) ++k;
    while (lower(k)) ++k;
    return k;
  }
  std::vector<Char> c_;
};

}  // namespace

std::vector<std::string_view> split(std::string_view text, SplitPattern p) {
  const Matcher m(text);
  std::vector<std::string_view> out;
  for (size_t i = 0; i < m.size();) {
    size_t j = 0;
    if (p == SplitPattern::o200k) {  // no contraction alternative of its own: the words carry them
      j = m.o200k_word(i, false);
      if (!j) j = m.o200k_word(i, true);
      if (!j) j = m.llama_digits(i);
      if (!j) j = m.o200k_other(i);
      if (!j) j = m.llama_newlines(i);
    } else if (p == SplitPattern::gpt2) {
      j = m.contraction(i, false);
      if (!j) j = m.space_then_run(i, CharClass::letter);
      if (!j) j = m.space_then_run(i, CharClass::number);
      if (!j) j = m.space_then_run(i, CharClass::other);
    } else {
      j = m.contraction(i, true);
      if (!j) j = m.llama_letters(i);
      if (!j) j = m.llama_digits(i);
      if (!j) j = m.llama_other(i);
      if (!j) j = m.llama_newlines(i);
    }
    if (!j) j = m.spaces(i);
    if (!j) throw Error(Status::internal, "pre-tokenizer: no alternative matched at character " + std::to_string(i));
    out.push_back(text.substr(m.byte(i), m.byte(j) - m.byte(i)));
    i = j;
  }
  return out;
}

}  // namespace diffvk::tok
