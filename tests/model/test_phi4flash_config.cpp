// Phi-4-mini-flash (phi4flash) config.json parsing, its refusals, the SambaY layer plan and the session-state
// bytes (runtime/model/phi4flash_config.*). Pure: no device.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include <string>

#include "diffvk/error.hpp"
#include "diffvk/model.hpp"
#include "model/phi4flash_config.hpp"
#include "model/recipe_sambay.hpp"

using diffvk::Error;
using diffvk::Status;
using K = diffvk::SambaYLayerKind;

namespace {

// The architecture keys of microsoft/Phi-4-mini-flash-reasoning's config.json (the subset onnxruntime/mobius
// pins at revision 1dff816), plus keys a saved config carries that the parser ignores. It omits mb_per_layer
// and every mamba_* key: the config class's defaults apply.
nlohmann::json published() {
  return nlohmann::json::parse(R"({
    "architectures": ["Phi4FlashForCausalLM"], "model_type": "phi4flash",
    "vocab_size": 200064, "hidden_size": 2560, "intermediate_size": 10240, "num_hidden_layers": 32,
    "num_attention_heads": 40, "num_key_value_heads": 20, "max_position_embeddings": 262144,
    "sliding_window": 512, "hidden_act": "silu", "layer_norm_eps": 1e-05, "tie_word_embeddings": true,
    "torch_dtype": "bfloat16", "pad_token_id": 0, "bos_token_id": 1, "eos_token_id": 2,
    "attention_dropout": 0.0, "embd_pdrop": 0.0, "resid_pdrop": 0.0, "initializer_range": 0.02, "use_cache": true
  })");
}

diffvk::Phi4FlashConfig parse(const nlohmann::json& j) { return diffvk::parse_phi4flash_config(j.dump(), "c.json"); }

// The error of parsing j, which must fail with `status` and name `key`.
void refused(const nlohmann::json& j, Status status, const std::string& key) {
  CAPTURE(key);
  try {
    parse(j);
    FAIL("accepted");
  } catch (const Error& e) {
    CAPTURE(e.what());
    CHECK(e.status() == status);
    CHECK(std::string(e.what()).find("'" + key) != std::string::npos);
  }
}

}  // namespace

TEST_CASE("phi4flash config: the published config.json, its omitted keys at the config class's defaults") {
  const diffvk::Phi4FlashConfig c = parse(published());
  CHECK(c.vocab_size == 200064);
  CHECK(c.hidden_size == 2560);
  CHECK(c.intermediate_size == 10240);
  CHECK(c.num_layers == 32);
  CHECK(c.num_attention_heads == 40);
  CHECK(c.num_key_value_heads == 20);
  CHECK(c.head_dim == 64);
  CHECK(c.diff_heads() == 20);
  CHECK(c.kv_groups() == 10);
  CHECK(c.sliding_window == 512);
  CHECK(c.max_position_embeddings == 262144);
  CHECK(c.layer_norm_eps == 1e-5);
  CHECK(c.tie_word_embeddings);
  CHECK(c.mamba_d_state == 16);
  CHECK(c.mamba_d_conv == 4);
  CHECK(c.mamba_expand == 2);
  CHECK(c.d_inner() == 5120);
  CHECK(c.mamba_dt_rank == 160);  // "auto": ceil(2560 / 16)
  CHECK(c.eos_token_id == 2);
  CHECK(c.torch_dtype == "bfloat16");

  const diffvk::SambaYPlan p = diffvk::sambay_plan(c);
  REQUIRE(p.kinds.size() == 32);
  CHECK(p.memory_layer == 16);
  CHECK(p.shared_kv_layer == 17);
  CHECK(p.first_cross_layer == 18);
  for (uint32_t i = 0; i < 32; ++i) {
    CAPTURE(i);
    const K want = i % 2 == 0 ? (i < 16    ? K::mamba
                                 : i == 16 ? K::memory_mamba
                                           : K::gated_memory)
                              : (i < 16    ? K::sliding_attention
                                 : i == 17 ? K::full_attention
                                           : K::cross_attention);
    CHECK(p.kinds[i] == want);
    CHECK(p.window[i] == (want == K::sliding_attention ? 512u : 0u));
  }
  CHECK(p.count(K::mamba) == 8);
  CHECK(p.count(K::sliding_attention) == 8);
  CHECK(p.count(K::gated_memory) == 7);
  CHECK(p.count(K::cross_attention) == 7);
  CHECK(std::string(diffvk::to_string(p.kinds[17])) == "full_attention");

  // The per-layer list a re-saved config holds means the same.
  nlohmann::json j = published();
  j["sliding_window"] = nlohmann::json::array();
  for (int i = 0; i < 32; ++i) j["sliding_window"].push_back(i % 2 == 1 && i < 16 ? nlohmann::json(512) : nullptr);
  j["mamba_dt_rank"] = "auto";
  j["mb_per_layer"] = 2;
  j["head_dim"] = 64;
  CHECK(parse(j).sliding_window == 512);
  CHECK(parse(j).mamba_dt_rank == 160);
}

