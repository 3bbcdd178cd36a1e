// A Phi-4-mini-flash (SambaY) model through the public API (Model::load, Session): the tiny fixture
// tests/data/phi4flash_tiny (8 layers, every kind, window 5) against the float64 reference's full form
// (ref::sambay_forward_full), with the weights as the device holds them (float32 from the BF16 checkpoint: exact).
// Prefill (all rows and YOCO's last), decode one token at a time across the sliding window, rewind (into the last
// run: its snapshot; further back: a recompute), prefix reuse, and saved state restored into a session of another
// chunk: every row's logits within the whole-model fp32 bound of docs/maths.md (max abs <= 1e-4·scale). fp16 storage:
// within the whole fp16 bound (nmse included) of the reference that rounds each activation where the device stores
// one, and within its max abs and top-1 of the exact reference (whose nmse fp16 storage itself misses on this
// fixture, up to 1.1e-5 on a decode row: docs/phi4flash.md). What a SambaY session cannot do exactly is refused,
// naming it.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "diffvk/generate.hpp"
#include "diffvk/gguf.hpp"
#include "diffvk/model.hpp"
#include "diffvk/tokenizer.hpp"
#include "diffvk/npy.hpp"
#include "io/quant.hpp"
#include "decode_sample_check.hpp"
#include "gpu_test.hpp"
#include "model/phi4flash_checkpoint.hpp"
#include "model_parity.hpp"
#include "phi4flash_fixture.hpp"
#include "phi4flash_model.hpp"
#include "status_of.hpp"

using namespace diffvk;

