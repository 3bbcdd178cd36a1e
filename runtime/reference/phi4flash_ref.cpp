// diffvk — float64 reference of the whole Phi-4-mini-flash (SambaY) model (phi4flash_ref.hpp).
#include "reference/phi4flash_ref.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <stdexcept>
#include <string>

#include "reference/diff_attn_ref.hpp"
#include "reference/ssm_ref.hpp"

namespace diffvk::ref {

namespace {

[[noreturn]] void fail(const std::string& what) { throw std::invalid_argument("ref::sambay: " + what); }

std::size_t sz(long long n) { return static_cast<std::size_t>(n); }

double dot(const std::vector<double>& a, const std::vector<double>& b) {
  double s = 0;
  for (std::size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

// Columns [c0, c0 + n) of a rows x width matrix.
std::vector<double> cols(const std::vector<double>& m, int rows, int width, int c0, int n) {
  std::vector<double> out(sz(rows) * n);
  for (int r = 0; r < rows; ++r) std::copy_n(m.begin() + sz(r) * width + c0, n, out.begin() + sz(r) * n);
  return out;
}

// The listed rows of a matrix of rows of `width`.
std::vector<double> pick_rows(const std::vector<double>& m, int width, const std::vector<int>& rows) {
  std::vector<double> out(rows.size() * sz(width));
  for (std::size_t r = 0; r < rows.size(); ++r)
    std::copy_n(m.begin() + sz(rows[r]) * width, width, out.begin() + r * width);
  return out;
}

// y = x·Wᵀ + b (b may be empty).
std::vector<double> affine(const std::vector<double>& x, int rows, int in, const std::vector<double>& w, int out,
                           const std::vector<double>& b) {
  std::vector<double> y = linear(x, rows, in, w, out);
  if (!b.empty())
    for (int r = 0; r < rows; ++r)
      for (int o = 0; o < out; ++o) y[sz(r) * out + o] += b[o];
  return y;
}

// Rounds an activation to IEEE half where an fp16 device stores one (ActivationStorage::fp16); else keeps it.
// act_rows: the rows of the MLP's SwiGLU output stored (the others are fused into fc2); empty: every row.
struct Store {
  bool f16 = false;
  std::vector<bool> act_rows;
  std::vector<double> operator()(std::vector<double> v) const { return f16 ? round_to_f16(v) : v; }
  std::vector<double> act(std::vector<double> a, int width) const {
    if (!f16) return a;
    for (std::size_t i = 0; i < a.size(); ++i)
      if (act_rows.empty() || act_rows[i / sz(width)]) a[i] = round_to_f16(a[i]);
    return a;
  }
};

void add_into(std::vector<double>& x, const std::vector<double>& y) {
  for (std::size_t i = 0; i < x.size(); ++i) x[i] += y[i];
}

// x += fc2(up · silu(gate)), [gate | up] = fc1(LN2(x)).
void mlp_block(const SambaYShape& s, const SambaYLayer& w, std::vector<double>& x, int rows, const Store& st) {
  const std::vector<double> h = st(layer_norm(x, rows, s.E, w.ln2_w, w.ln2_b, s.eps));
  const std::vector<double> gu = st(linear(h, rows, s.E, w.fc1, 2 * s.I));
  std::vector<double> a(sz(rows) * s.I);
  for (int r = 0; r < rows; ++r)
    for (int i = 0; i < s.I; ++i) a[sz(r) * s.I + i] = gu[sz(r) * 2 * s.I + s.I + i] * silu(gu[sz(r) * 2 * s.I + i]);
  add_into(x, linear(st.act(std::move(a), s.I), rows, s.I, w.fc2, s.E));
}

// The Mamba-1 mixer on `rows` rows of h, from and into the given conv and scan states. `memory` (may be null):
// the pre-gate scan output, rows x d_inner.
std::vector<double> mamba_mixer(const SambaYShape& s, const SambaYLayer& w, const std::vector<double>& h, int rows,
                                std::vector<double>& conv_state, std::vector<double>& scan_state,
                                std::vector<double>* memory, const Store& st) {
  const int C = s.d_inner, S = s.d_state, R = s.dt_rank;
  const std::vector<double> xz = st(linear(h, rows, s.E, w.in_proj, 2 * C));
  const std::vector<double> x = cols(xz, rows, 2 * C, 0, C), z = cols(xz, rows, 2 * C, C, C);
  const std::vector<double> u = st(causal_conv1d(x, rows, C, w.conv_w, s.d_conv, w.conv_b, conv_state, true));
  const std::vector<double> dbl = st(linear(u, rows, C, w.x_proj, R + 2 * S));
  const std::vector<double> delta = st(affine(cols(dbl, rows, R + 2 * S, 0, R), rows, R, w.dt_w, C, w.dt_b));
  const std::vector<double> B = cols(dbl, rows, R + 2 * S, R, S), Cm = cols(dbl, rows, R + 2 * S, R + S, S);
  ScanResult y = selective_scan(u, delta, w.A_log, B, Cm, w.Dskip, &z, rows, C, S, scan_state);
  if (memory) *memory = st(std::move(y.y_pre));
  return linear(st(y.y), rows, C, w.out_proj, s.E);
}

// The GMU mixer: out_proj(silu(in_proj(h)) · m), m rows x d_inner of the same positions.
std::vector<double> gmu_mixer(const SambaYShape& s, const SambaYLayer& w, const std::vector<double>& h, int rows,
                              const std::vector<double>& m, const Store& st) {
  const std::vector<double> g = st(linear(h, rows, s.E, w.in_proj, s.d_inner));
  return linear(st(gmu_gate(g, m)), rows, s.d_inner, w.out_proj, s.E);
}

// Differential attention of queries q (rows x q_width) at absolute positions qpos over keys/values k, v
// (n_keys x kv_width, row 0 at position key_pos0): query p sees the keys at positions max(0, p - window + 1) .. p
// (window 0: 0 .. p), which must all be held. Then the headwise norm and out_proj (+ bias). Returns rows x E.
std::vector<double> attention_mixer(const SambaYShape& s, const SambaYLayer& w, int layer, const std::vector<double>& q,
                                    const std::vector<int>& qpos, const double* k, const double* v, int n_keys,
                                    int key_pos0, int window, const Store& st) {
  const int D = s.D(), H = s.H(), qw = s.q_width(), kw = s.kv_width(), rep = s.H() / s.Hkv();
  const double li = lambda_init(layer);
  const double lambda = std::exp(dot(w.lq1, w.lk1)) - std::exp(dot(w.lq2, w.lk2)) + li;
  const int rows = static_cast<int>(qpos.size());
  std::vector<double> o(sz(rows) * qw);
  for (int r = 0; r < rows; ++r) {
    const int p = qpos[r];
    const int lo = window > 0 ? std::max(0, p - window + 1) : 0;
    if (lo < key_pos0 || p - key_pos0 >= n_keys) fail("attention: keys of position " + std::to_string(p) + " missing");
    for (int h = 0; h < H; ++h) {
      const std::size_t g2d = sz(h / rep) * 2 * D, first = sz(lo - key_pos0) * kw;
      double* oh = o.data() + sz(r) * qw + sz(h) * 2 * D;
      diff_attention_row(q.data() + sz(r) * qw + sz(h) * 2 * D, k + first + g2d, sz(kw), v + first + g2d, sz(kw),
                         p - lo + 1, D, lambda, oh);
      head_rmsnorm_row(oh, D, w.subln.data(), 1.0 - li, 1e-5);
    }
  }
  return affine(st(o), rows, qw, w.wo, s.E, w.wo_b);
}

std::vector<double> embed_rows(const SambaYShape& s, const SambaYWeights& w, const std::vector<int>& tokens) {
  std::vector<double> x(tokens.size() * sz(s.E));
  for (std::size_t t = 0; t < tokens.size(); ++t) {
    if (tokens[t] < 0 || tokens[t] >= s.vocab) fail("token id " + std::to_string(tokens[t]) + " out of range");
    std::copy_n(w.embed.begin() + sz(tokens[t]) * s.E, s.E, x.begin() + t * s.E);
  }
  return x;
}

std::vector<double> logits_of(const SambaYShape& s, const SambaYWeights& w, const std::vector<double>& x, int rows,
                              const Store& st) {
  return linear(st(layer_norm(x, rows, s.E, w.final_w, w.final_b, s.eps)), rows, s.E, w.embed, s.vocab);
}

}  // namespace

SambaYKind SambaYShape::kind(int i) const {
  const int half = L / 2;
  if (i % 2 == 0) return i < half ? SambaYKind::mamba : i == half ? SambaYKind::memory_mamba : SambaYKind::gmu;
  return i < half ? SambaYKind::swa : i == half + 1 ? SambaYKind::full : SambaYKind::cross;
}

void validate(const SambaYShape& s) {
  if (s.vocab <= 0 || s.E <= 0 || s.L <= 0 || s.n_heads <= 0 || s.n_kv <= 0 || s.I <= 0 || s.d_inner <= 0 ||
      s.d_state <= 0 || s.d_conv < 2 || s.dt_rank <= 0 || s.window <= 0 || !(s.eps > 0))
    fail("every size must be positive (d_conv >= 2)");
  if (s.L % 4) fail("L must be a multiple of 4");
  if (s.n_heads % 2 || s.n_kv % 2 || s.n_heads % s.n_kv) fail("head counts must be even and n_kv divide n_heads");
  if (s.E % s.n_heads) fail("E must be a multiple of n_heads");
}

void validate(const SambaYShape& s, const SambaYWeights& w) {
  validate(s);
  auto need = [](const std::vector<double>& v, long long n, const std::string& what) {
    if (v.size() != sz(n)) fail(what + " has " + std::to_string(v.size()) + " values, not " + std::to_string(n));
  };
  need(w.embed, 1LL * s.vocab * s.E, "embed");
  need(w.final_w, s.E, "final_layernorm.weight");
  need(w.final_b, s.E, "final_layernorm.bias");
  if (w.layers.size() != sz(s.L)) fail("weights hold " + std::to_string(w.layers.size()) + " layers");
  const long long E = s.E, C = s.d_inner, S = s.d_state, qw = s.q_width(), kw = s.kv_width(), D = s.D();
  for (int i = 0; i < s.L; ++i) {
    const SambaYLayer& l = w.layers[i];
    const std::string p = "layer " + std::to_string(i) + " ";
    need(l.ln1_w, E, p + "input_layernorm.weight");
    need(l.ln1_b, E, p + "input_layernorm.bias");
    need(l.ln2_w, E, p + "post_attention_layernorm.weight");
    need(l.ln2_b, E, p + "post_attention_layernorm.bias");
    need(l.fc1, 2LL * s.I * E, p + "mlp.fc1");
    need(l.fc2, E * s.I, p + "mlp.fc2");
    const SambaYKind k = s.kind(i);
    const bool attn = k == SambaYKind::swa || k == SambaYKind::full || k == SambaYKind::cross;
    const bool mamba = k == SambaYKind::mamba || k == SambaYKind::memory_mamba;
    const long long rows = k == SambaYKind::cross ? qw : qw + 2 * kw;
    need(l.wqkv, attn ? rows * E : 0, p + "Wqkv.weight");
    need(l.wqkv_b, attn ? rows : 0, p + "Wqkv.bias");
    need(l.wo, attn ? E * qw : 0, p + "attn.out_proj.weight (attention)");
    need(l.wo_b, attn ? E : 0, p + "attn.out_proj.bias");
    for (const auto* v : {&l.lq1, &l.lk1, &l.lq2, &l.lk2}) need(*v, attn ? D : 0, p + "lambda_*");
    need(l.subln, attn ? 2 * D : 0, p + "subln.weight");
    need(l.in_proj, mamba ? 2 * C * E : k == SambaYKind::gmu ? C * E : 0, p + "attn.in_proj.weight");
    need(l.out_proj, attn ? 0 : E * C, p + "attn.out_proj.weight (mamba, gmu)");
    need(l.conv_w, mamba ? C * s.d_conv : 0, p + "conv1d.weight");
    need(l.conv_b, mamba ? C : 0, p + "conv1d.bias");
    need(l.x_proj, mamba ? (s.dt_rank + 2 * S) * C : 0, p + "x_proj.weight");
    need(l.dt_w, mamba ? C * s.dt_rank : 0, p + "dt_proj.weight");
    need(l.dt_b, mamba ? C : 0, p + "dt_proj.bias");
    need(l.A_log, mamba ? C * S : 0, p + "A_log");
    need(l.Dskip, mamba ? C : 0, p + "D");
  }
}

SambaYWeights sambay_random_weights(const SambaYShape& s, std::uint64_t seed) {
  validate(s);
  std::uint64_t next = seed;
  auto rnd = [&](long long n, double std) { return random_normal(sz(n), next++, std); };
  auto around = [&](long long n, double c, double std) {
    std::vector<double> v = rnd(n, std);
    for (double& x : v) x += c;
    return v;
  };
  const int E = s.E, C = s.d_inner, S = s.d_state, R = s.dt_rank, qw = s.q_width(), kw = s.kv_width(), D = s.D();
  SambaYWeights w;
  w.embed = rnd(1LL * s.vocab * E, 1.0);
  w.final_w = around(E, 1.0, 0.1);
  w.final_b = rnd(E, 0.1);
  for (int i = 0; i < s.L; ++i) {
    SambaYLayer l;
    l.ln1_w = around(E, 1.0, 0.1);
    l.ln1_b = rnd(E, 0.1);
    l.ln2_w = around(E, 1.0, 0.1);
    l.ln2_b = rnd(E, 0.1);
    l.fc1 = rnd(2LL * s.I * E, 1 / std::sqrt(double(E)));
    l.fc2 = rnd(1LL * E * s.I, 1 / std::sqrt(double(s.I)));
    const SambaYKind k = s.kind(i);
    if (k == SambaYKind::mamba || k == SambaYKind::memory_mamba) {
      l.in_proj = rnd(2LL * C * E, 1 / std::sqrt(double(E)));
      l.conv_w = rnd(1LL * C * s.d_conv, 0.5);
      l.conv_b = rnd(C, 0.1);
      l.x_proj = rnd(1LL * (R + 2 * S) * C, 1 / std::sqrt(double(C)));
      l.dt_w = rnd(1LL * C * R, 1 / std::sqrt(double(R)));
      l.dt_b.resize(C);  // softplus⁻¹ of dt spread log-uniformly over about [1e-3, 0.5]
      for (int c = 0; c < C; ++c) {
        const double dt = std::exp(std::log(1e-3) + (std::log(0.5) - std::log(1e-3)) * (c + 0.5) / C);
        l.dt_b[c] = dt + std::log(-std::expm1(-dt));
      }
      l.A_log = rnd(1LL * C * S, 0.3);
      for (int c = 0; c < C; ++c)
        for (int j = 0; j < S; ++j) l.A_log[sz(c) * S + j] += std::log(j + 1.0);
      l.Dskip = around(C, 1.0, 0.3);
      l.out_proj = rnd(1LL * E * C, 1 / std::sqrt(double(C)));
    } else if (k == SambaYKind::gmu) {
      l.in_proj = rnd(1LL * C * E, 1 / std::sqrt(double(E)));
      l.out_proj = rnd(1LL * E * C, 1 / std::sqrt(double(C)));
    } else {
      const int rows = k == SambaYKind::cross ? qw : qw + 2 * kw;
      l.wqkv = rnd(1LL * rows * E, 2 / std::sqrt(double(E)));
      l.wqkv_b = rnd(rows, 0.1);
      l.wo = rnd(1LL * E * qw, 1 / std::sqrt(double(qw)));
      l.wo_b = rnd(E, 0.1);
      l.lq1 = rnd(D, 0.3);
      l.lk1 = rnd(D, 0.3);
      l.lq2 = rnd(D, 0.3);
      l.lk2 = rnd(D, 0.3);
      l.subln = around(2 * D, 1.0, 0.1);
    }
    w.layers.push_back(std::move(l));
  }
  return w;
}

namespace {
template <class F>
SambaYWeights map_weights(SambaYWeights w, F f) {
  for (auto* v : {&w.embed, &w.final_w, &w.final_b}) *v = f(*v);
  for (SambaYLayer& l : w.layers)
    for (auto* v : {&l.ln1_w,  &l.ln1_b,  &l.ln2_w,  &l.ln2_b, &l.fc1,  &l.fc2,   &l.wqkv,  &l.wqkv_b,
                    &l.wo,     &l.wo_b,   &l.lq1,    &l.lk1,   &l.lq2,  &l.lk2,   &l.subln, &l.in_proj,
                    &l.conv_w, &l.conv_b, &l.x_proj, &l.dt_w,  &l.dt_b, &l.A_log, &l.Dskip, &l.out_proj})
      *v = f(*v);
  return w;
}
}  // namespace

SambaYWeights round_to_f32(const SambaYWeights& w) {
  return map_weights(w, [](const std::vector<double>& v) { return ref::round_to_f32(v); });
}
SambaYWeights round_to_f16(const SambaYWeights& w) {
  return map_weights(w, [](const std::vector<double>& v) { return ref::round_to_f16(v); });
}

std::vector<double> sambay_forward_full(const SambaYShape& s, const SambaYWeights& w, const std::vector<int>& tokens,
                                        const ActivationStorage& storage) {
  validate(s, w);
  const int T = static_cast<int>(tokens.size()), qw = s.q_width(), kw = s.kv_width();
  if (!storage.fused_from.empty() && storage.fused_from.size() != sz(T)) fail("fused_from must have one per token");
  Store st{storage.fp16, {}};
  if (T == 0) return {};
  std::vector<int> pos(sz(T));
  for (int t = 0; t < T; ++t) pos[t] = t;
  std::vector<double> x = embed_rows(s, w, tokens), memory, shared_k, shared_v;
  for (int i = 0; i < s.L; ++i) {
    const SambaYLayer& l = w.layers[i];
    const std::vector<double> h = st(layer_norm(x, T, s.E, l.ln1_w, l.ln1_b, s.eps));
    const SambaYKind k = s.kind(i);
    std::vector<double> out;
    if (k == SambaYKind::mamba || k == SambaYKind::memory_mamba) {
      std::vector<double> conv(sz(s.d_conv - 1) * s.d_inner), scan(sz(s.d_inner) * s.d_state);
      out = mamba_mixer(s, l, h, T, conv, scan, k == SambaYKind::memory_mamba ? &memory : nullptr, st);
    } else if (k == SambaYKind::gmu) {
      out = gmu_mixer(s, l, h, T, memory, st);
    } else if (k == SambaYKind::cross) {
      const std::vector<double> q = st(affine(h, T, s.E, l.wqkv, qw, l.wqkv_b));
      out = attention_mixer(s, l, i, q, pos, shared_k.data(), shared_v.data(), T, 0, 0, st);
    } else {
      const std::vector<double> qkv = st(affine(h, T, s.E, l.wqkv, qw + 2 * kw, l.wqkv_b));
      const std::vector<double> q = cols(qkv, T, qw + 2 * kw, 0, qw);
      std::vector<double> kk = cols(qkv, T, qw + 2 * kw, qw, kw), vv = cols(qkv, T, qw + 2 * kw, qw + kw, kw);
      if (storage.kv_round)
        for (int t = 0; t < T; ++t) storage.kv_round(&kk[sz(t) * kw], kw), storage.kv_round(&vv[sz(t) * kw], kw);
      out = attention_mixer(s, l, i, q, pos, kk.data(), vv.data(), T, 0, k == SambaYKind::swa ? s.window : 0, st);
      if (k == SambaYKind::full) shared_k = std::move(kk), shared_v = std::move(vv);
    }
    add_into(x, out);
    if (!storage.fused_from.empty()) {
      st.act_rows.assign(sz(T), true);
      for (int t = 0; t < T; ++t) st.act_rows[t] = i < storage.fused_from[t];
    }
    mlp_block(s, l, x, T, st);
  }
  return logits_of(s, w, x, T, st);
}

SambaYState sambay_new_state(const SambaYShape& s) {
  validate(s);
  SambaYState st;
  st.conv.resize(sz(s.L));
  st.scan.resize(sz(s.L));
  st.ring_k.resize(sz(s.L));
  st.ring_v.resize(sz(s.L));
  for (int i = 0; i < s.L; ++i) {
    const SambaYKind k = s.kind(i);
    if (k == SambaYKind::mamba || k == SambaYKind::memory_mamba) {
      st.conv[i].assign(sz(s.d_conv - 1) * s.d_inner, 0.0);
      st.scan[i].assign(sz(s.d_inner) * s.d_state, 0.0);
    } else if (k == SambaYKind::swa) {
      st.ring_k[i].assign(sz(s.window) * s.kv_width(), 0.0);
      st.ring_v[i].assign(sz(s.window) * s.kv_width(), 0.0);
    }
  }
  return st;
}

std::vector<double> sambay_forward(const SambaYShape& s, const SambaYWeights& w, SambaYState& st,
                                   const std::vector<int>& tokens, const std::vector<int>* logit_rows) {
  validate(s, w);
  const int T = static_cast<int>(tokens.size()), qw = s.q_width(), kw = s.kv_width(), W = s.window, p0 = st.pos;
  if (st.conv.size() != sz(s.L) || st.shared_k.size() != sz(p0) * kw) fail("state does not fit the shape");
  std::vector<int> asked;
  if (logit_rows) {
    asked = *logit_rows;
    for (std::size_t r = 0; r < asked.size(); ++r)
      if (asked[r] < 0 || asked[r] >= T || (r && asked[r] <= asked[r - 1]))
        fail("logit_rows must be ascending, distinct row indices");
  } else {
    for (int t = 0; t < T; ++t) asked.push_back(t);
  }
  if (T == 0) return {};
  std::vector<int> pos(sz(T));
  for (int t = 0; t < T; ++t) pos[t] = p0 + t;
  std::vector<double> x = embed_rows(s, w, tokens), memory;
  const Store exact;
  int rows = T;  // rows of x: every row up to layer L/2+1's K/V, then only the asked ones
  for (int i = 0; i < s.L; ++i) {
    const SambaYLayer& l = w.layers[i];
    std::vector<double> h = layer_norm(x, rows, s.E, l.ln1_w, l.ln1_b, s.eps);
    const SambaYKind k = s.kind(i);
    std::vector<double> out;
    if (k == SambaYKind::mamba || k == SambaYKind::memory_mamba) {
      out =
          mamba_mixer(s, l, h, rows, st.conv[i], st.scan[i], k == SambaYKind::memory_mamba ? &memory : nullptr, exact);
    } else if (k == SambaYKind::gmu) {
      out = gmu_mixer(s, l, h, rows, memory, exact);
    } else if (k == SambaYKind::cross) {
      const std::vector<double> q = affine(h, rows, s.E, l.wqkv, qw, l.wqkv_b);
      out = attention_mixer(s, l, i, q, pos, st.shared_k.data(), st.shared_v.data(), st.pos, 0, 0, exact);
    } else {
      const std::vector<double> qkv = affine(h, rows, s.E, l.wqkv, qw + 2 * kw, l.wqkv_b);
      std::vector<double> q = cols(qkv, rows, qw + 2 * kw, 0, qw);
      const std::vector<double> kk = cols(qkv, rows, qw + 2 * kw, qw, kw);
      const std::vector<double> vv = cols(qkv, rows, qw + 2 * kw, qw + kw, kw);
      if (k == SambaYKind::swa) {
        // The ring holds positions max(0, p0 - W) .. p0 - 1 at slots position % W: lay them out oldest first,
        // then this chunk's rows, and write the chunk back into the ring.
        const int held = std::min(p0, W), first = p0 - held;
        std::vector<double> keys(sz(held + T) * kw), vals(sz(held + T) * kw);
        for (int j = 0; j < held; ++j) {
          const std::size_t slot = sz((first + j) % W) * kw;
          std::copy_n(st.ring_k[i].begin() + slot, kw, keys.begin() + sz(j) * kw);
          std::copy_n(st.ring_v[i].begin() + slot, kw, vals.begin() + sz(j) * kw);
        }
        std::copy(kk.begin(), kk.end(), keys.begin() + sz(held) * kw);
        std::copy(vv.begin(), vv.end(), vals.begin() + sz(held) * kw);
        out = attention_mixer(s, l, i, q, pos, keys.data(), vals.data(), held + T, first, W, exact);
        for (int t = std::max(0, T - W); t < T; ++t) {
          const std::size_t slot = sz((p0 + t) % W) * kw;
          std::copy_n(kk.begin() + sz(t) * kw, kw, st.ring_k[i].begin() + slot);
          std::copy_n(vv.begin() + sz(t) * kw, kw, st.ring_v[i].begin() + slot);
        }
      } else {  // full: every row's K/V into the shared cache, then the attention of the asked rows only
        st.shared_k.insert(st.shared_k.end(), kk.begin(), kk.end());
        st.shared_v.insert(st.shared_v.end(), vv.begin(), vv.end());
        st.pos = p0 + T;
        if (sz(rows) != asked.size()) {  // YOCO: the cross-decoder runs for the asked rows alone
          x = pick_rows(x, s.E, asked);
          q = pick_rows(q, qw, asked);
          memory = pick_rows(memory, s.d_inner, asked);
          std::vector<int> p;
          for (int r : asked) p.push_back(p0 + r);
          pos = p;
          rows = static_cast<int>(asked.size());
          if (rows == 0) return {};
        }
        out = attention_mixer(s, l, i, q, pos, st.shared_k.data(), st.shared_v.data(), st.pos, 0, 0, exact);
      }
    }
    add_into(x, out);
    mlp_block(s, l, x, rows, exact);
  }
  return logits_of(s, w, x, rows, exact);
}

}  // namespace diffvk::ref
