// A 5x7 bitmap font for printable ASCII (32 … 126), drawn for diffvk's PNGs (written for this
// project). Row r of a glyph is a 5-bit mask, bit 4 = leftmost column.
#pragma once
#include <cstdint>

namespace diffvk::bench {
constexpr int kGlyphW = 5, kGlyphH = 7;
// The 7 row masks of character c; characters outside 32 … 126 give '?'.
const uint8_t* glyph5x7(char c);
}  // namespace diffvk::bench