namespace {

const std::string kFixture = std::string(DIFFVK_TEST_DATA_DIR) + "/phi4flash_tiny";

// Seeded random ids (the fixture's config: vocab 97, 64 positions).
std::vector<int32_t> random_tokens(size_t n, uint32_t vocab, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<int32_t> t(n);
  for (auto& x : t) x = int32_t(rng() % vocab);
  return t;
}

struct Fixture {
  ref::SambaYShape shape;
  ref::SambaYWeights weights;
  uint32_t V = 0;
  bool fp16 = false;
  explicit Fixture(bool fp16_storage) : fp16(fp16_storage) {
    const Phi4FlashCheckpoint ck = open_phi4flash_checkpoint(kFixture);
    shape = test::phi4flash_shape(ck.config);
    weights = test::as_device_holds(
        test::phi4flash_weights(shape, SafetensorsFile::open(kFixture + "/model.safetensors")), fp16);
    V = ck.config.vocab_size;
  }
  // The reference's full form over toks (every row's logits), its activations kept as `a` says.
  std::vector<double> expect(const std::vector<int32_t>& toks, const ref::ActivationStorage& a = {}) const {
    return ref::sambay_forward_full(shape, weights, std::vector<int>(toks.begin(), toks.end()), a);
  }
};

// fp16: the rows the device ran in one-row passes (ref::ActivationStorage::fused_from), mirrored from the session's
// runs: each run of n rows is one program (Phi4FlashForward::run); a one-row program fuses the MLP's SwiGLU into
// fc2 in every layer, and YOCO's last row runs the layers from L/2 + 1 on as a one-row pass, where the device fuses
// (g_fused: the tuning's row_prologue; CPU drivers split the SwiGLU into a dispatch of its own, storing its output).
bool g_fused = true;
struct Runs {
  std::vector<int> fused_from;
  int L = 0, yoco = 0;
  Runs(const ref::SambaYShape& s, size_t n) : fused_from(n, s.L), L(s.L), yoco(s.shared_kv_layer()) {}
  void run(size_t from, size_t n, bool yoco_last = false) {
    if (!g_fused) return;
    for (size_t r = from; r < from + n; ++r) fused_from[r] = n == 1 ? 0 : L;
    if (yoco_last && n > 1) fused_from[from + n - 1] = yoco;
  }
  // n rows in runs of `chunk` (a prefill, or the replay after a rewind: no logits); YOCO's last row in the last run
  // when only the last row's logits are asked.
  void prefill(size_t from, size_t n, size_t chunk, bool yoco_last) {
    for (size_t r = from; r < from + n; r += chunk) {
      const size_t rows = std::min(chunk, from + n - r);
      run(r, rows, yoco_last && r + rows == from + n);
    }
  }
};

// Logits of one or more rows against the reference rows [row0, row0 + rows): fp32 to the whole-model bound. fp16: to
// its max abs and top-1 against the exact reference (its nmse misses on this fixture: docs/phi4flash.md,
// test_phi4flash_forward.cpp), and to the whole bound against `stored`, the reference that stores activations in
// fp16 where this session's runs did.
bool g_fp16 = false;
void check_rows(const std::vector<float>& got, const std::vector<double>& expect, size_t row0, size_t rows, uint32_t V,
                const std::string& what, const std::vector<double>& stored = {}) {
  REQUIRE(got.size() == rows * V);
  const std::vector<float> want(expect.begin() + row0 * V, expect.begin() + (row0 + rows) * V);
  const test::Parity p = test::parity(got, want, V);
  INFO(what << ": max_abs=" << p.max_abs << " max_ref=" << p.max_ref << " nmse=" << p.nmse << " top1=" << p.top1);
  if (!g_fp16) {
    CHECK(test::ok(p, false));
    return;
  }
  CHECK((p.max_abs <= 1e-2 * std::max(1.0, p.max_ref) && p.top1 >= 0.99));
  REQUIRE(stored.size() == expect.size());
  const test::Parity ps =
      test::parity(got, std::vector<float>(stored.begin() + row0 * V, stored.begin() + (row0 + rows) * V), V);
  INFO("against the fp16-storage reference: max_abs=" << ps.max_abs << " nmse=" << ps.nmse << " top1=" << ps.top1);
  CHECK(test::ok(ps, true));
}

void check_session(Precision precision) {
  auto ctx = test::make_context_or_skip(precision);
  if (!ctx) return;
  g_fp16 = ctx->precision() == Precision::fp16;
  g_fused = !ctx->device().tuning().row_prologue_split;
  const Fixture fx(g_fp16);
  auto model = Model::load(*ctx, kFixture);
  CHECK(model->config().format == "phi4flash");
  CHECK(model->config().vocab_size == fx.V);
  SessionOptions so;
  so.chunk = 4;  // rings of 5 + 4 − 1 = 8 rows, wrapped several times by 30 tokens
  auto s = Session::create(*model, so);
  CHECK(s->chunk() == 4);
  CHECK(s->device_sampling());
  const std::vector<int32_t> toks = random_tokens(30, fx.V, 11);
  const std::vector<double> expect = fx.expect(toks);
  Runs runs(fx.shape, toks.size());  // fp16: the session's runs, for the fp16-storage reference
  const auto stored = [&](const Runs& r) {
    ref::ActivationStorage a;
    a.fp16 = true;
    a.fused_from = r.fused_from;
    return g_fp16 ? fx.expect(toks, a) : std::vector<double>{};
  };

  // Prefill 10 rows (chunks 4, 4, 2) with every row's logits, then the YOCO last row of the next 5 (runs of 4 and 1).
  runs.prefill(0, 10, 4, false);
  check_rows(s->prefill({toks.begin(), toks.begin() + 10}, true), expect, 0, 10, fx.V, "prefill all rows",
             stored(runs));
  runs.prefill(10, 5, 4, true);
  check_rows(s->prefill({toks.begin() + 10, toks.begin() + 15}), expect, 14, 1, fx.V, "prefill YOCO last row",
             stored(runs));
  for (size_t i = 15; i < 22; ++i) {
    runs.run(i, 1);
    check_rows(s->decode(toks[i]), expect, i, 1, fx.V, "decode " + std::to_string(i), stored(runs));
  }
  CHECK(s->position() == 22);

  // Rewind into the last run (its snapshot): decode row 21 again; further back (a recompute from 0 in runs of 4 and
  // 2): rows 6 … 8.
  s->rewind(21);
  check_rows(s->decode(toks[21]), expect, 21, 1, fx.V, "decode after rewinding one token", stored(runs));
  s->rewind(6);
  runs.prefill(0, 6, 4, false);
  runs.run(6, 3);
  check_rows(s->prefill({toks.begin() + 6, toks.begin() + 9}, true), expect, 6, 3, fx.V, "prefill after rewind 6",
             stored(runs));
  // A rewind inside a multi-row run: prefill 4 rows (one run), keep 2 (its snapshot, then a run of 2), decode the
  // third.
  runs.run(9, 4);
  check_rows(s->prefill({toks.begin() + 9, toks.begin() + 13}, true), expect, 9, 4, fx.V, "prefill 9 … 12",
             stored(runs));
  s->rewind(11);
  runs.run(9, 2);
  runs.run(11, 1);
  check_rows(s->decode(toks[11]), expect, 11, 1, fx.V, "decode 11 after rewinding into the run", stored(runs));

  // Prefix reuse: the held 12 tokens are kept, the rest computed (runs of 4, YOCO's last row).
  uint32_t reused = 0;
  runs.prefill(12, 8, 4, true);
  check_rows(s->prefill_reusing({toks.begin(), toks.begin() + 20}, &reused), expect, 19, 1, fx.V, "prefill_reusing",
             stored(runs));
  CHECK(reused == 12);

  // Saved state, restored into a session of another chunk (rings of another size): decoding goes on exactly.
  const std::vector<uint8_t> state = s->save_state();
  CHECK(state.size() == s->state_bytes());
  SessionOptions so3;
  so3.chunk = 3;
  auto r = Session::create(*model, so3);
  r->restore_state(state.data(), state.size());
  CHECK(r->position() == 20);
  CHECK(r->tokens() == std::vector<int32_t>(toks.begin(), toks.begin() + 20));
  Runs restored = runs;
  for (size_t i = 20; i < 30; ++i) {
    restored.run(i, 1);
    check_rows(r->decode(toks[i]), expect, i, 1, fx.V, "restored decode", stored(restored));
  }
  // The state of the first session is unchanged by saving it.
  runs.run(20, 1);
  check_rows(s->decode(toks[20]), expect, 20, 1, fx.V, "decode after save", stored(runs));

  // A fresh session's prompt in one prefill equals the step-by-step rows (reset and reuse of a session).
  s->reset();
  Runs fresh(fx.shape, toks.size());
  fresh.prefill(0, 30, 4, true);
  check_rows(s->prefill(toks), expect, 29, 1, fx.V, "prefill of 30 after reset", stored(fresh));

  // Pieces: with chunk 32 the sliding layers append and attend 17 rows at a time (kMaxDraftTokens + 1; rings of
  // 5 + 17 − 1 = 21 rows). A run of 25 rows (pieces of 17 and 8) with every row's logits; a rewind into it recomputes
  // from position 0 (the rings no longer hold the keys before the run's start), then decodes.
  SessionOptions sp;
  sp.chunk = 32;
  auto p = Session::create(*model, sp);
  SessionOptions s17, s64;
  s17.chunk = 17;
  s64.chunk = 64;
  CHECK(p->kv_cache_bytes() == Session::create(*model, s17)->kv_cache_bytes());  // the rings stop at 17-row pieces
  CHECK(p->kv_cache_bytes() == Session::create(*model, s64)->kv_cache_bytes());
  CHECK(s->kv_cache_bytes() < p->kv_cache_bytes());  // chunk 4: rings of 5 + 4 − 1 rows
  Runs pr(fx.shape, toks.size());
  pr.run(0, 5);
  check_rows(p->prefill({toks.begin(), toks.begin() + 5}, true), expect, 0, 5, fx.V, "pieces: prefill 5", stored(pr));
  pr.run(5, 25);
  check_rows(p->prefill({toks.begin() + 5, toks.end()}, true), expect, 5, 25, fx.V, "pieces: 25 rows in pieces",
             stored(pr));
  p->rewind(20);
  pr.run(0, 20);
  pr.run(20, 1);
  check_rows(p->decode(toks[20]), expect, 20, 1, fx.V, "pieces: decode 20 after rewinding into the run", stored(pr));
}

}  // namespace

