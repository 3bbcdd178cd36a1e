// diffvk run | logits | plan: whole-model commands.
#include <sys/stat.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <fstream>

#include "commands.hpp"
#include "diffvk/chat_template.hpp"
#include "diffvk/generate.hpp"
#include "diffvk/model.hpp"
#include "diffvk/tokenizer.hpp"
#include "diffvk/npy.hpp"

#ifndef DIFFVK_SOURCE_MODEL_DIR
#  define DIFFVK_SOURCE_MODEL_DIR ""
#endif
#ifndef DIFFVK_INSTALL_MODEL_DIR
#  define DIFFVK_INSTALL_MODEL_DIR ""
#endif

namespace diffvk::cli {

// The bundled model: next to the executable's install prefix, else in the source tree it was built from.
std::string default_model_dir() {
  for (const char* dir : {DIFFVK_INSTALL_MODEL_DIR, DIFFVK_SOURCE_MODEL_DIR}) {
    if (!*dir) continue;
    struct stat st;  // stat, not open: opening would block on a FIFO
    if (::stat((std::string(dir) + "/config.json").c_str(), &st) == 0) return dir;
  }
  throw Error(Status::io_error, "no --model given and the bundled model was not found (looked in '" +
                                    std::string(DIFFVK_INSTALL_MODEL_DIR) + "' and '" + DIFFVK_SOURCE_MODEL_DIR + "')");
}

CLI::Validator gguf_file_validator() {
  return CLI::Validator(
      [](std::string& path) -> std::string {
        if (path.size() < 5 || path.compare(path.size() - 5, 5, ".gguf") != 0)
          return "not a directory nor a .gguf file: " + path;
        return CLI::ExistingFile(path);
      },
      "DIR|FILE.gguf");
}

void add_weights_flag(CLI::App* cmd, LoadOptions& load) {
  QuantKind& kind = load.weights;
  cmd->add_option_function<std::string>(
         "--weights", [&kind](const std::string& v) { kind = parse_quant_kind(v); },
         "linear weights and the embedding table on the device: f16 (the storage type, default), q8_0 or q4_0 "
         "(quantized at load; norms stay in the storage type; lm_head, and a table tied to it, is q8_0 under q4_0 "
         "unless --q4-head)")
      ->check(CLI::Validator(
          [](std::string& v) -> std::string {
            try {
              parse_quant_kind(v);
              return "";
            } catch (const Error& e) {
              return e.what();
            }
          },
          "f16|q8_0|q4_0"));
  cmd->add_flag("--q4-head", load.q4_0_head,
                "with --weights q4_0: lm_head (and an embedding tied to it) in q4_0 too instead of q8_0 (fewer bytes, "
                "more logit error)");
}

void add_kv_flag(CLI::App* cmd, KvCacheType& kv) {
  cmd->add_option_function<std::string>(
         "--kv", [&kv](const std::string& v) { kv = v == "q8_0" ? KvCacheType::q8_0 : KvCacheType::f16; },
         "the KV cache's format: f16 (the storage type, default) or q8_0 (GGUF Q8_0 blocks: about half the bytes; "
         "quantized at append, dequantized inside attention)")
      ->check(CLI::IsMember({"f16", "q8_0"}));
}

Tokenizer model_tokenizer(const std::string& dir, const ModelConfig& cfg) {
  Tokenizer tokenizer = Tokenizer::load(dir);  // a directory or a .gguf file
  if (tokenizer.vocab_size() > cfg.vocab_size)
    throw Error(Status::invalid_argument,
                dir + ": the tokenizer's vocabulary (" + std::to_string(tokenizer.vocab_size()) +
                    ") is larger than the model's vocab_size " + std::to_string(cfg.vocab_size));
  return tokenizer;
}

namespace {

struct ModelArgs {
  DeviceFlags dev;
  std::string model;
  uint32_t context = 0, chunk = 0;
  LoadOptions load;
  KvCacheType kv = KvCacheType::f16;
  SessionOptions session_options(const ModelConfig& cfg) const {
    check_context_chunk(context, chunk, cfg.max_position_embeddings, cfg.max_position_embeddings);
    SessionOptions so{context, chunk, false, {}};
    so.kv_cache = kv;
    return so;
  }
  void add(CLI::App* cmd, bool model_required) {
    auto* o =
        cmd->add_option("--model", model,
                        "checkpoint directory (config.json + model.safetensors), or an f16 .gguf file (docs/gguf.md)")
            ->check(CLI::ExistingDirectory | gguf_file_validator());
    if (model_required) o->required();
    cmd->add_option(
        "--context", context,
        "KV-cache capacity in tokens, at most max_position_embeddings (default 0 = max_position_embeddings)");
    cmd->add_option("--chunk", chunk,
                    "prefill chunk size, at most the context (default 0 = automatic: from the matmul tile and the "
                    "memory plan)");
    add_weights_flag(cmd, load);
    add_kv_flag(cmd, kv);
    add_device_flags(cmd, dev);
  }
};
double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}
}  // namespace

