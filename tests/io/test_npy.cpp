// diffvk — the .npy reader/writer (include/diffvk/npy.hpp): round trip, header variants and dtypes, the table
// of malformed files, the header and dimension limits, and every truncation and byte mutation of a good file.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "diffvk/npy.hpp"
#include "file_test_util.hpp"
#include "io/half.hpp"

using namespace io_test;
using diffvk::Error;
using diffvk::Status;

namespace {

std::vector<uint8_t> npy_raw(const std::string& header, const std::vector<uint8_t>& data, int major = 1,
                             int minor = 0) {
  const size_t prefix = major >= 2 ? 12 : 10;
  std::vector<uint8_t> out(prefix + header.size() + data.size());
  const uint8_t magic[8] = {0x93, 'N', 'U', 'M', 'P', 'Y', uint8_t(major), uint8_t(minor)};
  std::memcpy(out.data(), magic, 8);
  const uint32_t n = uint32_t(header.size());
  for (size_t i = 8; i < prefix; ++i) out[i] = uint8_t(n >> (8 * (i - 8)));
  if (!header.empty()) std::memcpy(out.data() + prefix, header.data(), header.size());
  if (!data.empty()) std::memcpy(out.data() + prefix + header.size(), data.data(), data.size());
  return out;
}

diffvk::NpyArray npy_parse(const std::vector<uint8_t>& b) { return diffvk::parse_npy(b, "test.npy"); }

}  // namespace

TEST_CASE("io: npy write/read round trip") {
  TempDir dir;
  std::vector<float> v(2 * 3 * 5);
  for (size_t i = 0; i < v.size(); ++i) v[i] = float(i) * 0.5f - 3.0f;
  const std::string p = dir.file("a.npy");
  diffvk::write_npy_f32(p, {2, 3, 5}, v.data());
  auto raw = get_file(p);
  REQUIRE(raw.size() > 10);
  const size_t hlen = size_t(raw[8]) | (size_t(raw[9]) << 8);
  CHECK((10 + hlen) % 64 == 0);
  CHECK(raw[10 + hlen - 1] == '\n');
  CHECK(contains(std::string(raw.begin() + 10, raw.begin() + long(10 + hlen)),
                 "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3, 5), }"));
  auto a = diffvk::read_npy(p);
  CHECK(a.dtype == "<f4");
  CHECK(a.shape == std::vector<int64_t>{2, 3, 5});
  CHECK(a.numel() == 30);
  CHECK(diffvk::npy_as_float(a) == v);

  const float s = 7.5f;
  diffvk::write_npy_f32(p, {}, &s);
  a = diffvk::read_npy(p);
  CHECK(a.shape.empty());
  CHECK(diffvk::npy_as_float(a) == std::vector<float>{7.5f});
  auto text = get_file(p);
  CHECK(contains(std::string(text.begin(), text.end()), "'shape': (), }"));

  diffvk::write_npy_f32(p, {4}, v.data());
  text = get_file(p);
  CHECK(contains(std::string(text.begin(), text.end()), "'shape': (4,), }"));
  CHECK(diffvk::read_npy(p).shape == std::vector<int64_t>{4});

  diffvk::write_npy_f32(p, {0, 3}, nullptr);
  a = diffvk::read_npy(p);
  CHECK(a.shape == std::vector<int64_t>{0, 3});
  CHECK(diffvk::npy_as_float(a).empty());

  CHECK_ERROR(diffvk::write_npy_f32(p, {-1}, v.data()), Status::invalid_argument, "shape (-1,)");
  CHECK_ERROR(diffvk::write_npy_f32(p, {2}, nullptr), Status::invalid_argument, "null data");
  CHECK_ERROR(diffvk::write_npy_f32(dir.file("no/such/dir.npy"), {2}, v.data()), Status::io_error, "no/such/dir.npy");
  CHECK_ERROR(diffvk::read_npy(dir.file("absent.npy")), Status::io_error, "absent.npy");
  diffvk::write_npy_f32(p, {30}, v.data());
  CHECK_ERROR(diffvk::read_npy(p, 100), Status::format_error, "limit");
  for (const auto& name : dir.entries()) CHECK_MESSAGE(!contains(name, ".tmp."), name);
}

