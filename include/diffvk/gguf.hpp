// diffvk — GGUF files of a model (the format and every key and tensor name: docs/gguf.md).
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace diffvk {

// The type of a model's linear weights in a GGUF file. Norm gains and λ stay F32 in every kind.
enum class QuantKind { f16, q8_0, q4_0 };

const char* quant_kind_name(QuantKind k) noexcept;  // "f16", "q8_0", "q4_0"
QuantKind parse_quant_kind(std::string_view name);  // the inverse; Error(invalid_argument) otherwise

struct QuantizeReport {
  uint64_t tensors = 0;
  uint64_t file_bytes = 0;
  std::vector<std::string> f16_fallbacks;  // linear weights kept F16: input width not a multiple of 32
};

// Reads the checkpoint in `model_dir` (native or Hugging Face DiffLlama, as Model::load does) and writes
// `out_path` atomically: a GGUF v3 file of architecture "diffllama" with the linear weights in `kind`. A
// Phi-4-mini-flash checkpoint (model_type "phi4flash", or a phi4flash .gguf) becomes architecture "phi4flash".
// io_error / format_error from the checkpoint; io_error when the file cannot be written.
QuantizeReport quantize_model(const std::string& model_dir, const std::string& out_path, QuantKind kind);

// A GGUF file's header as one JSON object (diffvk quantize --list): {"version", "alignment",
// "metadata": {key: {"type", "value"}}, "tensors": [{"name", "type", "dims", "offset"}]}; arrays give
// "elem_type", "count" and their values. The file is read with the hostile-input checks of the reader.
std::string gguf_listing_json(const std::string& path);

}  // namespace diffvk
