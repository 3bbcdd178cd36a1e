// Generation with streaming text, stop strings (across tokens) and cancellation
// (include/diffvk/generate.hpp). StopStream is pure; generate() is checked against the loop it replaces
// (prefill, sample, decode) on the tiny model, token for token.
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "diffvk/generate.hpp"
#include "diffvk/model.hpp"
#include "diffvk/tokenizer.hpp"
#include "gpu_test.hpp"
#include "model_fixture.hpp"
#include "phi4flash_model.hpp"
#include "status_of.hpp"

using namespace diffvk;

namespace {
const std::string kTiny = std::string(DIFFVK_TEST_DATA_DIR) + "/model_tiny";
const std::vector<int32_t> kPrompt{72, 101, 108, 108, 111, 32, 119, 111, 114, 108, 100, 33};

// Feeds `text` to a StopStream one byte at a time (the text grows as tokens come), then finishes.
std::string stream_bytes(StopStream& s, const std::string& text) {
  std::string out;
  for (size_t i = 1; i <= text.size(); ++i) out += s.update(text.substr(0, i));
  out += s.update(text, true);
  return out;
}
}  // namespace

TEST_CASE("generate: stop strings are found across pieces, and nothing from them on is emitted") {
  SUBCASE("no stop strings: everything, as it comes") {
    StopStream s(std::vector<std::string>{});
    CHECK(s.update("ab") == "ab");
    CHECK(s.update("abcd") == "cd");
    CHECK(s.update("abcd", true).empty());
    CHECK_FALSE(s.stopped());
  }
  SUBCASE("a stop string split over updates") {
    StopStream s({"</s>"});
    CHECK(s.update("Hi <") == "Hi ");  // "<" may start the stop string: held back
    CHECK(s.update("Hi </") == "");
    CHECK(s.update("Hi </s> more") == "");
    CHECK(s.stopped());
    CHECK(s.matched() == "</s>");
    CHECK(s.matched_index() == 0);
    CHECK(s.update("Hi </s> more and more", true).empty());
    CHECK(s.emitted() == 3);
  }
  SUBCASE("a held-back prefix that turns out not to be a stop string is emitted") {
    StopStream s({"STOP"});
    CHECK(s.update("xST") == "x");
    CHECK(s.update("xSTA") == "STA");
    CHECK(s.update("xSTAS", true) == "S");
    CHECK_FALSE(s.stopped());
  }
  SUBCASE("the earliest stop string wins; on a tie the shortest (it completes first), then the first listed") {
    for (bool bytewise : {false, true}) {
      StopStream s({"cd", "bc", "b", "b"});
      CHECK((bytewise ? stream_bytes(s, "abcde") : s.update("abcde", true)) == "a");
      CHECK(s.matched() == "b");
      CHECK(s.matched_index() == 2);
    }
  }
  SUBCASE("byte by byte equals all at once") {
    const std::string text = "The cat sat. User: hi\nUser: there";
    for (const char* stop : {"User:", "\n", "sat", "t", "there", "nowhere", "at. U"}) {
      StopStream a({stop}), b({stop});
      const std::string whole = a.update(text, true);
      CHECK(stream_bytes(b, text) == whole);
      const size_t at = text.find(stop);
      CHECK(whole == text.substr(0, at == std::string::npos ? text.size() : at));
    }
  }
  SUBCASE("a trailing U+FFFD waits for the byte that may complete it, unless it is the end") {
    StopStream s(std::vector<std::string>{});
    CHECK(s.update("a\xEF\xBF\xBD") == "a");
    CHECK(s.update("a\xC3\xA9") == "\xC3\xA9");
    CHECK(s.update("a\xC3\xA9\xEF\xBF\xBD", true) == "\xEF\xBF\xBD");
  }
  SUBCASE("limits") {
    CHECK(test::status_of([] { StopStream s({""}); }) == Status::invalid_argument);
    CHECK(test::status_of([] { StopStream s({std::string(kMaxStopStringBytes + 1, 'x')}); }) ==
          Status::invalid_argument);
    CHECK(test::status_of([] { StopStream s(std::vector<std::string>(kMaxStopStrings + 1, "x")); }) ==
          Status::invalid_argument);
    CHECK(test::status_of([] { StopStream s({std::string(kMaxStopStringBytes, 'x')}); }) == Status::ok);
  }
}

