// CI smoke test of `diffvk bench --quick`: exit 0, the JSON report has the expected fields and says
// every output was checked, the PNG exists with a valid header, and (the test environment enables
// the Khronos validation layer) no validation message was logged.
#include <doctest/doctest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>

namespace {
std::string slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}
uint32_t be32(const std::string& s, size_t at) {
  return uint32_t(uint8_t(s[at])) << 24 | uint32_t(uint8_t(s[at + 1])) << 16 | uint32_t(uint8_t(s[at + 2])) << 8 |
         uint32_t(uint8_t(s[at + 3]));
}
}  // namespace

TEST_CASE("bench cli: quick run writes a checked JSON report and a PNG plot") {
  const std::string base = "/tmp/diffvk_bench_cli_test_" + std::to_string(::getpid());
  const std::string json_path = base + ".json", png_path = base + ".png", log_path = base + ".log";
  std::remove(json_path.c_str());
  std::remove(png_path.c_str());
  const std::string cmd = std::string(DIFFVK_CLI_PATH) + " bench --quick --json " + json_path + " --plot " + png_path +
                          " > " + log_path + " 2>&1";
  const int rc = std::system(cmd.c_str());
  const std::string log = slurp(log_path);
  INFO("command: " << cmd << "\noutput:\n" << log);
  REQUIRE(rc == 0);
  CHECK(log.find("outputs checked: yes") != std::string::npos);
  CHECK(log.find("validation:") == std::string::npos);  // no validation-layer message was logged

  const auto j = nlohmann::json::parse(slurp(json_path));
  CHECK(j.at("outputs_checked").get<bool>());
  CHECK(j.at("command_line").get<std::string>().find("bench --quick") != std::string::npos);
  CHECK(!j.at("device").at("name").get<std::string>().empty());
  CHECK(j.at("device").contains("max_storage_buffer_range"));
  CHECK(j.contains("fp32_fallback"));
  // The ceilings are the device's (copy probe, FMA probe), never a diffvk kernel.
  const auto& ceil = j.at("ceilings");
  CHECK(ceil.at("copy_gbps").get<double>() > 0);
  CHECK(ceil.at("copy").at("GBps").get<double>() == ceil.at("copy_gbps").get<double>());
  CHECK(!ceil.at("copy").at("bytes_rule").get<std::string>().empty());
  CHECK(ceil.at("fma_f32_gflops").get<double>() > 0);
  CHECK(ceil.at("fma_f32").at("time").at("median_us").get<double>() > 0);
  CHECK(!ceil.contains("matmul"));
  if (j.at("device").at("fp16_in_use").get<bool>()) {
    CHECK(ceil.at("fma_f16_gflops").get<double>() > 0);
  } else {
    CHECK(ceil.at("fma_f16_gflops").is_null());
    CHECK(!ceil.at("fma_f16").at("reason").get<std::string>().empty());
  }
  CHECK(log.find("fp32 FMA") != std::string::npos);
  CHECK(log.find("%mm") == std::string::npos);
  const auto& cases = j.at("cases");
  REQUIRE(cases.size() >= 2);
  bool prefill = false, decode = false, v2_prefill = false, v2_decode = false;
  for (const auto& c : cases) {
    INFO(c.dump());
    const bool v2 = c.at("variant") == "v2";
    (c.at("phase") == "prefill" ? (v2 ? v2_prefill : prefill) : (v2 ? v2_decode : decode)) = true;
    CHECK(c.at("outputs_checked").get<bool>());
    CHECK(c.at("bytes_must_move").get<double>() > 0);
    CHECK(c.at("flops").get<double>() > 0);
    if (v2) {  // DIFF V2: plain H and plain 2H rows on the same cache
      CHECK(c.at("plain_2H_over_fused").get<double>() > 0);
    } else {
      CHECK(!c.at("implementations").contains("plain H"));
    }
    for (const char* impl : {"fused", "two-pass", "naive", "plain H", "plain 2H"}) {
      if (std::string(impl).rfind("plain", 0) == 0 && !v2) continue;
      const auto& im = c.at("implementations").at(impl);
      CHECK(im.at("output_checked").get<bool>());
      CHECK(im.at("time").at("median_us").get<double>() > 0);
      CHECK(im.at("time").at("min_us").get<double>() <= im.at("time").at("max_us").get<double>());
      CHECK(im.at("GBps").get<double>() > 0);
      const double fc = im.at("fraction_of_copy_ceiling").get<double>(),
                   ff = im.at("fraction_of_fma_ceiling").get<double>();
      CHECK(fc > 0);
      CHECK(ff > 0);
      CHECK(im.at("fraction_of_peak").get<double>() == std::max(fc, ff));
      CHECK(im.at("peak_bound") == (ff > fc ? "fma" : "copy"));
      CHECK(!im.contains("pct_matmul_rate"));
      CHECK(im.at("check_vs_cpu").at("ok").get<bool>());
    }
    CHECK(c.at("fused_speedup_vs_two_pass").get<double>() > 0);
    CHECK(c.at("fused_speedup_vs_naive").get<double>() > 0);
  }
  CHECK(prefill);
  CHECK(decode);
  CHECK(v2_prefill);  // --variant defaults to both
  CHECK(v2_decode);
  CHECK(j.at("targets").is_array());

  const std::string png = slurp(png_path);
  REQUIRE(png.size() > 33);
  CHECK(png.compare(0, 8, std::string("\x89PNG\r\n\x1a\n", 8)) == 0);
  CHECK(png.compare(12, 4, "IHDR") == 0);
  CHECK(be32(png, 16) >= 800);  // width
  CHECK(be32(png, 20) >= 600);  // height
  std::remove(json_path.c_str());
  std::remove(png_path.c_str());
  std::remove(log_path.c_str());
}

