// diffvk — GGUF Q8_0 / Q4_0 blocks (runtime/io/quant.hpp) against a small independent reference
// written here: every float32 operation is done in double and rounded to float once (exact products and
// quotients of floats fit in double, and a double result rounded to float is the correctly rounded float
// result), rounding half away from zero and the fp16 scale are computed from doubles, not by the library's
// helpers. Plus hand-computed blocks (zeros, signed zeros, ties, nibble boundaries, a block that an FMA
// would change, NaN, infinities, subnormal scales), dequantize -> requantize round trips, error bounds,
// and widths that are not a multiple of 32.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "file_test_util.hpp"
#include "io/quant.hpp"

using diffvk::QuantType;
using diffvk::Status;

namespace {

const float kInf = std::numeric_limits<float>::infinity();
const float kNaN = std::numeric_limits<float>::quiet_NaN();

float bitsf(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// ---- the independent reference ---------------------------------------------------------------------

// One correctly rounded float32 operation, computed in double.
float mul32(float a, float b) { return float(double(a) * double(b)); }
float div32(float a, float b) { return float(double(a) / double(b)); }
float add32(float a, float b) { return float(double(a) + double(b)); }

// IEEE binary16 of a float, round to nearest even, from the value (not the bit pattern).
uint16_t ref_half(float f) {
  if (std::isnan(f)) return uint16_t((std::signbit(f) ? 0x8000 : 0) | 0x7e00);  // ggml: canonical NaN
  const uint16_t sign = std::signbit(f) ? 0x8000 : 0;
  double a = std::fabs(double(f));
  if (a == 0) return sign;
  if (std::isinf(a)) return uint16_t(sign | 0x7c00);
  int e = std::ilogb(a);
  if (e < -14) e = -14;                              // subnormal: units of 2^-24
  double m = std::nearbyint(std::ldexp(a, 10 - e));  // 11-bit significand, ties to even
  if (m >= 2048) {                                   // rounding carried into the next binade
    m /= 2;
    ++e;
  }
  if (e > 15) return uint16_t(sign | 0x7c00);
  if (m < 1024) return uint16_t(sign | uint16_t(m));  // subnormal (or rounded to zero)
  return uint16_t(sign | uint16_t((e + 15) << 10) | uint16_t(m - 1024));
}

// roundf: half away from zero (exact in double for |v| < 2^52).
double ref_roundf(float v) {
  const double a = std::floor(std::fabs(double(v)) + 0.5);
  return std::signbit(v) ? -a : a;
}

// C's float -> int8_t as ggml's x86-64 builds do it (docs/maths.md): a NaN or infinite value, or one
// outside int32, becomes 0; otherwise the integer part modulo 256.
int ref_int8(double v) {
  if (!std::isfinite(v) || std::fabs(v) >= 2147483648.0) return 0;
  long long i = (long long)std::trunc(v);
  int b = int(((i % 256) + 256) % 256);
  return b >= 128 ? b - 256 : b;
}

std::vector<uint8_t> ref_q8_0(const std::vector<float>& x) {
  std::vector<uint8_t> out;
  for (size_t b = 0; b < x.size(); b += 32) {
    // amax = max(amax, |v|) with ggml's `a > b ? a : b`: a NaN at position j forgets the values before it.
    size_t start = b;
    for (size_t j = b; j < b + 32; ++j)
      if (std::isnan(x[j])) start = j;
    float amax = 0.0f;
    if (std::isnan(x[b + 31])) {
      amax = kNaN;
    } else {
      for (size_t j = start; j < b + 32; ++j)
        if (!std::isnan(x[j]) && std::fabs(x[j]) > amax) amax = std::fabs(x[j]);
    }
    const float d = div32(amax, 127.0f);
    const float id = (d == 0.0f) ? 0.0f : div32(1.0f, d);
    const uint16_t h = ref_half(d);
    out.push_back(uint8_t(h & 0xff));
    out.push_back(uint8_t(h >> 8));
    for (size_t j = b; j < b + 32; ++j) out.push_back(uint8_t(ref_int8(ref_roundf(mul32(x[j], id)))));
  }
  return out;
}

std::vector<uint8_t> ref_q4_0(const std::vector<float>& x) {
  std::vector<uint8_t> out;
  for (size_t b = 0; b < x.size(); b += 32) {
    float max = 0.0f;  // the first element of largest magnitude, with its sign; NaNs never count
    for (size_t j = b; j < b + 32; ++j)
      if (std::fabs(x[j]) > std::fabs(max)) max = x[j];
    const float d = div32(max, -8.0f);
    const float id = (d == 0.0f) ? 0.0f : div32(1.0f, d);
    const uint16_t h = ref_half(d);
    out.push_back(uint8_t(h & 0xff));
    out.push_back(uint8_t(h >> 8));
    auto nib = [&](float v) {
      const int q = ref_int8(add32(mul32(v, id), 8.5f));  // product rounded, then the sum rounded
      return unsigned(q > 15 ? 15 : q) & 0xffu;
    };
    for (size_t j = 0; j < 16; ++j) out.push_back(uint8_t(nib(x[b + j]) | (nib(x[b + 16 + j]) << 4)));
  }
  return out;
}

// ---- helpers ----------------------------------------------------------------------------------------

std::vector<uint8_t> q8(const std::vector<float>& x) {
  std::vector<uint8_t> out(diffvk::quant_row_bytes(QuantType::q8_0, x.size()), 0xcd);
  diffvk::quantize_row_q8_0(x.data(), x.size(), out.data());
  return out;
}
std::vector<uint8_t> q4(const std::vector<float>& x) {
  std::vector<uint8_t> out(diffvk::quant_row_bytes(QuantType::q4_0, x.size()), 0xcd);
  diffvk::quantize_row_q4_0(x.data(), x.size(), out.data());
  return out;
}
std::vector<float> dq(QuantType t, const std::vector<uint8_t>& in, size_t n) {
  std::vector<float> y(n, kNaN);
  diffvk::dequantize_row(t, in.data(), n, y.data());
  return y;
}
uint16_t scale_of(const std::vector<uint8_t>& blocks, size_t off = 0) {
  return uint16_t(blocks[off] | (blocks[off + 1] << 8));
}
float half_value(uint16_t h) {  // independent of io/half.hpp, normal and subnormal only
  const double s = (h & 0x8000) ? -1 : 1;
  const int e = (h >> 10) & 0x1f, m = h & 0x3ff;
  return float(s * (e ? std::ldexp(1024 + m, e - 25) : std::ldexp(m, -24)));
}
std::vector<float> block(std::initializer_list<std::pair<int, float>> set, float fill = 0.0f) {
  std::vector<float> x(32, fill);
  for (auto [j, v] : set) x[size_t(j)] = v;
  return x;
}
int q8_at(const std::vector<uint8_t>& b, size_t j) { return int(int8_t(b[2 + j])); }
int q4_at(const std::vector<uint8_t>& b, size_t j) { return j < 16 ? (b[2 + j] & 15) : (b[2 + j - 16] >> 4); }

}  // namespace

TEST_CASE("quant: types names sizes and widths") {
  CHECK(diffvk::kQuantBlockWeights == 32);
  CHECK(diffvk::kQ8_0BlockBytes == 34);
  CHECK(diffvk::kQ4_0BlockBytes == 18);
  for (QuantType t : {QuantType::f16, QuantType::q8_0, QuantType::q4_0})
    CHECK(diffvk::parse_quant_type(diffvk::quant_type_name(t)) == t);
  CHECK(std::string(diffvk::quant_type_name(QuantType::q4_0)) == "q4_0");
  CHECK_ERROR(diffvk::parse_quant_type("q4_k"), Status::invalid_argument, "q4_k");
  CHECK_ERROR(diffvk::parse_quant_type("Q8_0"), Status::invalid_argument, "Q8_0");
  CHECK(diffvk::quant_row_bytes(QuantType::f16, 33) == 66);
  CHECK(diffvk::quant_row_bytes(QuantType::q8_0, 768) == 24 * 34);
  CHECK(diffvk::quant_row_bytes(QuantType::q4_0, 768) == 24 * 18);
  CHECK(diffvk::quant_row_bytes(QuantType::q4_0, 0) == 0);
  CHECK_ERROR(diffvk::quant_row_bytes(QuantType::q8_0, 100), Status::invalid_argument, "100");
  // Widths that are not a multiple of 32 are rejected by every entry point, naming the width.
  std::vector<float> x(64, 1.0f);
  std::vector<uint8_t> buf(4096);
  for (size_t n : {1u, 31u, 33u, 48u, 63u}) {
    CAPTURE(n);
    const std::string w = std::to_string(n);
    CHECK_ERROR(diffvk::quantize_row_q8_0(x.data(), n, buf.data()), Status::invalid_argument, w);
    CHECK_ERROR(diffvk::quantize_row_q4_0(x.data(), n, buf.data()), Status::invalid_argument, w);
    CHECK_ERROR(diffvk::dequantize_row_q8_0(buf.data(), n, x.data()), Status::invalid_argument, w);
    CHECK_ERROR(diffvk::dequantize_row_q4_0(buf.data(), n, x.data()), Status::invalid_argument, w);
    CHECK_ERROR(diffvk::quantize_row(QuantType::q4_0, x.data(), n, buf.data()), Status::invalid_argument,
                "multiple of 32");
    CHECK_ERROR(diffvk::quant_row_bytes(QuantType::q4_0, n), Status::invalid_argument, w);
  }
  CHECK(buf[0] == 0);  // nothing written by a rejected call
}

TEST_CASE("quant: q8_0 hand-computed blocks") {
  // All zeros and all negative zeros: amax = +0, d = +0 (0x0000), every quant 0.
  for (float z : {0.0f, -0.0f}) {
    const auto b = q8(std::vector<float>(32, z));
    CHECK(scale_of(b) == 0x0000);
    for (size_t j = 0; j < 32; ++j) CHECK(q8_at(b, j) == 0);
  }
  // A single ±max: d = amax / 127.
  auto b = q8(block({{5, 127.0f}}));
  CHECK(scale_of(b) == 0x3c00);  // 1.0
  CHECK(q8_at(b, 5) == 127);
  b = q8(block({{31, -254.0f}}));
  CHECK(scale_of(b) == 0x4000);  // 2.0
  CHECK(q8_at(b, 31) == -127);
  CHECK(q8_at(b, 0) == 0);
  // Ties round half away from zero (roundf), not to even: d = 1, id = 1.
  b = q8(block({{0, 127.0f}, {1, 0.5f}, {2, -0.5f}, {3, 1.5f}, {4, -1.5f}, {5, 2.5f}, {6, -2.5f}, {7, 126.5f}}));
  CHECK(scale_of(b) == 0x3c00);
  const int want[] = {127, 1, -1, 2, -2, 3, -3, 127};
  for (size_t j = 0; j < 8; ++j) CHECK(q8_at(b, j) == want[j]);
  // Just below a tie stays below.
  b = q8(block({{0, 127.0f}, {1, std::nextafter(0.5f, 0.0f)}, {2, std::nextafter(-2.5f, 0.0f)}}));
  CHECK(q8_at(b, 1) == 0);
  CHECK(q8_at(b, 2) == -2);
  // Subnormal fp16 scale: amax = 127 * 2^-24 gives d = 2^-24, the smallest fp16 subnormal.
  b = q8(block({{3, 127.0f * std::ldexp(1.0f, -24)}}));
  CHECK(scale_of(b) == 0x0001);
  CHECK(q8_at(b, 3) == 127);
  // d below half of fp16's smallest subnormal: the stored scale is +0, the quants are still computed.
  b = q8(block({{3, std::ldexp(1.0f, -30)}, {4, -std::ldexp(1.0f, -32)}}));
  CHECK(scale_of(b) == 0x0000);
  CHECK(q8_at(b, 3) == 127);
  CHECK(q8_at(b, 4) == -32);  // -31.75
  // A float-subnormal amax whose 1/d overflows: id = inf, every product is ±inf or NaN -> 0.
  b = q8(block({{0, std::ldexp(1.0f, -140)}, {1, -std::ldexp(1.0f, -141)}}));
  CHECK(scale_of(b) == 0x0000);
  for (size_t j = 0; j < 32; ++j) CHECK(q8_at(b, j) == 0);
  // Overflowing scale: d = FLT_MAX / 127 is inf in fp16, the quants use the finite float id.
  b = q8(block({{2, std::numeric_limits<float>::max()}, {3, -std::numeric_limits<float>::max() / 4}}));
  CHECK(scale_of(b) == 0x7c00);
  CHECK(q8_at(b, 2) == 127);
  CHECK(q8_at(b, 3) == -32);
  // Infinity: amax = inf, d = +inf, id = 1/inf = 0; inf * 0 = NaN -> 0, finite * 0 = 0.
  b = q8(block({{4, -kInf}, {5, 3.0f}}));
  CHECK(scale_of(b) == 0x7c00);
  for (size_t j = 0; j < 32; ++j) CHECK(q8_at(b, j) == 0);
  // NaN as the last element: amax is NaN, the scale is the canonical NaN, every quant 0.
  b = q8(block({{0, 5.0f}, {31, kNaN}}));
  CHECK(scale_of(b) == 0x7e00);
  for (size_t j = 0; j < 32; ++j) CHECK(q8_at(b, j) == 0);
  // A NaN earlier hides what came before it from amax: d = 1/127 from the later 1.0, and 100 * id
  // = 12700 wraps modulo 256 to -100 (C leaves it undefined; this is what x86-64 builds of ggml store).
  b = q8(block({{0, 100.0f}, {1, kNaN}, {2, 1.0f}}));
  CHECK(scale_of(b) == ref_half(1.0f / 127.0f));
  CHECK(q8_at(b, 0) == -100);
  CHECK(q8_at(b, 1) == 0);
  CHECK(q8_at(b, 2) == 127);
  CHECK(q8(block({{0, 100.0f}, {1, kNaN}, {2, 1.0f}})) == ref_q8_0(block({{0, 100.0f}, {1, kNaN}, {2, 1.0f}})));
}

TEST_CASE("quant: q4_0 hand-computed blocks") {
  // All zeros, either sign: max = +0, d = +0 / -8 = -0 -> scale 0x8000; every nibble 8 (0x88).
  for (float z : {0.0f, -0.0f}) {
    const auto b = q4(std::vector<float>(32, z));
    CHECK(scale_of(b) == 0x8000);
    for (size_t j = 2; j < 18; ++j) CHECK(b[j] == 0x88);
  }
  // Positive max 8: d = -1 (0xbc00), id = -1, nibble = trunc(8.5 - x), clamped to 15.
  auto b = q4(block({{0, 8.0f},
                     {1, -7.0f},
                     {2, 0.5f},
                     {3, -0.5f},
                     {4, 1.5f},
                     {5, 2.5f},
                     {6, -6.5f},
                     {16, -8.0f},
                     {17, std::nextafter(-7.5f, 0.0f)},
                     {18, -7.5f},
                     {19, 7.5f},
                     {20, std::nextafter(7.5f, 8.0f)}}));
  CHECK(scale_of(b) == 0xbc00);
  const std::pair<size_t, int> want[] = {{0, 0}, {1, 15},  {2, 8},   {3, 9},   {4, 7},  {5, 6}, {6, 15},
                                         {7, 8}, {16, 15}, {17, 15}, {18, 15}, {19, 1}, {20, 0}};
  for (const auto& w : want) {
    const size_t j = w.first;  // not structured bindings: CAPTURE's lambda cannot capture those (clang 14)
    const int q = w.second;
    CAPTURE(j);
    CHECK(q4_at(b, j) == q);
  }
  CHECK(b[2] == uint8_t(0 | (15 << 4)));  // element 0 low nibble, element 16 high nibble
  // Negative max: max = -8 -> d = +1 (0x3c00), id = 1, nibble = trunc(x + 8.5).
  b = q4(block({{7, -8.0f}, {8, 8.0f}, {9, 0.49f}}));
  CHECK(scale_of(b) == 0x3c00);
  CHECK(q4_at(b, 7) == 0);
  CHECK(q4_at(b, 8) == 15);  // 16.5 -> 16 -> clamped
  CHECK(q4_at(b, 9) == 8);
  // Equal magnitudes: the first one sets the sign.
  CHECK(scale_of(q4(block({{0, 8.0f}, {1, -8.0f}}))) == 0xbc00);
  CHECK(scale_of(q4(block({{0, -8.0f}, {1, 8.0f}}))) == 0x3c00);
  // A block that an FMA would change: max = 1 + 2^-23, x = 0x1.e00004p-1. x * id rounds to exactly
  // -7.5 and -7.5 + 8.5 = 1; fused, the exact product is a little below -7.5 and the nibble would be 0.
  b = q4(block({{0, 0x1.000002p+0f}, {1, 0x1.e00004p-1f}, {2, 0x1.a00004p-1f}}));
  CHECK(q4_at(b, 1) == 1);
  CHECK(q4_at(b, 2) == 2);
  CHECK(std::fma(0x1.e00004p-1f, 1.0f / (0x1.000002p+0f / -8.0f), 8.5f) < 1.0f);  // the fused value
  // Subnormal scales. max = 2^-124: d = -2^-127 (a float subnormal), id = -2^127, exact nibbles; the
  // fp16 scale rounds to -0.
  b = q4(block({{0, std::ldexp(1.0f, -124)}, {1, -std::ldexp(1.0f, -125)}}));
  CHECK(scale_of(b) == 0x8000);
  CHECK(q4_at(b, 0) == 0);
  CHECK(q4_at(b, 1) == 12);
  CHECK(q4_at(b, 2) == 8);
  // max = 2^-125: 1/d = -2^128 overflows to -inf; the max becomes -inf + 8.5 -> 0, and the zeros
  // 0 * -inf = NaN -> 0 too. A negative tiny max gives a +0 scale.
  b = q4(block({{0, std::ldexp(1.0f, -125)}}));
  CHECK(scale_of(b) == 0x8000);
  for (size_t j = 0; j < 32; ++j) CHECK(q4_at(b, j) == 0);
  CHECK(scale_of(q4(block({{0, -std::ldexp(1.0f, -149)}}))) == 0x0000);  // d = +2^-152 -> +0 in float
  // Scale overflowing fp16: d = -125000 -> -inf.
  CHECK(scale_of(q4(block({{3, 1.0e6f}}))) == 0xfc00);
  // NaN is never the max (amax < NaN is false); a NaN element's nibble is 0.
  b = q4(block({{0, kNaN}, {1, 2.0f}}));
  CHECK(scale_of(b) == 0xb400);  // -0.25
  CHECK(q4_at(b, 0) == 0);
  CHECK(q4_at(b, 1) == 0);
  CHECK(q4_at(b, 2) == 8);
  // All NaN: max stays +0, as for zeros, but every nibble is 0.
  b = q4(std::vector<float>(32, kNaN));
  CHECK(scale_of(b) == 0x8000);
  for (size_t j = 2; j < 18; ++j) CHECK(b[j] == 0x00);
  // Infinity: max = -inf, d = +inf, id = +0: finite -> 8, inf * 0 = NaN -> 0.
  b = q4(block({{0, 1.0f}, {1, -kInf}, {2, kInf}}));
  CHECK(scale_of(b) == 0x7c00);
  CHECK(q4_at(b, 0) == 8);
  CHECK(q4_at(b, 1) == 0);
  CHECK(q4_at(b, 2) == 0);
  CHECK(q4_at(b, 3) == 8);
}

TEST_CASE("quant: dequantization and the block layout") {
  std::vector<uint8_t> b8(34, 0);
  b8[0] = 0x00, b8[1] = 0xc0;  // d = -2
  b8[2] = 0x80;                // -128 (a file may hold it; the quantizer never writes it)
  b8[3] = 0x7f;
  b8[33] = 0x01;
  auto y = dq(QuantType::q8_0, b8, 32);
  CHECK(y[0] == 256.0f);
  CHECK(y[1] == -254.0f);
  CHECK(y[31] == -2.0f);
  CHECK(y[2] == 0.0f);
  std::vector<uint8_t> b4(18, 0x88);
  b4[0] = 0x00, b4[1] = 0x38;  // d = 0.5
  b4[2] = 0x1f;                // element 0: 15 - 8 = 7; element 16: 1 - 8 = -7
  b4[17] = 0x0f;               // element 15: 7; element 31: -8
  y = dq(QuantType::q4_0, b4, 32);
  CHECK(y[0] == 3.5f);
  CHECK(y[16] == -3.5f);
  CHECK(y[15] == 3.5f);
  CHECK(y[31] == -4.0f);
  CHECK(y[1] == 0.0f);
  // f16 rows: little-endian binary16.
  std::vector<float> x = {1.0f, -2.0f, 65504.0f, 0.1f};
  std::vector<uint8_t> h(8);
  diffvk::quantize_row(QuantType::f16, x.data(), 4, h.data());
  CHECK(h[0] == 0x00);
  CHECK(h[1] == 0x3c);
  CHECK(h[3] == 0xc0);
  y = dq(QuantType::f16, h, 4);
  CHECK(y[2] == 65504.0f);
  CHECK(y[3] == half_value(0x2e66));
}

TEST_CASE("quant: random rows match the independent reference byte for byte") {
  std::mt19937_64 rng(19);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const size_t widths[] = {32, 64, 96, 768};
  size_t rows = 0;
  for (int it = 0; it < 4000; ++it) {
    const size_t n = widths[size_t(it) % 4];
    const int mode = (it / 4) % 6;
    std::vector<float> x(n);
    for (auto& v : x) {
      switch (mode) {
        case 0:
          v = normal(rng) * 0.02f;
          break;  // weights
        case 1:
          v = bitsf(uint32_t(rng()));
          break;  // any bit pattern
        case 2:
          v = float(int(rng() % 33) - 16) * 0.5f;
          break;  // ties, boundaries
        case 3:
          v = std::ldexp(normal(rng), -110 - int(rng() % 40));
          break;  // subnormal scales
        case 4:
          v = float(int(rng() % 17) - 8) * (1.0f + float(int(rng() % 5) - 2) * 1.2e-7f);
          break;
        default: {  // specials mixed in
          const unsigned r = unsigned(rng() % 24);
          v = r == 0 ? kNaN : r == 1 ? kInf : r == 2 ? -kInf : r == 3 ? -0.0f : normal(rng);
        }
      }
    }
    CAPTURE(it);
    CHECK(q8(x) == ref_q8_0(x));
    CHECK(q4(x) == ref_q4_0(x));
    ++rows;
  }
  CHECK(rows == 4000);
}

TEST_CASE("quant: dequantize then requantize and error bounds") {
  std::mt19937_64 rng(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (int it = 0; it < 300; ++it) {
    const size_t n = 256;
    std::vector<float> x(n);
    const float scale = std::ldexp(1.0f, int(rng() % 20) - 14);
    for (auto& v : x) v = normal(rng) * scale;
    CAPTURE(it);
    for (QuantType t : {QuantType::q8_0, QuantType::q4_0}) {
      CAPTURE(diffvk::quant_type_name(t));
      std::vector<uint8_t> b(diffvk::quant_row_bytes(t, n));
      diffvk::quantize_row(t, x.data(), n, b.data());
      const auto y = dq(t, b, n);
      // Requantizing the dequantized row gives the same blocks (the max element maps back to ±127 or
      // nibble 0, so the scale is recovered exactly and every quant rounds back to itself).
      std::vector<uint8_t> b2(b.size());
      diffvk::quantize_row(t, y.data(), n, b2.data());
      CHECK(b2 == b);
      // |x - dequantized| <= half a step (a whole step at Q4_0's clamped end) + the fp16 scale error.
      for (size_t blk = 0; blk < n / 32; ++blk) {
        const size_t off = blk * diffvk::quant_block_bytes(t);
        float amax = 0.0f;
        for (size_t j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[blk * 32 + j]));
        const double d = t == QuantType::q8_0 ? amax / 127.0 : amax / 8.0;
        const double d16 = std::fabs(double(half_value(scale_of(b, off))));
        const double bound = (t == QuantType::q8_0 ? 0.5 : 1.0) * d + 128.0 * std::fabs(d - d16) + 1e-6 * d;
        for (size_t j = 0; j < 32; ++j) {
          const size_t i = blk * 32 + j;
          CHECK(std::fabs(double(x[i]) - double(y[i])) <= bound);
        }
      }
    }
  }
}
