// diffvk — NumPy .npy reader/writer; see include/diffvk/npy.hpp.
#include "diffvk/npy.hpp"
#include "io/checked_shape.hpp"
#include "io/printable.hpp"

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <limits>
#include <utility>

#include "io/half.hpp"
#include "platform.hpp"

#if defined(__BYTE_ORDER__) && defined(__ORDER_LITTLE_ENDIAN__)
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "diffvk reads little-endian files with memcpy");
#endif

namespace diffvk {
namespace {

const uint8_t kMagic[6] = {0x93, 'N', 'U', 'M', 'P', 'Y'};

[[noreturn]] void fail(const std::string& file, const std::string& what) {
  throw Error(Status::format_error, file + ": " + what);
}

std::string shape_repr(const std::vector<int64_t>& shape) {  // Python tuple repr
  std::string s = "(";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  if (shape.size() == 1) s += ",";
  return s + ")";
}

// Parser for the header: a Python dict literal whose values are strings,
// True/False, or tuples of non-negative integers.
class HeaderParser {
 public:
  HeaderParser(const std::string& file, const char* p, size_t n) : file_(file), p_(p), n_(n) {}

  void parse(std::string* descr, bool* fortran, std::vector<int64_t>* shape) {
    bool have_descr = false, have_fortran = false, have_shape = false;
    ws();
    expect('{', "header dict must start with '{'");
    for (;;) {
      ws();
      if (peek() == '}') {
        ++i_;
        break;
      }
      std::string key = string_lit("dict key");
      ws();
      expect(':', "expected ':' after key '" + printable(key, 81) + "'");
      ws();
      if (key == "descr") {
        if (have_descr) fail(file_, "duplicate key 'descr' in header");
        have_descr = true;
        if (peek() != '\'' && peek() != '"') {
          fail(file_, "'descr' is not a string (structured dtypes are not supported)");
        }
        *descr = string_lit("'descr'");
      } else if (key == "fortran_order") {
        if (have_fortran) fail(file_, "duplicate key 'fortran_order' in header");
        have_fortran = true;
        *fortran = bool_lit();
      } else if (key == "shape") {
        if (have_shape) fail(file_, "duplicate key 'shape' in header");
        have_shape = true;
        *shape = tuple_lit();
      } else {
        fail(file_, "unexpected key '" + printable(key, 81) + "' in header");
      }
      ws();
      if (peek() == ',') {
        ++i_;
        continue;
      }
      if (peek() == '}') {
        ++i_;
        break;
      }
      error_here("expected ',' or '}' in header dict");
    }
    ws();
    if (i_ != n_) error_here("unexpected data after the header dict");
    if (!have_descr) fail(file_, "header has no 'descr'");
    if (!have_fortran) fail(file_, "header has no 'fortran_order'");
    if (!have_shape) fail(file_, "header has no 'shape'");
  }

 private:
  char peek() const { return i_ < n_ ? p_[i_] : '\0'; }
  bool at_end() const { return i_ >= n_; }

  void ws() {
    while (i_ < n_ && (p_[i_] == ' ' || p_[i_] == '\t' || p_[i_] == '\n' || p_[i_] == '\r')) ++i_;
  }

  [[noreturn]] void error_here(const std::string& what) const {
    std::string near = at_end() ? std::string("end of header")
                                : "'" + printable(std::string_view(p_ + i_, std::min<size_t>(n_ - i_, 20)), 81) + "'";
    fail(file_, what + " (at header offset " + std::to_string(i_) + ", near " + near + ")");
  }

  void expect(char c, const std::string& what) {
    if (peek() != c || at_end()) error_here(what);
    ++i_;
  }

  std::string string_lit(const std::string& what) {
    if (at_end() || (peek() != '\'' && peek() != '"')) error_here("expected a quoted string for " + what);
    char q = p_[i_++];
    std::string s;
    while (i_ < n_ && p_[i_] != q) {
      if (p_[i_] == '\\') error_here("escape sequences are not supported in " + what);
      if (p_[i_] == '\n') error_here("unterminated string in " + what);
      s += p_[i_++];
    }
    if (at_end()) error_here("unterminated string in " + what);
    ++i_;
    return s;
  }

  bool bool_lit() {
    if (n_ - i_ >= 4 && std::memcmp(p_ + i_, "True", 4) == 0) {
      i_ += 4;
      return true;
    }
    if (n_ - i_ >= 5 && std::memcmp(p_ + i_, "False", 5) == 0) {
      i_ += 5;
      return false;
    }
    error_here("'fortran_order' must be True or False");
  }

