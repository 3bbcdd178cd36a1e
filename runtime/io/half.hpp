// diffvk — IEEE binary16 ("half") and bfloat16 <-> binary32 conversions.
// Header-only and bit-exact (no hardware/compiler half support needed), so host
// loaders and GPU upload code agree on every bit pattern:
//   * half_to_float / bf16_to_float are exact for all 65536 patterns, including
//     subnormals, +-0, +-inf; NaNs keep sign and payload bits (no quieting), so
//     float_to_half(half_to_float(h)) == h for every h.
//   * float_to_half / float_to_bf16 round to nearest, ties to even; overflow gives
//     inf, underflow gives (signed) subnormals/zero; NaN stays NaN (payload
//     truncated, quiet bit forced if the truncated payload would be zero).
#pragma once
#include <cstdint>
#include <cstring>

namespace diffvk {
namespace half_detail {

inline uint32_t float_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

inline float bits_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

}  // namespace half_detail

inline float half_to_float(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  if (exp == 0x1fu) return half_detail::bits_float(sign | 0x7f800000u | (mant << 13));  // inf / NaN
  if (exp == 0) {
    if (mant == 0) return half_detail::bits_float(sign);  // +-0
    // Subnormal: value = mant * 2^-24; normalise into a binary32 normal.
    uint32_t e32 = 127 - 15 + 1;
    while ((mant & 0x400u) == 0) {
      mant <<= 1;
      --e32;
    }
    mant &= 0x3ffu;
    return half_detail::bits_float(sign | (e32 << 23) | (mant << 13));
  }
  return half_detail::bits_float(sign | ((exp + (127 - 15)) << 23) | (mant << 13));
}

inline uint16_t float_to_half(float f) {
  uint32_t x = half_detail::float_bits(f);
  const uint16_t sign = uint16_t((x >> 16) & 0x8000u);
  x &= 0x7fffffffu;
  if (x >= 0x7f800000u) {  // inf / NaN
    if (x == 0x7f800000u) return uint16_t(sign | 0x7c00u);
    uint32_t payload = (x >> 13) & 0x3ffu;
    if (payload == 0) payload = 0x200u;  // keep it a NaN
    return uint16_t(sign | 0x7c00u | payload);
  }
  if (x >= 0x477ff000u) return uint16_t(sign | 0x7c00u);  // >= 65520 rounds to inf
  if (x >= 0x38800000u) {                                 // half normal range (>= 2^-14)
    uint32_t rebased = x - ((127u - 15u) << 23);
    uint32_t r = rebased >> 13;
    uint32_t rem = rebased & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (r & 1u))) ++r;  // may carry into the exponent: fine
    return uint16_t(sign | r);
  }
  if (x <= 0x33000000u) return sign;  // <= 2^-25: rounds to zero (2^-25 is a tie -> even 0)
  // Half subnormal: q = value / 2^-24 = mant * 2^(exp - 126), rounded to nearest even.
  uint32_t exp = x >> 23;                       // 102..112
  uint32_t mant = (x & 0x7fffffu) | 0x800000u;  // 24 significant bits
  uint32_t shift = 126u - exp;                  // 14..24
  uint32_t q = mant >> shift;
  uint32_t rem = mant & ((1u << shift) - 1u);
  uint32_t half = 1u << (shift - 1u);
  if (rem > half || (rem == half && (q & 1u))) ++q;  // q == 0x400 becomes the smallest normal
  return uint16_t(sign | q);
}

inline float bf16_to_float(uint16_t b) { return half_detail::bits_float(uint32_t(b) << 16); }

inline uint16_t float_to_bf16(float f) {
  uint32_t x = half_detail::float_bits(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) {  // NaN: truncate, keep it a NaN
    uint16_t r = uint16_t(x >> 16);
    if ((r & 0x7fu) == 0) r |= 0x40u;
    return r;
  }
  x += 0x7fffu + ((x >> 16) & 1u);  // round to nearest even; overflow carries into inf
  return uint16_t(x >> 16);
}

}  // namespace diffvk
