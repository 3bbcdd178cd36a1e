// diffvk — the safetensors reader (runtime/io/safetensors.hpp): round trip, the table of malformed files, and
// every truncation and byte mutation of a good file.
#include <doctest/doctest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "file_test_util.hpp"
#include "io/half.hpp"
#include "io/safetensors.hpp"

using namespace io_test;
using diffvk::Error;
using diffvk::Status;

namespace {

// safetensors file: 8-byte little-endian length n, then `rest`, then `data`.
// (Built in a pre-sized buffer: vector::insert after a small allocation trips
// GCC 12's -Wstringop-overread false positive.)
std::vector<uint8_t> st_with_len(uint64_t n, const std::string& rest, const std::vector<uint8_t>& data = {}) {
  std::vector<uint8_t> out(8 + rest.size() + data.size());
  for (int i = 0; i < 8; ++i) out[size_t(i)] = uint8_t(n >> (8 * i));
  if (!rest.empty()) std::memcpy(out.data() + 8, rest.data(), rest.size());
  if (!data.empty()) std::memcpy(out.data() + 8 + rest.size(), data.data(), data.size());
  return out;
}

// safetensors file from a raw header string and data bytes.
std::vector<uint8_t> st_raw(const std::string& header, const std::vector<uint8_t>& data = {}) {
  return st_with_len(header.size(), header, data);
}

struct StTensor {
  std::string name, dtype;
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;
};

std::string shape_json(const std::vector<int64_t>& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? "," : "") + std::to_string(s[i]);
  return out + "]";
}

// Well-formed file: tensors laid out contiguously in the given order.
std::vector<uint8_t> st_make(const std::vector<StTensor>& ts, const std::string& metadata_json = "") {
  std::string h = "{";
  std::vector<uint8_t> data;
  bool first = true;
  if (!metadata_json.empty()) {
    h += "\"__metadata__\":" + metadata_json;
    first = false;
  }
  for (const auto& t : ts) {
    if (!first) h += ",";
    first = false;
    uint64_t b = data.size();
    data.insert(data.end(), t.bytes.begin(), t.bytes.end());
    h += "\"" + t.name + "\":{\"dtype\":\"" + t.dtype + "\",\"shape\":" + shape_json(t.shape) + ",\"data_offsets\":[" +
         std::to_string(b) + "," + std::to_string(data.size()) + "]}";
  }
  h += "}";
  while (h.size() % 8) h += ' ';  // padding, as the reference writer does
  return st_raw(h, data);
}

diffvk::SafetensorsFile st_parse(const std::vector<uint8_t>& bytes) {
  return diffvk::SafetensorsFile::from_bytes(bytes, "test.safetensors");
}

}  // namespace

TEST_CASE("io: safetensors round trip") {
  const std::vector<float> w = {1.0f, -2.5f, 3.25f, 0.0f, -0.0f, 1e-30f};
  std::vector<uint16_t> h, b;
  for (float v : w) {
    h.push_back(diffvk::float_to_half(v));
    b.push_back(diffvk::float_to_bf16(v));
  }
  const std::vector<int64_t> ids = {1, -2, int64_t(1) << 40};
  const std::vector<int32_t> i32 = {7, -8};
  const std::vector<float> scalar = {42.0f};
  auto bytes = st_make({{"z.weight", "F32", {2, 3}, as_bytes(w)},
                        {"a.half", "F16", {6}, as_bytes(h)},
                        {"m.bf16", "BF16", {3, 2}, as_bytes(b)},
                        {"ids", "I64", {3}, as_bytes(ids)},
                        {"small", "I32", {1, 2}, as_bytes(i32)},
                        {"scalar", "F32", {}, as_bytes(scalar)},
                        {"empty", "F16", {0, 4}, {}}},
                       R"({"format":"pt","note":"hello"})");
  TempDir dir;
  put_file(dir.file("m.safetensors"), bytes);

  for (int from_disk = 0; from_disk < 2; ++from_disk) {
    CAPTURE(from_disk);
    auto f = from_disk ? diffvk::SafetensorsFile::open(dir.file("m.safetensors")) : st_parse(bytes);
    const auto& ts = f.tensors();
    REQUIRE(ts.size() == 7);
    for (size_t i = 1; i < ts.size(); ++i) CHECK(ts[i - 1].name < ts[i].name);
    CHECK(f.find("nope") == nullptr);
    REQUIRE(f.find("z.weight") != nullptr);

    const auto& zw = f.require("z.weight", {2, 3});
    CHECK(zw.dtype == diffvk::DType::F32);
    CHECK(f.to_float(zw) == w);
    CHECK(std::memcmp(f.data(zw), w.data(), 24) == 0);

    auto hf = f.to_float(f.require("a.half", {6}));
    auto bf = f.to_float(f.require("m.bf16", {3, 2}));
    for (size_t i = 0; i < w.size(); ++i) {
      CHECK(hf[i] == diffvk::half_to_float(h[i]));
      CHECK(bf[i] == diffvk::bf16_to_float(b[i]));
    }
    CHECK(hf[0] == 1.0f);
    CHECK(hf[1] == -2.5f);
    CHECK(bf[2] == 3.25f);

    const auto& id = f.require("ids", {3});
    CHECK(id.dtype == diffvk::DType::I64);
    CHECK(std::memcmp(f.data(id), ids.data(), 24) == 0);
    CHECK_ERROR(f.to_float(id), Status::invalid_argument, "dtype I64");
    CHECK(f.require("small", {1, 2}).dtype == diffvk::DType::I32);
    CHECK(f.to_float(f.require("scalar", {})) == scalar);
    const auto& em = f.require("empty", {0, 4});
    CHECK(em.numel() == 0);
    CHECK(f.to_float(em).empty());

    CHECK_ERROR(f.require("z.weight", {3, 2}), Status::format_error, "has shape [2, 3], expected [3, 2]");
    CHECK_ERROR(f.require("z.weight", {3, 2}), Status::format_error, "'z.weight'");
    CHECK_ERROR(f.require("missing.weight", {1}), Status::format_error, "'missing.weight' not found");
    CHECK(f.require("z.weight", std::vector<int64_t>{2, 3}).name == "z.weight");

    auto md = f.metadata();
    CHECK(md.size() == 2);
    CHECK(md["format"] == "pt");
    CHECK(md["note"] == "hello");

    // A TensorInfo that does not describe this file is refused, not dereferenced.
    diffvk::TensorInfo forged = zw;
    forged.end = forged.begin + 1000000;
    CHECK_ERROR(f.to_float(forged), Status::invalid_argument, "does not describe");
    CHECK_ERROR(f.data(forged), Status::invalid_argument, "does not describe");
    forged = zw;
    forged.shape = {-1, 3};
    CHECK_ERROR(f.to_float(forged), Status::invalid_argument, "does not describe");
  }

  // Empty header object, no data: valid and empty.
  auto e = st_parse(st_raw("{}"));
  CHECK(e.tensors().empty());
  CHECK(e.metadata().empty());
  CHECK(st_parse(st_raw("{}  \n ")).tensors().empty());
  CHECK_ERROR(diffvk::SafetensorsFile::open(dir.file("absent.safetensors")), Status::io_error, "absent.safetensors");
}

