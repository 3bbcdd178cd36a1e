// The Phi-4-mini-flash (SambaY) forward graph of a whole prompt (runtime/model/phi4flash_forward.*, the blocks of
// runtime/model/recipe_sambay.*) on the tiny fixture tests/data/phi4flash_tiny (8 layers, every kind, window 5),
// against the float64 reference's full form (ref::sambay_forward_full) run on the weights as the device holds them:
// float32 from the BF16 checkpoint (exact); for fp16 storage the storage-type tensors rounded to fp16 (the biases,
// A_log and D stay float32 on the device, and λ is computed on the host from the float vectors). Bounds: docs/maths.md,
// a whole model (logits): fp32 max abs <= 1e-4·scale; fp16 max abs <= 1e-2·scale, nmse <= 5e-6, top-1 >= 99%
// (test::ok). fp16 is held to the whole bound against the reference that rounds each activation to fp16 where the
// device stores one (ref::ActivationStorage), and to its max abs and top-1 against the exact one (the fp16 case
// below says why). The arena and the K/V caches are poisoned (NaN) before each prompt. YOCO's last-row form
// (prompt_last) is held to the same bounds against the full form's last row, and to the whole bound against the
// device's all-rows run.
#include <doctest/doctest.h>

#include <algorithm>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "diffvk/gguf.hpp"
#include "diffvk/npy.hpp"
#include "gpu_test.hpp"
#include "model/phi4flash_checkpoint.hpp"
#include "model/phi4flash_forward.hpp"
#include "model_fixture.hpp"
#include "model_parity.hpp"
#include "phi4flash_fixture.hpp"
#include "status_of.hpp"
#include "reference/diff_attn_ref.hpp"

using namespace diffvk;