TEST_CASE("generate: the same tokens as prefill, sample and decode, ended by stop strings, EOS or cancel") {
  auto ctx = test::make_context_or_skip(Precision::fp32);
  if (!ctx) return;
  auto model = Model::load(*ctx, kTiny);
  const Tokenizer tok = Tokenizer::load(kTiny);
  const uint32_t V = model->config().vocab_size;
  const SessionOptions so{64, 8};
  const uint32_t n = 20;

  // The loop generate() replaces, with a host sampler (temperature and top-p: not device-capable).
  SamplingOptions sampling;
  sampling.temperature = 0.8f;
  sampling.top_p = 0.9f;
  sampling.seed = 7;
  std::vector<int32_t> want;
  {
    auto s = Session::create(*model, so);
    Sampler sampler(sampling);
    auto logits = s->prefill(kPrompt);
    for (int32_t t : kPrompt) sampler.accept(t);
    for (uint32_t i = 0; i < n; ++i) {
      want.push_back(sampler.sample(logits.data(), V));
      sampler.accept(want.back());
      if (i + 1 < n) logits = s->decode(want.back());
    }
  }
  std::vector<int32_t> all = kPrompt;
  all.insert(all.end(), want.begin(), want.end());
  const std::string text = tok.decode(all).substr(tok.decode(kPrompt).size());

  auto s = Session::create(*model, so);
  GenerateOptions o;
  o.max_tokens = n;
  std::string streamed;
  o.on_text = [&](std::string_view piece) {
    streamed += piece;
    return true;
  };
  {
    Sampler sampler(sampling);
    const GenerateResult r = generate(*s, sampler, tok, kPrompt, o);
    CHECK(r.tokens == want);
    CHECK(r.reason == StopReason::max_tokens);
    CHECK(r.text == text);
    CHECK(streamed == text);
    auto held = s->tokens();  // the prompt and every sampled token but the last
    CHECK(held.size() == kPrompt.size() + n - 1);
    CHECK(std::vector<int32_t>(held.begin() + kPrompt.size(), held.end()) ==
          std::vector<int32_t>(want.begin(), want.end() - 1));
  }
  SUBCASE("a stop string from the middle of the text (one byte per token: it spans tokens)") {
    const std::string stop = text.substr(text.size() / 2, 3);
    const size_t at = text.find(stop);
    s->reset();
    streamed.clear();
    o.stop = {"never appears \x01\x02", stop};
    Sampler sampler(sampling);
    const GenerateResult r = generate(*s, sampler, tok, kPrompt, o);
    CHECK(r.reason == StopReason::stop_string);
    CHECK(r.stop == stop);
    CHECK(r.stop_index == 1);
    CHECK(r.text == text.substr(0, at));
    CHECK(streamed == r.text);
    CHECK(r.tokens == std::vector<int32_t>(want.begin(), want.begin() + static_cast<long>(r.tokens.size())));
  }
  SUBCASE("EOS: the token that ends it is not emitted, what came before is") {
    s->reset();
    streamed.clear();
    o.eos_token = want[5];
    size_t first = 0;
    while (want[first] != want[5]) ++first;
    Sampler sampler(sampling);
    const GenerateResult r = generate(*s, sampler, tok, kPrompt, o);
    CHECK(r.reason == StopReason::eos);
    CHECK(r.tokens.size() == first + 1);
    std::vector<int32_t> before = kPrompt;
    before.insert(before.end(), want.begin(), want.begin() + static_cast<long>(first));
    CHECK(r.text == tok.decode(before).substr(tok.decode(kPrompt).size()));
  }
  SUBCASE("cancel from the callback: nothing more is emitted or decoded") {
    s->reset();
    int calls = 0;
    o.on_text = [&](std::string_view) { return ++calls < 2; };
    Sampler sampler(sampling);
    const GenerateResult r = generate(*s, sampler, tok, kPrompt, o);
    CHECK(r.reason == StopReason::cancelled);
    CHECK(calls == 2);
    CHECK(s->position() == kPrompt.size() + r.tokens.size() - 1);
  }
  SUBCASE("bad input is refused before any work") {
    const uint32_t before = s->position();
    Sampler sampler(sampling);
    o.stop = {""};
    CHECK(test::status_of([&] { generate(*s, sampler, tok, kPrompt, o); }) == Status::invalid_argument);
    o.stop = {};
    CHECK(test::status_of([&] { generate(*s, sampler, tok, {}, o); }) == Status::invalid_argument);
    o.max_tokens = 64;
    CHECK(test::status_of([&] { generate(*s, sampler, tok, kPrompt, o); }) == Status::context_overflow);
    CHECK(s->position() == before);
  }
}

