// Tokenizer::load (include/diffvk/tokenizer.hpp): the tokenizer of a model directory or .gguf file. It lives in the
// model layer, not in runtime/tokenizer/, because its bytes fallback reads config.json through the
// model's config parser (vocabulary size, BOS/EOS) and refuses a Hugging Face checkpoint by its model_type.
#include <limits>

#include "diffvk/model.hpp"
#include "diffvk/tokenizer.hpp"
#include "model/checkpoint.hpp"
#include "model/gguf_tokenizer.hpp"
#include "model/phi4flash_config.hpp"
#include "platform.hpp"
#include "tokenizer/tokenizer_files.hpp"

namespace diffvk {

namespace {
// The tokenizer.* keys of a .gguf (model/gguf_tokenizer.hpp; written by diffvk quantize), or a format_error.
std::shared_ptr<const Tokenizer::Impl> from_gguf(const GgufFile& f, const std::string& name) {
  std::string why;
  auto impl = gguf_tokenizer(f, &why);
  if (!impl)
    throw Error(Status::format_error,
                name + ": " + why + "; text needs a tokenizer (token ids work without one: diffvk logits)");
  return impl;
}
// Bytes that are not a .gguf: refused before parsing, naming what the call takes.
void need_gguf_magic(const void* data, size_t size, const std::string& name) {
  if (!GgufFile::has_magic(data, size))
    throw Error(Status::format_error, name +
                                          ": not a .gguf file (tokenizer.json and tokenizer.model bytes load with "
                                          "load_json_memory/_fd and load_sentencepiece_memory/_fd)");
}
}  // namespace

Tokenizer Tokenizer::load_gguf_memory(const void* data, size_t size, const std::string& name) {
  if (!data) throw Error(Status::invalid_argument, name + ": the buffer is NULL");
  need_gguf_magic(data, size, name);
  return Tokenizer(from_gguf(GgufFile::from_view(data, size, name), name));
}

Tokenizer Tokenizer::load_gguf_fd(int fd, int64_t offset, int64_t size) {
  const std::string name = "gguf (fd " + std::to_string(fd) + ")";
  // Mapped, not read: the tokenizer's keys are a few MB at the head of a file that may hold gigabytes of weights.
  FileBytes bytes = FileBytes::map_fd(fd, offset, size, name);
  need_gguf_magic(bytes.bytes, bytes.size, name);
  return Tokenizer(from_gguf(GgufFile::from_file(std::move(bytes)), name));
}

Tokenizer Tokenizer::load(const std::string& dir) {
  // A .gguf file: its tokenizer.* keys.
  if (dir.size() > 5 && dir.compare(dir.size() - 5, 5, ".gguf") == 0)
    return Tokenizer(from_gguf(GgufFile::open(dir), dir));
  // tokenizer.model first: where both exist (Llama 2, Mistral, Gemma) it is the original and their
  // tokenizer.json is a Metaspace/byte-fallback conversion that the JSON reader does not implement.
  if (tok::exists(dir + "/tokenizer.model")) return load_file(dir + "/tokenizer.model", dir);
  if (tok::exists(dir + "/tokenizer.json")) return load_file(dir + "/tokenizer.json", dir);
  const std::string cfg = dir + "/config.json";
  if (!tok::exists(cfg))
    throw Error(Status::io_error,
                dir + ": no tokenizer.json, tokenizer.model or config.json (a model directory was expected)");
  const std::string text = tok::read_text_file(cfg, 1 << 20);
  if (is_phi4flash_config(text) || is_hf_diffllama(text))  // its vocabulary is not bytes
    throw Error(Status::format_error, dir +
                                          ": a Hugging Face checkpoint without tokenizer.json or tokenizer.model; "
                                          "text needs its tokenizer (token ids work without one: diffvk logits)");
  // config.json's "tokenizer" is "bytes" here ("none" only comes from Hugging Face configs).
  const ModelConfig c = parse_model_config(text, cfg);
  return bytes(c.vocab_size, int32_t(c.bos_token_id), int32_t(c.eos_token_id));
}

}  // namespace diffvk
