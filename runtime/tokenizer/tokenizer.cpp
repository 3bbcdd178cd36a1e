// Tokenizer (include/diffvk/tokenizer.hpp): one file to a tokenizer of its kind (from a path, bytes or
// descriptor ranges: each source reads the bytes, then calls the kind's one loader), the bytes tokenizer,
// and the members every kind shares. Tokenizer::load (a model directory) is runtime/model/
// model_tokenizer.cpp: its bytes fallback reads config.json as the model does.
#include "diffvk/tokenizer.hpp"

#include <optional>
#include <string_view>

#include "io/bounded_json.hpp"
#include "platform.hpp"
#include "tokenizer/tokenizer_bpe.hpp"
#include "tokenizer/tokenizer_files.hpp"
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
        throw Error(Status::invalid_argument, "decode: id " + std::to_string(ids[i]) + " at index " +
                                                  std::to_string(i) + " is outside the vocabulary (size " +
                                                  std::to_string(vocab_size) + ")");
      if (ids[i] < 256) out += char(ids[i]);  // ids above the bytes have no text
    }
    return out;
  }
};

}  // namespace

std::unique_ptr<Tokenizer::Impl> tok::make_bytes(uint32_t vocab_size, int32_t bos, int32_t eos) {
  if (vocab_size < 256)
    throw Error(Status::invalid_argument, "bytes tokenizer: vocab_size " + std::to_string(vocab_size) + " < 256");
  for (int32_t id : {bos, eos})
    if (id < -1 || (id >= 0 && uint32_t(id) >= vocab_size))
      throw Error(Status::invalid_argument,
                  "bytes tokenizer: special id " + std::to_string(id) + " is outside the vocabulary");
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

namespace {

// A caller's buffer as bytes. NULL: invalid_argument, except NULL with size 0 for an optional file (= absent).
std::optional<std::string_view> caller_bytes(const void* data, size_t size, const std::string& name, bool optional) {
  if (data) return std::string_view(static_cast<const char*>(data), size);
  if (optional && size == 0) return std::nullopt;
  throw Error(Status::invalid_argument,
              name + ": the buffer is NULL" +
                  (optional ? " with a size of " + std::to_string(size) + " (NULL with size 0 = no such file)" : ""));
}

}  // namespace

Tokenizer Tokenizer::load_json_memory(const void* tokenizer_json, size_t size, const void* tokenizer_config,
                                      size_t tokenizer_config_size, const void* config_json, size_t config_json_size) {
  const std::string name = "tokenizer.json (memory)";
  const std::string_view text = *caller_bytes(tokenizer_json, size, name, false);
  tok::SpecialConfigs configs;
  configs.tokenizer_config.name = "tokenizer_config.json (memory)";
  configs.tokenizer_config.text =
      caller_bytes(tokenizer_config, tokenizer_config_size, configs.tokenizer_config.name, true);
  configs.config.name = "config.json (memory)";
  configs.config.text = caller_bytes(config_json, config_json_size, configs.config.name, true);
  return Tokenizer(tok::hf_json_with_configs(text, name, configs));
}

Tokenizer Tokenizer::load_json_fd(FdRange tokenizer_json, FdRange tokenizer_config, FdRange config_json) {
  const std::string name = "tokenizer.json (fd " + std::to_string(tokenizer_json.fd) + ")";
  const std::vector<uint8_t> text = platform::read_fd_span(tokenizer_json.fd, tokenizer_json.offset,
                                                           tokenizer_json.size, kJsonTokenizerMaxBytes, name);
  tok::SpecialConfigs configs;
  std::vector<uint8_t> bytes[2];
  const FdRange ranges[2] = {tokenizer_config, config_json};
  tok::ConfigText* which[2] = {&configs.tokenizer_config, &configs.config};
  const char* file[2] = {"tokenizer_config.json", "config.json"};
  for (int i = 0; i < 2; ++i) {
    which[i]->name = std::string(file[i]) + " (fd " + std::to_string(ranges[i].fd) + ")";
    if (ranges[i].fd == -1) continue;  // no such file (another negative descriptor: read_fd_span refuses it)
    bytes[i] =
        platform::read_fd_span(ranges[i].fd, ranges[i].offset, ranges[i].size, kJsonConfigMaxBytes, which[i]->name);
    which[i]->text = std::string_view(reinterpret_cast<const char*>(bytes[i].data()), bytes[i].size());
  }
  return Tokenizer(tok::hf_json_with_configs(std::string_view(reinterpret_cast<const char*>(text.data()), text.size()),
                                             name, configs));
}

Tokenizer Tokenizer::load_json_fd(FdRange tokenizer_json) { return load_json_fd(tokenizer_json, FdRange{}, FdRange{}); }

Tokenizer Tokenizer::load_sentencepiece_memory(const void* data, size_t size, const std::string& name) {
  const std::string_view b = *caller_bytes(data, size, name, false);
  return Tokenizer(tok::parse_sentencepiece(reinterpret_cast<const uint8_t*>(b.data()), b.size(), name));
}

Tokenizer Tokenizer::load_sentencepiece_fd(int fd, int64_t offset, int64_t size) {
  const std::string name = "tokenizer.model (fd " + std::to_string(fd) + ")";
  const std::vector<uint8_t> b = platform::read_fd_span(fd, offset, size, tok::kSentencePieceMaxBytes, name);
  return Tokenizer(tok::parse_sentencepiece(b.data(), b.size(), name));
}

Tokenizer Tokenizer::bytes(uint32_t vocab_size, int32_t bos, int32_t eos) {
  return Tokenizer(tok::make_bytes(vocab_size, bos, eos));
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_special) const {
  return impl_->encode(text, add_special);
}
std::string Tokenizer::decode(const int32_t* ids, size_t n) const {
  if (n && !ids) throw Error(Status::invalid_argument, "decode: ids is NULL");
  return impl_->decode(ids, n);
}
int32_t Tokenizer::bos_id() const { return impl_->bos; }
int32_t Tokenizer::eos_id() const { return impl_->eos; }
uint32_t Tokenizer::vocab_size() const { return impl_->vocab_size; }
const std::string& Tokenizer::kind() const { return impl_->kind; }

}  // namespace diffvk
