// Added tokens (tokenizer.json "added_tokens"): found in the text before pre-tokenisation, the
// leftmost match first and the longest of those, as Hugging Face tokenizers does.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
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

class AddedTokens {
 public:
  void add(AddedToken t);
  std::vector<Segment> split(std::string_view text) const;
  bool empty() const { return tokens_.empty(); }

 private:
  std::vector<AddedToken> tokens_;  // longest first, so the first match at a position is the longest
};

}  // namespace diffvk::tok
