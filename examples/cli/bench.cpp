// diffvk bench: the on-device benchmark, a front end over diffvk_bench (include/diffvk/bench.hpp):
// parses the flags, opens the device, prints the report on stdout and the progress on stderr, writes --json.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <memory>

#include "commands.hpp"
#include "diffvk/bench.hpp"
#include "diffvk/atomic_write.hpp"

namespace diffvk::cli {

namespace {

// --weights: "all" (f16, q8_0, q4_0) or a comma-separated list of types, duplicates dropped, in order.
std::vector<QuantKind> parse_weight_list(const std::string& v) {
  const std::string list = v == "all" ? "f16,q8_0,q4_0" : v;
  std::vector<QuantKind> kinds;
  for (size_t start = 0; start <= list.size();) {
    const size_t comma = std::min(list.find(',', start), list.size());
    const QuantKind k = parse_quant_kind(list.substr(start, comma - start));
    if (std::find(kinds.begin(), kinds.end(), k) == kinds.end()) kinds.push_back(k);
    start = comma + 1;
  }
  return kinds;
}

struct BenchArgs {
  DeviceFlags dev;
  bench::Options o;
  double copy_mib = 0;
  std::string json_path;
};

// Progress on stderr: on a terminal one line rewritten in place (stages and steps); otherwise one
// line per stage, to keep logs short. Warnings always get their own line.
class Progress {
 public:
  Progress() : tty_(isatty(2)) {}
  void log(bench::LogLevel level, const std::string& s) {
    if (level == bench::LogLevel::debug && !tty_) return;
    if (tty_ && level >= bench::LogLevel::info) {
      std::fprintf(stderr, "\r\033[K%s", s.c_str());
      shown_ = true;
    } else {
      clear();
      std::fprintf(stderr, "%s\n", s.c_str());
    }
    std::fflush(stderr);
  }
  void clear() {
    if (tty_ && shown_) std::fprintf(stderr, "\r\033[K");
    shown_ = false;
    std::fflush(stderr);
  }

