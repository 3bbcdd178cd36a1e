// Native checkpoints (docs/maths.md names, <dir>/model.safetensors) as row sources, and the format dispatch.
#include <cmath>
#include <functional>
#include <map>

#include "model/checkpoint.hpp"
#include "model/phi4flash_checkpoint.hpp"
#include "platform.hpp"

namespace diffvk {

ModelConfig read_model_config(const std::string& dir) {
  const auto bytes = platform::read_file(dir + "/config.json", 1 << 20);
  const std::string text(bytes.begin(), bytes.end());
  if (is_hf_diffllama(text)) return parse_hf_config(text, dir + "/config.json");
  return parse_model_config(text, dir + "/config.json");
}

namespace {
bool any_unaligned(std::initializer_list<uint32_t> widths) {
  for (uint32_t w : widths)
    if (w % 8) return true;
  return false;
}
}  // namespace

ModelPipelineShape model_pipeline_shape(const std::string& text) {
  ModelPipelineShape m;
  if (is_phi4flash_config(text)) {
    const Phi4FlashConfig c = parse_phi4flash_config(text);
    m.kind = "phi4flash";
    m.heads = c.num_attention_heads, m.kv_heads = c.num_key_value_heads, m.head_dim = c.head_dim;
    m.d_state = c.mamba_d_state;
    m.max_positions = c.max_position_embeddings;
    m.unaligned_width = any_unaligned({c.hidden_size, c.d_inner(), c.mamba_dt_rank, c.intermediate_size});
    return m;
  }
  const ModelConfig c = is_hf_diffllama(text) ? parse_hf_config(text, "config.json") : parse_model_config(text);
  m.kind = c.v2() ? "v2" : "v1";
  m.heads = c.num_heads, m.kv_heads = c.num_kv_heads, m.head_dim = c.head_dim();
  m.max_positions = c.max_position_embeddings;
  // The linears read E (q/k/v, gate/up, the head), I (down) and the attention's output (o_proj).
  m.unaligned_width =
      any_unaligned({c.hidden_size, c.intermediate_size, c.num_heads * c.head_dim(), 2 * c.num_heads * c.head_dim()});
  return m;
}

namespace {
bool ends_with_gguf(const std::string& path) {
  return path.size() > 5 && path.compare(path.size() - 5, 5, ".gguf") == 0;
}
}  // namespace

std::string model_config_text(const std::string& path) {
  if (ends_with_gguf(path)) return gguf_config_json(GgufFile::open(path));
  const auto bytes = platform::read_file(path + "/config.json", 1 << 20);
  return std::string(bytes.begin(), bytes.end());
}

std::string model_config_text(const void* data, size_t size) {
  if (!data && size) throw Error(Status::invalid_argument, "model_config_text: data is null");
  if (GgufFile::has_magic(data, size)) return gguf_config_json(GgufFile::from_view(data, size, "GGUF in memory"));
  return std::string(static_cast<const char*>(data), size);
}

Checkpoint open_checkpoint(const std::string& dir) {
  if (ends_with_gguf(dir)) return open_gguf_checkpoint(dir);
  if (is_phi4flash_path(dir)) return phi4flash_as_checkpoint(open_phi4flash_checkpoint(dir));
  ModelConfig c = read_model_config(dir);
  if (c.format == "diffllama") return open_hf_checkpoint(dir, std::move(c));
  return open_native_checkpoint(dir, std::move(c));
}

Checkpoint phi4flash_as_checkpoint(Phi4FlashCheckpoint pk) {
  Checkpoint ck;
  const Phi4FlashConfig& c = pk.config;
  ModelConfig& m = ck.config;  // what the model-independent code reads (sizes, tokens, context)
  m.format = "phi4flash";
  m.tokenizer = "none";
  m.vocab_size = c.vocab_size;
  m.hidden_size = c.hidden_size;
  m.num_layers = c.num_layers;
  m.num_heads = c.diff_heads();
  m.num_kv_heads = c.kv_groups();
  m.head_dim_key = c.head_dim;
  m.intermediate_size = c.intermediate_size;
  m.rms_norm_eps = c.layer_norm_eps;
  m.max_position_embeddings = c.max_position_embeddings;
  m.tie_word_embeddings = !pk.lm_head.rows();
  m.bos_token_id = c.bos_token_id;
  m.eos_token_id = c.eos_token_id;
  ck.phi4flash = std::make_unique<Phi4FlashCheckpoint>(std::move(pk));
  return ck;
}

Checkpoint open_native_checkpoint(const std::string& dir, ModelConfig config) {
  return open_native_checkpoint(std::make_unique<SafetensorsFile>(SafetensorsFile::open(dir + "/model.safetensors")),
                                std::move(config));
}

namespace {
// Expected tensors (every name present with its shape, nothing else), and a reader of one weight from them.
class ExpectedTensors {
 public:
  ExpectedTensors(const SafetensorsFile& st, std::string path) : st_(st), path_(std::move(path)) {}
  std::map<std::string, std::vector<int64_t>> shapes;
  // Every tensor of the file is expected (the hint explains a known mistake).
  void check_no_extra(const std::function<std::string(const std::string&)>& hint) const {
    for (const auto& t : st_.tensors())
      if (!shapes.count(t.name))
        throw Error(Status::format_error, path_ + ": unexpected tensor '" + t.name + "'" + hint(t.name));
  }
  const TensorInfo& info(const std::string& name) const {
    const TensorInfo* t = st_.find(name);
    if (!t) throw Error(Status::format_error, path_ + ": missing tensor '" + name + "'");
    if (t->dtype != DType::F32 && t->dtype != DType::F16 && t->dtype != DType::BF16)
      throw Error(Status::format_error, path_ + ": tensor '" + name + "' must be F32, F16 or BF16");
    return st_.require(name, shapes.at(name));
  }
  // One weight of the runtime from one or more tensors (row concatenation).
  WeightSource weight(const std::string& as, std::initializer_list<std::string> names, bool finite = false) const {
    const auto& first = shapes.at(*names.begin());
    WeightSource w{as, first.size() > 1 ? uint64_t(first[1]) : 1, {}, finite};
    for (const auto& n : names) w.add(st_, info(n));
    return w;
  }

