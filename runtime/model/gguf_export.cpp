// diffvk::quantize_model and gguf_listing_json (include/diffvk/gguf.hpp): a checkpoint (any format
// open_checkpoint reads) to a GGUF v3 file of architecture "diffllama", and a JSON listing of a GGUF
// file's header. Names, keys and type choices: docs/gguf.md.
#include "diffvk/gguf.hpp"

#include <algorithm>
#include <cstring>

#include <nlohmann/json.hpp>

#include "io/gguf.hpp"
#include "io/quant.hpp"
#include "model/checkpoint.hpp"
#include "model/gguf_tokenizer.hpp"
#include "model/phi4flash_checkpoint.hpp"
#include "platform.hpp"

namespace diffvk {

// The public QuantKind is io/quant.hpp's QuantType (the io layer cannot use the model layer's header).
static_assert(int(QuantKind::f16) == int(QuantType::f16) && int(QuantKind::q8_0) == int(QuantType::q8_0) &&
                  int(QuantKind::q4_0) == int(QuantType::q4_0),
              "QuantKind mirrors QuantType");
const char* quant_kind_name(QuantKind k) noexcept { return quant_type_name(static_cast<QuantType>(k)); }
QuantKind parse_quant_kind(std::string_view name) { return static_cast<QuantKind>(parse_quant_type(name)); }

namespace {

GgmlType ggml_of(QuantKind k) {
  switch (k) {
    case QuantKind::q8_0:
      return GgmlType::q8_0;
    case QuantKind::q4_0:
      return GgmlType::q4_0;
    default:
      return GgmlType::f16;
  }
}

// llama.cpp's general.file_type (enum llama_ftype): MOSTLY_F16 1, MOSTLY_Q4_0 2, MOSTLY_Q8_0 7.
uint32_t file_type(QuantKind k) {
  switch (k) {
    case QuantKind::q8_0:
      return 7;
    case QuantKind::q4_0:
      return 2;
    default:
      return 1;
  }
}

constexpr uint64_t kChunkRows = 256;  // rows converted at a time (bounded host memory per step)

struct Exporter {
  GgufWriter& w;
  QuantizeReport& report;

