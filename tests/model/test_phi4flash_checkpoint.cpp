// Phi-4-mini-flash (phi4flash) checkpoints as row sources (runtime/model/phi4flash_checkpoint.*): the tiny fixture
// (single file, sharded, one file in memory), hostile variants refused naming the tensor, the GGUF export and import
// (F16/Q8_0/Q4_0, inconsistent keys refused naming them, the tokenizer inside), and every load path (Model::load's,
// the C ABI's, the CLI's) running it. Host only, except the cases that need a Context for those paths.
#include <doctest/doctest.h>

#include <fcntl.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "cli_run.hpp"
#include "diffvk/diffvk.h"
#include "diffvk/gguf.hpp"
#include "diffvk/model.hpp"
#include "diffvk/tokenizer.hpp"
#include "gpu_test.hpp"
#include "io/gguf.hpp"
#include "io/half.hpp"
#include "io/quant.hpp"
#include "model/checkpoint.hpp"
#include "model/phi4flash_checkpoint.hpp"
#include "model_fixture.hpp"

using namespace diffvk;

namespace {

const std::string kFixture = std::string(DIFFVK_TEST_DATA_DIR) + "/phi4flash_tiny";

std::string fixture_config() {
  const auto b = test::read_bytes(kFixture + "/config.json");
  return std::string(b.begin(), b.end());
}

// The error a call throws (its status and message), or fails the test when it throws none. A struct, not a pair:
// doctest's INFO/CHECK_MESSAGE capture in a lambda, which clang 14 refuses for a structured binding.
struct Caught {
  Status st = Status::ok;
  std::string msg;
};
Caught error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return {e.status(), e.what()};
  }
  FAIL("no error");
  return {};
}

// Every source has its tensor's rows x cols; every layer's other fields are empty.
void check_shapes(Phi4FlashCheckpoint& ck) {
  const auto table = phi4flash_tensors(ck.config);
  std::vector<size_t> per_layer(ck.layers.size(), 0);
  for (const Phi4FlashTensor& t : table) {
    const WeightSource& w = t.source(ck);
    INFO(t.hf);
    CHECK(w.rows() == uint64_t(t.shape[0]));
    CHECK(w.cols == (t.shape.size() > 1 ? uint64_t(t.shape[1]) : 1u));
    if (t.layer >= 0) ++per_layer[size_t(t.layer)];
  }
  for (size_t l = 0; l < ck.layers.size(); ++l) {
    Phi4FlashLayer& L = ck.layers[l];
    CHECK(L.kind == ck.plan.kinds[l]);
    size_t filled = 0;
    for (WeightSource* w :
         {&L.ln1_w,  &L.ln1_b,  &L.ln2_w,     &L.ln2_b,     &L.fc1,       &L.fc2,       &L.in_proj,  &L.conv_w,
          &L.conv_b, &L.x_proj, &L.dt_w,      &L.dt_b,      &L.A_log,     &L.D,         &L.out_proj, &L.out_b,
          &L.wqkv,   &L.wqkv_b, &L.lambda_q1, &L.lambda_k1, &L.lambda_q2, &L.lambda_k2, &L.subln})
      filled += w->rows() > 0;
    CHECK(filled == per_layer[l]);
  }
}

// Every source's values equal its safetensors tensor's, widened to fp32 (exact from BF16).
void check_values(Phi4FlashCheckpoint& ck, const test::Tensors& ts) {
  for (const Phi4FlashTensor& t : phi4flash_tensors(ck.config)) {
    INFO(t.hf);
    const auto it = ts.find(t.hf);
    REQUIRE(it != ts.end());
    const SafetensorsFile one = SafetensorsFile::from_bytes(test::encode_safetensors({{t.hf, it->second}}), "one");
    const std::vector<float> want = one.to_float(one.tensors()[0]);
    const std::vector<float> got = source_floats(t.source(ck));
    REQUIRE(got.size() == want.size());
    CHECK(std::memcmp(got.data(), want.data(), got.size() * 4) == 0);
    CHECK(got.front() == want.front());
    CHECK(got.back() == want.back());
  }
}