namespace {

const std::string kFixture = std::string(DIFFVK_TEST_DATA_DIR) + "/phi4flash_tiny";

std::vector<int32_t> fixture_tokens() {
  const NpyArray t = read_npy(kFixture + "/tokens.npy");
  REQUIRE(t.dtype == "<i8");
  std::vector<int32_t> out;
  for (uint64_t i = 0; i < t.numel(); ++i) {
    int64_t v;
    std::memcpy(&v, t.data.data() + 8 * i, 8);
    out.push_back(int32_t(v));
  }
  return out;
}

// The fixture's tokens, then seeded random ids up to n tokens.
std::vector<int32_t> prompt_of(size_t n, uint32_t vocab) {
  std::vector<int32_t> t = fixture_tokens();
  std::mt19937_64 rng(7);
  while (t.size() < n) t.push_back(int32_t(rng() % vocab));
  t.resize(n);
  return t;
}

struct Case {
  size_t tokens = 0;
  uint32_t chunk = 0;  // 0: the whole prompt in one program
};

// What an fp16 run is held to against the exact reference: the whole-model bound of docs/maths.md, or its parts
// (see the fp16 cases below).
enum class Bound { whole, without_nmse };

bool within(const test::Parity& p, bool fp16, Bound b) {
  if (!fp16 || b == Bound::whole) return test::ok(p, fp16);
  return p.max_abs <= 1e-2 * std::max(1.0, p.max_ref) && p.top1 >= 0.99;
}

// The reference's activations as an fp16 device stores them for a prompt of T tokens in programs of `chunk` rows
// (ref::ActivationStorage): a one-row program fuses the MLP's SwiGLU into fc2 in every layer, and YOCO's last row
// (last_only) runs the layers from L/2 + 1 on as a one-row pass, where the device fuses (`fused`: the tuning's
// row_prologue, fused on GPUs; CPU drivers store the SwiGLU's output as a multi-row pass does).
ref::ActivationStorage fp16_storage(const ref::SambaYShape& s, size_t T, uint32_t chunk, bool last_only, bool fused) {
  ref::ActivationStorage a;
  a.fp16 = true;
  a.fused_from.assign(T, s.L);
  if (!fused) return a;
  for (size_t r0 = 0; r0 < T; r0 += chunk)
    if (std::min<size_t>(chunk, T - r0) == 1) a.fused_from[r0] = 0;
  if (last_only) a.fused_from.back() = std::min(a.fused_from.back(), s.shared_kv_layer());
  return a;
}

std::vector<float> last_row(const std::vector<double>& logits, uint32_t V) {
  return std::vector<float>(logits.end() - V, logits.end());
}

void check_prompts(Precision precision, const std::vector<Case>& cases, Bound bound = Bound::whole) {
  auto ctx = test::make_context_or_skip(precision);
  if (!ctx) return;
  const bool fp16 = ctx->precision() == Precision::fp16;
  const bool fused = !ctx->device().tuning().row_prologue_split;
  const Phi4FlashCheckpoint ck = open_phi4flash_checkpoint(kFixture);
  const ref::SambaYShape shape = test::phi4flash_shape(ck.config);
  const auto file = SafetensorsFile::open(kFixture + "/model.safetensors");
  const ref::SambaYWeights weights = test::as_device_holds(test::phi4flash_weights(shape, file), fp16);
  const uint32_t V = ck.config.vocab_size;
  for (const Case& c : cases) {
    Phi4FlashForwardOptions o;
    o.max_positions = 64;
    o.chunk = c.chunk;
    auto fwd = Phi4FlashForward::load(ctx->device(), ck, o);
    const std::vector<int32_t> toks = prompt_of(c.tokens, V);
    const std::vector<double> expect =
        ref::sambay_forward_full(shape, weights, std::vector<int>(toks.begin(), toks.end()));
    fwd->fill_for_testing(test::kPoison);
    const std::vector<float> got = fwd->prompt(toks);
    REQUIRE(got.size() == expect.size());
    const test::Parity p = test::parity(got, std::vector<float>(expect.begin(), expect.end()), V);
    INFO(std::string(precision_name(ctx->precision()))
         << ": " << c.tokens << " tokens, chunk " << fwd->chunk() << ", ring " << fwd->ring_rows()
         << " rows: max_abs=" << p.max_abs << " max_ref=" << p.max_ref << " nmse=" << p.nmse << " top1=" << p.top1);
    MESSAGE(std::string(precision_name(ctx->precision()))
            << ": " << c.tokens << " tokens, chunk " << fwd->chunk() << ": max_abs=" << p.max_abs
            << " max_ref=" << p.max_ref << " nmse=" << p.nmse << " top1=" << p.top1);
    CHECK(within(p, fp16, bound));
    const std::vector<int> ids(toks.begin(), toks.end());
    if (fp16) {  // against the reference that stores activations where the device does: the whole bound
      const std::vector<double> stored =
          ref::sambay_forward_full(shape, weights, ids, fp16_storage(shape, toks.size(), fwd->chunk(), false, fused));
      const test::Parity ps = test::parity(got, std::vector<float>(stored.begin(), stored.end()), V);
      MESSAGE("fp16 vs the fp16-storage reference: max_abs=" << ps.max_abs << " nmse=" << ps.nmse
                                                             << " top1=" << ps.top1);
      CHECK(test::ok(ps, true));
    }
    // A second prompt on the same object starts afresh (states reset, caches overwritten before they are read).
    fwd->fill_for_testing(test::kPoison);
    CHECK(fwd->prompt(toks) == got);
    // YOCO: the last row alone through the cross-decoder equals the full form's last row (the reference's, and
    // the device's all-rows run), to the same bounds.
    fwd->fill_for_testing(test::kPoison);
    const std::vector<float> last = fwd->prompt_last(toks);
    REQUIRE(last.size() == V);
    const std::vector<float> ref_last(expect.end() - V, expect.end()), got_last(got.end() - V, got.end());
    const test::Parity pl = test::parity(last, ref_last, V), pg = test::parity(last, got_last, V);
    MESSAGE(std::string(precision_name(ctx->precision()))
            << ": YOCO last row vs reference: max_abs=" << pl.max_abs << " max_ref=" << pl.max_ref
            << " nmse=" << pl.nmse << " top1=" << pl.top1 << "; vs the all-rows run: max_abs=" << pg.max_abs
            << " nmse=" << pg.nmse);
    CHECK(within(pl, fp16, bound));
    CHECK(test::ok(pg, fp16));
    if (fp16) {
      const std::vector<double> stored =
          ref::sambay_forward_full(shape, weights, ids, fp16_storage(shape, toks.size(), fwd->chunk(), true, fused));
      const test::Parity ps = test::parity(last, last_row(stored, V), V);
      MESSAGE("fp16 YOCO last row vs the fp16-storage reference: max_abs=" << ps.max_abs << " nmse=" << ps.nmse);
      CHECK(test::ok(ps, true));
    }
  }
}

// The fixture's 13 tokens in one program (window 5: the mask matters), 41 tokens in one program (an odd length past
// the selective scan's one-dispatch limit of 32 rows: its chunked scan), 23 tokens in chunks of 4 (a ring of
// 5 + 4 − 1 = 8 rows wrapped twice; the attention's split-K decode path, a last chunk of 3 rows) and 13 in chunks
// of 3 (a last chunk of one row).
const std::vector<Case> kCases = {{13, 0}, {41, 0}, {23, 4}, {13, 3}};

}  // namespace

