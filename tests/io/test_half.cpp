// diffvk — half and bfloat16 conversions (runtime/io/half.hpp) against independent double-precision references:
// every 16-bit pattern, and rounding of float samples.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "file_test_util.hpp"
#include "io/half.hpp"

using namespace io_test;
using diffvk::Error;
using diffvk::Status;

namespace {

// ---- independent reference conversions (plain double arithmetic) -------------------

uint32_t fbits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
float bitsf(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// A 16-bit IEEE-style format: sign, `exp_bits` exponent bits (bias 2^(exp_bits-1) - 1), `man_bits`
// mantissa bits. half = (5, 10), bf16 = (8, 7).
struct Fmt16 {
  int exp_bits, man_bits;
  int bias() const { return (1 << (exp_bits - 1)) - 1; }
  unsigned inf() const { return ((1u << exp_bits) - 1) << man_bits; }
};
constexpr Fmt16 kHalf{5, 10}, kBf16{8, 7};

float ref_to_float(Fmt16 fm, uint16_t x) {
  const int e = int(x >> fm.man_bits) & ((1 << fm.exp_bits) - 1), m = x & ((1 << fm.man_bits) - 1);
  const double s = (x & 0x8000) ? -1.0 : 1.0;
  if (e == (1 << fm.exp_bits) - 1) return m ? std::numeric_limits<float>::quiet_NaN() : float(s * HUGE_VAL);
  if (e == 0) return float(s * std::ldexp(double(m), 1 - fm.bias() - fm.man_bits));
  return float(s * std::ldexp(double((1 << fm.man_bits) + m), e - fm.bias() - fm.man_bits));
}

// Finite or infinite (not NaN) float -> the format, round to nearest even; overflow gives infinity.
uint16_t ref_from_float(Fmt16 fm, float f) {
  const uint16_t sign = std::signbit(f) ? 0x8000 : 0;
  const double a = std::fabs(double(f));
  if (std::isinf(a)) return uint16_t(sign | fm.inf());
  if (a < std::ldexp(1.0, 1 - fm.bias())) {  // subnormal (or rounds up to the smallest normal)
    return uint16_t(sign | unsigned(std::nearbyint(a * std::ldexp(1.0, fm.bias() - 1 + fm.man_bits))));
  }
  int e;
  const double m = std::frexp(a, &e);                                           // a = m * 2^e, m in [0.5, 1)
  const unsigned q = unsigned(std::nearbyint(std::ldexp(m, fm.man_bits + 1)));  // 2^man_bits .. 2^(man_bits+1)
  const double bits = double(e - 1 + fm.bias()) * double(1u << fm.man_bits) + q - double(1u << fm.man_bits);
  return uint16_t(sign | (bits >= fm.inf() ? fm.inf() : unsigned(bits)));
}

float ref_half_to_float(uint16_t h) { return ref_to_float(kHalf, h); }
float ref_bf16_to_float(uint16_t b) { return ref_to_float(kBf16, b); }
uint16_t ref_float_to_half(float f) { return ref_from_float(kHalf, f); }
uint16_t ref_float_to_bf16(float f) { return ref_from_float(kBf16, f); }

}  // namespace

TEST_CASE("io: half_to_float exhaustive against reference") {
  for (uint32_t h = 0; h < 65536; ++h) {
    const float got = diffvk::half_to_float(uint16_t(h));
    const float ref = ref_half_to_float(uint16_t(h));
    if (std::isnan(ref)) {
      REQUIRE_MESSAGE(std::isnan(got), "h=" << h);
      CHECK(std::signbit(got) == bool(h & 0x8000));
      CHECK(((fbits(got) >> 13) & 0x3ff) == (h & 0x3ff));  // payload kept
    } else {
      REQUIRE_MESSAGE(fbits(got) == fbits(ref), "h=" << h);
    }
    // Exact round trip for every pattern, NaNs included.
    REQUIRE_MESSAGE(diffvk::float_to_half(got) == h, "h=" << h);
#if defined(__FLT16_MAX__) && !(defined(__GNUC__) && !defined(__clang__) && __GNUC__ < 13 && \
                                defined(__aarch64__))  // g++ 12 on aarch64 defines the macro but has no C++ _Float16
    _Float16 hf;
    uint16_t hb = uint16_t(h);
    std::memcpy(&hf, &hb, 2);
    const float cf = float(hf);
    if (std::isnan(cf)) {
      CHECK(std::isnan(got));
    } else {
      REQUIRE_MESSAGE(fbits(got) == fbits(cf), "h=" << h);
    }
#endif
  }
}

