// Test helpers for whole-model tests (vk/test_faults.cpp, io/test_hostile_model.cpp, model/test_soak.cpp):
// a self-deleting temporary directory, a synthesized tiny checkpoint (random weights, any config; DIFF V1
// and DIFF V2 layouts), a tensor-level safetensors rewriter used to make hostile variants of a checkpoint,
// and the float64 reference's weights of a checkpoint (ref::ModelWeights, model_ref.hpp).
#pragma once
#include <doctest/doctest.h>
#include <nlohmann/json.hpp>
#include <stdlib.h>
#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "diffvk/model.hpp"
#include "io/safetensors.hpp"
#include "reference/model_ref.hpp"

namespace diffvk::test {

namespace fs = std::filesystem;

// mkdtemp under $TMPDIR (or /tmp); removed recursively on destruction.
class TempDir {
 public:
  explicit TempDir(const char* tag = "diffvk-test") {
    const char* base = std::getenv("TMPDIR");
    std::string tmpl = std::string(base && *base ? base : "/tmp") + "/" + tag + ".XXXXXX";
    std::vector<char> buf(tmpl.begin(), tmpl.end());
    buf.push_back('\0');
    REQUIRE(::mkdtemp(buf.data()) != nullptr);
    path_ = buf.data();
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string operator/(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

inline std::vector<uint8_t> read_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  REQUIRE_MESSAGE(f.good(), "cannot read " << path);
  return std::vector<uint8_t>((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}
inline void write_bytes(const std::string& path, const void* data, size_t n) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  REQUIRE_MESSAGE(f.good(), "cannot write " << path);
  f.write(static_cast<const char*>(data), static_cast<std::streamsize>(n));
  REQUIRE(f.good());
}
inline void write_text(const std::string& path, const std::string& s) { write_bytes(path, s.data(), s.size()); }

// One tensor of a checkpoint as raw little-endian bytes.
struct RawTensor {
  std::string dtype = "F32";  // written verbatim into the header (may be anything, e.g. "I64")
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;
};
using Tensors = std::map<std::string, RawTensor>;

inline RawTensor f32_tensor(std::vector<int64_t> shape, const std::vector<float>& v) {
  RawTensor t{"F32", std::move(shape), std::vector<uint8_t>(v.size() * 4)};
  if (!v.empty()) std::memcpy(t.bytes.data(), v.data(), t.bytes.size());
  return t;
}

// Serializes tensors (sorted by name, contiguous, in that order) as a safetensors file.
inline std::vector<uint8_t> encode_safetensors(const Tensors& ts) {
  nlohmann::ordered_json h = nlohmann::ordered_json::object();
  uint64_t off = 0;
  for (const auto& [name, t] : ts) {
    h[name] = {{"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {off, off + t.bytes.size()}}};
    off += t.bytes.size();
  }
  std::string text = h.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  // Sized once and filled with memcpy: GCC 12 warns (-Wstringop-overread, a false positive) about a
  // vector<uint8_t>::insert of string iterators that reallocates.
  std::vector<uint8_t> out(8 + text.size() + off);
  const uint64_t n = text.size();
  for (int i = 0; i < 8; ++i) out[i] = uint8_t(n >> (8 * i));
  std::memcpy(out.data() + 8, text.data(), text.size());
  size_t at = 8 + text.size();
  for (const auto& kv : ts) {
    if (!kv.second.bytes.empty()) std::memcpy(out.data() + at, kv.second.bytes.data(), kv.second.bytes.size());
    at += kv.second.bytes.size();
  }
  return out;
}

inline Tensors read_tensors(const std::string& path) {
  const SafetensorsFile f = SafetensorsFile::open(path);
  Tensors ts;
  for (const TensorInfo& t : f.tensors()) {
    const uint8_t* p = f.data(t);
    ts[t.name] = RawTensor{dtype_name(t.dtype), t.shape, std::vector<uint8_t>(p, p + t.nbytes())};
  }
  return ts;
}

// A small model configuration for synthesized checkpoints.
struct TinySpec {
  uint32_t vocab = 256, hidden = 32, layers = 2, heads = 2, kv_heads = 1, intermediate = 48, max_pos = 64;
  bool tie = false;
};

inline nlohmann::json tiny_config_json(const TinySpec& s) {
  return {{"vocab_size", s.vocab},        {"hidden_size", s.hidden},    {"num_layers", s.layers},
          {"num_heads", s.heads},         {"num_kv_heads", s.kv_heads}, {"intermediate_size", s.intermediate},
          {"rope_theta", 10000.0},        {"rms_norm_eps", 1e-5},       {"max_position_embeddings", s.max_pos},
          {"tie_word_embeddings", s.tie}, {"bos_token_id", 2},          {"eos_token_id", 3},
          {"tokenizer", "bytes"}};
}

// Random F32 tensors from one seeded stream: rnd(shape, scale) ~ N(0, scale²), ones(n) (a norm gain).
class RandomTensors {
 public:
  explicit RandomTensors(uint64_t seed) : rng_(seed) {}
  RawTensor rnd(std::vector<int64_t> shape, float scale) {
    size_t n = 1;
    for (int64_t d : shape) n *= size_t(d);
    std::vector<float> v(n);
    for (auto& x : v) x = scale * nd_(rng_);
    return f32_tensor(std::move(shape), v);
  }
  static RawTensor ones(int64_t n) { return f32_tensor({n}, std::vector<float>(size_t(n), 1.0f)); }

 private:
  std::mt19937_64 rng_;
  std::normal_distribution<float> nd_{0.0f, 1.0f};
};

// Random weights with the checkpoint format's names and shapes (tests/python/diffmodel.py).
inline Tensors tiny_tensors(const TinySpec& s, uint64_t seed = 1) {
  RandomTensors r(seed);
  auto rnd = [&](std::vector<int64_t> shape, float scale) { return r.rnd(std::move(shape), scale); };
  auto ones = &RandomTensors::ones;
  const int64_t E = s.hidden, D = s.hidden / s.heads / 2, Hkv = s.kv_heads, I = s.intermediate, V = s.vocab;
  Tensors ts;
  ts["embed_tokens.weight"] = rnd({V, E}, 0.5f);
  ts["norm.weight"] = ones(E);
  if (!s.tie) ts["lm_head.weight"] = rnd({V, E}, 0.1f);
  for (uint32_t l = 0; l < s.layers; ++l) {
    const std::string p = "layers." + std::to_string(l) + ".";
    ts[p + "attn_norm.weight"] = ones(E);
    ts[p + "attn.q_proj.weight"] = rnd({E, E}, 0.1f);
    ts[p + "attn.k_proj.weight"] = rnd({2 * Hkv * D, E}, 0.1f);
    ts[p + "attn.v_proj.weight"] = rnd({2 * Hkv * D, E}, 0.1f);
    ts[p + "attn.out_proj.weight"] = rnd({E, E}, 0.1f);
    for (const char* n : {"lambda_q1", "lambda_k1", "lambda_q2", "lambda_k2"}) ts[p + "attn." + n] = rnd({D}, 0.1f);
    ts[p + "attn.subln.weight"] = ones(2 * D);
    ts[p + "ffn_norm.weight"] = ones(E);
    ts[p + "ffn.gate_proj.weight"] = rnd({I, E}, 0.1f);
    ts[p + "ffn.up_proj.weight"] = rnd({I, E}, 0.1f);
    ts[p + "ffn.down_proj.weight"] = rnd({E, I}, 0.1f);
  }
  return ts;
}

// n token ids in [1, 250] from a fixed pattern: (i·mul + salt·salt_mul + add) mod 250 + 1 at position i.
inline std::vector<int32_t> pattern_tokens(size_t n, int32_t salt, size_t mul, int32_t salt_mul, size_t add) {
  std::vector<int32_t> t(n);
  for (size_t i = 0; i < n; ++i) t[i] = int32_t((i * mul + salt * salt_mul + add) % 250 + 1);
  return t;
}

// The float64 reference's layer of prefix p ("layers.<l>.") of a checkpoint of width E and intermediate size I,
// its tensors read in file order: norm(name) for the norms, linear(name, inputs) for the projections,
// lambda(name) for the four λ vectors.
template <class Norm, class Linear, class Lambda>
ref::ModelLayerWeights reference_layer(const std::string& p, size_t E, size_t I, Norm&& norm, Linear&& linear,
                                       Lambda&& lambda) {
  ref::ModelLayerWeights L;
  L.attn_norm = norm(p + "attn_norm.weight");
  L.attn.wq = linear(p + "attn.q_proj.weight", E);
  L.attn.wk = linear(p + "attn.k_proj.weight", E);
  L.attn.wv = linear(p + "attn.v_proj.weight", E);
  L.attn.wo = linear(p + "attn.out_proj.weight", E);
  L.attn.lq1 = lambda(p + "attn.lambda_q1");
  L.attn.lk1 = lambda(p + "attn.lambda_k1");
  L.attn.lq2 = lambda(p + "attn.lambda_q2");
  L.attn.lk2 = lambda(p + "attn.lambda_k2");
  L.attn.subln = norm(p + "attn.subln.weight");
  L.ffn_norm = norm(p + "ffn_norm.weight");
  L.gate = linear(p + "ffn.gate_proj.weight", E);
  L.up = linear(p + "ffn.up_proj.weight", E);
  L.down = linear(p + "ffn.down_proj.weight", I);
  return L;
}

// The float64 reference's weights of a synthesized checkpoint (F32 tensors), every value rounded to the
// storage type the device path sees (fp16 or fp32), as docs/maths.md's tolerances assume.
inline ref::ModelWeights reference_weights(const TinySpec& s, const Tensors& ts, bool fp16) {
  auto get = [&](const std::string& name) {
    const RawTensor& t = ts.at(name);
    REQUIRE(t.dtype == "F32");
    std::vector<float> f(t.bytes.size() / 4);
    std::memcpy(f.data(), t.bytes.data(), t.bytes.size());
    std::vector<double> d(f.begin(), f.end());
    return fp16 ? ref::round_to_f16(d) : d;
  };
  ref::ModelWeights m;
  m.shape = ref::make_shape(int(s.hidden), int(s.heads), int(s.kv_heads));
  m.vocab = int(s.vocab);
  m.I = int(s.intermediate);
  m.embed = get("embed_tokens.weight");
  m.norm = get("norm.weight");
  m.lm_head = get(s.tie ? "embed_tokens.weight" : "lm_head.weight");
  for (uint32_t l = 0; l < s.layers; ++l) {
    const std::string p = "layers." + std::to_string(l) + ".";
    // The runtime computes λ from the fp32 vectors (model_load.cpp), whatever the storage type.
    auto lam = [&](const std::string& name) {
      const RawTensor& t = ts.at(name);
      std::vector<float> f(t.bytes.size() / 4);
      std::memcpy(f.data(), t.bytes.data(), t.bytes.size());
      return std::vector<double>(f.begin(), f.end());
    };
    m.layers.push_back(reference_layer(
        p, s.hidden, s.intermediate, get, [&](const std::string& name, size_t) { return get(name); }, lam));
  }
  return m;
}

// Writes <dir>/config.json and <dir>/model.safetensors.
inline void write_checkpoint(const std::string& dir, const std::string& config_text, const Tensors& ts) {
  fs::create_directories(dir);
  write_text(dir + "/config.json", config_text);
  const auto bytes = encode_safetensors(ts);
  write_bytes(dir + "/model.safetensors", bytes.data(), bytes.size());
}
inline void write_tiny_model(const std::string& dir, const TinySpec& s = {}, uint64_t seed = 1) {
  write_checkpoint(dir, tiny_config_json(s).dump(2), tiny_tensors(s, seed));
}

// The shared small test model (tests/data/model_tiny), or "" when it is not in the tree.
inline std::string shared_tiny_model_dir() {
  const std::string dir = std::string(DIFFVK_TEST_DATA_DIR) + "/model_tiny";
  return fs::exists(dir + "/config.json") && fs::exists(dir + "/model.safetensors") ? dir : std::string();
}

// ---------------------------------------------------------------- DIFF V2 checkpoints
// The layout (docs/maths.md "DIFF V2"; tests/python/make_v2_model_fixture.py): config.json with the native
// keys plus "head_dim" (D, required) and "diff_version": 2; Hugging Face Llama tensor names outside attention
// (model.embed_tokens, model.layers.{i}.input_layernorm / post_attention_layernorm / mlp.{gate,up,down}_proj,
// model.norm, lm_head), the authors' names inside self_attn (q_proj (2H·D, E), k_proj and v_proj (Hkv·D, E),
// lambda_proj (H, E), o_proj (E, H·D)); no biases.

// A small DIFF V2 configuration for synthesized checkpoints. The default has E != H·D and D-wide cache rows
// of one Q8_0 block.
struct TinyV2Spec {
  uint32_t vocab = 256, hidden = 48, layers = 2, heads = 2, kv_heads = 1, head_dim = 32, intermediate = 64,
           max_pos = 64;
  bool tie = false;
};

inline nlohmann::json tiny_v2_config_json(const TinyV2Spec& s) {
  return {{"vocab_size", s.vocab},
          {"hidden_size", s.hidden},
          {"num_layers", s.layers},
          {"num_heads", s.heads},
          {"num_kv_heads", s.kv_heads},
          {"head_dim", s.head_dim},
          {"intermediate_size", s.intermediate},
          {"rope_theta", 10000.0},
          {"rms_norm_eps", 1e-5},
          {"max_position_embeddings", s.max_pos},
          {"tie_word_embeddings", s.tie},
          {"bos_token_id", 2},
          {"eos_token_id", 3},
          {"tokenizer", "bytes"},
          {"diff_version", 2}};
}

// Random F32 weights with the V2 layout's names and shapes (norm gains 1).
inline Tensors tiny_v2_tensors(const TinyV2Spec& s, uint64_t seed = 1) {
  RandomTensors r(seed);
  auto rnd = [&](std::vector<int64_t> shape, float scale) { return r.rnd(std::move(shape), scale); };
  auto ones = &RandomTensors::ones;
  const int64_t E = s.hidden, H = s.heads, Hkv = s.kv_heads, D = s.head_dim, I = s.intermediate, V = s.vocab;
  Tensors ts;
  ts["model.embed_tokens.weight"] = rnd({V, E}, 0.5f);
  ts["model.norm.weight"] = ones(E);
  if (!s.tie) ts["lm_head.weight"] = rnd({V, E}, 0.1f);
  for (uint32_t l = 0; l < s.layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    ts[p + "input_layernorm.weight"] = ones(E);
    ts[p + "self_attn.q_proj.weight"] = rnd({2 * H * D, E}, 0.1f);
    ts[p + "self_attn.k_proj.weight"] = rnd({Hkv * D, E}, 0.1f);
    ts[p + "self_attn.v_proj.weight"] = rnd({Hkv * D, E}, 0.1f);
    ts[p + "self_attn.lambda_proj.weight"] = rnd({H, E}, 0.1f);
    ts[p + "self_attn.o_proj.weight"] = rnd({E, H * D}, 0.1f);
    ts[p + "post_attention_layernorm.weight"] = ones(E);
    ts[p + "mlp.gate_proj.weight"] = rnd({I, E}, 0.1f);
    ts[p + "mlp.up_proj.weight"] = rnd({I, E}, 0.1f);
    ts[p + "mlp.down_proj.weight"] = rnd({E, I}, 0.1f);
  }
  return ts;
}

inline void write_tiny_v2_model(const std::string& dir, const TinyV2Spec& s = {}, uint64_t seed = 1) {
  write_checkpoint(dir, tiny_v2_config_json(s).dump(2), tiny_v2_tensors(s, seed));
}

// The float64 reference's weights (ModelWeights::v2) of a V2 checkpoint: config.json's keys (num_kv_heads,
// rope_theta, rms_norm_eps and tie_word_embeddings with the native defaults) and the file's F32, F16 or BF16
// tensors, each required with its exact shape. Every value is rounded to fp16 when fp16 (the storage type
// the device path sees, as docs/maths.md's tolerances assume). Fails the test (REQUIRE) on a config that is
// not DIFF V2; a missing or misshapen tensor throws the reader's error.
inline ref::ModelWeights reference_weights_v2(const nlohmann::json& cfg, const SafetensorsFile& f, bool fp16) {
  REQUIRE_MESSAGE(cfg.value("diff_version", 1) == 2, "not a DIFF V2 config: " << cfg.dump());
  auto key = [&](const char* k) {
    REQUIRE_MESSAGE(cfg.contains(k), "config.json lacks " << k);
    return cfg.at(k).get<int64_t>();
  };
  const int64_t V = key("vocab_size"), E = key("hidden_size"), layers = key("num_layers"), H = key("num_heads"),
                D = key("head_dim"), I = key("intermediate_size");
  const int64_t Hkv = cfg.value("num_kv_heads", H);
  auto get = [&](const std::string& name, std::vector<int64_t> shape) {
    const std::vector<float> v = f.to_float(f.require(name, shape));
    std::vector<double> d(v.begin(), v.end());
    return fp16 ? ref::round_to_f16(d) : d;
  };
  ref::ModelWeights m;
  m.v2 = true;
  m.v2_shape = ref::make_v2_shape(int(E), int(H), int(Hkv), int(D));
  m.vocab = int(V);
  m.I = int(I);
  m.rope_theta = cfg.value("rope_theta", 10000.0);
  m.eps = cfg.value("rms_norm_eps", 1e-5);
  m.embed = get("model.embed_tokens.weight", {V, E});
  m.norm = get("model.norm.weight", {E});
  m.lm_head = cfg.value("tie_word_embeddings", false) ? m.embed : get("lm_head.weight", {V, E});
  for (int64_t l = 0; l < layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    ref::ModelLayerWeights L;
    L.attn_norm = get(p + "input_layernorm.weight", {E});
    L.attn_v2.wq = get(p + "self_attn.q_proj.weight", {2 * H * D, E});
    L.attn_v2.wk = get(p + "self_attn.k_proj.weight", {Hkv * D, E});
    L.attn_v2.wv = get(p + "self_attn.v_proj.weight", {Hkv * D, E});
    L.attn_v2.wl = get(p + "self_attn.lambda_proj.weight", {H, E});
    L.attn_v2.wo = get(p + "self_attn.o_proj.weight", {E, H * D});
    L.ffn_norm = get(p + "post_attention_layernorm.weight", {E});
    L.gate = get(p + "mlp.gate_proj.weight", {I, E});
    L.up = get(p + "mlp.up_proj.weight", {I, E});
    L.down = get(p + "mlp.down_proj.weight", {E, I});
    m.layers.push_back(std::move(L));
  }
  return m;
}
// The same from a checkpoint directory (<dir>/config.json, <dir>/model.safetensors).
inline ref::ModelWeights reference_weights_v2_dir(const std::string& dir, bool fp16) {
  const std::vector<uint8_t> text = read_bytes(dir + "/config.json");
  const nlohmann::json cfg = nlohmann::json::parse(text.begin(), text.end());
  return reference_weights_v2(cfg, SafetensorsFile::open(dir + "/model.safetensors"), fp16);
}
// The same from a synthesized checkpoint (tiny_v2_tensors, or a variant of it).
inline ref::ModelWeights reference_weights_v2(const TinyV2Spec& s, const Tensors& ts, bool fp16) {
  return reference_weights_v2(tiny_v2_config_json(s), SafetensorsFile::from_bytes(encode_safetensors(ts), "tiny_v2"),
                              fp16);
}

// The shared small DIFF V2 test model (tests/data/model_tiny_v2, tests/python/make_v2_model_fixture.py),
// or "" when it is not in the tree.
inline std::string shared_tiny_v2_model_dir() {
  const std::string dir = std::string(DIFFVK_TEST_DATA_DIR) + "/model_tiny_v2";
  return fs::exists(dir + "/config.json") && fs::exists(dir + "/model.safetensors") ? dir : std::string();
}

}  // namespace diffvk::test