TEST_CASE("phi4flash config: session state bytes at 8192 tokens (docs/phi4flash.md)") {
  const diffvk::SambaYStateBytes b = diffvk::sambay_state_bytes(parse(published()), 8192, 2);
  CHECK(b.full_kv == 8192ull * 2 * 20 * 64 * 2);        // one growing K/V cache: 41,943,040
  CHECK(b.sliding_kv == 8ull * 512 * 2 * 20 * 64 * 2);  // eight window-capped ones: 20,971,520
  CHECK(b.mamba == 9ull * (3 + 16) * 5120 * 2);         // nine conv + scan states: 1,751,040
  CHECK(b.total() == 64665600);
  // Below the window every cache holds what it has seen.
  CHECK(diffvk::sambay_state_bytes(parse(published()), 100, 2).sliding_kv == 8ull * 100 * 2 * 20 * 64 * 2);
}

TEST_CASE("phi4flash config: a sliding layer's pieces start at aligned offsets (sambay_piece_rows, pure)") {
  using diffvk::sambay_piece_rows;
  // The published shape in fp16: q rows of 2·40·64·2 B, [q | k | v] rows of (5120 + 4·20·64)·2 B: 17 rows, any
  // alignment up to 256 B; at most the chunk.
  CHECK(sambay_piece_rows(64, 17, {10240, 20480}, 256) == 17);
  CHECK(sambay_piece_rows(8, 17, {10240, 20480}, 256) == 8);
  // Rows of 48 B (a tiny shape): 17 rows are 816 B, not a multiple of 64; 16 rows are.
  CHECK(sambay_piece_rows(64, 17, {48, 96}, 16) == 17);
  CHECK(sambay_piece_rows(64, 17, {48, 96}, 64) == 16);
  CHECK(sambay_piece_rows(64, 17, {48, 96}, 256) == 16);
  // No row count aligns (an odd row width at 4-byte alignment would be, with 2-byte rows: 2 rows): the largest that
  // does; where none does up to 17, no pieces.
  CHECK(sambay_piece_rows(64, 17, {2}, 4) == 16);
  CHECK(sambay_piece_rows(64, 17, {2}, 256) == 64);
}