TEST_CASE("phi4flash session: prefill, decode across the window, rewind, prefix reuse and saved state, fp32") {
  check_session(Precision::fp32);
}
TEST_CASE("phi4flash session: the same in fp16 storage, to the whole bound against the fp16-storage reference") {
  check_session(Precision::fp16);
}
// The one-row prologues the other way than the device's own (the tuning's row_prologue: GPUs fuse the SwiGLU into
// fc2, CPU drivers split it into a dispatch of its own): the same checks, in both precisions.
TEST_CASE("phi4flash session: the same with the other row_prologue (fused on CPU drivers, split on GPUs)") {
  const bool split = test::make_context(Precision::fp32)->device().tuning().row_prologue_split;
  struct Force {
    explicit Force(bool s) { setenv("DIFFVK_TUNING", s ? "row_prologue=fused" : "row_prologue=split", 1); }
    ~Force() { unsetenv("DIFFVK_TUNING"); }
  } force(split);
  for (Precision p : test::supported_precisions()) check_session(p);
}

TEST_CASE("phi4flash session: what cannot be exact is refused, naming it, and the session still runs after") {
  auto ctx = test::make_context_or_skip(Precision::fp32);
  if (!ctx) return;
  auto model = Model::load(*ctx, kFixture);
  SessionOptions q8;
  q8.kv_cache = KvCacheType::q8_0;
  try {  // the fixture's head_dim 4: cache rows of 8 (a Q8_0 cache needs multiples of 32)
    Session::create(*model, q8);
    FAIL("a Q8_0 cache of 8-wide rows was accepted");
  } catch (const Error& e) {
    CHECK(e.status() == Status::invalid_argument);
    CHECK(std::string(e.what()).find("8 wide") != std::string::npos);
  }
  auto s = Session::create(*model);
  CHECK(s->capacity() == model->config().max_position_embeddings);
  s->prefill({1, 2, 3, 4, 5, 6});
  CHECK(test::status_of([&] { s->shift(1, 2); }) == Status::unsupported);
  CHECK(test::status_of([&] { s->attention_maps({1, 2}, 1); }) == Status::unsupported);
  CHECK(test::status_of([&] { s->decode(int32_t(model->config().vocab_size)); }) == Status::invalid_argument);
  CHECK(s->position() == 6);
  CHECK(s->decode(7).size() == model->config().vocab_size);
  // A Differential Transformer's state is refused by a SambaY session (and the reverse).
  auto dt = Model::load(*ctx, std::string(DIFFVK_TEST_DATA_DIR) + "/model_tiny");
  auto ds = Session::create(*dt);
  ds->prefill({1, 2, 3});
  const std::vector<uint8_t> dstate = ds->save_state(), pstate = s->save_state();
  try {
    s->restore_state(dstate.data(), dstate.size());
    FAIL("a transformer's state was accepted");
  } catch (const Error& e) {
    CHECK(std::string(e.what()).find("Differential Transformer's state") != std::string::npos);
  }
  CHECK(test::status_of([&] { ds->restore_state(pstate.data(), pstate.size()); }) == Status::invalid_argument);
  CHECK(s->position() == 7);
}

