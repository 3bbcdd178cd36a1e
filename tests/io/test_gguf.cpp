// diffvk — the GGUF reader and writer (runtime/io/gguf.hpp): round trip, the table of hostile files (the
// rules: every count, length, offset and size checked, a clear format_error naming the problem), every
// truncation and byte mutation of a good file, and diffvk::quantize_model's output read back.
#include <doctest/doctest.h>

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "diffvk/gguf.hpp"
#include "io/gguf.hpp"
#include "io/quant.hpp"
#include "io/safetensors.hpp"
#include "model/checkpoint.hpp"

using namespace diffvk;

namespace {

// A GGUF file written byte by byte, for files the writer refuses to make.
struct Bytes {
  std::vector<uint8_t> b;
  template <class T>
  Bytes& put(T v) {
    const size_t at = b.size();
    b.resize(at + sizeof(T));
    std::memcpy(b.data() + at, &v, sizeof(T));
    return *this;
  }
  Bytes& u32(uint32_t v) { return put(v); }
  Bytes& u64(uint64_t v) { return put(v); }
  Bytes& str(const std::string& s) {
    u64(s.size());
    b.insert(b.end(), s.begin(), s.end());
    return *this;
  }
  Bytes& header(uint64_t tensors, uint64_t kvs, uint32_t version = 3) {
    b.insert(b.end(), {'G', 'G', 'U', 'F'});
    return u32(version).u64(tensors).u64(kvs);
  }
  Bytes& kv_u32(const std::string& k, uint32_t v) { return str(k).u32(4).u32(v); }
  // One tensor info: name, dims, ggml type id, offset.
  Bytes& tensor(const std::string& name, std::vector<uint64_t> dims, uint32_t type, uint64_t offset) {
    str(name).u32(uint32_t(dims.size()));
    for (uint64_t d : dims) u64(d);
    return u32(type).u64(offset);
  }
  Bytes& pad(size_t align = 32) {
    b.resize((b.size() + align - 1) / align * align, 0);
    return *this;
  }
  Bytes& zeros(size_t n) {
    b.resize(b.size() + n, 0);
    return *this;
  }
};

std::string parse_error(const std::vector<uint8_t>& bytes) {
  try {
    GgufFile::from_bytes(bytes, "t.gguf");
  } catch (const Error& e) {
    if (e.status() != Status::format_error) return std::string("wrong status: ") + e.what();
    return e.what();
  }
  return "(accepted)";
}

std::vector<uint8_t> good_file() {
  GgufWriter w;
  w.add_string("general.architecture", "diffllama");
  w.add_u32("a.u32", 7);
  w.add_i32("a.i32", -5);
  w.add_u64("a.u64", 1ull << 40);
  w.add_f32("a.f32", 0.25f);
  w.add_bool("a.bool", true);
  w.add_string_array("a.strings", {"x", "", "yz"});
  w.add_f32_array("a.floats", {1.5f, -2.0f, 1e30f, std::nanf("")});
  w.add_i32_array("a.ints", {3, -4, 5});
  std::vector<uint8_t> f32(4 * 3 * 4);
  for (size_t i = 0; i < f32.size(); ++i) f32[i] = uint8_t(i);
  w.add_tensor("m.f32", {4, 3}, GgmlType::f32, f32);
  w.add_tensor("m.q8", {64, 2}, GgmlType::q8_0, std::vector<uint8_t>(2 * 2 * 34, 1));
  w.add_tensor("m.q4", {32}, GgmlType::q4_0, std::vector<uint8_t>(18, 2));
  w.add_tensor("m.f16", {5}, GgmlType::f16, std::vector<uint8_t>(10, 3));
  return w.bytes();
}

}  // namespace

