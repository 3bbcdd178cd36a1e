// Tests of the float64 Phi-4-mini-flash (SambaY) reference (runtime/reference/phi4flash_ref.*): its full form
// against an independent PyTorch implementation (tests/data/phi4flash_tiny/, written by
// tests/python/make_phi4flash_fixture.py from the public ports), the recurrent form (chunked prefill, decode
// across the sliding window's boundary) against the full form, and the YOCO form (logits of some rows only)
// against the full form; and its fp16 activation storage (ActivationStorage) against a NumPy model of it.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "diffvk/npy.hpp"
#include "phi4flash_fixture.hpp"

namespace ref = diffvk::ref;
using Vec = std::vector<double>;

namespace {

const std::string kDir = std::string(DIFFVK_TEST_DATA_DIR) + "/phi4flash_tiny";

std::string read_text(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  REQUIRE(f.good());
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

struct Fixture {
  diffvk::Phi4FlashConfig config;
  ref::SambaYShape shape;
  ref::SambaYWeights weights;
  std::vector<int> tokens;
  Vec logits;  // tokens.size() x vocab, float64
};

const Fixture& fixture() {
  static const Fixture fx = [] {
    Fixture f;
    f.config = diffvk::parse_phi4flash_config(read_text(kDir + "/config.json"), "phi4flash_tiny/config.json");
    f.shape = diffvk::test::phi4flash_shape(f.config);
    const auto file = diffvk::SafetensorsFile::open(kDir + "/model.safetensors");
    f.weights = diffvk::test::phi4flash_weights(f.shape, file);
    CHECK(file.find("lm_head.weight") == nullptr);  // tied, as the published checkpoint
    const diffvk::NpyArray t = diffvk::read_npy(kDir + "/tokens.npy");
    REQUIRE(t.dtype == "<i8");
    for (uint64_t i = 0; i < t.numel(); ++i) {
      int64_t v;
      std::memcpy(&v, t.data.data() + 8 * i, 8);
      f.tokens.push_back(int(v));
    }
    const diffvk::NpyArray l = diffvk::read_npy(kDir + "/logits.npy");
    REQUIRE(l.dtype == "<f8");
    REQUIRE(l.numel() == f.tokens.size() * uint64_t(f.shape.vocab));
    f.logits.resize(l.numel());
    std::memcpy(f.logits.data(), l.data.data(), l.data.size());
    return f;
  }();
  return fx;
}

// max |a − b| / max |b| over the rows `rows` of b (all rows of b when empty; a holds those rows in order).
double rel_err(const Vec& a, const Vec& b, int width, const std::vector<int>& rows = {}) {
  double m = 0, d = 0;
  const size_t n = rows.empty() ? b.size() / width : rows.size();
  REQUIRE(a.size() == n * width);
  for (size_t r = 0; r < n; ++r) {
    const size_t br = rows.empty() ? r : size_t(rows[r]);
    for (int c = 0; c < width; ++c) {
      m = std::max(m, std::fabs(b[br * width + c]));
      d = std::max(d, std::fabs(a[r * width + c] - b[br * width + c]));
    }
  }
  REQUIRE(m > 0);
  return d / m;
}

std::vector<int> slice(const std::vector<int>& v, size_t b, size_t e) { return {v.begin() + b, v.begin() + e}; }

// Runs the recurrent form over `tokens` in chunks of the given sizes (their sum = tokens.size()), returning the
// logits of every row.
Vec run_chunks(const ref::SambaYShape& s, const ref::SambaYWeights& w, const std::vector<int>& tokens,
               const std::vector<int>& chunks) {
  ref::SambaYState st = ref::sambay_new_state(s);
  Vec out;
  size_t at = 0;
  for (int n : chunks) {
    const Vec l = ref::sambay_forward(s, w, st, slice(tokens, at, at + n));
    out.insert(out.end(), l.begin(), l.end());
    at += n;
  }
  REQUIRE(at == tokens.size());
  CHECK(st.pos == int(tokens.size()));
  return out;
}

}  // namespace

TEST_CASE("phi4flash reference: the full form equals the PyTorch implementation of the ports (tiny checkpoint)") {
  const Fixture& f = fixture();
  REQUIRE(f.tokens.size() > size_t(f.shape.window + f.shape.d_conv));  // the window and the conv state both matter
  // Every layer kind is in the tiny model, at the places the plan of its config says.
  const diffvk::SambaYPlan plan = diffvk::sambay_plan(f.config);
  const std::vector<diffvk::SambaYLayerKind> kinds = {
      diffvk::SambaYLayerKind::mamba,        diffvk::SambaYLayerKind::sliding_attention,
      diffvk::SambaYLayerKind::mamba,        diffvk::SambaYLayerKind::sliding_attention,
      diffvk::SambaYLayerKind::memory_mamba, diffvk::SambaYLayerKind::full_attention,
      diffvk::SambaYLayerKind::gated_memory, diffvk::SambaYLayerKind::cross_attention};
  CHECK(plan.kinds == kinds);
  const Vec got = ref::sambay_forward_full(f.shape, f.weights, f.tokens);
  const double err = rel_err(got, f.logits, f.shape.vocab);
  MESSAGE("full form vs PyTorch: max |diff| / max |logit| = " << err);
  CHECK(err < 1e-10);
}

TEST_CASE("phi4flash reference: the recurrent form equals the full form across the sliding window's boundary") {
  const Fixture& f = fixture();
  const Vec full = ref::sambay_forward_full(f.shape, f.weights, f.tokens);
  const int T = int(f.tokens.size()), W = f.shape.window;  // 13 tokens, window 5
  SUBCASE("decode one token at a time") {
    CHECK(rel_err(run_chunks(f.shape, f.weights, f.tokens, std::vector<int>(T, 1)), full, f.shape.vocab) < 1e-12);
  }
  SUBCASE("prefill inside the window, then decode across its boundary") {
    std::vector<int> chunks = {W - 2};
    chunks.resize(size_t(T - W + 3), 1);
    CHECK(rel_err(run_chunks(f.shape, f.weights, f.tokens, chunks), full, f.shape.vocab) < 1e-12);
  }
  SUBCASE("a prefill longer than the window, then chunks and single tokens") {
    CHECK(rel_err(run_chunks(f.shape, f.weights, f.tokens, {W + 2, 3, 1, T - W - 6}), full, f.shape.vocab) < 1e-12);
  }
  SUBCASE("the whole sequence as one chunk") {
    CHECK(rel_err(run_chunks(f.shape, f.weights, f.tokens, {T}), full, f.shape.vocab) < 1e-12);
  }
}

TEST_CASE("phi4flash reference: YOCO prefill (cross-decoder only for the asked rows) equals the full form") {
  const Fixture& f = fixture();
  const ref::SambaYShape& s = f.shape;
  const Vec full = ref::sambay_forward_full(s, f.weights, f.tokens);
  const int T = int(f.tokens.size()), P = 9;  // a 9-token prompt (past the window), then decode
  for (const std::vector<int>& rows : {std::vector<int>{P - 1}, std::vector<int>{0, 4, 5, P - 1}, std::vector<int>{}}) {
    CAPTURE(rows.size());
    ref::SambaYState st = ref::sambay_new_state(s);
    const std::vector<int> prompt = slice(f.tokens, 0, P);
    const Vec l = ref::sambay_forward(s, f.weights, st, prompt, &rows);
    REQUIRE(l.size() == rows.size() * size_t(s.vocab));
    if (!rows.empty()) CHECK(rel_err(l, full, s.vocab, rows) < 1e-12);
    // The state after a YOCO prefill is complete: decoding on from it gives the full form's logits.
    CHECK(st.pos == P);
    CHECK(st.shared_k.size() == size_t(P) * s.kv_width());
    Vec rest;
    for (int t = P; t < T; ++t) {
      const Vec d = ref::sambay_forward(s, f.weights, st, {f.tokens[t]});
      rest.insert(rest.end(), d.begin(), d.end());
    }
    std::vector<int> tail;
    for (int t = P; t < T; ++t) tail.push_back(t);
    CHECK(rel_err(rest, full, s.vocab, tail) < 1e-12);
  }
  // The asked rows must be ascending row indices of the chunk.
  ref::SambaYState st = ref::sambay_new_state(s);
  const std::vector<int> bad = {3, 1};
  CHECK_THROWS_AS(ref::sambay_forward(s, f.weights, st, slice(f.tokens, 0, 4), &bad), std::invalid_argument);
}

TEST_CASE("phi4flash reference: recurrent = full on a second shape (12 layers, one KV group, window 3, K = 3)") {
  ref::SambaYShape s;
  s.vocab = 41, s.E = 24, s.L = 12, s.n_heads = 6, s.n_kv = 2, s.I = 20, s.d_inner = 36, s.d_state = 3;
  s.d_conv = 3, s.dt_rank = 2, s.window = 3;
  const ref::SambaYWeights w = ref::sambay_random_weights(s, 77);
  CHECK(s.kind(6) == ref::SambaYKind::memory_mamba);
  CHECK(s.kind(7) == ref::SambaYKind::full);
  CHECK(s.kind(8) == ref::SambaYKind::gmu);
  CHECK(s.kind(11) == ref::SambaYKind::cross);
  std::vector<int> tokens;
  for (int t = 0; t < 11; ++t) tokens.push_back((t * 17 + 5) % s.vocab);
  const Vec full = ref::sambay_forward_full(s, w, tokens);
  CHECK(rel_err(run_chunks(s, w, tokens, {2, 1, 4, 1, 1, 2}), full, s.vocab) < 1e-12);
  // The window matters: the same model with a window wider than the sequence differs after position 3.
  ref::SambaYShape wide = s;
  wide.window = 64;
  const Vec l = ref::sambay_forward_full(wide, w, tokens);
  CHECK(rel_err(Vec(l.begin(), l.begin() + 3 * s.vocab), Vec(full.begin(), full.begin() + 3 * s.vocab), s.vocab) <
        1e-12);
  CHECK(rel_err(l, full, s.vocab) > 1e-6);
  // Wrong weights are refused, naming the tensor.
  ref::SambaYWeights broken = w;
  broken.layers[6].A_log.pop_back();
  CHECK_THROWS_WITH_AS(ref::sambay_forward_full(s, broken, tokens), doctest::Contains("A_log"), std::invalid_argument);
}

TEST_CASE("phi4flash reference: a copied state resumes exactly (rewind by snapshot)") {
  const Fixture& f = fixture();
  const ref::SambaYShape& s = f.shape;
  const Vec full = ref::sambay_forward_full(s, f.weights, f.tokens);
  ref::SambaYState st = ref::sambay_new_state(s);
  ref::sambay_forward(s, f.weights, st, slice(f.tokens, 0, 6));
  const ref::SambaYState snapshot = st;                  // position 6: past the window, ring slots wrapped
  ref::sambay_forward(s, f.weights, st, {7, 8, 9, 10});  // another continuation
  st = snapshot;
  const Vec l = ref::sambay_forward(s, f.weights, st, slice(f.tokens, 6, f.tokens.size()));
  std::vector<int> rows;
  for (int t = 6; t < int(f.tokens.size()); ++t) rows.push_back(t);
  CHECK(rel_err(l, full, s.vocab, rows) < 1e-12);
}

TEST_CASE("phi4flash reference: the fixture tells the Mamba-1 scan from an averaged A_log, and rounding matters") {
  // The error an older TensorRT-LLM port made (one decay per channel: A_log averaged over the state dimension)
  // moves the logits far beyond the comparison's bound, so the PyTorch comparison would catch it.
  const Fixture& f = fixture();
  const ref::SambaYShape& s = f.shape;
  ref::SambaYWeights avg = f.weights;
  for (ref::SambaYLayer& l : avg.layers)
    for (size_t c = 0; c < l.A_log.size() / size_t(s.d_state); ++c) {
      double m = 0;
      for (int j = 0; j < s.d_state; ++j) m += l.A_log[c * s.d_state + j] / s.d_state;
      for (int j = 0; j < s.d_state; ++j) l.A_log[c * s.d_state + j] = m;
    }
  CHECK(rel_err(ref::sambay_forward_full(s, avg, f.tokens), f.logits, s.vocab) > 1e-3);
  // BF16 weights are exact in float and in half where in range: rounding them changes nothing but subnormals.
  CHECK(rel_err(ref::sambay_forward_full(s, ref::round_to_f32(f.weights), f.tokens), f.logits, s.vocab) < 1e-10);
  const Vec h = ref::sambay_forward_full(s, ref::round_to_f16(f.weights), f.tokens);
  CHECK(rel_err(h, f.logits, s.vocab) < 1e-6);  // measured 5e-9
}

TEST_CASE("phi4flash reference: fp16 activation storage costs what the NumPy model of it measures") {
  // ref::ActivationStorage rounds where an fp16 device stores an activation; tests/python/phi4flash_fp16_storage.py
  // rounds at the same points in its own forward. On the fixture's 13 tokens and the weights as an fp16 device holds
  // them it measured nmse 7.19e-6 over all rows and 2.29e-5 on the last row against no rounding.
  const Fixture& f = fixture();
  const ref::SambaYShape& s = f.shape;
  const ref::SambaYWeights w = diffvk::test::as_device_holds(f.weights, true);
  const Vec exact = ref::sambay_forward_full(s, w, f.tokens);
  ref::ActivationStorage a;
  a.fp16 = true;
  const Vec h = ref::sambay_forward_full(s, w, f.tokens, a);
  auto nmse = [&](size_t row0) {
    double se = 0, sr = 0;
    for (size_t i = row0 * size_t(s.vocab); i < exact.size(); ++i) {
      se += (h[i] - exact[i]) * (h[i] - exact[i]);
      sr += exact[i] * exact[i];
    }
    return se / sr;
  };
  CHECK(nmse(0) == doctest::Approx(7.19e-6).epsilon(0.01));
  CHECK(nmse(f.tokens.size() - 1) == doctest::Approx(2.29e-5).epsilon(0.01));
  // fused_from: L or more for every row is no fused row; one per token or none.
  a.fused_from.assign(f.tokens.size(), s.L);
  CHECK(ref::sambay_forward_full(s, w, f.tokens, a) == h);
  a.fused_from.back() = 0;  // the last row's SwiGLU fused in every layer: only that row changes
  const Vec fused = ref::sambay_forward_full(s, w, f.tokens, a);
  CHECK(std::equal(h.begin(), h.end() - s.vocab, fused.begin()));
  CHECK(!std::equal(h.end() - s.vocab, h.end(), fused.end() - s.vocab));
  a.fused_from.pop_back();
  CHECK_THROWS_AS(ref::sambay_forward_full(s, w, f.tokens, a), std::invalid_argument);
}
