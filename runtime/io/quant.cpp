// GGUF Q8_0 and Q4_0 blocks (io/quant.hpp); the rules are docs/maths.md's "Quantized weights".
//
// This file is compiled with -ffp-contract=off (CMakeLists.txt): ggml's reference quantizers round
// after every float32 operation, and `x * id + 8.5f` fused into one FMA (GCC's default on arm64,
// clang's within an expression) rounds once instead of twice, which moves values that sit next to a
// nibble boundary and so changes the file. Nothing here may use FMA, reassociation or fast-math.
#include "io/quant.hpp"

#include <cmath>
#include <cstring>
#include <limits>

#include "diffvk/error.hpp"
#include "io/half.hpp"

namespace diffvk {
namespace {

void check_width(const char* what, size_t n, size_t block) {
  if (block > 1 && n % block != 0)
    throw Error(Status::invalid_argument, std::string(what) + ": row width " + std::to_string(n) +
                                              " is not a multiple of " + std::to_string(block) +
                                              " (a quantized block holds " + std::to_string(block) + " weights)");
}

// The fp16 scale as ggml stores it: round to nearest even (io/half.hpp). A NaN scale becomes the
// canonical quiet NaN with the scale's sign (ggml's software conversion drops the payload).
uint16_t scale_to_half(float d) {
  if (std::isnan(d)) return uint16_t((std::signbit(d) ? 0x8000u : 0u) | 0x7e00u);
  return float_to_half(d);
}

void put_half(uint8_t* p, uint16_t h) {
  p[0] = uint8_t(h & 0xffu);
  p[1] = uint8_t(h >> 8);
}

uint16_t get_half(const uint8_t* p) { return uint16_t(p[0] | (uint16_t(p[1]) << 8)); }

// ggml stores a float into an int8_t (Q8_0: `qs = roundf(v)`, Q4_0: `(int8_t)(v + 8.5f)`). Inside the
// int8 range that truncates toward zero. Outside it C leaves the result undefined; it happens only for
// NaN and infinite products (a NaN or infinite input, or a scale so small that 1/d overflows) and for
// values after a NaN that hid a larger magnitude from Q8_0's amax. We do what ggml's x86-64 builds do
// (cvttss2si): truncate to int32, NaN and values outside int32 give INT32_MIN, then keep the low byte.
int8_t store_int8(float v) {
  int32_t i = std::numeric_limits<int32_t>::min();
  if (v >= -2147483648.0f && v < 2147483648.0f) i = int32_t(v);  // false for NaN
  return int8_t(uint8_t(uint32_t(i) & 0xffu));
}

// One Q8_0 block: d = amax / 127, q = roundf(x * (1/d)) (round half away from zero).
void q8_0_block(const float* x, uint8_t* out) {
  // ggml's MAX(amax, |v|) is `amax > |v| ? amax : |v|`: a NaN |v| replaces amax, and a NaN amax is
  // replaced by the next |v|; so only NaNs at the very end of the block leave amax NaN.
  float amax = 0.0f;
  for (size_t j = 0; j < kQuantBlockWeights; ++j) {
    const float a = std::fabs(x[j]);
    amax = amax > a ? amax : a;
  }
  const float d = amax / 127.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;  // NaN != 0: a NaN d gives a NaN id
  put_half(out, scale_to_half(d));
  for (size_t j = 0; j < kQuantBlockWeights; ++j) {
    const float v = x[j] * id;
    out[2 + j] = uint8_t(store_int8(std::round(v)));  // std::round(float) = roundf: half away from zero
  }
}

// One Q4_0 block: max = the first element of largest magnitude, with its sign; d = max / -8;
// nibble = min(15, (int8_t)(x * (1/d) + 8.5f)).
void q4_0_block(const float* x, uint8_t* out) {
  float amax = 0.0f, max = 0.0f;  // `amax < |v|` is false for NaN: NaNs are never the max
  for (size_t j = 0; j < kQuantBlockWeights; ++j) {
    const float a = std::fabs(x[j]);
    if (amax < a) {
      amax = a;
      max = x[j];
    }
  }
  const float d = max / -8.0f;  // all zeros: +0 / -8 = -0, so the scale is 0x8000
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  put_half(out, scale_to_half(d));
  const size_t half = kQuantBlockWeights / 2;
  for (size_t j = 0; j < half; ++j) {
    const float v0 = x[j] * id;
    const float v1 = x[half + j] * id;
    const int s0 = store_int8(v0 + 8.5f);  // two roundings: product, then sum (no FMA)
    const int s1 = store_int8(v1 + 8.5f);
    const uint8_t n0 = uint8_t(s0 > 15 ? 15 : s0);  // ggml's MIN(15, ...) then uint8_t
    const uint8_t n1 = uint8_t(s1 > 15 ? 15 : s1);
    out[2 + j] = uint8_t(n0 | (n1 << 4));
  }
}

}  // namespace

const char* quant_type_name(QuantType t) noexcept {
  switch (t) {
    case QuantType::f16:
      return "f16";
    case QuantType::q8_0:
      return "q8_0";
    case QuantType::q4_0:
      return "q4_0";
  }
  return "?";
}

QuantType parse_quant_type(std::string_view name) {
  for (QuantType t : {QuantType::f16, QuantType::q8_0, QuantType::q4_0})
    if (name == quant_type_name(t)) return t;
  throw Error(Status::invalid_argument,
              "unknown weight type '" + std::string(name.substr(0, 32)) + "' (expected f16, q8_0 or q4_0)");
}

size_t quant_block_weights(QuantType t) noexcept { return t == QuantType::f16 ? 1 : kQuantBlockWeights; }

size_t quant_block_bytes(QuantType t) noexcept {
  switch (t) {
    case QuantType::f16:
      return 2;
    case QuantType::q8_0:
      return kQ8_0BlockBytes;
    case QuantType::q4_0:
      return kQ4_0BlockBytes;
  }
  return 0;
}

size_t quant_row_bytes(QuantType t, size_t n) {
  check_width(quant_type_name(t), n, quant_block_weights(t));
  return n / quant_block_weights(t) * quant_block_bytes(t);
}

void quantize_row_q8_0(const float* x, size_t n, uint8_t* out) {
  check_width("quantize_row_q8_0", n, kQuantBlockWeights);
  for (size_t b = 0; b < n / kQuantBlockWeights; ++b) q8_0_block(x + b * kQuantBlockWeights, out + b * kQ8_0BlockBytes);
}

void quantize_row_q4_0(const float* x, size_t n, uint8_t* out) {
  check_width("quantize_row_q4_0", n, kQuantBlockWeights);
  for (size_t b = 0; b < n / kQuantBlockWeights; ++b) q4_0_block(x + b * kQuantBlockWeights, out + b * kQ4_0BlockBytes);
}

void dequantize_row_q8_0(const uint8_t* in, size_t n, float* y) {
  check_width("dequantize_row_q8_0", n, kQuantBlockWeights);
  for (size_t b = 0; b < n / kQuantBlockWeights; ++b) {
    const uint8_t* blk = in + b * kQ8_0BlockBytes;
    const float d = half_to_float(get_half(blk));
    for (size_t j = 0; j < kQuantBlockWeights; ++j) y[b * kQuantBlockWeights + j] = float(int8_t(blk[2 + j])) * d;
  }
}

void dequantize_row_q4_0(const uint8_t* in, size_t n, float* y) {
  check_width("dequantize_row_q4_0", n, kQuantBlockWeights);
  const size_t half = kQuantBlockWeights / 2;
  for (size_t b = 0; b < n / kQuantBlockWeights; ++b) {
    const uint8_t* blk = in + b * kQ4_0BlockBytes;
    const float d = half_to_float(get_half(blk));
    float* yb = y + b * kQuantBlockWeights;
    for (size_t j = 0; j < half; ++j) {
      yb[j] = float(int(blk[2 + j] & 0x0fu) - 8) * d;
      yb[half + j] = float(int(blk[2 + j] >> 4) - 8) * d;
    }
  }
}

void quantize_row(QuantType t, const float* x, size_t n, uint8_t* out) {
  switch (t) {
    case QuantType::f16:
      for (size_t i = 0; i < n; ++i) put_half(out + 2 * i, float_to_half(x[i]));
      return;
    case QuantType::q8_0:
      quantize_row_q8_0(x, n, out);
      return;
    case QuantType::q4_0:
      quantize_row_q4_0(x, n, out);
      return;
  }
  throw Error(Status::internal, "quantize_row: bad QuantType");
}

void dequantize_row(QuantType t, const uint8_t* in, size_t n, float* y) {
  switch (t) {
    case QuantType::f16:
      for (size_t i = 0; i < n; ++i) y[i] = half_to_float(get_half(in + 2 * i));
      return;
    case QuantType::q8_0:
      dequantize_row_q8_0(in, n, y);
      return;
    case QuantType::q4_0:
      dequantize_row_q4_0(in, n, y);
      return;
  }
  throw Error(Status::internal, "dequantize_row: bad QuantType");
}

}  // namespace diffvk