TEST_CASE("io: npy header variants and dtypes") {
  const std::vector<float> f4 = {1.5f, -2.0f};
  const std::vector<uint8_t> b4 = as_bytes(f4);
  for (const char* hdr : {
           "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }",
           "{'descr':'<f4','fortran_order':False,'shape':(2,)}",
           "{ 'shape' : ( 2 , ) , 'fortran_order' : False , 'descr' : '<f4' }   \n",
           "{\"descr\": \"<f4\", \"fortran_order\": False, \"shape\": (2L,)}\n",
           "{'descr': '<f4', 'fortran_order': False, 'shape': (1, 2), }",
           "{'descr': '<f4', 'fortran_order': False, 'shape': (1, 2,   ), }\n",
       }) {
    CAPTURE(hdr);
    for (int major : {1, 2, 3}) {
      auto a = npy_parse(npy_raw(hdr, b4, major));
      CHECK(diffvk::npy_as_float(a) == f4);
      CHECK(a.numel() == 2);
    }
  }
  auto sc =
      npy_parse(npy_raw("{'descr': '<f4', 'fortran_order': False, 'shape': ( ), }", as_bytes(std::vector<float>{3})));
  CHECK(sc.shape.empty());
  CHECK(diffvk::npy_as_float(sc) == std::vector<float>{3.0f});

  const std::vector<double> f8 = {0.1, -1e300, 2.5};
  auto a8 = npy_parse(npy_raw("{'descr': '<f8', 'fortran_order': False, 'shape': (3,), }", as_bytes(f8)));
  auto c8 = diffvk::npy_as_float(a8);
  CHECK(c8[0] == 0.1f);
  CHECK(std::isinf(c8[1]));
  CHECK(c8[2] == 2.5f);

  const std::vector<uint16_t> f2 = {0x3c00, 0xc000, 0x0001};
  auto c2 = diffvk::npy_as_float(
      npy_parse(npy_raw("{'descr': '<f2', 'fortran_order': False, 'shape': (3,), }", as_bytes(f2))));
  CHECK(c2 == std::vector<float>{1.0f, -2.0f, std::ldexp(1.0f, -24)});

  const std::vector<int64_t> i8 = {-1, int64_t(1) << 50};
  auto a_i8 = npy_parse(npy_raw("{'descr': '<i8', 'fortran_order': False, 'shape': (2,), }", as_bytes(i8)));
  CHECK(diffvk::npy_as_int64(a_i8) == i8);
  CHECK_ERROR(diffvk::npy_as_float(a_i8), Status::invalid_argument, "npy_as_int64");

  const std::vector<int32_t> i4 = {-7, 123456};
  auto a_i4 = npy_parse(npy_raw("{'descr': '<i4', 'fortran_order': False, 'shape': (1,2), }", as_bytes(i4)));
  CHECK(diffvk::npy_as_int64(a_i4) == std::vector<int64_t>{-7, 123456});
  CHECK_ERROR(diffvk::npy_as_int64(npy_parse(npy_raw("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }", b4))),
              Status::invalid_argument, "npy_as_float");

  // A hand-made NpyArray whose data does not match its shape is refused.
  diffvk::NpyArray bad{"<f4", {3}, b4};
  CHECK_ERROR(diffvk::npy_as_float(bad), Status::invalid_argument, "do not match shape (3,)");
  bad = {"<u2", {1}, {0, 0}};
  CHECK_ERROR(diffvk::npy_as_float(bad), Status::invalid_argument, "unsupported dtype '<u2'");
  CHECK(diffvk::npy_itemsize("<f2") == 2);
  CHECK_ERROR(diffvk::npy_itemsize(">f4"), Status::invalid_argument, ">f4");
}