TEST_CASE("bench cli: an unknown preset or a negative cool-down is refused before any work") {
  const std::string log_path = "/tmp/diffvk_bench_cli_flags_" + std::to_string(::getpid()) + ".log";
  for (const char* flags : {"--preset tablet", "--preset phone --cooldown -1", "--copy-mib 0"}) {
    const std::string cmd = std::string(DIFFVK_CLI_PATH) + " bench " + flags + " > " + log_path + " 2>&1";
    const int rc = std::system(cmd.c_str());
    const std::string log = slurp(log_path);
    INFO("command: " << cmd << "\noutput:\n" << log);
    CHECK(rc != 0);
    CHECK(log.find("ceilings:") == std::string::npos);  // nothing was measured
    CHECK((log.find("--preset") != std::string::npos || log.find("--cooldown") != std::string::npos ||
           log.find("--copy-mib") != std::string::npos));
  }
  std::remove(log_path.c_str());
}

TEST_CASE("bench cli: --shape names a published shape, and unknown and conflicting ones are refused before any work") {
  const std::string log_path = "/tmp/diffvk_bench_cli_shape_" + std::to_string(::getpid()) + ".log";
  struct Bad {
    const char* flags;
    const char* says;
  };
  for (const Bad& b : {Bad{"--shape gpt-2", "unknown shape 'gpt-2' (known: diffllama-1b"},
                       Bad{"--shape diffllama-1b --ops", "two different benchmarks"},
                       Bad{"--shape diffllama-1b --contexts 0", "--contexts"},
                       Bad{"--shape diffllama-1b --contexts 512 --context-fill random", "--context-fill"}}) {
    const std::string cmd = std::string(DIFFVK_CLI_PATH) + " bench " + b.flags + " > " + log_path + " 2>&1";
    const int rc = std::system(cmd.c_str());
    const std::string log = slurp(log_path);
    INFO("command: " << cmd << "\noutput:\n" << log);
    CHECK(rc != 0);
    CHECK(log.find("ceilings:") == std::string::npos);  // nothing was measured
    CHECK(log.find(b.says) != std::string::npos);
  }
  std::remove(log_path.c_str());
}

