// Tokenizer (include/diffvk/tokenizer.hpp): picks the kind from the files of a model directory,
// the bytes tokenizer, and the helpers the kinds share (files, messages, BOS/EOS from the configs).
#include "diffvk/tokenizer.hpp"
#include "model/checkpoint.hpp"

#include <fstream>
#include <nlohmann/json.hpp>

#include "diffvk/model.hpp"
#include "model/tokenizer_impl.hpp"
#include "platform.hpp"

namespace diffvk {
namespace tok {


std::string read_text_file(const std::string& path, uint64_t max_bytes) {
  const auto b = platform::read_file(path, max_bytes);
  return std::string(b.begin(), b.end());
}

bool exists(const std::string& path) { return std::ifstream(path).good(); }

namespace {

nlohmann::json read_json_object(const std::string& path) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(read_text_file(path, 16u << 20));
  } catch (const nlohmann::json::exception& e) {
    throw Error(Status::format_error, path + ": invalid JSON (" + printable(e.what(), 300) + ")");
  }
  if (!j.is_object()) throw Error(Status::format_error, path + ": top level must be an object");
  return j;
}

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

std::unique_ptr<Tokenizer::Impl> make_bytes(uint32_t vocab_size, int32_t bos, int32_t eos) {
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

SpecialIds read_special_ids(const std::string& dir, uint32_t vocab_size, const std::function<int32_t(const std::string&)>& lookup) {
  SpecialIds ids;
  if (dir.empty()) return ids;
  const std::string tc = dir + "/tokenizer_config.json";
  if (exists(tc)) {
    const auto j = read_json_object(tc);
    for (auto [key, field] : {std::pair<const char*, int32_t*>{"bos_token", &ids.bos}, {"eos_token", &ids.eos}}) {
      if (!j.contains(key) || j[key].is_null()) continue;
      const auto& v = j[key];
      const auto* text = v.is_string() ? &v : (v.is_object() && v.contains("content") && v["content"].is_string()) ? &v["content"] : nullptr;
      if (!text) throw Error(Status::format_error, tc + ": '" + key + "' must be a string or an object with a string 'content'");
      *field = lookup(text->get<std::string>());
      if (*field < 0)
        throw Error(Status::format_error, tc + ": '" + key + "' = '" + printable(text->get<std::string>()) + "' is not a token of the vocabulary");
    }
  }
  const std::string cc = dir + "/config.json";
  if (exists(cc)) {
    const auto j = read_json_object(cc);
    for (auto [key, field] : {std::pair<const char*, int32_t*>{"bos_token_id", &ids.bos}, {"eos_token_id", &ids.eos}}) {
      if (*field >= 0 || !j.contains(key) || j[key].is_null()) continue;
      auto v = j[key];
      if (v.is_array() && !v.empty()) v = v[0];  // Llama-3.1 lists several EOS ids: the first is the main one
      if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() >= int64_t(vocab_size))
        throw Error(Status::format_error, cc + ": '" + key + "' is not a token id below the tokenizer's vocabulary size " +
                                              std::to_string(vocab_size));
      *field = int32_t(v.get<int64_t>());
    }
  }
  return ids;
}

}  // namespace tok

Tokenizer Tokenizer::load(const std::string& dir) {
  // tokenizer.model first: where both exist (Llama 2, Mistral, Gemma) it is the original and their
  // tokenizer.json is a Metaspace/byte-fallback conversion that the JSON reader does not implement.
  if (tok::exists(dir + "/tokenizer.model")) return load_file(dir + "/tokenizer.model", dir);
  if (tok::exists(dir + "/tokenizer.json")) return load_file(dir + "/tokenizer.json", dir);
  const std::string cfg = dir + "/config.json";
  if (!tok::exists(cfg))
    throw Error(Status::io_error, dir + ": no tokenizer.json, tokenizer.model or config.json (a model directory was expected)");
  const std::string text = tok::read_text_file(cfg, 1 << 20);
  if (is_hf_diffllama(text))  // its vocabulary is not bytes
    throw Error(Status::format_error, dir + ": a Hugging Face checkpoint without tokenizer.json or tokenizer.model; "
                                            "text needs its tokenizer (token ids work without one: diffvk logits)");
  // config.json's "tokenizer" is "bytes" here ("none" only comes from Hugging Face configs).
  const ModelConfig c = parse_model_config(text, cfg);
  return bytes(c.vocab_size, int32_t(c.bos_token_id), int32_t(c.eos_token_id));
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