ChatTemplate chat_template_for(const std::string& choice, const std::string& dir, const Tokenizer& tokenizer) {
  if (choice == "auto") return ChatTemplate::load(dir);
  const auto token_text = [&](int32_t id) {
    return id >= 0 ? tokenizer.decode(std::vector<int32_t>{id}) : std::string();
  };
  return ChatTemplate::builtin(choice, token_text(tokenizer.bos_id()), token_text(tokenizer.eos_id()));
}

bool print_text(std::string_view piece) {
  std::fwrite(piece.data(), 1, piece.size(), stdout);
  std::fflush(stdout);
  return true;
}

void check_context_chunk(uint32_t context, uint32_t chunk, uint32_t max_context, uint32_t default_context) {
  if (context > max_context)
    throw Error(Status::invalid_argument, "--context " + std::to_string(context) +
                                              " exceeds the model's max_position_embeddings " +
                                              std::to_string(max_context));
  const uint32_t cap = context ? context : default_context;
  if (chunk > cap)
    throw Error(Status::invalid_argument, "--chunk " + std::to_string(chunk) + " exceeds the context of " +
                                              std::to_string(cap) + " tokens (0 = automatic)");
}

void add_sampling_flags(CLI::App* cmd, SamplingOptions& sampling) {
  cmd->add_option("--temperature", sampling.temperature, "0 = greedy; in [0, 100]")->check(finite_range(0, 100));
  cmd->add_option("--top-k", sampling.top_k, "0 = off");
  cmd->add_option("--top-p", sampling.top_p, "1 = off; in (0, 1]")->check(finite_range(0, 1, true));
  cmd->add_option("--seed", sampling.seed, "sampling seed");
  cmd->add_option("--min-p", sampling.min_p,
                  "drop tokens below min-p x the top token's probability; 0 = off; in [0, 1]")
      ->check(finite_range(0, 1));
  cmd->add_option("--repeat-penalty", sampling.repeat_penalty,
                  "CTRL repetition penalty over the last --repeat-last-n tokens; 1 = off; in (0, 100]")
      ->check(finite_range(0, 100, true));
  cmd->add_option("--frequency-penalty", sampling.frequency_penalty,
                  "subtracted once per occurrence; 0 = off; in [-2, 2]")
      ->check(finite_range(-2, 2));
  cmd->add_option("--presence-penalty", sampling.presence_penalty,
                  "subtracted once per token seen; 0 = off; in [-2, 2]")
      ->check(finite_range(-2, 2));
  cmd->add_option("--repeat-last-n", sampling.penalty_last_n,
                  "tokens the penalties look back over (prompt included); 0 = none")
      ->check(CLI::Range(0u, 1u << 20));
}

void add_overflow_flags(CLI::App* cmd, GenerateOptions& go, bool& keep_set) {
  cmd->add_option_function<std::string>(
         "--overflow",
         [&go](const std::string& v) { go.overflow = v == "shift" ? ContextOverflow::shift : ContextOverflow::refuse; },
         "when the conversation reaches the context: refuse (an error, the default) or shift (keep the first --keep "
         "tokens, drop "
         "the oldest half of the rest; docs/context-overflow.md)")
      ->check(CLI::IsMember({"refuse", "shift"}));
  cmd->add_option_function<uint32_t>(
      "--keep",
      [&go, &keep_set](const uint32_t& v) {
        go.keep = v;
        keep_set = true;
      },
      "with --overflow shift: tokens at the start never dropped");
}