  // Rows [row0, row0 + rows) of `src` as one tensor named `name` of type `type`: 2-D {cols, rows} for a
  // matrix, 1-D for a vector (a norm: `cols` == 1). A quantized type on a width that is not a multiple
  // of 32 becomes F16 (logged, and listed in the report).
  // `shape` (row-major, phi4flash's table): the tensor's dims instead of the vector/matrix rule above.
  void tensor(const std::string& name, const WeightSource& src, uint64_t row0, uint64_t rows, GgmlType type,
              const std::vector<int64_t>* shape = nullptr) {
    const uint64_t cols = src.cols;
    const bool vec = cols == 1;
    if ((type == GgmlType::q8_0 || type == GgmlType::q4_0) && cols % 32 != 0) {
      platform::log(platform::LogLevel::warn, "quantize: " + name + " stays F16: its input width " +
                                                  std::to_string(cols) + " is not a multiple of 32");
      report.f16_fallbacks.push_back(name);
      type = GgmlType::f16;
    }
    const uint64_t row_bytes = cols / ggml_block_weights(type) * ggml_block_bytes(type);
    std::vector<uint8_t> data(size_t(rows * row_bytes));
    std::vector<float> f;
    for (uint64_t r = 0; r < rows; r += kChunkRows) {
      const uint64_t n = std::min(kChunkRows, rows - r);
      uint8_t* dst = data.data() + r * row_bytes;
      if (type == GgmlType::f16) {
        convert_rows(src, row0 + r, n, true, dst);  // exact from F16, round to nearest even from F32/BF16
        continue;
      }
      f.resize(size_t(n * cols));
      convert_rows(src, row0 + r, n, false, f.data());
      if (type == GgmlType::f32) {
        std::memcpy(dst, f.data(), f.size() * 4);
        continue;
      }
      const QuantType qt = type == GgmlType::q8_0 ? QuantType::q8_0 : QuantType::q4_0;
      for (uint64_t i = 0; i < n; ++i) quantize_row(qt, f.data() + i * cols, cols, dst + i * row_bytes);
    }
    if (shape) {
      w.add_tensor(name, std::vector<uint64_t>(shape->rbegin(), shape->rend()), type, std::move(data));
    } else if (vec) {
      w.add_tensor(name, {rows}, type, std::move(data));
    } else {
      w.add_tensor(name, {cols, rows}, type, std::move(data));
    }
    ++report.tensors;
  }
  void tensor(const std::string& name, const WeightSource& src, GgmlType type) {
    tensor(name, src, 0, src.rows(), type);
  }
  void vector(const std::string& name, const std::vector<float>& v) {
    std::vector<uint8_t> data(v.size() * 4);
    std::memcpy(data.data(), v.data(), data.size());
    w.add_tensor(name, {v.size()}, GgmlType::f32, std::move(data));
    ++report.tensors;
  }
};

std::string basename_of(std::string dir) {
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  const size_t s = dir.rfind('/');
  return s == std::string::npos ? dir : dir.substr(s + 1);
}

// The sizes every diffvk GGUF file states after its general keys, in this order.
struct GgufSizes {
  uint32_t vocab_size, context_length, embedding_length, block_count, feed_forward_length;
  uint32_t diff_version;  // 0: no <arch>.diff_version key
  uint32_t head_count, head_count_kv, key_length, value_length;
};

// The keys every diffvk GGUF file starts with: general.*, then <arch>.vocab_size, context_length, the widths, the
// layer count and the attention heads.
void add_general_keys(GgufWriter& w, const std::string& arch, const std::string& model_dir, QuantKind kind,
                      const GgufSizes& n) {
  const std::string a = arch + ".";
  w.add_string("general.architecture", arch);
  w.add_string("general.name", basename_of(model_dir));
  w.add_u32("general.file_type", file_type(kind));
  w.add_u32("general.quantization_version", 2);  // ggml's GGML_QNT_VERSION
  w.add_u32(a + "vocab_size", n.vocab_size);
  w.add_u32(a + "context_length", n.context_length);
  w.add_u32(a + "embedding_length", n.embedding_length);
  w.add_u32(a + "block_count", n.block_count);
  w.add_u32(a + "feed_forward_length", n.feed_forward_length);
  if (n.diff_version) w.add_u32(a + "diff_version", n.diff_version);
  w.add_u32(a + "attention.head_count", n.head_count);
  w.add_u32(a + "attention.head_count_kv", n.head_count_kv);
  w.add_u32(a + "attention.key_length", n.key_length);
  w.add_u32(a + "attention.value_length", n.value_length);
}

// A phi4flash checkpoint (safetensors or GGUF) to a GGUF file of architecture "phi4flash" (docs/gguf.md).
QuantizeReport quantize_phi4flash(const std::string& model_dir, const std::string& out_path, QuantKind kind) {
  const bool from_gguf = model_dir.size() > 5 && model_dir.compare(model_dir.size() - 5, 5, ".gguf") == 0;
  Phi4FlashCheckpoint ck = from_gguf ? open_phi4flash_gguf(model_dir) : open_phi4flash_checkpoint(model_dir);
  const Phi4FlashConfig& c = ck.config;
  QuantizeReport report;
  GgufWriter w;
  const std::string arch = "phi4flash", a = arch + ".";
  // head_count: query heads of head_dim (2 per differential head).
  add_general_keys(w, arch, model_dir, kind,
                   {c.vocab_size, c.max_position_embeddings, c.hidden_size, c.num_layers, c.intermediate_size, 0,
                    c.num_attention_heads, c.num_key_value_heads, c.head_dim, c.head_dim});
  w.add_u32(a + "attention.sliding_window", c.sliding_window);
  w.add_f32(a + "attention.layer_norm_epsilon", float(c.layer_norm_eps));
  w.add_u32(a + "ssm.conv_kernel", c.mamba_d_conv);
  w.add_u32(a + "ssm.inner_size", c.d_inner());
  w.add_u32(a + "ssm.state_size", c.mamba_d_state);
  w.add_u32(a + "ssm.time_step_rank", c.mamba_dt_rank);
  // The tokenizer, as for diffllama: the one Tokenizer::load(model_dir) uses (config.json alone is not a bytes
  // tokenizer here: "none").
  std::string why;
  GgufTokenIds tok;
  if (ck.gguf ? !copy_gguf_tokenizer(w, *ck.gguf, &tok, &why)
              : !add_gguf_tokenizer(w, model_dir, "none", int32_t(c.bos_token_id), int32_t(c.eos_token_id), &tok, &why))
    platform::log(platform::LogLevel::warn, "quantize: the tokenizer of " + model_dir + " is not exported: " + why);
  if (tok.bos != c.bos_token_id || tok.eos != c.eos_token_id) {
    w.add_i32(a + "bos_token_id", int32_t(c.bos_token_id));
    w.add_i32(a + "eos_token_id", int32_t(c.eos_token_id));
  }
  const GgmlType lin = ggml_of(kind), head = kind == QuantKind::q4_0 ? GgmlType::q8_0 : lin;
  Exporter x{w, report};
  for (const Phi4FlashTensor& t : phi4flash_tensors(c)) {
    const GgmlType type = t.store == Phi4FlashStore::f32    ? GgmlType::f32
                          : t.store == Phi4FlashStore::f16  ? GgmlType::f16
                          : t.store == Phi4FlashStore::head ? head
                                                            : lin;
    const WeightSource& src = t.source(ck);
    x.tensor(t.gguf, src, 0, src.rows(), type, &t.shape);
    release_source(src);
  }
  const std::vector<uint8_t> bytes = w.bytes();
  platform::write_file_atomic(out_path, bytes.data(), bytes.size());
  report.file_bytes = bytes.size();
  return report;
}

}  // namespace

QuantizeReport quantize_model(const std::string& model_dir, const std::string& out_path, QuantKind kind) {
  if (is_phi4flash_path(model_dir)) return quantize_phi4flash(model_dir, out_path, kind);
  Checkpoint ck = open_checkpoint(model_dir);
  const ModelConfig& c = ck.config;
  const uint32_t D = c.head_dim();
  QuantizeReport report;
  GgufWriter w;
  const std::string arch = "diffllama", a = arch + ".";

  // DIFF V1: Hugging Face DiffLlama's counting, num_attention_heads = 2H half-heads of head_dim D each (2Hkv
  // for K/V). DIFF V2 (diff_version 2): the 2H query heads and the Hkv KV heads, as a GQA model counts them.
  add_general_keys(w, arch, model_dir, kind,
                   {c.vocab_size, c.max_position_embeddings, c.hidden_size, c.num_layers, c.intermediate_size,
                    c.v2() ? 2u : 0u, 2 * c.num_heads, c.v2() ? c.num_kv_heads : 2 * c.num_kv_heads, D, D});
  w.add_f32(a + "attention.layer_norm_rms_epsilon", float(c.rms_norm_eps));
  if (!c.v2()) w.add_f32(a + "attention.sub_norm_rms_epsilon", float(c.subln_eps));
  w.add_f32(a + "rope.freq_base", float(c.rope_theta));
  w.add_u32(a + "rope.dimension_count", D);
  if (c.rope_type == "llama3") {
    w.add_string(a + "rope.scaling.type", "llama3");
    w.add_f32(a + "rope.scaling.factor", float(c.rope_factor));
    w.add_u32(a + "rope.scaling.original_context_length", c.rope_original_max_positions);
    w.add_f32(a + "rope.scaling.low_freq_factor", float(c.rope_low_freq_factor));
    w.add_f32(a + "rope.scaling.high_freq_factor", float(c.rope_high_freq_factor));
  }
  // Tokenizer (model/gguf_tokenizer.hpp, docs/gguf.md): the one Tokenizer::load(model_dir) uses, so that the file
  // reads back to the same encoding; one that the keys cannot say exactly is left out, with a warning.
  std::string why;
  GgufTokenIds tok;
  if (ck.gguf ? !copy_gguf_tokenizer(w, *ck.gguf, &tok, &why)
              : !add_gguf_tokenizer(w, model_dir, c.tokenizer, int32_t(c.bos_token_id), int32_t(c.eos_token_id), &tok,
                                    &why))
    platform::log(platform::LogLevel::warn, "quantize: the tokenizer of " + model_dir + " is not exported: " + why);
  if (tok.bos != c.bos_token_id || tok.eos != c.eos_token_id) {  // config.json's ids, where the tokenizer's differ
    w.add_i32(a + "bos_token_id", int32_t(c.bos_token_id));
    w.add_i32(a + "eos_token_id", int32_t(c.eos_token_id));
  }

  const GgmlType lin = ggml_of(kind);
  // The output head (and the embedding when it is also the head) keeps Q8_0 in q4_0 mode, as llama.cpp
  // does: its error goes straight into the logits.
  const GgmlType head = kind == QuantKind::q4_0 ? GgmlType::q8_0 : lin;
  Exporter x{w, report};
  x.tensor("token_embd.weight", ck.embed, c.tie_word_embeddings ? head : lin);
  release_source(ck.embed);
  const uint64_t E = c.hidden_size, kv = uint64_t(c.num_kv_heads) * c.kv_row(), I = c.intermediate_size;
  // Rows of wqkv: V1 [Wq (E); Wk; Wv], V2 [Wq (2H·D); Wλ (H); Wk; Wv] (attn_lambda: the authors' lambda_proj).
  const uint64_t qrows = c.v2() ? 2ull * c.num_heads * D : E, lrows = c.v2() ? c.num_heads : 0, k0 = qrows + lrows;
  for (uint32_t l = 0; l < c.num_layers; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    const CheckpointLayer& L = ck.layers[l];
    x.tensor(p + "attn_norm.weight", L.attn_norm, GgmlType::f32);
    x.tensor(p + "attn_q.weight", L.wqkv, 0, qrows, lin);
    if (c.v2()) x.tensor(p + "attn_lambda.weight", L.wqkv, qrows, lrows, lin);
    x.tensor(p + "attn_k.weight", L.wqkv, k0, kv, lin);
    x.tensor(p + "attn_v.weight", L.wqkv, k0 + kv, kv, lin);
    x.tensor(p + "attn_output.weight", L.wo, lin);
    if (!c.v2()) {
      x.tensor(p + "attn_sub_norm.weight", L.subln, GgmlType::f32);
      const char* lambda[4] = {"attn_lambda_q1", "attn_lambda_k1", "attn_lambda_q2", "attn_lambda_k2"};
      for (int i = 0; i < 4; ++i) x.vector(p + lambda[i], L.lambda[i]);
    }
    x.tensor(p + "ffn_norm.weight", L.ffn_norm, GgmlType::f32);
    x.tensor(p + "ffn_gate.weight", L.wgu, 0, I, lin);
    x.tensor(p + "ffn_up.weight", L.wgu, I, I, lin);
    x.tensor(p + "ffn_down.weight", L.wdown, lin);
    for (const WeightSource* s : {&L.attn_norm, &L.wqkv, &L.wo, &L.subln, &L.ffn_norm, &L.wgu, &L.wdown})
      release_source(*s);
  }
  x.tensor("output_norm.weight", ck.norm, GgmlType::f32);
  if (!c.tie_word_embeddings) x.tensor("output.weight", ck.lm_head, head);
  const std::vector<uint8_t> bytes = w.bytes();
  platform::write_file_atomic(out_path, bytes.data(), bytes.size());
  report.file_bytes = bytes.size();
  return report;
}

std::string gguf_listing_json(const std::string& path) {
  using json = nlohmann::ordered_json;
  const GgufFile f = GgufFile::open(path);
  json j;
  j["version"] = f.version();
  j["alignment"] = f.alignment();
  json meta = json::object();
  auto scalar = [](const GgufValue& v) -> json {
    switch (v.type) {
      case GgufType::string:
        return std::string(v.str);
      case GgufType::boolean:
        return *v.raw != 0;
      case GgufType::float32:
      case GgufType::float64:
        return v.as_f64("");
      case GgufType::uint64:
        return v.as_u64("");
      default:
        return v.as_i64("");
    }
  };
  for (const GgufKV& kv : f.metadata()) {
    const GgufValue& v = kv.value;
    json e;
    e["type"] = gguf_type_name(v.type);
    if (v.type == GgufType::array) {
      e["elem_type"] = gguf_type_name(v.elem);
      e["count"] = v.count;
      json arr = json::array();
      if (v.elem == GgufType::string) {
        for (std::string_view s : v.strings) arr.push_back(std::string(s));
      } else {
        for (uint64_t i = 0; i < v.count; ++i) {
          if (v.elem == GgufType::float32 || v.elem == GgufType::float64) {
            arr.push_back(v.number_at(i));
          } else if (v.elem == GgufType::uint64) {
            uint64_t u;
            std::memcpy(&u, v.raw + 8 * i, 8);
            arr.push_back(u);
          } else if (v.elem == GgufType::boolean) {
            arr.push_back(v.raw[i] != 0);
          } else {
            arr.push_back(v.integer_at(i));
          }
        }
      }
      e["value"] = std::move(arr);
    } else {
      e["value"] = scalar(v);
    }
    meta[std::string(kv.key)] = std::move(e);
  }
  j["metadata"] = std::move(meta);
  json ts = json::array();
  for (const GgufTensorInfo& t : f.tensors()) {
    json dims = json::array();
    for (uint32_t d = 0; d < t.n_dims; ++d) dims.push_back(t.dims[d]);
    ts.push_back(
        {{"name", std::string(t.name)}, {"type", ggml_type_name(t.type)}, {"dims", dims}, {"offset", t.offset}});
  }
  j["tensors"] = std::move(ts);
  return j.dump(1, ' ', false, json::error_handler_t::replace) + "\n";
}

}  // namespace diffvk
