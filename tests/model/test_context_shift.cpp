// Context overflow under the shift policy (Session::shift, prefill_shifting, generate with
// ContextOverflow::shift; docs/context-overflow.md). The kernel against float64 is in tests/ops/test_kv_shift.cpp.
// Here, on the tiny model: layer 0's keys depend only on the token and its position, so after a shift its
// cache rows must equal (within one rounding) those of a fresh prefill of the tokens the session now holds;
// the bookkeeping (tokens, history, the exact prefix, saved state); long prompts and long generations.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "diffvk/generate.hpp"
#include "diffvk/model.hpp"
#include "diffvk/tokenizer.hpp"
#include "gpu_test.hpp"
#include "model_fixture.hpp"
#include "status_of.hpp"

using namespace diffvk;

namespace {
const std::string kTiny = std::string(DIFFVK_TEST_DATA_DIR) + "/model_tiny";

std::vector<int32_t> tokens(size_t n, int32_t salt) { return test::pattern_tokens(n, salt, 37, 11, 3); }
std::vector<int32_t> cat(std::vector<int32_t> a, const std::vector<int32_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// Layer 0's K and V rows (every KV head, rows 0 ... n-1) from a saved state (docs/session-state.md, version 2).
std::vector<double> layer0(const std::vector<uint8_t>& state, const ModelConfig& c, bool fp16) {
  uint32_t n = 0;
  std::memcpy(&n, state.data() + 36, 4);
  const size_t es = fp16 ? 2 : 4, elems = size_t(2) * c.num_kv_heads * n * c.kv_row();  // rows of 2D (V1) or D (V2)
  const std::vector<uint8_t> bytes(state.begin() + 44 + 4 * n, state.begin() + 44 + 4 * n + elems * es);
  return test::unpack(bytes, fp16);
}

void layer0_case(Precision precision, const std::string& dir = kTiny) {
  auto ctx = test::make_context_or_skip(precision);
  if (!ctx) return;
  const bool fp16 = ctx->precision() == Precision::fp16;
  auto model = Model::load(*ctx, dir);
  const ModelConfig& c = model->config();
  const auto all = tokens(45, 1);
  auto s = Session::create(*model, SessionOptions{64, 16});
  s->prefill(all);
  const uint32_t keep = 6, discard = 13;  // 26 rows move: two passes of <= 13
  s->shift(keep, discard);
  const auto held = cat(std::vector<int32_t>(all.begin(), all.begin() + keep),
                        std::vector<int32_t>(all.begin() + keep + discard, all.end()));
  CHECK(s->position() == all.size() - discard);
  CHECK(s->tokens() == held);
  CHECK(s->history() == all);

  auto fresh = Session::create(*model, SessionOptions{64, 16});
  fresh->prefill(held);
  const auto got = layer0(s->save_state(), c, fp16), want = layer0(fresh->save_state(), c, fp16);
  REQUIRE(got.size() == want.size());
  double worst = 0, scale = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    worst = std::max(worst, std::fabs(got[i] - want[i]));
    scale = std::max(scale, std::fabs(want[i]));
  }
  INFO("layer 0 K/V after the shift vs a fresh prefill: max_abs=" << worst << " max |ref|=" << scale);
  // fp32: the rotation composed in float (a few ulps); fp16: the moved keys are rounded to fp16 twice.
  CHECK(worst <= (fp16 ? 2e-3 : 2e-5) * std::max(1.0, scale));

  // Rows past keep are approximate now: prefix reuse keeps only the first keep tokens.
  uint32_t reused = 99;
  s->prefill_reusing(cat(held, {5}), &reused);
  CHECK(reused == keep);
  CHECK(s->tokens() == cat(held, {5}));
}

}  // namespace

TEST_CASE("context shift: layer 0 equals a fresh prefill of the kept tokens, fp32") { layer0_case(Precision::fp32); }
TEST_CASE("context shift: layer 0 equals a fresh prefill of the kept tokens, fp16") { layer0_case(Precision::fp16); }
// DIFF V2's caches: rows of D, one head each (tests/data/model_tiny_v2).
TEST_CASE("context shift: layer 0 of a DIFF V2 model equals a fresh prefill of the kept tokens, fp32") {
  layer0_case(Precision::fp32, std::string(DIFFVK_TEST_DATA_DIR) + "/model_tiny_v2");
}
TEST_CASE("context shift: layer 0 of a DIFF V2 model equals a fresh prefill of the kept tokens, fp16") {
  layer0_case(Precision::fp16, std::string(DIFFVK_TEST_DATA_DIR) + "/model_tiny_v2");
}

