// diffvk_bench's C++ API (include/diffvk/bench.hpp): the phone preset's JSON (preset, cool-down, T cap,
// thermal readings around every case), the thermal reader on a fake sysfs tree, options refused before
// any work, and cancellation. The CLI's compatibility is tests/bench/test_bench_cli.cpp; the C entry
// point is tests/bench/bench_c_api_test.c.
#include <doctest/doctest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <limits>
#include <set>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "bench/ceilings.hpp"
#include "bench/host_memory.hpp"
#include "bench/cases/linear.hpp"
#include "bench/op_cases.hpp"
#include "bench/presets.hpp"
#include "bench/thermal.hpp"
#include "diffvk/bench.hpp"
#include "diffvk/error.hpp"
#include "gpu_test.hpp"
#include "status_of.hpp"

using namespace diffvk;

namespace {
void write(const std::string& path, const std::string& text) {
  std::ofstream f(path);
  f << text;
}
}  // namespace

TEST_CASE("bench api: phone preset records the preset and the cool-down and thermal readings around each case") {
  auto ctx = test::make_context();
  bench::Options o;
  o.preset = "phone";
  o.budget_seconds = 0.01;  // the first case of each series runs (it calibrates); the others are skipped
  o.cooldown_seconds = 0.001;
  o.variant = "v1";  // the preset's mechanics do not depend on the variant (the CLI's quick test runs V2)
  o.command_line = "test_bench_api";
  std::vector<std::string> report, info;
  o.report = [&](const std::string& line) { report.push_back(line); };
  o.log = [&](bench::LogLevel level, const std::string& m) {
    if (level == bench::LogLevel::info) info.push_back(m);
  };
  const bench::Result r = bench::run(*ctx, o);
  INFO(r.json);
  CHECK(r.outputs_checked);
  const auto j = nlohmann::json::parse(r.json);
  CHECK(j.at("preset") == "phone");
  CHECK(j.at("command_line") == "test_bench_api");
  const auto& cfg = j.at("config");
  CHECK(cfg.at("preset") == "phone");
  CHECK(cfg.at("cooldown_s").get<double>() == doctest::Approx(0.001));
  CHECK(cfg.at("thermal_recorded").get<bool>());
  CHECK(cfg.at("T_cap").get<uint32_t>() == 2048);
  for (const char* k : {"T_decode", "T_prefill"})
    for (const auto& t : cfg.at(k)) CHECK(t.get<uint32_t>() <= 2048);
  const uint64_t copy = cfg.at("copy_bytes").get<uint64_t>();
  CHECK(copy == (64ull << 20));
  CHECK(cfg.at("copy_bytes_rule").get<std::string>().find("phone") != std::string::npos);
  CHECK(j.at("ceilings").at("copy").at("bytes_each_buffer").get<uint64_t>() == copy);
  bool budget_note = false;
  for (const auto& n : j.at("notes"))
    budget_note |= n.get<std::string>().find("skipped by the time budget") != std::string::npos;
  CHECK(budget_note);
  const auto& cases = j.at("cases");
  REQUIRE(cases.size() >= 2);  // one decode and one prefill case at least
  for (const auto& c : cases) {
    INFO(c.dump());
    CHECK(c.at("cooldown_s").get<double>() == doctest::Approx(0.001));
    CHECK(c.at("outputs_checked").get<bool>());
    for (const char* when : {"before", "after"}) {
      const auto& t = c.at("thermal").at(when);
      const std::string state = t.at("state");
      CHECK((state == "ok" || state == "not readable"));
      REQUIRE(t.at("zones").is_array());
      size_t readable = 0;
      for (const auto& z : t.at("zones")) {
        if (z.contains("temp_c")) {
          ++readable;
          CHECK(std::isfinite(z.at("temp_c").get<double>()));
        } else {
          CHECK(z.at("state") == "not readable");
        }
      }
      CHECK((state == "ok") == (readable > 0));
    }
  }
  bool header = false, checked = false;
  for (const auto& l : report) {
    header |= l == "diffvk bench";
    checked |= l.rfind("outputs checked: yes", 0) == 0;
  }
  CHECK(header);
  CHECK(checked);
  CHECK(!info.empty());
}