// Session::fill_for_timing (bench --context-fill zeros): the session holds n zero positions and decodes there with
// finite logits, the same each time; it reuses none of them for a prompt, and a reset session afterwards gives a
// fresh session's logits (the zeros leave nothing a prefill reads). A SambaY session and a Differential Transformer's.
// Device sampling after the head's LayerNorm: the one-row logits' program plus sample_topk, against decode()'s logits
// and the host sampler, across the sliding window (chunk 4: rings of 8 rows, wrapped by the 12 + 24 positions).
TEST_CASE("phi4flash session: decode_sample picks decode()'s greedy token and the host sampler's top-k token") {
  for (Precision precision : {Precision::fp32, Precision::fp16}) {
    auto ctx = test::make_context_or_skip(precision);
    if (!ctx) continue;
    CAPTURE(precision_name(ctx->precision()));
    auto model = Model::load(*ctx, kFixture);
    SessionOptions so;
    so.chunk = 4;
    test::check_decode_sample(*model, random_tokens(12, model->config().vocab_size, 5), so);
  }
}

// SessionOptions::profile: GPU timestamps between the dispatches of the last program run (bench --profile), which
// change nothing of what it computes. On a device without timestamps the profile is empty.
TEST_CASE("phi4flash session: profile times each dispatch of the last run, and the logits stay the same") {
  auto ctx = test::make_context_or_skip(Precision::fp32);
  if (!ctx) return;
  auto model = Model::load(*ctx, kFixture);
  SessionOptions plain, timed;
  plain.chunk = timed.chunk = 4;
  timed.profile = true;
  auto a = Session::create(*model, plain), b = Session::create(*model, timed);
  const auto prompt = random_tokens(6, model->config().vocab_size, 9);
  CHECK(a->prefill(prompt) == b->prefill(prompt));
  CHECK(a->decode(5) == b->decode(5));
  CHECK(a->last_profile().empty());
  const auto decode_profile = b->last_profile();
  b->decode_sample(7);
  const auto sample_profile = b->last_profile();
  if (!ctx->caps().timestamps) {
    CHECK(decode_profile.empty());
    CHECK(sample_profile.empty());
    return;
  }
  REQUIRE(!decode_profile.empty());
  size_t scans = 0;
  for (const auto& d : decode_profile) {
    CHECK(d.us >= 0);
    CHECK(!d.op.empty());
    scans += d.op.rfind("selective_scan", 0) == 0;
  }
  CHECK(scans >= 1);  // the Mamba layers' scan, one row
  // Device sampling: the one-row program, one dispatch longer.
  CHECK(sample_profile.size() == decode_profile.size() + 1);
  CHECK(sample_profile.back().op == "sample_topk");
}