void write_dir(const test::TempDir& tmp, const test::Tensors& ts, const std::string& config = fixture_config()) {
  test::write_text(tmp / "config.json", config);
  const auto bytes = test::encode_safetensors(ts);
  test::write_bytes(tmp / "model.safetensors", bytes.data(), bytes.size());
}

// A hostile variant of the fixture is refused (format_error) by the directory reader and by the one-file reader,
// the message naming `needle`.
void refused(const test::Tensors& ts, const std::string& needle, const std::string& config = fixture_config()) {
  test::TempDir tmp("diffvk-phi4flash");
  write_dir(tmp, ts, config);
  const Caught e = error_of([&] { open_phi4flash_checkpoint(tmp.path()); });
  CHECK(e.st == Status::format_error);
  CHECK_MESSAGE(e.msg.find(needle) != std::string::npos, e.msg);
  const Caught e2 = error_of([&] {
    open_phi4flash_checkpoint(std::make_unique<SafetensorsFile>(SafetensorsFile::open(tmp / "model.safetensors")),
                              parse_phi4flash_config(config));
  });
  CHECK(e2.st == Status::format_error);
  CHECK_MESSAGE(e2.msg.find(needle) != std::string::npos, e2.msg);
}

}  // namespace

TEST_CASE("phi4flash checkpoint: the tiny fixture's every tensor as a source of its shape and values") {
  Phi4FlashCheckpoint ck = open_phi4flash_checkpoint(kFixture);
  const test::Tensors ts = test::read_tensors(kFixture + "/model.safetensors");
  CHECK(ck.tensors == ts.size());
  CHECK(ck.files.size() == 1);
  CHECK(ck.layers.size() == 8);
  CHECK(ck.lm_head.rows() == 0);  // tied
  check_shapes(ck);
  check_values(ck, ts);
  // Spot checks of the layout: conv1d.weight [C, 1, K] read as C rows of K; A_log the full [C, S] matrix.
  CHECK(ck.layers[0].conv_w.cols == ck.config.mamba_d_conv);
  CHECK(ck.layers[0].A_log.rows() == ck.config.d_inner());
  CHECK(ck.layers[0].A_log.cols == ck.config.mamba_d_state);
  CHECK(ck.layers[7].wqkv.rows() == ck.config.num_attention_heads * ck.config.head_dim);  // cross: queries only
  CHECK(ck.layers[5].wqkv.rows() ==
        (ck.config.num_attention_heads + 2 * ck.config.num_key_value_heads) * ck.config.head_dim);
  CHECK(source_floats(ck.layers[1].lambda_q1).size() == ck.config.head_dim);

  // The same file in memory (Model::load_memory's reader).
  const auto bytes = test::read_bytes(kFixture + "/model.safetensors");
  Phi4FlashCheckpoint mem =
      open_phi4flash_checkpoint(std::make_unique<SafetensorsFile>(SafetensorsFile::from_bytes(bytes, "mem")),
                                parse_phi4flash_config(fixture_config()));
  check_shapes(mem);
  check_values(mem, ts);
}