TEST_CASE("bench cli: --preset phone runs end to end and records the cool-down and the thermal readings") {
  const std::string base = "/tmp/diffvk_bench_cli_phone_" + std::to_string(::getpid());
  const std::string json_path = base + ".json", png_path = base + ".png", log_path = base + ".log";
  // A tiny budget: the first case of each series runs (it calibrates), the rest are skipped by the budget.
  // --variant v1: the preset's mechanics do not depend on the variant (the quick test runs the V2 cases).
  const std::string cmd = std::string(DIFFVK_CLI_PATH) +
                          " bench --preset phone --variant v1 --budget 0.01 --cooldown 0.01 --json " + json_path +
                          " --plot " + png_path + " > " + log_path + " 2>&1";
  const int rc = std::system(cmd.c_str());
  const std::string log = slurp(log_path);
  INFO("command: " << cmd << "\noutput:\n" << log);
  REQUIRE(rc == 0);
  CHECK(log.find("outputs checked: yes") != std::string::npos);
  CHECK(log.find("validation:") == std::string::npos);
  const auto j = nlohmann::json::parse(slurp(json_path));
  CHECK(j.at("preset") == "phone");
  CHECK(j.at("config").at("thermal_recorded").get<bool>());
  CHECK(j.at("config").at("T_cap").get<uint32_t>() == 2048);
  const uint64_t copy = j.at("config").at("copy_bytes").get<uint64_t>();
  CHECK(copy <= (64ull << 20));
  CHECK(j.at("config").at("copy_bytes_rule").get<std::string>().find("phone") != std::string::npos);
  REQUIRE(j.at("cases").size() >= 2);
  for (const auto& c : j.at("cases")) {
    INFO(c.dump());
    CHECK(c.at("outputs_checked").get<bool>());
    CHECK(c.at("cooldown_s").get<double>() == doctest::Approx(0.01));
    CHECK(c.at("thermal").at("before").contains("state"));
    CHECK(c.at("thermal").at("after").contains("state"));
  }
  const std::string png = slurp(png_path);
  REQUIRE(png.size() > 33);
  CHECK(png.compare(0, 8, std::string("\x89PNG\r\n\x1a\n", 8)) == 0);
  for (const auto& p : {json_path, png_path, log_path}) std::remove(p.c_str());
}

TEST_CASE("bench cli: --model on a sharded BF16 Hugging Face checkpoint reports the loading figures") {
  const std::string base = "/tmp/diffvk_bench_cli_model_" + std::to_string(::getpid());
  const std::string json_path = base + ".json", log_path = base + ".log";
  const std::string dir = std::string(DIFFVK_TEST_DATA_DIR) + "/hf_gqa_llama3";
  const std::string cmd = std::string(DIFFVK_CLI_PATH) + " bench --model " + dir +
                          " --prompt-tokens 12 --decode-tokens 4 --runs 1 --speculate lookup --draft-k 2 --json " +
                          json_path + " > " + log_path + " 2>&1";
  const int rc = std::system(cmd.c_str());
  const std::string log = slurp(log_path);
  INFO("command: " << cmd << "\noutput:\n" << log);
  REQUIRE(rc == 0);
  CHECK(log.find("validation:") == std::string::npos);
  const auto j = nlohmann::json::parse(slurp(json_path));
  const auto& load = j.at("load");
  CHECK(load.at("format") == "diffllama");
  CHECK(load.at("files").get<uint32_t>() == 2);  // two shards
  const uint64_t largest = load.at("largest_tensor_bytes").get<uint64_t>();
  CHECK(largest > 0);
  // BF16 -> storage type goes through the bounded slice, or straight into mapped device memory (0).
  CHECK(load.at("staging_peak_bytes").get<uint64_t>() <= 2 * std::max<uint64_t>(largest, 16ull << 20));
  CHECK(load.at("split_tensors").get<uint32_t>() == 0);
  // Linux: VmHWM growth over the load is reported (a number), elsewhere null.
  CHECK((load.at("peak_rss_delta_bytes").is_number() || load.at("peak_rss_delta_bytes").is_null()));
  CHECK(j.at("prefill").at("tokens").get<uint32_t>() == 12);
  CHECK(j.at("decode").at("tokens").get<uint32_t>() == 4);
  CHECK(j.at("decode").at("tokens_per_s").get<double>() > 0);
  // Wall-clock seconds per call, named in seconds (they were once named median_us).
  for (const char* phase : {"prefill", "decode"}) {
    const auto& ph = j.at(phase);
    INFO(ph.dump());
    CHECK(ph.at("seconds").at("median_s").get<double>() > 0);
    CHECK(ph.at("seconds").at("min_s").get<double>() <= ph.at("seconds").at("max_s").get<double>());
    CHECK(!ph.at("seconds").contains("median_us"));
    CHECK(ph.at("fraction_of_peak").get<double>() > 0);
    CHECK(ph.at("fraction_of_peak").get<double>() ==
          std::max(ph.at("fraction_of_fma_ceiling").get<double>(), ph.at("fraction_of_copy_ceiling").get<double>()));
  }
  CHECK(j.at("ceilings").at("fma_f32_gflops").get<double>() > 0);
  // The saved-state row: the prompt's state, checked, then timed (no speed asserted here).
  const auto& st = j.at("session_state");
  CHECK(st.at("tokens").get<uint32_t>() == 12);
  CHECK(st.at("bytes").get<uint64_t>() > 12 * 4);
  CHECK(st.at("checked").get<bool>());
  CHECK(st.at("restore_seconds").at("median_s").get<double>() > 0);
  CHECK(log.find("session state: 12 tokens") != std::string::npos);
  CHECK(j.at("decode").at("fraction_of_copy_ceiling").get<double>() ==
        doctest::Approx(j.at("decode").at("fraction_of_bound").get<double>()));
  // The cold-start figures, with the self-test at context creation (off in the tests: DIFFVK_SELFTEST=off).
  const auto& cold = j.at("cold_start");
  CHECK(cold.at("selftest") == "not run");
  CHECK(cold.at("selftest_seconds").get<double>() == 0);
  CHECK(cold.at("selftest_deferred").empty());  // nothing left to a first record where nothing was tested
  CHECK(cold.at("time_to_first_token_with_selftest_seconds").get<double>() ==
        doctest::Approx(cold.at("time_to_first_token_seconds").get<double>()));
  // The speculation row of one weight type (.ci/sanitize runs the bench's speculation here, not in --weights all).
  const auto& sp = j.at("speculate");
  INFO(sp.dump());
  CHECK(sp.at("draft") == "lookup");
  CHECK(sp.at("pass_rows") == 3);
  CHECK(sp.at("accepted").get<uint32_t>() <= sp.at("drafted").get<uint32_t>());
  CHECK(sp.at("speculative_tokens_per_s").get<double>() > 0);
  CHECK(sp.at("same_tokens").is_boolean());
  for (const auto& p : {json_path, log_path}) std::remove(p.c_str());
}

