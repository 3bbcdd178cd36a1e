// diffvk perplexity: perplexity of a model on a text file, llama-perplexity's windows
// (bench::perplexity, include/diffvk/perplexity.hpp: the rule), and with --kl-base f16 the divergence of
// the --weights model from the same model in f16 (mean and p99 KL, top-1 agreement).
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "commands.hpp"
#include "diffvk/atomic_write.hpp"
#include "diffvk/perplexity.hpp"

namespace diffvk::cli {

namespace {
constexpr uint64_t kMaxTextBytes = 256ull << 20;

// The whole text file: a regular file (no FIFO or device: opened non-blocking, checked by fstat), at most
// kMaxTextBytes.
std::string read_text(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) throw Error(Status::io_error, "--text '" + path + "': " + std::strerror(errno));
  struct stat st;
  std::string text;
  try {
    if (::fstat(fd, &st) != 0) throw Error(Status::io_error, "--text '" + path + "': " + std::strerror(errno));
    if (!S_ISREG(st.st_mode)) throw Error(Status::io_error, "--text '" + path + "' is not a regular file");
    if (uint64_t(st.st_size) > kMaxTextBytes)
      throw Error(Status::invalid_argument, "--text '" + path + "' is " + std::to_string(st.st_size) +
                                                " bytes; at most " + std::to_string(kMaxTextBytes) + " are read");
    text.resize(size_t(st.st_size));
    size_t got = 0;
    while (got < text.size()) {
      const ssize_t n = ::read(fd, text.data() + got, text.size() - got);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) throw Error(Status::io_error, "--text '" + path + "': " + std::strerror(errno));
      if (n == 0) break;
      got += size_t(n);
    }
    text.resize(got);
  } catch (...) {
    ::close(fd);
    throw;
  }
  ::close(fd);
  return text;
}
}  // namespace

Runner register_perplexity(CLI::App& app) {
  struct Args {
    DeviceFlags dev;
    std::string model, text, json, kl_base;
    uint32_t context = 0, chunk = 0;
    LoadOptions load;
  };
  auto a = std::make_shared<Args>();
  auto* cmd = app.add_subcommand("perplexity",
                                 "perplexity of a model on a text file (llama-perplexity's windows); "
                                 "--kl-base f16: KL divergence and top-1 agreement against the f16 weights");
  cmd->add_option("--model", a->model, "checkpoint directory or f16 .gguf file (default: the bundled model)")
      ->check(CLI::ExistingDirectory | gguf_file_validator());
  cmd->add_option("--text", a->text, "text file, encoded with the model's tokenizer (that of `diffvk run`)")
      ->required();
  cmd->add_option(
      "--context", a->context,
      "window in tokens (default: min(512, max_position_embeddings)); the text must fill at least one window; "
      "each window scores its second half");
  cmd->add_option("--chunk", a->chunk, "prefill chunk size, at most the window (default 0 = automatic)");
  cmd->add_option(
         "--kl-base", a->kl_base,
         "also run the windows with these weights (f16) and compare: mean/p99 KL(base || model), top-1 agreement")
      ->check(CLI::IsMember({"f16"}));
  cmd->add_option("--json", a->json, "JSON file with the results, written atomically");
  add_weights_flag(cmd, a->load);
  add_device_flags(cmd, a->dev);
  return [a]() {
    const std::string dir = a->model.empty() ? default_model_dir() : a->model;
    if (!a->json.empty()) check_output(a->json, "--json", {a->text}, dir);
    const std::string text = read_text(a->text);
    auto ctx = Context::create(a->dev.options_for_model(dir, a->load));
    auto model = Model::load(*ctx, dir, a->load);
    const ModelConfig& cfg = model->config();
    check_context_chunk(a->context, a->chunk, cfg.max_position_embeddings,
                        bench::default_perplexity_window(cfg.max_position_embeddings));
    const Tokenizer tokenizer = model_tokenizer(dir, cfg);
    const std::vector<int32_t> tokens = tokenizer.encode(text, true);
    std::unique_ptr<Model> base;
    if (!a->kl_base.empty()) {
      LoadOptions bl = a->load;
      bl.weights = parse_quant_kind(a->kl_base);
      base = Model::load(*ctx, dir, bl);
    }
    bench::PerplexityOptions po;
    po.context = a->context;
    po.chunk = a->chunk;
    if (isatty(2))  // progress on a terminal only: one line rewritten in place
      po.progress = [](uint32_t done, uint32_t total) {
        std::fprintf(stderr, "\r\033[Kdiffvk perplexity: window %u of %u", done, total);
        if (done == total) std::fprintf(stderr, "\r\033[K");
        std::fflush(stderr);
      };
    const bench::PerplexityResult r = bench::perplexity(*model, tokens, po, base.get());
    const char* wname = quant_kind_name(a->load.weights);
    std::printf("model %s, weights %s, %s, device %s\n", dir.c_str(), wname, precision_name(ctx->precision()),
                ctx->caps().name.c_str());
    std::printf("text %s: %llu tokens, %u window(s) of %u, %llu tokens scored (positions %u..%u of each window)\n",
                a->text.c_str(), (unsigned long long)r.tokens, r.windows, r.context, (unsigned long long)r.scored,
                r.context / 2 + 1, r.context - 1);
    std::printf("perplexity: %.4f +/- %.4f (mean NLL %.5f +/- %.5f nats/token), %.2f s\n", r.ppl, r.ppl_se, r.mean_nll,
                r.nll_se, r.seconds);
    nlohmann::json j = {{"model", dir},
                        {"weights", wname},
                        {"precision", precision_name(ctx->precision())},
                        {"device", ctx->caps().name},
                        {"text", a->text},
                        {"tokens", r.tokens},
                        {"context", r.context},
                        {"windows", r.windows},
                        {"scored", r.scored},
                        {"mean_nll", r.mean_nll},
                        {"nll_se", r.nll_se},
                        {"ppl", r.ppl},
                        {"ppl_se", r.ppl_se},
                        {"seconds", r.seconds}};
    if (r.has_base) {
      std::printf("base %s: perplexity %.4f +/- %.4f; ln(PPL/PPL_base) %.5f\n", a->kl_base.c_str(), r.base_ppl,
                  r.base_ppl_se, r.mean_nll - r.base_mean_nll);
      std::printf("KL(base || %s): mean %.6f +/- %.6f, p99 %.6f, max %.6f nats; top-1 agreement %.3f%%\n", wname,
                  r.kl_mean, r.kl_se, r.kl_p99, r.kl_max, 100.0 * r.top1);
      j["kl_base"] = {{"weights", a->kl_base},       {"ppl", r.base_ppl},    {"ppl_se", r.base_ppl_se},
                      {"mean_nll", r.base_mean_nll}, {"kl_mean", r.kl_mean}, {"kl_se", r.kl_se},
                      {"kl_p99", r.kl_p99},          {"kl_max", r.kl_max},   {"top1_agreement", r.top1}};
    }
    if (!a->json.empty()) {
      const std::string out = j.dump(2) + "\n";
      platform::write_file_atomic(a->json, out.data(), out.size());
    }
    return 0;
  };
}

}  // namespace diffvk::cli