TEST_CASE("phi4flash checkpoint: a sharded copy opens the same, each tensor with its own dtype") {
  test::Tensors ts = test::read_tensors(kFixture + "/model.safetensors");
  // Each tensor its own dtype: A_log in F32, D in F16 (both exact from BF16).
  auto widen = [&](const std::string& name, bool f16) {
    const SafetensorsFile one = SafetensorsFile::from_bytes(test::encode_safetensors({{name, ts[name]}}), "w");
    const std::vector<float> v = one.to_float(one.tensors()[0]);
    test::RawTensor t = test::f32_tensor(ts[name].shape, v);
    if (f16) {
      t.dtype = "F16";
      t.bytes.resize(v.size() * 2);
      for (size_t i = 0; i < v.size(); ++i) {
        const uint16_t h = float_to_half(v[i]);
        std::memcpy(t.bytes.data() + 2 * i, &h, 2);
      }
    }
    ts[name] = t;
  };
  widen("model.layers.0.attn.A_log", false);
  widen("model.layers.4.attn.D", true);
  widen("model.layers.3.attn.inner_cross_attn.lambda_q1", false);

  test::TempDir tmp("diffvk-phi4flash-shards");
  test::write_text(tmp / "config.json", fixture_config());
  std::vector<test::Tensors> shards(3);
  nlohmann::json map = nlohmann::json::object();
  size_t i = 0;
  for (const auto& [name, t] : ts) {
    const size_t s = i++ % 3;
    shards[s][name] = t;
    map[name] = "model-0000" + std::to_string(s + 1) + "-of-00003.safetensors";
  }
  for (size_t s = 0; s < 3; ++s) {
    const auto bytes = test::encode_safetensors(shards[s]);
    test::write_bytes(tmp / ("model-0000" + std::to_string(s + 1) + "-of-00003.safetensors"), bytes.data(),
                      bytes.size());
  }
  test::write_text(tmp / "model.safetensors.index.json",
                   nlohmann::json{{"metadata", {{"total_size", 0}}}, {"weight_map", map}}.dump());
  Phi4FlashCheckpoint ck = open_phi4flash_checkpoint(tmp.path());
  CHECK(ck.files.size() == 3);
  check_shapes(ck);
  check_values(ck, ts);

  // A shard without a tensor that the index lists under it: refused naming the tensor.
  shards[0].erase(shards[0].begin());
  const std::string gone = map.begin().key();
  const auto bytes = test::encode_safetensors(shards[0]);
  test::write_bytes(tmp / "model-00001-of-00003.safetensors", bytes.data(), bytes.size());
  const Caught e = error_of([&] { open_phi4flash_checkpoint(tmp.path()); });
  CHECK(e.st == Status::format_error);
  CHECK_MESSAGE(e.msg.find(gone) != std::string::npos, e.msg);
}