 private:
  const SafetensorsFile& st_;
  std::string path_;
};

// DIFF V2 (docs/maths.md "DIFF V2 models"): Hugging Face Llama names outside attention, the authors'
// MultiheadFlashDiffV2 names inside self_attn. The fused projection is [Wq; Wλ; Wk; Wv] (the recipe's AttnBlock::v2).
Checkpoint open_native_v2(Checkpoint ck, const std::string& path) {
  const ModelConfig& c = ck.config;
  const int64_t E = c.hidden_size, D = c.head_dim(), H = c.num_heads, Hkv = c.num_kv_heads, I = c.intermediate_size,
                V = c.vocab_size;
  ExpectedTensors x(*ck.files.back(), path);
  x.shapes["model.embed_tokens.weight"] = {V, E};
  x.shapes["model.norm.weight"] = {E};
  if (!c.tie_word_embeddings) x.shapes["lm_head.weight"] = {V, E};
  auto P = [](uint32_t l) { return "model.layers." + std::to_string(l) + "."; };
  for (uint32_t l = 0; l < c.num_layers; ++l) {
    const std::string p = P(l);
    x.shapes[p + "input_layernorm.weight"] = {E};
    x.shapes[p + "self_attn.q_proj.weight"] = {2 * H * D, E};
    x.shapes[p + "self_attn.lambda_proj.weight"] = {H, E};
    x.shapes[p + "self_attn.k_proj.weight"] = {Hkv * D, E};
    x.shapes[p + "self_attn.v_proj.weight"] = {Hkv * D, E};
    x.shapes[p + "self_attn.o_proj.weight"] = {E, H * D};
    x.shapes[p + "post_attention_layernorm.weight"] = {E};
    x.shapes[p + "mlp.gate_proj.weight"] = {I, E};
    x.shapes[p + "mlp.up_proj.weight"] = {I, E};
    x.shapes[p + "mlp.down_proj.weight"] = {E, I};
  }
  x.check_no_extra([&](const std::string& n) -> std::string {
    if (n == "lm_head.weight") return " (config says tie_word_embeddings=true)";
    if (n.find("lambda_q1") != std::string::npos || n.find("subln") != std::string::npos ||
        n.find(".attn.") != std::string::npos)
      return " (a DIFF V1 name in a file whose config.json says diff_version 2)";
    return "";
  });
  ck.embed = x.weight("model.embed_tokens.weight", {"model.embed_tokens.weight"});
  for (uint32_t l = 0; l < c.num_layers; ++l) {
    const std::string p = P(l), a = p + "self_attn.";
    CheckpointLayer L;
    L.attn_norm = x.weight(p + "input_layernorm.weight", {p + "input_layernorm.weight"}, true);
    L.wqkv =
        x.weight(a + "qkv", {a + "q_proj.weight", a + "lambda_proj.weight", a + "k_proj.weight", a + "v_proj.weight"});
    L.wo = x.weight(a + "o_proj.weight", {a + "o_proj.weight"});
    L.ffn_norm = x.weight(p + "post_attention_layernorm.weight", {p + "post_attention_layernorm.weight"}, true);
    L.wgu = x.weight(p + "mlp.gate_up", {p + "mlp.gate_proj.weight", p + "mlp.up_proj.weight"});
    L.wdown = x.weight(p + "mlp.down_proj.weight", {p + "mlp.down_proj.weight"});
    ck.layers.push_back(std::move(L));  // no subln, no λ vectors
  }
  ck.norm = x.weight("model.norm.weight", {"model.norm.weight"}, true);
  if (!c.tie_word_embeddings) ck.lm_head = x.weight("lm_head.weight", {"lm_head.weight"});
  return ck;
}
}  // namespace

Checkpoint open_native_checkpoint(std::unique_ptr<SafetensorsFile> file, ModelConfig config) {
  Checkpoint ck;
  ck.config = std::move(config);
  const ModelConfig& c = ck.config;
  const std::string path = file->name();
  ck.files.push_back(std::move(file));
  const SafetensorsFile& st = *ck.files.back();
  const int64_t E = c.hidden_size, D = c.head_dim(), Hkv = c.num_kv_heads, I = c.intermediate_size, V = c.vocab_size;

  if (c.v2()) return open_native_v2(std::move(ck), path);
  ExpectedTensors ex(st, path);
  auto& expect = ex.shapes;
  expect["embed_tokens.weight"] = {V, E};
  expect["norm.weight"] = {E};
  if (!c.tie_word_embeddings) expect["lm_head.weight"] = {V, E};
  for (uint32_t l = 0; l < c.num_layers; ++l) {
    const std::string p = "layers." + std::to_string(l) + ".";
    expect[p + "attn_norm.weight"] = {E};
    expect[p + "attn.q_proj.weight"] = {E, E};
    expect[p + "attn.k_proj.weight"] = {2 * Hkv * D, E};
    expect[p + "attn.v_proj.weight"] = {2 * Hkv * D, E};
    expect[p + "attn.out_proj.weight"] = {E, E};
    for (const char* n : {"lambda_q1", "lambda_k1", "lambda_q2", "lambda_k2"}) expect[p + "attn." + n] = {D};
    expect[p + "attn.subln.weight"] = {2 * D};
    expect[p + "ffn_norm.weight"] = {E};
    expect[p + "ffn.gate_proj.weight"] = {I, E};
    expect[p + "ffn.up_proj.weight"] = {I, E};
    expect[p + "ffn.down_proj.weight"] = {E, I};
  }
  ex.check_no_extra([](const std::string& n) -> std::string {
    if (n == "lm_head.weight") return " (config says tie_word_embeddings=true)";
    if (n.rfind("model.", 0) == 0 || n.find("lambda_proj") != std::string::npos)
      return " (a DIFF V2 name: a DIFF V2 checkpoint's config.json has \"diff_version\": 2 and \"head_dim\")";
    return "";
  });
  ck.embed = ex.weight("embed_tokens.weight", {"embed_tokens.weight"});
  for (uint32_t l = 0; l < c.num_layers; ++l) {
    const std::string p = "layers." + std::to_string(l) + ".";
    CheckpointLayer L;
    L.attn_norm = ex.weight(p + "attn_norm.weight", {p + "attn_norm.weight"}, true);
    L.wqkv = ex.weight(p + "attn.qkv", {p + "attn.q_proj.weight", p + "attn.k_proj.weight", p + "attn.v_proj.weight"});
    L.wo = ex.weight(p + "attn.out_proj.weight", {p + "attn.out_proj.weight"});
    L.subln = ex.weight(p + "attn.subln.weight", {p + "attn.subln.weight"}, true);
    L.ffn_norm = ex.weight(p + "ffn_norm.weight", {p + "ffn_norm.weight"}, true);
    L.wgu = ex.weight(p + "ffn.gate_up", {p + "ffn.gate_proj.weight", p + "ffn.up_proj.weight"});
    L.wdown = ex.weight(p + "ffn.down_proj.weight", {p + "ffn.down_proj.weight"});
    int i = 0;
    for (const char* n : {"lambda_q1", "lambda_k1", "lambda_q2", "lambda_k2"}) {
      L.lambda[i] = st.to_float(ex.info(p + "attn." + n));
      for (float x : L.lambda[i])
        if (!std::isfinite(x))
          throw Error(Status::format_error, path + ": non-finite value in '" + p + "attn." + n + "'");
      ++i;
    }
    ck.layers.push_back(std::move(L));
  }
  ck.norm = ex.weight("norm.weight", {"norm.weight"}, true);
  if (!c.tie_word_embeddings) ck.lm_head = ex.weight("lm_head.weight", {"lm_head.weight"});
  return ck;
}

}  // namespace diffvk
