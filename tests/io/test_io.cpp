// diffvk — tests for the platform file layer, safetensors, npy, half/bf16
// conversions and the pipeline-cache file wrapper.
#include <doctest/doctest.h>

#include <signal.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <initializer_list>
#include <fstream>
#include <iterator>
#include <limits>
#include <string>
#include <vector>

#include "diffvk/error.hpp"
#include "io/half.hpp"
#include "diffvk/npy.hpp"
#include "vk/pipeline_cache_file.hpp"
#include "platform.hpp"
#include "io/safetensors.hpp"

namespace fs = std::filesystem;
using diffvk::Error;
using diffvk::Status;

namespace {

// ---- helpers ---------------------------------------------------------------------

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

void put_file(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream f(path, std::ios::binary);
  f.write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
  REQUIRE(f.good());
}

void put_file(const std::string& path, const std::string& s) { put_file(path, std::vector<uint8_t>(s.begin(), s.end())); }

std::vector<uint8_t> get_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

bool contains(const std::string& hay, const std::string& needle) { return hay.find(needle) != std::string::npos; }

// Checks that `expr` throws diffvk::Error with `status` and a message containing `phrase`.
#define CHECK_ERROR(expr, st, phrase)                                                            \
  do {                                                                                           \
    try {                                                                                        \
      (void)(expr);                                                                              \
      FAIL_CHECK("expected diffvk::Error from: " #expr);                                         \
    } catch (const diffvk::Error& e_) {                                                          \
      CHECK_MESSAGE(e_.status() == (st), "status " << int(e_.status()) << ": " << e_.what());    \
      CHECK_MESSAGE(contains(e_.what(), (phrase)), "message '" << e_.what() << "' lacks '" << (phrase) << "'"); \
    }                                                                                            \
  } while (0)

template <typename T>
std::vector<uint8_t> as_bytes(const std::vector<T>& v) {
  std::vector<uint8_t> out(v.size() * sizeof(T));
  if (!v.empty()) std::memcpy(out.data(), v.data(), out.size());
  return out;
}

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
    h += "\"" + t.name + "\":{\"dtype\":\"" + t.dtype + "\",\"shape\":" + shape_json(t.shape) +
         ",\"data_offsets\":[" + std::to_string(b) + "," + std::to_string(data.size()) + "]}";
  }
  h += "}";
  while (h.size() % 8) h += ' ';  // padding, as the reference writer does
  return st_raw(h, data);
}

diffvk::SafetensorsFile st_parse(const std::vector<uint8_t>& bytes) {
  return diffvk::SafetensorsFile::from_bytes(bytes, "test.safetensors");
}

std::vector<uint8_t> zeros(size_t n) { return std::vector<uint8_t>(n, 0); }

// ---- table-driven cases shared by the safetensors and npy parsers ---------------------

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
void read_all(const diffvk::SafetensorsFile& f) {
  for (const auto& t : f.tensors()) {
    if (t.dtype == diffvk::DType::F32 || t.dtype == diffvk::DType::F16 || t.dtype == diffvk::DType::BF16) {
      CHECK(f.to_float(t).size() == t.numel());
    }
    (void)f.data(t);
  }
}

void read_all(const diffvk::NpyArray& a) {
  if (a.dtype[1] == 'i') {
    CHECK(diffvk::npy_as_int64(a).size() == a.numel());
  } else {
    CHECK(diffvk::npy_as_float(a).size() == a.numel());
  }
}

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
  const double m = std::frexp(a, &e);  // a = m * 2^e, m in [0.5, 1)
  const unsigned q = unsigned(std::nearbyint(std::ldexp(m, fm.man_bits + 1)));  // 2^man_bits .. 2^(man_bits+1)
  const double bits = double(e - 1 + fm.bias()) * double(1u << fm.man_bits) + q - double(1u << fm.man_bits);
  return uint16_t(sign | (bits >= fm.inf() ? fm.inf() : unsigned(bits)));
}

float ref_half_to_float(uint16_t h) { return ref_to_float(kHalf, h); }
float ref_bf16_to_float(uint16_t b) { return ref_to_float(kBf16, b); }
uint16_t ref_float_to_half(float f) { return ref_from_float(kHalf, f); }
uint16_t ref_float_to_bf16(float f) { return ref_from_float(kBf16, f); }

}  // namespace

// =====================================================================================
// platform
// =====================================================================================