TEST_CASE("bench api: the copy buffer size rule picks 4x the CPU cache or 256 MiB and names the rule") {
  DeviceCaps gpu;
  gpu.kind = DeviceKind::discrete;
  gpu.max_storage_buffer_range = 4ull << 30;
  DeviceCaps cpu = gpu;
  cpu.kind = DeviceKind::cpu;
  bench::Options o;
  std::string rule;
  CHECK(bench::copy_buffer_bytes(o, gpu, 32ull << 20, rule) == (256ull << 20));  // a GPU's cache is not the host's
  CHECK(rule.find("256 MiB") != std::string::npos);
  CHECK(bench::copy_buffer_bytes(o, cpu, 32ull << 20, rule) == (128ull << 20));
  CHECK(rule.find("4x the largest CPU cache") != std::string::npos);
  CHECK(bench::copy_buffer_bytes(o, cpu, 0, rule) == (256ull << 20));
  CHECK(rule.find("not readable") != std::string::npos);
  CHECK(bench::copy_buffer_bytes(o, cpu, 1536ull << 10, rule) == (6ull << 20));
  o.preset = "phone";
  CHECK(bench::copy_buffer_bytes(o, cpu, 32ull << 20, rule) == (64ull << 20));
  CHECK(rule.find("phone") != std::string::npos);
  o.quick = true;
  CHECK(bench::copy_buffer_bytes(o, gpu, 0, rule) == (16ull << 20));
  CHECK(rule.find("quick") != std::string::npos);
  o.copy_bytes = 3ull << 20;
  CHECK(bench::copy_buffer_bytes(o, gpu, 0, rule) == (3ull << 20));
  CHECK(rule.find("given") != std::string::npos);
  // Caps: the binding range, a device-local heap (1/8 of it), the allocation size.
  o = bench::Options{};
  gpu.max_storage_buffer_range = 100ull << 20;
  CHECK(bench::copy_buffer_bytes(o, gpu, 0, rule) == (100ull << 20));
  CHECK(rule.find("capped by maxStorageBufferRange") != std::string::npos);
  gpu.heaps.push_back(MemoryHeapInfo{512ull << 20, true});
  CHECK(bench::copy_buffer_bytes(o, gpu, 0, rule) == (64ull << 20));
  CHECK(rule.find("device-local heap") != std::string::npos);
  gpu.max_memory_allocation_size = (32ull << 20) + 5;
  CHECK(bench::copy_buffer_bytes(o, gpu, 0, rule) == (32ull << 20));
  CHECK(rule.find("maxMemoryAllocationSize") != std::string::npos);

  CHECK(bench::parse_cache_size("32768K") == (32ull << 20));
  CHECK(bench::parse_cache_size("1M") == (1ull << 20));
  CHECK(bench::parse_cache_size("512") == 512);
  CHECK(bench::parse_cache_size("K") == 0);
  CHECK(bench::parse_cache_size("12X") == 0);
}

TEST_CASE("bench api: fraction_of_peak is the larger of the FMA and copy fractions") {
  bench::Ceilings c;
  c.copy.gbps = 100;
  c.fma32.measured = true;
  c.fma32.gflops = 1000;
  c.fma16.gflops = 4000;  // never the kernels' ceiling: they accumulate in fp32
  const bench::PeakFraction mem = bench::peak_fraction(c, 100, 50);
  CHECK(mem.flops == doctest::Approx(0.1));
  CHECK(mem.bytes == doctest::Approx(0.5));
  CHECK(mem.peak == doctest::Approx(0.5));
  CHECK(std::string(mem.bound) == "copy");
  const bench::PeakFraction alu = bench::peak_fraction(c, 800, 10);
  CHECK(alu.peak == doctest::Approx(0.8));
  CHECK(std::string(alu.bound) == "fma");
  bench::json row;
  bench::add_peak_fields(row, alu);
  CHECK(row.at("fraction_of_peak").get<double>() == doctest::Approx(0.8));
  CHECK(row.at("fraction_of_copy_ceiling").get<double>() == doctest::Approx(0.1));
  CHECK(row.at("peak_bound") == "fma");
  CHECK(bench::ceilings_json(c).at("fma_f16_gflops").is_null());  // not measured
  CHECK(bench::ceilings_json(c).at("fma_f32_gflops").get<double>() == 1000);
}