TEST_CASE("io: gguf round trip") {
  const GgufFile f = GgufFile::from_bytes(good_file(), "good.gguf");
  CHECK(f.version() == 3);
  CHECK(f.alignment() == 32);
  CHECK(f.metadata().size() == 10);  // general.alignment + 9
  CHECK(f.require_value("general.architecture").as_string("") == "diffllama");
  CHECK(f.require_value("a.u32").as_u64("") == 7);
  CHECK(f.require_value("a.i32").as_i64("") == -5);
  CHECK_THROWS_AS(f.require_value("a.i32").as_u64("a.i32"), Error);
  CHECK(f.require_value("a.u64").as_u64("") == (1ull << 40));
  CHECK(f.require_value("a.f32").as_f64("") == 0.25);
  CHECK(f.require_value("a.bool").as_bool(""));
  const GgufValue& s = f.require_value("a.strings");
  REQUIRE(s.strings.size() == 3);
  CHECK(s.strings[2] == "yz");
  CHECK(f.require_value("a.floats").number_at(1) == -2.0);
  CHECK(f.require_value("a.floats").integer_at(2) == INT64_MAX);  // saturated, no undefined conversion
  CHECK(f.require_value("a.floats").integer_at(3) == 0);
  CHECK(f.require_value("a.ints").integer_at(1) == -4);
  CHECK(f.find_value("nope") == nullptr);
  REQUIRE(f.tensors().size() == 4);
  const GgufTensorInfo* t = f.find_tensor("m.f32");
  REQUIRE(t);
  CHECK(t->shape() == std::vector<int64_t>{3, 4});
  CHECK(t->nbytes == 48);
  CHECK(f.data(*t)[5] == 5);
  for (const auto& ti : f.tensors()) CHECK(ti.offset % 32 == 0);
  CHECK(f.find_tensor("m.q8")->nbytes == 136);
  CHECK(f.find_tensor("m.q4")->nbytes == 18);

  GgufWriter w64(64);
  w64.add_tensor("a", {3}, GgmlType::f32, std::vector<uint8_t>(12, 9));
  w64.add_tensor("b", {3}, GgmlType::f32, std::vector<uint8_t>(12, 8));
  const GgufFile g = GgufFile::from_bytes(w64.bytes(), "a64.gguf");
  CHECK(g.alignment() == 64);
  CHECK(g.data_offset() % 64 == 0);
  CHECK(g.find_tensor("b")->offset == 64);
  CHECK(g.data(*g.find_tensor("b"))[0] == 8);

  CHECK_THROWS_AS(GgufWriter(48), Error);
  GgufWriter bad;
  CHECK_THROWS_AS(bad.add_u32("general.alignment", 1), Error);  // duplicate key
  CHECK_THROWS_AS(bad.add_tensor("x", {33}, GgmlType::q8_0, {}), Error);
  CHECK_THROWS_AS(bad.add_tensor("x", {2}, GgmlType::f32, std::vector<uint8_t>(7)), Error);
  CHECK_THROWS_AS(bad.add_tensor(std::string(65, 'n'), {1}, GgmlType::f32, std::vector<uint8_t>(4)), Error);
}