TEST_CASE("io: read_file and write_file_atomic round trip") {
  TempDir dir;
  const std::string p = dir.file("blob.bin");
  std::vector<uint8_t> data(100000);
  for (size_t i = 0; i < data.size(); ++i) data[i] = uint8_t(i * 31 + 7);
  diffvk::platform::write_file_atomic(p, data.data(), data.size());
  CHECK(diffvk::platform::read_file(p, data.size()) == data);
  CHECK(get_file(p) == data);

  // Overwrite with something shorter; empty file with null data.
  const char small[] = "abc";
  diffvk::platform::write_file_atomic(p, small, 3);
  CHECK(diffvk::platform::read_file(p, 3) == std::vector<uint8_t>{'a', 'b', 'c'});
  diffvk::platform::write_file_atomic(p, nullptr, 0);
  CHECK(diffvk::platform::read_file(p, 0).empty());
  CHECK(dir.entries() == std::vector<std::string>{"blob.bin"});  // no temporaries left

  // Non-regular readable file: /proc files report size 0 but have content.
  if (fs::exists("/proc/self/status")) CHECK(!diffvk::platform::read_file("/proc/self/status", 1 << 20).empty());
}

TEST_CASE("io: read_file errors") {
  TempDir dir;
  CHECK_ERROR(diffvk::platform::read_file(dir.file("nope.bin"), 100), Status::io_error, "nope.bin");
  CHECK_ERROR(diffvk::platform::read_file(dir.file("nope.bin"), 100), Status::io_error, "No such file");
  CHECK_ERROR(diffvk::platform::read_file(dir.path, 100), Status::io_error, "directory");
  put_file(dir.file("ten.bin"), std::string("0123456789"));
  CHECK(diffvk::platform::read_file(dir.file("ten.bin"), 10).size() == 10);
  CHECK_ERROR(diffvk::platform::read_file(dir.file("ten.bin"), 9), Status::format_error, "limit of 9");
  CHECK_ERROR(diffvk::platform::read_file(dir.file("ten.bin"), 0), Status::format_error, "ten.bin");
  // /proc files report st_size 0: the limit must still hold while reading.
  if (fs::exists("/proc/self/status")) {
    CHECK_ERROR(diffvk::platform::read_file("/proc/self/status", 4), Status::format_error, "more than the limit");
  }
}

TEST_CASE("io: write_file_atomic failures leave no partial file and no temporaries") {
  TempDir dir;
  const std::string p = dir.file("keep.bin");
  put_file(p, std::string("old contents"));
  const std::vector<uint8_t> old = get_file(p);
  const char payload[] = "new";

  SUBCASE("directory does not exist") {
    CHECK_ERROR(diffvk::platform::write_file_atomic(dir.file("missing/sub/x.bin"), payload, 3), Status::io_error,
                "missing/sub/x.bin.tmp.");
    CHECK(!fs::exists(dir.file("missing")));
  }
  SUBCASE("path is a directory") {
    fs::create_directory(dir.file("adir"));
    CHECK_ERROR(diffvk::platform::write_file_atomic(dir.file("adir"), payload, 3), Status::io_error, "adir");
    CHECK(fs::is_directory(dir.file("adir")));
    CHECK(fs::is_empty(dir.file("adir")));
  }
  SUBCASE("parent is a regular file") {
    CHECK_ERROR(diffvk::platform::write_file_atomic(p + "/child", payload, 3), Status::io_error, "keep.bin/child");
  }
  SUBCASE("write fails half way (RLIMIT_FSIZE) over an existing file") {
    struct rlimit saved;
    REQUIRE(::getrlimit(RLIMIT_FSIZE, &saved) == 0);
    void (*saved_sig)(int) = ::signal(SIGXFSZ, SIG_IGN);
    struct rlimit small = saved;
    small.rlim_cur = 4096;
    if (saved.rlim_max != RLIM_INFINITY && saved.rlim_max < small.rlim_cur) small.rlim_cur = saved.rlim_max;
    REQUIRE(::setrlimit(RLIMIT_FSIZE, &small) == 0);
    std::vector<uint8_t> big(1 << 20, 0xab);
    bool threw = false;
    try {
      diffvk::platform::write_file_atomic(p, big.data(), big.size());
    } catch (const Error& e) {
      threw = true;
      CHECK(e.status() == Status::io_error);
      CHECK(contains(e.what(), "cannot write"));
    }
    ::setrlimit(RLIMIT_FSIZE, &saved);
    ::signal(SIGXFSZ, saved_sig);
    CHECK(threw);
  }
  SUBCASE("null data with a size") {
    CHECK_ERROR(diffvk::platform::write_file_atomic(p, nullptr, 5), Status::invalid_argument, "null data");
  }
  CHECK(get_file(p) == old);
  for (const auto& name : dir.entries()) CHECK_MESSAGE(!contains(name, ".tmp."), "leftover " << name);
}

