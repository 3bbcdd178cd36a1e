// diffvk_bench — the on-device benchmark as a library (link diffvk::diffvk_bench; `diffvk bench` is a
// thin front end over it). One run: the device's ceilings (compute-shader copy bandwidth, peak FMA rate in
// fp32 and, on fp16 contexts, fp16; every kernel row reports its fraction of them),
// then either the attention cases (fused vs two-pass vs naive differential attention, every output
// checked against the others and a float64 CPU loop BEFORE anything is timed) or, with a model
// directory, the whole-model prefill/decode rates. The result is the JSON document `diffvk bench --json`
// writes. C callers: diffvk/diffvk_bench.h.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "diffvk/gguf.hpp"

#include "diffvk/device.hpp"
#include "diffvk/model.hpp"  // KvCacheType
#include "diffvk/selftest.hpp"

namespace diffvk::bench {

enum class LogLevel : int { error = 0, warn = 1, info = 2, debug = 3 };

struct Options {
  // "default": the full grid, trimmed to the time budget (40 s on a CPU device, 300 s otherwise).
  // "phone": 20 s budget, 64 MiB copy buffer, T <= 2048, a cool-down pause before each case and the
  // thermal zones (/sys/class/thermal) recorded before and after each case (and around the whole-model
  // benchmark). A zone that cannot be read is reported "not readable", never estimated.
  std::string preset = "default";
  std::string model_dir;  // non-empty: whole-model benchmark after the ceilings, instead of the attention cases
  // Non-empty: the whole-model benchmark on a model of this published shape with random weights (Model::synthesize;
  // bench/shapes.cpp names them: "diffllama-1b", ...), instead of a checkpoint: no download, no file.
  std::string shape;
  // Model benchmark: also decode at these context lengths (each: a prefill of that many tokens, timed, then
  // decode_tokens decode steps); empty = only at prompt_tokens.
  std::vector<uint32_t> contexts;
  // How the session reaches each of `contexts`: "prefill" (default: the prompt computed, its time reported) or
  // "zeros" (Session::fill_for_timing: zero caches and states, no prefill; the decode figures only, at a
  // published shape where prefilling 8192 tokens on a CPU device takes most of an hour).
  std::string context_fill = "prefill";
  double budget_seconds = 0;     // 0 = the preset's
  uint64_t copy_bytes = 0;       // copy-ceiling buffer size (each of src, dst); 0 = the preset's
  double cooldown_seconds = -1;  // pause before each case; < 0 = the preset's (phone: 2 s, default: none)
  std::vector<uint32_t> t;       // context lengths T (prefill and decode); empty = the preset's budgeted sweep
  std::vector<uint32_t> t_prefill, t_decode;  // override `t` per phase
  std::vector<uint32_t> d, heads, kv_heads;   // head half widths D, heads H, key/value groups Hkv (empty = preset's)
  std::string phase = "both";                 // "prefill", "decode" or "both"
  // Attention cases: "v1" (differential attention), "v2" (DIFF V2: fused against a two-pass baseline and plain
  // attention over H and 2H query heads on the same KV cache) or "both".
  std::string variant = "both";
  int runs = 0;           // timed runs per implementation; 0 = the preset's
  int warmup = -1;        // untimed runs (the output-check run counts as the first); < 0 = the preset's
  bool quick = false;     // tiny configuration (CI smoke test)
  bool no_naive = false;  // skip the naive implementation
  bool profile = false;   // model benchmark: per-op GPU time of a decode step
  // The op rows (instead of the attention cases): every op's case table (bench/op_cases.hpp) in bench
  // mode, the same table the conformance tests run; each row checked against the float64 reference, then timed.
  bool ops = false;
  std::string op;  // non-empty: only this op's rows (implies ops)
  // The matmul table: the linear op at M in {1, 8, 64, 512} x (K, N) in {(768, 768), (768, 2304),
  // (2048, 768), (2048, 2048), (4096, 4096)} x weights f16 / q8_0 / q4_0, each row checked, then timed, as
  // GFLOP/s and a fraction of the FMA ceiling. Without it, the attention run still times the f16
  // M = 512, K = N = 2048 row after the ceilings.
  bool matmul_table = false;
  uint32_t prompt_tokens = 128, decode_tokens = 64;  // model benchmark
  // Model benchmark: "lookup" adds speculative decoding's figures (prompt-lookup drafts of up to draft_k tokens;
  // docs/sessions.md): a (draft_k + 1)-row pass against a one-row decode, the acceptance rate, and decode_tokens
  // greedy tokens with and without drafts. "" = none.
  std::string speculate;  // "", "lookup" or "draft:DIR" (a draft model's directory)
  uint32_t draft_k = 7;   // SpeculateOptions::k's default
  // With speculate and model_dir: a UTF-8 text file whose text, encoded by the model's tokenizer (Tokenizer::load of
  // model_dir), is the speculation's prompt (e.g. a passage and a request to summarise it: tests/data/speculate/),
  // instead of the first half of the random prompt twice. "" = the random prompt.
  std::string speculate_prompt;
  QuantKind weights = QuantKind::f16;       // model benchmark: LoadOptions::weights (linear weights f16 / q8_0 / q4_0)
  KvCacheType kv_cache = KvCacheType::f16;  // model benchmark: SessionOptions::kv_cache
  // Model benchmark: several weight types in one run, one after the other, then side by side (weight bytes,
  // bits per weight, peak device memory, prefill / decode tokens/s, decode's fraction of the weight-streaming
  // bound); the JSON then has one entry per type under "weight_types". Empty = {weights}.
  std::vector<QuantKind> weight_list;
  std::string plot_path;     // non-empty: write a PNG there (atomically); see plot_available()
  std::string command_line;  // recorded in the JSON; empty = this process's command line
  // The precision the context was created with: fp32 storage without asking for it is reported as a fallback.
  Precision requested_precision = Precision::automatic;

