// Hugging Face DiffLlama checkpoints: logits of tiny random DiffLlama models (MHA untied F32
// in one file; GQA tied BF16 with llama3 RoPE scaling in two shards; an odd kv head count in F16 with
// rope_parameters) against a float64 PyTorch reference written from transformers' modeling_diffllama.py
// semantics (tests/python/make_hf_fixture.py), through the library and through `diffvk logits`, at
// docs/maths.md's whole-model bounds. Streaming: a tiny staging slice gives the same bits; an embedding larger
// than a (simulated 16 MiB) storage-buffer range is split across bindings and gives the same logits.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>

#include <nlohmann/json.hpp>

#include "diffvk/model.hpp"
#include "diffvk/tokenizer.hpp"
#include "cli_run.hpp"
#include "gpu_test.hpp"
#include "io/half.hpp"
#include "diffvk/npy.hpp"
#include "model/checkpoint.hpp"
#include "model_fixture.hpp"
#include "model_parity.hpp"

using namespace diffvk;

namespace {
const std::string kData = std::string(DIFFVK_TEST_DATA_DIR);
const char* kFixtures[] = {"hf_mha", "hf_gqa_llama3", "hf_kv3_f16", "hf_tok"};

size_t read_tokens_count(const std::string& dir) { return test::load_tokens(dir + "/tokens.npy").size(); }

uint32_t prompt_len(const std::string& dir) {
  std::ifstream f(dir + "/meta.json");
  return nlohmann::json::parse(f).at("prompt_len").get<uint32_t>();
}

void hf_parity(const std::string& name, Precision precision) {
  auto ctx = test::make_context_or_skip(precision);
  if (!ctx) return;
  const std::string dir = kData + "/" + name;
  const bool fp16 = ctx->precision() == Precision::fp16;
  auto model = Model::load(*ctx, dir);
  CHECK(model->load_stats().format == "diffllama");
  CHECK(model->config().tokenizer == "none");  // text goes through the directory's tokenizer files, if any
  const uint32_t V = model->config().vocab_size;
  const auto toks = test::load_tokens(dir + "/tokens.npy");
  const auto ref = npy_as_float(read_npy(dir + "/logits.npy"));
  REQUIRE(ref.size() == toks.size() * V);
  auto s = Session::create(*model, SessionOptions{0, 64});
  const test::Parity p = test::parity(test::teacher_forced(*s, toks, prompt_len(dir)), ref, V);
  INFO(name << " " << std::string(precision_name(ctx->precision())) << ": max_abs=" << p.max_abs
            << " max_ref=" << p.max_ref << " nmse=" << p.nmse << " top1=" << p.top1);
  CHECK(test::ok(p, fp16));
}

void expect_config_error(const nlohmann::json& j, const std::string& needle, Status status = Status::format_error) {
  try {
    parse_hf_config(j.dump(), "config.json");
    FAIL("accepted: " << j.dump());
  } catch (const Error& e) {
    INFO(e.what());
    CHECK(e.status() == status);
    CHECK(std::string(e.what()).find(needle) != std::string::npos);
  }
}

nlohmann::json base_config() {
  return {{"model_type", "diffllama"}, {"vocab_size", 80},
          {"hidden_size", 32},         {"intermediate_size", 40},
          {"num_hidden_layers", 2},    {"num_attention_heads", 4},
          {"num_key_value_heads", 2},  {"max_position_embeddings", 32}};
}
}  // namespace

// One fixture checked by `check` as two CTest tests, "<title> fp32" and "<title> fp16".
#define HF_FP32_AND_FP16(title, check, fixture)                 \
  TEST_CASE(title " fp32") { check(fixture, Precision::fp32); } \
  TEST_CASE(title " fp16") { check(fixture, Precision::fp16); }