TEST_CASE("bench api: thermal zones are read from sysfs or reported not readable") {
  const std::string root = "/tmp/diffvk_thermal_test_" + std::to_string(::getpid());
  ::mkdir(root.c_str(), 0700);
  CHECK(bench::read_thermal(root).at("state") == "not readable");  // no zones
  CHECK(bench::read_thermal(root + "/missing").at("state") == "not readable");
  for (const char* z : {"/thermal_zone0", "/thermal_zone1", "/thermal_zone10", "/thermal_zone2"})
    ::mkdir((root + z).c_str(), 0700);
  write(root + "/thermal_zone0/type", "cpu-thermal\n");
  write(root + "/thermal_zone0/temp", "45500\n");
  write(root + "/thermal_zone1/type", "gpu-thermal\n");  // no temp
  write(root + "/thermal_zone2/temp", "garbage\n");
  write(root + "/thermal_zone10/temp", "-1250\n");
  const auto j = bench::read_thermal(root);
  INFO(j.dump());
  CHECK(j.at("state") == "ok");
  const auto& z = j.at("zones");
  REQUIRE(z.size() == 4);
  CHECK(z[0].at("zone") == "thermal_zone0");
  CHECK(z[0].at("type") == "cpu-thermal");
  CHECK(z[0].at("temp_c").get<double>() == doctest::Approx(45.5));
  CHECK(z[1].at("state") == "not readable");
  CHECK(!z[1].contains("temp_c"));
  CHECK(z[2].at("zone") == "thermal_zone2");  // numeric order
  CHECK(z[2].at("state") == "not readable");
  CHECK(z[2].at("type").is_null());
  CHECK(z[3].at("zone") == "thermal_zone10");
  CHECK(z[3].at("temp_c").get<double>() == doctest::Approx(-1.25));
  for (const char* f : {"/thermal_zone0/type", "/thermal_zone0/temp", "/thermal_zone1/type", "/thermal_zone2/temp",
                        "/thermal_zone10/temp"})
    std::remove((root + f).c_str());
  for (const char* d : {"/thermal_zone0", "/thermal_zone1", "/thermal_zone2", "/thermal_zone10", ""})
    ::rmdir((root + d).c_str());
}