TEST_CASE("phi4flash checkpoint: hostile variants are refused naming the tensor") {
  const test::Tensors base = test::read_tensors(kFixture + "/model.safetensors");
  auto without = [&](const std::string& name) {
    test::Tensors t = base;
    REQUIRE(t.erase(name) == 1);
    return t;
  };
  auto with = [&](const std::string& name, test::RawTensor r) {
    test::Tensors t = base;
    t[name] = std::move(r);
    return t;
  };
  refused(without("model.layers.3.attn.inner_cross_attn.lambda_k2"),
          "missing tensor 'model.layers.3.attn.inner_cross_attn.lambda_k2' (layer 3 is a sliding_attention layer)");
  refused(without("model.final_layernorm.bias"), "missing tensor 'model.final_layernorm.bias'");
  refused(without("model.layers.4.attn.D"), "'model.layers.4.attn.D' (layer 4 is a memory_mamba layer)");
  // Wrong shapes: A_log transposed, conv1d.weight squeezed to [C, K], a cross layer's Wqkv with K/V rows.
  test::RawTensor a = base.at("model.layers.0.attn.A_log");
  std::swap(a.shape[0], a.shape[1]);
  refused(with("model.layers.0.attn.A_log", a), "model.layers.0.attn.A_log");
  test::RawTensor conv = base.at("model.layers.2.attn.conv1d.weight");
  conv.shape = {conv.shape[0], conv.shape[2]};
  refused(with("model.layers.2.attn.conv1d.weight", conv), "model.layers.2.attn.conv1d.weight");
  test::RawTensor q = base.at("model.layers.5.attn.Wqkv.weight");
  refused(with("model.layers.7.attn.Wqkv.weight", q), "model.layers.7.attn.Wqkv.weight");
  // Extra tensors: one of another layer kind, one unknown, lm_head of a wrong shape in a tied checkpoint.
  refused(with("model.layers.6.attn.conv1d.bias", base.at("model.layers.0.attn.conv1d.bias")),
          "unexpected tensor 'model.layers.6.attn.conv1d.bias' (layer 6 is a gated_memory layer)");
  refused(with("model.layers.8.attn.D", base.at("model.layers.0.attn.D")),
          "unexpected tensor 'model.layers.8.attn.D' (the config has 8 layers)");
  refused(with("model.layers.0.attn.rotary_emb.inv_freq", base.at("model.layers.0.attn.D")),
          "unexpected tensor 'model.layers.0.attn.rotary_emb.inv_freq'");
  refused(with("lm_head.weight", base.at("model.final_layernorm.weight")), "lm_head.weight");
  // Dtypes: I8 (the safetensors reader does not know it), I32 (not a float).
  test::RawTensor i8 = base.at("model.layers.4.mlp.fc2.weight");
  i8.dtype = "I8";
  i8.bytes.resize(i8.bytes.size() / 2);
  refused(with("model.layers.4.mlp.fc2.weight", i8), "model.layers.4.mlp.fc2.weight");
  test::RawTensor i32 = base.at("model.layers.0.attn.D");
  i32.dtype = "I32";
  i32.bytes.resize(i32.bytes.size() * 2);
  refused(with("model.layers.0.attn.D", i32), "tensor 'model.layers.0.attn.D' is I32");
  // Untied without lm_head.weight.
  nlohmann::json cfg = nlohmann::json::parse(fixture_config());
  cfg["tie_word_embeddings"] = false;
  refused(base, "missing tensor 'lm_head.weight'", cfg.dump());
  // A tied checkpoint may keep a copy of the embedding as lm_head.weight; untied, it is the head.
  test::TempDir tmp("diffvk-phi4flash-head");
  write_dir(tmp, with("lm_head.weight", base.at("model.embed_tokens.weight")));
  CHECK(open_phi4flash_checkpoint(tmp.path()).lm_head.rows() == 0);
  write_dir(tmp, with("lm_head.weight", base.at("model.embed_tokens.weight")), cfg.dump());
  Phi4FlashCheckpoint untied = open_phi4flash_checkpoint(tmp.path());
  CHECK(untied.lm_head.rows() == untied.config.vocab_size);
  CHECK(source_floats(untied.lm_head) == source_floats(untied.embed));
}

namespace {
// The GGUF type the export rule (docs/gguf.md) gives a tensor.
GgmlType expected_type(const Phi4FlashTensor& t, QuantKind kind) {
  const GgmlType lin = kind == QuantKind::q8_0   ? GgmlType::q8_0
                       : kind == QuantKind::q4_0 ? GgmlType::q4_0
                                                 : GgmlType::f16;
  switch (t.store) {
    case Phi4FlashStore::f32:
      return GgmlType::f32;
    case Phi4FlashStore::f16:
      return GgmlType::f16;
    case Phi4FlashStore::head:
      return kind == QuantKind::q4_0 ? GgmlType::q8_0 : lin;
    default:
      return t.shape[1] % 32 ? GgmlType::f16 : lin;
  }
}

// A copy of a GGUF file with scalar keys replaced (`set`: u32 values), removed (`drop`), tensors removed or added.
std::vector<uint8_t> rewrite_gguf(const GgufFile& f, const std::map<std::string, std::optional<uint32_t>>& set,
                                  const std::string& drop_tensor = "", bool extra_tensor = false) {
  GgufWriter w;
  for (const GgufKV& kv : f.metadata()) {
    const std::string key(kv.key);
    if (key == "general.alignment") continue;
    const auto it = set.find(key);
    if (it != set.end()) {
      if (it->second) w.add_u32(key, *it->second);
      continue;
    }
    const GgufValue& v = kv.value;
    if (v.type == GgufType::string)
      w.add_string(key, std::string(v.str));
    else if (v.type == GgufType::uint32)
      w.add_u32(key, uint32_t(v.as_u64(key)));
    else if (v.type == GgufType::int32)
      w.add_i32(key, int32_t(v.as_i64(key)));
    else if (v.type == GgufType::float32)
      w.add_f32(key, float(v.as_f64(key)));
    else
      FAIL("a key type the test does not copy: " << key);
  }
  for (const auto& [key, value] : set)
    if (value && !f.find_value(key)) w.add_u32(key, *value);
  for (const GgufTensorInfo& t : f.tensors()) {
    if (t.name == drop_tensor) continue;
    std::vector<uint64_t> dims(t.dims, t.dims + t.n_dims);
    const uint8_t* p = f.data(t);
    w.add_tensor(std::string(t.name), dims, t.type, std::vector<uint8_t>(p, p + t.nbytes));
  }
  if (extra_tensor) w.add_tensor("blk.0.ssm_extra", {4}, GgmlType::f32, std::vector<uint8_t>(16));
  return w.bytes();
}
}  // namespace

