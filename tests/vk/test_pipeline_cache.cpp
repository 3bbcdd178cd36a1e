// The pipeline-cache file format (vk/pipeline_cache_file.hpp: encode/decode, every truncation, bit flip and
// key change; host only), then the on-disk VkPipelineCache through a real Context: a missing, truncated, garbage or
// other-device file is a logged cache miss (never a failure) and is rewritten atomically; a matching file hits. The
// default file (in the platform cache directory) and the option that turns it off.
#include <doctest/doctest.h>

#include <cstdio>
#include <fstream>
#include <iterator>

#include <sys/stat.h>
#include <unistd.h>

#include "cli_run.hpp"
#include "file_test_util.hpp"
#include "gpu_test.hpp"
#include "ops/diff_attn.hpp"
#include "ops/head_rmsnorm.hpp"
#include "platform.hpp"
#include "diffvk/pipeline_cache.hpp"
#include "vk/pipeline_cache_file.hpp"
#include "vk/shader_blob.hpp"

using namespace diffvk;

namespace {
std::vector<uint8_t> slurp(const std::string& p) {
  std::ifstream f(p, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(f), {});
}
void spit(const std::string& p, const std::vector<uint8_t>& b) {
  std::ofstream f(p, std::ios::binary | std::ios::trunc);
  f.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
}

// Creates a context on `path`, builds a few pipelines, returns the cache log lines.
std::vector<std::string> session(const std::string& path) {
  std::vector<std::string> logs;
  platform::set_log_sink([&](platform::LogLevel, const std::string& m) {
    if (m.find("pipeline cache") != std::string::npos) logs.push_back(m);
  });
  {
    ContextOptions o = test::validated_options(Precision::fp32);
    o.pipeline_cache_path = path;
    auto ctx = Context::create(o);
    HeadRmsNormKernel k(ctx->device(), KernelOptions::for_device(ctx->device()));
    DiffAttnKernel a(ctx->device(), KernelOptions::for_device(ctx->device()), 32, 2);
  }  // destruction saves the cache
  platform::set_log_sink(nullptr);
  return logs;
}
bool has(const std::vector<std::string>& logs, const std::string& phrase) {
  for (auto& l : logs)
    if (l.find(phrase) != std::string::npos) return true;
  return false;
}
}  // namespace

TEST_CASE("pipeline cache: missing, hit, truncated, garbage and other-device files") {
  const std::string dir = "/tmp/diffvk_pcache_" + std::to_string(::getpid());
  REQUIRE(system(("mkdir -p " + dir).c_str()) == 0);
  const std::string path = dir + "/pipelines.bin";
  std::remove(path.c_str());

  auto logs = session(path);
  INFO(logs.size());
  CHECK(has(logs, "pipeline cache miss (missing"));
  const auto good = slurp(path);
  REQUIRE(good.size() > 64);

  logs = session(path);
  CHECK(has(logs, "pipeline cache hit"));

  spit(path, std::vector<uint8_t>(good.begin(), good.begin() + good.size() / 2));
  logs = session(path);
  CHECK(has(logs, "pipeline cache miss (truncated"));
  CHECK(slurp(path).size() >= 64);  // rewritten whole

  spit(path, std::vector<uint8_t>(good.size(), 0xAB));
  logs = session(path);
  CHECK(has(logs, "pipeline cache miss (bad magic"));

  // Same format, another device: re-encode the blob under a foreign UUID.
  PipelineCacheKey other{};
  for (int i = 0; i < 16; ++i) other.device_uuid[i] = static_cast<uint8_t>(0xC0 + i);
  other.spirv_hash = embedded_shaders_hash();
  spit(path, encode_pipeline_cache(other, good.data(), good.size()));
  logs = session(path);
  CHECK(has(logs, "pipeline cache miss (other device"));

  // This device, but other shaders (another SPIR-V hash) or another driver version: stale.
  auto devs = list_devices();
  const DeviceCaps& caps = devs[select_device(devs, std::getenv("DIFFVK_DEVICE") ? std::getenv("DIFFVK_DEVICE") : "")];
  PipelineCacheKey mine{};
  std::copy(caps.pipeline_cache_uuid.begin(), caps.pipeline_cache_uuid.end(), mine.device_uuid);
  mine.vendor_id = caps.vendor_id;
  mine.device_id = caps.device_id;
  mine.driver_version = caps.driver_version;
  mine.spirv_hash = embedded_shaders_hash() ^ 1;
  spit(path, encode_pipeline_cache(mine, good.data(), good.size()));
  CHECK(has(session(path), "pipeline cache miss (shaders changed"));
  mine.spirv_hash = embedded_shaders_hash();
  mine.driver_version ^= 1;
  spit(path, encode_pipeline_cache(mine, good.data(), good.size()));
  CHECK(has(session(path), "pipeline cache miss (driver version"));
  CHECK(has(session(path), "pipeline cache hit"));  // each miss rewrote a valid file
  // An unwritable path never fails the context: the save error is only logged.
  ContextOptions o = test::validated_options(Precision::fp32);
  o.pipeline_cache_path = dir + "/no/such/dir/cache.bin";
  CHECK_NOTHROW(Context::create(o));
  // No temporaries left behind.
  CHECK(system(("test -z \"$(ls " + dir + " | grep -v '^pipelines.bin$')\"").c_str()) == 0);
  REQUIRE(system(("rm -rf " + dir).c_str()) == 0);
}