TEST_CASE("io: logging sink and level filter") {
  using diffvk::platform::LogLevel;
  const LogLevel saved = diffvk::platform::log_level();
  std::vector<std::pair<LogLevel, std::string>> got;
  diffvk::platform::set_log_sink([&](LogLevel l, const std::string& m) { got.emplace_back(l, m); });
  diffvk::platform::set_log_level(LogLevel::warn);
  diffvk::platform::log(LogLevel::debug, "d");
  diffvk::platform::log(LogLevel::info, "i");
  diffvk::platform::log(LogLevel::warn, "w");
  diffvk::platform::log(LogLevel::error, "e");
  REQUIRE(got.size() == 2);
  CHECK(got[0].first == LogLevel::warn);
  CHECK(got[0].second == "w");
  CHECK(got[1].first == LogLevel::error);
  diffvk::platform::set_log_level(LogLevel::debug);
  diffvk::platform::log(LogLevel::debug, "d2");
  CHECK(got.size() == 3);

  // A throwing sink must not escape log().
  diffvk::platform::set_log_sink([](LogLevel, const std::string&) { throw std::runtime_error("sink"); });
  diffvk::platform::log(LogLevel::error, "x");

  // Default sink: "diffvk: [warn] msg" on stderr.
  diffvk::platform::set_log_sink(nullptr);
  TempDir dir;
  const std::string cap = dir.file("stderr.txt");
  std::fflush(stderr);
  int saved_fd = ::dup(2);
  FILE* f = std::fopen(cap.c_str(), "w");
  REQUIRE(f);
  ::dup2(::fileno(f), 2);
  diffvk::platform::log(LogLevel::warn, "hello log");
  std::fflush(stderr);
  ::dup2(saved_fd, 2);
  ::close(saved_fd);
  std::fclose(f);
  const auto text = get_file(cap);
  CHECK(std::string(text.begin(), text.end()) == "diffvk: [warn] hello log\n");
  diffvk::platform::set_log_level(saved);
  CHECK(std::string(diffvk::platform::log_level_name(LogLevel::error)) == "error");
}

TEST_CASE("io: cache_dir") {
  auto get = [](const char* k) -> std::pair<bool, std::string> {
    const char* v = std::getenv(k);
    return {v != nullptr, v ? v : ""};
  };
  auto restore = [](const char* k, const std::pair<bool, std::string>& v) {
    if (v.first) {
      ::setenv(k, v.second.c_str(), 1);
    } else {
      ::unsetenv(k);
    }
  };
  const auto xdg = get("XDG_CACHE_HOME"), home = get("HOME");
  ::setenv("XDG_CACHE_HOME", "/x/cache", 1);
  ::setenv("HOME", "/home/u", 1);
  CHECK(diffvk::platform::cache_dir() == "/x/cache/diffvk");
  ::setenv("XDG_CACHE_HOME", "relative/ignored", 1);
  CHECK(diffvk::platform::cache_dir() == "/home/u/.cache/diffvk");
  ::unsetenv("XDG_CACHE_HOME");
  CHECK(diffvk::platform::cache_dir() == "/home/u/.cache/diffvk");
  ::unsetenv("HOME");
  try {
    CHECK(!diffvk::platform::cache_dir().empty());  // from the password database
  } catch (const Error& e) {
    CHECK(e.status() == Status::io_error);  // no passwd entry / home directory
  }
  restore("XDG_CACHE_HOME", xdg);
  restore("HOME", home);
  CHECK(!fs::exists("/x/cache/diffvk"));
}

