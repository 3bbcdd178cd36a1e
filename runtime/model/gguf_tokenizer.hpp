// Tokenizers in GGUF files (docs/gguf.md "Tokenizer"): written by `diffvk quantize`, read by Tokenizer::load.
//   bytes:                   tokenizer.ggml.model = "bytes" (no token list; ids 0..255 are the bytes).
//   SentencePiece (tokenizer.model): model "llama" (BPE) or "t5" (unigram) with tokens / scores / token_type,
//                            unknown_token_id, add_space_prefix, remove_extra_whitespaces; read back into the
//                            same SentencePiece tokenizer (tok::make_sentencepiece).
//   byte-level BPE (tokenizer.json): model "gpt2" with tokens / token_type / merges / pre for other readers,
//                            and tokenizer.huggingface.json (GGUF's key for the whole file), which diffvk reads.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "diffvk/tokenizer.hpp"
#include "io/gguf.hpp"
#include "tokenizer/tokenizer_impl.hpp"

namespace diffvk {

// Writes the tokenizer Tokenizer::load(dir) would use, with its BOS/EOS ids as tokenizer.ggml.bos_token_id /
// eos_token_id (the tokenizer's own; `bos` / `eos`, config.json's, where none is written). The caller writes
// config.json's ids as diffllama.bos_token_id / eos_token_id where they differ from those (model_token_ids).
// Returns false, writing only the ids, where the tokenizer cannot be written so that it reads back the same;
// `why` then says why. Throws what Tokenizer::load throws for a directory whose tokenizer does not load.
// `config_tokenizer`: ModelConfig::tokenizer ("bytes": config.json alone means the bytes tokenizer).
struct GgufTokenIds;
// `written`: the tokenizer.ggml.bos_token_id / eos_token_id written (-1: none).
bool add_gguf_tokenizer(GgufWriter& w, const std::string& dir, const std::string& config_tokenizer, int32_t bos,
                        int32_t eos, GgufTokenIds* written, std::string* why);
// A GGUF source's tokenizer.* keys, copied as they are (a re-quantized .gguf). False, with `why`, when a key of a
// type diffvk does not write was left out.
bool copy_gguf_tokenizer(GgufWriter& w, const GgufFile& f, GgufTokenIds* written, std::string* why);

// The tokenizer of a diffllama or phi4flash GGUF file (vocab_size: <architecture>.vocab_size, the largest it may be);
// nullptr with `why` set when the file has none (no tokenizer.ggml.model). format_error / unsupported name
// the key.
std::unique_ptr<Tokenizer::Impl> gguf_tokenizer(const GgufFile& f, std::string* why);

// The model's BOS/EOS ids (ModelConfig, config.json's) in a GGUF file: <architecture>.bos_token_id / eos_token_id
// (int32, -1 = none) where the writer put them (they differ from the tokenizer's), else tokenizer.ggml.*.
struct GgufTokenIds {
  int64_t bos = -1, eos = -1;
};
GgufTokenIds gguf_model_token_ids(const GgufFile& f);

}  // namespace diffvk
