// diffvk — float64 CPU reference of one MultiheadDiffAttn layer (see the header
// and docs/maths.md).
#include "reference/diff_attn_ref.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <stdexcept>
#include <string>

namespace diffvk::ref {

namespace {

[[noreturn]] void fail(const std::string& what) { throw std::invalid_argument("diffvk::ref: " + what); }

void check_size(const std::vector<double>& v, std::size_t expected, const char* name) {
  if (v.size() != expected) {
    fail(std::string(name) + " has " + std::to_string(v.size()) + " values, expected " + std::to_string(expected));
  }
}

// normal(0, 1) from a mt19937_64 stream, Box–Muller, both values of each pair used.
class NormalSource {
 public:
  explicit NormalSource(std::uint64_t seed) : rng_(seed) {}

  double next() {
    if (has_spare_) {
      has_spare_ = false;
      return spare_;
    }
    const double two_pi = 6.283185307179586476925286766559;
    // u1 in (0, 1], u2 in [0, 1): 53 random bits each.
    const double u1 = 1.0 - static_cast<double>(rng_() >> 11) * 0x1.0p-53;
    const double u2 = static_cast<double>(rng_() >> 11) * 0x1.0p-53;
    const double r = std::sqrt(-2.0 * std::log(u1));
    spare_ = r * std::sin(two_pi * u2);
    has_spare_ = true;
    return r * std::cos(two_pi * u2);
  }

  std::vector<double> fill(std::size_t count, double mean, double stddev) {
    std::vector<double> out(count);
    for (double& x : out) x = mean + stddev * next();
    return out;
  }

