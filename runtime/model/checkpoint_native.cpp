// Native checkpoints (docs/maths.md names, <dir>/model.safetensors) as row sources, and the format dispatch.
#include <cmath>
#include <map>

#include "model/checkpoint.hpp"
#include "platform.hpp"

namespace diffvk {

ModelConfig read_model_config(const std::string& dir) {
  const auto bytes = platform::read_file(dir + "/config.json", 1 << 20);
  const std::string text(bytes.begin(), bytes.end());
  if (is_hf_diffllama(text)) return parse_hf_config(text, dir + "/config.json");
  return parse_model_config(text, dir + "/config.json");
}

Checkpoint open_checkpoint(const std::string& dir) {
  if (dir.size() > 5 && dir.compare(dir.size() - 5, 5, ".gguf") == 0) return open_gguf_checkpoint(dir);
  ModelConfig c = read_model_config(dir);
  if (c.format == "diffllama") return open_hf_checkpoint(dir, std::move(c));
  return open_native_checkpoint(dir, std::move(c));
}

Checkpoint open_native_checkpoint(const std::string& dir, ModelConfig config) {
  return open_native_checkpoint(std::make_unique<SafetensorsFile>(SafetensorsFile::open(dir + "/model.safetensors")),
                                std::move(config));
}

Checkpoint open_native_checkpoint(std::unique_ptr<SafetensorsFile> file, ModelConfig config) {
  Checkpoint ck;
  ck.config = std::move(config);
  const ModelConfig& c = ck.config;
  const std::string path = file->name();
  ck.files.push_back(std::move(file));
  const SafetensorsFile& st = *ck.files.back();
  const int64_t E = c.hidden_size, D = c.head_dim(), Hkv = c.num_kv_heads, I = c.intermediate_size, V = c.vocab_size;

  // Expected tensors: every name must be present with its shape, nothing else may be.
  std::map<std::string, std::vector<int64_t>> expect;
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
  for (const auto& t : st.tensors())
    if (!expect.count(t.name))
      throw Error(Status::format_error, path + ": unexpected tensor '" + t.name + "'" +
                                            (t.name == "lm_head.weight" ? " (config says tie_word_embeddings=true)" : ""));
  auto info = [&](const std::string& name) -> const TensorInfo& {
    const TensorInfo* t = st.find(name);
    if (!t) throw Error(Status::format_error, path + ": missing tensor '" + name + "'");
    if (t->dtype != DType::F32 && t->dtype != DType::F16 && t->dtype != DType::BF16)
      throw Error(Status::format_error, path + ": tensor '" + name + "' must be F32, F16 or BF16");
    return st.require(name, expect.at(name));
  };
  // One weight of the runtime from one or more tensors (row concatenation).
  auto weight = [&](const std::string& as, std::initializer_list<std::string> names, bool finite = false) {
    const auto& first = expect.at(*names.begin());
    WeightSource w{as, first.size() > 1 ? uint64_t(first[1]) : 1, {}, finite};
    for (const auto& n : names) w.add(st, info(n));
    return w;
  };
  ck.embed = weight("embed_tokens.weight", {"embed_tokens.weight"});
  for (uint32_t l = 0; l < c.num_layers; ++l) {
    const std::string p = "layers." + std::to_string(l) + ".";
    CheckpointLayer L;
    L.attn_norm = weight(p + "attn_norm.weight", {p + "attn_norm.weight"}, true);
    L.wqkv = weight(p + "attn.qkv", {p + "attn.q_proj.weight", p + "attn.k_proj.weight", p + "attn.v_proj.weight"});
    L.wo = weight(p + "attn.out_proj.weight", {p + "attn.out_proj.weight"});
    L.subln = weight(p + "attn.subln.weight", {p + "attn.subln.weight"}, true);
    L.ffn_norm = weight(p + "ffn_norm.weight", {p + "ffn_norm.weight"}, true);
    L.wgu = weight(p + "ffn.gate_up", {p + "ffn.gate_proj.weight", p + "ffn.up_proj.weight"});
    L.wdown = weight(p + "ffn.down_proj.weight", {p + "ffn.down_proj.weight"});
    int i = 0;
    for (const char* n : {"lambda_q1", "lambda_k1", "lambda_q2", "lambda_k2"}) {
      L.lambda[i] = st.to_float(info(p + "attn." + n));
      for (float x : L.lambda[i])
        if (!std::isfinite(x)) throw Error(Status::format_error, path + ": non-finite value in '" + p + "attn." + n + "'");
      ++i;
    }
    ck.layers.push_back(std::move(L));
  }
  ck.norm = weight("norm.weight", {"norm.weight"}, true);
  if (!c.tie_word_embeddings) ck.lm_head = weight("lm_head.weight", {"lm_head.weight"});
  return ck;
}

}  // namespace diffvk