void add_speculate_flags(CLI::App* cmd, SpeculateOptions& spec, std::string& draft_dir) {
  cmd->add_option_function<std::string>(
      "--speculate",
      [&spec, &draft_dir](const std::string& v) {
        if (v.rfind("draft:", 0) == 0) {
          spec.draft = Draft::model;
          draft_dir = v.substr(6);
          if (draft_dir.empty()) throw CLI::ValidationError("--speculate", "draft: needs a model directory");
        } else if (v == "lookup" || v == "none") {
          spec.draft = v == "lookup" ? Draft::lookup : Draft::none;
        } else {
          throw CLI::ValidationError("--speculate", "'" + v + "' is not none, lookup or draft:DIR");
        }
      },
      "speculative decoding (greedy: the same tokens; sampling: the same distribution), drafts checked in one pass "
      "of k + 1 rows: none (the default), lookup (the tokens that followed the latest earlier occurrence of the "
      "context's last n-gram) or draft:DIR (a smaller model sharing the tokenizer decodes them greedily)");
  cmd->add_option("--draft-k", spec.k,
                  "with --speculate: drafted tokens per pass at most, 1 ... 16 (default 7: a pass of 8 rows)")
      ->check(CLI::Range(1u, kMaxDraftTokens));
  cmd->add_option("--draft-ngram", spec.ngram,
                  "with --speculate lookup: the longest n-gram matched, 1 ... 16 (default 3; shorter ones are tried "
                  "next)")
      ->check(CLI::Range(1u, kMaxDraftNgram));
}

void validate_speculate_flags(const SpeculateOptions& spec) {
  SpeculateOptions check = spec;
  if (check.draft == Draft::model) check.draft = Draft::lookup;  // the same k and n-gram checks
  validate_speculation(check);
}

DraftModel open_draft_model(Context& ctx, const std::string& draft_dir, uint32_t capacity, SpeculateOptions& spec) {
  DraftModel d;
  if (spec.draft != Draft::model) return d;
  d.model = Model::load(ctx, draft_dir);
  SessionOptions so;
  so.context = std::min(capacity, d.model->config().max_position_embeddings);
  d.session = Session::create(*d.model, so);
  spec.draft_session = d.session.get();
  return d;
}

void print_speculation(const GenerateResult& r, const SpeculateOptions& spec) {
  if (spec.draft == Draft::none) return;
  std::fprintf(stderr, "  speculate: %s, %u passes, %u of %u drafted tokens accepted (%.0f%%)\n",
               draft_name(spec.draft), r.verify_passes, r.accepted, r.drafted,
               r.drafted ? 100.0 * r.accepted / r.drafted : 0.0);
}