  // Consulted between cases and between timed repetitions; true = stop (run() throws Error(Status::cancelled)).
  std::function<bool()> cancel;
  // Progress (info: stages, debug: steps), check failures (warn), notes. Called on the calling thread.
  std::function<void(LogLevel, const std::string&)> log;
  // The human-readable report (header, ceilings, table, targets), one line per call, without newline.
  std::function<void(const std::string&)> report;
};

struct Result {
  std::string json;             // the report (pretty-printed JSON, newline-terminated)
  bool outputs_checked = true;  // attention cases: every case's outputs agreed (false = some check failed)
};

// Runs the benchmark on `context`'s device. Throws diffvk::Error: invalid_argument for bad options
// (unknown preset or phase, odd D, empty grid), cancelled when options.cancel returned true,
// io_error when the plot cannot be written; device errors as usual.
Result run(Context& context, const Options& options);

// Whether this build can write the PNG plot (stb was found at configure time).
bool plot_available();

// ---- the self-test at load (diffvk/selftest.hpp; docs/decisions/024-selftest-at-load.md; bench/selftest.cpp)
// Registers this library's runner (set_selftest_runner): from then on Context::create runs the self-test as
// ContextOptions::selftest says. The CLI calls it first thing; libdiffvk_bench.so calls it when it is loaded.
void install_selftest();
// The runner: every conformance case (OpMode::conformance) of the request's ops in the device's precision and
// tuning, the cases that cannot run on the device left out, one row per (op, variant).
std::vector<SelftestRow> run_selftest_cases(Device& device, const SelftestRequest& request);
// The ops a model records, by its config.json text: DIFF V1 (native, diffllama), DIFF V2 (diff_version 2) or
// Phi-4-mini-flash (model_type phi4flash). Throws what parsing the config throws.
std::vector<std::string> selftest_ops_for_config(const std::string& config_json);
// The same for a model directory (its config.json) or a GGUF file (the config its metadata stands for:
// model_config_text), or a published shape (`diffvk bench --shape NAME`'s names).
std::vector<std::string> selftest_ops_for_model(const std::string& path);
std::vector<std::string> selftest_ops_for_shape(const std::string& name);
// The weight formats a load records (ContextOptions::selftest_weights): f16 and LoadOptions::weights' format (with
// q8_0 for the head under q4_0 unless q4_0_head), and "kv=q8_0" for sessions with a Q8_0 KV cache, for a model
// directory, a shape (path empty) or a synthesized model; empty (every format) for a GGUF file, whose tensors are not
// read here.
std::vector<std::string> selftest_weights_for_load(const std::string& path, QuantKind weights, bool q4_0_head,
                                                   KvCacheType kv = KvCacheType::f16);
// The ops a benchmark run records: its model's or shape's, the linear op for the matmul table, the op or every op
// for the op tables, else the attention cases' (diff_attn and/or diff_v2_attn, by Options::variant).
std::vector<std::string> selftest_ops_for_bench(const Options& options);
// The weight formats it records: its model's or shape's loads (every type of Options::weight_list), or every format
// (empty) for the tables.
std::vector<std::string> selftest_weights_for_bench(const Options& options);
// The model's config.json text for ContextOptions::selftest_model: a model directory's, a GGUF file's (the config its
// metadata stands for: model_config_text), a published shape's, a benchmark run's model or shape; "" for a config
// that Model::load refuses (it says why) and for a run without a model.
std::string selftest_model_for_model(const std::string& path);
std::string selftest_model_for_shape(const std::string& name);
std::string selftest_model_for_bench(const Options& options);

}  // namespace diffvk::bench
