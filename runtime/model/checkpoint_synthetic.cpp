// A checkpoint of seeded random weights in a config's exact shape (Model::synthesize, `diffvk bench --shape`): the
// same row sources as a file's, generated a staging slice at a time as they stream to the device, so a model of a
// published shape runs without its download and without a file.
#include <chrono>

#include "model/checkpoint.hpp"
#include "model/model_impl.hpp"

namespace diffvk {

namespace {
// Linear weights: uniform with standard deviation 0.02 (the initializer range of the published configs), so the
// activations keep the magnitudes of a trained model's first steps; norms are ones.
constexpr float kWeightScale = 0.0346f;  // 0.02 · √3
constexpr float kLambdaScale = 0.1f;     // λ vectors (the authors' init: N(0, 0.1))

WeightSource random_rows(const std::string& name, uint64_t rows, uint64_t cols, uint64_t seed) {
  WeightSource w{name, cols, {}, false};
  w.add_random(rows, kWeightScale, seed);
  return w;
}
WeightSource ones(const std::string& name, uint64_t n) {
  WeightSource w{name, n, {}, true};
  w.add_ones(1);
  return w;
}
}  // namespace

Checkpoint synthetic_checkpoint(ModelConfig config, uint64_t seed) {
  Checkpoint ck;
  ck.config = std::move(config);
  const ModelConfig& c = ck.config;
  const uint64_t E = c.hidden_size, D = c.head_dim(), H = c.num_heads, Hkv = c.num_kv_heads, I = c.intermediate_size,
                 V = c.vocab_size;
  uint64_t stream = seed * 1000003ull;  // one seed per tensor: the weights differ, the model is reproducible
  ck.embed = random_rows("embed_tokens", V, E, ++stream);
  for (uint32_t l = 0; l < c.num_layers; ++l) {
    const std::string p = "layers." + std::to_string(l) + ".";
    CheckpointLayer L;
    L.attn_norm = ones(p + "attn_norm", E);
    // The fused projection's rows as the recipe reads them: DIFF V1 [Wq; Wk; Wv] (E + 2 · 2HkvD), DIFF V2
    // [Wq; Wλ; Wk; Wv] (2HD + H + 2 · HkvD).
    const uint64_t qkv_rows = c.v2() ? 2 * H * D + H + 2 * Hkv * D : E + 2 * 2 * Hkv * D;
    L.wqkv = random_rows(p + "attn.qkv", qkv_rows, E, ++stream);
    L.wo = random_rows(p + "attn.out_proj", E, c.v2() ? H * D : E, ++stream);
    if (!c.v2()) L.subln = ones(p + "attn.subln", 2 * D);
    L.ffn_norm = ones(p + "ffn_norm", E);
    L.wgu = random_rows(p + "ffn.gate_up", 2 * I, E, ++stream);
    L.wdown = random_rows(p + "ffn.down_proj", E, I, ++stream);
    if (!c.v2()) {
      uint64_t z = ++stream;
      for (auto& v : L.lambda) {
        v.resize(D);
        for (auto& x : v) {  // a small LCG: λ vectors are D floats, converted on the host at load anyway
          z = z * 6364136223846793005ull + 1442695040888963407ull;
          x = kLambdaScale * (float(double(z >> 40) / 8388608.0) - 1.0f);
        }
      }
    }
    ck.layers.push_back(std::move(L));
  }
  ck.norm = ones("norm", E);
  if (!c.tie_word_embeddings) ck.lm_head = random_rows("lm_head", V, E, ++stream);
  return ck;
}

Phi4FlashCheckpoint synthetic_phi4flash_checkpoint(Phi4FlashConfig config, uint64_t seed) {
  Phi4FlashCheckpoint ck;
  ck.config = std::move(config);
  ck.plan = sambay_plan(ck.config);
  ck.layers.resize(ck.config.num_layers);
  for (uint32_t l = 0; l < ck.config.num_layers; ++l) ck.layers[l].kind = ck.plan.kinds[l];
  uint64_t stream = seed * 1000003ull;
  // Every tensor of the config (phi4flash_tensors): the LayerNorm gains ones, everything else uniform with
  // standard deviation 0.02 (A_log near 0: A = −exp(A_log) near −1; the λ vectors as small as the other vectors).
  for (const Phi4FlashTensor& t : phi4flash_tensors(ck.config)) {
    const uint64_t rows = t.shape.size() == 2 ? uint64_t(t.shape[0]) : 1,
                   cols = uint64_t(t.shape.size() == 2 ? t.shape[1] : t.shape[0]);
    const bool gain = t.hf.find("layernorm.weight") != std::string::npos;
    WeightSource w{t.hf, cols, {}, gain};
    if (gain)
      w.add_ones(rows);
    else
      w.add_random(rows, kWeightScale, ++stream);
    t.source(ck) = std::move(w);
    ++ck.tensors;
  }
  return ck;
}

std::unique_ptr<Model> Model::synthesize(Context& ctx, const std::string& config_json, const LoadOptions& options,
                                         uint64_t seed, const std::string& name) {
  const auto t0 = std::chrono::steady_clock::now();
  ctx.device().check_not_lost();
  if (is_phi4flash_config(config_json)) {  // Phi-4-mini-flash (SambaY)
    Checkpoint ck =
        phi4flash_as_checkpoint(synthetic_phi4flash_checkpoint(parse_phi4flash_config(config_json, name), seed));
    return load_checkpoint(ctx, ck, options, name, t0);
  }
  ModelConfig c =
      is_hf_diffllama(config_json) ? parse_hf_config(config_json, name) : parse_model_config(config_json, name);
  Checkpoint ck = synthetic_checkpoint(std::move(c), seed);
  return load_checkpoint(ctx, ck, options, name, t0);
}

}  // namespace diffvk