TEST_CASE("io: gguf rejects hostile files") {
  struct Case {
    const char* what;
    std::vector<uint8_t> bytes;
    const char* expect;
  };
  const uint64_t huge = 1ull << 62;
  auto one_tensor = [](std::vector<uint64_t> dims, uint32_t type, uint64_t offset, size_t data) {
    Bytes b;
    b.header(1, 0).tensor("t", std::move(dims), type, offset).pad().zeros(data);
    return b.b;
  };
  std::vector<Case> cases = {
      {"empty file", {}, "shorter than the 24-byte GGUF header"},
      {"truncated header",
       [] {
         auto b = Bytes().header(0, 0).b;
         b.resize(10);
         return b;
       }(),
       "shorter than the 24-byte"},
      {"bad magic",
       [] {
         auto b = Bytes().header(0, 0).b;
         b[0] = 'X';
         return b;
       }(),
       "not a GGUF file"},
      {"version 4", Bytes().header(0, 0, 4).b, "GGUF version 4 is not supported"},
      {"big-endian", Bytes().header(0, 0, 0x03000000u).b, "big-endian"},
      {"huge tensor count", Bytes().header(huge, 0).b, "tensor count 4611686018427387904 exceeds the limit"},
      {"huge kv count", Bytes().header(0, huge).b, "key/value count 4611686018427387904 exceeds the limit"},
      {"counts past the file", Bytes().header(1000, 1000).b, "need more than the 0 bytes left"},
      {"key length past EOF", Bytes().header(0, 1).u64(1000).zeros(8).b, "metadata key/value 0: key at offset"},
      {"key length huge", Bytes().header(0, 1).u64(huge).zeros(8).b, "over the limit of 65535"},
      {"empty key", Bytes().header(0, 1).str("").u32(4).u32(0).b, "empty key"},
      {"string value past EOF", Bytes().header(0, 1).str("k").u32(8).u64(1u << 20).zeros(4).b,
       "metadata key 'k': string at offset"},
      {"string value too long", Bytes().header(0, 1).str("k").u32(8).u64(huge).b, "over the limit of 67108864"},
      {"unknown value type", Bytes().header(0, 1).str("k").u32(13).u32(0).b, "unknown value type 13"},
      {"unknown array element type", Bytes().header(0, 1).str("k").u32(9).u32(99).u64(0).b,
       "unknown array element type 99"},
      {"array of arrays", Bytes().header(0, 1).str("k").u32(9).u32(9).u64(1).u32(4).u64(0).b,
       "arrays of arrays are not supported"},
      {"huge array", Bytes().header(0, 1).str("k").u32(9).u32(0).u64(huge).b,
       "array length 4611686018427387904 exceeds the limit"},
      {"array past EOF", Bytes().header(0, 1).str("k").u32(9).u32(4).u64(1u << 20).zeros(16).b,
       "array of 1048576 uint32 needs more than"},
      {"string array past EOF", Bytes().header(0, 1).str("k").u32(9).u32(8).u64(1u << 20).zeros(16).b,
       "array of 1048576 strings needs more than"},
      {"string in array past EOF", Bytes().header(0, 1).str("k").u32(9).u32(8).u64(2).str("a").u64(100).b,
       "metadata key 'k': string 1 at offset"},
      {"truncated scalar", Bytes().header(0, 1).str("k").u32(10).u32(1).b, "uint64 value at offset"},
      {"bad bool", Bytes().header(0, 1).str("k").u32(7).put<uint8_t>(2).b, "bool value 2 is not 0 or 1"},
      {"duplicate key", Bytes().header(0, 2).kv_u32("k", 1).kv_u32("k", 2).b, "duplicate metadata key 'k'"},
      {"alignment not uint32", Bytes().header(0, 1).str("general.alignment").u32(10).u64(32).b,
       "general.alignment must be a uint32"},
      {"alignment not a power of two", Bytes().header(0, 1).kv_u32("general.alignment", 48).b,
       "general.alignment 48 is not a power of two"},
      {"alignment 0", Bytes().header(0, 1).kv_u32("general.alignment", 0).b,
       "general.alignment 0 is not a power of two"},
      {"n_dims 5", one_tensor({1, 1, 1, 1, 1}, 0, 0, 32), "tensor 't': n_dims 5 is outside 1..4"},
      {"n_dims 0", one_tensor({}, 0, 0, 32), "tensor 't': n_dims 0 is outside 1..4"},
      {"n_dims huge", Bytes().header(1, 0).str("t").u32(0xffffffffu).zeros(64).b, "n_dims 4294967295"},
      {"zero dim", one_tensor({4, 0}, 0, 0, 32), "tensor 't': dim 1 is 0"},
      {"overflowing product", one_tensor({1ull << 32, 1ull << 32}, 0, 0, 32), "element count overflows"},
      {"overflowing bytes", one_tensor({1ull << 62}, 0, 0, 32), "tensor 't': byte size overflows"},
      {"unknown type", one_tensor({32}, 3, 0, 32), "ggml type 3 is not supported"},
      {"unknown type huge", one_tensor({32}, 0xffffffffu, 0, 32), "ggml type 4294967295 is not supported"},
      {"q8_0 width", one_tensor({33}, 8, 0, 64), "dim 0 (33) is not a multiple of Q8_0's block of 32"},
      {"misaligned offset", one_tensor({4}, 0, 4, 64), "offset 4 is not a multiple of the alignment 32"},
      {"out of bounds", one_tensor({4}, 0, 32, 32), "lies beyond the data section (32 bytes"},
      {"offset huge", one_tensor({4}, 0, ~uint64_t(31), 32), "lies beyond the data section"},
      {"truncated data", one_tensor({16}, 0, 0, 32), "lies beyond the data section (32 bytes"},
      {"no data section", Bytes().header(1, 0).tensor("t", {4}, 0, 0).b, "padding runs past the end of the file"},
      {"overlap", Bytes().header(2, 0).tensor("a", {16}, 0, 0).tensor("b", {4}, 0, 32).pad().zeros(64).b,
       "tensors 'a' [0, 64) and 'b' [32, 48) overlap"},
      {"duplicate tensor", Bytes().header(2, 0).tensor("a", {4}, 0, 0).tensor("a", {4}, 0, 32).pad().zeros(64).b,
       "duplicate tensor 'a'"},
      {"empty tensor name", Bytes().header(1, 0).tensor("", {4}, 0, 0).pad().zeros(32).b, "empty tensor name"},
      {"long tensor name", Bytes().header(1, 0).tensor(std::string(65, 'n'), {4}, 0, 0).pad().zeros(32).b,
       "over the limit of 64"},
      {"truncated tensor info",
       [] {
         auto b = Bytes().header(1, 0).tensor("t", {4, 4}, 0, 0).b;
         b.resize(b.size() - 6);
         return b;
       }(),
       "tensor 't': data offset at offset 57 needs 8 bytes but only 2 remain"},
  };
  for (const auto& c : cases) {
    const std::string what = c.what;
    CAPTURE(what);
    const std::string e = parse_error(c.bytes);
    CAPTURE(e);
    CHECK(e.find(c.expect) != std::string::npos);
    CHECK(e.rfind("t.gguf: ", 0) == 0);
  }
}