TEST_CASE("context shift: bad arguments change nothing, the exact prefix survives a saved state, decode goes on") {
  auto ctx = test::make_context(Precision::fp32);
  auto model = Model::load(*ctx, kTiny);
  auto s = Session::create(*model, SessionOptions{32, 8});
  const auto t = tokens(20, 2);
  s->prefill(t);
  CHECK_THROWS_WITH_AS(s->shift(4, 0), doctest::Contains("shift:"), Error);
  CHECK_THROWS_WITH_AS(s->shift(10, 11), doctest::Contains("the session holds 20"), Error);
  CHECK(s->position() == 20);
  CHECK(s->tokens() == t);
  // make_room: nothing when the rows fit; refused when they cannot fit next to the kept tokens.
  CHECK_FALSE(s->make_room(4, 12));
  CHECK(s->position() == 20);
  CHECK_THROWS_WITH_AS(s->make_room(4, 29), doctest::Contains("make_room"), Error);
  CHECK(s->position() == 20);
  s->shift(4, 16);  // nothing moves: the last 16 tokens go
  CHECK(s->tokens() == std::vector<int32_t>(t.begin(), t.begin() + 4));
  s->prefill(tokens(10, 3));
  CHECK(s->make_room(4, 20));  // 14 held: max(half of the 10 after keep, the 2 the rows need) = 5 go
  CHECK(s->position() == 9);
  s->prefill(tokens(5, 8));
  s->shift(4, 5);
  const auto state = s->save_state();
  auto r = Session::create(*model, SessionOptions{32, 8});
  r->restore_state(state.data(), state.size());
  CHECK(r->tokens() == s->tokens());
  CHECK(r->decode(7) == s->decode(7));  // the restored shifted session goes on exactly like the saved one
  uint32_t reused = 99;
  r->prefill_reusing(r->tokens(), &reused);
  CHECK(reused == 4);  // the exact prefix was saved with the state
  // A rewind below the shift's kept tokens forgets the dropped ones.
  s->rewind(3);
  CHECK(s->history() == std::vector<int32_t>(t.begin(), t.begin() + 3));
}

TEST_CASE(
    "context shift: a prompt three times the context, then a conversation that only grows, continue without "
    "recompute") {
  auto ctx = test::make_context(Precision::fp32);
  auto model = Model::load(*ctx, kTiny);
  auto s = Session::create(*model, SessionOptions{40, 8});
  const auto prompt = tokens(120, 4);
  CHECK_THROWS_AS(s->prefill_shifting(prompt, 40), Error);  // keep must leave room
  uint32_t reused = 99;
  auto logits = s->prefill_shifting(prompt, 5, &reused);
  CHECK(reused == 0);
  CHECK(s->position() <= 40);
  CHECK(s->history() == prompt);
  const auto held = s->tokens();
  CHECK(std::vector<int32_t>(held.begin(), held.begin() + 5) ==
        std::vector<int32_t>(prompt.begin(), prompt.begin() + 5));
  CHECK(held.back() == prompt.back());
  for (float v : logits) REQUIRE(std::isfinite(v));
  const uint32_t was = s->position();
  const auto more = cat(prompt, tokens(3, 5));
  logits = s->prefill_shifting(more, 5, &reused);
  CHECK(reused == was);  // the whole history matched: only the 3 new tokens ran
  CHECK(s->history() == more);
  // A prompt that departs from the history inside the dropped part restarts from the exact prefix.
  auto other = more;
  other[60] = 1;
  s->prefill_shifting(other, 5, &reused);
  CHECK(reused == 5);
  CHECK(s->history() == other);
}

TEST_CASE("context shift: generate runs far past the context, and refuses by default") {
  auto ctx = test::make_context(Precision::fp32);
  auto model = Model::load(*ctx, kTiny);
  const Tokenizer tok = Tokenizer::load(kTiny);
  auto s = Session::create(*model, SessionOptions{48, 8});
  Sampler sampler(SamplingOptions{});
  const auto prompt = tokens(10, 6);
  GenerateOptions go;
  go.max_tokens = 150;
  CHECK_THROWS_WITH_AS(generate(*s, sampler, tok, prompt, go), doctest::Contains("positions; the session holds 48"),
                       Error);
  go.overflow = ContextOverflow::shift;
  go.keep = 48;
  CHECK(test::status_of([&] { generate(*s, sampler, tok, prompt, go); }) == Status::invalid_argument);
  go.keep = 4;
  const GenerateResult r = generate(*s, sampler, tok, prompt, go);
  CHECK(r.tokens.size() == 150);
  CHECK(r.shifts >= 3);
  CHECK(s->position() <= 48);
  CHECK(s->history() == cat(prompt, std::vector<int32_t>(r.tokens.begin(), r.tokens.end() - 1)));
  // The next turn: the whole conversation again; only its new tokens run.
  const auto next = cat(cat(prompt, r.tokens), tokens(4, 7));
  GenerateOptions go2 = go;
  go2.max_tokens = 5;
  const GenerateResult r2 = generate(*s, sampler, tok, next, go2);
  CHECK(r2.reused + 5 >= s->position() - 4);
  CHECK(r2.tokens.size() == 5);
}
