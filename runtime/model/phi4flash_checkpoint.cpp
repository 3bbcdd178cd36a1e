// Phi-4-mini-flash (phi4flash) checkpoints as row sources (phi4flash_checkpoint.hpp): the table of its tensors, the
// Hugging Face safetensors reader (single, sharded, or one file in memory) and the GGUF reader.
#include "model/phi4flash_checkpoint.hpp"

#include <algorithm>
#include <map>
#include <set>
#include <utility>

#include <nlohmann/json.hpp>

#include "model/gguf_tokenizer.hpp"
#include "model/shard_index.hpp"
#include "platform.hpp"

namespace diffvk {

WeightSource& Phi4FlashTensor::source(Phi4FlashCheckpoint& ck) const {
  if (top) return ck.*top;
  return ck.layers.at(size_t(layer)).*field;
}

std::vector<Phi4FlashTensor> phi4flash_tensors(const Phi4FlashConfig& c) {
  const SambaYPlan plan = sambay_plan(c);
  const int64_t E = c.hidden_size, C = c.d_inner(), S = c.mamba_d_state, R = c.mamba_dt_rank, K = c.mamba_d_conv,
                I = c.intermediate_size, V = c.vocab_size, D = c.head_dim, q = int64_t(c.num_attention_heads) * D,
                kv = int64_t(c.num_key_value_heads) * D;
  using L = Phi4FlashLayer;
  using CK = Phi4FlashCheckpoint;
  using St = Phi4FlashStore;
  std::vector<Phi4FlashTensor> out;
  auto top = [&](const char* hf, const char* gguf, std::vector<int64_t> shape, WeightSource CK::*m, St st) {
    Phi4FlashTensor t;
    t.hf = hf;
    t.gguf = gguf;
    t.hf_shape = t.shape = std::move(shape);
    t.top = m;
    t.store = st;
    out.push_back(std::move(t));
  };
  for (uint32_t l = 0; l < c.num_layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".", g = "blk." + std::to_string(l) + ".";
    // hf_shape differs from shape only for conv1d.weight ([C, 1, K] stored, rows of K read).
    auto lay = [&](const std::string& hf, const std::string& gguf, std::vector<int64_t> shape, WeightSource L::*m,
                   St st, std::vector<int64_t> hf_shape = {}) {
      Phi4FlashTensor t;
      t.hf = p + hf;
      t.gguf = g + gguf;
      t.hf_shape = hf_shape.empty() ? shape : std::move(hf_shape);
      t.shape = std::move(shape);
      t.layer = int(l);
      t.field = m;
      t.store = st;
      out.push_back(std::move(t));
    };
    if (l == 0)
      top("model.embed_tokens.weight", "token_embd.weight", {V, E}, &CK::embed,
          c.tie_word_embeddings ? St::head : St::linear);
    lay("input_layernorm.weight", "attn_norm.weight", {E}, &L::ln1_w, St::f32);
    lay("input_layernorm.bias", "attn_norm.bias", {E}, &L::ln1_b, St::f32);
    switch (plan.kinds[l]) {
      case SambaYLayerKind::mamba:
      case SambaYLayerKind::memory_mamba:
        lay("attn.in_proj.weight", "ssm_in.weight", {2 * C, E}, &L::in_proj, St::linear);
        lay("attn.conv1d.weight", "ssm_conv1d.weight", {C, K}, &L::conv_w, St::f32, {C, 1, K});
        lay("attn.conv1d.bias", "ssm_conv1d.bias", {C}, &L::conv_b, St::f32);
        lay("attn.x_proj.weight", "ssm_x.weight", {R + 2 * S, C}, &L::x_proj, St::f16);
        lay("attn.dt_proj.weight", "ssm_dt.weight", {C, R}, &L::dt_w, St::f16);
        lay("attn.dt_proj.bias", "ssm_dt.bias", {C}, &L::dt_b, St::f32);
        lay("attn.A_log", "ssm_a_log", {C, S}, &L::A_log, St::f32);
        lay("attn.D", "ssm_d", {C}, &L::D, St::f32);
        lay("attn.out_proj.weight", "ssm_out.weight", {E, C}, &L::out_proj, St::linear);
        break;
      case SambaYLayerKind::gated_memory:
        lay("attn.in_proj.weight", "gmu_in.weight", {C, E}, &L::in_proj, St::linear);
        lay("attn.out_proj.weight", "gmu_out.weight", {E, C}, &L::out_proj, St::linear);
        break;
      case SambaYLayerKind::sliding_attention:
      case SambaYLayerKind::full_attention:
      case SambaYLayerKind::cross_attention: {
        const bool cross = plan.kinds[l] == SambaYLayerKind::cross_attention;
        const std::string qkv = cross ? "attn_q" : "attn_qkv", a = "attn.inner_cross_attn.";
        const int64_t rows = cross ? q : q + 2 * kv;
        lay("attn.Wqkv.weight", qkv + ".weight", {rows, E}, &L::wqkv, St::linear);
        lay("attn.Wqkv.bias", qkv + ".bias", {rows}, &L::wqkv_b, St::f32);
        lay("attn.out_proj.weight", "attn_output.weight", {E, q}, &L::out_proj, St::linear);
        lay("attn.out_proj.bias", "attn_output.bias", {E}, &L::out_b, St::f32);
        lay(a + "lambda_q1", "attn_lambda_q1", {D}, &L::lambda_q1, St::f32);
        lay(a + "lambda_k1", "attn_lambda_k1", {D}, &L::lambda_k1, St::f32);
        lay(a + "lambda_q2", "attn_lambda_q2", {D}, &L::lambda_q2, St::f32);
        lay(a + "lambda_k2", "attn_lambda_k2", {D}, &L::lambda_k2, St::f32);
        lay(a + "subln.weight", "attn_sub_norm.weight", {2 * D}, &L::subln, St::f32);
        break;
      }
    }
    lay("post_attention_layernorm.weight", "ffn_norm.weight", {E}, &L::ln2_w, St::f32);
    lay("post_attention_layernorm.bias", "ffn_norm.bias", {E}, &L::ln2_b, St::f32);
    lay("mlp.fc1.weight", "ffn_up.weight", {2 * I, E}, &L::fc1, St::linear);
    lay("mlp.fc2.weight", "ffn_down.weight", {E, I}, &L::fc2, St::linear);
  }
  top("model.final_layernorm.weight", "output_norm.weight", {E}, &CK::final_w, St::f32);
  top("model.final_layernorm.bias", "output_norm.bias", {E}, &CK::final_b, St::f32);
  if (!c.tie_word_embeddings) top("lm_head.weight", "output.weight", {V, E}, &CK::lm_head, St::head);
  return out;
}

namespace {

// A fresh checkpoint of a config: the plan, and one empty layer of each kind.
Phi4FlashCheckpoint prepared(Phi4FlashConfig config) {
  Phi4FlashCheckpoint ck;
  ck.config = std::move(config);
  ck.plan = sambay_plan(ck.config);
  ck.layers.resize(ck.config.num_layers);
  for (uint32_t l = 0; l < ck.config.num_layers; ++l) ck.layers[l].kind = ck.plan.kinds[l];
  return ck;
}

WeightSource empty_source(const Phi4FlashTensor& t) {
  const uint64_t cols = t.shape.size() > 1 ? uint64_t(t.shape[1]) : 1;
  return WeightSource{t.hf, cols, {}, t.store == Phi4FlashStore::f32};  // vectors and conv filters: finite
}

// " (layer N is a <kind> layer)" for a name "<prefix>N.<...>", else "".
std::string layer_hint(const Phi4FlashCheckpoint& ck, const std::string& name, const std::string& prefix) {
  if (name.compare(0, prefix.size(), prefix) != 0) return "";
  size_t at = prefix.size();
  uint64_t l = 0;
  bool digits = false;
  while (at < name.size() && name[at] >= '0' && name[at] <= '9' && l < (1u << 20))
    l = l * 10 + uint64_t(name[at++] - '0'), digits = true;
  if (!digits || at >= name.size() || name[at] != '.') return "";
  if (l >= ck.layers.size()) return " (the config has " + std::to_string(ck.layers.size()) + " layers)";
  return std::string(" (layer ") + std::to_string(l) + " is a " + to_string(ck.plan.kinds[size_t(l)]) + " layer)";
}

bool float_dtype(DType d) { return d == DType::F32 || d == DType::F16 || d == DType::BF16; }

// The safetensors tensors `where` (one file or shards) into the sources of `ck`; `what` names the checkpoint.
void read_safetensors(Phi4FlashCheckpoint& ck, const std::map<std::string, LocatedTensor>& where,
                      const std::string& what) {
  const Phi4FlashConfig& c = ck.config;
  std::set<std::string> used;
  auto fail = [](const std::string& m) { return Error(Status::format_error, m); };
  for (const Phi4FlashTensor& t : phi4flash_tensors(c)) {
    const auto it = where.find(t.hf);
    if (it == where.end()) throw fail(what + ": missing tensor '" + t.hf + "'" + layer_hint(ck, t.hf, "model.layers."));
    const SafetensorsFile& f = *it->second.file;
    const TensorInfo& info = *it->second.info;
    if (!float_dtype(info.dtype))
      throw fail(f.name() + ": tensor '" + t.hf + "' is " + dtype_name(info.dtype) +
                 "; phi4flash tensors must be F32, F16 or BF16");
    f.require(t.hf, t.hf_shape);
    WeightSource w = empty_source(t);
    w.add(f, info);
    t.source(ck) = std::move(w);
    used.insert(t.hf);
    ++ck.tensors;
  }
  // A tied checkpoint may carry a copy of the embedding as lm_head.weight (some exporters keep it): unused, as for
  // DiffLlama, but it must be one.
  if (c.tie_word_embeddings) {
    const auto it = where.find("lm_head.weight");
    if (it != where.end()) {
      if (!float_dtype(it->second.info->dtype))
        throw fail(it->second.file->name() + ": tensor 'lm_head.weight' is " + dtype_name(it->second.info->dtype) +
                   "; phi4flash tensors must be F32, F16 or BF16");
      it->second.file->require("lm_head.weight", {int64_t(c.vocab_size), int64_t(c.hidden_size)});
      used.insert("lm_head.weight");
    }
  }
  for (const auto& [name, loc] : where)
    if (!used.count(name))
      throw fail(loc.file->name() + ": unexpected tensor '" + name + "'" + layer_hint(ck, name, "model.layers."));
}

}  // namespace

Phi4FlashCheckpoint open_phi4flash_checkpoint(const std::string& dir) {
  const auto bytes = platform::read_file(dir + "/config.json", 1 << 20);
  Phi4FlashCheckpoint ck =
      prepared(parse_phi4flash_config(std::string(bytes.begin(), bytes.end()), dir + "/config.json"));
  std::map<std::string, LocatedTensor> where;
  ck.files = open_safetensors_files(dir, where);
  read_safetensors(ck, where, dir);
  return ck;
}

Phi4FlashCheckpoint open_phi4flash_checkpoint(std::unique_ptr<SafetensorsFile> file, Phi4FlashConfig config) {
  Phi4FlashCheckpoint ck = prepared(std::move(config));
  ck.files.push_back(std::move(file));
  std::map<std::string, LocatedTensor> where;
  for (const TensorInfo& t : ck.files.back()->tensors()) where[t.name] = {ck.files.back().get(), &t};
  read_safetensors(ck, where, ck.files.back()->name());
  return ck;
}

Phi4FlashCheckpoint open_phi4flash_gguf(const std::string& path) {
  return open_phi4flash_gguf(std::make_unique<GgufFile>(GgufFile::open(path)));
}

namespace {
// config.json's key -> its phi4flash.* GGUF key (without the prefix).
const std::pair<const char*, const char*> kGgufKeys[] = {
    {"vocab_size", "vocab_size"},
    {"hidden_size", "embedding_length"},
    {"intermediate_size", "feed_forward_length"},
    {"num_hidden_layers", "block_count"},
    {"num_attention_heads", "attention.head_count"},
    {"num_key_value_heads", "attention.head_count_kv"},
    {"head_dim", "attention.key_length"},
    {"max_position_embeddings", "context_length"},
    {"sliding_window", "attention.sliding_window"},
    {"layer_norm_eps", "attention.layer_norm_epsilon"},
    {"mamba_d_state", "ssm.state_size"},
    {"mamba_d_conv", "ssm.conv_kernel"},
    {"mamba_expand", "ssm.inner_size"},
    {"mamba_dt_rank", "ssm.time_step_rank"},
    {"bos_token_id", "bos_token_id"},
    {"eos_token_id", "eos_token_id"},
};
}  // namespace

std::string phi4flash_gguf_config_json(const GgufFile& f) {
  const std::string path = f.name();
  auto fail = [&](const std::string& what) { return Error(Status::format_error, path + ": " + what); };
  auto u = [&](const std::string& k) { return f.require_value("phi4flash." + k).as_u64(path + ": phi4flash." + k); };
  nlohmann::json j;
  j["model_type"] = "phi4flash";
  j["hidden_act"] = "silu";
  for (const auto& [hf, g] : kGgufKeys) {
    if (std::string(hf) == "mamba_expand" || std::string(hf) == "layer_norm_eps" || std::string(hf) == "bos_token_id" ||
        std::string(hf) == "eos_token_id")
      continue;
    j[hf] = u(g);
  }
  j["layer_norm_eps"] = f.require_value("phi4flash.attention.layer_norm_epsilon")
                            .as_f64(path + ": phi4flash.attention.layer_norm_epsilon");
  const uint64_t E = u("embedding_length"), inner = u("ssm.inner_size");
  if (E == 0 || inner % E)
    throw fail("phi4flash.ssm.inner_size = " + std::to_string(inner) +
               " is not a multiple of phi4flash.embedding_length = " + std::to_string(E) + " (d_inner = expand x E)");
  j["mamba_expand"] = inner / E;
  j["tie_word_embeddings"] = f.find_tensor("output.weight") == nullptr;
  const GgufTokenIds ids = gguf_model_token_ids(f);  // phi4flash.* where the tokenizer's ids differ
  if (ids.bos >= 0) j["bos_token_id"] = ids.bos;
  if (ids.eos >= 0) j["eos_token_id"] = ids.eos;
  return j.dump();
}

Phi4FlashCheckpoint open_phi4flash_gguf(std::unique_ptr<GgufFile> file) {
  const GgufFile& f = *file;
  const std::string path = f.name();
  auto fail = [&](const std::string& what) { return Error(Status::format_error, path + ": " + what); };
  const std::string arch(f.require_value("general.architecture").as_string(path + ": general.architecture"));
  if (arch != "phi4flash") throw fail("general.architecture is '" + arch.substr(0, 40) + "', not 'phi4flash'");
  auto u = [&](const std::string& k) { return f.require_value("phi4flash." + k).as_u64(path + ": phi4flash." + k); };
  // The config.json rules apply to the GGUF keys too (one checker); its messages name the config.json key, which
  // is renamed to the GGUF key below.
  Phi4FlashConfig config;
  try {
    config = parse_phi4flash_config(phi4flash_gguf_config_json(f), path + " (phi4flash.* keys)");
  } catch (const Error& e) {
    std::string m = e.what();
    for (const auto& [hf, g] : kGgufKeys) {
      const std::string from = std::string("'") + hf + "'";
      const size_t at = m.find(from);
      if (at != std::string::npos) {
        m.replace(at, from.size(), std::string("'phi4flash.") + g + "' (config.json's " + hf + ")");
        break;
      }
    }
    throw Error(e.status(), m);
  }
  if (f.find_value("phi4flash.attention.value_length") && u("attention.value_length") != config.head_dim)
    throw fail("phi4flash.attention.value_length differs from phi4flash.attention.key_length");

  Phi4FlashCheckpoint ck = prepared(std::move(config));
  ck.gguf = std::move(file);
  size_t expected = 0;
  for (const Phi4FlashTensor& t : phi4flash_tensors(ck.config)) {
    const GgufTensorInfo* gt = f.find_tensor(t.gguf);
    if (!gt) throw fail("missing tensor '" + t.gguf + "'" + layer_hint(ck, t.gguf, "blk."));
    if (gt->shape() != t.shape)
      throw fail("tensor '" + t.gguf + "' has shape " + shape_to_string(gt->shape()) + ", expected " +
                 shape_to_string(t.shape));
    const bool quant = gt->type == GgmlType::q8_0 || gt->type == GgmlType::q4_0;
    if (quant && (t.store == Phi4FlashStore::f32 || t.store == Phi4FlashStore::f16))
      throw fail("tensor '" + t.gguf + "' is " + ggml_type_name(gt->type) +
                 "; it must be F32, F16 or BF16 (only the large linears are quantized: docs/gguf.md)");
    WeightSource w = empty_source(t);
    w.name = t.gguf;
    w.add(f, *gt);
    t.source(ck) = std::move(w);
    ++expected;
  }
  if (expected != f.tensors().size()) {
    std::set<std::string> names;
    for (const Phi4FlashTensor& t : phi4flash_tensors(ck.config)) names.insert(t.gguf);
    for (const GgufTensorInfo& t : f.tensors())
      if (!names.count(std::string(t.name)))
        throw fail("unexpected tensor '" + std::string(t.name) + "'" + layer_hint(ck, std::string(t.name), "blk."));
  }
  ck.tensors = expected;
  return ck;
}

bool is_phi4flash_path(const std::string& path) {
  try {
    if (path.size() > 5 && path.compare(path.size() - 5, 5, ".gguf") == 0) {
      const GgufFile f = GgufFile::open(path);
      const GgufValue* a = f.find_value("general.architecture");
      return a && a->type == GgufType::string && a->str == "phi4flash";
    }
    if (!platform::file_exists(path + "/config.json")) return false;
    const auto bytes = platform::read_file(path + "/config.json", 1 << 20);
    return is_phi4flash_config(std::string(bytes.begin(), bytes.end()));
  } catch (const Error&) {
    return false;
  }
}

std::vector<float> source_floats(const WeightSource& w) {
  std::vector<float> out(size_t(w.numel()));
  if (!out.empty()) convert_rows(w, 0, w.rows(), false, out.data());
  return out;
}

}  // namespace diffvk