TEST_CASE("pipeline cache: on by default in the platform cache directory, off by option") {
  const std::string base = "/tmp/diffvk_pcache_default_" + std::to_string(::getpid());
  REQUIRE(system(("rm -rf " + base).c_str()) == 0);
  platform::set_cache_dir(base);
  auto devs = list_devices();
  const DeviceCaps& caps = devs[select_device(devs, std::getenv("DIFFVK_DEVICE") ? std::getenv("DIFFVK_DEVICE") : "")];
  const std::string file = default_pipeline_cache_path(caps);
  INFO(file);
  CHECK(file.rfind(base + "/diffvk/pipelines/", 0) == 0);
  CHECK(file.size() > 5);
  CHECK(file.compare(file.size() - 5, 5, ".vkpc") == 0);
  auto open_close = [](ContextOptions o, std::string* used = nullptr) {
    std::vector<std::string> logs;
    platform::set_log_sink([&](platform::LogLevel, const std::string& m) {
      if (m.find("pipeline cache") != std::string::npos) logs.push_back(m);
    });
    {
      auto ctx = Context::create(o);
      if (used) *used = ctx->pipeline_cache_path();
      HeadRmsNormKernel k(ctx->device(), KernelOptions::for_device(ctx->device()));
    }
    platform::set_log_sink(nullptr);
    return logs;
  };
  std::string used;
  auto logs = open_close(test::validated_options(Precision::fp32), &used);
  CHECK(used == file);
  CHECK(has(logs, "pipeline cache miss (missing"));
  struct stat st1 {};
  REQUIRE(::stat(file.c_str(), &st1) == 0);  // created with its folders when the context closed
  CHECK(decode_pipeline_cache(
            slurp(file),
            [&] {
              PipelineCacheKey k{};
              std::copy(caps.pipeline_cache_uuid.begin(), caps.pipeline_cache_uuid.end(), k.device_uuid);
              k.vendor_id = caps.vendor_id;
              k.device_id = caps.device_id;
              k.driver_version = caps.driver_version;
              k.spirv_hash = embedded_shaders_hash();
              return k;
            }(),
            nullptr)
            .has_value());
  CHECK(has(open_close(test::validated_options(Precision::fp32)), "pipeline cache hit"));

  // Off: no file is read or written.
  REQUIRE(std::remove(file.c_str()) == 0);
  ContextOptions off = test::validated_options(Precision::fp32);
  off.pipeline_cache = false;
  logs = open_close(off, &used);
  CHECK(used.empty());
  CHECK(logs.empty());
  CHECK(::access(file.c_str(), F_OK) != 0);
  // Off with a file named: refused, naming both.
  off.pipeline_cache_path = base + "/x.bin";
  try {
    Context::create(off);
    FAIL("pipeline_cache = false with a path was accepted");
  } catch (const Error& e) {
    CHECK(e.status() == Status::invalid_argument);
    CHECK(std::string(e.what()).find("pipeline_cache_path") != std::string::npos);
  }
  // Something that is not a diffvk cache at the default path is never replaced (the save is refused, logged).
  spit(file, std::vector<uint8_t>{'n', 'o', 't', ' ', 'o', 'u', 'r', 's'});
  logs = open_close(test::validated_options(Precision::fp32));
  CHECK(has(logs, "pipeline cache miss"));
  CHECK(has(logs, "not written"));
  CHECK(slurp(file) == std::vector<uint8_t>{'n', 'o', 't', ' ', 'o', 'u', 'r', 's'});
  platform::set_cache_dir("");
  REQUIRE(system(("rm -rf " + base).c_str()) == 0);
}