  std::vector<int64_t> tuple_lit() {
    expect('(', "'shape' must be a tuple");
    std::vector<int64_t> dims;
    for (;;) {
      ws();
      if (peek() == ')' && !at_end()) {
        ++i_;
        return dims;
      }
      if (peek() == '-') error_here("negative dimension in 'shape'");
      if (peek() < '0' || peek() > '9' || at_end()) error_here("expected a non-negative integer in 'shape'");
      uint64_t v = 0;
      while (i_ < n_ && p_[i_] >= '0' && p_[i_] <= '9') {
        uint64_t digit = uint64_t(p_[i_] - '0');
        if (v > (uint64_t(std::numeric_limits<int64_t>::max()) - digit) / 10) {
          error_here("dimension in 'shape' is too large");
        }
        v = v * 10 + digit;
        ++i_;
      }
      if (peek() == 'L' || peek() == 'l') ++i_;  // Python 2 long literal
      if (dims.size() == kNpyMaxDims)
        error_here("'shape' has more than " + std::to_string(kNpyMaxDims) + " dimensions");
      dims.push_back(int64_t(v));
      ws();
      if (peek() == ',' && !at_end()) {
        ++i_;
        continue;
      }
      if (peek() == ')' && !at_end()) {
        if (dims.size() == 1) error_here("'shape' (N) is not a tuple; a 1-element shape is written (N,)");
        ++i_;
        return dims;
      }
      error_here("expected ',' or ')' in 'shape'");
    }
  }

