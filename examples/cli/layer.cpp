// diffvk layer: one MultiheadDiffAttn (DIFF V1) or MultiheadFlashDiffV2 (DIFF V2) layer from a safetensors file on
// a float32 .npy input.
#include <algorithm>
#include <cstdio>

#include "commands.hpp"
#include "diffvk/layer.hpp"
#include "diffvk/npy.hpp"

namespace diffvk::cli {

namespace {
struct LayerArgs {
  DeviceFlags dev;
  std::string weights, input, output;
  uint32_t heads = 0, kv_heads = 0;
  int depth = -1;
  double theta = 10000.0;
};
}  // namespace

Runner register_layer(CLI::App& app) {
  auto a = std::make_shared<LayerArgs>();
  auto* cmd = app.add_subcommand(
      "layer", "run one differential attention layer, DIFF V1 or V2 (causal, positions from 0) on x.npy");
  cmd->add_option("--weights", a->weights,
                  "safetensors with the reference state_dict names (DIFF V2: the authors' MultiheadFlashDiffV2 names)")
      ->required()
      ->check(CLI::ExistingFile);
  cmd->add_option("--num-heads", a->heads, "H, differential heads (DIFF V2: output heads; 2H query heads)")
      ->required()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--num-kv-heads", a->kv_heads, "Hkv, key/value groups (default H)")->check(CLI::PositiveNumber);
  cmd->add_option("--depth", a->depth,
                  "0-based layer index (sets lambda_init), in [0, 65535]; DIFF V1 only, where it is required")
      ->check(CLI::Range(0, 65535));
  cmd->add_option("--rope-theta", a->theta, "RoPE base, in (0, 1e9]")->check(finite_range(0, 1e9, true));
  cmd->add_option("--input", a->input, "float32 .npy of shape (S, E) or (B, S, E)")
      ->required()
      ->check(CLI::ExistingFile);
  cmd->add_option("--output", a->output, "float32 .npy of the same shape (written atomically)")->required();
  add_device_flags(cmd, a->dev);
  return [a]() {
    check_output(a->output, "--output", {a->input, a->weights});
    const NpyArray x = read_npy(a->input);
    if (x.shape.size() != 2 && x.shape.size() != 3)
      throw Error(Status::invalid_argument,
                  a->input + ": expected shape (S, E) or (B, S, E), got " + std::to_string(x.shape.size()) + " dims");
    const int64_t B = x.shape.size() == 3 ? x.shape[0] : 1, S = x.shape[x.shape.size() - 2], E = x.shape.back();
    if (B <= 0 || S <= 0 || E <= 0) throw Error(Status::invalid_argument, a->input + ": empty input");
    const std::vector<float> xf = npy_as_float(x);
    auto ctx = Context::create(a->dev.options());
    LayerOptions lo;
    lo.num_heads = a->heads;
    lo.num_kv_heads = a->kv_heads;
    lo.depth = std::max(0, a->depth);
    lo.rope_theta = a->theta;
    lo.max_positions = static_cast<uint32_t>(S);
    auto layer = DiffAttnLayer::load(*ctx, a->weights, lo);
    if (!layer->is_v2() && a->depth < 0)
      throw Error(Status::invalid_argument, "--depth is required for a DIFF V1 layer (it sets lambda_init)");
    if (layer->is_v2() && a->depth >= 0)
      throw Error(Status::invalid_argument,
                  "--depth has no meaning for a DIFF V2 layer (it has no lambda_init): leave it out");
    if (layer->hidden() != E)
      throw Error(Status::invalid_argument, a->input + ": last dimension " + std::to_string(E) + " != the layer's E " +
                                                std::to_string(layer->hidden()));
    std::vector<float> y(xf.size());
    for (int64_t b = 0; b < B; ++b) {
      layer->reset();
      auto yb = layer->forward(xf.data() + b * S * E, static_cast<uint32_t>(S));
      std::copy(yb.begin(), yb.end(), y.begin() + b * S * E);
    }
    write_npy_f32(a->output, x.shape, y.data());
    const std::string lam = layer->is_v2() ? "DIFF V2, lambda per token" : "lambda=" + std::to_string(layer->lambda());
    std::fprintf(stderr, "diffvk layer: %s, E=%lld, D=%u, %lld x %lld rows, %s -> %s\n",
                 precision_name(ctx->precision()), static_cast<long long>(E), layer->head_dim(),
                 static_cast<long long>(B), static_cast<long long>(S), lam.c_str(), a->output.c_str());
    return 0;
  };
}

}  // namespace diffvk::cli
