// Tokenizer (include/diffvk/tokenizer.hpp): one file to a tokenizer of its kind, the bytes tokenizer,
// and the members every kind shares. Tokenizer::load (a model directory) is runtime/model/
// model_tokenizer.cpp: its bytes fallback reads config.json as the model does.
#include "diffvk/tokenizer.hpp"

#include "tokenizer/tokenizer_bpe.hpp"
#include "tokenizer/tokenizer_impl.hpp"
#include "tokenizer/tokenizer_spm.hpp"

namespace diffvk {
namespace {

class BytesTokenizer final : public Tokenizer::Impl {
 public:
  std::vector<int32_t> encode(std::string_view text, bool add_special) const override {
    std::vector<int32_t> ids;
    ids.reserve(text.size() + 1);
    if (add_special && bos >= 0) ids.push_back(bos);
    for (unsigned char ch : text) ids.push_back(ch);
    return ids;
  }
  std::string decode(const int32_t* ids, size_t n) const override {
    std::string out;
    for (size_t i = 0; i < n; ++i) {
      if (ids[i] < 0 || uint32_t(ids[i]) >= vocab_size)
        throw Error(Status::invalid_argument, "decode: id " + std::to_string(ids[i]) + " at index " + std::to_string(i) +
                                                  " is outside the vocabulary (size " + std::to_string(vocab_size) + ")");
      if (ids[i] < 256) out += char(ids[i]);  // ids above the bytes have no text
    }
    return out;
  }
};

}  // namespace

std::unique_ptr<Tokenizer::Impl> tok::make_bytes(uint32_t vocab_size, int32_t bos, int32_t eos) {
  if (vocab_size < 256) throw Error(Status::invalid_argument, "bytes tokenizer: vocab_size " + std::to_string(vocab_size) + " < 256");
  for (int32_t id : {bos, eos})
    if (id < -1 || (id >= 0 && uint32_t(id) >= vocab_size))
      throw Error(Status::invalid_argument, "bytes tokenizer: special id " + std::to_string(id) + " is outside the vocabulary");
  auto t = std::make_unique<BytesTokenizer>();
  t->vocab_size = vocab_size;
  t->bos = bos;
  t->eos = eos;
  t->kind = "bytes";
  return t;
}

Tokenizer Tokenizer::load_file(const std::string& path, const std::string& config_dir) {
  const bool json = path.size() >= 5 && path.compare(path.size() - 5, 5, ".json") == 0;
  if (json) return Tokenizer(tok::load_hf_json(path, config_dir));
  return Tokenizer(tok::load_sentencepiece(path));
}

Tokenizer Tokenizer::bytes(uint32_t vocab_size, int32_t bos, int32_t eos) { return Tokenizer(tok::make_bytes(vocab_size, bos, eos)); }

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_special) const { return impl_->encode(text, add_special); }
std::string Tokenizer::decode(const int32_t* ids, size_t n) const {
  if (n && !ids) throw Error(Status::invalid_argument, "decode: ids is NULL");
  return impl_->decode(ids, n);
}
int32_t Tokenizer::bos_id() const { return impl_->bos; }
int32_t Tokenizer::eos_id() const { return impl_->eos; }
uint32_t Tokenizer::vocab_size() const { return impl_->vocab_size; }
const std::string& Tokenizer::kind() const { return impl_->kind; }

}  // namespace diffvk
