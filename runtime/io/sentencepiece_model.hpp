// A minimal reader of SentencePiece's tokenizer.model (a protobuf ModelProto): only the fields the
// tokenizer needs; every other field is skipped. Truncated or malformed input -> format_error.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace diffvk {

struct SentencePieceModel {
  enum class PieceType : int32_t { normal = 1, unknown = 2, control = 3, user_defined = 4, unused = 5, byte = 6 };
  enum class ModelType : int32_t { unigram = 1, bpe = 2, word = 3, chr = 4 };
  struct Piece {
    std::string text;
    float score = 0.0f;
    PieceType type = PieceType::normal;
  };
  std::vector<Piece> pieces;
  // TrainerSpec
  ModelType model_type = ModelType::unigram;
  bool byte_fallback = false, treat_whitespace_as_suffix = false;
  int32_t unk_id = 0, bos_id = 1, eos_id = 2, pad_id = -1;
  std::string unk_surface = " \xE2\x81\x87 ";
  // NormalizerSpec
  std::string normalizer_name;
  std::string precompiled_charsmap;
  bool add_dummy_prefix = true, remove_extra_whitespaces = true, escape_whitespaces = true;
};

// `name` labels error messages.
SentencePieceModel parse_sentencepiece_model(const uint8_t* data, size_t size, const std::string& name);

}  // namespace diffvk