TEST_CASE("io: MappedFile") {
  TempDir dir;
  std::vector<uint8_t> data(10000);
  for (size_t i = 0; i < data.size(); ++i) data[i] = uint8_t(i ^ (i >> 8));
  put_file(dir.file("m.bin"), data);
  diffvk::platform::MappedFile m(dir.file("m.bin"));
  REQUIRE(m.is_open());
  CHECK(m.size() == data.size());
  CHECK(m.is_mapped());
  CHECK(std::memcmp(m.data(), data.data(), data.size()) == 0);
  CHECK(m.path() == dir.file("m.bin"));
  diffvk::platform::MappedFile moved = std::move(m);
  CHECK(moved.size() == data.size());
  CHECK(std::memcmp(moved.data(), data.data(), data.size()) == 0);
  CHECK(!m.is_open());  // NOLINT(bugprone-use-after-move): moved-from is empty by contract
  CHECK(m.size() == 0);

  put_file(dir.file("empty.bin"), std::vector<uint8_t>{});
  auto e = diffvk::platform::MappedFile::open(dir.file("empty.bin"));
  CHECK(e.size() == 0);
  CHECK(e.data() != nullptr);

  CHECK_ERROR(diffvk::platform::MappedFile(dir.file("none.bin")), Status::io_error, "none.bin");
  CHECK_ERROR(diffvk::platform::MappedFile(dir.path), Status::io_error, "directory");
  if (fs::exists("/proc/self/status")) {  // not mappable: read instead
    diffvk::platform::MappedFile s("/proc/self/status");
    CHECK(!s.is_mapped());
    CHECK(s.size() > 0);
  }
}

// =====================================================================================
// half / bf16
// =====================================================================================

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
#if defined(__FLT16_MAX__) && !(defined(__GNUC__) && !defined(__clang__) && __GNUC__ < 13 && defined(__aarch64__))  // g++ 12 on aarch64 defines the macro but has no C++ _Float16
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
#if defined(__FLT16_MAX__) && !(defined(__GNUC__) && !defined(__clang__) && __GNUC__ < 13 && defined(__aarch64__))  // g++ 12 on aarch64 defines the macro but has no C++ _Float16
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