Runner register_run(CLI::App& app) {
  struct Args : ModelArgs {
    std::string prompt, prompt_cache;
    std::vector<std::string> stop;
    std::string chat_template, system;
    uint32_t n = 64;
    SamplingOptions sampling;
    GenerateOptions go;
    bool keep_set = false;
    std::string draft_dir;
  };
  auto a = std::make_shared<Args>();
  auto* cmd = app.add_subcommand("run", "generate text from a prompt (bundled model by default)");
  a->add(cmd, false);
  cmd->add_option("--prompt,-p", a->prompt,
                  "prompt text (the model directory's tokenizer: tokenizer.json, tokenizer.model, else bytes)")
      ->required();
  cmd->add_option("-n", a->n, "tokens to generate");
  add_sampling_flags(cmd, a->sampling);
  cmd->add_option("--stop", a->stop,
                  "stop string (repeatable; may span tokens): generation ends there, and neither it nor what "
                  "follows is printed");
  cmd->add_option(
      "--chat-template", a->chat_template,
      "the prompt is a user message in this chat format: auto (the model's tokenizer_config.json), chatml, llama2, "
      "llama3 or phi4 (docs/chat-templates.md); the end of the assistant's turn is a stop string");
  cmd->add_option("--system", a->system, "system message before the prompt (with --chat-template)");
  cmd->add_option(
      "--prompt-cache", a->prompt_cache,
      "session state file (docs/session-state.md): restored first when it belongs to this model and precision, "
      "the prompt's longest common prefix with it is not recomputed, and the prompt's state is saved to it");
  add_overflow_flags(cmd, a->go, a->keep_set);
  add_speculate_flags(cmd, a->go.speculate, a->draft_dir);
  return [a]() {
    validate_sampling(a->sampling);  // the C ABI's rules (diffvk_sampler_create), before any work
    validate_stop_strings(a->stop);
    validate_speculate_flags(a->go.speculate);
    const std::string dir = a->model.empty() ? default_model_dir() : a->model;
    auto ctx = Context::create(a->dev.options_for_model(dir, a->load, a->kv));
    auto model = Model::load(*ctx, dir, a->load);
    SessionOptions so = a->session_options(model->config());
    auto session = Session::create(*model, so);
    const DraftModel draft = open_draft_model(*ctx, a->draft_dir, session->capacity(), a->go.speculate);
    const auto& cfg = model->config();
    const Tokenizer tokenizer = model_tokenizer(dir, cfg);
    std::string text = a->prompt;
    std::vector<std::string> stop = a->stop;
    if (!a->chat_template.empty()) {
      const ChatTemplate tpl = chat_template_for(a->chat_template, dir, tokenizer);
      std::vector<ChatMessage> messages;
      if (!a->system.empty()) messages.push_back({"system", a->system});
      messages.push_back({"user", a->prompt});
      text = tpl.apply(messages, true);
      if (!tpl.end_of_turn().empty()) stop.push_back(tpl.end_of_turn());
      std::fprintf(stderr, "diffvk run: chat template %s\n", tpl.family().c_str());
    } else if (!a->system.empty()) {
      throw Error(Status::invalid_argument, "--system needs --chat-template");
    }
    // With a chat template, BOS is in the text where the format puts it.
    std::vector<int32_t> tokens = tokenizer.encode(text, a->chat_template.empty());
    if (tokens.empty()) throw Error(Status::invalid_argument, "the prompt encodes to no tokens");
    if (a->go.overflow == ContextOverflow::refuse && tokens.size() + a->n > session->capacity())
      throw Error(Status::context_overflow, "prompt (" + std::to_string(tokens.size()) + " tokens) + " +
                                                std::to_string(a->n) + " new tokens (-n) exceed the context of " +
                                                std::to_string(session->capacity()) + " (--context)");
    Sampler sampler(a->sampling);
    double restore_s = 0;
    struct stat st;
    if (!a->prompt_cache.empty() && ::stat(a->prompt_cache.c_str(), &st) == 0) {  // absent: written after the prompt
      const auto tr = std::chrono::steady_clock::now();
      try {
        session->restore_state_file(a->prompt_cache);
      } catch (const Error& e) {
        if (e.status() != Status::invalid_argument)
          throw;  // unreadable: an error; another model's or corrupt: rewritten
        std::fprintf(stderr, "diffvk run: --prompt-cache not used (%s); it is rewritten after the prompt\n", e.what());
      }
      restore_s = seconds_since(tr);
    }
    std::fputs(text.c_str(), stdout);
    std::fflush(stdout);
    // Greedy and top-k (without top-p) sample on the device: each step reads back a token id, not the logits.
    GenerateOptions go = a->go;
    go.max_tokens = a->n;
    go.stop = stop;
    go.eos_token = cfg.eos_token_id;
    go.on_text = print_text;
    if (!a->prompt_cache.empty()) go.on_prefilled = [&] { session->save_state_file(a->prompt_cache); };
    const GenerateResult r = generate(*session, sampler, tokenizer, tokens, go);
    const size_t generated = r.reason == StopReason::eos ? r.tokens.size() - 1 : r.tokens.size();
    std::fprintf(stderr,
                 "\n\ndiffvk run: %s, %s\n  prefill: %zu tokens in %.3f s (%.1f tokens/s)\n  decode:  %zu tokens in "
                 "%.3f s (%.1f tokens/s)\n"
                 "  stopped: %s%s%s%s\n",
                 ctx->caps().name.c_str(), precision_name(ctx->precision()), tokens.size(), r.prefill_seconds,
                 tokens.size() / r.prefill_seconds, generated, r.sample_seconds,
                 generated ? generated / r.sample_seconds : 0.0, stop_reason_name(r.reason),
                 r.reason == StopReason::stop_string ? " " : "",
                 r.reason == StopReason::stop_string ? ("\"" + r.stop + "\"").c_str() : "",
                 r.shifts ? (" (" + std::to_string(r.shifts) + " context shifts)").c_str() : "");
    if (!a->prompt_cache.empty())
      std::fprintf(stderr, "  prompt cache: %u of %zu prompt tokens reused from %s (restored in %.3f s)\n", r.reused,
                   tokens.size(), a->prompt_cache.c_str(), restore_s);
    print_speculation(r, go.speculate);
    return 0;
  };
}

