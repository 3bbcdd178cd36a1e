// diffvk — float64 CPU reference of one DIFF V2 attention layer (see the header and docs/maths.md).
#include "reference/diff_v2_ref.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <stdexcept>
#include <string>

#include "reference/diff_attn_ref.hpp"

namespace diffvk::ref {

namespace {

[[noreturn]] void fail(const std::string& what) { throw std::invalid_argument("diffvk::ref: DIFF V2: " + what); }

void check_size(const std::vector<double>& v, std::size_t expected, const char* name) {
  if (v.size() != expected) {
    fail(std::string(name) + " has " + std::to_string(v.size()) + " values, expected " + std::to_string(expected));
  }
}

std::string shape_text(int E, int H, int Hkv, int D) {
  return "(E=" + std::to_string(E) + ", H=" + std::to_string(H) + ", Hkv=" + std::to_string(Hkv) +
         ", D=" + std::to_string(D) + ")";
}

// Projections and RoPE: q (S x 2H·D) and k (S x Hkv·D) roped at positions pos0.., v not rotated.
struct Projected {
  std::vector<double> q, k, v;
};

Projected project(const V2Shape& s, const V2Weights& w, const std::vector<double>& x, int S, int pos0, double theta) {
  validate(s, w);
  if (S <= 0 || pos0 < 0) fail("need S > 0 and pos0 >= 0");
  check_size(x, static_cast<std::size_t>(S) * s.E, "x");
  Projected p;
  p.q = linear(x, S, s.E, w.wq, s.q_width());
  p.k = linear(x, S, s.E, w.wk, s.kv_width());
  p.v = linear(x, S, s.E, w.wv, s.kv_width());
  rope_rows(p.q, S, 2 * s.H, s.D, pos0, theta);
  rope_rows(p.k, S, s.Hkv, s.D, pos0, theta);
  return p;
}

// Row i of the causal softmax map of query head j: p[t] = softmax_t(q_j,i · k_g,t / √D) for t <= i,
// with g = j / group. p has i + 1 entries.
void softmax_row(const V2Shape& s, const Projected& t, int j, int i, std::vector<double>& p) {
  const int D = s.D;
  const int g = j / s.group();
  const double scale = 1.0 / std::sqrt(static_cast<double>(D));
  const double* q = t.q.data() + static_cast<std::size_t>(i) * s.q_width() + static_cast<std::size_t>(j) * D;
  p.assign(static_cast<std::size_t>(i) + 1, 0.0);
  double m = -HUGE_VAL;
  for (int u = 0; u <= i; ++u) {
    const double* k = t.k.data() + static_cast<std::size_t>(u) * s.kv_width() + static_cast<std::size_t>(g) * D;
    double dot = 0.0;
    for (int c = 0; c < D; ++c) dot += q[c] * k[c];
    p[u] = dot * scale;
    m = std::max(m, p[u]);
  }
  double l = 0.0;
  for (double& e : p) l += (e = std::exp(e - m));
  for (double& e : p) e /= l;
}

double sigmoid(double z) {
  // exp of a non-positive argument only: no overflow for any finite z.
  if (z >= 0) return 1.0 / (1.0 + std::exp(-z));
  const double e = std::exp(z);
  return e / (1.0 + e);
}

}  // namespace

V2Shape make_v2_shape(int E, int H, int Hkv, int D) {
  if (Hkv <= 0) Hkv = H;
  const std::string at = shape_text(E, H, Hkv, D);
  if (E <= 0 || H <= 0 || D <= 0) fail("E, H, Hkv and D must be positive " + at);
  if (D % 2 != 0) fail("head_dim D must be even (RoPE rotates pairs) " + at);
  if ((2 * H) % Hkv != 0) fail("Hkv must divide the 2H query heads " + at);
  if (H % Hkv != 0) {
    fail("H=" + std::to_string(H) + ", Hkv=" + std::to_string(Hkv) + ": 2H/Hkv = " + std::to_string(2 * H / Hkv) +
         " query heads per KV head is odd, so some output head's pair (2i, 2i+1) would straddle two KV heads; "
         "Hkv must divide H " +
         at);
  }
  return V2Shape{E, H, Hkv, D};
}

void validate(const V2Shape& s) {
  if (s.Hkv <= 0) fail("Hkv must be positive in a built shape " + shape_text(s.E, s.H, s.Hkv, s.D));
  make_v2_shape(s.E, s.H, s.Hkv, s.D);
}

void validate(const V2Shape& s, const V2Weights& w) {
  validate(s);
  const std::size_t E = static_cast<std::size_t>(s.E);
  check_size(w.wq, static_cast<std::size_t>(s.q_width()) * E, "q_proj.weight");
  check_size(w.wk, static_cast<std::size_t>(s.kv_width()) * E, "k_proj.weight");
  check_size(w.wv, static_cast<std::size_t>(s.kv_width()) * E, "v_proj.weight");
  check_size(w.wo, E * static_cast<std::size_t>(s.o_width()), "o_proj.weight");
  check_size(w.wl, static_cast<std::size_t>(s.H) * E, "lambda_proj.weight");
}

V2Weights random_v2_weights(const V2Shape& s, std::uint64_t seed, double lambda_std) {
  validate(s);
  const std::size_t E = static_cast<std::size_t>(s.E);
  const double in_std = 1.0 / std::sqrt(static_cast<double>(s.E));
  V2Weights w;
  w.wq = random_normal(static_cast<std::size_t>(s.q_width()) * E, seed, in_std);
  w.wk = random_normal(static_cast<std::size_t>(s.kv_width()) * E, seed + 1, in_std);
  w.wv = random_normal(static_cast<std::size_t>(s.kv_width()) * E, seed + 2, in_std);
  w.wo = random_normal(E * static_cast<std::size_t>(s.o_width()), seed + 3,
                       1.0 / std::sqrt(static_cast<double>(s.o_width())));
  w.wl = random_normal(static_cast<std::size_t>(s.H) * E, seed + 4, lambda_std * in_std);
  return w;
}

std::vector<double> diff_v2_lambda(const V2Shape& s, const V2Weights& w, const std::vector<double>& x, int S) {
  validate(s, w);
  check_size(x, static_cast<std::size_t>(S) * s.E, "x");
  std::vector<double> lam = linear(x, S, s.E, w.wl, s.H);
  for (double& z : lam) z = sigmoid(z);
  return lam;
}

std::vector<double> diff_v2_layer(const std::vector<double>& x, int S, int pos0, const V2Shape& s, const V2Weights& w,
                                  double theta) {
  const Projected t = project(s, w, x, S, pos0, theta);
  const std::vector<double> lam = diff_v2_lambda(s, w, x, S);
  const int D = s.D;
  std::vector<double> heads(static_cast<std::size_t>(S) * s.o_width(), 0.0);
  std::vector<double> p;
  for (int i = 0; i < S; ++i) {
    for (int h = 0; h < s.H; ++h) {
      double* o = heads.data() + static_cast<std::size_t>(i) * s.o_width() + static_cast<std::size_t>(h) * D;
      // head h = O_2h − λ·O_2h+1; both query heads read the same KV head g (make_v2_shape checks it).
      for (int half = 0; half < 2; ++half) {
        const int j = 2 * h + half;
        const double coef = half == 0 ? 1.0 : -lam[static_cast<std::size_t>(i) * s.H + h];
        softmax_row(s, t, j, i, p);
        const int g = j / s.group();
        for (int u = 0; u <= i; ++u) {
          const double* v = t.v.data() + static_cast<std::size_t>(u) * s.kv_width() + static_cast<std::size_t>(g) * D;
          for (int c = 0; c < D; ++c) o[c] += coef * p[u] * v[c];
        }
      }
    }
  }
  return linear(heads, S, s.o_width(), w.wo, s.E);
}

std::vector<double> diff_v2_attention(const std::vector<double>& q, const std::vector<double>& k,
                                      const std::vector<double>& v, const std::vector<double>& z, int S, int T, int H,
                                      int Hkv, int D, int pos0) {
  if (S <= 0 || pos0 < 0 || T < pos0 + S || H <= 0 || Hkv <= 0 || D <= 0 || H % Hkv)
    fail("diff_v2_attention: need S > 0, pos0 >= 0, T >= pos0 + S, and Hkv dividing H");
  const std::size_t qw = std::size_t(2) * H * D, kw = std::size_t(Hkv) * D;
  check_size(q, std::size_t(S) * qw, "q");
  check_size(k, std::size_t(T) * kw, "k");
  check_size(v, std::size_t(T) * kw, "v");
  check_size(z, std::size_t(S) * H, "z");
  const int group = 2 * H / Hkv;
  const double scale = 1.0 / std::sqrt(static_cast<double>(D));
  std::vector<double> out(std::size_t(S) * H * D, 0.0), p, o(2 * std::size_t(D));
  for (int i = 0; i < S; ++i) {
    const int keys = pos0 + i + 1;
    for (int h = 0; h < H; ++h) {
      for (int t = 0; t < 2; ++t) {  // query heads 2h, 2h + 1
        const int j = 2 * h + t, g = j / group;
        const double* qi = q.data() + std::size_t(i) * qw + std::size_t(j) * D;
        p.assign(std::size_t(keys), 0.0);
        double m = -HUGE_VAL;
        for (int u = 0; u < keys; ++u) {
          const double* ku = k.data() + std::size_t(u) * kw + std::size_t(g) * D;
          double dot = 0.0;
          for (int c = 0; c < D; ++c) dot += qi[c] * ku[c];
          m = std::max(m, p[std::size_t(u)] = dot * scale);
        }
        double l = 0.0;
        for (double& e : p) l += (e = std::exp(e - m));
        for (int c = 0; c < D; ++c) {
          double acc = 0.0;
          for (int u = 0; u < keys; ++u) acc += p[std::size_t(u)] * v[std::size_t(u) * kw + std::size_t(g) * D + c];
          o[std::size_t(t) * D + c] = acc / l;
        }
      }
      const double lam = sigmoid(z[std::size_t(i) * H + h]);
      for (int c = 0; c < D; ++c) out[(std::size_t(i) * H + h) * D + c] = o[c] - lam * o[std::size_t(D) + c];
    }
  }
  return out;
}

V2Maps diff_v2_maps(const std::vector<double>& x, int S, int pos0, const V2Shape& s, const V2Weights& w, double theta,
                    int head) {
  const Projected t = project(s, w, x, S, pos0, theta);
  if (head < 0 || head >= s.H) fail("head " + std::to_string(head) + " out of range, H=" + std::to_string(s.H));
  const std::vector<double> lam = diff_v2_lambda(s, w, x, S);
  const std::size_t n = static_cast<std::size_t>(S);
  V2Maps m;
  m.a1.assign(n * n, 0.0);
  m.a2.assign(n * n, 0.0);
  m.diff.assign(n * n, 0.0);
  m.lambda.resize(n);
  std::vector<double> p;
  for (int i = 0; i < S; ++i) {
    m.lambda[i] = lam[static_cast<std::size_t>(i) * s.H + head];
    softmax_row(s, t, 2 * head, i, p);
    std::copy(p.begin(), p.end(), m.a1.begin() + static_cast<std::ptrdiff_t>(i * n));
    softmax_row(s, t, 2 * head + 1, i, p);
    std::copy(p.begin(), p.end(), m.a2.begin() + static_cast<std::ptrdiff_t>(i * n));
    for (int u = 0; u <= i; ++u) m.diff[i * n + u] = m.a1[i * n + u] - m.lambda[i] * m.a2[i * n + u];
  }
  return m;
}

V2Maps diff_v2_probs(const std::vector<double>& q, const std::vector<double>& k, const std::vector<double>& z, int S,
                     int T, int H, int Hkv, int D, int pos0) {
  if (S <= 0 || pos0 < 0 || T < pos0 + S || H <= 0 || Hkv <= 0 || D <= 0 || H % Hkv)
    fail("diff_v2_probs: need S > 0, pos0 >= 0, T >= pos0 + S, and Hkv dividing H");
  const std::size_t qw = std::size_t(2) * H * D, kw = std::size_t(Hkv) * D, plane = std::size_t(S) * T;
  check_size(q, std::size_t(S) * qw, "q");
  check_size(k, std::size_t(T) * kw, "k");
  check_size(z, std::size_t(S) * H, "z");
  const int group = 2 * H / Hkv;
  const double scale = 1.0 / std::sqrt(static_cast<double>(D));
  V2Maps m;
  m.a1.assign(std::size_t(H) * plane, 0.0);
  m.a2.assign(m.a1.size(), 0.0);
  m.diff.assign(m.a1.size(), 0.0);
  m.lambda.resize(std::size_t(H) * S);
  for (int h = 0; h < H; ++h)
    for (int i = 0; i < S; ++i) {
      const int keys = pos0 + i + 1;
      const std::size_t row = std::size_t(h) * plane + std::size_t(i) * T;
      const double lam = m.lambda[std::size_t(h) * S + i] = sigmoid(z[std::size_t(i) * H + h]);
      for (int t = 0; t < 2; ++t) {  // query heads 2h, 2h + 1
        const int j = 2 * h + t, g = j / group;
        double* p = (t == 0 ? m.a1 : m.a2).data() + row;
        const double* qi = q.data() + std::size_t(i) * qw + std::size_t(j) * D;
        double mx = -HUGE_VAL;
        for (int u = 0; u < keys; ++u) {
          const double* ku = k.data() + std::size_t(u) * kw + std::size_t(g) * D;
          double dot = 0.0;
          for (int c = 0; c < D; ++c) dot += qi[c] * ku[c];
          mx = std::max(mx, p[u] = dot * scale);
        }
        double l = 0.0;
        for (int u = 0; u < keys; ++u) l += (p[u] = std::exp(p[u] - mx));
        for (int u = 0; u < keys; ++u) p[u] /= l;
      }
      for (int u = 0; u < keys; ++u) m.diff[row + u] = m.a1[row + u] - lam * m.a2[row + u];
    }
  return m;
}

}  // namespace diffvk::ref
