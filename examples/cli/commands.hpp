// diffvk CLI: each subcommand registers itself on the CLI11 app and returns its runner.
#pragma once
#include <CLI/CLI.hpp>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "diffvk/chat_template.hpp"
#include "diffvk/device.hpp"
#include "diffvk/generate.hpp"
#include "diffvk/gguf.hpp"
#include "diffvk/model.hpp"
#include "diffvk/tokenizer.hpp"

namespace diffvk::cli {

// Options every GPU subcommand shares.
struct DeviceFlags {
  std::string device;              // --device SEL
  std::string precision = "auto";  // --precision auto|fp16|fp32
  bool validation = false;         // --validation
  std::string pipeline_cache;      // --pipeline-cache FILE
  bool no_pipeline_cache = false;  // --no-pipeline-cache
  std::string tuning;              // --tuning key=value,... (ContextOptions::tuning; DIFFVK_TUNING wins per key)
  std::string selftest = "auto";   // --selftest auto|always|off (ContextOptions::selftest)
  // Throws invalid_argument when --pipeline-cache names something that is not a diffvk pipeline cache
  // (it is rewritten when the context closes: a model or any other file must never be replaced).
  ContextOptions options() const;
  // options() with the self-test at load limited to the ops the model at `path` records (a directory's config.json;
  // every op for a .gguf, a path that does not exist or a config.json that Model::load refuses, saying why), at its
  // shapes (ContextOptions::selftest_model), and to the weight and KV cache formats `load` and `kv` give it (every
  // format for a .gguf).
  ContextOptions options_for_model(const std::string& path, const LoadOptions& load,
                                   KvCacheType kv = KvCacheType::f16) const;
};
void add_device_flags(CLI::App* cmd, DeviceFlags& flags);

// Before any work: refuses an output path that is (or resolves to, through links) the same file as one
// of `inputs` or any file in `model_dir`, or a directory; checks that its directory is writable.
// `option` names the flag in errors (e.g. "--output").
void check_output(const std::string& output, const std::string& option, const std::vector<std::string>& inputs,
                  const std::string& model_dir = "");

using Runner = std::function<int()>;
Runner register_info(CLI::App& app);
Runner register_layer(CLI::App& app);
Runner register_bench(CLI::App& app);
Runner register_run(CLI::App& app);
Runner register_logits(CLI::App& app);
Runner register_plan(CLI::App& app);
Runner register_shader_stats(CLI::App& app);
Runner register_attn_map(CLI::App& app);
Runner register_quantize(CLI::App& app);
Runner register_perplexity(CLI::App& app);
Runner register_chat(CLI::App& app);
Runner register_selftest(CLI::App& app);

// --weights f16|q8_0|q4_0 (LoadOptions::weights) and --q4-head (LoadOptions::q4_0_head) into `load`; a bad
// value is an error naming the choices.
void add_weights_flag(CLI::App* cmd, LoadOptions& load);  // --weights and --q4-head
void add_kv_flag(CLI::App* cmd, KvCacheType& kv);         // --kv f16|q8_0 (SessionOptions::kv_cache)

// --context and --chunk (run, logits, plan, chat, perplexity) against the loaded model, before any session: a
// --context above `max_context` (the model's max_position_embeddings) and a --chunk above the context it gives
// (`default_context` when --context is 0) are refused naming the option; 0 is automatic for both.
void check_context_chunk(uint32_t context, uint32_t chunk, uint32_t max_context, uint32_t default_context);

// --temperature --top-k --top-p --seed --min-p and the penalties into `sampling` (run, chat); the ranges are
// checked here, the rest by validate_sampling.
void add_sampling_flags(CLI::App* cmd, SamplingOptions& sampling);

// --overflow refuse|shift and --keep N (run, chat; docs/context-overflow.md) into `go`. keep_set: --keep was given.
void add_overflow_flags(CLI::App* cmd, GenerateOptions& go, bool& keep_set);
// --speculate none|lookup|draft:DIR, --draft-k, --draft-ngram (run, chat); print_speculation: the summary line (none
// without speculation). draft_dir: the draft model's checkpoint (draft:DIR).
void add_speculate_flags(CLI::App* cmd, SpeculateOptions& spec, std::string& draft_dir);
// validate_speculation before any work; a draft model's session is set later (open_draft_model), so not asked yet.
void validate_speculate_flags(const SpeculateOptions& spec);
// --speculate draft:DIR: the draft model loaded on `ctx` (its own default LoadOptions) and a session of it with the
// generating session's capacity, set as spec.draft_session. Nothing without a draft dir.
struct DraftModel {
  std::unique_ptr<Model> model;
  std::unique_ptr<Session> session;
};
DraftModel open_draft_model(Context& ctx, const std::string& draft_dir, uint32_t capacity, SpeculateOptions& spec);
void print_speculation(const GenerateResult& r, const SpeculateOptions& spec);

// --chat-template's choice (run, chat): "auto" = dir's tokenizer_config.json, else a family by name with the
// text of the tokenizer's BOS and EOS.
ChatTemplate chat_template_for(const std::string& choice, const std::string& dir, const Tokenizer& tokenizer);
// GenerateOptions::on_text of run and chat: the piece to stdout, flushed.
bool print_text(std::string_view piece);

// --model's check: an existing directory, or an existing file named *.gguf (use as CLI::ExistingDirectory | this).
CLI::Validator gguf_file_validator();

// A floating-point option's check: a finite number in [lo, hi] ((lo, hi] when lo_open); NaN, an infinity,
// trailing text or a value outside is refused with "must be a finite number in [lo, hi]: VALUE" (CLI11
// prefixes the option's name). CLI::Range and CLI::PositiveNumber let NaN through.
CLI::Validator finite_range(double lo, double hi, bool lo_open = false);

// The model directory's tokenizer (what `diffvk run` encodes prompts with), checked against the model's vocabulary.
Tokenizer model_tokenizer(const std::string& dir, const ModelConfig& config);

// The bundled model (examples/models/tiny-diff): the install prefix's copy, else the source tree's.
std::string default_model_dir();

}  // namespace diffvk::cli
