// The interface every tokenizer kind implements (include/diffvk/tokenizer.hpp). The loaders are
// declared next to the kind that defines them: tokenizer_bpe.hpp, tokenizer_spm.hpp.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "diffvk/tokenizer.hpp"

namespace diffvk {

class Tokenizer::Impl {
 public:
  virtual ~Impl() = default;
  virtual std::vector<int32_t> encode(std::string_view text, bool add_special) const = 0;
  virtual std::string decode(const int32_t* ids, size_t n) const = 0;
  int32_t bos = -1, eos = -1;
  uint32_t vocab_size = 0;
  std::string kind;
};

namespace tok {
// The bytes tokenizer (tokenizer.cpp): ids 0..255 are the bytes; vocab_size >= 256.
std::unique_ptr<Tokenizer::Impl> make_bytes(uint32_t vocab_size, int32_t bos, int32_t eos);
}  // namespace tok

}  // namespace diffvk
