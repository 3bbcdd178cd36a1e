// diffvk — text <-> token ids: byte-level BPE (Hugging Face tokenizer.json, GPT-2 / Llama-3 style),
// SentencePiece (tokenizer.model: unigram and BPE, byte fallback) and the raw-bytes tokenizer of the
// bundled tiny models. Pure CPU; no Vulkan. A Tokenizer is immutable after load: encode/decode may be
// called from any number of threads at once.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "diffvk/error.hpp"

namespace diffvk {

class Tokenizer {
 public:
  // A model directory: tokenizer.model (SentencePiece), else tokenizer.json (+ tokenizer_config.json /
  // config.json for BOS/EOS), else config.json alone = the bytes tokenizer (ids 0..255 are the bytes).
  // A path ending in .gguf: the tokenizer `diffvk quantize` wrote into it (docs/gguf.md "Tokenizer"); a file
  // without one is a format_error.
  static Tokenizer load(const std::string& dir);
  // One file: *.json = tokenizer.json, anything else = a SentencePiece model. `config_dir` ("" = none)
  // is where tokenizer_config.json / config.json are looked for.
  static Tokenizer load_file(const std::string& path, const std::string& config_dir = "");
  // The tokenizer of a .gguf file given as bytes (read during the call only: the buffer may be freed after
  // it) or as a range of an open descriptor (memory-mapped during the call where it is a regular file, else read
  // with pread: the descriptor's offset does not move and it is not closed; size -1 = from offset to the end of
  // the file): the tokenizer of what Model::load_memory /
  // Model::load_fd load from the same bytes (an Android asset). format_error when the bytes are not a .gguf or
  // the file has no tokenizer; the descriptor's errors as Model::load_fd's.
  static Tokenizer load_gguf_memory(const void* data, size_t size, const std::string& name = "gguf (memory)");
  static Tokenizer load_gguf_fd(int fd, int64_t offset, int64_t size);
  // A Hugging Face tokenizer.json and a SentencePiece tokenizer.model as bytes (read during the call only) or as
  // descriptor ranges (pread, as load_gguf_fd: size -1 = to the end of the file; nothing moved or closed), e.g. an
  // app's assets: the same parsers, limits and errors as load(dir) with those files in a directory.
  // load_json_*: BOS/EOS from the optional tokenizer_config.json (bos_token / eos_token) and config.json
  // (bos_token_id / eos_token_id) as load(dir) reads them; absent = a NULL pointer with size 0, or fd -1.
  // Messages name "tokenizer.json (memory)", "tokenizer_config.json (fd 7)", ... invalid_argument for a NULL
  // buffer with a size (or a NULL tokenizer.json / tokenizer.model), fd < 0 (other than -1 for an absent config) or
  // a bad range; format_error for bytes that do not parse or are over the size limit (docs/limits.md); io_error
  // for a range past the end of the file.
  static Tokenizer load_json_memory(const void* tokenizer_json, size_t size, const void* tokenizer_config = nullptr,
                                    size_t tokenizer_config_size = 0, const void* config_json = nullptr,
                                    size_t config_json_size = 0);
  struct FdRange {  // as Model::FdRange: size -1 = from offset to the end of the file; fd -1 = no such file
    int fd = -1;
    int64_t offset = 0, size = -1;
  };
  static Tokenizer load_json_fd(FdRange tokenizer_json, FdRange tokenizer_config, FdRange config_json);
  static Tokenizer load_json_fd(FdRange tokenizer_json);  // no config files
  static Tokenizer load_sentencepiece_memory(const void* data, size_t size,
                                             const std::string& name = "tokenizer.model (memory)");
  static Tokenizer load_sentencepiece_fd(int fd, int64_t offset, int64_t size);
  // The bytes tokenizer: ids 0..255 are the bytes, ids from 256 to vocab_size - 1 decode to nothing;
  // vocab_size >= 256, bos/eos -1 when none.
  static Tokenizer bytes(uint32_t vocab_size, int32_t bos, int32_t eos);

  // add_special: what the reference does for "add special tokens" (tokenizer.json: its post-processor
  // template, e.g. Llama-3's BOS; SentencePiece and bytes: BOS when the model has one).
  // Special / added tokens written in the text are matched as such (SentencePiece: user-defined ones).
  std::vector<int32_t> encode(std::string_view text, bool add_special) const;
  // The bytes the ids stand for (special tokens included, as their text; SentencePiece's leading
  // space removed and broken byte sequences shown as U+FFFD, as sentencepiece does). Throws
  // invalid_argument for an id outside the vocabulary.
  std::string decode(const int32_t* ids, size_t n) const;
  std::string decode(const std::vector<int32_t>& ids) const { return decode(ids.data(), ids.size()); }

  int32_t bos_id() const;  // -1 when none
  int32_t eos_id() const;  // -1 when none
  uint32_t vocab_size() const;
  const std::string& kind() const;  // "bytes", "byte-level BPE", "sentencepiece unigram", "sentencepiece BPE"

  class Impl;

 private:
  explicit Tokenizer(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<const Impl> impl_;
};

}  // namespace diffvk