TEST_CASE("phi4flash checkpoint: GGUF export and import, F16, Q8_0 and Q4_0") {
  Phi4FlashCheckpoint st = open_phi4flash_checkpoint(kFixture);
  test::TempDir tmp("diffvk-phi4flash-gguf");
  for (QuantKind kind : {QuantKind::f16, QuantKind::q8_0, QuantKind::q4_0}) {
    INFO(quant_kind_name(kind));
    const std::string path = tmp / (std::string(quant_kind_name(kind)) + ".gguf");
    const QuantizeReport rep = quantize_model(kFixture, path, kind);
    const auto table = phi4flash_tensors(st.config);
    CHECK(rep.tensors == table.size());
    // fc2's input width I = 48 is not a multiple of 32: F16 in the quantized kinds.
    CHECK(rep.f16_fallbacks.size() == (kind == QuantKind::f16 ? 0u : st.config.num_layers));
    Phi4FlashCheckpoint g = open_phi4flash_gguf(path);
    const Phi4FlashConfig &a = st.config, &b = g.config;
    using C = Phi4FlashConfig;
    const std::pair<const char*, uint32_t C::*> sizes[] = {{"vocab_size", &C::vocab_size},
                                                           {"hidden_size", &C::hidden_size},
                                                           {"intermediate_size", &C::intermediate_size},
                                                           {"num_layers", &C::num_layers},
                                                           {"num_attention_heads", &C::num_attention_heads},
                                                           {"num_key_value_heads", &C::num_key_value_heads},
                                                           {"sliding_window", &C::sliding_window},
                                                           {"max_position_embeddings", &C::max_position_embeddings},
                                                           {"mamba_d_state", &C::mamba_d_state},
                                                           {"mamba_d_conv", &C::mamba_d_conv},
                                                           {"mamba_expand", &C::mamba_expand},
                                                           {"mamba_dt_rank", &C::mamba_dt_rank}};
    for (const auto& name_size : sizes) {
      const auto& name = name_size.first;  // not structured bindings: INFO cannot capture those (clang 14)
      const auto& size = name_size.second;
      INFO(name);
      CHECK(a.*size == b.*size);
    }
    CHECK(float(a.layer_norm_eps) == float(b.layer_norm_eps));
    CHECK(a.tie_word_embeddings == b.tie_word_embeddings);
    CHECK(a.bos_token_id == b.bos_token_id);
    CHECK(a.eos_token_id == b.eos_token_id);
    check_shapes(g);
    for (const Phi4FlashTensor& t : table) {
      INFO(t.gguf);
      const WeightSource &s = t.source(st), &q = t.source(g);
      const GgufTensorInfo* gt = g.gguf->find_tensor(t.gguf);
      REQUIRE(gt);
      CHECK(gt->type == expected_type(t, kind));
      REQUIRE(q.rows() == s.rows());
      REQUIRE(q.cols == s.cols);
      if (gt->type == GgmlType::f32) {
        CHECK(source_floats(q) == source_floats(s));  // BF16 -> F32 -> F32: exact
      } else if (gt->type == GgmlType::f16) {
        std::vector<uint16_t> hs(size_t(s.numel())), hq(size_t(q.numel()));
        convert_rows(s, 0, s.rows(), true, hs.data());
        convert_rows(q, 0, q.rows(), true, hq.data());
        CHECK(hs == hq);
      } else {
        const QuantType qt = gt->type == GgmlType::q8_0 ? QuantType::q8_0 : QuantType::q4_0;
        CHECK(q.stored == qt);
        const std::vector<float> f = source_floats(s);
        const size_t rb = quant_row_bytes(qt, size_t(s.cols));
        std::vector<uint8_t> want(size_t(s.rows()) * rb), got(want.size());
        for (uint64_t r = 0; r < s.rows(); ++r)
          quantize_row(qt, f.data() + r * s.cols, size_t(s.cols), want.data() + r * rb);
        copy_block_rows(q, 0, q.rows(), got.data());
        CHECK(want == got);
      }
    }
    // Re-quantizing the GGUF gives the same file as the checkpoint did (the sources read back the same).
    if (kind == QuantKind::f16) {
      quantize_model(path, tmp / "again.gguf", kind);
      Phi4FlashCheckpoint again = open_phi4flash_gguf(tmp / "again.gguf");
      for (const Phi4FlashTensor& t : table) CHECK(source_floats(t.source(again)) == source_floats(t.source(g)));
    }
  }
}

