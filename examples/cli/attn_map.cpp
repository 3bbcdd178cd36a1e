// diffvk attn-map: the attention maps of one layer (Session::attention_maps, computed on the device)
// as a PNG (A1, A2, A1 − λ·A2 with token labels; bench::render_attention_png of diffvk/png.hpp) and/or JSON with the
// numbers. DIFF V2 models: A1, A2 are query heads 2h, 2h + 1 and λ is per query row (the JSON's lambda_rows).
#include <nlohmann/json.hpp>

#include <cstddef>
#include <cstdio>

#include "commands.hpp"
#include "diffvk/model.hpp"
#include "diffvk/atomic_write.hpp"
#include "diffvk/png.hpp"

namespace diffvk::cli {

namespace {
// A token as ASCII for the axes: its decoded bytes with printable ASCII as it is, the space as '_',
// \n, \t and other bytes escaped (\xHH), at most 12 characters; <bos>/<eos>, or #id when it decodes to nothing.
std::string token_label(const Tokenizer& tok, int32_t id) {
  if (id == tok.bos_id()) return "<bos>";
  if (id == tok.eos_id()) return "<eos>";
  std::string out;
  for (unsigned char ch : tok.decode(&id, 1)) {
    if (ch == ' ')
      out += '_';
    else if (ch > ' ' && ch < 127)
      out += char(ch);
    else if (ch == '\n')
      out += "\\n";
    else if (ch == '\t')
      out += "\\t";
    else {
      char b[8];
      std::snprintf(b, sizeof b, "\\x%02X", ch);
      out += b;
    }
  }
  if (out.empty()) return "#" + std::to_string(id);
  return out.size() > 12 ? out.substr(0, 10) + ".." : out;
}

nlohmann::json matrix(const float* p, uint32_t T) {
  nlohmann::json rows = nlohmann::json::array();
  for (uint32_t i = 0; i < T; ++i) rows.push_back(std::vector<float>(p + size_t(i) * T, p + size_t(i + 1) * T));
  return rows;
}
}  // namespace

Runner register_attn_map(CLI::App& app) {
  struct Args {
    DeviceFlags dev;
    std::string model, prompt, output, json;
    uint32_t layer = 0;
    int32_t head = -1;
    LoadOptions load;
  };
  auto a = std::make_shared<Args>();
  auto* cmd = app.add_subcommand("attn-map", "draw one layer's attention maps A1, A2 and A1 - lambda*A2 for a prompt");
  cmd->add_option("--model", a->model, "checkpoint directory or .gguf file (default: the bundled model)")
      ->check(CLI::ExistingDirectory | gguf_file_validator());
  cmd->add_option("--prompt,-p", a->prompt, "prompt text (the tokenizer of `diffvk run`)")->required();
  cmd->add_option("--layer", a->layer, "layer index (0-based)")->required();
  cmd->add_option("--head", a->head, "head index (default: every head), in [0, 65535]")->check(CLI::Range(0, 65535));
  cmd->add_option("--output,-o", a->output, "PNG file, written atomically");
  cmd->add_option("--json", a->json,
                  "JSON file with the numbers (tokens, labels, lambda, A1, A2 and the difference per head; DIFF V2: "
                  "lambda per query row)");
  add_weights_flag(cmd, a->load);
  add_device_flags(cmd, a->dev);
  return [a]() {
    if (a->output.empty() && a->json.empty())
      throw Error(Status::invalid_argument, "attn-map: give --output PNG and/or --json FILE");
    const std::string dir = a->model.empty() ? default_model_dir() : a->model;
    if (!a->output.empty()) check_output(a->output, "--output", {}, dir);
    if (!a->json.empty()) check_output(a->json, "--json", {a->output}, dir);
    auto ctx = Context::create(a->dev.options_for_model(dir, a->load));
    auto model = Model::load(*ctx, dir, a->load);
    const ModelConfig& cfg = model->config();
    const Tokenizer tokenizer = model_tokenizer(dir, cfg);  // the tokenizer of `diffvk run`
    const std::vector<int32_t> tokens = tokenizer.encode(a->prompt, true);
    if (tokens.empty()) throw Error(Status::invalid_argument, "attn-map: the prompt encodes to no tokens");
    if (tokens.size() > kAttentionMapMaxTokens)
      throw Error(Status::invalid_argument, "attn-map: the prompt is " + std::to_string(tokens.size()) +
                                                " tokens; at most " + std::to_string(kAttentionMapMaxTokens) +
                                                " are drawn");
    auto session = Session::create(*model, SessionOptions{static_cast<uint32_t>(tokens.size()), 64, false, {}});
    const AttentionMaps maps = session->attention_maps(tokens, a->layer, a->head);
    std::vector<std::string> labels;
    for (int32_t t : tokens) labels.push_back(token_label(tokenizer, t));
    if (!a->output.empty()) {
      const auto png = bench::render_attention_png(maps, labels);
      platform::write_file_atomic(a->output, png.data(), png.size());
    }
    if (!a->json.empty()) {
      // DIFF V1: one λ for the layer. DIFF V2: λ per query row and head ("lambda_rows"), "lambda" and "lambda_init" are
      // 0.
      nlohmann::json j = {{"layer", maps.layer},
                          {"diff_version", maps.v2 ? 2 : 1},
                          {"tokens", tokens},
                          {"labels", labels},
                          {"lambda", maps.lambda},
                          {"lambda_init", maps.lambda_init},
                          {"heads", nlohmann::json::array()}};
      const size_t plane = size_t(maps.tokens) * maps.tokens;
      for (uint32_t h = 0; h < maps.heads; ++h) {
        std::vector<float> diff(plane);
        for (size_t i = 0; i < plane; ++i)
          diff[i] =
              float(maps.a1[h * plane + i] - maps.lambda_at(h, uint32_t(i / maps.tokens)) * maps.a2[h * plane + i]);
        nlohmann::json head = {{"head", maps.head0 + h},
                               {"a1", matrix(&maps.a1[h * plane], maps.tokens)},
                               {"a2", matrix(&maps.a2[h * plane], maps.tokens)},
                               {"a1_minus_lambda_a2", matrix(diff.data(), maps.tokens)}};
        if (maps.v2) {
          const uint32_t q = 2 * (maps.head0 + h);
          head["query_heads"] = {q, q + 1};
          head["lambda_rows"] = std::vector<float>(maps.lambda_rows.begin() + std::ptrdiff_t(h) * maps.tokens,
                                                   maps.lambda_rows.begin() + std::ptrdiff_t(h + 1) * maps.tokens);
        }
        j["heads"].push_back(std::move(head));
      }
      const std::string text = j.dump() + "\n";
      platform::write_file_atomic(a->json, text.data(), text.size());
    }
    char lambda[48] = "DIFF V2, lambda per query row";
    if (!maps.v2) std::snprintf(lambda, sizeof lambda, "lambda %.4g", maps.lambda);
    std::fprintf(stderr, "diffvk attn-map: %s, layer %u, %u head(s), %zu tokens, %s%s%s%s%s\n",
                 precision_name(ctx->precision()), maps.layer, maps.heads, tokens.size(), lambda,
                 a->output.empty() ? "" : " -> ", a->output.c_str(), a->json.empty() ? "" : " -> ", a->json.c_str());
    return 0;
  };
}

}  // namespace diffvk::cli