TEST_CASE("phi4flash config: inconsistent or unsupported values are refused, naming the key") {
  auto with = [](const char* key, const nlohmann::json& v) {
    nlohmann::json j = published();
    j[key] = v;
    return j;
  };
  auto without = [](const char* key) {
    nlohmann::json j = published();
    j.erase(key);
    return j;
  };
  refused(without("sliding_window"), Status::format_error, "sliding_window");
  refused(with("sliding_window", nullptr), Status::format_error, "sliding_window");
  refused(with("sliding_window", 0), Status::format_error, "sliding_window");
  refused(with("sliding_window", nlohmann::json::array({512, 512})), Status::format_error, "sliding_window");
  {
    nlohmann::json j = published();
    j["sliding_window"] = nlohmann::json::array();
    for (int i = 0; i < 32; ++i) j["sliding_window"].push_back(i % 2 == 1 && i < 16 ? 512 : 0);
    refused(j, Status::format_error, "sliding_window[0]");  // a window on a Mamba layer
    for (int i = 0; i < 32; ++i)
      j["sliding_window"][i] = i % 2 == 1 && i < 16 ? nlohmann::json(i == 5 ? 256 : 512) : nullptr;
    refused(j, Status::unsupported, "sliding_window[5]");
  }
  refused(without("num_key_value_heads"), Status::format_error, "num_key_value_heads");
  refused(with("num_key_value_heads", 12), Status::format_error, "num_attention_heads");  // 40 % 12
  refused(with("num_key_value_heads", 5), Status::format_error, "num_key_value_heads");   // odd: no stripe pairs
  refused(with("num_attention_heads", 41), Status::format_error, "num_attention_heads");
  refused(with("num_attention_heads", 60), Status::format_error, "hidden_size");  // 2560 % 60
  refused(with("head_dim", 128), Status::format_error, "head_dim");
  refused(with("num_hidden_layers", 30), Status::format_error, "num_hidden_layers");
  refused(with("num_hidden_layers", 31), Status::format_error, "num_hidden_layers");
  refused(with("mb_per_layer", 3), Status::unsupported, "mb_per_layer");
  refused(with("mb_per_layer", 0), Status::unsupported, "mb_per_layer");
  refused(with("hidden_act", "gelu"), Status::unsupported, "hidden_act");
  refused(without("hidden_act"), Status::format_error, "hidden_act");
  refused(without("layer_norm_eps"), Status::format_error, "layer_norm_eps");
  refused(with("layer_norm_eps", -1), Status::format_error, "layer_norm_eps");
  refused(without("tie_word_embeddings"), Status::format_error, "tie_word_embeddings");
  refused(without("vocab_size"), Status::format_error, "vocab_size");
  refused(with("vocab_size", -3), Status::format_error, "vocab_size");
  refused(with("intermediate_size", "10240"), Status::format_error, "intermediate_size");
  refused(with("mamba_d_conv", 1), Status::format_error, "mamba_d_conv");
  refused(with("mamba_dt_rank", 0), Status::format_error, "mamba_dt_rank");
  refused(with("mamba_dt_rank", "full"), Status::format_error, "mamba_dt_rank");
  refused(with("mamba_proj_bias", true), Status::unsupported, "mamba_proj_bias");
  refused(with("mamba_conv_bias", false), Status::unsupported, "mamba_conv_bias");
  refused(with("mlp_bias", true), Status::unsupported, "mlp_bias");
  refused(with("rope_scaling", nlohmann::json::object({{"type", "linear"}})), Status::unsupported, "rope_scaling");
  refused(with("eos_token_id", 200064), Status::format_error, "eos_token_id");
  refused(with("torch_dtype", "int8"), Status::format_error, "torch_dtype");
  refused(with("model_type", "phi3"), Status::format_error, "model_type");
}

TEST_CASE("phi4flash config: the model loader refuses a phi4flash directory, naming the model_type") {
  // The native/DiffLlama config reader refuses it; the load paths read and verify a phi4flash checkpoint first and
  // then refuse it (tests/model/test_phi4flash_checkpoint.cpp).
  try {
    diffvk::read_model_config(std::string(DIFFVK_TEST_DATA_DIR) + "/phi4flash_tiny");
    FAIL("accepted");
  } catch (const Error& e) {
    CHECK(e.status() == Status::unsupported);
    CHECK(std::string(e.what()).find("phi4flash") != std::string::npos);
  }
}
