// The on-disk VkPipelineCache through a real Context: a missing, truncated, garbage or other-device
// file is a logged cache miss (never a failure) and is rewritten atomically; a matching file hits.
#include <doctest/doctest.h>

#include <cstdio>
#include <fstream>
#include <iterator>

#include <unistd.h>

#include "gpu_test.hpp"
#include "ops/diff_attn.hpp"
#include "ops/head_rmsnorm.hpp"
#include "platform.hpp"
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
