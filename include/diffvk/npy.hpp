// diffvk — NumPy .npy reader/writer (format versions 1.0, 2.0 and 3.0).
// Public because the CLI and apps read inputs and write results as .npy (`diffvk layer`, `diffvk logits`);
// implemented in runtime/io/npy.cpp, the library diffvk_npy (link it; the core library diffvk has none of it).
//
//
// Supported dtypes: '<f4', '<f8', '<f2', '<i8', '<i4'; C order only. The header
// dict must hold exactly 'descr', 'fortran_order' and 'shape'; the shape tuple
// may have spaces, a trailing comma, Python 2 'L' suffixes, or be '()' (a scalar).
// The data must be exactly product(shape) * itemsize bytes. Any problem throws
// diffvk::Error(format_error, "<name>: <what>"); unreadable files io_error.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "diffvk/error.hpp"

namespace diffvk {

struct NpyArray {
  std::string dtype;           // as in the header, e.g. "<f4"
  std::vector<int64_t> shape;  // empty: scalar (one element)
  std::vector<uint8_t> data;   // raw little-endian elements, C order
  uint64_t numel() const;      // product(shape); invalid_argument on overflow/negative dims
};

// Bytes per element of a supported dtype; invalid_argument otherwise.
size_t npy_itemsize(const std::string& dtype);

// Default cap on the size of a .npy file read_npy will load.
constexpr uint64_t kNpyDefaultMaxBytes = uint64_t(4) << 30;
// Limits of parse_npy (docs/limits.md): the header dict's length (NumPy writes a few hundred bytes; its
// own reader refuses more than 10000 by default) and the number of dimensions (NumPy 2's NPY_MAXDIMS).
constexpr uint64_t kNpyMaxHeaderBytes = uint64_t(1) << 20;
constexpr size_t kNpyMaxDims = 64;

NpyArray read_npy(const std::string& path, uint64_t max_bytes = kNpyDefaultMaxBytes);
NpyArray parse_npy(std::vector<uint8_t> bytes, const std::string& name);

// Elements as float: '<f4' exact, '<f2' exact, '<f8' rounded to nearest float.
// invalid_argument for integer dtypes or when data.size() does not match shape.
std::vector<float> npy_as_float(const NpyArray& a);
// Elements as int64: '<i8', '<i4'. invalid_argument for float dtypes.
std::vector<int64_t> npy_as_int64(const NpyArray& a);

// A version 1.0 '<f4' C-order file (version 2.0 if the header needs it); header
// padded so the data starts at a multiple of 64 bytes, as NumPy writes it.
// data may be nullptr only when product(shape) == 0. invalid_argument on bad shape.
std::vector<uint8_t> encode_npy_f32(const std::vector<int64_t>& shape, const float* data);
// encode_npy_f32 + platform::write_file_atomic.
void write_npy_f32(const std::string& path, const std::vector<int64_t>& shape, const float* data);

}  // namespace diffvk
