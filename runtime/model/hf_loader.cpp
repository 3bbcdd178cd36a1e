// Hugging Face DiffLlama checkpoints as row sources of the runtime's weights (model/checkpoint.hpp).
//
// Layout conversion (a row permutation applied while streaming; the kernels are unchanged):
//  - q_proj has 2H sub-heads of D rows; Hugging Face's head h pairs sub-heads h (Q1) and h + H (Q2)
//    (`chunk`), the runtime pairs 2h and 2h + 1: our sub-head 2h = theirs h, 2h + 1 = theirs h + H.
//  - NeoX RoPE rotates the pairs (i, i + D/2) of a sub-head, the runtime's kernel the pairs (2i, 2i + 1)
//    with the same frequency i. Within every q and k sub-head our row 2i = theirs i and 2i + 1 = theirs
//    i + D/2: the interleaved rotation of the permuted vector is the permuted NeoX rotation, and q·k is
//    unchanged by a permutation applied to both.
//  - Keys and values: sub-head j of q reads kv sub-head j / n_rep (n_rep = num_attention_heads /
//    num_key_value_heads), so head h uses kv sub-heads a = h / n_rep (K1, first half of V) and
//    b = (h + H) / n_rep (K2, second half of V). Group g of the runtime (heads g·H/Hkv ...) gets
//    K rows [a | b] (each permuted as above) and V rows [a | b] (not rotated: no permutation).
//  - The sub-norm has no weight: a row of ones; its eps is rms_norm_eps (ModelConfig::subln_eps).
#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include "io/bounded_json.hpp"
#include "model/checkpoint.hpp"
#include "model/shard_index.hpp"
#include "platform.hpp"

namespace diffvk {

using Located = LocatedTensor;

Checkpoint open_hf_checkpoint(const std::string& dir, ModelConfig config) {
  Checkpoint ck;
  ck.config = std::move(config);
  const ModelConfig& c = ck.config;
  std::map<std::string, Located> where;
  ck.files = open_safetensors_files(dir, where);
  const int64_t E = c.hidden_size, D = c.head_dim(), H = c.num_heads, Hkv = c.num_kv_heads, I = c.intermediate_size,
                V = c.vocab_size;
  // The checkpoint's kv sub-heads, from k_proj (the config may give them as either count).
  const auto k0 = where.find("model.layers.0.self_attn.k_proj.weight");
  if (k0 == where.end())
    throw Error(Status::format_error, dir + ": missing tensor 'model.layers.0.self_attn.k_proj.weight'");
  const int64_t kv = k0->second.info->shape.empty() ? 0 : k0->second.info->shape[0] / D;
  if (kv <= 0 || (2 * H) % kv || (kv % 2 == 0 ? kv / 2 : H) != Hkv)
    throw Error(Status::format_error,
                k0->second.file->name() + ": k_proj has " + std::to_string(kv) +
                    " heads of head_dim rows, which does not match num_key_value_heads in config.json");
  const int64_t n_rep = 2 * H / kv;

  std::set<std::string> used;
  auto get = [&](const std::string& name, const std::vector<int64_t>& shape) -> Located {
    auto it = where.find(name);
    if (it == where.end()) throw Error(Status::format_error, dir + ": missing tensor '" + name + "'");
    it->second.file->require(name, shape);
    used.insert(name);
    return it->second;
  };
  auto whole = [&](const std::string& as, const std::string& name, const std::vector<int64_t>& shape,
                   bool finite = false) {
    const Located t = get(name, shape);
    WeightSource w{as, shape.size() > 1 ? uint64_t(shape[1]) : 1, {}, finite};
    w.add(*t.file, *t.info);
    return w;
  };
  // Rows of sub-head j of a projection, NeoX halves interleaved (rotated) or as they are.
  auto subhead = [&](WeightSource& w, const Located& t, int64_t j, bool rotated) {
    for (int64_t i = 0; i < D; ++i) {
      const int64_t r = rotated ? (i % 2 ? D / 2 + i / 2 : i / 2) : i;
      w.add(*t.file, *t.info, uint64_t(j * D + r), 1);
    }
  };

  ck.embed = whole("embed_tokens", "model.embed_tokens.weight", {V, E});
  ck.norm = whole("norm", "model.norm.weight", {E}, true);
  if (!c.tie_word_embeddings)
    ck.lm_head = whole("lm_head", "lm_head.weight", {V, E});
  else if (where.count("lm_head.weight"))
    used.insert("lm_head.weight");  // a tied copy some exporters keep: unused
  for (int64_t l = 0; l < int64_t(c.num_layers); ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".", a = p + "self_attn.",
                      our = "layers." + std::to_string(l) + ".";
    CheckpointLayer L;
    L.attn_norm = whole(our + "attn_norm", p + "input_layernorm.weight", {E}, true);
    L.ffn_norm = whole(our + "ffn_norm", p + "post_attention_layernorm.weight", {E}, true);
    const Located q = get(a + "q_proj.weight", {2 * H * D, E}), k = get(a + "k_proj.weight", {kv * D, E}),
                  v = get(a + "v_proj.weight", {kv * D, E});
    L.wqkv = WeightSource{our + "attn.qkv (from q_proj, k_proj, v_proj)", uint64_t(E), {}, false};
    for (int64_t h = 0; h < H; ++h) {
      subhead(L.wqkv, q, h, true);
      subhead(L.wqkv, q, h + H, true);
    }
    for (int pass = 0; pass < 2; ++pass)  // all K groups, then all V groups
      for (int64_t g = 0; g < Hkv; ++g) {
        const int64_t h0 = g * (H / Hkv), ka = h0 / n_rep, kb = (h0 + H) / n_rep;
        subhead(L.wqkv, pass ? v : k, ka, pass == 0);
        subhead(L.wqkv, pass ? v : k, kb, pass == 0);
      }
    L.wo = whole(our + "attn.out", a + "o_proj.weight", {E, 2 * H * D});
    L.subln = WeightSource{our + "attn.subln (ones: DiffLlama's sub-norm has no weight)", 1, {}, false};
    L.subln.add_ones(uint64_t(2 * D));
    L.wgu = whole(our + "ffn.gate_up", p + "mlp.gate_proj.weight", {I, E});
    const Located up = get(p + "mlp.up_proj.weight", {I, E});
    L.wgu.add(*up.file, *up.info);
    L.wdown = whole(our + "ffn.down", p + "mlp.down_proj.weight", {E, I});
    int i = 0;
    for (const char* n : {"lambda_q1", "lambda_k1", "lambda_q2", "lambda_k2"}) {
      const Located t = get(a + n, {D});
      L.lambda[i] = t.file->to_float(*t.info);
      for (float x : L.lambda[i])
        if (!std::isfinite(x))
          throw Error(Status::format_error, t.file->name() + ": non-finite value in '" + a + n + "'");
      ++i;
    }
    ck.layers.push_back(std::move(L));
  }
  for (const auto& [name, t] : where) {
    // Old exports carry RoPE buffers; the runtime computes its own table.
    const std::string rope_buffer = ".self_attn.rotary_emb.inv_freq";
    if (name.size() > rope_buffer.size() &&
        name.compare(name.size() - rope_buffer.size(), rope_buffer.size(), rope_buffer) == 0)
      continue;
    if (!used.count(name)) throw Error(Status::format_error, t.file->name() + ": unexpected tensor '" + name + "'");
  }
  return ck;
}

}  // namespace diffvk
