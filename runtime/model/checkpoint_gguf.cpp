// A diffllama GGUF file (docs/gguf.md, written by diffvk quantize) as row sources of the runtime's weights.
// F32/F16/BF16 tensors, and Q8_0/Q4_0 ones whose blocks go to the device unchanged (WeightSource::stored,
// WeightStore); a quantized embedding table is dequantized into the storage type.
#include <algorithm>
#include <cmath>
#include <cstring>

#include <nlohmann/json.hpp>

#include "model/checkpoint.hpp"
#include "model/gguf_tokenizer.hpp"
#include "model/phi4flash_checkpoint.hpp"

namespace diffvk {

Checkpoint open_gguf_checkpoint(const std::string& path) {
  return open_gguf_checkpoint(std::make_unique<GgufFile>(GgufFile::open(path)));
}

namespace {
// The native config.json equivalent of a diffllama GGUF's diffllama.* keys (the checker of config.json applies to
// them too); rope scaling and the sub-norm's epsilon are read by open_gguf_checkpoint.
nlohmann::json diffllama_gguf_config(const GgufFile& f) {
  const std::string path = f.name();
  auto fail = [&](const std::string& what) { return Error(Status::format_error, path + ": " + what); };
  auto u = [&](const std::string& k) { return f.require_value("diffllama." + k).as_u64(path + ": diffllama." + k); };
  auto r = [&](const std::string& k) { return f.require_value("diffllama." + k).as_f64(path + ": diffllama." + k); };
  // DIFF V2 (diffllama.diff_version = 2): head_count = the 2H query heads, head_count_kv = Hkv, key_length = D.
  // DIFF V1 (absent or 1): Hugging Face DiffLlama's counting of half-heads, 2H and 2Hkv.
  uint64_t version = 1;
  if (f.find_value("diffllama.diff_version")) version = u("diff_version");
  if (version != 1 && version != 2)
    throw fail("diffllama.diff_version = " + std::to_string(version) + " is not 1 or 2");
  const bool v2 = version == 2;
  const uint64_t heads = u("attention.head_count"), kv_heads = u("attention.head_count_kv");
  if (heads % 2)
    throw fail("diffllama.attention.head_count must be even (" +
               std::string(v2 ? "2 query heads per output head" : "2 half-heads per head") + ")");
  if (!v2 && kv_heads % 2) throw fail("diffllama.attention.head_count_kv must be even (2 half-heads per head)");
  // The config.json rules (ranges, divisibility) apply to the GGUF keys too: one checker.
  nlohmann::json j;
  j["vocab_size"] = u("vocab_size");
  j["hidden_size"] = u("embedding_length");
  j["num_layers"] = u("block_count");
  j["num_heads"] = heads / 2;
  j["num_kv_heads"] = v2 ? kv_heads : kv_heads / 2;
  if (v2) {
    j["diff_version"] = 2;
    j["head_dim"] = u("attention.key_length");
  }
  j["intermediate_size"] = u("feed_forward_length");
  j["max_position_embeddings"] = u("context_length");
  j["rope_theta"] = r("rope.freq_base");
  j["rms_norm_eps"] = r("attention.layer_norm_rms_epsilon");
  j["tie_word_embeddings"] = f.find_tensor("output.weight") == nullptr;
  const GgufValue* tok = f.find_value("tokenizer.ggml.model");
  j["tokenizer"] = tok && tok->type == GgufType::string && tok->str == "bytes" ? "bytes" : "none";
  const GgufTokenIds ids =
      gguf_model_token_ids(f);  // diffllama.* where the tokenizer's ids differ, else tokenizer.ggml.*
  if (ids.bos >= 0) j["bos_token_id"] = ids.bos;
  if (ids.eos >= 0) j["eos_token_id"] = ids.eos;
  return j;
}

std::string gguf_architecture(const GgufFile& f) {
  std::string arch(f.require_value("general.architecture").as_string(f.name() + ": general.architecture"));
  if (arch != "phi4flash" && arch != "diffllama")
    throw Error(Status::format_error,
                f.name() + ": general.architecture is '" + arch.substr(0, 40) + "', not 'diffllama' or 'phi4flash'");
  return arch;
}
}  // namespace

std::string gguf_config_json(const GgufFile& f) {
  return gguf_architecture(f) == "phi4flash" ? phi4flash_gguf_config_json(f) : diffllama_gguf_config(f).dump();
}

Checkpoint open_gguf_checkpoint(std::unique_ptr<GgufFile> file) {
  Checkpoint ck;
  ck.gguf = std::move(file);
  const GgufFile& f = *ck.gguf;
  const std::string path = f.name();
  auto fail = [&](const std::string& what) { return Error(Status::format_error, path + ": " + what); };
  if (gguf_architecture(f) == "phi4flash") return phi4flash_as_checkpoint(open_phi4flash_gguf(std::move(ck.gguf)));
  auto u = [&](const std::string& k) { return f.require_value("diffllama." + k).as_u64(path + ": diffllama." + k); };
  auto r = [&](const std::string& k) { return f.require_value("diffllama." + k).as_f64(path + ": diffllama." + k); };
  const bool v2 = f.find_value("diffllama.diff_version") && u("diff_version") == 2;
  ck.config = parse_model_config(diffllama_gguf_config(f).dump(), path + " (diffllama.* keys)");
  ModelConfig& c = ck.config;
  c.format = "gguf";
  if (f.find_value("diffllama.attention.sub_norm_rms_epsilon")) {
    c.subln_eps = r("attention.sub_norm_rms_epsilon");
    if (!(c.subln_eps > 0 && c.subln_eps < 1))
      throw fail("diffllama.attention.sub_norm_rms_epsilon is out of range (0, 1)");
  }
  if (const GgufValue* st = f.find_value("diffllama.rope.scaling.type")) {
    const std::string_view s = st->as_string(path + ": diffllama.rope.scaling.type");
    if (s == "llama3") {
      c.rope_type = "llama3";
      c.rope_factor = r("rope.scaling.factor");
      c.rope_low_freq_factor = r("rope.scaling.low_freq_factor");
      c.rope_high_freq_factor = r("rope.scaling.high_freq_factor");
      c.rope_original_max_positions = uint32_t(std::min<uint64_t>(u("rope.scaling.original_context_length"), 1u << 20));
      if (!(c.rope_factor >= 1 && c.rope_factor < 1e6 && c.rope_low_freq_factor > 0 &&
            c.rope_high_freq_factor > c.rope_low_freq_factor && c.rope_original_max_positions >= 1))
        throw fail("diffllama.rope.scaling.* values are out of range");
    } else if (s != "none") {
      throw fail("diffllama.rope.scaling.type '" + std::string(s.substr(0, 40)) + "' is not supported (none, llama3)");
    }
  }
  if (u("attention.key_length") != c.head_dim())
    throw fail("diffllama.attention.key_length is not embedding_length / head_count");
  if (f.find_value("diffllama.attention.value_length") && u("attention.value_length") != c.head_dim())
    throw fail("diffllama.attention.value_length differs from key_length");

  const uint64_t E = c.hidden_size, D = c.head_dim(), KV = uint64_t(c.num_kv_heads) * c.kv_row(),
                 I = c.intermediate_size, V = c.vocab_size;
  // Every tensor must be present with its shape (row-major [rows, cols]), nothing else may be.
  size_t expected = 0;
  auto tensor = [&](const std::string& name, std::vector<int64_t> shape) -> const GgufTensorInfo& {
    const GgufTensorInfo* t = f.find_tensor(name);
    if (!t) throw fail("missing tensor '" + name + "'");
    if (t->shape() != shape)
      throw fail("tensor '" + name + "' has shape " + shape_to_string(t->shape()) + ", expected " +
                 shape_to_string(shape));
    ++expected;
    return *t;
  };
  auto weight = [&](const std::string& as, std::initializer_list<std::pair<std::string, std::vector<int64_t>>> parts,
                    bool finite = false) {
    const auto& first = parts.begin()->second;
    WeightSource w{as, first.size() > 1 ? uint64_t(first[1]) : 1, {}, finite};
    for (const auto& [n, s] : parts) w.add(f, tensor(n, s));
    return w;
  };
  const int64_t e = int64_t(E), kv = int64_t(KV), i = int64_t(I), v = int64_t(V), d = int64_t(D);
  ck.embed = weight("token_embd.weight", {{"token_embd.weight", {v, e}}});
  for (uint32_t l = 0; l < c.num_layers; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    CheckpointLayer L;
    L.attn_norm = weight(p + "attn_norm.weight", {{p + "attn_norm.weight", {e}}}, true);
    if (v2) {  // [Wq; Wλ; Wk; Wv] (AttnBlock::v2), o of H·D inputs; no sub-norm, no λ vectors
      const int64_t H = c.num_heads;
      L.wqkv = weight(p + "attn_qkv", {{p + "attn_q.weight", {2 * H * d, e}},
                                       {p + "attn_lambda.weight", {H, e}},
                                       {p + "attn_k.weight", {kv, e}},
                                       {p + "attn_v.weight", {kv, e}}});
      L.wo = weight(p + "attn_output.weight", {{p + "attn_output.weight", {e, H * d}}});
    } else {
      L.wqkv = weight(p + "attn_qkv",
                      {{p + "attn_q.weight", {e, e}}, {p + "attn_k.weight", {kv, e}}, {p + "attn_v.weight", {kv, e}}});
      L.wo = weight(p + "attn_output.weight", {{p + "attn_output.weight", {e, e}}});
    }
    L.ffn_norm = weight(p + "ffn_norm.weight", {{p + "ffn_norm.weight", {e}}}, true);
    L.wgu = weight(p + "ffn_gate_up", {{p + "ffn_gate.weight", {i, e}}, {p + "ffn_up.weight", {i, e}}});
    L.wdown = weight(p + "ffn_down.weight", {{p + "ffn_down.weight", {e, i}}});
    if (!v2) {  // DIFF V1's headwise norm and λ vectors
      L.subln = weight(p + "attn_sub_norm.weight", {{p + "attn_sub_norm.weight", {2 * d}}}, true);
      int k = 0;
      for (const char* n : {"attn_lambda_q1", "attn_lambda_k1", "attn_lambda_q2", "attn_lambda_k2"}) {
        const GgufTensorInfo& t = tensor(p + n, {d});
        if (t.type != GgmlType::f32) throw fail("tensor '" + p + n + "' must be F32");
        L.lambda[size_t(k)].resize(size_t(D));
        std::memcpy(L.lambda[size_t(k)].data(), f.data(t), size_t(D) * 4);
        for (float x : L.lambda[size_t(k)])
          if (!std::isfinite(x)) throw fail("non-finite value in '" + p + n + "'");
        ++k;
      }
    }
    ck.layers.push_back(std::move(L));
  }
  ck.norm = weight("output_norm.weight", {{"output_norm.weight", {e}}}, true);
  if (!c.tie_word_embeddings) ck.lm_head = weight("output.weight", {{"output.weight", {v, e}}});
  if (expected != f.tensors().size())
    throw fail(std::to_string(f.tensors().size() - expected) +
               " unexpected tensor(s) besides diffllama's (docs/gguf.md)");
  return ck;
}

}  // namespace diffvk