HF_FP32_AND_FP16("hf: MHA untied F32 matches the PyTorch DiffLlama reference", hf_parity, "hf_mha")
HF_FP32_AND_FP16("hf: GQA tied llama3 BF16 shards match the PyTorch DiffLlama reference", hf_parity, "hf_gqa_llama3")
HF_FP32_AND_FP16("hf: odd kv heads F16 match the PyTorch DiffLlama reference", hf_parity, "hf_kv3_f16")

HF_FP32_AND_FP16("hf: with a tokenizer.json and vocab 660 matches the PyTorch DiffLlama reference", hf_parity, "hf_tok")

TEST_CASE("hf: diffvk run on a Hugging Face directory with its tokenizer generates what the library generates") {
  // The logits of this checkpoint match the PyTorch reference (above); here the text path: the prompt
  // through the directory's tokenizer.json (BOS from the post-processor), greedy decoding, detokenised.
  const std::string dir = kData + "/hf_tok", prompt = "Hello world, 123";
  auto ctx = test::make_context(Precision::fp32);
  auto model = Model::load(*ctx, dir);
  const Tokenizer tok = Tokenizer::load(dir);
  const std::vector<int32_t> ids = tok.encode(prompt, true);
  REQUIRE(ids.size() > 2);
  CHECK(ids.front() == model->config().bos_token_id);
  auto s = Session::create(*model, SessionOptions{0, 64});
  auto logits = s->prefill(ids);
  std::vector<int32_t> gen;
  const uint32_t V = model->config().vocab_size;
  for (int i = 0; i < 6; ++i) {
    const int32_t next = static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
    if (next == model->config().eos_token_id) break;
    gen.push_back(next);
    if (i + 1 < 6) logits = s->decode(next);
    REQUIRE(logits.size() == V);
  }
  REQUIRE(!gen.empty());
  test::TempDir tmp("diffvk-hf-run");
  const auto r =
      test::run_cli(tmp, "run --model " + dir + " --prompt '" + prompt + "' -n 6 --temperature 0 --precision fp32");
  INFO(r.out);
  REQUIRE(r.exit_code == 0);
  CHECK(r.out.find(prompt + tok.decode(gen)) != std::string::npos);
}

static void hf_cli_logits(const char* precision) {
  test::TempDir tmp("diffvk-hf-cli");
  const bool fp16 = std::string(precision) == "fp16";
  for (const char* name : kFixtures) {
    const std::string dir = kData + "/" + name, out = tmp / (std::string(name) + ".npy");
    const auto r =
        test::run_cli(tmp, "logits --model " + dir + " --tokens " + dir + "/tokens.npy --prompt-len " +
                               std::to_string(prompt_len(dir)) + " --precision " + precision + " --output " + out);
    INFO(r.out);
    REQUIRE(r.exit_code == 0);
    const auto got = npy_as_float(read_npy(out)), ref = npy_as_float(read_npy(dir + "/logits.npy"));
    REQUIRE(got.size() == ref.size());
    const test::Parity p = test::parity(got, ref, static_cast<uint32_t>(ref.size() / read_tokens_count(dir)));
    INFO(name << " " << precision << ": max_abs=" << p.max_abs << " max_ref=" << p.max_ref << " nmse=" << p.nmse
              << " top1=" << p.top1);
    CHECK(test::ok(p, fp16));
  }
}

TEST_CASE("hf: diffvk logits fp16 on every Hugging Face fixture matches the reference") {
  if (!test::device_has_fp16()) {
    test::skip("device has no fp16 path; not run");
    return;
  }
  hf_cli_logits("fp16");
}

TEST_CASE("hf: diffvk logits on a sharded Hugging Face directory matches the reference") {
  hf_cli_logits("fp32");
  test::TempDir tmp("diffvk-hf-cli");
  // run: text needs the checkpoint's own tokenizer; these fixtures have none (no bytes fallback).
  const auto r = test::run_cli(tmp, "run --model " + kData + "/hf_gqa_llama3 --prompt hello -n 3");
  INFO(r.out);
  CHECK(r.exit_code != 0);
  CHECK(r.out.find("without tokenizer.json or tokenizer.model") != std::string::npos);
}

