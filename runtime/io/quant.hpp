// diffvk — block-quantized weight rows, bit-identical to GGUF's Q8_0 and Q4_0.
//
// A row of n weights (n = the input width of a linear layer, a multiple of 32) is cut into n / 32
// blocks along the input dimension. Every block starts with its scale d as IEEE binary16, little
// endian, then holds its 32 quants:
//   * Q8_0 (34 bytes): 32 int8 q, weight = q * d.
//   * Q4_0 (18 bytes): 16 bytes of nibbles; byte j holds element j in its low nibble and element
//     j + 16 in its high nibble; weight = (nibble - 8) * d.
// Quantization gives byte for byte what ggml's reference quantizers (quantize_row_q8_0_ref,
// quantize_row_q4_0_ref) give from the same floats, the way llama.cpp writes model files; the rules
// (scale choice, float32 operation order, rounding, the sign of zero scales, NaN and infinity) are in
// docs/maths.md, "Quantized weights: Q8_0 and Q4_0". Dequantization is exact: q * d in float32.
//
// Every function takes the row width n and throws Error(invalid_argument) naming n unless it is a
// multiple of 32 (f16 rows take any n). Buffers are caller-owned: a quantized row is
// quant_row_bytes(type, n) bytes; they must not overlap.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace diffvk {

enum class QuantType { f16, q8_0, q4_0 };

constexpr size_t kQuantBlockWeights = 32;   // weights per Q8_0 / Q4_0 block (GGUF's QK8_0 = QK4_0)
constexpr size_t kQ8_0BlockBytes = 2 + 32;  // fp16 d + 32 int8
constexpr size_t kQ4_0BlockBytes = 2 + 16;  // fp16 d + 16 bytes of nibbles

// "f16", "q8_0", "q4_0" (the spelling of --weights and of GGUF's type names in lower case).
const char* quant_type_name(QuantType t) noexcept;
// The inverse of quant_type_name; Error(invalid_argument) naming the text and the choices otherwise.
QuantType parse_quant_type(std::string_view name);

// Weights per block: 1 for f16, 32 for Q8_0 and Q4_0.
size_t quant_block_weights(QuantType t) noexcept;
// Bytes per block: 2 for f16, 34 for Q8_0, 18 for Q4_0.
size_t quant_block_bytes(QuantType t) noexcept;
// Bytes of one row of n weights. Error(invalid_argument) naming n when a quantized type's n is not a
// multiple of 32.
size_t quant_row_bytes(QuantType t, size_t n);

// ggml's quantize_row_q8_0_ref / quantize_row_q4_0_ref: n floats -> n / 32 blocks at out.
void quantize_row_q8_0(const float* x, size_t n, uint8_t* out);
void quantize_row_q4_0(const float* x, size_t n, uint8_t* out);
// ggml's dequantize_row_q8_0 / dequantize_row_q4_0: n / 32 blocks at in -> n floats.
void dequantize_row_q8_0(const uint8_t* in, size_t n, float* y);
void dequantize_row_q4_0(const uint8_t* in, size_t n, float* y);

// By type: f16 writes n little-endian binary16 values (round to nearest even, io/half.hpp).
void quantize_row(QuantType t, const float* x, size_t n, uint8_t* out);
void dequantize_row(QuantType t, const uint8_t* in, size_t n, float* y);

}  // namespace diffvk
