// A session's saved state (runtime/model/session_state.*, docs/session-state.md).
// A restored session continues bit for bit as the saved one would; every mismatch is refused naming what
// differs, and a refused restore changes nothing.
#include <doctest/doctest.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "diffvk/model.hpp"
#include "gpu_test.hpp"
#include "model/session_state.hpp"
#include "model_fixture.hpp"
#include "vk/pipeline_cache_file.hpp"  // fnv1a64

using namespace diffvk;

namespace {
const std::string kTiny = std::string(DIFFVK_TEST_DATA_DIR) + "/model_tiny";
const std::vector<int32_t> kPrompt{2, 72, 101, 108, 108, 111, 32, 119, 111, 114, 108, 100, 33};

// A copy of `state` with byte `at` set to v and the checksum made valid again (so the check after it is hit).
std::vector<uint8_t> patched(std::vector<uint8_t> state, size_t at, uint8_t v) {
  state[at] = v;
  const size_t body = state.size() - kSessionStateTrailerSize;
  const uint64_t h = fnv1a64(state.data(), body);
  for (int i = 0; i < 8; ++i) state[body + i] = uint8_t(h >> (8 * i));
  return state;
}

void roundtrip(Precision precision) {
  auto ctx = test::make_context_or_skip(precision);
  if (!ctx) return;
  auto model = Model::load(*ctx, kTiny);
  const SessionOptions so{48, 8};
  auto a = Session::create(*model, so);
  a->prefill(kPrompt);
  a->decode(65);
  const std::vector<uint8_t> state = a->save_state();
  CHECK(state.size() == a->state_bytes());
  const auto want = a->decode(66);  // what the saved session does next
  const auto want_more = a->prefill({70, 71, 72});

  auto b = Session::create(*model, so);
  b->prefill({5, 6, 7});  // something to replace
  b->restore_state(state.data(), state.size());
  CHECK(b->position() == kPrompt.size() + 1);
  std::vector<int32_t> held = kPrompt;
  held.push_back(65);
  CHECK(b->tokens() == held);
  CHECK(b->decode(66) == want);
  CHECK(b->prefill({70, 71, 72}) == want_more);

  // Through a file, into a session with a longer context (the rows of other heads start elsewhere).
  test::TempDir tmp("diffvk-state");
  const std::string path = tmp.path() + "/state.bin";
  auto c = Session::create(*model, SessionOptions{64, 8});
  b->rewind(uint32_t(kPrompt.size()) + 1);
  b->save_state_file(path);
  c->restore_state_file(path);
  CHECK(c->decode(66) == want);

  // A version 1 state (the format before context shift: no `exact`, the tokens at 40) is still read.
  {
    std::vector<uint8_t> v1(state.begin(), state.begin() + kSessionStateV1HeaderSize);
    v1[8] = 1;
    v1.insert(v1.end(), state.begin() + kSessionStateHeaderSize, state.end() - kSessionStateTrailerSize);
    const uint64_t h = fnv1a64(v1.data(), v1.size());
    for (int i = 0; i < 8; ++i) v1.push_back(uint8_t(h >> (8 * i)));
    auto d = Session::create(*model, so);
    d->restore_state(v1.data(), v1.size());
    CHECK(d->tokens() == held);
    CHECK(d->decode(66) == want);
  }

  // An empty session's state restores to an empty session.
  auto e = Session::create(*model, so);
  const auto empty = e->save_state();
  b->restore_state(empty.data(), empty.size());
  CHECK(b->position() == 0);
  CHECK(b->tokens().empty());
}

}  // namespace

TEST_CASE("session state: a restored session continues bit for bit fp32") { roundtrip(Precision::fp32); }
TEST_CASE("session state: a restored session continues bit for bit fp16") { roundtrip(Precision::fp16); }

TEST_CASE(
    "session state: other models, precisions, versions, corrupt and oversized states are refused, nothing changes") {
  auto ctx = test::make_context();
  auto model = Model::load(*ctx, kTiny);
  auto a = Session::create(*model, SessionOptions{48, 8});
  a->prefill(kPrompt);
  const std::vector<uint8_t> state = a->save_state();

  auto s = Session::create(*model, SessionOptions{16, 8});
  s->prefill({9, 8, 7});
  const auto before = s->tokens();
  auto refused = [&](const std::vector<uint8_t>& bad, const char* why) {
    CAPTURE(why);
    CHECK_THROWS_WITH_AS(s->restore_state(bad.data(), bad.size()), doctest::Contains(why), Error);
    CHECK(s->tokens() == before);
  };
  refused(std::vector<uint8_t>(state.begin(), state.begin() + 30), "shorter than the 48-byte header");
  refused(patched(state, 40, 99), "exact rows 99 exceed the position");
  refused(std::vector<uint8_t>(state.begin(), state.end() - 1), "checksum mismatch");
  auto flipped = state;
  flipped[100] ^= 1;
  refused(flipped, "checksum mismatch");
  refused(patched(state, 0, 'X'), "not a diffvk session state");
  refused(patched(state, 8, 4), "format version 4, this build reads versions 1 to 3");
  refused(patched(state, 8, 3), "format version 3 is a phi4flash (SambaY) session's state");
  const bool fp16 = ctx->precision() == Precision::fp16;
  refused(patched(state, 12, fp16 ? 1 : 2),
          fp16 ? "KV type f32, this session's is f16" : "KV type f16, this session's is f32");
  refused(patched(state, 16, uint8_t(state[16] ^ 0x55)), "saved from another model");
  refused(patched(state, 28, uint8_t(state[28] + 1)), "KV heads");
  // A state longer than this session's context (20 tokens, context 16).
  a->prefill({1, 2, 3, 4, 5, 6, 7});
  const auto longer = a->save_state();
  refused(longer, "position 20 exceeds this session's context of 16");
  refused(patched(state, kSessionStateHeaderSize + 4 + 3, 0x7f), "outside the vocabulary");

  // Another model: the bundled trained model (another config).
  auto other = Model::load(*ctx, std::string(DIFFVK_TEST_DATA_DIR) + "/../../examples/models/tiny-diff");
  auto o = Session::create(*other, SessionOptions{48, 8});
  CHECK_THROWS_WITH_AS(o->restore_state(state.data(), state.size()), doctest::Contains("session state:"), Error);
  CHECK(o->position() == 0);

  // Another precision of the same model (when the device has both): the KV type.
  if (fp16) {
    auto ctx32 = test::make_context(Precision::fp32);
    auto m32 = Model::load(*ctx32, kTiny);
    auto s32 = Session::create(*m32, SessionOptions{48, 8});
    CHECK_THROWS_WITH_AS(s32->restore_state(state.data(), state.size()),
                         doctest::Contains("KV type f16, this session's is f32"), Error);
  }

  // Files: a missing one is an I/O error naming it; one larger than any state of this session is not read.
  test::TempDir tmp("diffvk-state");
  CHECK_THROWS_WITH_AS(s->restore_state_file(tmp.path() + "/missing"), doctest::Contains("missing"), Error);
  const std::string big = tmp.path() + "/big";
  {
    std::vector<uint8_t> junk(size_t(s->state_bytes()) + (1u << 20), 0);
    FILE* f = std::fopen(big.c_str(), "wb");
    REQUIRE(f);
    std::fwrite(junk.data(), 1, junk.size(), f);
    std::fclose(f);
  }
  CHECK_THROWS_AS(s->restore_state_file(big), Error);
  CHECK(s->tokens() == before);
}