// A cancel flag set by another thread (what a UI's stop button does) while a 128-token prefill runs: the
// prefill stops at the next check (between layer groups), changes nothing, and the session goes on.
TEST_CASE("session: a flag set from another thread half-way through a 128-token prefill stops it within one group") {
  auto ctx = test::make_context_or_skip(Precision::fp32);
  if (!ctx) return;
  const std::string config =
      R"({"vocab_size": 256, "hidden_size": 64, "num_layers": 2, "num_heads": 2, "num_kv_heads": 1,
          "intermediate_size": 96, "rope_theta": 1000.0, "rms_norm_eps": 1e-6, "max_position_embeddings": 160,
          "tie_word_embeddings": false, "bos_token_id": 2, "eos_token_id": 3, "tokenizer": "bytes"})";
  auto model = Model::synthesize(*ctx, config, LoadOptions{});
  std::vector<int32_t> prompt(128);
  for (size_t i = 0; i < prompt.size(); ++i) prompt[i] = int32_t(32 + i % 90);
  const std::vector<int32_t> head(prompt.begin(), prompt.begin() + 16);
  std::atomic<bool> cancel{false};
  std::atomic<int> asked{0};
  int stop_at = 0;  // the check at which the callback waits for the other thread (0 = never)
  std::mutex m;
  std::condition_variable cv;
  bool reached = false;
  SessionOptions so{160, 16};  // 8 chunks of 16 rows, 2 layer groups each
  so.should_abort = [&] {
    if (++asked == stop_at) {  // half-way: let the other thread set the flag, as if the user pressed stop now
      std::unique_lock<std::mutex> lock(m);
      reached = true;
      cv.notify_all();
      cv.wait_for(lock, std::chrono::seconds(30), [&] { return cancel.load(); });
    }
    return cancel.load();
  };
  auto s = Session::create(*model, so);
  const std::vector<float> want = s->prefill(prompt);
  const int checks = asked.load();  // 8 chunks x 2 groups, and the logits group
  CHECK(checks >= 16);
  s->reset();
  s->prefill(head);  // a position to keep: 16
  const std::vector<int32_t> rest(prompt.begin() + 16, prompt.end());
  for (const int at : {checks / 2 - 1, 1}) {  // half-way through the remaining 112 tokens, and at the first check
    CAPTURE(at);
    asked = 0;
    cancel = false;
    reached = false;
    stop_at = at;
    std::thread user([&] {
      std::unique_lock<std::mutex> lock(m);
      cv.wait_for(lock, std::chrono::seconds(30), [&] { return reached; });
      cancel = true;
      cv.notify_all();
    });
    CHECK(test::status_of([&] { s->prefill(rest); }) == Status::cancelled);
    user.join();
    CHECK(asked.load() == at);   // stopped at the first check after the flag: no further group ran
    CHECK(s->position() == 16);  // nothing changed
  }
  cancel = false;
  stop_at = 0;
  const std::vector<float> got = s->prefill(rest);  // still usable: the same chunks, the same logits
  CHECK(s->position() == 128);
  REQUIRE(got.size() == want.size());
  CHECK(std::memcmp(got.data(), want.data(), want.size() * sizeof(float)) == 0);
}

TEST_CASE("generate: prompt-lookup drafts are what followed the latest earlier occurrence of the last n-gram") {
  using V = std::vector<int32_t>;
  CHECK(lookup_draft({1, 2, 3, 4, 1, 2}, 3, 3) == V{3, 4, 1});        // no earlier {4, 1, 2}: the 2-gram {1, 2}
  CHECK(lookup_draft({5, 6, 7, 5, 6, 8, 5, 6}, 2, 2) == V{8, 5});     // the latest of two occurrences
  CHECK(lookup_draft({5, 6, 7, 5, 6, 8, 5, 6}, 1, 8) == V{8, 5, 6});  // up to the end of the context
  CHECK(lookup_draft({1, 2, 1}, 1, 4) == V{2, 1});                    // the followers may reach the tail
  CHECK(lookup_draft({9, 9, 9, 9}, 16, 2) == V{9});                   // n-gram longer than the context: shorter
  CHECK(lookup_draft({1, 2, 3}, 3, 4).empty());                       // the last token never came before
  CHECK(lookup_draft({7}, 3, 4).empty());
  CHECK(lookup_draft({}, 3, 4).empty());
  CHECK(lookup_draft({1, 2, 1, 2}, 2, 0).empty());
}

