// Tests of the float64 CPU reference (runtime/reference/diff_attn_ref.*).
//
// Every check compares against values computed independently here: literals
// worked out by hand, plain-loop re-implementations written differently from the
// reference, or the PyTorch module's output stored in tests/data/layer_fixture/.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <limits>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "ref_compare.hpp"
#include "reference/diff_attn_ref.hpp"

namespace ref = diffvk::ref;
using Vec = std::vector<double>;

namespace {

using diffvk::test::max_abs_diff;

// ----------------------------------------------------------------------------
// Independent plain-loop pieces (written differently from the reference).

// Softmax through log-sum-exp over the visible prefix [0, n); entries >= n get 0.
Vec softmax_prefix(const Vec& s, int n) {
  double m = s[0];
  for (int j = 1; j < n; ++j) m = std::max(m, s[j]);
  double sum = 0.0;
  for (int j = 0; j < n; ++j) sum += std::exp(s[j] - m);
  const double lse = m + std::log(sum);
  Vec p(s.size(), 0.0);
  for (int j = 0; j < n; ++j) p[j] = std::exp(s[j] - lse);
  return p;
}

// Differential attention for H == Hkv, the "two calls then subtract" form:
// O1 = A1·V, O2 = A2·V, O = O1 − λ·O2. Head h: Q1 = sub-head 2h, Q2 = 2h+1,
// K1/K2 = sub-heads 2h/2h+1 of k, V = columns [2hD, 2hD+2D).
Vec naive_mha(const Vec& q, const Vec& k, const Vec& v, int S, int T, int H, int D, double lambda, int q_pos0) {
  const int W = 2 * H * D;  // q, k and v rows are all 2HD wide when H == Hkv
  Vec out(static_cast<std::size_t>(S) * W, 0.0);
  for (int h = 0; h < H; ++h) {
    for (int i = 0; i < S; ++i) {
      Vec s1(T, 0.0), s2(T, 0.0);
      for (int j = 0; j < T; ++j) {
        for (int d = 0; d < D; ++d) {
          s1[j] += q[i * W + (2 * h) * D + d] * k[j * W + (2 * h) * D + d];
          s2[j] += q[i * W + (2 * h + 1) * D + d] * k[j * W + (2 * h + 1) * D + d];
        }
        s1[j] /= std::sqrt(static_cast<double>(D));
        s2[j] /= std::sqrt(static_cast<double>(D));
      }
      const int visible = q_pos0 + i + 1;
      const Vec a1 = softmax_prefix(s1, visible);
      const Vec a2 = softmax_prefix(s2, visible);
      for (int c = 0; c < 2 * D; ++c) {
        double o1 = 0.0, o2 = 0.0;
        for (int j = 0; j < T; ++j) {
          o1 += a1[j] * v[j * W + h * 2 * D + c];
          o2 += a2[j] * v[j * W + h * 2 * D + c];
        }
        out[i * W + h * 2 * D + c] = o1 - lambda * o2;
      }
    }
  }
  return out;
}

// Expands grouped K/V to one group per head using an explicit table head -> group.
void expand_kv(const Vec& k, const Vec& v, int T, int Hkv, int D, const std::vector<int>& group_of, Vec& k_out,
               Vec& v_out) {
  const int H = static_cast<int>(group_of.size());
  k_out.assign(static_cast<std::size_t>(T) * 2 * H * D, 0.0);
  v_out.assign(static_cast<std::size_t>(T) * 2 * H * D, 0.0);
  for (int j = 0; j < T; ++j) {
    for (int h = 0; h < H; ++h) {
      const int g = group_of[h];
      for (int d = 0; d < 2 * D; ++d) {
        // K1|K2 of group g are 2D consecutive values starting at sub-head 2g.
        k_out[(j * 2 * H + 2 * h) * D + d] = k[(j * 2 * Hkv + 2 * g) * D + d];
        v_out[(j * H + h) * 2 * D + d] = v[(j * Hkv + g) * 2 * D + d];
      }
    }
  }
}

// Interleaved RoPE through complex multiplication: pair (2i, 2i+1) is the complex
// number x[2i] + i·x[2i+1], multiplied by e^{i·pos·θ^(−2i/D)}.
void rope_complex(double* x, int D, int pos, double theta) {
  for (int i = 0; i < D / 2; ++i) {
    const double angle = pos / std::pow(theta, static_cast<double>(2 * i) / D);
    const double re = x[2 * i], im = x[2 * i + 1];
    const double c = std::cos(angle), s = std::sin(angle);
    x[2 * i] = re * c - im * s;
    x[2 * i + 1] = im * c + re * s;
  }
}

// A complete layer written independently: own matmuls, complex RoPE, K/V expanded
// per head with g = h / n_rep, naive_mha, own norm. Positions 0..S-1.
Vec naive_layer(const ref::AttnShape& s, const ref::AttnWeights& w, int depth, double theta, const Vec& x, int S) {
  const int E = s.E, H = s.H, Hkv = s.Hkv, D = s.D;
  auto matmul_t = [&](const Vec& a, int in, const Vec& wt, int out) {
    Vec y(static_cast<std::size_t>(S) * out, 0.0);
    for (int r = 0; r < S; ++r)
      for (int i = 0; i < in; ++i)
        for (int o = 0; o < out; ++o) y[r * out + o] += a[r * in + i] * wt[o * in + i];
    return y;
  };
  Vec q = matmul_t(x, E, w.wq, 2 * H * D);
  Vec k = matmul_t(x, E, w.wk, 2 * Hkv * D);
  Vec v = matmul_t(x, E, w.wv, 2 * Hkv * D);
  for (int r = 0; r < S; ++r) {
    for (int sub = 0; sub < 2 * H; ++sub) rope_complex(&q[(r * 2 * H + sub) * D], D, r, theta);
    for (int sub = 0; sub < 2 * Hkv; ++sub) rope_complex(&k[(r * 2 * Hkv + sub) * D], D, r, theta);
  }
  std::vector<int> group_of(H);
  for (int h = 0; h < H; ++h) group_of[h] = h / (H / Hkv);
  Vec ke, ve;
  expand_kv(k, v, S, Hkv, D, group_of, ke, ve);
  double dq1 = 0.0, dq2 = 0.0;
  for (int d = 0; d < D; ++d) {
    dq1 += w.lq1[d] * w.lk1[d];
    dq2 += w.lq2[d] * w.lk2[d];
  }
  const double li = 0.8 - 0.6 * std::exp(-0.3 * depth);
  const double lambda = std::exp(dq1) - std::exp(dq2) + li;
  Vec o = naive_mha(q, ke, ve, S, S, H, D, lambda, 0);
  for (int r = 0; r < S; ++r) {
    for (int h = 0; h < H; ++h) {
      double* p = &o[(r * H + h) * 2 * D];
      double ms = 0.0;
      for (int c = 0; c < 2 * D; ++c) ms += p[c] * p[c] / (2 * D);
      for (int c = 0; c < 2 * D; ++c) p[c] = (1.0 - li) * w.subln[c] * p[c] / std::sqrt(ms + 1e-5);
    }
  }
  return matmul_t(o, 2 * H * D, w.wo, E);
}

// ----------------------------------------------------------------------------
// Minimal readers for the fixture (.npy float32, safetensors F32/F16).

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw std::runtime_error("cannot open " + path);
  return std::string(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

struct Array {
  std::vector<std::size_t> shape;
  Vec data;
};

std::uint32_t read_le(const std::string& s, std::size_t at, int bytes) {
  std::uint32_t v = 0;
  for (int i = 0; i < bytes; ++i) v |= static_cast<std::uint32_t>(static_cast<unsigned char>(s[at + i])) << (8 * i);
  return v;
}

float f32_from_bits(std::uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

// IEEE half -> double (exact).
double f16_to_double(std::uint16_t h) {
  const int sign = (h >> 15) ? -1 : 1;
  const int exp = (h >> 10) & 0x1f;
  const int mant = h & 0x3ff;
  if (exp == 0) return sign * std::ldexp(mant, -24);
  if (exp == 31) return mant ? std::numeric_limits<double>::quiet_NaN() : sign * HUGE_VAL;
  return sign * std::ldexp(1024 + mant, exp - 25);
}

// .npy, version 1-3, dtype '<f4', C order.
Array load_npy(const std::string& path) {
  const std::string s = read_file(path);
  if (s.size() < 10 || s.compare(0, 6, "\x93NUMPY") != 0) throw std::runtime_error(path + ": not .npy");
  const int major = static_cast<unsigned char>(s[6]);
  const std::size_t hlen = major == 1 ? read_le(s, 8, 2) : read_le(s, 8, 4);
  const std::size_t hstart = major == 1 ? 10 : 12;
  const std::string header = s.substr(hstart, hlen);
  if (header.find("'descr': '<f4'") == std::string::npos ||
      header.find("'fortran_order': False") == std::string::npos) {
    throw std::runtime_error(path + ": need little-endian float32 in C order: " + header);
  }
  Array a;
  const std::size_t open = header.find('(', header.find("'shape'"));
  const std::size_t close = header.find(')', open);
  std::string dims = header.substr(open + 1, close - open - 1);
  std::size_t count = 1, pos = 0;
  while (pos < dims.size()) {
    const std::size_t comma = dims.find(',', pos);
    const std::string tok = dims.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    if (tok.find_first_of("0123456789") != std::string::npos) {
      a.shape.push_back(std::stoul(tok));
      count *= a.shape.back();
    }
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  const std::size_t data = hstart + hlen;
  if (s.size() != data + 4 * count) throw std::runtime_error(path + ": size does not match shape");
  a.data.resize(count);
  for (std::size_t i = 0; i < count; ++i) a.data[i] = f32_from_bits(read_le(s, data + 4 * i, 4));
  return a;
}

std::map<std::string, Array> load_safetensors(const std::string& path) {
  const std::string s = read_file(path);
  std::uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(s[i]);
  const nlohmann::json header = nlohmann::json::parse(s.substr(8, n));
  const std::size_t base = 8 + n;
  std::map<std::string, Array> out;
  for (const auto& item : header.items()) {
    if (item.key() == "__metadata__") continue;
    const auto& info = item.value();
    const std::string dtype = info.at("dtype").get<std::string>();
    const std::size_t begin = info.at("data_offsets").at(0).get<std::size_t>();
    const std::size_t end = info.at("data_offsets").at(1).get<std::size_t>();
    Array a;
    std::size_t count = 1;
    for (const auto& d : info.at("shape")) {
      a.shape.push_back(d.get<std::size_t>());
      count *= a.shape.back();
    }
    const std::size_t elem = dtype == "F32" ? 4 : dtype == "F16" ? 2 : 0;
    if (elem == 0) throw std::runtime_error(path + ": unsupported dtype " + dtype);
    if (end - begin != elem * count || base + end > s.size()) throw std::runtime_error(path + ": bad offsets");
    a.data.resize(count);
    for (std::size_t i = 0; i < count; ++i) {
      const std::size_t at = base + begin + elem * i;
      a.data[i] =
          elem == 4 ? f32_from_bits(read_le(s, at, 4)) : f16_to_double(static_cast<std::uint16_t>(read_le(s, at, 2)));
    }
    out.emplace(item.key(), std::move(a));
  }
  return out;
}

ref::AttnWeights weights_from(std::map<std::string, Array>& t, const ref::AttnShape& s) {
  auto take = [&](const char* name, std::vector<std::size_t> shape) {
    INFO("tensor " << name);
    REQUIRE(t.count(name) == 1);
    CHECK(t.at(name).shape == shape);
    return t.at(name).data;
  };
  using Z = std::size_t;
  const Z E = s.E, D = s.D, H = s.H, Hkv = s.Hkv;
  ref::AttnWeights w;
  w.wq = take("q_proj.weight", {E, E});
  w.wk = take("k_proj.weight", {2 * Hkv * D, E});
  w.wv = take("v_proj.weight", {Hkv * 2 * D, E});
  w.wo = take("out_proj.weight", {E, H * 2 * D});
  w.lq1 = take("lambda_q1", {D});
  w.lk1 = take("lambda_k1", {D});
  w.lq2 = take("lambda_q2", {D});
  w.lk2 = take("lambda_k2", {D});
  w.subln = take("subln.weight", {2 * D});
  CHECK(t.size() == 9);
  return w;
}

// Random q (S rows), k and v (T rows) for the given head layout.
struct RandQKV {
  Vec q, k, v;
};
RandQKV random_qkv(int S, int T, int H, int Hkv, int D, std::uint64_t seed) {
  RandQKV r;
  r.q = ref::random_normal(static_cast<std::size_t>(S) * 2 * H * D, seed);
  r.k = ref::random_normal(static_cast<std::size_t>(T) * 2 * Hkv * D, seed + 1);
  r.v = ref::random_normal(static_cast<std::size_t>(T) * 2 * Hkv * D, seed + 2);
  return r;
}

}  // namespace

// ============================================================================

TEST_CASE("reference: shapes are validated") {
  const ref::AttnShape s = ref::make_shape(64, 4, 2);
  CHECK(s.D == 8);
  CHECK(s.n_rep() == 2);
  CHECK(s.k_width() == 32);
  CHECK(s.v_width() == 32);
  CHECK(ref::make_shape(48, 4, 2).D == 6);
  CHECK_THROWS_AS(ref::make_shape(60, 4, 2), std::invalid_argument);  // E % 2H != 0
  CHECK_THROWS_AS(ref::make_shape(64, 4, 3), std::invalid_argument);  // H % Hkv != 0
  CHECK_THROWS_AS(ref::make_shape(24, 4, 2), std::invalid_argument);  // D = 3 is odd
  CHECK_THROWS_AS(ref::make_shape(0, 4, 2), std::invalid_argument);
  ref::AttnShape bad = s;
  bad.D = 16;
  CHECK_THROWS_AS(ref::validate(bad), std::invalid_argument);
  ref::AttnWeights w = ref::random_weights(s, 1);
  CHECK_NOTHROW(ref::validate(s, w));
  w.wv.resize(16 * 64);  // V only D wide per group: the classic mistake
  CHECK_THROWS_AS(ref::validate(s, w), std::invalid_argument);
}

TEST_CASE("reference: lambda_init at several depths") {
  // 0.8 − 0.6·exp(−0.3·l), worked out separately.
  CHECK(ref::lambda_init(0) == doctest::Approx(0.2).epsilon(1e-15));
  CHECK(ref::lambda_init(1) == doctest::Approx(0.35550906759096934).epsilon(1e-15));
  CHECK(ref::lambda_init(2) == doctest::Approx(0.4707130183435842).epsilon(1e-15));
  CHECK(ref::lambda_init(3) == doctest::Approx(0.5560582041556406).epsilon(1e-15));
  CHECK(ref::lambda_init(11) == doctest::Approx(0.777870099559256).epsilon(1e-15));
  CHECK(ref::lambda_init(100) == doctest::Approx(0.8).epsilon(1e-12));
}

TEST_CASE("reference: lambda from the four vectors") {
  ref::AttnWeights w;
  SUBCASE("zero vectors give lambda_init") {
    w.lq1 = w.lk1 = w.lq2 = w.lk2 = Vec(8, 0.0);
    for (int depth : {0, 1, 3, 7}) {
      CHECK(ref::lambda_value(w, 8, depth) == doctest::Approx(ref::lambda_init(depth)).epsilon(1e-15));
    }
    CHECK(ref::lambda_value(w, 8, 0) == doctest::Approx(0.2).epsilon(1e-15));
  }
  SUBCASE("hand-computed, above 1 and below 0") {
    // λq1·λk1 = 1.25, λq2·λk2 = 0.4, λ_init(2) = 0.4707130183435842.
    w.lq1 = {1.0, 2.0, 0.0, 0.0};
    w.lk1 = {0.25, 0.5, 0.0, 0.0};
    w.lq2 = {0.1, 0.0, 0.0, 0.3};
    w.lk2 = {1.0, 0.0, 0.0, 1.0};
    CHECK(ref::lambda_value(w, 4, 2) == doctest::Approx(2.469231278164155).epsilon(1e-14));
    std::swap(w.lq1, w.lq2);
    std::swap(w.lk1, w.lk2);
    CHECK(ref::lambda_value(w, 4, 2) == doctest::Approx(-1.527805241476987).epsilon(1e-14));
    CHECK_THROWS_AS(ref::lambda_value(w, 8, 2), std::invalid_argument);  // wrong D
  }
}

TEST_CASE("reference: linear computes x times W transposed") {
  const Vec x = {1,  2, 3,  //
                 -1, 0, 2};
  const Vec w = {1,   0,  0,  //
                 0.5, -1, 2,  //
                 0,   0,  1,  //
                 1,   1,  1};
  const Vec y = ref::linear(x, 2, 3, w, 4);
  const Vec expected = {1,  4.5, 3, 6,  //
                        -1, 3.5, 2, 1};
  CHECK(max_abs_diff(y, expected) == 0.0);
  CHECK_THROWS_AS(ref::linear(x, 2, 3, w, 3), std::invalid_argument);
}

TEST_CASE("reference: RoPE is interleaved, identity at 0, norm preserving") {
  const int D = 8;
  const double theta = 10000.0;
  SUBCASE("position 0 is the identity") {
    Vec x = ref::random_normal(D, 5);
    const Vec before = x;
    ref::rope(x.data(), D, 0, theta);
    CHECK(max_abs_diff(x, before) == 0.0);
  }
  SUBCASE("each pair keeps its norm") {
    Vec x = ref::random_normal(D, 6);
    const Vec before = x;
    ref::rope(x.data(), D, 123, theta);
    CHECK(max_abs_diff(x, before) > 0.1);
    for (int i = 0; i < D / 2; ++i) {
      CHECK(std::hypot(x[2 * i], x[2 * i + 1]) ==
            doctest::Approx(std::hypot(before[2 * i], before[2 * i + 1])).epsilon(1e-14));
    }
  }
  SUBCASE("pairs are adjacent elements with frequencies theta^(-2i/D)") {
    // D = 8, θ = 1e4: frequencies 1, 0.1, 0.01, 0.001 for pairs 0..3.
    const double freq[4] = {1.0, 0.1, 0.01, 0.001};
    const int pos = 7;
    for (int i = 0; i < 4; ++i) {
      Vec a(D, 0.0), b(D, 0.0);
      a[2 * i] = 1.0;      // (1, 0) -> (cos, sin)
      b[2 * i + 1] = 1.0;  // (0, 1) -> (−sin, cos)
      ref::rope(a.data(), D, pos, theta);
      ref::rope(b.data(), D, pos, theta);
      Vec ea(D, 0.0), eb(D, 0.0);
      ea[2 * i] = std::cos(pos * freq[i]);
      ea[2 * i + 1] = std::sin(pos * freq[i]);
      eb[2 * i] = -std::sin(pos * freq[i]);
      eb[2 * i + 1] = std::cos(pos * freq[i]);
      INFO("pair " << i);
      CHECK(max_abs_diff(a, ea) < 1e-14);
      CHECK(max_abs_diff(b, eb) < 1e-14);
    }
  }
  SUBCASE("scores depend only on the relative position") {
    const Vec q = ref::random_normal(D, 7), k = ref::random_normal(D, 8);
    auto score = [&](int m, int n) {
      Vec a = q, b = k;
      ref::rope(a.data(), D, m, theta);
      ref::rope(b.data(), D, n, theta);
      double s = 0.0;
      for (int d = 0; d < D; ++d) s += a[d] * b[d];
      return s;
    };
    CHECK(score(10, 3) == doctest::Approx(score(507, 500)).epsilon(1e-10));
    CHECK(score(3, 3) == doctest::Approx(score(0, 0)).epsilon(1e-12));
  }
  SUBCASE("rope_rows rotates row r at position pos0 + r, every sub-head alike") {
    const int rows = 3, n_sub = 4, pos0 = 5;
    Vec t = ref::random_normal(static_cast<std::size_t>(rows) * n_sub * D, 9);
    Vec expected = t;
    for (int r = 0; r < rows; ++r)
      for (int s = 0; s < n_sub; ++s) rope_complex(&expected[(r * n_sub + s) * D], D, pos0 + r, theta);
    ref::rope_rows(t, rows, n_sub, D, pos0, theta);
    CHECK(max_abs_diff(t, expected) < 1e-13);
  }
}

TEST_CASE("reference: query row 0 before the norm is (1 - lambda) V[0] for every head") {
  // H = 4, Hkv = 2: heads 0,1 use group 0 and heads 2,3 use group 1.
  const int H = 4, Hkv = 2, D = 8, S = 5, T = 5;
  const int group_of[H] = {0, 0, 1, 1};
  const RandQKV r = random_qkv(S, T, H, Hkv, D, 11);
  for (double lambda : {0.0, 0.3, 1.0, -0.7, 1.6}) {
    const Vec o = ref::diff_attention(r.q, r.k, r.v, S, T, H, Hkv, D, lambda, 0);
    for (int h = 0; h < H; ++h) {
      for (int c = 0; c < 2 * D; ++c) {
        INFO("lambda " << lambda << " head " << h << " column " << c);
        CHECK(o[h * 2 * D + c] == doctest::Approx((1.0 - lambda) * r.v[group_of[h] * 2 * D + c]).epsilon(1e-12));
      }
    }
  }
}

TEST_CASE("reference: diff_attention with H == Hkv matches a plain-loop implementation") {
  const int H = 3, D = 8;
  struct Case {
    int S, T, q_pos0;
    double lambda;
  };
  for (const Case c : {Case{9, 9, 0, 0.45}, Case{1, 12, 11, 0.2}, Case{4, 10, 3, -0.8}, Case{6, 6, 0, 1.9}}) {
    // Larger q so the two maps are far from uniform.
    RandQKV r = random_qkv(c.S, c.T, H, H, D, 21 + c.S);
    for (double& x : r.q) x *= 2.0;
    const Vec got = ref::diff_attention(r.q, r.k, r.v, c.S, c.T, H, H, D, c.lambda, c.q_pos0);
    const Vec expected = naive_mha(r.q, r.k, r.v, c.S, c.T, H, D, c.lambda, c.q_pos0);
    INFO("S " << c.S << " T " << c.T << " q_pos0 " << c.q_pos0 << " lambda " << c.lambda);
    CHECK(max_abs_diff(got, expected) < 1e-12);
  }
  const RandQKV r = random_qkv(4, 4, H, H, D, 3);
  CHECK_THROWS_AS(ref::diff_attention(r.q, r.k, r.v, 4, 4, H, H, D, 0.5, 1), std::invalid_argument);
}

TEST_CASE("reference: GQA equals an explicit per-head expansion of K and V") {
  const int D = 8, S = 7;
  for (const auto& hk : std::vector<std::pair<int, int>>{{4, 2}, {6, 2}, {4, 1}, {6, 3}}) {
    const int H = hk.first, Hkv = hk.second;
    INFO("H " << H << " Hkv " << Hkv);
    const RandQKV r = random_qkv(S, S, H, Hkv, D, 100 + H * 10 + Hkv);
    std::vector<int> right(H), wrong(H);
    for (int h = 0; h < H; ++h) {
      right[h] = h / (H / Hkv);
      wrong[h] = h % Hkv;
    }
    Vec k_exp, v_exp;
    expand_kv(r.k, r.v, S, Hkv, D, right, k_exp, v_exp);
    const double lambda = 0.37;
    const Vec got = ref::diff_attention(r.q, r.k, r.v, S, S, H, Hkv, D, lambda, 0);
    CHECK(max_abs_diff(got, ref::diff_attention(r.q, k_exp, v_exp, S, S, H, H, D, lambda, 0)) < 1e-13);
    CHECK(max_abs_diff(got, naive_mha(r.q, k_exp, v_exp, S, S, H, D, lambda, 0)) < 1e-12);
    if (Hkv > 1) {  // the test can tell the right grouping from the other common one
      expand_kv(r.k, r.v, S, Hkv, D, wrong, k_exp, v_exp);
      CHECK(max_abs_diff(got, naive_mha(r.q, k_exp, v_exp, S, S, H, D, lambda, 0)) > 1e-2);
    }
  }
}

TEST_CASE("reference: head norm gives RMS |1 - lambda_init| per head with unit subln") {
  const int rows = 5, H = 3, D = 8, W = H * 2 * D;
  const Vec o = ref::random_normal(static_cast<std::size_t>(rows) * W, 31);
  const Vec ones(2 * D, 1.0);
  for (double li : {0.2, 0.5560582041556406, 1.7, -0.3}) {
    const Vec n = ref::head_rmsnorm(o, rows, H, D, ones, li);
    for (int r = 0; r < rows; ++r) {
      for (int h = 0; h < H; ++h) {
        double ms_in = 0.0, ms_out = 0.0;
        for (int c = 0; c < 2 * D; ++c) {
          const double a = o[r * W + h * 2 * D + c], b = n[r * W + h * 2 * D + c];
          ms_in += a * a / (2 * D);
          ms_out += b * b / (2 * D);
          CHECK(b * a * (1.0 - li) >= 0.0);  // same direction, flipped when 1 − λ_init < 0
        }
        INFO("lambda_init " << li << " row " << r << " head " << h);
        CHECK(std::sqrt(ms_out) ==
              doctest::Approx(std::fabs(1.0 - li) * std::sqrt(ms_in / (ms_in + 1e-5))).epsilon(1e-13));
        CHECK(std::sqrt(ms_out) == doctest::Approx(std::fabs(1.0 - li)).epsilon(1e-4));
      }
    }
  }
  SUBCASE("subln scales elementwise, eps matters for tiny heads, zeros stay zero") {
    Vec gain(2 * D);
    for (int c = 0; c < 2 * D; ++c) gain[c] = 1.0 + 0.1 * c;
    const Vec unit = ref::head_rmsnorm(o, rows, H, D, ones, 0.2);
    const Vec scaled = ref::head_rmsnorm(o, rows, H, D, gain, 0.2);
    for (int i = 0; i < rows * W; ++i) CHECK(scaled[i] == doctest::Approx(unit[i] * gain[i % (2 * D)]).epsilon(1e-14));
    // A head of constant 1e-3: mean square 1e-6, so the output is 1e-3/sqrt(1.1e-5)·0.8.
    Vec tiny(W, 0.0);
    for (int c = 0; c < 2 * D; ++c) tiny[c] = 1e-3;
    const Vec nt = ref::head_rmsnorm(tiny, 1, H, D, ones, 0.2);
    CHECK(nt[0] == doctest::Approx(0.8 * 1e-3 / std::sqrt(1.1e-5)).epsilon(1e-14));
    CHECK(nt[2 * D] == 0.0);  // heads 1 and 2 are all zero: no NaN
  }
}

TEST_CASE("reference: layer_forward matches an independently written layer") {
  const double theta = 10000.0;
  struct Case {
    int E, H, Hkv, depth, S;
  };
  for (const Case c : {Case{32, 2, 2, 0, 6}, Case{64, 4, 2, 3, 11}, Case{48, 3, 1, 5, 9}}) {
    INFO("E " << c.E << " H " << c.H << " Hkv " << c.Hkv);
    const ref::AttnShape s = ref::make_shape(c.E, c.H, c.Hkv);
    const ref::AttnWeights w = ref::random_weights(s, 40 + c.E);
    const Vec x = ref::random_normal(static_cast<std::size_t>(c.S) * c.E, 41 + c.E);
    const Vec y = ref::layer_forward(s, w, c.depth, theta, x, c.S);
    CHECK(max_abs_diff(y, naive_layer(s, w, c.depth, theta, x, c.S)) < 1e-12);
  }
}

TEST_CASE("reference: lambda below 0 and above 1 go through the whole layer") {
  const ref::AttnShape s = ref::make_shape(32, 2, 1);  // D = 8
  const int S = 8, depth = 2;
  ref::AttnWeights w = ref::random_weights(s, 51);
  w.lq1 = w.lk1 = w.lq2 = w.lk2 = Vec(8, 0.0);
  const Vec x = ref::random_normal(static_cast<std::size_t>(S) * s.E, 52);
  for (double dot1 : {1.25, 0.0}) {
    // dot1 = 1.25, dot2 = 0.4 -> λ = 2.469...; dot1 = 0, dot2 = 1.25 -> λ = 1 − e^1.25 + λ_init < 0.
    const double dot2 = dot1 > 0 ? 0.4 : 1.25;
    w.lq1[0] = 1.0;
    w.lk1[0] = dot1;
    w.lq2[0] = 1.0;
    w.lk2[0] = dot2;
    const double lambda = std::exp(dot1) - std::exp(dot2) + 0.4707130183435842;
    CHECK(ref::lambda_value(w, s.D, depth) == doctest::Approx(lambda).epsilon(1e-14));
    CHECK((lambda > 1.0 || lambda < 0.0));
    INFO("lambda " << lambda);
    const ref::QKV p = ref::project_qkv(s, w, 10000.0, x, S);
    const Vec o = ref::diff_attention(p.q, p.k, p.v, S, S, s.H, s.Hkv, s.D, lambda, 0);
    for (int h = 0; h < s.H; ++h)
      for (int c = 0; c < 2 * s.D; ++c)
        CHECK(o[h * 2 * s.D + c] == doctest::Approx((1.0 - lambda) * p.v[c]).epsilon(1e-12));
    const Vec y = ref::layer_forward(s, w, depth, 10000.0, x, S);
    CHECK(ref::compare(y, naive_layer(s, w, depth, 10000.0, x, S)).max_abs_err < 1e-12);
    CHECK(ref::compare(y, y).finite);
  }
}

TEST_CASE("reference: prefill then decode with the KV cache equals one long prefill") {
  const ref::AttnShape s = ref::make_shape(64, 4, 2);
  const ref::AttnWeights w = ref::random_weights(s, 61);
  const int total = 23, depth = 1;
  const double theta = 10000.0;
  const Vec x = ref::random_normal(static_cast<std::size_t>(total) * s.E, 62);
  const Vec full = ref::layer_forward(s, w, depth, theta, x, total);
  auto rows = [&](const Vec& v, int r0, int n) {
    return Vec(v.begin() + static_cast<std::ptrdiff_t>(r0) * s.E,
               v.begin() + static_cast<std::ptrdiff_t>(r0 + n) * s.E);
  };
  for (const std::vector<int>& chunks : {std::vector<int>{9, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1},
                                         std::vector<int>{9, 5, 1, 1, 7}, std::vector<int>{1, 1, 21}}) {
    ref::KVCache cache;
    int pos = 0;
    for (int n : chunks) {
      const Vec y = ref::layer_forward(s, w, depth, theta, rows(x, pos, n), n, pos, &cache);
      INFO("chunk at " << pos << " of " << n);
      CHECK(max_abs_diff(y, rows(full, pos, n)) < 1e-12);
      pos += n;
      CHECK(cache.len == pos);
    }
    CHECK(pos == total);
    CHECK(cache.k.size() == static_cast<std::size_t>(total) * s.k_width());
    CHECK(cache.v.size() == static_cast<std::size_t>(total) * s.v_width());
  }
  // Causality: a prefill of the first 9 tokens gives the first 9 rows.
  CHECK(max_abs_diff(ref::layer_forward(s, w, depth, theta, rows(x, 0, 9), 9), rows(full, 0, 9)) < 1e-12);
  // Mismatched positions are refused.
  ref::KVCache cache;
  ref::layer_forward(s, w, depth, theta, rows(x, 0, 4), 4, 0, &cache);
  CHECK_THROWS_AS(ref::layer_forward(s, w, depth, theta, rows(x, 4, 1), 1, 5, &cache), std::invalid_argument);
  CHECK_THROWS_AS(ref::layer_forward(s, w, depth, theta, rows(x, 4, 1), 1, 4), std::invalid_argument);
}

TEST_CASE("reference: random helpers are deterministic and scaled as documented") {
  const ref::AttnShape s = ref::make_shape(128, 4, 2);
  const ref::AttnWeights a = ref::random_weights(s, 7), b = ref::random_weights(s, 7), c = ref::random_weights(s, 8);
  CHECK(a.wq == b.wq);
  CHECK(a.subln == b.subln);
  CHECK(a.wq != c.wq);
  auto stats = [](const Vec& v, double& mean, double& sd) {
    mean = 0.0;
    for (double x : v) mean += x / v.size();
    double var = 0.0;
    for (double x : v) var += (x - mean) * (x - mean) / v.size();
    sd = std::sqrt(var);
  };
  double mean, sd;
  stats(a.wq, mean, sd);
  CHECK(std::fabs(mean) < 0.01);
  CHECK(sd == doctest::Approx(1.0 / std::sqrt(128.0)).epsilon(0.03));
  Vec lam = a.lq1;
  lam.insert(lam.end(), a.lk1.begin(), a.lk1.end());
  lam.insert(lam.end(), a.lq2.begin(), a.lq2.end());
  lam.insert(lam.end(), a.lk2.begin(), a.lk2.end());
  stats(lam, mean, sd);
  CHECK(sd == doctest::Approx(0.1).epsilon(0.3));  // only 64 samples
  stats(a.subln, mean, sd);
  CHECK(mean == doctest::Approx(1.0).epsilon(0.1));
  CHECK(sd < 0.2);
  stats(ref::random_normal(20000, 3, 2.0), mean, sd);
  CHECK(std::fabs(mean) < 0.05);
  CHECK(sd == doctest::Approx(2.0).epsilon(0.03));
}

TEST_CASE("reference: float16 and float32 rounding") {
  CHECK(ref::round_to_f16(1.0) == 1.0);
  CHECK(ref::round_to_f16(1.0 + std::ldexp(1.0, -11)) == 1.0);                            // tie -> even
  CHECK(ref::round_to_f16(1.0 + 3 * std::ldexp(1.0, -11)) == 1.0 + std::ldexp(1.0, -9));  // tie -> even
  CHECK(ref::round_to_f16(0.1) == 0.0999755859375);
  CHECK(ref::round_to_f16(-0.1) == -0.0999755859375);
  CHECK(ref::round_to_f16(65519.0) == 65504.0);
  CHECK(std::isinf(ref::round_to_f16(65520.0)));
  CHECK(ref::round_to_f16(std::ldexp(1.0, -24)) == std::ldexp(1.0, -24));  // smallest subnormal
  CHECK(ref::round_to_f16(std::ldexp(1.0, -25)) == 0.0);                   // tie -> even (zero)
  CHECK(ref::round_to_f16(3 * std::ldexp(1.0, -26)) == std::ldexp(1.0, -24));
  CHECK(ref::round_to_f16(std::ldexp(1.0, -14) * 1.5) == std::ldexp(1.0, -14) * 1.5);
  CHECK(ref::round_to_f32(0.1) == static_cast<double>(0.1f));
  const Vec v = {0.1, 1.0 / 3.0};
  CHECK(ref::round_to_f16(v)[1] == 0.333251953125);
}

TEST_CASE("reference: compare reports max error, nmse and non-finite values") {
  const Vec r = {1.0, -2.0, 0.0, 2.0};
  const ref::ErrorStats st = ref::compare(std::vector<float>{1.0f, -2.5f, 0.0f, 2.0f}, r);
  CHECK(st.max_abs_err == 0.5);
  CHECK(st.max_abs_ref == 2.0);
  CHECK(st.nmse == doctest::Approx(0.25 / 9.0));
  CHECK(st.finite);
  CHECK_FALSE(ref::compare(Vec{1.0, NAN, 0.0, 2.0}, r).finite);
  CHECK_THROWS_AS(ref::compare(Vec{1.0}, r), std::invalid_argument);
}

TEST_CASE("reference: reproduces the PyTorch layer fixture (tests/data/layer_fixture)") {
  const std::string dir = std::string(DIFFVK_TEST_DATA_DIR) + "/layer_fixture/";
  INFO("fixture directory " << dir << " (regenerate with tests/python/make_layer_fixture.py)");
  const nlohmann::json meta = nlohmann::json::parse(read_file(dir + "meta.json"));
  const ref::AttnShape s = ref::make_shape(meta.at("E"), meta.at("H"), meta.at("Hkv"));
  const int depth = meta.at("depth");
  const double theta = meta.at("rope_theta");
  CHECK(s.Hkv < s.H);  // the fixture exercises GQA

  auto t32 = load_safetensors(dir + "layer.safetensors");
  auto t16 = load_safetensors(dir + "layer_f16.safetensors");
  const ref::AttnWeights w32 = weights_from(t32, s);
  const ref::AttnWeights w16 = weights_from(t16, s);
  CHECK(ref::lambda_value(w32, s.D, depth) == doctest::Approx(meta.at("lambda").get<double>()).epsilon(1e-12));
  CHECK(ref::lambda_init(depth) == doctest::Approx(meta.at("lambda_init").get<double>()).epsilon(1e-15));
  // The F16 file holds torch's rounding of the F32 weights; ours must agree bit for bit.
  CHECK(max_abs_diff(ref::round_to_f16(w32.wq), w16.wq) == 0.0);
  CHECK(max_abs_diff(ref::round_to_f16(w32.wo), w16.wo) == 0.0);
  CHECK(max_abs_diff(ref::round_to_f16(w32.subln), w16.subln) == 0.0);

  const Array x = load_npy(dir + "x.npy");
  const Array y = load_npy(dir + "y.npy");
  const Array y16 = load_npy(dir + "y_f16w.npy");
  REQUIRE(x.shape.size() == 2);
  REQUIRE(x.shape[1] == static_cast<std::size_t>(s.E));
  const int S = static_cast<int>(x.shape[0]);
  REQUIRE(y.shape == x.shape);
  REQUIRE(y16.shape == x.shape);

  const Vec got = ref::layer_forward(s, w32, depth, theta, x.data, S);
  CHECK(max_abs_diff(got, y.data) <= 1e-5);
  const Vec got16 = ref::layer_forward(s, w16, depth, theta, x.data, S);
  CHECK(max_abs_diff(got16, y16.data) <= 1e-5);
  CHECK(max_abs_diff(y.data, y16.data) > 1e-4);  // the two expected outputs are distinguishable

  const Array xb = load_npy(dir + "x_batched.npy");
  const Array yb = load_npy(dir + "y_batched.npy");
  REQUIRE(xb.shape.size() == 3);
  REQUIRE(yb.shape == xb.shape);
  const std::size_t B = xb.shape[0], Sb = xb.shape[1], per = Sb * s.E;
  for (std::size_t b = 0; b < B; ++b) {
    const Vec xs(xb.data.begin() + b * per, xb.data.begin() + (b + 1) * per);
    const Vec ys(yb.data.begin() + b * per, yb.data.begin() + (b + 1) * per);
    INFO("batch " << b);
    CHECK(max_abs_diff(ref::layer_forward(s, w32, depth, theta, xs, static_cast<int>(Sb)), ys) <= 1e-5);
  }
}