TEST_CASE("io: safetensors rejects malformed files") {
  std::vector<Rejected> cases = {
      {"empty file", {}, "shorter than the 8-byte"},
      {"7 bytes", {1, 0, 0, 0, 0, 0, 0}, "shorter than the 8-byte"},
      {"header length 0", st_with_len(0, "{}"), "header length is 0"},
      {"header past end", st_with_len(100, "{}"), "header length 100 exceeds the 2 bytes"},
      {"header length huge", st_with_len(~uint64_t(0), "{}"), "exceeds the limit of 100000000"},
      {"header over 100MB", st_with_len(100000001, "{}"), "exceeds the limit"},
      {"nul padding", st_raw(std::string("{}\0\0", 4)), "NUL byte at header offset 2"},
      {"nul then junk", st_raw(std::string("{}\0junk", 7)), "NUL byte"},
      {"deep nesting", st_raw("{\"w\":" + std::string(200000, '[')), "nests deeper"},
  };
  // The rest differ only in the header text and the number of (zero) data bytes after it.
  const HeaderCase headers[] = {
      {"invalid utf-8", "{\"\xff\":1}", 0, "not valid UTF-8"},
      {"overlong utf-8", "{\"\xc0\x80\":1}", 0, "not valid UTF-8"},
      {"surrogate utf-8", "{\"\xed\xa0\x80\":1}", 0, "not valid UTF-8"},
      {"truncated utf-8", "{\"\xe2\x82", 0, "not valid UTF-8"},
      {"bad json", "{\"w\":", 0, "header: invalid JSON"},
      {"json with trailing junk", "{} x", 0, "header: invalid JSON"},
      {"number overflow", R"({"w":{"dtype":"F32","shape":[1e400],"data_offsets":[0,0]}})", 0, "header: invalid JSON"},
      {"not an object", "[1,2]", 0, "not a JSON object (it is a array)"},
      {"string header", "\"x\"", 0, "not a JSON object"},
      {"entry not object", R"({"w":[1]})", 0, "entry for tensor 'w' is not a JSON object"},
      {"missing dtype", R"({"w":{"shape":[2],"data_offsets":[0,8]}})", 8, "tensor 'w' is missing 'dtype'"},
      {"missing shape", R"({"w":{"dtype":"F32","data_offsets":[0,8]}})", 8, "is missing 'shape'"},
      {"missing offsets", R"({"w":{"dtype":"F32","shape":[2]}})", 8, "is missing 'data_offsets'"},
      {"extra key", R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8],"junk":1}})", 8, "unexpected key 'junk'"},
      {"dtype not string", R"({"w":{"dtype":4,"shape":[2],"data_offsets":[0,8]}})", 8, "'dtype' is not a string"},
      {"unknown dtype", R"({"w":{"dtype":"F64","shape":[1],"data_offsets":[0,8]}})", 8,
       "unknown dtype 'F64' for tensor 'w'"},
      {"lowercase dtype", R"({"w":{"dtype":"f32","shape":[2],"data_offsets":[0,8]}})", 8, "unknown dtype 'f32'"},
      {"shape not array", R"({"w":{"dtype":"F32","shape":2,"data_offsets":[0,8]}})", 8, "'shape' is not an array"},
      {"negative dim", R"({"w":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", 8, "negative dim -2"},
      {"float dim", R"({"w":{"dtype":"F32","shape":[2.0],"data_offsets":[0,8]}})", 8, "is not an integer"},
      {"bool dim", R"({"w":{"dtype":"F32","shape":[true],"data_offsets":[0,8]}})", 8, "is not an integer"},
      {"string dim", R"({"w":{"dtype":"F32","shape":["2"],"data_offsets":[0,8]}})", 8, "is not an integer"},
      {"dim > int64", R"({"w":{"dtype":"F32","shape":[9223372036854775808],"data_offsets":[0,8]}})", 8, "is too large"},
      {"numel overflow", R"({"w":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,8]}})", 8,
       "overflows 64 bits"},
      {"bytes overflow", R"({"w":{"dtype":"F32","shape":[4611686018427387904],"data_offsets":[0,8]}})", 8,
       "overflows 64 bits"},
      {"offsets not array", R"({"w":{"dtype":"F32","shape":[2],"data_offsets":8}})", 8,
       "'data_offsets' must be an array of two integers"},
      {"offsets one", R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[8]}})", 8, "array of two"},
      {"offsets three", R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8,8]}})", 8, "array of two"},
      {"offset negative", R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[-1,8]}})", 8,
       "data_offsets[0] is not a non-negative integer (it is negative)"},
      {"offset float", R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8.0]}})", 8,
       "data_offsets[1] is not a non-negative integer"},
      {"offset > u64", R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,18446744073709551616]}})", 8,
       "data_offsets[1] is not a non-negative integer"},
      {"begin > end", R"({"w":{"dtype":"F32","shape":[0],"data_offsets":[8,0]}})", 8, "begin 8 is greater than end 0"},
      {"end beyond data", R"({"w":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})", 8,
       "end 16 is beyond the data section (8 bytes)"},
      {"huge end", R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,18446744073709551615]}})", 8,
       "beyond the data section"},
      {"size mismatch", R"({"w":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", 8, "needs 12 bytes"},
      {"overlap",
       R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
       12, "overlap"},
      {"same range twice",
       R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})",
       8, "overlap"},
      {"empty inside other",
       R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[0],"data_offsets":[4,4]}})",
       8, "overlap"},
      {"hole",
       R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[12,20]}})",
       20, "hole in the data section: bytes [8, 12)"},
      {"hole at start", R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", 8, "hole"},
      {"trailing bytes", R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", 16, "8 trailing bytes"},
      {"data but no tensors", "{}", 8, "trailing bytes"},
      {"duplicate names",
       R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
       8, "duplicate tensor name 'a'"},
      {"duplicate key in entry", R"({"w":{"dtype":"F32","dtype":"F16","shape":[2],"data_offsets":[0,8]}})", 8,
       "duplicate key 'dtype' in header entry 'w'"},
      {"duplicate metadata", R"({"__metadata__":{"k":"a","k":"b"}})", 0, "duplicate key 'k'"},
      {"metadata not object", R"({"__metadata__":"x"})", 0, "__metadata__ is not a JSON object"},
      {"metadata non-string", R"({"__metadata__":{"k":1}})", 0, "value for key 'k' is not a string"},
      {"metadata nested", R"({"__metadata__":{"k":{"x":"y"}}})", 0, "value for key 'k' is not a string"},
      {"nested shape", R"({"w":{"dtype":"F32","shape":[[2]],"data_offsets":[0,8]}})", 8, "nests deeper"},
  };
  for (const auto& c : headers) cases.push_back({c.label, st_raw(c.header, zeros(c.data_bytes)), c.phrase});
  // Control-character names are escaped in messages.
  cases.push_back({"control character in a name", st_raw(R"({"a\u0001":[1]})"), "'a\\x01'"});
  check_rejected(cases, st_parse, "test.safetensors: ");
}

TEST_CASE("io: safetensors survives every truncation and byte mutation") {
  const std::vector<float> w = {1, 2, 3, 4};
  const std::vector<uint16_t> h = {1, 2};
  auto good = st_make({{"a", "F32", {2, 2}, as_bytes(w)}, {"b", "F16", {2}, as_bytes(h)}}, R"({"k":"v"})");
  REQUIRE(st_parse(good).tensors().size() == 2);
  size_t ok = 0, rejected = 0;
  for_each_corruption(good, {0x00, 0x01, 0x22, 0x2c, 0x30, 0x39, 0x5b, 0x5d, 0x7b, 0x7d, 0x80, 0xff},
                      [&](const std::vector<uint8_t>& bytes) {
                        try {
                          read_all(st_parse(bytes));
                          ++ok;
                        } catch (const Error& e) {
                          REQUIRE(e.status() == Status::format_error);
                          ++rejected;
                        }
                      });
  CHECK(rejected > 0);
  CHECK(ok > 0);
}