  const std::string& file_;
  const char* p_;
  size_t n_;
  size_t i_ = 0;
};

bool supported_dtype(const std::string& d, size_t* itemsize) {
  if (d == "<f4" || d == "<i4") {
    *itemsize = 4;
  } else if (d == "<f8" || d == "<i8") {
    *itemsize = 8;
  } else if (d == "<f2") {
    *itemsize = 2;
  } else {
    return false;
  }
  return true;
}

void check_array(const NpyArray& a, const char* fn) {
  size_t item = 0;
  if (!supported_dtype(a.dtype, &item)) {
    throw Error(Status::invalid_argument, std::string(fn) + ": unsupported dtype '" + printable(a.dtype, 81) + "'");
  }
  uint64_t n = 0;
  if (!checked_numel(a.shape, &n) || n > std::numeric_limits<uint64_t>::max() / item ||
      n * item != uint64_t(a.data.size())) {
    throw Error(Status::invalid_argument, std::string(fn) + ": " + std::to_string(a.data.size()) +
                                              " data bytes do not match shape " + shape_repr(a.shape) + " of " +
                                              a.dtype);
  }
}

}  // namespace

uint64_t NpyArray::numel() const {
  uint64_t n = 0;
  if (!checked_numel(shape, &n)) {
    throw Error(Status::invalid_argument, "npy shape " + shape_repr(shape) + " is negative or overflows");
  }
  return n;
}

size_t npy_itemsize(const std::string& dtype) {
  size_t item = 0;
  if (!supported_dtype(dtype, &item)) {
    throw Error(Status::invalid_argument, "unsupported npy dtype '" + printable(dtype, 81) + "'");
  }
  return item;
}

NpyArray read_npy(const std::string& path, uint64_t max_bytes) {
  return parse_npy(platform::read_file(path, max_bytes), path);
}

NpyArray parse_npy(std::vector<uint8_t> bytes, const std::string& name) {
  const size_t size = bytes.size();
  if (size < 10) fail(name, "file is " + std::to_string(size) + " bytes, too short for a .npy header");
  if (std::memcmp(bytes.data(), kMagic, 6) != 0) fail(name, "bad magic (not a .npy file)");
  const unsigned major = bytes[6], minor = bytes[7];
  size_t prefix;
  uint64_t hlen;
  if (major == 1) {
    prefix = 10;
    hlen = uint64_t(bytes[8]) | (uint64_t(bytes[9]) << 8);
  } else if (major == 2 || major == 3) {
    if (size < 12)
      fail(name, "file is " + std::to_string(size) + " bytes, too short for a version " + std::to_string(major) +
                     ".0 header");
    prefix = 12;
    hlen = uint64_t(bytes[8]) | (uint64_t(bytes[9]) << 8) | (uint64_t(bytes[10]) << 16) | (uint64_t(bytes[11]) << 24);
  } else {
    fail(name, "unsupported format version " + std::to_string(major) + "." + std::to_string(minor));
  }
  if (minor != 0) {
    fail(name, "unsupported format version " + std::to_string(major) + "." + std::to_string(minor));
  }
  if (hlen > size - prefix) {
    fail(name, "header length " + std::to_string(hlen) + " exceeds the " + std::to_string(size - prefix) +
                   " bytes after the prefix (truncated file?)");
  }
  if (hlen > kNpyMaxHeaderBytes)
    fail(name, "header length " + std::to_string(hlen) + " exceeds the limit of " + std::to_string(kNpyMaxHeaderBytes) +
                   " bytes");
  const size_t header_end = prefix + size_t(hlen);

  std::string descr;
  bool fortran = false;
  NpyArray a;
  HeaderParser(name, reinterpret_cast<const char*>(bytes.data()) + prefix, size_t(hlen))
      .parse(&descr, &fortran, &a.shape);
  size_t item = 0;
  if (!supported_dtype(descr, &item)) {
    std::string why = !descr.empty() && descr[0] == '>' ? " (big-endian)" : "";
    fail(name, "unsupported dtype '" + printable(descr, 81) + "'" + why + "; supported: <f4, <f8, <f2, <i8, <i4");
  }
  if (fortran) fail(name, "fortran_order True is not supported (save a C-contiguous array)");
  uint64_t n = 0;
  if (!checked_numel(a.shape, &n) || n > std::numeric_limits<uint64_t>::max() / item) {
    fail(name, "shape " + shape_repr(a.shape) + " overflows 64 bits");
  }
  const uint64_t need = n * item;
  const uint64_t have = size - header_end;
  if (have != need) {
    fail(name, "shape " + shape_repr(a.shape) + " of " + descr + " needs " + std::to_string(need) +
                   " data bytes, file has " + std::to_string(have) +
                   (have < need ? " (truncated)" : " (trailing bytes)"));
  }
  a.dtype = std::move(descr);
  bytes.erase(bytes.begin(), bytes.begin() + std::ptrdiff_t(header_end));
  a.data = std::move(bytes);
  return a;
}

std::vector<float> npy_as_float(const NpyArray& a) {
  check_array(a, "npy_as_float");
  const uint8_t* p = a.data.data();
  std::vector<float> out;
  if (a.dtype == "<f4") {
    out.resize(a.data.size() / 4);
    if (!out.empty()) std::memcpy(out.data(), p, a.data.size());
  } else if (a.dtype == "<f8") {
    out.resize(a.data.size() / 8);
    for (size_t i = 0; i < out.size(); ++i) {
      double d;
      std::memcpy(&d, p + 8 * i, 8);
      out[i] = static_cast<float>(d);  // IEEE: out-of-range -> inf, NaN stays NaN
    }
  } else if (a.dtype == "<f2") {
    out.resize(a.data.size() / 2);
    for (size_t i = 0; i < out.size(); ++i) out[i] = half_to_float(uint16_t(p[2 * i] | (p[2 * i + 1] << 8)));
  } else {
    throw Error(Status::invalid_argument, "npy_as_float: dtype " + a.dtype + " is an integer type; use npy_as_int64");
  }
  return out;
}

std::vector<int64_t> npy_as_int64(const NpyArray& a) {
  check_array(a, "npy_as_int64");
  const uint8_t* p = a.data.data();
  std::vector<int64_t> out;
  if (a.dtype == "<i8") {
    out.resize(a.data.size() / 8);
    if (!out.empty()) std::memcpy(out.data(), p, a.data.size());
  } else if (a.dtype == "<i4") {
    out.resize(a.data.size() / 4);
    for (size_t i = 0; i < out.size(); ++i) {
      int32_t v;
      std::memcpy(&v, p + 4 * i, 4);
      out[i] = v;
    }
  } else {
    throw Error(Status::invalid_argument,
                "npy_as_int64: dtype " + a.dtype + " is a floating-point type; use npy_as_float");
  }
  return out;
}

std::vector<uint8_t> encode_npy_f32(const std::vector<int64_t>& shape, const float* data) {
  uint64_t n = 0;
  if (!checked_numel(shape, &n) || n > std::numeric_limits<size_t>::max() / 4) {
    throw Error(Status::invalid_argument, "encode_npy_f32: shape " + shape_repr(shape) + " is negative or too large");
  }
  if (n != 0 && data == nullptr) throw Error(Status::invalid_argument, "encode_npy_f32: null data");
  std::string dict = "{'descr': '<f4', 'fortran_order': False, 'shape': " + shape_repr(shape) + ", }";
  // Pad with spaces + '\n' so that prefix + header is a multiple of 64.
  size_t prefix = 10;
  size_t total = prefix + dict.size() + 1;
  size_t padded = (total + 63) / 64 * 64;
  if (padded - prefix > 0xffff) {
    prefix = 12;
    total = prefix + dict.size() + 1;
    padded = (total + 63) / 64 * 64;
  }
  const size_t hlen = padded - prefix;
  dict.append(padded - total, ' ');
  dict += '\n';

  const size_t nbytes = size_t(n) * 4;
  std::vector<uint8_t> out;
  out.reserve(padded + nbytes);
  out.insert(out.end(), kMagic, kMagic + 6);
  out.push_back(prefix == 10 ? 1 : 2);
  out.push_back(0);
  out.push_back(uint8_t(hlen & 0xff));
  out.push_back(uint8_t((hlen >> 8) & 0xff));
  if (prefix == 12) {
    out.push_back(uint8_t((hlen >> 16) & 0xff));
    out.push_back(uint8_t((hlen >> 24) & 0xff));
  }
  out.insert(out.end(), dict.begin(), dict.end());
  const uint8_t* src = reinterpret_cast<const uint8_t*>(data);
  if (nbytes) out.insert(out.end(), src, src + nbytes);
  return out;
}

void write_npy_f32(const std::string& path, const std::vector<int64_t>& shape, const float* data) {
  std::vector<uint8_t> bytes = encode_npy_f32(shape, data);
  platform::write_file_atomic(path, bytes.data(), bytes.size());
}

}  // namespace diffvk