TEST_CASE("io: gguf survives every truncation and byte mutation") {
  const std::vector<uint8_t> good = good_file();
  for (size_t n = 0; n < good.size(); ++n) {
    const std::vector<uint8_t> cut(good.begin(), good.begin() + long(n));
    try {
      const GgufFile f = GgufFile::from_bytes(cut, "cut.gguf");
      // Only the tail padding or nothing data-bearing may be cut and still parse.
      for (const auto& t : f.tensors()) CHECK(t.offset + t.nbytes <= f.data_size());
    } catch (const Error& e) {
      CHECK(e.status() == Status::format_error);
    }
  }
  const size_t header_end = GgufFile::from_bytes(good, "g").data_offset();
  for (size_t i = 0; i < header_end; ++i) {
    for (uint8_t x : {uint8_t(0x01), uint8_t(0x80), uint8_t(0xff)}) {
      std::vector<uint8_t> m = good;
      m[i] ^= x;
      try {
        const GgufFile f = GgufFile::from_bytes(m, "m.gguf");
        for (const auto& t : f.tensors()) CHECK(t.offset + t.nbytes <= f.data_size());
      } catch (const Error& e) {
        CHECK(e.status() == Status::format_error);
      }
    }
  }
}

TEST_CASE("io: gguf from diffvk quantize_model reads back") {
  const std::string model = std::string(DIFFVK_TEST_DATA_DIR) + "/model_tiny";
  const SafetensorsFile st = SafetensorsFile::open(model + "/model.safetensors");
  const std::vector<float> q_src = st.to_float(*st.find("layers.0.attn.q_proj.weight"));
  const std::vector<float> norm_src = st.to_float(*st.find("layers.1.ffn_norm.weight"));
  const std::vector<float> lam_src = st.to_float(*st.find("layers.0.attn.lambda_k2"));
  for (QuantKind k : {QuantKind::f16, QuantKind::q8_0, QuantKind::q4_0}) {
    CAPTURE(quant_kind_name(k));
    const std::string path = (std::filesystem::temp_directory_path() /
                              ("diffvk_test_gguf_" + std::to_string(::getpid()) + "_" + quant_kind_name(k) + ".gguf"))
                                 .string();
    const QuantizeReport r = quantize_model(model, path, k);
    CHECK(r.tensors == 31);
    const GgufFile f = GgufFile::open(path);
    CHECK(f.require_value("general.architecture").as_string("") == "diffllama");
    CHECK(f.require_value("diffllama.block_count").as_u64("") == 2);
    CHECK(f.require_value("diffllama.attention.head_count").as_u64("") == 4);
    const GgufTensorInfo* q = f.find_tensor("blk.0.attn_q.weight");
    REQUIRE(q);
    CHECK(q->shape() == std::vector<int64_t>{64, 64});
    const QuantType qt = k == QuantKind::f16    ? QuantType::f16
                         : k == QuantKind::q8_0 ? QuantType::q8_0
                                                : QuantType::q4_0;
    std::vector<float> row(64);
    double worst = 0;
    for (int r0 = 0; r0 < 64; ++r0) {
      dequantize_row(qt, f.data(*q) + size_t(r0) * quant_row_bytes(qt, 64), 64, row.data());
      float amax = 0;
      for (int c = 0; c < 64; ++c) amax = std::max(amax, std::fabs(q_src[size_t(r0 * 64 + c)]));
      for (int c = 0; c < 64; ++c)
        worst = std::max(worst, double(std::fabs(row[size_t(c)] - q_src[size_t(r0 * 64 + c)])) / (amax + 1e-30));
    }
    CHECK(worst <= (k == QuantKind::q4_0 ? 1.0 / 8 : k == QuantKind::q8_0 ? 1.0 / 127 : 1.0 / 1024));
    // Norms and λ stay F32, bit for bit.
    const GgufTensorInfo* n = f.find_tensor("blk.1.ffn_norm.weight");
    REQUIRE(n);
    CHECK(n->type == GgmlType::f32);
    CHECK(std::memcmp(f.data(*n), norm_src.data(), norm_src.size() * 4) == 0);
    const GgufTensorInfo* lam = f.find_tensor("blk.0.attn_lambda_k2");
    REQUIRE(lam);
    CHECK(std::memcmp(f.data(*lam), lam_src.data(), lam_src.size() * 4) == 0);
    const GgufTensorInfo* head = f.find_tensor("output.weight");
    REQUIRE(head);
    CHECK(head->type == (k == QuantKind::f16 ? GgmlType::f16 : GgmlType::q8_0));
    std::remove(path.c_str());
  }
}