TEST_CASE("phi4flash checkpoint: a GGUF with inconsistent keys or tensors is refused naming them") {
  test::TempDir tmp("diffvk-phi4flash-gguf-bad");
  const std::string path = tmp / "ok.gguf";
  quantize_model(kFixture, path, QuantKind::q8_0);
  const GgufFile f = GgufFile::open(path);
  auto refused = [&](const std::vector<uint8_t>& bytes, const std::string& needle) {
    const Caught e =
        error_of([&] { open_phi4flash_gguf(std::make_unique<GgufFile>(GgufFile::from_bytes(bytes, "x"))); });
    CHECK(e.st != Status::ok);
    CHECK_MESSAGE(e.msg.find(needle) != std::string::npos, e.msg);
  };
  refused(rewrite_gguf(f, {{"phi4flash.ssm.inner_size", 65}}), "phi4flash.ssm.inner_size");
  refused(rewrite_gguf(f, {{"phi4flash.attention.key_length", 8}}), "'phi4flash.attention.key_length'");
  refused(rewrite_gguf(f, {{"phi4flash.attention.head_count_kv", 3}}), "'phi4flash.attention.head_count_kv'");
  refused(rewrite_gguf(f, {{"phi4flash.block_count", 6}}), "'phi4flash.block_count'");
  refused(rewrite_gguf(f, {{"phi4flash.attention.value_length", 2}}), "phi4flash.attention.value_length");
  refused(rewrite_gguf(f, {{"phi4flash.ssm.state_size", std::nullopt}}), "phi4flash.ssm.state_size");
  refused(rewrite_gguf(f, {{"phi4flash.ssm.time_step_rank", 3}}), "blk.0.ssm_x.weight");  // shapes follow the keys
  refused(rewrite_gguf(f, {}, "blk.3.attn_lambda_k2"), "missing tensor 'blk.3.attn_lambda_k2'");
  refused(rewrite_gguf(f, {}, "", true), "unexpected tensor 'blk.0.ssm_extra'");
  refused(rewrite_gguf(f, {}, "output_norm.bias"), "output_norm.bias");
  CHECK(open_phi4flash_gguf(std::make_unique<GgufFile>(GgufFile::from_bytes(rewrite_gguf(f, {}), "same"))).tensors ==
        f.tensors().size());
}

