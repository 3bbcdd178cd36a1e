// Helpers of the file tests (tests/io/, tests/platform/test_platform_files.cpp, tests/vk/test_pipeline_cache.cpp):
// a temporary directory, whole-file put/get, CHECK_ERROR, and the rejection and corruption tables shared by
// the safetensors and npy parsers. Everything is in namespace io_test (a test file says `using namespace io_test;`).
#pragma once
#include <doctest/doctest.h>

#include <stdlib.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <iterator>
#include <string>
#include <system_error>
#include <vector>

#include "diffvk/error.hpp"
#include "diffvk/npy.hpp"
#include "io/safetensors.hpp"

// Checks that `expr` throws diffvk::Error with `status` and a message containing `phrase`.
#define CHECK_ERROR(expr, st, phrase)                                                         \
  do {                                                                                        \
    try {                                                                                     \
      (void)(expr);                                                                           \
      FAIL_CHECK("expected diffvk::Error from: " #expr);                                      \
    } catch (const diffvk::Error& e_) {                                                       \
      CHECK_MESSAGE(e_.status() == (st), "status " << int(e_.status()) << ": " << e_.what()); \
      CHECK_MESSAGE(::io_test::contains(e_.what(), (phrase)),                                 \
                    "message '" << e_.what() << "' lacks '" << (phrase) << "'");              \
    }                                                                                         \
  } while (0)

namespace io_test {

namespace fs = std::filesystem;
using diffvk::Status;

struct TempDir {
  std::string path;
  TempDir() {
    char tmpl[] = "/tmp/diffvk_test_io_XXXXXX";
    char* p = ::mkdtemp(tmpl);
    REQUIRE(p != nullptr);
    path = p;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  std::string file(const std::string& name) const { return path + "/" + name; }
  std::vector<std::string> entries() const {
    std::vector<std::string> out;
    for (const auto& e : fs::directory_iterator(path)) out.push_back(e.path().filename().string());
    return out;
  }
};

inline void put_file(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream f(path, std::ios::binary);
  f.write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
  REQUIRE(f.good());
}

inline void put_file(const std::string& path, const std::string& s) {
  put_file(path, std::vector<uint8_t>(s.begin(), s.end()));
}

inline std::vector<uint8_t> get_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

inline bool contains(const std::string& hay, const std::string& needle) {
  return hay.find(needle) != std::string::npos;
}

template <typename T>
std::vector<uint8_t> as_bytes(const std::vector<T>& v) {
  std::vector<uint8_t> out(v.size() * sizeof(T));
  if (!v.empty()) std::memcpy(out.data(), v.data(), out.size());
  return out;
}

inline std::vector<uint8_t> zeros(size_t n) { return std::vector<uint8_t>(n, 0); }

// A file that must be refused, and a phrase its message must contain.
struct Rejected {
  std::string label;
  std::vector<uint8_t> bytes;
  std::string phrase;
};

// A file that differs from the others of its table only in its header text and data size.
struct HeaderCase {
  const char* label;
  std::string header;
  size_t data_bytes;  // zero bytes after the header
  const char* phrase;
};

// Every case is a format error whose message names the problem and, by `file_prefix`, the file.
template <typename Parse>
void check_rejected(const std::vector<Rejected>& cases, Parse parse, const std::string& file_prefix) {
  for (const auto& c : cases) {
    CAPTURE(c.label);
    CHECK_ERROR(parse(c.bytes), Status::format_error, c.phrase);
    CHECK_ERROR(parse(c.bytes), Status::format_error, file_prefix);
  }
}

// Calls attempt() on every proper prefix of `good`, then on `good` with each byte replaced by each of
// `values`.
template <typename Attempt>
void for_each_corruption(const std::vector<uint8_t>& good, std::initializer_list<uint8_t> values, Attempt attempt) {
  for (size_t len = 0; len < good.size(); ++len) attempt(std::vector<uint8_t>(good.begin(), good.begin() + long(len)));
  for (size_t i = 0; i < good.size(); ++i) {
    for (uint8_t v : values) {
      auto m = good;
      m[i] = v;
      attempt(m);
    }
  }
}

// Reads every tensor as a loader would: the raw bytes of all, the float values of the float dtypes.
inline void read_all(const diffvk::SafetensorsFile& f) {
  for (const auto& t : f.tensors()) {
    if (t.dtype == diffvk::DType::F32 || t.dtype == diffvk::DType::F16 || t.dtype == diffvk::DType::BF16) {
      CHECK(f.to_float(t).size() == t.numel());
    }
    (void)f.data(t);
  }
}

inline void read_all(const diffvk::NpyArray& a) {
  if (a.dtype[1] == 'i') {
    CHECK(diffvk::npy_as_int64(a).size() == a.numel());
  } else {
    CHECK(diffvk::npy_as_float(a).size() == a.numel());
  }
}

}  // namespace io_test