// ---- the file format, without a device (these were tests/io/test_io.cpp's; the names keep their "io:" prefix) ----

namespace {
using io_test::TempDir;

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
      CHECK_MESSAGE(
          (w.rfind("checksum mismatch", 0) == 0 || w.rfind("truncated", 0) == 0 || w.rfind("trailing bytes", 0) == 0),
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

// The cache is written only over a regular file or where nothing exists. A FIFO or a link to
// a device node at the path stays as it is (the save error is logged); before, both were replaced by a
// regular file when the context was destroyed.
TEST_CASE("pipeline cache: a FIFO or a device node at the path is left untouched") {
  io_test::TempDir tmp;
  const std::string fifo = tmp.path + "/fifo.bin", dev = tmp.path + "/null.bin";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  REQUIRE(::symlink("/dev/null", dev.c_str()) == 0);
  for (const std::string& path : {fifo, dev}) {
    CAPTURE(path);
    const auto logs = session(path);
    CHECK(has(logs, "pipeline cache not saved"));
    CHECK(has(logs, "not a regular file (left as it is)"));
    struct stat st;
    REQUIRE(::lstat(path.c_str(), &st) == 0);
    CHECK((path == fifo ? S_ISFIFO(st.st_mode) : S_ISLNK(st.st_mode)));
  }
  struct stat null_st;
  REQUIRE(::stat("/dev/null", &null_st) == 0);
  CHECK(S_ISCHR(null_st.st_mode));
  CHECK(test::entries(tmp.path).size() == 2);  // no temporary left behind
}

TEST_CASE("io: pipeline_cache_path_replaceable accepts nothing but an absent, empty or diffvk cache file") {
  io_test::TempDir tmp;
  const std::string p = tmp.path + "/c.bin";
  std::string why;
  CHECK(pipeline_cache_path_replaceable(p, &why));  // absent
  std::ofstream(p).close();
  CHECK(pipeline_cache_path_replaceable(p, &why));  // empty
  const auto cache = encode_pipeline_cache(test_key(), reinterpret_cast<const uint8_t*>("blob"), 4);
  std::ofstream(p, std::ios::binary).write(reinterpret_cast<const char*>(cache.data()), std::streamsize(cache.size()));
  CHECK(pipeline_cache_path_replaceable(p, &why));  // one of ours
  std::ofstream(p, std::ios::binary) << "DVKPCAC";  // 7 bytes: too short to be ours
  CHECK(!pipeline_cache_path_replaceable(p, &why));
  CHECK(why == "not a diffvk pipeline cache");
  std::ofstream(p, std::ios::binary) << "my notes, not a cache";
  CHECK(!pipeline_cache_path_replaceable(p, &why));
  CHECK(why == "not a diffvk pipeline cache");
  CHECK(!pipeline_cache_path_replaceable(tmp.path, &why));  // a directory
  CHECK(why == "not a regular file");
}