TEST_CASE("phi4flash forward: the tiny fixture's prompts match the float64 reference, fp32") {
  check_prompts(Precision::fp32, kCases);
}

// Measured on lavapipe against the exact reference: max abs 0.081–0.107 (bound 0.22–0.26), top-1 100%, but nmse
// 4.9e-6–6.7e-6 over all rows and up to 2.0e-5 on YOCO's one row, against the bound 5e-6. fp16 activation storage
// costs that on this random fixture, not the kernels: the reference that rounds where the device stores
// (ActivationStorage) is as far from the exact one (nmse 7.2e-6 over the 13 tokens' rows, 2.3e-5 on the last), no
// one storage point carries it (the early layers amplify every point's rounding: docs/phi4flash.md,
// tests/python/phi4flash_fp16_storage.py), and the device is within the whole bound of that reference (nmse
// 4.5e-7–5.4e-7 over all rows, 6.6e-7–1.2e-6 on YOCO's row). So against the exact reference this case holds the
// bound's max abs and top-1 and prints the nmse (MESSAGE).
TEST_CASE(
    "phi4flash forward: the tiny fixture's prompts match the float64 reference, fp16 (the whole bound against "
    "the fp16-storage reference)") {
  check_prompts(Precision::fp16, kCases, Bound::without_nmse);
}

TEST_CASE("phi4flash forward: a prompt past max_positions, an empty prompt and a token outside the vocabulary") {
  auto ctx = test::make_context_or_skip(Precision::fp32);
  if (!ctx) return;
  const Phi4FlashCheckpoint ck = open_phi4flash_checkpoint(kFixture);
  Phi4FlashForwardOptions o;
  o.max_positions = 16;
  o.chunk = 8;
  auto fwd = Phi4FlashForward::load(ctx->device(), ck, o);
  const uint32_t V = ck.config.vocab_size;
  CHECK(test::status_of([&] { fwd->prompt(prompt_of(17, V)); }) == Status::context_overflow);
  CHECK(test::status_of([&] { fwd->prompt_last(prompt_of(17, V)); }) == Status::context_overflow);
  CHECK(test::status_of([&] { fwd->prompt({}); }) == Status::invalid_argument);
  CHECK(test::status_of([&] { fwd->prompt({1, int32_t(V)}); }) == Status::invalid_argument);
  CHECK(test::status_of([&] { fwd->prompt({-1}); }) == Status::invalid_argument);
  // The object still runs after refusing (nothing was recorded for the refused calls).
  CHECK(fwd->prompt(prompt_of(16, V)).size() == 16u * V);
  o.max_positions = ck.config.max_position_embeddings + 1;
  CHECK(test::status_of([&] { Phi4FlashForward::load(ctx->device(), ck, o); }) == Status::invalid_argument);
}

TEST_CASE("phi4flash forward: an F16 GGUF of the fixture (diffvk quantize) gives the safetensors run's logits, fp32") {
  // The GGUF holds the linears as F16 and every vector as F32: the two checkpoints differ only by the F16 rounding of
  // the BF16 values fp16 does not hold exactly, so their runs agree to the fp32 model bound (measured max abs 6.7e-6
  // at max |logit| 21.7). The GGUF reader's sources go through the same upload.
  auto ctx = test::make_context_or_skip(Precision::fp32);
  if (!ctx) return;
  test::TempDir tmp("diffvk-phi4flash-forward");
  const std::string gguf = tmp / "tiny.gguf";
  quantize_model(kFixture, gguf, QuantKind::f16);
  const Phi4FlashCheckpoint st = open_phi4flash_checkpoint(kFixture), gg = open_phi4flash_gguf(gguf);
  Phi4FlashForwardOptions o;
  o.max_positions = 32;
  o.chunk = 8;
  const std::vector<int32_t> toks = prompt_of(19, st.config.vocab_size);
  const std::vector<float> a = Phi4FlashForward::load(ctx->device(), st, o)->prompt(toks),
                           b = Phi4FlashForward::load(ctx->device(), gg, o)->prompt(toks);
  const test::Parity p = test::parity(b, a, st.config.vocab_size);
  INFO("gguf vs safetensors: max_abs=" << p.max_abs << " max_ref=" << p.max_ref);
  CHECK(test::ok(p, false));
}
