// diffvk — float64 reference of the Mamba-1 conv1d and selective scan, the GMU gate and LayerNorm (ssm_ref.hpp).
#include "reference/ssm_ref.hpp"

#include <cmath>
#include <cstddef>
#include <stdexcept>

namespace diffvk::ref {

double softplus(double x) { return x > 20.0 ? x : std::log1p(std::exp(x)); }
double silu(double x) { return x / (1.0 + std::exp(-x)); }

std::vector<double> causal_conv1d(const std::vector<double>& x, int T, int C, const std::vector<double>& w, int K,
                                  const std::vector<double>& bias, std::vector<double>& state, bool silu_out) {
  if (T < 0 || C <= 0 || K <= 0 || x.size() != size_t(T) * C || w.size() != size_t(C) * K ||
      state.size() != size_t(K - 1) * C || (!bias.empty() && bias.size() != size_t(C)))
    throw std::invalid_argument("ref::causal_conv1d: bad sizes");
  // The K-1 state rows, then the T input rows: row r of `in` is input t = r - (K-1).
  std::vector<double> in(size_t(T + K - 1) * C);
  for (size_t i = 0; i < state.size(); ++i) in[i] = state[i];
  for (size_t i = 0; i < x.size(); ++i) in[state.size() + i] = x[i];
  std::vector<double> out(size_t(T) * C);
  for (int t = 0; t < T; ++t)
    for (int c = 0; c < C; ++c) {
      double acc = bias.empty() ? 0.0 : bias[c];
      for (int j = 0; j < K; ++j) acc += w[size_t(c) * K + j] * in[size_t(t + j) * C + c];
      out[size_t(t) * C + c] = silu_out ? silu(acc) : acc;
    }
  for (int r = 0; r < K - 1; ++r)
    for (int c = 0; c < C; ++c) state[size_t(r) * C + c] = in[size_t(T + r) * C + c];
  return out;
}

ScanResult selective_scan(const std::vector<double>& u, const std::vector<double>& delta_raw,
                          const std::vector<double>& A_log, const std::vector<double>& B, const std::vector<double>& Cm,
                          const std::vector<double>& D, const std::vector<double>* z, int T, int C, int S,
                          std::vector<double>& h) {
  const size_t tc = size_t(T) * C, ts = size_t(T) * S, cs = size_t(C) * S;
  if (T < 0 || C <= 0 || S <= 0 || u.size() != tc || delta_raw.size() != tc || A_log.size() != cs || B.size() != ts ||
      Cm.size() != ts || D.size() != size_t(C) || (z && z->size() != tc) || h.size() != cs)
    throw std::invalid_argument("ref::selective_scan: bad sizes");
  ScanResult r;
  r.y.resize(tc);
  r.y_pre.resize(tc);
  for (int t = 0; t < T; ++t)
    for (int c = 0; c < C; ++c) {
      const double x = u[size_t(t) * C + c], delta = softplus(delta_raw[size_t(t) * C + c]);
      double y = D[c] * x;
      for (int s = 0; s < S; ++s) {
        const double A = -std::exp(A_log[size_t(c) * S + s]);
        double& hs = h[size_t(c) * S + s];
        hs = std::exp(delta * A) * hs + delta * B[size_t(t) * S + s] * x;
        y += Cm[size_t(t) * S + s] * hs;
      }
      r.y_pre[size_t(t) * C + c] = y;
      r.y[size_t(t) * C + c] = z ? y * silu((*z)[size_t(t) * C + c]) : y;
    }
  return r;
}

std::vector<double> gmu_gate(const std::vector<double>& g, const std::vector<double>& m) {
  if (g.size() != m.size()) throw std::invalid_argument("ref::gmu_gate: bad sizes");
  std::vector<double> out(g.size());
  for (size_t i = 0; i < g.size(); ++i) out[i] = silu(g[i]) * m[i];
  return out;
}

std::vector<double> layer_norm(const std::vector<double>& x, int rows, int E, const std::vector<double>& w,
                               const std::vector<double>& b, double eps) {
  if (rows < 0 || E <= 0 || x.size() != size_t(rows) * E || w.size() != size_t(E) ||
      (!b.empty() && b.size() != size_t(E)))
    throw std::invalid_argument("ref::layer_norm: bad sizes");
  std::vector<double> out(x.size());
  for (int r = 0; r < rows; ++r) {
    const double* xr = &x[size_t(r) * E];
    double mean = 0, var = 0;
    for (int i = 0; i < E; ++i) mean += xr[i];
    mean /= E;
    for (int i = 0; i < E; ++i) var += (xr[i] - mean) * (xr[i] - mean);
    var /= E;
    const double inv = 1.0 / std::sqrt(var + eps);
    for (int i = 0; i < E; ++i) out[size_t(r) * E + i] = (xr[i] - mean) * inv * w[i] + (b.empty() ? 0.0 : b[i]);
  }
  return out;
}

}  // namespace diffvk::ref
