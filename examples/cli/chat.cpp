// `diffvk chat`: an interactive terminal chat over a checkpoint, built from the session
// features: the chat template, generate() with the end of turn as a stop string and prefix reuse (each turn
// prefills only the new text), rewind for /regenerate, saved state for /save and /load.
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "diffvk/atomic_write.hpp"
#include "diffvk/chat_template.hpp"
#include "diffvk/generate.hpp"

namespace diffvk::cli {

namespace {
constexpr const char* kHelp =
    "  /regenerate  answer the last message again\n"
    "  /save FILE   save the conversation (FILE, and its session state in FILE.state)\n"
    "  /load FILE   load a saved conversation of this model\n"
    "  /reset       start over (the system message stays)\n"
    "  /quit        leave (also end of input)\n";

void save_conversation(const std::string& path, const std::vector<ChatMessage>& messages, const Session& session) {
  nlohmann::json j = nlohmann::json::array();
  for (const auto& m : messages) j.push_back({{"role", m.role}, {"content", m.content}});
  // A reply cut inside a UTF-8 sequence (-n, or a model's stray bytes) is not valid UTF-8, which JSON cannot hold:
  // such bytes are saved as U+FFFD, as the terminal showed them (the saved state's tokens then match a shorter prefix).
  const std::string text = j.dump(1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  session.save_state_file(path + ".state");
  platform::write_file_atomic(path, text.data(), text.size());
}

std::vector<ChatMessage> load_conversation(const std::string& path, Session& session) {
  std::ifstream f(path);
  if (!f) throw Error(Status::io_error, "cannot read " + path);
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(f);
  } catch (const std::exception&) {
    throw Error(Status::format_error, path + ": not a saved diffvk chat (JSON)");
  }
  std::vector<ChatMessage> messages;
  if (!j.is_array()) throw Error(Status::format_error, path + ": not a saved diffvk chat (a list of messages)");
  for (const auto& m : j) {
    if (!m.is_object() || !m.contains("role") || !m["role"].is_string() || !m.contains("content") ||
        !m["content"].is_string())
      throw Error(Status::format_error, path + ": each message needs a string role and content");
    messages.push_back({m["role"].get<std::string>(), m["content"].get<std::string>()});
  }
  session.restore_state_file(path + ".state");  // refused (nothing changed) for another model or precision
  return messages;
}
}  // namespace

Runner register_chat(CLI::App& app) {
  struct Args {
    DeviceFlags dev;
    LoadOptions load;
    std::string model, chat_template = "auto", system;
    uint32_t context = 0, n = 256;
    KvCacheType kv = KvCacheType::f16;
    SamplingOptions sampling;
    GenerateOptions go;
    bool keep_set = false;
    std::string draft_dir;
    const CLI::Option* n_option = nullptr;
  };
  auto a = std::make_shared<Args>();
  auto* cmd =
      app.add_subcommand("chat", "interactive chat in the terminal (one message per line; /help lists the commands)");
  cmd->add_option("--model", a->model, "checkpoint directory or .gguf file (default: the bundled model)")
      ->check(CLI::ExistingDirectory | gguf_file_validator());
  cmd->add_option("--context", a->context, "KV-cache capacity in tokens (default: max_position_embeddings)");
  cmd->add_option(
      "--chat-template", a->chat_template,
      "auto (the model's tokenizer_config.json), chatml, llama2, llama3 or phi4 (docs/chat-templates.md); the "
      "bundled model has none: pass a family");
  cmd->add_option("--system", a->system, "system message");
  a->n_option = cmd->add_option("-n", a->n, "tokens per reply at most (default 256)");
  add_sampling_flags(cmd, a->sampling);
  add_overflow_flags(cmd, a->go, a->keep_set);  // chat's --keep default: the system message's tokens
  add_speculate_flags(cmd, a->go.speculate, a->draft_dir);
  add_weights_flag(cmd, a->load);
  add_kv_flag(cmd, a->kv);
  add_device_flags(cmd, a->dev);
  return [a]() {
    validate_sampling(a->sampling);
    validate_speculate_flags(a->go.speculate);
    const std::string dir = a->model.empty() ? default_model_dir() : a->model;
    auto ctx = Context::create(a->dev.options_for_model(dir, a->load, a->kv));
    auto model = Model::load(*ctx, dir, a->load);
    const auto& cfg = model->config();
    check_context_chunk(a->context, 0, cfg.max_position_embeddings, cfg.max_position_embeddings);
    SessionOptions so{a->context, 0, false, {}};
    so.kv_cache = a->kv;
    auto session = Session::create(*model, so);
    const DraftModel draft = open_draft_model(*ctx, a->draft_dir, session->capacity(), a->go.speculate);
    // A given -n that no reply could ever fit (the default is left to each reply's context check).
    if (a->n_option->count() && a->go.overflow == ContextOverflow::refuse && a->n >= session->capacity())
      throw Error(Status::invalid_argument, "-n " + std::to_string(a->n) +
                                                " leaves no room for a prompt in the context of " +
                                                std::to_string(session->capacity()) + " tokens (--context)");
    const Tokenizer tokenizer = model_tokenizer(dir, cfg);
    const ChatTemplate tpl = chat_template_for(a->chat_template, dir, tokenizer);
    Sampler sampler(a->sampling);
    std::vector<ChatMessage> messages;
    if (!a->system.empty()) messages.push_back({"system", a->system});
    GenerateOptions base = a->go;
    if (base.overflow == ContextOverflow::shift && !a->keep_set && !messages.empty())
      base.keep =
          static_cast<uint32_t>(tokenizer.encode(tpl.apply(messages, false), false).size());  // the system message
    std::fprintf(stderr, "diffvk chat: %s, %s, chat template %s, context %u tokens%s. /help lists the commands.\n",
                 ctx->caps().name.c_str(), precision_name(ctx->precision()), tpl.family().c_str(), session->capacity(),
                 base.overflow == ContextOverflow::shift
                     ? (", context shift keeping " + std::to_string(base.keep) + " tokens").c_str()
                     : "");

    // Answers the conversation as it stands: appends the assistant's message.
    auto reply = [&]() {
      const std::vector<int32_t> tokens = tokenizer.encode(tpl.apply(messages, true), false);
      GenerateOptions go = base;
      go.max_tokens = a->n;
      go.eos_token = cfg.eos_token_id;
      if (!tpl.end_of_turn().empty()) go.stop = {tpl.end_of_turn()};
      go.on_text = print_text;
      GenerateResult r;
      try {
        r = generate(*session, sampler, tokenizer, tokens, go);
      } catch (const Error& e) {  // generate checks the context before any work: the chat goes on
        if (e.status() != Status::context_overflow) throw;
        std::printf("[%s: /reset, or a larger --context]\n", e.what());
        std::fflush(stdout);
        return false;
      }
      const size_t n = r.reason == StopReason::eos ? r.tokens.size() - 1 : r.tokens.size();
      const std::string spec = a->go.speculate.draft == Draft::none
                                   ? ""
                                   : "; " + std::to_string(r.accepted) + " of " + std::to_string(r.drafted) +
                                         " drafted tokens accepted in " + std::to_string(r.verify_passes) + " passes";
      std::printf("\n[%zu tokens, %.1f tokens/s; prompt %zu tokens, %u reused; %s%s%s]\n", n,
                  n ? n / r.sample_seconds : 0.0, tokens.size(), r.reused, stop_reason_name(r.reason),
                  r.shifts ? ("; " + std::to_string(r.shifts) + " context shifts").c_str() : "", spec.c_str());
      std::fflush(stdout);
      messages.push_back({"assistant", r.text});
      return true;
    };

    std::string line;
    while (true) {
      std::printf("> ");
      std::fflush(stdout);
      if (!std::getline(std::cin, line)) break;
      if (line.empty()) continue;
      try {
        if (line == "/quit") break;
        if (line == "/help") {
          std::fputs(kHelp, stdout);
        } else if (line == "/reset") {
          messages.resize(a->system.empty() ? 0 : 1);
          session->reset();
          std::printf("[reset]\n");
        } else if (line == "/regenerate") {
          if (messages.empty() || messages.back().role != "assistant") {
            std::printf("[nothing to regenerate]\n");
          } else {
            messages.pop_back();  // prefix reuse rewinds the session to the common prefix
            if (!reply()) messages.push_back({"assistant", ""});
          }
        } else if (line.rfind("/save ", 0) == 0) {
          save_conversation(line.substr(6), messages, *session);
          std::printf("[saved %zu messages to %s]\n", messages.size(), line.substr(6).c_str());
        } else if (line.rfind("/load ", 0) == 0) {
          messages = load_conversation(line.substr(6), *session);
          std::printf("[loaded %zu messages, %u tokens]\n", messages.size(), session->position());
        } else if (line[0] == '/') {
          std::printf("[unknown command %s]\n%s", line.c_str(), kHelp);
        } else {
          messages.push_back({"user", line});
          if (!reply()) messages.pop_back();
        }
      } catch (const Error& e) {
        if (e.status() == Status::device_lost) throw;
        std::printf("[error: %s]\n", e.what());  // the conversation goes on
      }
      std::fflush(stdout);
    }
    std::printf("\n");
    return 0;
  };
}

}  // namespace diffvk::cli