 private:
  bool tty_;
  bool shown_ = false;
};

}  // namespace

Runner register_bench(CLI::App& app) {
  auto a = std::make_shared<BenchArgs>();
  bench::Options& o = a->o;
  auto* cmd = app.add_subcommand(
      "bench", "on-device benchmark: ceilings, then fused vs two-pass vs naive differential attention");
  cmd->add_option("--preset", o.preset,
                  "default (full grid, time-budgeted) or phone (20 s, 64 MiB copy, T <= 2048, cool-down "
                  "between cases, thermal zones recorded)")
      ->check(CLI::IsMember({"default", "phone"}));
  cmd->add_option("--phase", o.phase, "prefill (S = T), decode (S = 1 against T cached keys) or both")
      ->check(CLI::IsMember({"prefill", "decode", "both"}));
  cmd->add_option("--variant", o.variant,
                  "attention cases: v1 (differential attention), v2 (DIFF V2: fused, two-pass, plain H and 2H query "
                  "heads) or both")
      ->check(CLI::IsMember({"v1", "v2", "both"}));
  cmd->add_option("--d", o.d, "head half widths D (list, e.g. 64,128)")->delimiter(',')->check(CLI::Range(2u, 256u));
  cmd->add_option("--t", o.t,
                  "context lengths T (list, e.g. 512,1024,2048,4096,8192); given explicitly, no budget trimming")
      ->delimiter(',')
      ->check(CLI::Range(1u, 1u << 20));
  cmd->add_option("--t-prefill", o.t_prefill, "prefill context lengths (list; overrides --t for prefill)")
      ->delimiter(',')
      ->check(CLI::Range(1u, 1u << 20));
  cmd->add_option("--t-decode", o.t_decode, "decode context lengths (list; overrides --t for decode)")
      ->delimiter(',')
      ->check(CLI::Range(1u, 1u << 20));
  cmd->add_option("--heads", o.heads, "differential heads H (list)")->delimiter(',')->check(CLI::Range(1u, 1024u));
  cmd->add_option("--kv-heads", o.kv_heads, "key/value groups Hkv (list; pairs with H where H % Hkv == 0)")
      ->delimiter(',')
      ->check(CLI::Range(1u, 1024u));
  cmd->add_option("--runs", o.runs, "timed runs per implementation (default 20; 10 for phone; 3 on a CPU device)")
      ->check(CLI::Range(1, 100000));
  cmd->add_option("--warmup", o.warmup,
                  "untimed runs per implementation before timing; the output-check run counts as the first (default 3; "
                  "1 on a CPU device)")
      ->check(CLI::Range(0, 100000));
  cmd->add_option("--budget", o.budget_seconds,
                  "seconds for the default T grid (trimmed by calibration; default 40 on a CPU device, "
                  "300 otherwise, 20 for phone; in (0, 86400])")
      ->check(finite_range(0, 86400, true));
  cmd->add_option("--cooldown", o.cooldown_seconds,
                  "seconds of pause before each case (default 2 for phone, 0 otherwise)")
      ->check(finite_range(0, 600));
  cmd->add_option("--copy-mib", a->copy_mib,
                  "copy-ceiling buffer size in MiB (default: 4x the largest CPU cache on a CPU device, "
                  "else 256; 64 for phone; capped by the device)")
      ->check(finite_range(1, 65536));
  cmd->add_flag("--no-naive", o.no_naive, "skip the naive implementation");
  cmd->add_option("--json", a->json_path, "write every figure, the device caps and the command line to FILE (atomic)");
  cmd->add_option("--plot", o.plot_path, "write a PNG of fused speedup and % of copy bandwidth against T (atomic)");
  cmd->add_flag("--quick", o.quick, "tiny configuration (CI smoke test)");
  cmd->add_flag("--ops", o.ops,
                "benchmark the ops instead of the attention cases: each op's case table (the one the "
                "conformance tests run) in bench mode, checked against the float64 reference, then timed");
  cmd->add_flag(
      "--matmul-table", o.matmul_table,
      "benchmark the matmul table instead of the attention cases: the linear op at M 1, 8, 64, 512 x (K, N) (768, "
      "768), "
      "(768, 2304), (2048, 768), (2048, 2048), (4096, 4096) x weights f16, q8_0, q4_0; each row checked, then timed "
      "(GFLOP/s, fraction of the FMA ceiling)");
  cmd->add_option(
      "--op", o.op,
      "with --ops (implied): only this op's rows (linear, linear_row, head_rmsnorm, silu_mul, conv1d_state, "
      "selective_scan, embed, rope_kv, kv_shift, diff_attn, diff_v2_attn, attn_probs)");
  cmd->add_option("--model", o.model_dir,
                  "benchmark a whole model instead: prefill and decode tokens/s and decode's fraction "
                  "of the weight-streaming bound (weight bytes per token / measured copy bandwidth)")
      ->check(CLI::ExistingDirectory | gguf_file_validator());
  cmd->add_option("--shape", o.shape,
                  "benchmark a whole model of a published model's exact shape with random weights, without its "
                  "download (no file): diffllama-1b (kajuma/DiffLlama-0.3B-handcut's config), phi4-mini-flash "
                  "(microsoft/Phi-4-mini-flash-reasoning's). Same figures as --model");
  cmd->add_option("--contexts", o.contexts,
                  "model benchmark: also prefill and decode at these context lengths (e.g. 512,2048,8192): time to "
                  "first token and ms/token at each")
      ->delimiter(',')
      ->check(CLI::Range(1u, 1u << 20));
  cmd->add_option("--context-fill", o.context_fill,
                  "model benchmark: how the session reaches each of --contexts: prefill (default; timed) or zeros "
                  "(zero caches and states, no prefill: the decode figures only, e.g. at a published shape on a CPU "
                  "device)")
      ->check(CLI::IsMember({"prefill", "zeros"}));
  cmd->add_option("--prompt-tokens", o.prompt_tokens, "model benchmark: tokens to prefill (default 128)")
      ->check(CLI::Range(1u, 1u << 20));
  cmd->add_option("--decode-tokens", o.decode_tokens, "model benchmark: tokens to decode (default 64)")
      ->check(CLI::Range(1u, 1u << 20));
  add_kv_flag(cmd, o.kv_cache);  // model benchmark
  cmd->add_option("--speculate", o.speculate,
                  "model benchmark: also speculative decoding (lookup: prompt-lookup drafts; draft:DIR: a draft model "
                  "sharing the tokenizer): a k + 1-row pass against a one-row decode, the acceptance rate and tokens/s "
                  "with and without drafts");
  cmd->add_option("--draft-k", o.draft_k,
                  "with --speculate: drafted tokens per pass at most, 1 ... 16 (default 7: a pass of 8 rows)")
      ->check(CLI::Range(1u, kMaxDraftTokens));
  cmd->add_option("--speculate-prompt", o.speculate_prompt,
                  "with --speculate and --model: a UTF-8 text file, encoded by the model's tokenizer, as the "
                  "speculation's prompt (e.g. tests/data/speculate/summarise.txt) instead of random tokens repeated");
  cmd->add_option_function<std::string>(
         "--weights",
         [&o](const std::string& v) {
           o.weight_list = parse_weight_list(v);
           o.weights = o.weight_list.front();
         },
         "model benchmark: linear weights f16 (default), q8_0 or q4_0 (quantized at load), or a list (f16,q8_0,q4_0) "
         "or all: each type in turn, then a side-by-side table (weight bytes, bits per weight, peak device memory, "
         "tokens/s, fraction of the weight-streaming bound)")
      ->check(CLI::Validator(
          [](std::string& v) -> std::string {
            try {
              parse_weight_list(v);
              return "";
            } catch (const Error& e) {
              return e.what();
            }
          },
          "f16|q8_0|q4_0[,...]|all"));
  cmd->add_flag("--profile", o.profile,
                "model benchmark: also print the GPU time per dispatch of a decode step, grouped by op "
                "(timestamps between dispatches)");
  add_device_flags(cmd, a->dev);
  return [a]() {
    if (!a->json_path.empty()) check_output(a->json_path, "--json", {}, a->o.model_dir);
    if (!a->o.plot_path.empty()) check_output(a->o.plot_path, "--plot", {}, a->o.model_dir);
    auto progress = std::make_shared<Progress>();
    bench::Options o = a->o;
    o.copy_bytes = uint64_t(a->copy_mib * double(1 << 20));
    o.log = [progress](bench::LogLevel level, const std::string& s) { progress->log(level, s); };
    o.report = [progress](const std::string& line) {
      progress->clear();
      std::printf("%s\n", line.c_str());
      std::fflush(stdout);
    };
    ContextOptions copts = a->dev.options();
    copts.selftest_ops = bench::selftest_ops_for_bench(o);  // the self-test at load: the pipelines this run records
    copts.selftest_weights = bench::selftest_weights_for_bench(o);
    copts.selftest_model = bench::selftest_model_for_bench(o);
    o.requested_precision = copts.precision;
    progress->log(bench::LogLevel::info, "diffvk bench: opening the device");
    auto ctx = Context::create(copts);
    const bench::Result r = bench::run(*ctx, o);
    progress->clear();
    if (!a->json_path.empty()) {
      platform::write_file_atomic(a->json_path, r.json.data(), r.json.size());
      std::printf("json: %s\n", a->json_path.c_str());
    }
    return r.outputs_checked ? 0 : 3;
  };
}

}  // namespace diffvk::cli