TEST_CASE("bench api: bad options are refused before any work and cancel stops the run") {
  auto ctx = test::make_context();
  int reports = 0;
  auto with = [&](auto&& edit) {
    bench::Options o;
    o.report = [&](const std::string&) { ++reports; };
    edit(o);
    return test::status_of([&] { bench::run(*ctx, o); });
  };
  CHECK(with([](bench::Options& o) { o.preset = "tablet"; }) == Status::invalid_argument);
  CHECK(with([](bench::Options& o) { o.phase = "both-ways"; }) == Status::invalid_argument);
  CHECK(with([](bench::Options& o) { o.budget_seconds = std::numeric_limits<double>::quiet_NaN(); }) ==
        Status::invalid_argument);
  CHECK(with([](bench::Options& o) { o.cooldown_seconds = 1e9; }) == Status::invalid_argument);
  CHECK(with([](bench::Options& o) { o.d = {63}; }) == Status::invalid_argument);
  CHECK(with([](bench::Options& o) { o.copy_bytes = 1000; }) == Status::invalid_argument);
  CHECK(with([](bench::Options& o) { o.heads = {3}, o.kv_heads = {2}; }) == Status::invalid_argument);  // empty grid
  CHECK(with([](bench::Options& o) { o.op = "conv2d"; }) == Status::invalid_argument);                  // no case table
  CHECK(with([](bench::Options& o) { o.context_fill = "random"; }) == Status::invalid_argument);
  CHECK(with([](bench::Options& o) { o.ops = true, o.model_dir = "/nonexistent"; }) == Status::invalid_argument);
  CHECK(reports == 0);
  // Cancelled at the first check: nothing measured, nothing reported.
  CHECK(with([](bench::Options& o) { o.preset = "phone", o.cancel = [] { return true; }; }) == Status::cancelled);
  CHECK(reports == 0);
  // Cancelled inside the first case, at its third check point (between its output checks).
  int checks = 0;
  bool started = false;
  CHECK(with([&](bench::Options& o) {
          o.quick = true;
          o.copy_bytes = 1u << 20;
          o.log = [&](bench::LogLevel, const std::string& m) { started |= m.find("[1/") == 0; };
          o.cancel = [&] { return started && ++checks > 2; };
        }) == Status::cancelled);
  CHECK(started);
  CHECK(checks == 3);
}

TEST_CASE("bench api: op rows come from the op case table and are checked before they are timed") {
  auto ctx = test::make_context();
  bench::Options o;
  o.op = "silu_mul";  // implies ops
  o.quick = true;
  o.copy_bytes = 1u << 20;
  o.runs = 2;
  std::vector<std::string> report;
  o.report = [&](const std::string& line) { report.push_back(line); };
  const bench::Result r = bench::run(*ctx, o);
  INFO(r.json);
  CHECK(r.outputs_checked);
  const auto j = nlohmann::json::parse(r.json);
  CHECK(j.at("outputs_checked").get<bool>());
  const auto& ops = j.at("ops");
  CHECK(ops.size() == 1);
  const auto& rows = ops.at("silu_mul");
  const std::string precision = precision_name(ctx->precision());
  size_t expected = 0;
  for (const auto& c : bench::op_cases("silu_mul", bench::OpMode::bench))
    expected += (c->fp16 ? "fp16" : "fp32") == precision;
  REQUIRE(rows.size() == expected);
  for (const auto& row : rows) {
    CHECK(row.at("output_checked").get<bool>());
    CHECK(row.at("check").at("replay_identical").get<bool>());
    CHECK(row.at("time").at("samples_us").size() == 2);
    CHECK(row.at("time").at("median_us").get<double>() > 0);
    CHECK(row.at("GBps").get<double>() > 0);
    CHECK(row.at("precision") == precision);
  }
  bool table_line = false;
  for (const auto& line : report)
    table_line |= line.rfind("silu_mul ", 0) == 0 && line.find("ok (max_abs") != std::string::npos;
  CHECK(table_line);
}

TEST_CASE("bench api: the matmul table has the sweep's shapes and weight types in each precision") {
  const auto full = bench::matmul_table_cases(true);
  CHECK(full.size() == 2 * 4 * 5 * 3);  // precisions x M x (K, N) x weights
  std::set<std::string> names;
  for (const auto& c : full) {
    CHECK(std::string(c->op()) == "linear");
    const bench::LinearCaseParams& p = bench::case_as<bench::LinearCase>(*c).p;
    CHECK((p.rows == 1 || p.rows == 8 || p.rows == 64 || p.rows == 512));
    CHECK(p.in % 32 == 0);  // quantized blocks along K
    names.insert(c->name);
  }
  CHECK(names.size() == full.size());  // every row is named apart
  const auto one = bench::matmul_table_cases(false);
  REQUIRE(one.size() == 2);
  const bench::LinearCaseParams& p0 = bench::case_as<bench::LinearCase>(*one[0]).p;
  CHECK((p0.rows == 512 && p0.in == 2048 && p0.out == 2048 && p0.weights == QuantType::f16));
}