TEST_CASE("io: npy rejects malformed files") {
  auto h = [](const std::string& descr, const std::string& fortran, const std::string& shape) {
    return "{'descr': '" + descr + "', 'fortran_order': " + fortran + ", 'shape': " + shape + ", }\n";
  };
  const std::string good = h("<f4", "False", "(2,)");
  std::vector<uint8_t> short_v2 = {0x93, 'N', 'U', 'M', 'P', 'Y', 2, 0, 10, 0, 0};
  std::vector<uint8_t> bad_magic = npy_raw(good, zeros(8));
  bad_magic[1] = 'X';
  std::vector<uint8_t> huge_v2 = npy_raw(good, zeros(8), 2);
  huge_v2[11] = 0xff;  // header length ~4 GB
  std::vector<Rejected> cases = {
      {"empty", {}, "too short"},
      {"short", {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, 0}, "too short"},
      {"short v2", short_v2, "too short for a version 2.0 header"},
      {"bad magic", bad_magic, "bad magic"},
      {"version 4", npy_raw(good, zeros(8), 4), "unsupported format version 4.0"},
      {"version 1.1", npy_raw(good, zeros(8), 1, 1), "unsupported format version 1.1"},
      {"header past end",
       {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, 200, 0, '{', '}'},
       "header length 200 exceeds the 2 bytes"},
      {"huge v2 header", huge_v2, "exceeds the"},
  };
  // The rest are version 1.0 files that differ only in the header text and the number of data bytes.
  const HeaderCase headers[] = {
      {"fortran", h("<f4", "True", "(2,)"), 8, "fortran_order True is not supported"},
      {"big endian", h(">f4", "False", "(2,)"), 8, "unsupported dtype '>f4' (big-endian)"},
      {"unknown dtype", h("<u2", "False", "(4,)"), 8, "unsupported dtype '<u2'"},
      {"empty dtype", h("", "False", "(4,)"), 8, "unsupported dtype ''"},
      {"structured dtype", "{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (2,), }", 8,
       "structured dtypes are not supported"},
      {"fortran not bool", h("<f4", "0", "(2,)"), 8, "must be True or False"},
      {"missing descr", "{'fortran_order': False, 'shape': (2,), }", 8, "no 'descr'"},
      {"missing fortran", "{'descr': '<f4', 'shape': (2,), }", 8, "no 'fortran_order'"},
      {"missing shape", "{'descr': '<f4', 'fortran_order': False}", 8, "no 'shape'"},
      {"extra key", "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'x': 1}", 8, "unexpected key 'x'"},
      {"duplicate key", "{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (2,)}", 8,
       "duplicate key 'descr'"},
      {"shape list", h("<f4", "False", "[2]"), 8, "'shape' must be a tuple"},
      {"shape (2)", h("<f4", "False", "(2)"), 8, "not a tuple"},
      {"shape no comma", h("<f4", "False", "(1 2)"), 8, "expected ',' or ')'"},
      {"shape double comma", h("<f4", "False", "(2,,)"), 8, "expected a non-negative integer"},
      {"shape (,)", h("<f4", "False", "(,)"), 8, "expected a non-negative integer"},
      {"negative dim", h("<f4", "False", "(-2,)"), 8, "negative dimension"},
      {"float dim", h("<f4", "False", "(2.0,)"), 8, "expected ',' or ')'"},
      {"dim too large", h("<f4", "False", "(99999999999999999999,)"), 8, "too large"},
      {"numel overflow", h("<f4", "False", "(4294967296, 4294967296)"), 8, "overflows"},
      {"bytes overflow", h("<f8", "False", "(4611686018427387904,)"), 8, "overflows"},
      {"unterminated shape", "{'descr': '<f4', 'fortran_order': False, 'shape': (2,", 8, "end of header"},
      {"unterminated string", "{'descr: '<f4'}", 8, "expected ':'"},
      {"unterminated string 2", "{'descr", 8, "unterminated string"},
      {"escape", "{'de\\scr': '<f4'}", 8, "escape sequences"},
      {"not a dict", "('<f4', False, (2,))", 8, "must start with '{'"},
      {"junk after dict", h("<f4", "False", "(2,)") + "x", 8, "unexpected data after the header dict"},
      {"missing comma between keys", "{'descr': '<f4' 'fortran_order': False, 'shape': (2,)}", 8,
       "expected ',' or '}'"},
      {"nul in header", std::string("{'descr': '<f4', 'fortran_order': False, 'shape': (2,)}") + '\0', 8,
       "unexpected data"},
      {"data short", h("<f4", "False", "(3,)"), 8, "needs 12 data bytes, file has 8 (truncated)"},
      {"data long", h("<f4", "False", "(1,)"), 8, "needs 4 data bytes, file has 8 (trailing bytes)"},
      {"scalar without data", h("<f4", "False", "()"), 0, "needs 4 data bytes"},
  };
  for (const auto& c : headers) cases.push_back({c.label, npy_raw(c.header, zeros(c.data_bytes)), c.phrase});
  check_rejected(cases, npy_parse, "test.npy: ");
}

TEST_CASE("io: npy header length and dimension count have limits") {
  auto h = [](const std::string& shape, size_t pad) {
    return "{'descr': '<f4', 'fortran_order': False, 'shape': " + shape + ", }" + std::string(pad, ' ') + "\n";
  };
  std::string dims64 = "(", dims65 = "(";
  for (size_t i = 0; i < diffvk::kNpyMaxDims; ++i) dims64 += "1,";
  dims64 += ")";
  dims65 = dims64.substr(0, dims64.size() - 1) + "1,)";
  CHECK(npy_parse(npy_raw(h(dims64, 0), zeros(4))).shape.size() == diffvk::kNpyMaxDims);
  // A header of exactly the limit parses; one byte more is refused before the dict is read.
  const std::string at_limit = h("(2,)", size_t(diffvk::kNpyMaxHeaderBytes) - h("(2,)", 0).size());
  REQUIRE(at_limit.size() == diffvk::kNpyMaxHeaderBytes);
  CHECK(npy_parse(npy_raw(at_limit, zeros(8), 2)).shape == std::vector<int64_t>{2});
  std::vector<Rejected> cases = {
      {"65 dims", npy_raw(h(dims65, 0), zeros(4)), "'shape' has more than 64 dimensions"},
      {"header over the limit", npy_raw(at_limit + " ", zeros(8), 2),
       "header length 1048577 exceeds the limit of 1048576 bytes"},
  };
  check_rejected(cases, npy_parse, "test.npy: ");
}

TEST_CASE("io: npy survives every truncation and byte mutation") {
  const std::vector<float> v = {1, 2, 3};
  auto good = diffvk::encode_npy_f32({3}, v.data());
  REQUIRE(diffvk::npy_as_float(npy_parse(good)) == v);
  size_t rejected = 0;
  for_each_corruption(good, {0x00, 0x20, 0x27, 0x28, 0x29, 0x2c, 0x31, 0x38, 0x3c, 0x3e, 0x7d, 0xff},
                      [&](const std::vector<uint8_t>& bytes) {
                        try {
                          read_all(npy_parse(bytes));
                        } catch (const Error& e) {
                          REQUIRE(e.status() == Status::format_error);
                          ++rejected;
                        }
                      });
  CHECK(rejected > 0);
}