TEST_CASE("io: gguf parses many entries in linear time") {
  // The "many entries" shape at the limits' scale: 2^18 tensors, 2^16 keys, 2^20 strings.
  const uint64_t nt = 1u << 18;
  Bytes b;
  b.header(nt, 1u << 16);
  for (uint32_t i = 0; i + 1 < (1u << 16); ++i) b.kv_u32("k" + std::to_string(i), i);
  b.str("s").u32(9).u32(8).u64(1u << 20);
  for (uint32_t i = 0; i < (1u << 20); ++i) b.str("x");
  for (uint64_t i = 0; i < nt; ++i) b.tensor("t" + std::to_string(nt - 1 - i), {8}, 0, (nt - 1 - i) * 32);
  b.pad().zeros(size_t(nt * 32));
  const auto t0 = std::chrono::steady_clock::now();
  const GgufFile f = GgufFile::from_bytes(b.b, "many.gguf");
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  CHECK(f.tensors().size() == nt);
  CHECK(f.require_value("s").strings.size() == (1u << 20));
  CHECK(s < 5.0);
  // One tensor more than the limit is refused before anything is allocated.
  CHECK(parse_error(Bytes().header(kGgufMaxTensors + 1, 0).b).find("exceeds the limit of 1048576") !=
        std::string::npos);
}

TEST_CASE("io: gguf checkpoints refuse foreign or incomplete files") {
  const std::string base =
      (std::filesystem::temp_directory_path() / ("diffvk_test_gguf_ck_" + std::to_string(::getpid()))).string();
  auto error_of = [&](const GgufWriter& w) -> std::string {
    const std::string p = base + ".gguf";
    w.write(p);
    std::string e = "(accepted)";
    try {
      (void)open_gguf_checkpoint(p);
    } catch (const Error& x) {
      e = x.what();
    }
    std::remove(p.c_str());
    return e;
  };
  GgufWriter llama;
  llama.add_string("general.architecture", "llama");
  CHECK(error_of(llama).find("general.architecture is 'llama', not 'diffllama'") != std::string::npos);
  GgufWriter empty;
  CHECK(error_of(empty).find("missing metadata key 'general.architecture'") != std::string::npos);
  GgufWriter keys;
  keys.add_string("general.architecture", "diffllama");
  keys.add_u32("diffllama.attention.head_count", 3);
  keys.add_u32("diffllama.attention.head_count_kv", 2);
  CHECK(error_of(keys).find("must be even") != std::string::npos);
  // A real file with one tensor dropped.
  const std::string model = std::string(DIFFVK_TEST_DATA_DIR) + "/model_tiny";
  quantize_model(model, base + "-full.gguf", QuantKind::f16);
  const GgufFile full = GgufFile::open(base + "-full.gguf");
  GgufWriter w;
  for (const GgufKV& kv : full.metadata()) {
    const std::string k(kv.key);
    if (k == "general.alignment") continue;
    if (kv.value.type == GgufType::string)
      w.add_string(k, std::string(kv.value.str));
    else if (kv.value.type == GgufType::float32)
      w.add_f32(k, float(kv.value.as_f64(k)));
    else
      w.add_u32(k, uint32_t(kv.value.as_u64(k)));
  }
  for (const GgufTensorInfo& t : full.tensors()) {
    if (t.name == "blk.1.ffn_up.weight") continue;
    w.add_tensor(std::string(t.name), std::vector<uint64_t>(t.dims, t.dims + t.n_dims), t.type,
                 std::vector<uint8_t>(full.data(t), full.data(t) + t.nbytes));
  }
  CHECK(error_of(w).find("missing tensor 'blk.1.ffn_up.weight'") != std::string::npos);
  std::remove((base + "-full.gguf").c_str());
}