TEST_CASE("hf: config conversion and errors name the Hugging Face key") {
  const ModelConfig c = parse_hf_config(base_config().dump(), "config.json");
  CHECK(c.num_heads == 2);     // sub-heads / 2
  CHECK(c.num_kv_heads == 1);  // 2 kv sub-heads pair into one group
  CHECK(c.head_dim() == 8);
  CHECK(c.format == "diffllama");
  CHECK(c.subln_eps == c.rms_norm_eps);
  auto j = base_config();
  j["num_key_value_heads"] = 1;  // odd: one K pair per head
  CHECK(parse_hf_config(j.dump(), "c").num_kv_heads == 2);
  j = base_config();
  j["num_attention_heads"] = 3;
  j["num_key_value_heads"] = 3;
  j["hidden_size"] = 48;
  expect_config_error(j, "num_attention_heads");
  j = base_config();
  j["head_dim"] = 16;
  expect_config_error(j, "head_dim");
  j = base_config();
  j["attention_bias"] = true;
  expect_config_error(j, "attention_bias");
  j = base_config();
  j["hidden_act"] = "gelu";
  expect_config_error(j, "hidden_act");
  j = base_config();
  j.erase("num_hidden_layers");
  expect_config_error(j, "num_hidden_layers");
  j = base_config();
  j["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 2.0}};
  expect_config_error(j, "yarn", Status::unsupported);
  j = base_config();
  j["rope_scaling"] = {{"rope_type", "llama3"},
                       {"factor", 8.0},
                       {"low_freq_factor", 4.0},
                       {"high_freq_factor", 1.0},
                       {"original_max_position_embeddings", 16}};
  expect_config_error(j, "low_freq_factor < high_freq_factor");
  CHECK_FALSE(is_hf_diffllama(R"({"vocab_size": 256})"));
  try {
    is_hf_diffllama(R"({"model_type": "llama"})");
    FAIL("a plain Llama config was taken");
  } catch (const Error& e) {
    CHECK(e.status() == Status::unsupported);
    CHECK(std::string(e.what()).find("'llama'") != std::string::npos);
  }
}

TEST_CASE("hf: llama3 scaling keeps high frequencies and divides low ones") {
  auto j = base_config();
  j["rope_theta"] = 100.0;  // D = 8: inv_freq 1, 0.316, 0.1, 0.0316 -> wavelengths 6.3, 19.9, 63, 199
  j["rope_scaling"] = {{"rope_type", "llama3"},
                       {"factor", 8.0},
                       {"low_freq_factor", 1.0},
                       {"high_freq_factor", 4.0},
                       {"original_max_position_embeddings", 16}};  // bands: < 4 kept, > 16 divided, between: mixed
  const auto f = rope_inv_freq(parse_hf_config(j.dump(), "c"));
  REQUIRE(f.size() == 4);
  const double s = (16 / (2 * 3.14159265358979323846) - 1.0) / 3.0;  // wavelength 2*pi: the smooth band
  CHECK(f[0] == doctest::Approx((1 - s) / 8 + s).epsilon(1e-12));
  for (int i = 1; i < 4; ++i) CHECK(f[i] == doctest::Approx(std::pow(100.0, -i / 4.0) / 8).epsilon(1e-12));
  j["rope_scaling"] = nullptr;
  CHECK(rope_inv_freq(parse_hf_config(j.dump(), "c"))[1] == doctest::Approx(std::pow(100.0, -0.25)).epsilon(1e-12));
}

TEST_CASE("hf: broken shard indexes and stray tensors are errors naming the file") {
  test::TempDir tmp("diffvk-hf-bad");
  const std::string src = kData + "/hf_gqa_llama3";
  auto copy_dir = [&](const std::string& to) {
    test::fs::create_directories(to);
    for (const auto& e : test::fs::directory_iterator(src))
      test::fs::copy_file(e.path(), to + "/" + e.path().filename().string());
  };
  auto expect_load_error = [&](const std::string& dir, const std::string& needle) {
    auto ctx = test::make_context();
    try {
      Model::load(*ctx, dir);
      FAIL("loaded " << dir);
    } catch (const Error& e) {
      INFO(e.what());
      CHECK(e.status() == Status::format_error);
      CHECK(std::string(e.what()).find(needle) != std::string::npos);
    }
  };
  const std::string idx = "/model.safetensors.index.json";
  {  // a shard outside the directory
    const std::string d = tmp / "escape";
    copy_dir(d);
    auto j = nlohmann::json::parse(std::ifstream(d + idx));
    j["weight_map"]["model.norm.weight"] = "../model-00001-of-00002.safetensors";
    test::write_text(d + idx, j.dump());
    expect_load_error(d, "plain file name");
  }
  {  // the index places a tensor in the wrong shard
    const std::string d = tmp / "wrong";
    copy_dir(d);
    auto j = nlohmann::json::parse(std::ifstream(d + idx));
    const std::string f = j["weight_map"]["model.norm.weight"];
    j["weight_map"]["model.norm.weight"] =
        f.find("00001") != std::string::npos ? "model-00002-of-00002.safetensors" : "model-00001-of-00002.safetensors";
    test::write_text(d + idx, j.dump());
    expect_load_error(d, "model.norm.weight");
  }
  {  // a tensor the model does not use
    const std::string d = tmp / "stray";
    copy_dir(d);
    const std::string shard = d + "/model-00001-of-00002.safetensors";
    auto ts = test::read_tensors(shard);
    ts["model.layers.0.self_attn.extra.weight"] = test::f32_tensor({2}, {1.0f, 2.0f});
    const auto bytes = test::encode_safetensors(ts);
    test::write_bytes(shard, bytes.data(), bytes.size());
    auto j = nlohmann::json::parse(std::ifstream(d + idx));
    j["weight_map"]["model.layers.0.self_attn.extra.weight"] = "model-00001-of-00002.safetensors";
    test::write_text(d + idx, j.dump());
    expect_load_error(d, "unexpected tensor 'model.layers.0.self_attn.extra.weight'");
  }
}

TEST_CASE("hf: a tiny staging slice streams the same weights") {
  const std::string dir = kData + "/hf_mha";
  auto ctx = test::make_context();
  auto a = Model::load(*ctx, dir);
  LoadOptions o;
  o.staging_bytes = 256;   // 2 rows of 32 fp32 per slice
  o.force_staging = true;  // the discrete-GPU path (host slice + staging buffer) also where memory is mapped
  auto b = Model::load(*ctx, dir, o);
  const auto& st = b->load_stats();
  CHECK(st.weight_bytes == a->load_stats().weight_bytes);
  CHECK(st.largest_tensor_bytes > 256);
  // Host staging is at most the slice plus its staging copy: rows of 160 bytes (down_proj) go one per slice.
  CHECK(st.staging_peak_bytes > 0);
  CHECK(st.staging_peak_bytes <= 2 * 256);
  const auto toks = test::load_tokens(dir + "/tokens.npy");
  auto sa = Session::create(*a), sb = Session::create(*b);
  CHECK(sa->prefill(toks, true) == sb->prefill(toks, true));
}

TEST_CASE("model: an embedding larger than a simulated 16 MiB binding is split by rows") {
  // Tied, vocab 70000 x 64 in fp32: 17.9 MB, above 16 MiB, so two parts (rows [0, 65536) and [65536, 70000));
  // the same table serves the embedding (embed parts) and lm_head (one linear per part into its slice of the logits).
  test::TempDir tmp("diffvk-split");
  // vocab, hidden, layers, heads, kv_heads, intermediate, max_pos, tie
  const test::TinySpec spec{70000, 64, 1, 2, 1, 64, 16, true};
  test::write_tiny_model(tmp.path(), spec, 7);
  // 10 rows: lm_head takes the tiled path (rows <= 8 take the vector path: ~2 s per row at vocab 70000 on lavapipe).
  const std::vector<int32_t> toks = {2, 69999, 65535, 65536, 300, 40000, 1, 65537, 12, 32768};
  auto whole_ctx = test::make_context(Precision::fp32);
  auto whole = Model::load(*whole_ctx, tmp.path());
  REQUIRE(whole->load_stats().split_tensors == 0);
  ContextOptions o = test::validated_options(Precision::fp32);
  o.simulate_max_storage_buffer_range = 16ull << 20;
  auto split_ctx = Context::create(o);
  REQUIRE(split_ctx->caps().max_storage_buffer_range == (16ull << 20));
  auto split = Model::load(*split_ctx, tmp.path());
  CHECK(split->load_stats().split_tensors == 1);
  CHECK(split->load_stats().largest_tensor_bytes > (16ull << 20));
  auto sw = Session::create(*whole), ss = Session::create(*split);
  // All logits (tiled linear per part), then decode steps (one-row linear per part).
  const auto lw = sw->prefill(toks, true), ls = ss->prefill(toks, true);
  CHECK(lw == ls);
  CHECK(sw->decode(65600) == ss->decode(65600));  // the one-row lm_head (linear_row) per part
}

namespace {
// A tensor of a Hugging Face checkpoint in double, rounded through fp16 when the device stores fp16.
std::vector<double> hf_weights(const test::Tensors& ts, const std::string& name, bool fp16) {
  const test::RawTensor& t = ts.at(name);
  const size_t es = t.dtype == "F32" ? 4 : 2, n = t.bytes.size() / es;
  std::vector<double> v(n);
  for (size_t i = 0; i < n; ++i) {
    float f = 0;
    if (es == 4) {
      std::memcpy(&f, t.bytes.data() + 4 * i, 4);
    } else {
      uint16_t h = 0;
      std::memcpy(&h, t.bytes.data() + 2 * i, 2);
      f = t.dtype == "BF16" ? bf16_to_float(h) : half_to_float(h);
    }
    v[i] = fp16 ? double(half_to_float(float_to_half(f))) : double(f);
  }
  return v;
}

// Layer 0's attention maps of a Hugging Face checkpoint, computed here in double from the checkpoint's own
// tensors and transformers' DiffLlama semantics, independently of the loader's head permutation:
// x = embed(tokens), h = RMSNorm(x), q/k = h·Wᵀ per sub-head (num_attention_heads of them, head_dim =
// hidden / num_attention_heads), NeoX RoPE (rotate halves), key sub-head s / n_rep (repeat_kv), causal
// softmax of q·k / sqrt(head_dim). Differential head h is the pair of sub-heads (h, h + n/2): A1 and A2.
void hf_maps(const std::string& name, Precision precision) {
  auto ctx = test::make_context_or_skip(precision);
  if (!ctx) return;
  const std::string dir = kData + "/" + name;
  const bool fp16 = ctx->precision() == Precision::fp16;
  const auto cfg = nlohmann::json::parse(std::ifstream(dir + "/config.json"));
  const auto meta = nlohmann::json::parse(std::ifstream(dir + "/meta.json"));
  REQUIRE(cfg.value("rope_scaling", nlohmann::json()).is_null());  // the fixtures without llama3 scaling
  const int E = cfg.at("hidden_size"), nah = cfg.at("num_attention_heads"), kv = cfg.at("num_key_value_heads");
  const int D = E / nah, n_rep = nah / kv;
  const double eps = cfg.at("rms_norm_eps"), theta = cfg.contains("rope_parameters")
                                                         ? double(cfg["rope_parameters"]["rope_theta"])
                                                         : double(cfg.at("rope_theta"));
  const test::Tensors ts = test::read_tensors(dir + "/model.safetensors");
  const auto emb = hf_weights(ts, "model.embed_tokens.weight", fp16),
             wn = hf_weights(ts, "model.layers.0.input_layernorm.weight", fp16),
             wq = hf_weights(ts, "model.layers.0.self_attn.q_proj.weight", fp16),
             wk = hf_weights(ts, "model.layers.0.self_attn.k_proj.weight", fp16);
  const auto toks = test::load_tokens(dir + "/tokens.npy");
  const int T = int(toks.size());
  std::vector<double> q(size_t(T) * nah * D), k(size_t(T) * kv * D);
  for (int t = 0; t < T; ++t) {
    std::vector<double> h(emb.begin() + size_t(toks[t]) * E, emb.begin() + size_t(toks[t] + 1) * E);
    double ms = 0;
    for (double v : h) ms += v * v;
    const double r = 1.0 / std::sqrt(ms / E + eps);
    for (int e = 0; e < E; ++e) h[e] *= r * wn[e];
    auto project = [&](const std::vector<double>& w, int rows, double* out) {
      for (int i = 0; i < rows; ++i) {
        double acc = 0;
        for (int e = 0; e < E; ++e) acc += h[e] * w[size_t(i) * E + e];
        out[i] = acc;
      }
      for (int s = 0; s < rows / D; ++s)  // NeoX: dimension d pairs with d + D/2, frequency theta^(-2d/D)
        for (int d = 0; d < D / 2; ++d) {
          const double a = t * std::pow(theta, -2.0 * d / D), c = std::cos(a), sn = std::sin(a);
          double& x1 = out[s * D + d];
          double& x2 = out[s * D + d + D / 2];
          const double y1 = x1 * c - x2 * sn, y2 = x2 * c + x1 * sn;
          x1 = y1;
          x2 = y2;
        }
    };
    project(wq, nah * D, &q[size_t(t) * nah * D]);
    project(wk, kv * D, &k[size_t(t) * kv * D]);
  }
  auto prob = [&](int sub, int i, int j) {  // A of sub-head `sub`, query i, key j
    if (j > i) return 0.0;
    std::vector<double> s(i + 1);
    double mx = -1e300, sum = 0;
    for (int jj = 0; jj <= i; ++jj) {
      double dot = 0;
      for (int d = 0; d < D; ++d)
        dot += q[(size_t(i) * nah + sub) * D + d] * k[(size_t(jj) * kv + sub / n_rep) * D + d];
      s[jj] = dot / std::sqrt(double(D));
      mx = std::max(mx, s[jj]);
    }
    for (double& v : s) sum += (v = std::exp(v - mx));
    return s[j] / sum;
  };
  auto model = Model::load(*ctx, dir);
  auto session = Session::create(*model, SessionOptions{0, 64});
  const AttentionMaps maps = session->attention_maps(toks, 0, -1);
  REQUIRE(int(maps.heads) == nah / 2);
  REQUIRE(int(maps.tokens) == T);
  std::vector<double> got, want;
  for (int which = 0; which < 2; ++which)
    for (int h = 0; h < nah / 2; ++h)
      for (int i = 0; i < T; ++i)
        for (int j = 0; j < T; ++j) {
          got.push_back((which ? maps.a2 : maps.a1)[(size_t(h) * T + i) * T + j]);
          want.push_back(prob(h + which * nah / 2, i, j));
        }
  const auto c = test::compare(got, want);
  INFO(name << " " << std::string(precision_name(ctx->precision())) << ": " << c.summary());
  CHECK(test::within_spec(c, fp16, test::Scope::layer));
  CHECK(maps.lambda == doctest::Approx(meta.at("lambda")[0].get<double>()).epsilon(1e-5));
}
}  // namespace

HF_FP32_AND_FP16("hf: attention maps are sub-heads h and h + n/2 of the Hugging Face model, MHA F32", hf_maps, "hf_mha")
HF_FP32_AND_FP16("hf: attention maps are sub-heads h and h + n/2 of the Hugging Face model, odd kv F16", hf_maps,
                 "hf_kv3_f16")