TEST_CASE("bench cli: --ops --op writes the op rows of the case table and refuses an op without one") {
  const std::string base = "/tmp/diffvk_bench_cli_ops_test_" + std::to_string(::getpid());
  const std::string json_path = base + ".json", log_path = base + ".log";
  std::remove(json_path.c_str());
  const std::string cmd = std::string(DIFFVK_CLI_PATH) +
                          " bench --ops --op head_rmsnorm --quick --runs 2 --copy-mib 1 --json " + json_path + " > " +
                          log_path + " 2>&1";
  const int rc = std::system(cmd.c_str());
  const std::string log = slurp(log_path);
  INFO("command: " << cmd << "\noutput:\n" << log);
  REQUIRE(rc == 0);
  CHECK(log.find("all outputs checked") != std::string::npos);
  CHECK(log.find("validation:") == std::string::npos);
  const auto j = nlohmann::json::parse(slurp(json_path));
  CHECK(j.at("outputs_checked").get<bool>());
  CHECK(j.at("ops").size() == 1);
  const auto& rows = j.at("ops").at("head_rmsnorm");
  REQUIRE(rows.size() >= 1);
  for (const auto& row : rows) {
    INFO(row.dump());
    CHECK(row.at("output_checked").get<bool>());
    CHECK(row.at("time").at("median_us").get<double>() > 0);
    CHECK(row.at("fraction_of_copy_ceiling").get<double>() > 0);
    CHECK(row.at("fraction_of_fma_ceiling").get<double>() > 0);
    CHECK(row.at("fraction_of_peak").get<double>() > 0);
    CHECK(!row.contains("fraction_of_matmul_ceiling"));
  }
  CHECK(j.at("ceilings").at("fma_f32_gflops").get<double>() > 0);
  CHECK(j.at("ceilings").at("copy").at("bytes_each_buffer").get<uint64_t>() == (1ull << 20));
  std::remove(json_path.c_str());
  const std::string bad = std::string(DIFFVK_CLI_PATH) + " bench --op conv2d > " + log_path + " 2>&1";
  CHECK(std::system(bad.c_str()) != 0);
  CHECK(slurp(log_path).find("no case table for op 'conv2d'") != std::string::npos);
  std::remove(log_path.c_str());
}

