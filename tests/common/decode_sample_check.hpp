// Session::decode_sample against decode() and the host sampler, for any model kind (tests/ops/test_sample.cpp,
// tests/model/test_phi4flash_session.cpp): two sessions in lockstep over the same prompt, greedy then top-k with draws.
#pragma once
#include <doctest/doctest.h>

#include <algorithm>
#include <random>
#include <vector>

#include "bench/check.hpp"
#include "diffvk/model.hpp"

namespace diffvk::test {

// Greedy: decode_sample's token == the first maximum of decode()'s logits at every step. Top-k (temperature 0.9,
// k 8) with a draw: decode_sample == sample_top_k on decode()'s logits (draws within 1e-5 of a bucket edge, where
// the device's float32 weights may legitimately choose the neighbour, are skipped; fewer than 3 of 12). Then the
// argument checks, which leave the session where it was.
inline void check_decode_sample(Model& model, const std::vector<int32_t>& prompt, const SessionOptions& so) {
  const uint32_t V = model.config().vocab_size;
  auto ref = Session::create(model, so);
  auto dev = Session::create(model, so);
  REQUIRE(dev->device_sampling());
  auto lg = ref->prefill(prompt);
  dev->prefill(prompt);
  int32_t tok = static_cast<int32_t>(std::max_element(lg.begin(), lg.end()) - lg.begin());
  for (int step = 0; step < 12; ++step) {
    lg = ref->decode(tok);
    const int32_t want_tok = static_cast<int32_t>(std::max_element(lg.begin(), lg.end()) - lg.begin());
    const int32_t got_tok = dev->decode_sample(tok);
    INFO("greedy step " << step);
    CHECK(got_tok == want_tok);
    tok = want_tok;
  }
  ref->reset();
  dev->reset();
  lg = ref->prefill(prompt);
  dev->prefill(prompt);
  tok = 3;
  std::mt19937_64 rng(99);
  size_t skipped = 0;
  for (int step = 0; step < 12; ++step) {
    const float u = std::generate_canonical<float, 24>(rng) * 0.999999f;
    lg = ref->decode(tok);
    const int32_t got_tok = dev->decode_sample(tok, 0.9f, 8, u);
    if (bench::sample_draw_near_edge(lg, 0.9f, 8, u, 1e-5)) {
      ++skipped;
    } else {
      INFO("top-k step " << step << " u=" << u);
      CHECK(got_tok == sample_top_k(lg.data(), V, 0.9f, 8, u));
    }
    tok = got_tok;
  }
  CHECK(skipped < 3);
  const uint32_t pos = dev->position();
  CHECK_THROWS_AS(dev->decode_sample(tok, 0.9f, 0, 0.5f), Error);
  CHECK_THROWS_AS(dev->decode_sample(tok, 0.9f, kDeviceTopKMax + 1, 0.5f), Error);
  CHECK_THROWS_AS(dev->decode_sample(tok, 0.9f, 8, 1.0f), Error);
  CHECK_THROWS_AS(dev->decode_sample(-1), Error);
  CHECK(dev->position() == pos);
}

}  // namespace diffvk::test