TEST_CASE("session: fill_for_timing holds n zero positions, decodes there, and leaves nothing behind") {
  auto ctx = test::make_context_or_skip(Precision::fp32);
  if (!ctx) return;
  for (const std::string dir : {kFixture, std::string(DIFFVK_TEST_DATA_DIR) + "/model_tiny"}) {
    CAPTURE(dir);
    auto model = Model::load(*ctx, dir);
    const uint32_t V = model->config().vocab_size;
    auto s = Session::create(*model, SessionOptions{40, 4});
    const std::vector<int32_t> prompt = random_tokens(9, V, 7);
    const std::vector<float> fresh = Session::create(*model, SessionOptions{40, 4})->prefill(prompt, true);
    s->prefill({1, 2, 3});
    CHECK(test::status_of([&] { s->fill_for_timing(41); }) == Status::context_overflow);
    CHECK(s->position() == 3);  // unchanged
    s->fill_for_timing(30);
    CHECK(s->position() == 30);
    CHECK(s->tokens() == std::vector<int32_t>(30, 0));
    const std::vector<float> a = s->decode(5);
    CHECK(s->position() == 31);
    CHECK(std::all_of(a.begin(), a.end(), [](float x) { return std::isfinite(x); }));
    s->fill_for_timing(30);
    CHECK(s->decode(5) == a);
    uint32_t reused = 99;
    s->fill_for_timing(12);
    CHECK(s->prefill_reusing(std::vector<int32_t>(14, 0), &reused).size() == V);
    CHECK(reused == 0);
    s->reset();
    CHECK(s->prefill(prompt, true) == fresh);
  }
}

// Speculative decoding verifies drafts as prefill rows and rewinds past the rejected ones (a SambaY session: the
// snapshot, or a recompute when a pass spans runs): greedy output and the session's tokens equal plain greedy's.
TEST_CASE("phi4flash session: speculative decoding with prompt lookup gives the tokens of plain greedy decoding") {
  auto ctx = test::make_context_or_skip(Precision::fp32);
  if (!ctx) return;
  // The fixture's shape with a vocabulary of 300 (a bytes tokenizer needs 256 ids).
  test::TempDir tmp("diffvk-phi4flash-speculate");
  test::write_tiny_phi4flash(tmp.path(), 300, 96, 9);
  auto model = Model::load(*ctx, tmp.path());
  const uint32_t V = model->config().vocab_size;
  const Tokenizer tok = Tokenizer::bytes(V, 1, 2);
  std::vector<int32_t> prompt = random_tokens(12, V, 5);
  prompt.insert(prompt.end(), prompt.begin(), prompt.end());  // repeats: the lookup drafts at once
  SamplingOptions greedy;
  greedy.temperature = 0.0f;
  auto run = [&](const GenerateOptions& o, std::vector<int32_t>* held) {
    SessionOptions so;
    so.chunk = 4;  // a pass of k + 1 > 4 rows spans runs
    auto s = Session::create(*model, so);
    Sampler sampler(greedy);
    GenerateResult r = generate(*s, sampler, tok, prompt, o);
    *held = s->tokens();
    return r;
  };
  GenerateOptions plain;
  plain.max_tokens = 24;
  std::vector<int32_t> want_held, held;
  const GenerateResult want = run(plain, &want_held);
  REQUIRE(want.tokens.size() == 24);
  for (uint32_t k : {1u, 3u, 8u}) {
    CAPTURE(k);
    GenerateOptions o = plain;
    o.speculate.draft = Draft::lookup;
    o.speculate.k = k;
    o.speculate.ngram = 1;
    const GenerateResult r = run(o, &held);
    CHECK(r.tokens == want.tokens);
    CHECK(held == want_held);
    CHECK(r.verify_passes > 0);
    MESSAGE("k " << k << ": " << r.verify_passes << " passes, " << r.accepted << " of " << r.drafted
                 << " drafted tokens accepted");
  }
}

