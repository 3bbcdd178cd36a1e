// Added tokens (tokenizer.json "added_tokens"): found in the text before pre-tokenisation, the
// leftmost match first and the longest of those, as Hugging Face tokenizers does.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace diffvk::tok {

struct AddedToken {
  std::string content;
  int32_t id;
  bool lstrip = false, rstrip = false;  // the match takes the whitespace on its left / right
};

struct Segment {
  std::string_view text;  // a stretch of ordinary text, when id < 0
  int32_t id = -1;        // an added token
};

// Loading is linear in the number of tokens and split() costs, per text position, one hash lookup per
// distinct token length (sorted insertion and a scan of every token at every position were
// quadratic). A content added twice keeps its first entry, as the first match did before.
class AddedTokens {
 public:
  void add(AddedToken t);
  std::vector<Segment> split(std::string_view text) const;
  bool empty() const { return tokens_.empty(); }

 private:
  std::unordered_map<std::string, AddedToken> tokens_;  // by content
  std::vector<size_t> lengths_;                         // the distinct content lengths, longest first
};

}  // namespace diffvk::tok
