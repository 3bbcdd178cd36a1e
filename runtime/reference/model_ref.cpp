#include "reference/model_ref.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace diffvk::ref {

std::vector<double> rms_norm(const std::vector<double>& x, int rows, int E, const std::vector<double>& g, double eps) {
  if (x.size() != static_cast<std::size_t>(rows) * E || g.size() != static_cast<std::size_t>(E))
    throw std::invalid_argument("rms_norm: size mismatch");
  std::vector<double> y(x.size());
  for (int r = 0; r < rows; ++r) {
    const double* xr = &x[static_cast<std::size_t>(r) * E];
    double ss = 0;
    for (int e = 0; e < E; ++e) ss += xr[e] * xr[e];
    const double inv = 1.0 / std::sqrt(ss / E + eps);
    for (int e = 0; e < E; ++e) y[static_cast<std::size_t>(r) * E + e] = xr[e] * inv * g[e];
  }
  return y;
}

std::vector<double> v2_layer_forward(const V2Shape& s, const V2Weights& w, double rope_theta,
                                     const std::vector<double>& x, int S, int pos0, KVCache* cache) {
  validate(s, w);
  if (S <= 0) throw std::invalid_argument("v2_layer_forward: S must be positive");
  if (cache == nullptr && pos0 != 0) throw std::invalid_argument("v2_layer_forward: pos0 != 0 needs a KV cache");
  if (cache != nullptr && cache->len != pos0)
    throw std::invalid_argument("v2_layer_forward: pos0 must equal cache->len");
  if (x.size() != static_cast<std::size_t>(S) * s.E) throw std::invalid_argument("v2_layer_forward: x size mismatch");
  const std::size_t kw = static_cast<std::size_t>(s.kv_width());
  KVCache local;
  KVCache& kv = cache != nullptr ? *cache : local;
  if (kv.k.size() != static_cast<std::size_t>(kv.len) * kw || kv.v.size() != kv.k.size())
    throw std::invalid_argument("v2_layer_forward: the cache's rows are not len x Hkv·D");

  std::vector<double> q = linear(x, S, s.E, w.wq, s.q_width());
  std::vector<double> k = linear(x, S, s.E, w.wk, s.kv_width());
  std::vector<double> v = linear(x, S, s.E, w.wv, s.kv_width());
  rope_rows(q, S, 2 * s.H, s.D, pos0, rope_theta);
  rope_rows(k, S, s.Hkv, s.D, pos0, rope_theta);
  if (kv.round_row)  // each KV head's D-wide row of K (roped) and of V, as it enters the cache
    for (std::vector<double>* t : {&k, &v})
      for (std::size_t at = 0; at < t->size(); at += static_cast<std::size_t>(s.D)) kv.round_row(t->data() + at, s.D);
  kv.k.insert(kv.k.end(), k.begin(), k.end());
  kv.v.insert(kv.v.end(), v.begin(), v.end());
  kv.len += S;

  const std::vector<double> z = linear(x, S, s.E, w.wl, s.H);  // λ logits; diff_v2_attention takes the sigmoid
  const std::vector<double> heads = diff_v2_attention(q, kv.k, kv.v, z, S, kv.len, s.H, s.Hkv, s.D, pos0);
  return linear(heads, S, s.o_width(), w.wo, s.E);
}

ModelRun model_forward(const ModelWeights& m, const std::vector<int>& tokens) {
  const int S = static_cast<int>(tokens.size()), E = m.width(), I = m.I, V = m.vocab;
  if (S == 0) throw std::invalid_argument("model_forward: no tokens");
  if (m.embed.size() != static_cast<std::size_t>(V) * E)
    throw std::invalid_argument("model_forward: embed is not V x E");
  ModelRun run;
  std::vector<double> x(static_cast<std::size_t>(S) * E);
  for (int r = 0; r < S; ++r) {
    if (tokens[r] < 0 || tokens[r] >= V) throw std::invalid_argument("model_forward: token outside the vocabulary");
    std::copy_n(&m.embed[static_cast<std::size_t>(tokens[r]) * E], E, &x[static_cast<std::size_t>(r) * E]);
  }
  auto track = [&] {
    for (double v : x) run.max_abs_residual = std::max(run.max_abs_residual, std::fabs(v));
  };
  track();
  for (std::size_t l = 0; l < m.layers.size(); ++l) {
    const ModelLayerWeights& L = m.layers[l];
    run.hidden.push_back(x);
    KVCache cache;
    cache.round_row = m.kv_round;
    const auto n_attn = rms_norm(x, S, E, L.attn_norm, m.eps);
    const auto a = m.v2 ? v2_layer_forward(m.v2_shape, L.attn_v2, m.rope_theta, n_attn, S, 0, &cache)
                        : layer_forward(m.shape, L.attn, static_cast<int>(l), m.rope_theta, n_attn, S, 0, &cache);
    for (std::size_t i = 0; i < x.size(); ++i) x[i] += a[i];
    track();
    const auto n = rms_norm(x, S, E, L.ffn_norm, m.eps);
    auto g = linear(n, S, E, L.gate, I);
    const auto u = linear(n, S, E, L.up, I);
    for (std::size_t i = 0; i < g.size(); ++i) g[i] = g[i] / (1.0 + std::exp(-g[i])) * u[i];
    const auto d = linear(g, S, I, L.down, E);
    for (std::size_t i = 0; i < x.size(); ++i) x[i] += d[i];
    track();
  }
  run.hidden.push_back(x);
  run.logits = linear(rms_norm(x, S, E, m.norm, m.eps), S, E, m.lm_head, V);
  return run;
}

AttnProbs attention_probs(const std::vector<double>& q, const std::vector<double>& k, int S, int T, int H, int Hkv,
                          int D, int q_pos0) {
  if (H <= 0 || Hkv <= 0 || H % Hkv != 0 || D <= 0 || S <= 0 || T <= 0 || q_pos0 < 0 || q_pos0 + S > T)
    throw std::invalid_argument("attention_probs: bad shape");
  const std::size_t qw = static_cast<std::size_t>(2) * H * D, kw = static_cast<std::size_t>(2) * Hkv * D;
  if (q.size() != qw * S || k.size() != kw * T) throw std::invalid_argument("attention_probs: size mismatch");
  AttnProbs out;
  out.p1.assign(static_cast<std::size_t>(H) * S * T, 0.0);
  out.p2 = out.p1;
  const double scale = 1.0 / std::sqrt(static_cast<double>(D));
  for (int h = 0; h < H; ++h) {
    const int g = h / (H / Hkv);
    for (int i = 0; i < S; ++i) {
      const int last = q_pos0 + i;  // keys 0 … last are visible
      for (int half = 0; half < 2; ++half) {
        std::vector<double>& p = half == 0 ? out.p1 : out.p2;
        double* row = &p[(static_cast<std::size_t>(h) * S + i) * T];
        const double* qi = &q[i * qw + static_cast<std::size_t>(2 * h + half) * D];
        double mx = -INFINITY;
        for (int j = 0; j <= last; ++j) {
          const double* kj = &k[j * kw + static_cast<std::size_t>(2 * g + half) * D];
          double s = 0;
          for (int d = 0; d < D; ++d) s += qi[d] * kj[d];
          row[j] = s * scale;
          mx = std::max(mx, row[j]);
        }
        double sum = 0;
        for (int j = 0; j <= last; ++j) sum += row[j] = std::exp(row[j] - mx);
        for (int j = 0; j <= last; ++j) row[j] /= sum;
      }
    }
  }
  return out;
}

}  // namespace diffvk::ref