TEST_CASE("bench cli: --model --weights all puts every weight type side by side, with --speculate lookup figures") {
  const std::string base = "/tmp/diffvk_bench_cli_weights_" + std::to_string(::getpid());
  const std::string json_path = base + ".json", log_path = base + ".log";
  const std::string dir = std::string(DIFFVK_TEST_DATA_DIR) + "/../../examples/models/tiny-diff";
  // The speculation's prompt: the summarise fixture's text through the model's tokenizer (bytes: one token per
  // byte, and BOS).
  const std::string prompt_file = std::string(DIFFVK_TEST_DATA_DIR) + "/speculate/summarise.txt";
  const size_t prompt_tokens = slurp(prompt_file).size() + 1;
  const std::string cmd =
      std::string(DIFFVK_CLI_PATH) + " bench --model " + dir +
      " --weights all --prompt-tokens 16 --decode-tokens 4 --runs 1 --copy-mib 8 --speculate lookup "
      "--draft-k 4 --speculate-prompt " +
      prompt_file + " --json " + json_path + " > " + log_path + " 2>&1";
  const int rc = std::system(cmd.c_str());
  const std::string log = slurp(log_path);
  INFO("command: " << cmd << "\noutput:\n" << log);
  REQUIRE(rc == 0);
  CHECK(log.find("validation:") == std::string::npos);
  CHECK(log.find("weight types side by side") != std::string::npos);
  CHECK(log.find("speculate (lookup, k 4") != std::string::npos);
  const auto j = nlohmann::json::parse(slurp(json_path));
  const auto& types = j.at("weight_types");
  REQUIRE(types.size() == 3);
  const char* names[] = {"f16", "q8_0", "q4_0"};
  double last_bits = 1e9;
  uint64_t last_bytes = ~0ull;
  for (size_t i = 0; i < 3; ++i) {
    const auto& t = types[i];
    INFO(t.dump());
    CHECK(t.at("weights") == names[i]);
    const double bits = t.at("bits_per_weight").get<double>();
    const uint64_t bytes = t.at("model").at("weight_bytes_per_token").get<uint64_t>();
    CHECK(bits < last_bits);  // f16 ~16 (32 on an fp32 device), q8_0 ~8.5, q4_0 below 8.5 (the tied head: Q8_0)
    CHECK(bytes < last_bytes);
    CHECK(t.at("peak_device_bytes").get<uint64_t>() >= bytes);
    CHECK(t.at("decode").at("tokens_per_s").get<double>() > 0);
    CHECK(t.at("decode").at("fraction_of_bound").get<double>() > 0);
    const auto& sp = t.at("speculate");  // a 5-row pass against a one-row decode; 4 tokens with and without drafts
    CHECK(sp.at("draft") == "lookup");
    CHECK(sp.at("pass_rows") == 5);
    CHECK(sp.at("accepted").get<uint32_t>() <= sp.at("drafted").get<uint32_t>());
    CHECK(sp.at("pass_vs_one_row").get<double>() > 0);
    CHECK(sp.at("speculative_tokens_per_s").get<double>() > 0);
    CHECK(sp.at("same_tokens").is_boolean());
    CHECK(sp.at("prompt_file") == prompt_file);
    CHECK(sp.at("prompt_tokens").get<size_t>() == prompt_tokens);
    // The self-test at context creation counts in the first type's cold start only (off in the tests).
    CHECK(t.at("cold_start").at("selftest") == (i == 0 ? "not run" : "counted in the first weight type"));
    last_bits = bits;
    last_bytes = bytes;
  }
  // "f16" = the storage type: 16 bits on fp16 devices, 32 on the fp32 fallback (SwiftShader).
  const double storage_bits = j.at("precision").get<std::string>() == "fp32" ? 32.0 : 16.0;
  CHECK(types[0].at("bits_per_weight").get<double>() == doctest::Approx(storage_bits).epsilon(0.01));
  CHECK(j.at("ceilings").at("fma_f32_gflops").get<double>() > 0);
  // A bad name in the list is refused before any work.
  const std::string bad =
      std::string(DIFFVK_CLI_PATH) + " bench --model " + dir + " --weights f16,q5_1 > " + log_path + " 2>&1";
  CHECK(std::system(bad.c_str()) != 0);
  CHECK(slurp(log_path).find("q5_1") != std::string::npos);
  // A prompt file without --speculate is refused, naming the option, before any work.
  const std::string lone = std::string(DIFFVK_CLI_PATH) + " bench --model " + dir + " --speculate-prompt " +
                           prompt_file + " > " + log_path + " 2>&1";
  CHECK(std::system(lone.c_str()) != 0);
  CHECK(slurp(log_path).find("speculate_prompt needs speculate") != std::string::npos);
  for (const auto& p : {json_path, log_path}) std::remove(p.c_str());
}