// Quantized linears (in_proj, out_proj, fc1, fc2, Wqkv; the tied embedding and head Q8_0 under Q4_0), from a GGUF that
// diffvk quantize wrote and quantized at load, against the reference run on the dequantized weights: the fp32 bound,
// with the dequantizing paths forced (the int8 paths round the activations).
TEST_CASE("phi4flash session: Q8_0 and Q4_0 linears match the reference on the dequantized weights, fp32") {
  auto ctx = test::make_context_or_skip(Precision::fp32);
  if (!ctx) return;
  g_fp16 = false;
  test::TempDir tmp("diffvk-phi4flash-quant");
  LoadOptions lo;
  lo.quant_decode = lo.quant_prefill = LoadOptions::QuantDecode::dequant;
  for (QuantKind kind : {QuantKind::q8_0, QuantKind::q4_0}) {
    CAPTURE(quant_kind_name(kind));
    const std::string gguf = tmp / (std::string(quant_kind_name(kind)) + ".gguf");
    quantize_model(kFixture, gguf, kind);
    Phi4FlashCheckpoint ck = open_phi4flash_gguf(gguf);
    const ref::SambaYShape shape = test::phi4flash_shape(ck.config);
    const uint32_t V = ck.config.vocab_size;
    const std::vector<int32_t> toks = random_tokens(20, V, 21);
    const std::vector<double> expect =
        ref::sambay_forward_full(shape, test::phi4flash_weights(shape, ck), std::vector<int>(toks.begin(), toks.end()));
    LoadOptions at_load = lo;
    at_load.weights = kind;
    for (const std::string& what : {std::string("the GGUF"), std::string("quantized at load")}) {
      CAPTURE(what);
      auto model = what == "the GGUF" ? Model::load(*ctx, gguf, lo) : Model::load(*ctx, kFixture, at_load);
      CHECK(model->load_stats().quant_prefill == "dequant");
      CHECK(model->weight_bytes() < Model::load(*ctx, kFixture)->weight_bytes());
      SessionOptions so;
      so.chunk = 4;
      auto s = Session::create(*model, so);
      check_rows(s->prefill({toks.begin(), toks.begin() + 12}, true), expect, 0, 12, V, what + " prefill");
      for (size_t i = 12; i < toks.size(); ++i) check_rows(s->decode(toks[i]), expect, i, 1, V, what + " decode");
    }
  }
}