// Greedy speculation gives the tokens of plain greedy decoding (fp32: the verify rows and the one-row decodes
// round alike enough on this model), ends where plain decoding ends, and leaves the session holding the same tokens.
TEST_CASE("generate: speculative decoding with prompt lookup gives the tokens of plain greedy decoding") {
  auto ctx = test::make_context_or_skip(Precision::fp32);
  if (!ctx) return;
  auto model = Model::load(*ctx, kTiny);
  const Tokenizer tok = Tokenizer::load(kTiny);
  const SessionOptions so{64, 8};
  std::vector<int32_t> prompt = kPrompt;  // a prompt that repeats: the lookup finds drafts at once
  prompt.insert(prompt.end(), kPrompt.begin(), kPrompt.end());
  SamplingOptions greedy;
  greedy.temperature = 0.0f;
  auto run = [&](const GenerateOptions& o, std::vector<int32_t>* held) {
    auto s = Session::create(*model, so);
    Sampler sampler(greedy);
    GenerateResult r = generate(*s, sampler, tok, prompt, o);
    if (held) *held = s->tokens();
    return r;
  };
  GenerateOptions plain;
  plain.max_tokens = 40;
  std::vector<int32_t> plain_held;
  const GenerateResult want = run(plain, &plain_held);
  REQUIRE(want.tokens.size() == 40);
  CHECK(want.verify_passes == 0);
  for (uint32_t k : {1u, 3u, 8u, 16u})
    for (uint32_t ngram : {1u, 3u}) {
      CAPTURE(k);
      CAPTURE(ngram);
      GenerateOptions o = plain;
      o.speculate.draft = Draft::lookup;
      o.speculate.k = k;
      o.speculate.ngram = ngram;
      std::vector<int32_t> held;
      const GenerateResult r = run(o, &held);
      CHECK(r.tokens == want.tokens);
      CHECK(r.text == want.text);
      CHECK(held == plain_held);  // the prompt and every sampled token but the last
      CHECK(r.verify_passes > 0);
      CHECK(r.accepted <= r.drafted);
      MESSAGE("k " << k << ", n-gram " << ngram << ": " << r.verify_passes << " passes, " << r.accepted << " of "
                   << r.drafted << " drafted tokens accepted");
    }
  SUBCASE("an end inside a pass: EOS, a stop string, max_tokens; the session keeps what plain decoding keeps") {
    GenerateOptions o = plain;
    o.speculate.draft = Draft::lookup;
    o.eos_token = want.tokens[17];
    GenerateOptions p = plain;
    p.eos_token = o.eos_token;
    std::vector<int32_t> held, held_plain;
    const GenerateResult a = run(o, &held), b = run(p, &held_plain);
    CHECK(a.reason == StopReason::eos);
    CHECK(a.tokens == b.tokens);
    CHECK(held == held_plain);
    for (uint32_t n : {1u, 2u, 7u, 13u}) {
      o = plain;
      o.speculate.draft = Draft::lookup;
      o.max_tokens = p.max_tokens = n;
      p.eos_token = -1;
      const GenerateResult c = run(o, &held), d = run(p, &held_plain);
      CHECK(c.tokens == d.tokens);
      CHECK(held == held_plain);
    }
  }
  SUBCASE("bad options are refused before any work") {
    auto s = Session::create(*model, so);
    GenerateOptions o = plain;
    o.speculate.draft = Draft::lookup;
    for (uint32_t k : {0u, kMaxDraftTokens + 1}) {
      o.speculate.k = k;
      Sampler sampler(greedy);
      CHECK(test::status_of([&] { generate(*s, sampler, tok, prompt, o); }) == Status::invalid_argument);
    }
    o.speculate.k = 8;
    o.speculate.ngram = 0;
    Sampler sampler(greedy);
    CHECK(test::status_of([&] { generate(*s, sampler, tok, prompt, o); }) == Status::invalid_argument);
    o.speculate.ngram = 3;
    CHECK(s->position() == 0);
  }
  SUBCASE("sampling (temperature 0.7): the speculative rule; a seed repeats; the session keeps all but the last") {
    SamplingOptions warm;
    warm.temperature = 0.7f;
    warm.seed = 5;
    GenerateOptions o = plain;
    o.speculate.draft = Draft::lookup;
    std::vector<GenerateResult> runs;
    for (int i = 0; i < 2; ++i) {
      auto s = Session::create(*model, so);
      Sampler sampler(warm);
      runs.push_back(generate(*s, sampler, tok, prompt, o));
      CHECK(s->position() == prompt.size() + o.max_tokens - 1);
      CHECK(runs.back().tokens.size() == o.max_tokens);
      CHECK(runs.back().accepted <= runs.back().drafted);
    }
    CHECK(runs[0].tokens == runs[1].tokens);
    CHECK(runs[0].verify_passes > 0);
  }
}

