// The Phi-4-mini-flash (phi4flash) test fixture's reader (tests/data/phi4flash_tiny, written by
// tests/python/make_phi4flash_fixture.py): the float64 reference's shape of a parsed config, and its weights read
// from a checkpoint by the real tensor names (docs/checkpoints.md), F32/F16/BF16 widened exactly. Used by
// tests/reference/test_phi4flash_ref.cpp; meant for the GPU model's tests too.
#pragma once
#include <doctest/doctest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "io/safetensors.hpp"
#include "model/phi4flash_checkpoint.hpp"
#include "model/phi4flash_config.hpp"
#include "reference/diff_attn_ref.hpp"
#include "reference/phi4flash_ref.hpp"

namespace diffvk::test {

inline ref::SambaYShape phi4flash_shape(const Phi4FlashConfig& c) {
  ref::SambaYShape s;
  s.vocab = int(c.vocab_size);
  s.E = int(c.hidden_size);
  s.L = int(c.num_layers);
  s.n_heads = int(c.num_attention_heads);
  s.n_kv = int(c.num_key_value_heads);
  s.I = int(c.intermediate_size);
  s.d_inner = int(c.d_inner());
  s.d_state = int(c.mamba_d_state);
  s.d_conv = int(c.mamba_d_conv);
  s.dt_rank = int(c.mamba_dt_rank);
  s.window = int(c.sliding_window);
  s.eps = c.layer_norm_eps;
  return s;
}

// A phi4flash checkpoint (tied embeddings) read by its real tensor names through get(name, shape); every tensor must
// have its exact shape (doctest fails the test otherwise).
template <class Get>
ref::SambaYWeights phi4flash_weights_by(const ref::SambaYShape& s, Get&& get) {
  const int64_t E = s.E, C = s.d_inner, S = s.d_state, R = s.dt_rank, qw = s.q_width(), kw = s.kv_width();
  ref::SambaYWeights w;
  w.embed = get("model.embed_tokens.weight", {s.vocab, E});
  w.final_w = get("model.final_layernorm.weight", {E});
  w.final_b = get("model.final_layernorm.bias", {E});
  for (int i = 0; i < s.L; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".", a = p + "attn.", c = a + "inner_cross_attn.";
    ref::SambaYLayer l;
    l.ln1_w = get(p + "input_layernorm.weight", {E});
    l.ln1_b = get(p + "input_layernorm.bias", {E});
    l.ln2_w = get(p + "post_attention_layernorm.weight", {E});
    l.ln2_b = get(p + "post_attention_layernorm.bias", {E});
    l.fc1 = get(p + "mlp.fc1.weight", {2 * s.I, E});
    l.fc2 = get(p + "mlp.fc2.weight", {E, s.I});
    switch (s.kind(i)) {
      case ref::SambaYKind::mamba:
      case ref::SambaYKind::memory_mamba:
        l.in_proj = get(a + "in_proj.weight", {2 * C, E});
        l.conv_w = get(a + "conv1d.weight", {C, 1, s.d_conv});
        l.conv_b = get(a + "conv1d.bias", {C});
        l.x_proj = get(a + "x_proj.weight", {R + 2 * S, C});
        l.dt_w = get(a + "dt_proj.weight", {C, R});
        l.dt_b = get(a + "dt_proj.bias", {C});
        l.A_log = get(a + "A_log", {C, S});
        l.Dskip = get(a + "D", {C});
        l.out_proj = get(a + "out_proj.weight", {E, C});
        break;
      case ref::SambaYKind::gmu:
        l.in_proj = get(a + "in_proj.weight", {C, E});
        l.out_proj = get(a + "out_proj.weight", {E, C});
        break;
      default: {
        const int64_t rows = s.kind(i) == ref::SambaYKind::cross ? qw : qw + 2 * kw;
        l.wqkv = get(a + "Wqkv.weight", {rows, E});
        l.wqkv_b = get(a + "Wqkv.bias", {rows});
        l.wo = get(a + "out_proj.weight", {E, qw});
        l.wo_b = get(a + "out_proj.bias", {E});
        l.lq1 = get(c + "lambda_q1", {s.D()});
        l.lk1 = get(c + "lambda_k1", {s.D()});
        l.lq2 = get(c + "lambda_q2", {s.D()});
        l.lk2 = get(c + "lambda_k2", {s.D()});
        l.subln = get(c + "subln.weight", {2 * s.D()});
      }
    }
    w.layers.push_back(std::move(l));
  }
  return w;
}

// From one safetensors file.
inline ref::SambaYWeights phi4flash_weights(const ref::SambaYShape& s, const SafetensorsFile& f) {
  return phi4flash_weights_by(s, [&](const std::string& name, std::vector<int64_t> shape) {
    const std::vector<float> v = f.to_float(f.require(name, shape));
    return std::vector<double>(v.begin(), v.end());
  });
}

// From an opened checkpoint's row sources (a GGUF's too: Q8_0/Q4_0 blocks dequantized, as the device reads them).
inline ref::SambaYWeights phi4flash_weights(const ref::SambaYShape& s, Phi4FlashCheckpoint& ck) {
  return phi4flash_weights_by(s, [&](const std::string& name, std::vector<int64_t> shape) {
    for (const Phi4FlashTensor& t : phi4flash_tensors(ck.config))
      if (t.hf == name) {
        REQUIRE(t.hf_shape == shape);
        const std::vector<float> v = source_floats(t.source(ck));
        return std::vector<double>(v.begin(), v.end());
      }
    FAIL("no tensor " << name);
    return std::vector<double>{};
  });
}

// The reference's weights as the device holds them: float32 from a BF16 checkpoint is exact; for fp16 storage the
// storage-type tensors rounded to fp16 (the biases, A_log and D stay float32 on the device, and λ is computed on the
// host from the float vectors).
inline ref::SambaYWeights as_device_holds(ref::SambaYWeights w, bool fp16) {
  if (!fp16) return w;
  auto r = [](std::vector<double>& v) { v = ref::round_to_f16(v); };
  r(w.embed);
  r(w.final_w);
  r(w.final_b);
  for (ref::SambaYLayer& l : w.layers)
    for (std::vector<double>* v : {&l.ln1_w, &l.ln1_b, &l.ln2_w, &l.ln2_b, &l.fc1, &l.fc2, &l.wqkv, &l.wo, &l.subln,
                                   &l.in_proj, &l.conv_w, &l.conv_b, &l.x_proj, &l.dt_w, &l.out_proj})
      r(*v);  // not wqkv_b, wo_b, dt_b, A_log, Dskip (float32), nor λ's vectors (read on the host)
  return w;
}

}  // namespace diffvk::test