// A Q8_0 KV cache (SessionOptions::kv_cache): the shared cache and the sliding layers' rings hold Q8_0 blocks, K and V
// quantized at append and dequantized inside the attention. A checkpoint with head_dim 16 (cache rows of 32: one
// block), against the reference whose K and V rows are quantized and dequantized where the device appends them
// (ref::ActivationStorage::kv_round): prefill in chunks of 4 (rings of 8 rows, wrapped), then decode across the
// window. fp32: 10x the whole-model bound (below). fp16 storage: against the fp16-storage reference, the bounds of
// tests/model/test_quant_model.cpp's Q8_0 cache (nmse <= 2e-5: a K or V an fp16 ulp from a Q8_0 rounding boundary
// lands one step away). Then: fewer cache bytes than f16, logits not the f16 cache's (the cache really is quantized),
// a saved state restored continues bit for bit, an f16-cache session refuses it naming q8_0, rewind.
TEST_CASE("phi4flash session: a Q8_0 KV cache against the reference on the quantized K and V") {
  auto q8_round = [](double* row, int n) {
    std::vector<float> f(row, row + n), y(static_cast<size_t>(n));
    std::vector<uint8_t> blocks(quant_row_bytes(QuantType::q8_0, size_t(n)));
    quantize_row(QuantType::q8_0, f.data(), size_t(n), blocks.data());
    dequantize_row(QuantType::q8_0, blocks.data(), size_t(n), y.data());
    std::copy(y.begin(), y.end(), row);
  };
  test::TempDir tmp("diffvk-phi4flash-kvq8");
  test::TinyPhi4FlashShape sh;
  sh.hidden = 64, sh.heads = 4, sh.kv_heads = 2, sh.intermediate = 64;  // head_dim 16
  test::write_tiny_phi4flash(tmp.path(), 97, 64, 5, "", sh);
  const Phi4FlashCheckpoint ck = open_phi4flash_checkpoint(tmp.path());
  const ref::SambaYShape shape = test::phi4flash_shape(ck.config);
  const std::vector<int32_t> toks = random_tokens(24, 97, 31);
  for (Precision precision : {Precision::fp32, Precision::fp16}) {
    auto ctx = test::make_context_or_skip(precision);
    if (!ctx) continue;
    g_fp16 = ctx->precision() == Precision::fp16;
    g_fused = !ctx->device().tuning().row_prologue_split;
    CAPTURE(g_fp16);
    const ref::SambaYWeights w =
        test::as_device_holds(test::phi4flash_weights(shape, SafetensorsFile::open(tmp / "model.safetensors")), g_fp16);
    auto model = Model::load(*ctx, tmp.path());
    SessionOptions so;
    so.chunk = 4;
    so.kv_cache = KvCacheType::q8_0;
    auto s = Session::create(*model, so);
    CHECK(s->kv_cache() == KvCacheType::q8_0);
    SessionOptions sf = so;
    sf.kv_cache = KvCacheType::f16;
    auto s16 = Session::create(*model, sf);
    CHECK(s->kv_cache_bytes() < s16->kv_cache_bytes());

    Runs runs(shape, toks.size());
    std::vector<float> got = s->prefill({toks.begin(), toks.begin() + 12}, true);
    runs.prefill(0, 12, 4, false);
    for (size_t i = 12; i < toks.size(); ++i) {
      const std::vector<float> row = s->decode(toks[i]);
      got.insert(got.end(), row.begin(), row.end());
      runs.run(i, 1);
    }
    ref::ActivationStorage a;
    a.fp16 = g_fp16;
    if (g_fp16) a.fused_from = runs.fused_from;
    a.kv_round = q8_round;
    const std::vector<double> expect =
        ref::sambay_forward_full(shape, w, std::vector<int>(toks.begin(), toks.end()), a);
    const test::Parity p = test::parity(got, std::vector<float>(expect.begin(), expect.end()), 97);
    MESSAGE("phi4flash kv q8_0 " << (g_fp16 ? "fp16" : "fp32") << ": max_abs=" << p.max_abs << " max_ref=" << p.max_ref
                                 << " nmse=" << p.nmse << " top1=" << p.top1);
    if (!g_fp16) {
      // Not the whole-model bound (1e-4·scale): a K or V within fp32 rounding of a Q8_0 rounding boundary quantizes one
      // step d away on the device (measured on lavapipe: one such value at row 13 put rows 13-16 at up to 9e-5·scale,
      // the other rows at 3e-6·scale). 1e-3·scale and nmse 1e-7 keep 40x and 56x from the logits of a cache that
      // is not quantized (0.019 = 3.7e-3·scale, nmse 5.6e-6).
      CHECK(p.nmse <= 1e-7);
      CHECK(p.max_abs <= 1e-3 * std::max(1.0, p.max_ref));
      CHECK(p.top1 >= 0.99);
    } else {
      CHECK(p.nmse <= 2e-5);
      CHECK(p.max_abs <= 1e-2 * std::max(1.0, p.max_ref));
      CHECK(p.top1 >= 0.99);
    }
    // The f16 cache's logits differ: the cache really was quantized.
    std::vector<float> f16kv = s16->prefill({toks.begin(), toks.begin() + 12}, true);
    const test::Parity d = test::parity(std::vector<float>(got.begin(), got.begin() + f16kv.size()), f16kv, 97);
    CHECK(d.nmse > 1e-10);

    // Saved state: a restored Q8_0 session continues bit for bit; an f16-cache session refuses it, naming q8_0.
    s->rewind(18);
    const std::vector<uint8_t> state = s->save_state();
    const std::vector<float> next = s->decode(toks[18]);
    auto r = Session::create(*model, so);
    r->restore_state(state.data(), state.size());
    CHECK(r->decode(toks[18]) == next);
    try {
      s16->restore_state(state.data(), state.size());
      FAIL("an f16-cache session accepted a q8_0 state");
    } catch (const Error& e) {
      CHECK(std::string(e.what()).find("q8_0") != std::string::npos);
    }
    // Rewind into the last run and decode again: the same logits.
    s->rewind(18);
    CHECK(s->decode(toks[18]) == next);
  }
}