// Draft-model drafting: a second model's greedy tokens checked in one pass. Greedy output and the session are plain
// greedy decoding's whatever the draft model is: another session of the same model (its drafts mostly kept), a
// smaller model of the same vocabulary (a random one: few kept), and a phi4flash model (its session rewinds by its
// snapshot or a recompute). A draft model of another vocabulary, or the generating session itself, is refused.
TEST_CASE("generate: speculative decoding with a draft model gives the tokens of plain greedy decoding") {
  auto ctx = test::make_context_or_skip(Precision::fp32);
  if (!ctx) return;
  auto model = Model::load(*ctx, kTiny);
  const Tokenizer tok = Tokenizer::load(kTiny);
  const uint32_t V = model->config().vocab_size;
  SessionOptions so;
  so.context = 64;
  so.chunk = 8;
  SamplingOptions greedy;
  greedy.temperature = 0.0f;
  GenerateOptions plain;
  plain.max_tokens = 30;
  auto run = [&](const GenerateOptions& o, std::vector<int32_t>& held) {
    auto s = Session::create(*model, so);
    Sampler sampler(greedy);
    GenerateResult r = generate(*s, sampler, tok, kPrompt, o);
    held = s->tokens();
    return r;
  };
  std::vector<int32_t> want_held, held;
  const GenerateResult want = run(plain, want_held);
  test::TempDir tmp("diffvk-draft-model");
  test::TinySpec small;
  small.vocab = V;
  small.layers = 1;
  test::write_tiny_model(tmp / "small", small, 7);
  test::write_tiny_phi4flash(tmp / "phi", V, 64, 5);
  for (const std::string& draft_dir : {kTiny, tmp / "small", tmp / "phi"}) {
    CAPTURE(draft_dir);
    auto dm = Model::load(*ctx, draft_dir);
    SessionOptions dso;
    dso.chunk = 4;
    auto ds = Session::create(*dm, dso);
    for (uint32_t k : {1u, 4u, 9u}) {
      CAPTURE(k);
      GenerateOptions o = plain;
      o.speculate.draft = Draft::model;
      o.speculate.k = k;
      o.speculate.draft_session = ds.get();
      const GenerateResult r = run(o, held);
      CHECK(r.tokens == want.tokens);
      CHECK(held == want_held);
      CHECK(r.verify_passes > 0);
      if (draft_dir == kTiny) CHECK(r.accepted * 2 > r.drafted);  // the same model: most drafts kept
      MESSAGE(draft_dir << ", k " << k << ": " << r.verify_passes << " passes, " << r.accepted << " of " << r.drafted
                        << " drafted tokens accepted");
    }
  }
  // Refused before any work: no draft session, the generating session itself, another vocabulary.
  auto s = Session::create(*model, so);
  GenerateOptions o = plain;
  o.speculate.draft = Draft::model;
  Sampler sampler(greedy);
  CHECK(test::status_of([&] { generate(*s, sampler, tok, kPrompt, o); }) == Status::invalid_argument);
  o.speculate.draft_session = s.get();
  CHECK(test::status_of([&] { generate(*s, sampler, tok, kPrompt, o); }) == Status::invalid_argument);
  test::TinySpec other;
  other.vocab = V + 4;
  test::write_tiny_model(tmp / "other", other, 3);
  auto om = Model::load(*ctx, tmp / "other");
  auto os = Session::create(*om);
  o.speculate.draft_session = os.get();
  try {
    generate(*s, sampler, tok, kPrompt, o);
    FAIL("a draft model of another vocabulary was accepted");
  } catch (const Error& e) {
    CHECK(std::string(e.what()).find("must share the tokenizer") != std::string::npos);
  }
}

