// Rewind, the tokens a session holds, and prompt-prefix reuse.
// Rewinding and continuing runs the same programs at the same positions as a session that never held the
// dropped tokens, so its logits are bit-identical to that session's (both precisions: nothing of the dropped
// tokens may leak into them). Against one whole prefill of the same tokens (other chunk programs), the model
// tolerance of tests/model/test_model.cpp applies.
#include <doctest/doctest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "diffvk/model.hpp"
#include "gpu_test.hpp"
#include "model_parity.hpp"

using namespace diffvk;

namespace {
const std::string kTiny = std::string(DIFFVK_TEST_DATA_DIR) + "/model_tiny";
const std::vector<int32_t> kSystem{2, 72, 101, 108, 108, 111, 32, 119, 111, 114, 108};      // 11: the kept prefix
const std::vector<int32_t> kTurn1{100, 33, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14};  // 16: dropped
const std::vector<int32_t> kTurn2{50, 60, 70, 80, 90, 95, 99};                              // 7: replaces it

std::vector<int32_t> cat(std::vector<int32_t> a, const std::vector<int32_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

void rewind_case(Precision precision) {
  auto ctx = test::make_context_or_skip(precision);
  if (!ctx) return;
  const bool fp16 = ctx->precision() == Precision::fp16;
  auto model = Model::load(*ctx, kTiny);
  const uint32_t V = model->config().vocab_size;
  const SessionOptions so{64, 8};  // 8-row chunks: the 16-token turn spans two

  // The reference: a session that never held turn 1.
  auto fresh = Session::create(*model, so);
  fresh->prefill(kSystem);
  const auto want = fresh->prefill(kTurn2);
  const auto want_next = fresh->decode(65);

  auto s = Session::create(*model, so);
  s->prefill(kSystem);
  s->prefill(kTurn1);
  CHECK(s->tokens() == cat(kSystem, kTurn1));
  // Past the position: refused, nothing changes.
  CHECK_THROWS_WITH_AS(s->rewind(28), doctest::Contains("rewind: 28 tokens to keep, but the session holds 27"), Error);
  CHECK(s->position() == 27);
  s->rewind(uint32_t(kSystem.size()));
  CHECK(s->position() == kSystem.size());
  CHECK(s->tokens() == kSystem);
  CHECK(s->prefill(kTurn2) == want);
  CHECK(s->decode(65) == want_next);
  CHECK(s->tokens() == cat(cat(kSystem, kTurn2), {65}));

  // Rewind by one and decode another token (regenerate the last token); rewind(position) changes nothing.
  s->rewind(s->position());
  s->rewind(s->position() - 1);
  CHECK(s->decode(65) == want_next);
  // The buffer form writes the same logits into the caller's buffer; a short buffer is refused, nothing changes.
  s->rewind(s->position() - 1);
  std::vector<float> into(V + 1, -7.0f);
  const uint32_t at = s->position();
  CHECK_THROWS_WITH_AS(s->decode(65, into.data(), V - 1), doctest::Contains(("need " + std::to_string(V)).c_str()),
                       Error);
  CHECK(s->position() == at);
  s->decode(65, into.data(), into.size());
  CHECK(std::vector<float>(into.begin(), into.begin() + V) == want_next);
  CHECK(into[V] == -7.0f);
  // decode_sample's input token is held too.
  const int32_t picked = s->decode_sample(66);
  CHECK(s->tokens().back() == 66);
  CHECK(picked >= 0);

  // Against one whole prefill of the kept tokens + turn 2 (other programs): the model tolerance.
  auto whole = Session::create(*model, SessionOptions{64, 32});
  const auto one = whole->prefill(cat(kSystem, kTurn2));
  const auto p = test::parity(want, one, V);
  INFO("rewound vs one prefill: max_abs=" << p.max_abs);
  CHECK(p.max_abs <= (fp16 ? 2e-2 : 1e-4) * std::max(1.0, p.max_ref));

  // rewind(0) is reset.
  s->rewind(0);
  CHECK(s->tokens().empty());
  fresh->reset();
  CHECK(s->prefill(kSystem) == fresh->prefill(kSystem));
}

void reuse_case(Precision precision) {
  auto ctx = test::make_context_or_skip(precision);
  if (!ctx) return;
  auto model = Model::load(*ctx, kTiny);
  const SessionOptions so{64, 8};
  // The reference: the system prompt, then turn 2, on a fresh session.
  auto fresh = Session::create(*model, so);
  fresh->prefill(kSystem);
  const auto want = fresh->prefill(kTurn2);

  auto s = Session::create(*model, so);
  s->prefill(kSystem);
  s->prefill(kTurn1);
  uint32_t reused = 0;
  // Holds system + turn 1; given system + turn 2 it keeps the system prompt and prefills turn 2 only.
  CHECK(s->prefill_reusing(cat(kSystem, kTurn2), &reused) == want);
  CHECK(reused == kSystem.size());
  CHECK(s->tokens() == cat(kSystem, kTurn2));

  // The same sequence again: every token but the last is kept, the last is recomputed (the one-row program).
  const auto again = s->prefill_reusing(cat(kSystem, kTurn2), &reused);
  CHECK(reused == kSystem.size() + kTurn2.size() - 1);
  fresh->rewind(fresh->position() - 1);
  CHECK(again == fresh->decode(kTurn2.back()));

  // A shorter sequence that is a prefix of what is held: keeps all but its last token.
  const std::vector<int32_t> shorter(kSystem.begin(), kSystem.begin() + 5);
  s->prefill_reusing(shorter, &reused);
  CHECK(reused == 4);
  CHECK(s->tokens() == shorter);

  // Nothing in common: everything is prefilled, as on a fresh session.
  fresh->reset();
  const auto fresh_turn = fresh->prefill(kTurn1);
  CHECK(s->prefill_reusing(kTurn1, &reused) == fresh_turn);
  CHECK(reused == 0);

  // Checks come first and leave the session as it was.
  const auto held = s->tokens();
  CHECK_THROWS_WITH_AS(s->prefill_reusing({}), doctest::Contains("no tokens"), Error);
  CHECK_THROWS_WITH_AS(s->prefill_reusing(cat(kTurn1, {-1})), doctest::Contains("index 16"), Error);
  CHECK_THROWS_WITH_AS(s->prefill_reusing(std::vector<int32_t>(65, 1)), doctest::Contains("exceed the context of 64"),
                       Error);
  CHECK(s->tokens() == held);
}
}  // namespace

TEST_CASE("session: rewind keeps the prefix and continues as a session that never held the rest fp32") {
  rewind_case(Precision::fp32);
}
TEST_CASE("session: rewind keeps the prefix and continues as a session that never held the rest fp16") {
  rewind_case(Precision::fp16);
}
TEST_CASE("session: prefix reuse prefills only what differs fp32") { reuse_case(Precision::fp32); }
TEST_CASE("session: prefix reuse prefills only what differs fp16") { reuse_case(Precision::fp16); }
