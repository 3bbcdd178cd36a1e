#include "tokenizer/tokenizer_added.hpp"

#include <algorithm>

#include "tokenizer/tokenizer_unicode.hpp"

namespace diffvk::tok {
namespace {
// Start of the whitespace run that ends at `end` (not before `lo`).
size_t strip_left(std::string_view s, size_t lo, size_t end) {
  while (end > lo) {
    size_t b = end - 1;
    while (b > lo && (static_cast<unsigned char>(s[b]) & 0xC0) == 0x80) --b;
    const auto u = next_utf8(s, b);
    if (b + u.len != end || char_class(u.cp) != CharClass::space) break;
    end = b;
  }
  return end;
}
size_t strip_right(std::string_view s, size_t i) {
  while (i < s.size()) {
    const auto u = next_utf8(s, i);
    if (char_class(u.cp) != CharClass::space) break;
    i += u.len;
  }
  return i;
}
}  // namespace

void AddedTokens::add(AddedToken t) {
  auto at = std::find_if(tokens_.begin(), tokens_.end(), [&](const AddedToken& o) { return o.content.size() < t.content.size(); });
  tokens_.insert(at, std::move(t));
}

std::vector<Segment> AddedTokens::split(std::string_view text) const {
  std::vector<Segment> out;
  size_t start = 0;  // of the pending ordinary text
  for (size_t i = 0; i < text.size();) {
    const AddedToken* hit = nullptr;
    for (const auto& t : tokens_)
      if (!t.content.empty() && text.compare(i, t.content.size(), t.content) == 0) {
        hit = &t;
        break;
      }
    if (!hit) {
      ++i;
      continue;
    }
    const size_t b = hit->lstrip ? strip_left(text, start, i) : i;
    const size_t e = hit->rstrip ? strip_right(text, i + hit->content.size()) : i + hit->content.size();
    if (b > start) out.push_back({text.substr(start, b - start), -1});
    out.push_back({{}, hit->id});
    start = i = e;
  }
  if (start < text.size()) out.push_back({text.substr(start), -1});
  return out;
}

}  // namespace diffvk::tok