// =====================================================================================
// safetensors
// =====================================================================================

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
      {"bad json", "{\"w\":", 0, "not valid JSON"},
      {"json with trailing junk", "{} x", 0, "not valid JSON"},
      {"number overflow", R"({"w":{"dtype":"F32","shape":[1e400],"data_offsets":[0,0]}})", 0, "not valid JSON"},
      {"not an object", "[1,2]", 0, "not a JSON object (it is a array)"},
      {"string header", "\"x\"", 0, "not a JSON object"},
      {"entry not object", R"({"w":[1]})", 0, "entry for tensor 'w' is not a JSON object"},
      {"missing dtype", R"({"w":{"shape":[2],"data_offsets":[0,8]}})", 8, "tensor 'w' is missing 'dtype'"},
      {"missing shape", R"({"w":{"dtype":"F32","data_offsets":[0,8]}})", 8, "is missing 'shape'"},
      {"missing offsets", R"({"w":{"dtype":"F32","shape":[2]}})", 8, "is missing 'data_offsets'"},
      {"extra key", R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8],"junk":1}})", 8, "unexpected key 'junk'"},
      {"dtype not string", R"({"w":{"dtype":4,"shape":[2],"data_offsets":[0,8]}})", 8, "'dtype' is not a string"},
      {"unknown dtype", R"({"w":{"dtype":"F64","shape":[1],"data_offsets":[0,8]}})", 8, "unknown dtype 'F64' for tensor 'w'"},
      {"lowercase dtype", R"({"w":{"dtype":"f32","shape":[2],"data_offsets":[0,8]}})", 8, "unknown dtype 'f32'"},
      {"shape not array", R"({"w":{"dtype":"F32","shape":2,"data_offsets":[0,8]}})", 8, "'shape' is not an array"},
      {"negative dim", R"({"w":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", 8, "negative dim -2"},
      {"float dim", R"({"w":{"dtype":"F32","shape":[2.0],"data_offsets":[0,8]}})", 8, "is not an integer"},
      {"bool dim", R"({"w":{"dtype":"F32","shape":[true],"data_offsets":[0,8]}})", 8, "is not an integer"},
      {"string dim", R"({"w":{"dtype":"F32","shape":["2"],"data_offsets":[0,8]}})", 8, "is not an integer"},
      {"dim > int64", R"({"w":{"dtype":"F32","shape":[9223372036854775808],"data_offsets":[0,8]}})", 8, "is too large"},
      {"numel overflow", R"({"w":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,8]}})", 8, "overflows 64 bits"},
      {"bytes overflow", R"({"w":{"dtype":"F32","shape":[4611686018427387904],"data_offsets":[0,8]}})", 8, "overflows 64 bits"},
      {"offsets not array", R"({"w":{"dtype":"F32","shape":[2],"data_offsets":8}})", 8, "'data_offsets' must be an array of two integers"},
      {"offsets one", R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[8]}})", 8, "array of two"},
      {"offsets three", R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8,8]}})", 8, "array of two"},
      {"offset negative", R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[-1,8]}})", 8, "data_offsets[0] is not a non-negative integer (it is negative)"},
      {"offset float", R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8.0]}})", 8, "data_offsets[1] is not a non-negative integer"},
      {"offset > u64", R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,18446744073709551616]}})", 8, "data_offsets[1] is not a non-negative integer"},
      {"begin > end", R"({"w":{"dtype":"F32","shape":[0],"data_offsets":[8,0]}})", 8, "begin 8 is greater than end 0"},
      {"end beyond data", R"({"w":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})", 8, "end 16 is beyond the data section (8 bytes)"},
      {"huge end", R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,18446744073709551615]}})", 8, "beyond the data section"},
      {"size mismatch", R"({"w":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", 8, "needs 12 bytes"},
      {"overlap", R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})", 12, "overlap"},
      {"same range twice", R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", 8, "overlap"},
      {"empty inside other", R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[0],"data_offsets":[4,4]}})", 8, "overlap"},
      {"hole", R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[12,20]}})", 20, "hole in the data section: bytes [8, 12)"},
      {"hole at start", R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", 8, "hole"},
      {"trailing bytes", R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", 16, "8 trailing bytes"},
      {"data but no tensors", "{}", 8, "trailing bytes"},
      {"duplicate names", R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", 8, "duplicate tensor name 'a'"},
      {"duplicate key in entry", R"({"w":{"dtype":"F32","dtype":"F16","shape":[2],"data_offsets":[0,8]}})", 8, "duplicate key 'dtype' in header entry 'w'"},
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

// =====================================================================================
// npy
// =====================================================================================

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
  auto sc = npy_parse(npy_raw("{'descr': '<f4', 'fortran_order': False, 'shape': ( ), }", as_bytes(std::vector<float>{3})));
  CHECK(sc.shape.empty());
  CHECK(diffvk::npy_as_float(sc) == std::vector<float>{3.0f});

  const std::vector<double> f8 = {0.1, -1e300, 2.5};
  auto a8 = npy_parse(npy_raw("{'descr': '<f8', 'fortran_order': False, 'shape': (3,), }", as_bytes(f8)));
  auto c8 = diffvk::npy_as_float(a8);
  CHECK(c8[0] == 0.1f);
  CHECK(std::isinf(c8[1]));
  CHECK(c8[2] == 2.5f);

  const std::vector<uint16_t> f2 = {0x3c00, 0xc000, 0x0001};
  auto c2 = diffvk::npy_as_float(npy_parse(npy_raw("{'descr': '<f2', 'fortran_order': False, 'shape': (3,), }", as_bytes(f2))));
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
      {"header past end", {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, 200, 0, '{', '}'}, "header length 200 exceeds the 2 bytes"},
      {"huge v2 header", huge_v2, "exceeds the"},
  };
  // The rest are version 1.0 files that differ only in the header text and the number of data bytes.
  const HeaderCase headers[] = {
      {"fortran", h("<f4", "True", "(2,)"), 8, "fortran_order True is not supported"},
      {"big endian", h(">f4", "False", "(2,)"), 8, "unsupported dtype '>f4' (big-endian)"},
      {"unknown dtype", h("<u2", "False", "(4,)"), 8, "unsupported dtype '<u2'"},
      {"empty dtype", h("", "False", "(4,)"), 8, "unsupported dtype ''"},
      {"structured dtype", "{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (2,), }", 8, "structured dtypes are not supported"},
      {"fortran not bool", h("<f4", "0", "(2,)"), 8, "must be True or False"},
      {"missing descr", "{'fortran_order': False, 'shape': (2,), }", 8, "no 'descr'"},
      {"missing fortran", "{'descr': '<f4', 'shape': (2,), }", 8, "no 'fortran_order'"},
      {"missing shape", "{'descr': '<f4', 'fortran_order': False}", 8, "no 'shape'"},
      {"extra key", "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'x': 1}", 8, "unexpected key 'x'"},
      {"duplicate key", "{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (2,)}", 8, "duplicate key 'descr'"},
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
      {"missing comma between keys", "{'descr': '<f4' 'fortran_order': False, 'shape': (2,)}", 8, "expected ',' or '}'"},
      {"nul in header", std::string("{'descr': '<f4', 'fortran_order': False, 'shape': (2,)}") + '\0', 8, "unexpected data"},
      {"data short", h("<f4", "False", "(3,)"), 8, "needs 12 data bytes, file has 8 (truncated)"},
      {"data long", h("<f4", "False", "(1,)"), 8, "needs 4 data bytes, file has 8 (trailing bytes)"},
      {"scalar without data", h("<f4", "False", "()"), 0, "needs 4 data bytes"},
  };
  for (const auto& c : headers) cases.push_back({c.label, npy_raw(c.header, zeros(c.data_bytes)), c.phrase});
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

// =====================================================================================
// pipeline cache file
// =====================================================================================

namespace {
diffvk::PipelineCacheKey test_key() {
  diffvk::PipelineCacheKey k;
  for (int i = 0; i < 16; ++i) k.device_uuid[i] = uint8_t(0x10 + i);
  k.vendor_id = 0x10de;
  k.device_id = 0x2330;
  k.driver_version = 0x21c00000;
  k.spirv_hash = 0x0123456789abcdefull;
  return k;
}
}  // namespace

TEST_CASE("io: fnv1a64") {
  CHECK(diffvk::fnv1a64("", 0) == 0xcbf29ce484222325ull);
  CHECK(diffvk::fnv1a64("a", 1) == 0xaf63dc4c8601ec8cull);
  CHECK(diffvk::fnv1a64("foobar", 6) == 0x85944171f73967e8ull);
  CHECK(diffvk::fnv1a64("bar", 3, diffvk::fnv1a64("foo", 3)) == diffvk::fnv1a64("foobar", 6));
}

TEST_CASE("io: pipeline cache encode/decode") {
  const auto key = test_key();
  std::vector<uint8_t> blob(37);
  for (size_t i = 0; i < blob.size(); ++i) blob[i] = uint8_t(i * 13 + 1);
  const auto file = diffvk::encode_pipeline_cache(key, blob.data(), blob.size());
  REQUIRE(file.size() == diffvk::kPipelineCacheHeaderSize + blob.size() + diffvk::kPipelineCacheTrailerSize);
  CHECK(std::memcmp(file.data(), "DVKPCACH", 8) == 0);

  std::string why;
  auto got = diffvk::decode_pipeline_cache(file, key, &why);
  REQUIRE(got.has_value());
  CHECK(*got == blob);
  CHECK(why == "ok");
  CHECK(diffvk::decode_pipeline_cache(file, key, nullptr).has_value());

  CHECK_ERROR(diffvk::encode_pipeline_cache(key, nullptr, 5), Status::invalid_argument, "null blob");
  CHECK_ERROR(diffvk::encode_pipeline_cache(key, blob.data(), std::numeric_limits<size_t>::max() - 10),
              Status::invalid_argument, "too large");
  auto empty_blob = diffvk::encode_pipeline_cache(key, nullptr, 0);
  got = diffvk::decode_pipeline_cache(empty_blob, key, &why);
  REQUIRE(got.has_value());
  CHECK(got->empty());

  auto expect_reject = [&](const std::vector<uint8_t>& f, const diffvk::PipelineCacheKey& k, const std::string& start) {
    std::string w;
    CHECK(!diffvk::decode_pipeline_cache(f, k, &w).has_value());
    CHECK_MESSAGE(w.rfind(start, 0) == 0, "why='" << w << "' expected '" << start << "...'");
    CHECK(!diffvk::decode_pipeline_cache(f, k, nullptr).has_value());
  };

  expect_reject({}, key, "missing");
  for (size_t len = 1; len < file.size(); ++len) {
    CAPTURE(len);
    expect_reject(std::vector<uint8_t>(file.begin(), file.begin() + long(len)), key, "truncated");
  }
  auto longer = file;
  longer.push_back(0);
  expect_reject(longer, key, "trailing bytes");
  expect_reject(std::vector<uint8_t>{'n', 'o', 'p', 'e'}, key, "bad magic");
  std::vector<uint8_t> garbage(500);
  for (size_t i = 0; i < garbage.size(); ++i) garbage[i] = uint8_t(i * 7919 >> 3);
  expect_reject(garbage, key, "bad magic");
  auto wrong_version = file;
  wrong_version[8] = 2;
  expect_reject(wrong_version, key, "format version 2");
  auto huge_size = file;
  huge_size[55] = 0xff;  // blob size field
  expect_reject(huge_size, key, "truncated");

  // Flipping any bit after the version field is caught by the checksum (or the size).
  for (size_t i = 12; i < file.size(); ++i) {
    for (int bit = 0; bit < 8; bit += 3) {
      auto f = file;
      f[i] ^= uint8_t(1u << bit);
      std::string w;
      CHECK(!diffvk::decode_pipeline_cache(f, key, &w).has_value());
      CHECK_MESSAGE((w.rfind("checksum mismatch", 0) == 0 || w.rfind("truncated", 0) == 0 ||
                     w.rfind("trailing bytes", 0) == 0),
                    "byte " << i << ": " << w);
    }
  }
  auto flipped = file;
  flipped[60] ^= 0x40;  // inside the blob
  expect_reject(flipped, key, "checksum mismatch");

  // A file written for another key is refused, saying which part of the key changed.
  using Key = diffvk::PipelineCacheKey;
  const struct {
    const char* label;
    void (*change)(Key&);
    const char* why;
  } other_keys[] = {
      {"device uuid", [](Key& k) { k.device_uuid[3] ^= 1; }, "other device (uuid 10111213"},
      {"vendor", [](Key& k) { k.vendor_id = 0x1002; }, "other device (vendor"},
      {"device id", [](Key& k) { k.device_id += 1; }, "other device"},
      {"driver", [](Key& k) { k.driver_version += 1; }, "driver version changed"},
      {"shaders", [](Key& k) { k.spirv_hash ^= 1; }, "shaders changed"},
  };
  for (const auto& c : other_keys) {
    CAPTURE(c.label);
    Key k2 = key;
    c.change(k2);
    expect_reject(file, k2, c.why);
  }
}

TEST_CASE("io: pipeline cache file through write_file_atomic/read_file") {
  TempDir dir;
  const auto key = test_key();
  const std::vector<uint8_t> blob = {1, 2, 3, 4, 5};
  const auto enc = diffvk::encode_pipeline_cache(key, blob.data(), blob.size());
  const std::string p = dir.file("pipelines.bin");
  diffvk::platform::write_file_atomic(p, enc.data(), enc.size());
  std::string why;
  auto got = diffvk::decode_pipeline_cache(diffvk::platform::read_file(p, 1 << 20), key, &why);
  REQUIRE(got.has_value());
  CHECK(*got == blob);
}

// =====================================================================================
// fuzz seed corpus (tests/fuzz/make_corpus.py): ok_* must load, bad_* must be refused
// =====================================================================================

TEST_CASE("io: fuzz seed corpus") {
  const fs::path root = fs::path(DIFFVK_FUZZ_CORPUS_DIR);
  REQUIRE_MESSAGE(fs::is_directory(root), "fuzz seed corpus not found at " << root.string());
  size_t ok = 0, bad = 0;
  for (const char* kind : {"safetensors", "npy"}) {
    if (!fs::is_directory(root / kind)) continue;
    for (const auto& entry : fs::directory_iterator(root / kind)) {
      const std::string name = entry.path().filename().string();
      const std::string path = entry.path().string();
      CAPTURE(path);
      const bool expect_ok = name.rfind("ok_", 0) == 0;
      if (!expect_ok && name.rfind("bad_", 0) != 0) continue;
      try {
        if (std::string(kind) == "safetensors") {
          read_all(diffvk::SafetensorsFile::open(path));
        } else {
          read_all(diffvk::read_npy(path));
        }
        CHECK_MESSAGE(expect_ok, "accepted a bad_ file");
        ++ok;
      } catch (const Error& e) {
        CHECK_MESSAGE(!expect_ok, "rejected: " << e.what());
        CHECK(e.status() == Status::format_error);
        CHECK(contains(e.what(), name));  // messages name the file
        ++bad;
      }
    }
  }
  CHECK(ok >= 8);
  CHECK(bad >= 8);
}