// A tiny test model (tests/data/NAME) with a byte tokenizer, a 64-token session in chunks of 8, kPrompt twice (the
// lookup finds drafts at once), greedy decoding on a fresh session per run.
struct GreedyRun {
  std::unique_ptr<Model> model;
  Tokenizer tok;
  SessionOptions so{64, 8};
  std::vector<int32_t> prompt;
  GreedyRun(Context& ctx, const std::string& name)
      : model(Model::load(ctx, std::string(DIFFVK_TEST_DATA_DIR) + "/" + name)),
        tok(Tokenizer::bytes(model->config().vocab_size, -1, -1)),
        prompt(kPrompt) {
    prompt.insert(prompt.end(), kPrompt.begin(), kPrompt.end());
  }
  GenerateResult run(const GenerateOptions& o) const {
    auto s = Session::create(*model, so);
    SamplingOptions greedy;
    greedy.temperature = 0.0f;
    Sampler sampler(greedy);
    return generate(*s, sampler, tok, prompt, o);
  }
};

// Every model kind: DIFF V2 (a λ per token) with prompt lookup and with a draft model (V1 above, phi4flash in
// test_phi4flash_session.cpp and above).
TEST_CASE("generate: speculative decoding on a DIFF V2 model gives the tokens of plain greedy decoding") {
  auto ctx = test::make_context_or_skip(Precision::fp32);
  if (!ctx) return;
  const GreedyRun g(*ctx, "model_tiny_v2");
  GenerateOptions plain;
  plain.max_tokens = 24;
  auto run = [&](const GenerateOptions& o) { return g.run(o).tokens; };
  const std::vector<int32_t> want = run(plain);
  auto drafts = Session::create(*g.model, g.so);
  for (Draft d : {Draft::lookup, Draft::model}) {
    CAPTURE(draft_name(d));
    GenerateOptions o = plain;
    o.speculate.draft = d;
    o.speculate.k = 5;
    o.speculate.draft_session = drafts.get();
    CHECK(run(o) == want);
  }
}

// fp16 storage: the (k + 1)-row verify pass runs other kernels than the one-row decode (the matmul's tiles), so its
// logits differ from decode's by fp16 rounding, and greedy decoding with speculation may take another token where two
// logits tie within that rounding. Up to the first difference the tokens are plain greedy decoding's; at it, the two
// tokens' logits (a fresh prefill of the common prefix) are within the fp16 whole-model bound of each other (twice
// docs/maths.md's max abs, 1e-2 of the largest |logit|, one for each path); nothing is checked past it.
TEST_CASE("generate: speculative decoding in fp16 gives plain greedy decoding's tokens up to an fp16 tie") {
  auto ctx = test::make_context_or_skip(Precision::fp16);
  if (!ctx) return;
  for (const std::string name : {"model_tiny", "model_tiny_v2"}) {
    CAPTURE(name);
    const GreedyRun g(*ctx, name);
    GenerateOptions plain;
    plain.max_tokens = 32;
    auto run = [&](const GenerateOptions& o) { return g.run(o); };
    const std::vector<int32_t> want = run(plain).tokens;
    for (uint32_t k : {3u, 8u}) {
      CAPTURE(k);
      GenerateOptions o = plain;
      o.speculate.draft = Draft::lookup;
      o.speculate.k = k;
      const GenerateResult r = run(o);
      CHECK(r.verify_passes > 0);
      REQUIRE(r.tokens.size() == want.size());
      size_t i = 0;
      while (i < want.size() && r.tokens[i] == want[i]) ++i;
      MESSAGE(name << ", k " << k << ": " << i << " of " << want.size() << " tokens as plain greedy decoding");
      if (i == want.size()) continue;
      std::vector<int32_t> prefix = g.prompt;
      prefix.insert(prefix.end(), want.begin(), want.begin() + long(i));
      auto s = Session::create(*g.model, g.so);
      const std::vector<float> logits = s->prefill(prefix);
      float scale = 0;
      for (float v : logits) scale = std::max(scale, std::fabs(v));
      const float gap = std::fabs(logits[size_t(want[i])] - logits[size_t(r.tokens[i])]);
      CAPTURE(i);
      CAPTURE(gap);
      CHECK(gap <= 2e-2f * std::max(1.0f, scale));
    }
  }
}