TEST_CASE("io: bf16_to_float exhaustive against reference") {
  for (uint32_t b = 0; b < 65536; ++b) {
    const float got = diffvk::bf16_to_float(uint16_t(b));
    const float ref = ref_bf16_to_float(uint16_t(b));
    if (std::isnan(ref)) {
      REQUIRE(std::isnan(got));
      CHECK(fbits(got) == (b << 16));
    } else {
      REQUIRE_MESSAGE(fbits(got) == fbits(ref), "b=" << b);
    }
    REQUIRE_MESSAGE(diffvk::float_to_bf16(got) == b, "b=" << b);
  }
}

TEST_CASE("io: float_to_half / float_to_bf16 rounding against reference") {
  std::vector<float> samples;
  // Every half value, the midpoints to its neighbour and one float ulp around them.
  for (uint32_t h = 0; h < 0x7c00; ++h) {
    const float a = diffvk::half_to_float(uint16_t(h));
    const float b = h + 1 < 0x7c00 ? diffvk::half_to_float(uint16_t(h + 1)) : 65536.0f;
    const float mid = float((double(a) + double(b)) / 2);  // exact in binary32
    for (float v : {a, mid, std::nextafter(mid, 0.0f), std::nextafter(mid, 1e30f), std::nextafter(a, 1e30f)}) {
      samples.push_back(v);
      samples.push_back(-v);
    }
  }
  // A sweep over all binary32 patterns (NaNs skipped), plus the edges.
  for (uint64_t u = 0; u < (uint64_t(1) << 32); u += 1021) samples.push_back(bitsf(uint32_t(u)));
  for (float v : {0.0f, -0.0f, 65504.0f, 65519.99f, 65520.0f, 1e30f, std::numeric_limits<float>::infinity(),
                  -std::numeric_limits<float>::infinity(), std::numeric_limits<float>::max(),
                  std::numeric_limits<float>::denorm_min(), std::ldexp(1.0f, -25), std::ldexp(1.0f, -24),
                  std::ldexp(1.5f, -25), std::ldexp(1.0f, -14)}) {
    samples.push_back(v);
  }
  size_t checked = 0;
  for (float f : samples) {
    if (std::isnan(f)) continue;
    REQUIRE_MESSAGE(diffvk::float_to_half(f) == ref_float_to_half(f), "f=" << f << " bits=" << fbits(f));
    REQUIRE_MESSAGE(diffvk::float_to_bf16(f) == ref_float_to_bf16(f), "f=" << f << " bits=" << fbits(f));
#if defined(__FLT16_MAX__) && !(defined(__GNUC__) && !defined(__clang__) && __GNUC__ < 13 && \
                                defined(__aarch64__))  // g++ 12 on aarch64 defines the macro but has no C++ _Float16
    _Float16 hf = static_cast<_Float16>(f);
    uint16_t hb;
    std::memcpy(&hb, &hf, 2);
    REQUIRE_MESSAGE(diffvk::float_to_half(f) == hb, "f=" << f);
#endif
    ++checked;
  }
  CHECK(checked > 4000000);
  CHECK(diffvk::float_to_half(65520.0f) == 0x7c00);
  CHECK(diffvk::float_to_half(65519.99f) == 0x7bff);
  CHECK(diffvk::float_to_half(std::ldexp(1.0f, -25)) == 0x0000);  // tie -> even (0)
  CHECK(diffvk::float_to_half(std::ldexp(1.5f, -25)) == 0x0001);
  // NaN stays NaN with its sign.
  const float qnan = std::numeric_limits<float>::quiet_NaN();
  CHECK((diffvk::float_to_half(qnan) & 0x7c00) == 0x7c00);
  CHECK((diffvk::float_to_half(qnan) & 0x3ff) != 0);
  CHECK((diffvk::float_to_half(bitsf(0xff800001u)) & 0xfc00) == 0xfc00);  // low payload bits only
  CHECK((diffvk::float_to_half(bitsf(0xff800001u)) & 0x3ff) != 0);
  CHECK((diffvk::float_to_bf16(bitsf(0x7f800001u)) & 0x7f) != 0);
  CHECK((diffvk::float_to_bf16(bitsf(0x7f800001u)) & 0x7f80) == 0x7f80);
}