 private:
  std::mt19937_64 rng_;
  double spare_ = 0.0;
  bool has_spare_ = false;
};

// Float inputs are widened exactly, so a float row gives the same result as its values in double.
template <typename T>
double dot(const T* a, const T* b, int n) {
  double acc = 0.0;
  for (int i = 0; i < n; ++i) acc += static_cast<double>(a[i]) * static_cast<double>(b[i]);
  return acc;
}

template <typename T>
void attention_row(const T* q, const T* k, std::size_t k_stride, const T* v, std::size_t v_stride, int n_keys, int D,
                   double lambda, double* o) {
  if (n_keys <= 0 || D <= 0) fail("diff_attention_row: bad sizes");
  const double scale = 1.0 / std::sqrt(static_cast<double>(D));
  const T* q1 = q;
  const T* q2 = q1 + D;
  std::vector<double> a1(static_cast<std::size_t>(n_keys)), a2(static_cast<std::size_t>(n_keys));

  // Scores of the two maps, each with its own max.
  double m1 = -std::numeric_limits<double>::infinity();
  double m2 = m1;
  for (int j = 0; j < n_keys; ++j) {
    const T* k1 = k + j * k_stride;
    const T* k2 = k1 + D;
    a1[j] = dot(q1, k1, D) * scale;
    a2[j] = dot(q2, k2, D) * scale;
    m1 = std::max(m1, a1[j]);
    m2 = std::max(m2, a2[j]);
  }
  // Two independent softmaxes.
  double l1 = 0.0, l2 = 0.0;
  for (int j = 0; j < n_keys; ++j) {
    a1[j] = std::exp(a1[j] - m1);
    a2[j] = std::exp(a2[j] - m2);
    l1 += a1[j];
    l2 += a2[j];
  }
  // O = Σ_j (A1[j] − λ·A2[j]) · V[j], 2D wide.
  std::fill(o, o + 2 * D, 0.0);
  for (int j = 0; j < n_keys; ++j) {
    const double p = a1[j] / l1 - lambda * (a2[j] / l2);
    const T* vj = v + j * v_stride;
    for (int c = 0; c < 2 * D; ++c) o[c] += p * static_cast<double>(vj[c]);
  }
}

}  // namespace

// ---------------------------------------------------------------- shapes

AttnShape make_shape(int E, int H, int Hkv) {
  if (E <= 0 || H <= 0 || Hkv <= 0) fail("E, H and Hkv must be positive");
  if (E % (2 * H) != 0) fail("E must be a multiple of 2H");
  if (H % Hkv != 0) fail("H must be a multiple of Hkv");
  AttnShape s;
  s.E = E;
  s.H = H;
  s.Hkv = Hkv;
  s.D = E / H / 2;
  if (s.D % 2 != 0) fail("head_dim D = E / H / 2 must be even (RoPE rotates pairs)");
  return s;
}

void validate(const AttnShape& s) {
  const AttnShape expected = make_shape(s.E, s.H, s.Hkv);
  if (s.D != expected.D) fail("D must equal E / H / 2");
}

void validate(const AttnShape& s, const AttnWeights& w) {
  validate(s);
  const std::size_t E = static_cast<std::size_t>(s.E);
  check_size(w.wq, E * static_cast<std::size_t>(s.q_width()), "wq");
  check_size(w.wk, static_cast<std::size_t>(s.k_width()) * E, "wk");
  check_size(w.wv, static_cast<std::size_t>(s.v_width()) * E, "wv");
  check_size(w.wo, E * static_cast<std::size_t>(s.o_width()), "wo");
  const std::size_t D = static_cast<std::size_t>(s.D);
  check_size(w.lq1, D, "lambda_q1");
  check_size(w.lk1, D, "lambda_k1");
  check_size(w.lq2, D, "lambda_q2");
  check_size(w.lk2, D, "lambda_k2");
  check_size(w.subln, 2 * D, "subln");
}

// ---------------------------------------------------------------- random data

AttnWeights random_weights(const AttnShape& s, std::uint64_t seed) {
  validate(s);
  NormalSource n(seed);
  const double in_scale = 1.0 / std::sqrt(static_cast<double>(s.E));
  const double o_scale = 1.0 / std::sqrt(static_cast<double>(s.o_width()));
  const std::size_t E = static_cast<std::size_t>(s.E);
  const std::size_t D = static_cast<std::size_t>(s.D);
  AttnWeights w;
  w.wq = n.fill(static_cast<std::size_t>(s.q_width()) * E, 0.0, in_scale);
  w.wk = n.fill(static_cast<std::size_t>(s.k_width()) * E, 0.0, in_scale);
  w.wv = n.fill(static_cast<std::size_t>(s.v_width()) * E, 0.0, in_scale);
  w.wo = n.fill(E * static_cast<std::size_t>(s.o_width()), 0.0, o_scale);
  w.lq1 = n.fill(D, 0.0, 0.1);
  w.lk1 = n.fill(D, 0.0, 0.1);
  w.lq2 = n.fill(D, 0.0, 0.1);
  w.lk2 = n.fill(D, 0.0, 0.1);
  w.subln = n.fill(2 * D, 1.0, 0.1);
  return w;
}

std::vector<double> random_normal(std::size_t count, std::uint64_t seed, double stddev) {
  NormalSource n(seed);
  return n.fill(count, 0.0, stddev);
}

// ---------------------------------------------------------------- rounding

double round_to_f32(double x) { return static_cast<double>(static_cast<float>(x)); }

double round_to_f16(double x) {
  if (!std::isfinite(x) || x == 0.0) return x;
  const double a = std::fabs(x);
  int e = 0;
  std::frexp(a, &e);  // a = m·2^e with m in [0.5, 1): the leading bit has weight 2^(e−1)
  // 11 significant bits for normal halves (leading bit weight ≥ 2^−14); a fixed
  // quantum of 2^−24 for subnormals.
  const int quantum_exp = std::max(e - 1 - 10, -24);
  const double quantum = std::ldexp(1.0, quantum_exp);
  double r = std::nearbyint(a / quantum) * quantum;  // ties to even (default rounding mode)
  if (r > 65504.0) r = std::numeric_limits<double>::infinity();
  return std::copysign(r, x);
}

std::vector<double> round_to_f32(const std::vector<double>& v) {
  std::vector<double> out(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) out[i] = round_to_f32(v[i]);
  return out;
}

std::vector<double> round_to_f16(const std::vector<double>& v) {
  std::vector<double> out(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) out[i] = round_to_f16(v[i]);
  return out;
}

namespace {
template <typename Fn>
AttnWeights map_weights(const AttnWeights& w, Fn fn) {
  AttnWeights r;
  r.wq = fn(w.wq);
  r.wk = fn(w.wk);
  r.wv = fn(w.wv);
  r.wo = fn(w.wo);
  r.lq1 = fn(w.lq1);
  r.lk1 = fn(w.lk1);
  r.lq2 = fn(w.lq2);
  r.lk2 = fn(w.lk2);
  r.subln = fn(w.subln);
  return r;
}
}  // namespace

AttnWeights round_to_f32(const AttnWeights& w) {
  return map_weights(w, [](const std::vector<double>& v) { return round_to_f32(v); });
}

AttnWeights round_to_f16(const AttnWeights& w) {
  return map_weights(w, [](const std::vector<double>& v) { return round_to_f16(v); });
}

// ---------------------------------------------------------------- λ

double lambda_init(int depth) { return 0.8 - 0.6 * std::exp(-0.3 * depth); }

double lambda_value(const AttnWeights& w, int D, int depth) {
  const std::size_t n = static_cast<std::size_t>(D);
  check_size(w.lq1, n, "lambda_q1");
  check_size(w.lk1, n, "lambda_k1");
  check_size(w.lq2, n, "lambda_q2");
  check_size(w.lk2, n, "lambda_k2");
  return std::exp(dot(w.lq1.data(), w.lk1.data(), D)) - std::exp(dot(w.lq2.data(), w.lk2.data(), D)) +
         lambda_init(depth);
}

// ---------------------------------------------------------------- RoPE

void rope(double* x, int D, int pos, double theta) {
  for (int i = 0; i < D / 2; ++i) {
    const double inv_freq = std::pow(theta, -2.0 * i / D);
    const double angle = static_cast<double>(pos) * inv_freq;
    const double c = std::cos(angle);
    const double s = std::sin(angle);
    const double x0 = x[2 * i];
    const double x1 = x[2 * i + 1];
    x[2 * i] = x0 * c - x1 * s;
    x[2 * i + 1] = x0 * s + x1 * c;
  }
}

void rope_rows(std::vector<double>& t, int rows, int n_sub, int D, int pos0, double theta) {
  const std::size_t width = static_cast<std::size_t>(n_sub) * D;
  check_size(t, static_cast<std::size_t>(rows) * width, "rope_rows input");
  for (int r = 0; r < rows; ++r) {
    for (int sub = 0; sub < n_sub; ++sub) {
      rope(t.data() + r * width + static_cast<std::size_t>(sub) * D, D, pos0 + r, theta);
    }
  }
}

// ---------------------------------------------------------------- linear

std::vector<double> linear(const std::vector<double>& x, int rows, int in, const std::vector<double>& w, int out) {
  check_size(x, static_cast<std::size_t>(rows) * in, "linear input");
  check_size(w, static_cast<std::size_t>(out) * in, "linear weight");
  std::vector<double> y(static_cast<std::size_t>(rows) * out);
  for (int r = 0; r < rows; ++r) {
    const double* xr = x.data() + static_cast<std::size_t>(r) * in;
    for (int o = 0; o < out; ++o) {
      y[static_cast<std::size_t>(r) * out + o] = dot(xr, w.data() + static_cast<std::size_t>(o) * in, in);
    }
  }
  return y;
}

QKV project_qkv(const AttnShape& s, const AttnWeights& w, double rope_theta, const std::vector<double>& x, int S,
                int pos0) {
  validate(s, w);
  QKV r;
  r.q = linear(x, S, s.E, w.wq, s.q_width());
  r.k = linear(x, S, s.E, w.wk, s.k_width());
  r.v = linear(x, S, s.E, w.wv, s.v_width());
  rope_rows(r.q, S, 2 * s.H, s.D, pos0, rope_theta);
  rope_rows(r.k, S, 2 * s.Hkv, s.D, pos0, rope_theta);
  return r;
}

// ---------------------------------------------------------------- attention

std::vector<double> diff_attention(const std::vector<double>& q, const std::vector<double>& k,
                                   const std::vector<double>& v, int S, int T, int H, int Hkv, int D, double lambda,
                                   int q_pos0, int window) {
  if (S < 0 || T <= 0 || H <= 0 || Hkv <= 0 || D <= 0) fail("diff_attention: bad sizes");
  if (window < 0) fail("diff_attention: window must be >= 0");
  if (H % Hkv != 0) fail("diff_attention: H must be a multiple of Hkv");
  if (q_pos0 < 0 || q_pos0 + S > T) fail("diff_attention: need 0 <= q_pos0 and q_pos0 + S <= T");
  const std::size_t qw = static_cast<std::size_t>(2 * H) * D;    // q row width
  const std::size_t kw = static_cast<std::size_t>(2 * Hkv) * D;  // k row width
  const std::size_t vw = static_cast<std::size_t>(Hkv) * 2 * D;  // v row width
  const std::size_t ow = static_cast<std::size_t>(H) * 2 * D;    // o row width
  check_size(q, static_cast<std::size_t>(S) * qw, "q");
  check_size(k, static_cast<std::size_t>(T) * kw, "k");
  check_size(v, static_cast<std::size_t>(T) * vw, "v");

  const int n_rep = H / Hkv;
  std::vector<double> out(static_cast<std::size_t>(S) * ow, 0.0);

  for (int h = 0; h < H; ++h) {
    const int g = h / n_rep;  // the K/V group of head h
    for (int i = 0; i < S; ++i) {
      // Keys lo .. q_pos0+i are visible (lo = 0, or the window's first); K1|K2 of group g are 2D contiguous
      // columns of k, V's of v.
      const int t = q_pos0 + i, lo = window > 0 ? std::max(0, t - window + 1) : 0;
      diff_attention_row(q.data() + i * qw + static_cast<std::size_t>(2 * h) * D,
                         k.data() + static_cast<std::size_t>(lo) * kw + static_cast<std::size_t>(2 * g) * D, kw,
                         v.data() + static_cast<std::size_t>(lo) * vw + static_cast<std::size_t>(g) * 2 * D, vw,
                         t - lo + 1, D, lambda, out.data() + i * ow + static_cast<std::size_t>(h) * 2 * D);
    }
  }
  return out;
}

void diff_attention_row(const double* q, const double* k, std::size_t k_stride, const double* v, std::size_t v_stride,
                        int n_keys, int D, double lambda, double* o) {
  attention_row(q, k, k_stride, v, v_stride, n_keys, D, lambda, o);
}
void diff_attention_row(const float* q, const float* k, std::size_t k_stride, const float* v, std::size_t v_stride,
                        int n_keys, int D, double lambda, double* o) {
  attention_row(q, k, k_stride, v, v_stride, n_keys, D, lambda, o);
}

// ---------------------------------------------------------------- head norm

std::vector<double> head_rmsnorm(const std::vector<double>& o, int rows, int H, int D, const std::vector<double>& subln,
                                 double lambda_init, double eps) {
  const std::size_t hw = static_cast<std::size_t>(2 * D);  // one head's width
  const std::size_t ow = static_cast<std::size_t>(H) * hw;
  check_size(o, static_cast<std::size_t>(rows) * ow, "head_rmsnorm input");
  check_size(subln, hw, "subln");
  std::vector<double> out(o);
  for (int r = 0; r < rows; ++r)
    for (int h = 0; h < H; ++h) head_rmsnorm_row(out.data() + r * ow + h * hw, D, subln.data(), 1.0 - lambda_init, eps);
  return out;
}

void head_rmsnorm_row(double* o, int D, const double* subln, double gain, double eps) {
  const std::size_t hw = static_cast<std::size_t>(2 * D);
  double sum_sq = 0.0;
  for (std::size_t c = 0; c < hw; ++c) sum_sq += o[c] * o[c];
  const double inv_rms = 1.0 / std::sqrt(sum_sq / static_cast<double>(hw) + eps);
  for (std::size_t c = 0; c < hw; ++c) o[c] = o[c] * inv_rms * subln[c] * gain;
}

// ---------------------------------------------------------------- layer

std::vector<double> layer_forward(const AttnShape& s, const AttnWeights& w, int depth, double rope_theta,
                                  const std::vector<double>& x, int S, int pos0, KVCache* cache) {
  validate(s, w);
  if (S <= 0) fail("layer_forward: S must be positive");
  if (cache == nullptr && pos0 != 0) fail("layer_forward: pos0 != 0 needs a KV cache");
  if (cache != nullptr && cache->len != pos0) fail("layer_forward: pos0 must equal cache->len");
  check_size(x, static_cast<std::size_t>(S) * s.E, "layer_forward input");

  QKV p = project_qkv(s, w, rope_theta, x, S, pos0);

  KVCache local;
  KVCache& kv = cache != nullptr ? *cache : local;
  if (kv.round_row)  // each KV head's 2D-wide row of K and of V
    for (std::vector<double>* t : {&p.k, &p.v})
      for (std::size_t at = 0; at < t->size(); at += static_cast<std::size_t>(2) * s.D)
        kv.round_row(t->data() + at, 2 * s.D);
  check_size(kv.k, static_cast<std::size_t>(kv.len) * s.k_width(), "cache k");
  check_size(kv.v, static_cast<std::size_t>(kv.len) * s.v_width(), "cache v");
  kv.k.insert(kv.k.end(), p.k.begin(), p.k.end());
  kv.v.insert(kv.v.end(), p.v.begin(), p.v.end());
  kv.len += S;

  const double lambda = lambda_value(w, s.D, depth);
  const std::vector<double> o = diff_attention(p.q, kv.k, kv.v, S, kv.len, s.H, s.Hkv, s.D, lambda, pos0);
  const std::vector<double> n = head_rmsnorm(o, S, s.H, s.D, w.subln, lambda_init(depth));
  return linear(n, S, s.o_width(), w.wo, s.E);
}

// ---------------------------------------------------------------- comparison

namespace {
template <typename T>
ErrorStats compare_impl(const std::vector<T>& got, const std::vector<double>& ref) {
  if (got.size() != ref.size()) {
    fail("compare: sizes differ (" + std::to_string(got.size()) + " vs " + std::to_string(ref.size()) + ")");
  }
  ErrorStats st;
  double err_sq = 0.0, ref_sq = 0.0;
  for (std::size_t i = 0; i < ref.size(); ++i) {
    const double g = static_cast<double>(got[i]);
    if (!std::isfinite(g)) {
      st.finite = false;
      st.max_abs_err = std::numeric_limits<double>::infinity();
      err_sq = std::numeric_limits<double>::infinity();
    } else {
      const double d = g - ref[i];
      st.max_abs_err = std::max(st.max_abs_err, std::fabs(d));
      err_sq += d * d;
    }
    st.max_abs_ref = std::max(st.max_abs_ref, std::fabs(ref[i]));
    ref_sq += ref[i] * ref[i];
  }
  if (ref_sq > 0.0) {
    st.nmse = err_sq / ref_sq;
  } else {
    st.nmse = err_sq > 0.0 ? std::numeric_limits<double>::infinity() : 0.0;
  }
  return st;
}
}  // namespace

ErrorStats compare(const std::vector<double>& got, const std::vector<double>& ref) { return compare_impl(got, ref); }

ErrorStats compare(const std::vector<float>& got, const std::vector<double>& ref) { return compare_impl(got, ref); }

std::vector<float> to_float(const std::vector<double>& v) {
  std::vector<float> out(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) out[i] = static_cast<float>(v[i]);
  return out;
}

std::vector<double> to_double(const std::vector<float>& v) { return std::vector<double>(v.begin(), v.end()); }

}  // namespace diffvk::ref
