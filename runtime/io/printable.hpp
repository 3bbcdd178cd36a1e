// Text taken from a file, made safe for an error message: bounded, with control and non-ASCII bytes
// written as \xHH. One helper for every parser (npy, config.json, tokenizer files).
#pragma once
#include <cstddef>
#include <string>
#include <string_view>

namespace diffvk {

inline std::string printable(std::string_view s, size_t max = 64) {
  static const char* hex = "0123456789abcdef";
  std::string out;
  for (unsigned char ch : s) {
    if (out.size() >= max) return out + "...";
    if (ch < 0x20 || ch >= 0x7f) {
      out += "\\x";
      out += hex[ch >> 4];
      out += hex[ch & 15];
    } else {
      out += char(ch);
    }
  }
  return out;
}

}  // namespace diffvk