TEST_CASE("phi4flash checkpoint: the tokenizer goes into the GGUF and reads back the same") {
  // The fixture with a 660-token vocabulary and tests/data/hf_tok's byte-level BPE tokenizer.json.
  test::Tensors ts = test::read_tensors(kFixture + "/model.safetensors");
  test::RandomTensors r(7);
  test::RawTensor e = r.rnd({660, ts.at("model.embed_tokens.weight").shape[1]}, 0.1f);
  ts["model.embed_tokens.weight"] = e;
  nlohmann::json cfg = nlohmann::json::parse(fixture_config());
  cfg["vocab_size"] = 660;
  cfg["bos_token_id"] = 656;
  cfg["eos_token_id"] = 657;
  test::TempDir tmp("diffvk-phi4flash-tok");
  const std::string dir = tmp / "m";
  std::filesystem::create_directory(dir);
  test::write_text(dir + "/config.json", cfg.dump());
  const auto bytes = test::encode_safetensors(ts);
  test::write_bytes(dir + "/model.safetensors", bytes.data(), bytes.size());
  std::filesystem::copy_file(std::string(DIFFVK_TEST_DATA_DIR) + "/hf_tok/tokenizer.json", dir + "/tokenizer.json");
  quantize_model(dir, tmp / "m.gguf", QuantKind::q4_0);
  const GgufFile f = GgufFile::open(tmp / "m.gguf");
  REQUIRE(f.find_value("tokenizer.ggml.model"));
  CHECK(f.find_value("tokenizer.ggml.model")->str == "gpt2");
  const Tokenizer a = Tokenizer::load(dir), b = Tokenizer::load(tmp / "m.gguf");
  const std::string text = "Hello world, 123 phi4flash";
  CHECK(a.encode(text, true) == b.encode(text, true));
  CHECK(a.vocab_size() == b.vocab_size());
  CHECK(open_phi4flash_gguf(tmp / "m.gguf").config.vocab_size == 660);
  // Without a tokenizer the directory has no text (no bytes fallback): the reason names the model, not the format.
  const Caught err = error_of([&] { Tokenizer::load(kFixture); });
  CHECK(err.st == Status::format_error);
  CHECK_MESSAGE(err.msg.find("without tokenizer.json") != std::string::npos, err.msg);
}

