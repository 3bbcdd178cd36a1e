#include "tokenizer/tokenizer_added.hpp"

#include <algorithm>
#include <functional>

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
  const size_t n = t.content.size();
  if (!tokens_.emplace(t.content, std::move(t)).second) return;
  const auto at = std::lower_bound(lengths_.begin(), lengths_.end(), n, std::greater<size_t>());
  if (at == lengths_.end() || *at != n) lengths_.insert(at, n);  // at most one entry per length
}

std::vector<Segment> AddedTokens::split(std::string_view text) const {
  std::vector<Segment> out;
  size_t start = 0;  // of the pending ordinary text
  std::string probe;
  for (size_t i = 0; i < text.size();) {
    const AddedToken* hit = nullptr;
    for (const size_t n : lengths_) {
      if (n == 0 || n > text.size() - i) continue;
      probe.assign(text.data() + i, n);
      const auto it = tokens_.find(probe);
      if (it != tokens_.end()) {
        hit = &it->second;
        break;
      }
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