Runner register_logits(CLI::App& app) {
  struct Args : ModelArgs {
    std::string tokens, output;
    int64_t prompt_len = 0;
  };
  auto a = std::make_shared<Args>();
  auto* cmd = app.add_subcommand("logits", "teacher-forced logits for conformance: prefill P tokens, decode the rest");
  a->add(cmd, true);
  cmd->add_option("--tokens", a->tokens, "int64 .npy of token ids, shape (N,)")->required()->check(CLI::ExistingFile);
  cmd->add_option("--prompt-len", a->prompt_len, "P: tokens given to prefill (at least 1, at most the token count)")
      ->required()
      ->check(CLI::Range(int64_t(1), int64_t(INT32_MAX)));
  cmd->add_option("--output", a->output, "float32 .npy (N, vocab_size), written atomically")->required();
  return [a]() {
    // Everything that can be checked is checked before the model is loaded or anything is computed.
    check_output(a->output, "--output", {a->tokens}, a->model);
    const NpyArray arr = read_npy(a->tokens, 64ull << 20);  // 8M int64 tokens: far beyond any context
    if (arr.shape.size() != 1) throw Error(Status::invalid_argument, a->tokens + ": expected a 1-D array of token ids");
    const auto ids64 = npy_as_int64(arr);
    const int64_t N = static_cast<int64_t>(ids64.size());
    if (N == 0) throw Error(Status::invalid_argument, a->tokens + ": holds no tokens");
    if (a->prompt_len < 1 || a->prompt_len > N)
      throw Error(Status::invalid_argument, "--prompt-len " + std::to_string(a->prompt_len) + " must be in [1, " +
                                                std::to_string(N) + "] (" + a->tokens + " holds " + std::to_string(N) +
                                                " tokens)");
    auto ctx = Context::create(a->dev.options_for_model(a->model, a->load, a->kv));
    auto model = Model::load(*ctx, a->model, a->load);
    const uint32_t V = model->config().vocab_size;
    std::vector<int32_t> ids;
    for (int64_t i = 0; i < N; ++i) {
      const int64_t v = ids64[size_t(i)];
      if (v < 0 || v >= int64_t(V))
        throw Error(Status::invalid_argument, a->tokens + ": token id " + std::to_string(v) + " at index " +
                                                  std::to_string(i) + " is outside the vocabulary [0, " +
                                                  std::to_string(V) + ")");
      ids.push_back(static_cast<int32_t>(v));
    }
    auto session = Session::create(*model, a->session_options(model->config()));
    if (uint64_t(N) > session->capacity())
      throw Error(Status::context_overflow, a->tokens + ": " + std::to_string(N) + " tokens exceed the context of " +
                                                std::to_string(session->capacity()) +
                                                " (--context); nothing was computed");
    std::vector<float> out = session->prefill(std::vector<int32_t>(ids.begin(), ids.begin() + a->prompt_len), true);
    for (int64_t i = a->prompt_len; i < N; ++i) {
      auto lg = session->decode(ids[i]);
      out.insert(out.end(), lg.begin(), lg.end());
    }
    write_npy_f32(a->output, {N, int64_t(V)}, out.data());
    std::fprintf(stderr, "diffvk logits: %s, %lld positions (%lld prefill + %lld decode) -> %s\n",
                 precision_name(ctx->precision()), static_cast<long long>(N), static_cast<long long>(a->prompt_len),
                 static_cast<long long>(N - a->prompt_len), a->output.c_str());
    return 0;
  };
}

Runner register_plan(CLI::App& app) {
  auto a = std::make_shared<ModelArgs>();
  auto* cmd = app.add_subcommand("plan", "print the static memory plan of a model session");
  a->add(cmd, false);
  return [a]() {
    const std::string dir = a->model.empty() ? default_model_dir() : a->model;
    auto ctx = Context::create(a->dev.options_for_model(dir, a->load, a->kv));
    auto model = Model::load(*ctx, dir, a->load);
    auto session = Session::create(*model, a->session_options(model->config()));
    std::printf("model %s: session context %u, chunk %u, %s\nKV cache: %s, %llu bytes (every layer's K and V)\n%s",
                dir.c_str(), session->capacity(), session->chunk(), precision_name(ctx->precision()),
                kv_cache_type_name(session->kv_cache()), static_cast<unsigned long long>(session->kv_cache_bytes()),
                session->plan_report().c_str());
    return 0;
  };
}

}  // namespace diffvk::cli