TEST_CASE("phi4flash checkpoint: every load path loads it, and each gives the directory's logits") {
  test::TempDir tmp("diffvk-phi4flash-load");
  const std::string gguf = tmp / "m.gguf";
  quantize_model(kFixture, gguf, QuantKind::q8_0);
  for (const std::string& path : {kFixture, gguf}) CHECK(open_checkpoint(path).phi4flash != nullptr);
  // A hostile directory is refused for what is wrong with it.
  test::Tensors ts = test::read_tensors(kFixture + "/model.safetensors");
  ts.erase("model.layers.5.attn.Wqkv.bias");
  write_dir(tmp, ts);
  const Caught e = error_of([&] { open_checkpoint(tmp.path()); });
  CHECK(e.st == Status::format_error);
  CHECK_MESSAGE(e.msg.find("model.layers.5.attn.Wqkv.bias") != std::string::npos, e.msg);

  // Model::load's paths: directory, .gguf file, memory (safetensors and .gguf), descriptors. The safetensors paths
  // give the directory's logits exactly; the .gguf paths (Q8_0 linears, dequantized at load) each other's.
  auto ctx = test::make_context();
  const std::string cfg = fixture_config();
  const auto st_bytes = test::read_bytes(kFixture + "/model.safetensors"), g_bytes = test::read_bytes(gguf);
  const std::vector<int32_t> prompt{1, 5, 9, 33, 2, 70, 11};
  auto logits = [&](const std::unique_ptr<Model>& m) {
    REQUIRE(m->config().format == "phi4flash");
    return Session::create(*m)->prefill(prompt);
  };
  const std::vector<float> dir = logits(Model::load(*ctx, kFixture)), gg = logits(Model::load(*ctx, gguf));
  CHECK(logits(Model::load_memory(*ctx, cfg.data(), cfg.size(), st_bytes.data(), st_bytes.size(), "mem")) == dir);
  CHECK(logits(Model::load_memory(*ctx, nullptr, 0, g_bytes.data(), g_bytes.size(), "mem")) == gg);
  const int cfd = ::open((kFixture + "/config.json").c_str(), O_RDONLY),
            wfd = ::open((kFixture + "/model.safetensors").c_str(), O_RDONLY), gfd = ::open(gguf.c_str(), O_RDONLY);
  REQUIRE((cfd >= 0 && wfd >= 0 && gfd >= 0));
  CHECK(logits(Model::load_fd(*ctx, {cfd, 0, -1}, {wfd, 0, -1})) == dir);
  CHECK(logits(Model::load_fd(*ctx, {-1, 0, 0}, {gfd, 0, -1})) == gg);
  ::close(cfd);
  ::close(wfd);
  ::close(gfd);
  // A Q8_0 file loaded as Q4_0 is refused, naming the tensor and both kinds.
  LoadOptions q4;
  q4.weights = QuantKind::q4_0;
  const Caught eq = error_of([&] { Model::load(*ctx, gguf, q4); });
  CHECK(eq.st == Status::invalid_argument);
  CHECK_MESSAGE(eq.msg.find("is q8_0 in the file but the weights asked are q4_0") != std::string::npos, eq.msg);
  // Hostile bytes in memory: the tensor named.
  const auto bad = test::encode_safetensors(ts);
  const Caught e2 = error_of([&] { Model::load_memory(*ctx, cfg.data(), cfg.size(), bad.data(), bad.size(), "mem"); });
  CHECK(e2.st == Status::format_error);
  CHECK_MESSAGE(e2.msg.find("model.layers.5.attn.Wqkv.bias") != std::string::npos, e2.msg);

  // The C ABI (and Java, which calls it): a model, and a session of it.
  diffvk_context_options opt;
  diffvk_context_default_options(&opt);
  opt.validation = 1;
  diffvk_context* c = nullptr;
  REQUIRE(diffvk_context_create(&opt, &c) == DIFFVK_OK);
  for (const std::string& path : {kFixture, gguf}) {
    diffvk_model* m = nullptr;
    CHECK_MESSAGE(diffvk_model_load(c, path.c_str(), &m) == DIFFVK_OK, diffvk_last_error());
    CHECK(m != nullptr);
    diffvk_session* s = nullptr;
    CHECK(diffvk_session_create(m, 0, 0, &s) == DIFFVK_OK);
    CHECK(diffvk_session_destroy(s) == DIFFVK_OK);
    CHECK(diffvk_model_destroy(m) == DIFFVK_OK);
  }
  CHECK(diffvk_context_destroy(c) == DIFFVK_OK);
}

TEST_CASE("phi4flash checkpoint: diffvk quantize writes a .gguf, and diffvk run and logits run it") {
  test::TempDir tmp("diffvk-phi4flash-cli");
  const std::string gguf = tmp / "m.gguf";
  test::CliResult r = test::run_cli(tmp, "quantize --type q4_0 " + kFixture + " " + gguf);
  REQUIRE_MESSAGE(r.exit_code == 0, r.out);
  CHECK(open_phi4flash_gguf(gguf).tensors == phi4flash_tensors(open_phi4flash_gguf(gguf).config).size());
  r = test::run_cli(tmp, "quantize --list " + gguf);
  CHECK_MESSAGE(r.exit_code == 0, r.out);
  CHECK_MESSAGE(r.out.find("\"phi4flash.ssm.state_size\"") != std::string::npos, r.out);
  for (const std::string& model : {kFixture, gguf}) {
    test::write_tokens(tmp / "t.npy", {1, 5, 9});
    r = test::run_cli(tmp, "logits --model " + model + " --tokens " + (tmp / "t.npy") + " --prompt-len 2 --output " +
                               (tmp / "l.npy"));
    CHECK_MESSAGE(r.exit_code == 0, r.out);
    CHECK(std::filesystem::exists(tmp / "l.npy"));
    std::filesystem::remove(tmp / "l.npy");
  }
}
