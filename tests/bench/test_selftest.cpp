// The self-test at load (include/diffvk/selftest.hpp, docs/decisions/024-selftest-at-load.md): diffvk_bench's runner
// driven by Context::create, the fallback chain through the tuning keys (each class of planted fault caught, the
// fallback taken, the model's logits conforming on the context it gives), the verdict file written and read, the
// error when nothing passes, and the option's C ABI field.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>
#include <vector>

#include "bench/op_cases.hpp"
#include "diffvk/bench.hpp"
#include "diffvk/cache_dir.hpp"
#include "diffvk/diffvk.h"
#include "diffvk/selftest.hpp"
#include "cli_run.hpp"
#include "gpu_test.hpp"
#include "model_fixture.hpp"
#include "model_parity.hpp"

using namespace diffvk;

namespace {

// A cache directory of its own and diffvk_bench's runner, counting its passes; both undone at the end.
struct SelftestEnv {
  test::TempDir dir{"diffvk-selftest"};
  std::shared_ptr<std::atomic<int>> passes = std::make_shared<std::atomic<int>>(0);
  std::string saved_mode;  // DIFFVK_SELFTEST (tests/common/test_main.cpp sets off): unset here
  SelftestEnv() {
    if (const char* m = std::getenv("DIFFVK_SELFTEST")) saved_mode = m;
    ::unsetenv("DIFFVK_SELFTEST");
    platform::set_cache_dir(dir.path());
    auto n = passes;
    set_selftest_runner([n](Device& d, const SelftestRequest& r) {
      ++*n;
      return bench::run_selftest_cases(d, r);
    });
  }
  ~SelftestEnv() {
    set_selftest_runner({});
    platform::set_cache_dir("");
    if (!saved_mode.empty()) ::setenv("DIFFVK_SELFTEST", saved_mode.c_str(), 1);
  }
};

ContextOptions selftest_options(SelftestMode mode, std::vector<std::string> ops = {}) {
  ContextOptions o = test::validated_options();
  o.pipeline_cache = false;
  o.selftest = mode;
  o.selftest_ops = std::move(ops);
  return o;
}

}  // namespace

TEST_CASE("selftest: every op's cases pass on the test device, and the run is timed") {
  SelftestEnv env;
  auto ctx = Context::create(selftest_options(SelftestMode::always));
  const SelftestReport& r = ctx->selftest();
  MESSAGE("self-test on " << ctx->caps().name << " (" << precision_name(ctx->precision())
                          << ", validation on): " << r.seconds << " s\n"
                          << r.table());
  CHECK(r.ran);
  CHECK_FALSE(r.from_cache);
  CHECK(r.fallback.empty());
  CHECK(r.seconds > 0);
  CHECK(env.passes->load() == 1);
  std::set<std::string> ops, first_used;
  for (const SelftestRow& row : r.rows) {
    INFO(row.op << " " << row.variant << ": " << row.failure);
    CHECK(row.pass);
    CHECK(row.cases > 0);
    CHECK(row.worst <= 1.0);
    ops.insert(row.op);
    // The compile-time record (.ci/compile-times): the cases that dispatched pipelines no earlier case had, each
    // pipeline named once in the whole pass (gmu_gate's case has none: it runs silu_mul's kernel).
    CHECK(row.first_uses.size() <= row.cases);
    if (row.op == "linear" || row.op == "diff_attn") CHECK(!row.first_uses.empty());
    for (const SelftestFirstUse& u : row.first_uses) {
      CHECK(u.seconds >= 0);
      CHECK(!u.pipelines.empty());
      for (const std::string& p : u.pipelines) CHECK_MESSAGE(first_used.insert(p).second, p << " first used twice");
    }
  }
  for (const std::string& op : bench::table_ops()) CHECK_MESSAGE(ops.count(op) == 1, op << " was not tested");
  CHECK(std::filesystem::exists(r.verdict_path));
  // Its pipelines stay compiled for the model to adopt (Device::park_pipelines), at most one per pipeline it ran.
  CHECK(!ctx->device().parked_pipelines().empty());
}

TEST_CASE("selftest: auto writes the verdict file, and the next create reads it instead of testing") {
  SelftestEnv env;
  const ContextOptions o = selftest_options(SelftestMode::automatic, {"silu_mul", "head_rmsnorm"});
  SelftestReport first;
  {
    auto ctx = Context::create(o);
    first = ctx->selftest();
  }
  CHECK(first.ran);
  CHECK(env.passes->load() == 1);
  REQUIRE_FALSE(first.verdict_path.empty());
  CHECK(first.verdict_path.rfind(env.dir.path() + "/diffvk/selftest/", 0) == 0);
  CHECK(std::filesystem::exists(first.verdict_path));
  // No temporary left behind by the atomic write.
  for (const auto& e : std::filesystem::directory_iterator(env.dir.path() + "/diffvk/selftest"))
    CHECK(e.path().extension() == ".json");
  auto again = Context::create(o);
  const SelftestReport& r = again->selftest();
  CHECK(env.passes->load() == 1);  // read, not run
  CHECK_FALSE(r.ran);
  CHECK(r.from_cache);
  CHECK(r.seconds == 0);
  CHECK(r.tested_seconds == doctest::Approx(first.seconds));
  REQUIRE(r.rows.size() == first.rows.size());
  for (size_t i = 0; i < r.rows.size(); ++i) {
    CHECK(r.rows[i].op == first.rows[i].op);
    CHECK(r.rows[i].variant == first.rows[i].variant);
    CHECK(r.rows[i].max_error == doctest::Approx(first.rows[i].max_error));
  }
  // always tests again; another configuration (other ops) has its own verdict; off reads and tests nothing.
  auto always = Context::create(selftest_options(SelftestMode::always, {"silu_mul", "head_rmsnorm"}));
  CHECK(env.passes->load() == 2);
  auto other = Context::create(selftest_options(SelftestMode::automatic, {"silu_mul"}));
  CHECK(env.passes->load() == 3);
  auto off = Context::create(selftest_options(SelftestMode::off, {"silu_mul"}));
  CHECK(env.passes->load() == 3);
  CHECK_FALSE(off->selftest().ran);
  CHECK_FALSE(off->selftest().from_cache);
  // A damaged verdict file is tested again (and rewritten).
  std::ofstream(first.verdict_path, std::ios::trunc) << "{ not json";
  auto damaged = Context::create(o);
  CHECK(env.passes->load() == 4);
  CHECK(damaged->selftest().ran);
}

namespace {

const std::string kTiny = std::string(DIFFVK_TEST_DATA_DIR) + "/model_tiny";

// What a planted fault must show in its row's failure text, after the case's name.
std::vector<std::string> marks_of(SelftestFault fault) {
  switch (fault) {
    case SelftestFault::wrong_value:  // the check alone: in both runs, so the replay is identical
      return {"FAILED", "nonfinite=0 ", "replay identical"};
    case SelftestFault::nan:
    case SelftestFault::fp16_overflow:
      return {"FAILED", "nonfinite=1 ", "replay identical"};
    case SelftestFault::stale:
      return {"FAILED", "nonfinite=", "replay identical"};
    case SelftestFault::pipeline_failure:
      return {"vkCreateComputePipelines", "VK_ERROR_UNKNOWN"};
  }
  return {};
}

// A fault of class `fault` planted in head_rmsnorm's variants that use the first feature of the chain the test device
// has on: the self-test must catch it (the row fails naming the case, with the fault's marks), fall back through
// that key (subgroup operations: for head_rmsnorm's kernel only), retest and pass; the context opens, and the tiny
// model's logits on it (head_rmsnorm's shared-memory reduction beside the other kernels' subgroup variants) match
// the PyTorch float64 reference at docs/maths.md's whole-model bounds. Returns the options and the fallback ("" when
// skipped).
std::pair<ContextOptions, std::string> planted_fault_falls_back(const SelftestEnv& env, SelftestFault fault) {
  std::string key, step;
  bool fp16 = false;
  {
    auto probe = Context::create(selftest_options(SelftestMode::off));
    fp16 = probe->precision() == Precision::fp16;
    if (probe->tuning().subgroup)  // per op: head_rmsnorm's kernel only
      key = "subgroup", step = "subgroup_off=head_rmsnorm";
    else if (probe->tuning().fp16)
      key = "fp16", step = "fp16=off";
  }
  if (fault == SelftestFault::fp16_overflow && !fp16) {
    test::skip("the test device has no fp16 path: an fp16 overflow has no fp16-storage variant to be planted in");
    return {};
  }
  if (key.empty()) {
    test::skip("the test device runs neither subgroup operations nor fp16: no fallback to take for head_rmsnorm");
    return {};
  }
  ContextOptions o = selftest_options(SelftestMode::automatic, {"silu_mul", "head_rmsnorm"});
  o.selftest_fail_variant = "head_rmsnorm:" + key;
  o.selftest_fault = fault;
  auto ctx = Context::create(o);
  const SelftestReport& r = ctx->selftest();
  MESSAGE(std::string(selftest_fault_name(fault)) << ":\n" << r.table());
  CHECK(r.config.find(std::string(";fault=") + selftest_fault_name(fault)) != std::string::npos);
  CHECK(r.fallback == step);
  CHECK(env.passes->load() == 2);  // the test, then the retest under the fallback
  if (key == "subgroup") {         // off for head_rmsnorm's kernel, still on for the others
    CHECK_FALSE(ctx->tuning().subgroup_for("head_rmsnorm"));
    CHECK(ctx->tuning().subgroup);
    CHECK(ctx->tuning().subgroup_for("linear"));
    CHECK(ctx->tuning().subgroup_for("attention"));
  }
  if (key == "fp16") CHECK(ctx->precision() == Precision::fp32);
  std::set<std::string> names;
  for (const auto& c : bench::op_cases("head_rmsnorm", bench::OpMode::conformance)) names.insert(c->name);
  bool failed = false, retested = false;
  for (const SelftestRow& row : r.rows) {
    if (!row.pass) {
      failed = true;
      INFO(row.failure);
      CHECK(row.op == "head_rmsnorm");
      CHECK(row.fallback == step);
      CHECK(row.tuning.empty());
      CHECK(names.count(row.failure.substr(0, row.failure.find(": "))) == 1);  // names the case
      for (const std::string& m : marks_of(fault)) CHECK(row.failure.find(m) != std::string::npos);
      const size_t at = row.failure.find("nonfinite=");
      if (fault == SelftestFault::stale && at != std::string::npos)  // several elements (its first case has 32)
        CHECK(std::stoul(row.failure.substr(at + 10)) >= 2);
    }
    if (row.tuning == step) {
      retested = true;
      CHECK(row.pass);
    }
  }
  CHECK(failed);
  CHECK(retested);
  // The fallback's context computes the model right.
  const bool ctx_fp16 = ctx->precision() == Precision::fp16;
  auto model = Model::load(*ctx, kTiny);
  const auto toks = test::load_tokens(kTiny + "/tokens.npy");
  const auto ref = npy_as_float(read_npy(kTiny + "/logits.npy"));
  auto s = Session::create(*model, SessionOptions{0, 64});
  const test::Parity p = test::parity(test::teacher_forced(*s, toks, 9), ref, model->config().vocab_size);
  INFO(precision_name(ctx->precision()) << ": max_abs=" << p.max_abs << " max_ref=" << p.max_ref << " nmse=" << p.nmse
                                        << " top1=" << p.top1);
  CHECK(test::ok(p, ctx_fp16));
  return {o, step};
}

}  // namespace

TEST_CASE("selftest: a planted wrong element is caught, falls back through its tuning key, and the model conforms") {
  SelftestEnv env;
  const auto [o, step] = planted_fault_falls_back(env, SelftestFault::wrong_value);
  if (step.empty()) return;
  // The verdict keeps the fallback: the next context takes it without a test.
  auto again = Context::create(o);
  CHECK(env.passes->load() == 2);
  CHECK(again->selftest().from_cache);
  CHECK(again->selftest().fallback == step);
  if (step == "subgroup_off=head_rmsnorm") {
    CHECK_FALSE(again->tuning().subgroup_for("head_rmsnorm"));
    CHECK(again->tuning().subgroup_for("linear"));
  }
  if (step == "fp16=off") CHECK(again->precision() == Precision::fp32);
}

TEST_CASE("selftest: a planted NaN is caught, falls back, and the model conforms") {
  SelftestEnv env;
  planted_fault_falls_back(env, SelftestFault::nan);
}

TEST_CASE("selftest: a planted fp16 overflow (+inf) is caught, falls back, and the model conforms") {
  SelftestEnv env;
  planted_fault_falls_back(env, SelftestFault::fp16_overflow);
}

TEST_CASE("selftest: a planted missing barrier's race (stale elements) is caught, falls back, and the model conforms") {
  SelftestEnv env;
  planted_fault_falls_back(env, SelftestFault::stale);
}

TEST_CASE("selftest: a planted pipeline creation failure is caught, falls back, and the model conforms") {
  SelftestEnv env;
  planted_fault_falls_back(env, SelftestFault::pipeline_failure);
}

namespace {
std::vector<std::string> ops_of(const std::vector<SelftestRow>& rows) {
  std::vector<std::string> ops;
  for (const SelftestRow& r : rows) ops.push_back(r.op);
  return ops;
}
bool has_op(const std::vector<SelftestRow>& rows, const std::string& op) {
  const std::vector<std::string> ops = ops_of(rows);
  return std::find(ops.begin(), ops.end(), op) != ops.end();
}
// The ops a verdict file's configuration still leaves to their first record.
std::vector<std::string> deferred_in(const std::string& path) {
  std::ifstream in(path);
  const nlohmann::json j = nlohmann::json::parse(in);
  REQUIRE(j["configs"].size() == 1);
  return j["configs"].begin().value()["deferred"].get<std::vector<std::string>>();
}
}  // namespace

// auto leaves the forms sessions record only on request (attention maps, the context shift) to their first record:
// tested there once, their pipelines adopted by the session's kernels, their rows kept in the verdict for the next
// create. A failure there refuses the call (naming the op and the variant, the session left usable), and the next
// create tests the op at load, where the fallback takes over.
TEST_CASE("selftest: auto tests the attention maps and the context shift at their first record") {
  SelftestEnv env;
  ContextOptions o = selftest_options(SelftestMode::automatic, bench::selftest_ops_for_model(kTiny));
  o.selftest_weights = bench::selftest_weights_for_load(kTiny, QuantKind::f16, false);
  o.selftest_model = bench::selftest_model_for_model(kTiny);
  const auto toks = test::load_tokens(kTiny + "/tokens.npy");
  const std::vector<int32_t> prompt(toks.begin(), toks.begin() + 6);
  const std::vector<std::string> both{"attn_probs", "kv_shift"};
  std::string key, step;
  {
    auto ctx = Context::create(o);
    const SelftestReport& r = ctx->selftest();
    CHECK(r.ran);
    CHECK(r.deferred == both);
    CHECK_FALSE(has_op(r.rows, "attn_probs"));
    CHECK_FALSE(has_op(r.rows, "kv_shift"));
    CHECK(has_op(r.rows, "diff_attn"));
    CHECK(deferred_in(r.verdict_path) == both);
    CHECK(ctx->device().selftest_untested() == both);
    CHECK(env.passes->load() == 1);
    auto model = Model::load(*ctx, kTiny);
    auto s = Session::create(*model, SessionOptions{0, 64});
    s->prefill(prompt);
    CHECK(env.passes->load() == 1);  // a prefill records neither
    const AttentionMaps maps = s->attention_maps(prompt, 1);
    CHECK(maps.tokens == prompt.size());
    CHECK(env.passes->load() == 2);
    CHECK(deferred_in(r.verdict_path) == std::vector<std::string>{"kv_shift"});
    (void)s->attention_maps(prompt, 0);  // tested once
    CHECK(env.passes->load() == 2);
    s->prefill(prompt);
    s->shift(1, 2);
    CHECK(env.passes->load() == 3);
    CHECK(deferred_in(r.verdict_path).empty());
    CHECK(ctx->device().selftest_untested().empty());
    // The session's kernels took the pipelines the first-use tests compiled.
    for (const Pipeline* p : ctx->device().pipelines())
      if (p->name().rfind("attn_probs", 0) == 0 || p->name().rfind("kv_shift", 0) == 0)
        CHECK_MESSAGE(p->compile_seconds() == 0, p->name() << " compiled again");
    if (ctx->tuning().subgroup_for("attn_probs"))
      key = "subgroup", step = "subgroup_off=attn_probs";
    else if (ctx->tuning().fp16)
      key = "fp16", step = "fp16=off";
  }
  {  // the next create reads every row, the first-use ones included
    auto ctx = Context::create(o);
    const SelftestReport& r = ctx->selftest();
    CHECK(r.from_cache);
    CHECK(r.deferred.empty());
    CHECK(has_op(r.rows, "attn_probs"));
    CHECK(has_op(r.rows, "kv_shift"));
    CHECK(env.passes->load() == 3);
  }
  if (key.empty()) {
    test::skip("the test device runs neither subgroup operations nor fp16 in attn_probs: no fallback to take");
    return;
  }
  o.selftest_fail_variant = "attn_probs:" + key;
  {
    auto ctx = Context::create(o);
    CHECK(ctx->selftest().deferred == both);
    CHECK(ctx->selftest().fallback.empty());
    CHECK(env.passes->load() == 4);
    auto model = Model::load(*ctx, kTiny);
    auto s = Session::create(*model, SessionOptions{0, 64});
    s->prefill(prompt);
    const std::vector<float> before = s->decode(toks[6]);
    for (int i = 0; i < 2; ++i) {  // tested once; refused each time
      try {
        (void)s->attention_maps(prompt, 1);
        FAIL("a failing attn_probs was not refused");
      } catch (const Error& e) {
        CHECK(e.status() == Status::unsupported);
        const std::string what = e.what();
        INFO(what);
        CHECK(what.find("self-test at first use: op 'attn_probs' variant '") != std::string::npos);
        CHECK(what.find("FAILED") != std::string::npos);
      }
      CHECK(env.passes->load() == 5);
    }
    CHECK(s->position() == prompt.size() + 1);  // refused before anything was recorded
    CHECK(s->decode(toks[7]).size() == before.size());
  }
  {  // the next create tests attn_probs at load and falls back
    auto ctx = Context::create(o);
    const SelftestReport& r = ctx->selftest();
    MESSAGE(r.table());
    CHECK(r.ran);
    CHECK(r.fallback == step);
    CHECK(r.deferred == std::vector<std::string>{"kv_shift"});
    CHECK(env.passes->load() == 7);  // the test, then the retest under the fallback
    auto model = Model::load(*ctx, kTiny);
    auto s = Session::create(*model, SessionOptions{0, 64});
    CHECK(s->attention_maps(prompt, 1).tokens == prompt.size());
    CHECK(env.passes->load() == 7);
  }
  {
    auto ctx = Context::create(o);  // and reads that verdict next time
    CHECK(ctx->selftest().from_cache);
    CHECK(ctx->selftest().fallback == step);
    CHECK(env.passes->load() == 7);
    // A first-use mark of the wrong type is an unreadable verdict: tested again, not an error.
    const std::string path = ctx->selftest().verdict_path;
    std::ifstream in(path);
    nlohmann::json j = nlohmann::json::parse(in);
    in.close();
    for (auto& e : j["configs"]) e["retest"] = "yes";
    std::ofstream(path, std::ios::trunc) << j.dump();
  }
  auto ctx = Context::create(o);
  CHECK(ctx->selftest().ran);
  CHECK(env.passes->load() > 7);
}

TEST_CASE("selftest: the fault hook's bad values are errors naming the field") {
  CHECK(parse_selftest_fault("stale") == SelftestFault::stale);
  CHECK_THROWS_WITH_AS(parse_selftest_fault("melted"),
                       doctest::Contains("selftest_fault: 'melted' is not a fault class (wrong_value, nan"), Error);
  for (SelftestFault f : {SelftestFault::wrong_value, SelftestFault::nan, SelftestFault::fp16_overflow,
                          SelftestFault::stale, SelftestFault::pipeline_failure})
    CHECK(parse_selftest_fault(selftest_fault_name(f)) == f);
  SelftestEnv env;
  ContextOptions o = selftest_options(SelftestMode::always, {"silu_mul"});
  o.selftest_fault = SelftestFault::nan;  // without the variants to plant it in
  CHECK_THROWS_WITH_AS(Context::create(o), doctest::Contains("ContextOptions::selftest_fault 'nan' needs"), Error);
  o.selftest_fail_variant = "silu_mul";
  o.selftest_fault = static_cast<SelftestFault>(42);
  CHECK_THROWS_WITH_AS(Context::create(o), doctest::Contains("ContextOptions::selftest_fault 42 is not a fault class"),
                       Error);
  CHECK(env.passes->load() == 0);
}

TEST_CASE("selftest: nothing passing fails the create naming the op and the variant, also from the verdict") {
  SelftestEnv env;
  ContextOptions o = selftest_options(SelftestMode::automatic, {"silu_mul"});
  o.selftest_fail_variant = "silu_mul";  // every variant: the chain runs out
  std::string first;
  try {
    Context::create(o);
    FAIL("the create succeeded");
  } catch (const Error& e) {
    first = e.what();
    CHECK(e.status() == Status::unsupported);
  }
  INFO(first);
  CHECK(first.find("op 'silu_mul' variant 'fp32 shared'") != std::string::npos);
  CHECK(first.find("no fallback is left") != std::string::npos);
  const int passes = env.passes->load();
  CHECK(passes >= 1);
  try {
    Context::create(o);
    FAIL("the create succeeded");
  } catch (const Error& e) {
    CHECK(std::string(e.what()).find("op 'silu_mul' variant 'fp32 shared'") != std::string::npos);
    CHECK(std::string(e.what()).find("verdict read from") != std::string::npos);
  }
  CHECK(env.passes->load() == passes);  // the kept failure, not a retest
  // run_selftest (what `diffvk selftest` prints): the same failure with its rows, returned.
  const SelftestReport kept = run_selftest(o);
  CHECK(kept.from_cache);
  CHECK(kept.error.find("op 'silu_mul' variant 'fp32 shared'") != std::string::npos);
  REQUIRE_FALSE(kept.rows.empty());
  CHECK_FALSE(kept.rows.back().pass);
  CHECK(kept.table().find("FAIL") != std::string::npos);
  o.selftest = SelftestMode::always;
  const SelftestReport now = run_selftest(o);
  CHECK(now.ran);
  CHECK(now.error.find("no fallback is left") != std::string::npos);
  CHECK(now.rows.size() == kept.rows.size());
  o.selftest_fail_variant = "no_such_op";
  o.selftest = SelftestMode::always;
  CHECK_THROWS_WITH_AS(Context::create(o), doctest::Contains("no op 'no_such_op' has a table"), Error);
}

TEST_CASE("selftest: the ops of each model kind, from its config.json") {
  test::TempDir tmp("diffvk-selftest-kinds");
  const auto has = [](const std::vector<std::string>& ops, const char* op) {
    return std::find(ops.begin(), ops.end(), op) != ops.end();
  };
  const std::string v1 = tmp / "v1", v2 = tmp / "v2";
  std::filesystem::create_directories(v1);
  std::filesystem::create_directories(v2);
  std::ofstream(v1 + "/config.json") << test::tiny_config_json(test::TinySpec{}).dump(2);
  std::ofstream(v2 + "/config.json") << test::tiny_v2_config_json(test::TinyV2Spec{}).dump(2);
  const auto o1 = bench::selftest_ops_for_model(v1), o2 = bench::selftest_ops_for_model(v2);
  CHECK(has(o1, "diff_attn"));
  CHECK_FALSE(has(o1, "diff_v2_attn"));
  CHECK_FALSE(has(o1, "selective_scan"));
  CHECK(has(o2, "diff_v2_attn"));
  CHECK_FALSE(has(o2, "diff_attn"));
  const auto phi = bench::selftest_ops_for_config(R"({"model_type": "phi4flash"})");
  CHECK(has(phi, "selective_scan"));
  CHECK(has(phi, "gmu_gate"));
  CHECK(has(phi, "diff_attn"));
  CHECK(bench::selftest_ops_for_model(tmp / "model.gguf") == bench::table_ops());  // a GGUF file: every op
  for (const auto* ops : {&o1, &o2, &phi})
    for (const std::string& op : *ops) CHECK_MESSAGE(has(bench::table_ops(), op.c_str()), op << " has no table");
  CHECK_THROWS_AS(bench::selftest_ops_for_shape("no-such-shape"), Error);
}

TEST_CASE("selftest: a load tests the weight formats it records, and only those") {
  test::TempDir tmp("diffvk-selftest-weights");
  const std::string dir = tmp / "m";
  std::filesystem::create_directories(dir);
  using W = std::vector<std::string>;
  CHECK(bench::selftest_weights_for_load(dir, QuantKind::f16, false) == W{"f16"});
  CHECK(bench::selftest_weights_for_load(dir, QuantKind::q8_0, false) == W{"f16", "q8_0"});
  CHECK(bench::selftest_weights_for_load(dir, QuantKind::q4_0, false) == W{"f16", "q4_0", "q8_0"});  // the head
  CHECK(bench::selftest_weights_for_load(dir, QuantKind::q4_0, true) == W{"f16", "q4_0"});
  CHECK(bench::selftest_weights_for_load("", QuantKind::q4_0, true) == W{"f16", "q4_0"});      // a shape
  CHECK(bench::selftest_weights_for_load(tmp / "model.gguf", QuantKind::f16, false).empty());  // a file: every one
  bench::Options b;
  b.shape = "phi4-mini-flash";
  b.weight_list = {QuantKind::q8_0, QuantKind::q4_0};
  CHECK(bench::selftest_weights_for_bench(b) == W{"f16", "q8_0", "q4_0"});
  b = bench::Options{};
  b.matmul_table = true;
  CHECK(bench::selftest_weights_for_bench(b).empty());

  SelftestEnv env;
  // The quantized cases are rows of the same variants (the variant names the features, not the format): an f16
  // load runs fewer cases, and its verdict is kept under its own configuration.
  ContextOptions all = selftest_options(SelftestMode::always, {"linear_row"});
  ContextOptions f16 = all;
  f16.selftest_weights = {"f16"};
  auto c_all = Context::create(all);
  auto c_f16 = Context::create(f16);
  uint32_t n_all = 0, n_f16 = 0;
  for (const SelftestRow& r : c_all->selftest().rows) n_all += r.cases;
  for (const SelftestRow& r : c_f16->selftest().rows) n_f16 += r.cases;
  CHECK(n_f16 > 0);
  CHECK(n_f16 < n_all);
  CHECK(c_f16->selftest().config.find(";weights=f16") != std::string::npos);
  CHECK(c_all->selftest().config.find("weights=") == std::string::npos);

  ContextOptions bad = f16;
  bad.selftest_weights = {"q5_k"};
  CHECK_THROWS_WITH_AS(Context::create(bad), doctest::Contains("ContextOptions::selftest_weights: 'q5_k'"), Error);
}

TEST_CASE("selftest: a benchmark tests the ops it records") {
  bench::Options o;
  o.variant = "v1";
  CHECK(bench::selftest_ops_for_bench(o) == std::vector<std::string>{"diff_attn"});
  o.variant = "both";
  CHECK(bench::selftest_ops_for_bench(o) == std::vector<std::string>{"diff_attn", "diff_v2_attn"});
  o.matmul_table = true;
  CHECK(bench::selftest_ops_for_bench(o) == std::vector<std::string>{"linear"});
  o.matmul_table = false;
  o.ops = true;
  CHECK(bench::selftest_ops_for_bench(o) == bench::table_ops());
  o.op = "silu_mul";
  CHECK(bench::selftest_ops_for_bench(o) == std::vector<std::string>{"silu_mul"});
  o = bench::Options{};
  o.shape = "phi4-mini-flash";
  CHECK(bench::selftest_ops_for_bench(o) == bench::selftest_ops_for_config(R"({"model_type": "phi4flash"})"));
  o.shape = "diffllama-1b";  // a Hugging Face DiffLlama config: DIFF V1's ops
  const auto v1 = bench::selftest_ops_for_bench(o);
  CHECK(std::find(v1.begin(), v1.end(), "diff_attn") != v1.end());
  o.ops = true;  // two benchmarks at once: the bench's own refusal, before any work
  CHECK_THROWS_WITH_AS(bench::selftest_ops_for_bench(o), doctest::Contains("two different benchmarks"), Error);
  o = bench::Options{};
  o.shape = "no-such-shape";
  CHECK_THROWS_AS(bench::selftest_ops_for_bench(o), Error);
}

TEST_CASE("selftest: the modes, a program without a runner, and the C ABI field") {
  CHECK(parse_selftest_mode("auto") == SelftestMode::automatic);
  CHECK(parse_selftest_mode("always") == SelftestMode::always);
  CHECK(parse_selftest_mode("off") == SelftestMode::off);
  CHECK_THROWS_WITH_AS(parse_selftest_mode("sometimes", "--selftest"),
                       doctest::Contains("--selftest: 'sometimes' is not a self-test mode (auto, always, off)"), Error);
  for (SelftestMode m : {SelftestMode::automatic, SelftestMode::always, SelftestMode::off})
    CHECK(parse_selftest_mode(selftest_mode_name(m)) == m);
  SelftestEnv env;
  {  // DIFFVK_SELFTEST replaces the default mode (auto), not an explicit one
    ::setenv("DIFFVK_SELFTEST", "off", 1);
    auto ctx = Context::create(selftest_options(SelftestMode::automatic, {"silu_mul"}));
    CHECK(ctx->selftest().mode == SelftestMode::off);
    CHECK(ctx->selftest().note == "off (DIFFVK_SELFTEST)");
    CHECK(env.passes->load() == 0);
    auto always = Context::create(selftest_options(SelftestMode::always, {"silu_mul"}));
    CHECK(env.passes->load() == 1);
    ::setenv("DIFFVK_SELFTEST", "never", 1);
    CHECK_THROWS_WITH_AS(Context::create(selftest_options(SelftestMode::automatic)),
                         doctest::Contains("DIFFVK_SELFTEST: 'never' is not a self-test mode"), Error);
    ::unsetenv("DIFFVK_SELFTEST");
  }
  set_selftest_runner({});
  REQUIRE_FALSE(has_selftest_runner());
  {
    auto ctx = Context::create(selftest_options(SelftestMode::automatic));
    CHECK_FALSE(ctx->selftest().ran);
    CHECK(ctx->selftest().note.find("no self-test runner") != std::string::npos);
  }
  CHECK_THROWS_WITH_AS(Context::create(selftest_options(SelftestMode::always)),
                       doctest::Contains("selftest=always: no self-test runner"), Error);

  diffvk_context_options co;
  diffvk_context_default_options(&co);
  CHECK(co.selftest == DIFFVK_SELFTEST_AUTO);
  co.selftest = 7;
  diffvk_context* c = nullptr;
  CHECK(diffvk_context_create(&co, &c) == DIFFVK_INVALID_ARGUMENT);
  CHECK(c == nullptr);
  CHECK(std::string(diffvk_last_error()).find("selftest 7") != std::string::npos);
  co.selftest = DIFFVK_SELFTEST_ALWAYS;  // libdiffvk's own C ABI in this program: no runner registered
  CHECK(diffvk_context_create(&co, &c) == DIFFVK_UNSUPPORTED);
  co.selftest = DIFFVK_SELFTEST_OFF;
  REQUIRE(diffvk_context_create(&co, &c) == DIFFVK_OK);
  diffvk_context_destroy(c);
}

TEST_CASE("selftest: the CLI prints the table, keeps the verdict, and refuses bad flags") {
  test::TempDir tmp("diffvk-selftest-cli");
  const std::string env = "env XDG_CACHE_HOME=" + tmp.path() + " DIFFVK_SELFTEST=auto";
  const std::string json_path = tmp / "selftest.json";
  const auto r = test::run_cli(tmp, "selftest --ops silu_mul,head_rmsnorm --json " + json_path, env);
  INFO(r.out);
  REQUIRE(r.exit_code == 0);
  // --json: the table, with each case's first use of pipelines and their compile (.ci/compile-times reads it).
  std::ifstream jf(json_path, std::ios::binary);
  const nlohmann::json j = nlohmann::json::parse(std::string(std::istreambuf_iterator<char>(jf), {}));
  REQUIRE(j.at("rows").size() == 2);
  for (const auto& row : j.at("rows")) {
    CHECK(row.at("pass").get<bool>());
    REQUIRE(!row.at("first_uses").empty());
    const auto& u = row.at("first_uses").at(0);
    CHECK(u.at("case").get<std::string>().find(row.at("op").get<std::string>() == "silu_mul" ? "rows=" : "heads=") !=
          std::string::npos);
    CHECK(u.at("pipelines").at(0).get<std::string>().rfind(row.at("op").get<std::string>(), 0) == 0);
    CHECK(u.at("seconds").get<double>() >= 0);
  }
  CHECK(r.out.find("op              variant") != std::string::npos);
  CHECK(r.out.find("silu_mul") != std::string::npos);
  CHECK(r.out.find("head_rmsnorm") != std::string::npos);
  CHECK(r.out.find("self-test time: ") != std::string::npos);
  CHECK(r.out.find("fallback: none (every variant passed)") != std::string::npos);
  CHECK(r.out.find("verdict file: " + tmp.path() + "/diffvk/selftest/") != std::string::npos);
  const auto cached = test::run_cli(tmp, "selftest --ops silu_mul,head_rmsnorm --cached", env);
  INFO(cached.out);
  CHECK(cached.exit_code == 0);
  CHECK(cached.out.find("verdict: read from " + tmp.path() + "/diffvk/selftest/") != std::string::npos);
  const auto shape = test::run_cli(tmp, "selftest --shape no-such-shape", env);
  CHECK(shape.exit_code != 0);
  CHECK(shape.out.find("no-such-shape") != std::string::npos);
  const auto missing = test::run_cli(tmp, "selftest --model " + (tmp / "absent"), env);
  CHECK(missing.exit_code != 0);
  CHECK(missing.out.find("--model") != std::string::npos);
  const auto bad = test::run_cli(tmp, "selftest --selftest sometimes", env);
  CHECK(bad.exit_code != 0);
  CHECK(bad.out.find("--selftest") != std::string::npos);
  const auto both = test::run_cli(tmp, "selftest --ops silu_mul --shape nope", env);
  CHECK(both.exit_code != 0);
  CHECK(both.out.find("give one of --model, --shape and --ops") != std::string::npos);
  const auto planted = test::run_cli(tmp, "selftest --ops no_such_op", env);
  CHECK(planted.exit_code != 0);
  CHECK(planted.out.find("no case table for op 'no_such_op'") != std::string::npos);
}

namespace {

// The pipelines a model records that the self-test did not run: after a self-test with the model's ops, weight
// formats and shape (ContextOptions::selftest_model), the model's prefill (every row's logits; whole and in chunks of
// 4), decode, device-sampled decode, a rewind and a prefill after it; each pipeline the model compiled itself
// (Pipeline::compile_seconds() > 0: not adopted from the self-test's parked ones) is one the self-test left out.
// `unused`: the self-test's pipelines that the model did not take (compiled for it all the same).
struct Coverage {
  std::vector<std::string> missed, unused;
  double selftest_seconds = 0;
};
Coverage coverage_of(const std::string& dir, const std::vector<int32_t>& toks) {
  ContextOptions o = selftest_options(SelftestMode::always, bench::selftest_ops_for_model(dir));
  o.selftest_weights = bench::selftest_weights_for_load(dir, QuantKind::f16, false);
  o.selftest_model = bench::selftest_model_for_model(dir);
  auto ctx = Context::create(o);
  REQUIRE(ctx->selftest().ran);
  Coverage c;
  c.selftest_seconds = ctx->selftest().seconds;
  auto model = Model::load(*ctx, dir);
  for (uint32_t chunk : {0u, 4u}) {
    auto s = Session::create(*model, SessionOptions{64, chunk});
    s->prefill(toks, true);
    s->decode(toks[0]);
    s->decode_sample(toks[1], 0.8f, 5, 0.25f);
    s->rewind(1);
    s->prefill(std::vector<int32_t>(toks.begin(), toks.begin() + 3));
  }
  for (const Pipeline* p : ctx->device().pipelines())
    if (p->compile_seconds() > 0) {
      std::string spec;
      for (uint32_t v : p->desc().spec) spec += std::to_string(v) + ",";
      c.missed.push_back(p->name() + "|" + std::to_string(p->desc().bindings) + "|" +
                         std::to_string(p->desc().push_bytes) + "|" + std::to_string(p->desc().subgroup_size) + "|" +
                         spec + " [" + p->group() + "]");
    }
  c.unused = ctx->device().parked_pipelines();
  return c;
}

}  // namespace

// Issue 41's "run every pipeline that model will record": the three model kinds' fixtures, whose head widths (16,
// 32, 4), scan state (4) and 2-wide dt_proj are none of the tables' first cases' sizes. The pipelines that take the
// model's sizes (attention, scan) are the model's only: none of them is left unused.
// Both ways of the one-row prologues (the tuning's row_prologue: the device's own, then the other one), whose
// pipelines differ.
TEST_CASE("selftest: a model records no pipeline that its self-test did not run") {
  SelftestEnv env;
  const bool split = test::make_context(Precision::fp32)->device().tuning().row_prologue_split;
  for (const std::string& tuning : {std::string(), std::string(split ? "row_prologue=fused" : "row_prologue=split")})
    for (const std::string& name : {"model_tiny", "model_tiny_v2", "phi4flash_tiny"}) {
      CAPTURE(tuning);
      struct Tune {
        explicit Tune(const std::string& t) {
          if (!t.empty()) setenv("DIFFVK_TUNING", t.c_str(), 1);
        }
        ~Tune() { unsetenv("DIFFVK_TUNING"); }
      } tune(tuning);
      const std::string dir = std::string(DIFFVK_TEST_DATA_DIR) + "/" + name;
      const Coverage c = coverage_of(dir, test::load_tokens(dir + "/tokens.npy"));
      std::string missed, unused;
      for (const std::string& m : c.missed) missed += "\n  " + m;
      for (const std::string& u : c.unused) unused += "\n  " + u;
      MESSAGE(name << ": self-test " << c.selftest_seconds << " s; " << c.unused.size()
                   << " of its pipelines not recorded by these sessions:" << unused);
      INFO(name << ": recorded but not self-tested:" << missed);
      CHECK(c.missed.empty());
      for (const std::string& u : c.unused)
        for (const char* shaped : {"diff_attn", "diff_v2_attn", "selective_scan"})
          CHECK_MESSAGE(u.rfind(shaped, 0) != 0, name << ": " << u << " is at a size the model does not have");
    }
}

TEST_CASE("selftest: compiling every case's pipelines first (the pipeline threads) gives the case-by-case verdict") {
  // pipeline_threads=1 runs case by case; more threads compile the chosen cases' pipelines together before the runs.
  const std::string config = bench::selftest_model_for_model(std::string(DIFFVK_TEST_DATA_DIR) + "/model_tiny");
  REQUIRE(!config.empty());
  std::vector<std::vector<SelftestRow>> passes;
  for (const char* threads : {"pipeline_threads=1", "pipeline_threads=4"}) {
    ContextOptions o = test::validated_options(Precision::fp32);
    o.pipeline_cache = false;
    o.selftest = SelftestMode::off;
    o.tuning = threads;
    auto ctx = Context::create(o);
    SelftestRequest r;
    r.model = config;
    r.ops = {"linear", "linear_row", "diff_attn", "sample"};
    passes.push_back(bench::run_selftest_cases(ctx->device(), r));
  }
  REQUIRE(passes[0].size() == passes[1].size());
  for (size_t i = 0; i < passes[0].size(); ++i) {
    const SelftestRow &a = passes[0][i], &b = passes[1][i];
    INFO(a.op << " " << a.variant);
    CHECK(a.pass);
    CHECK(b.pass);
    CHECK(a.op == b.op);
    CHECK(a.variant == b.variant);
    CHECK(a.cases == b.cases);
    CHECK(a.max_error == b.max_error);  // the same inputs through the same pipelines: the same bits
    std::set<std::string> pa, pb;
    for (const SelftestFirstUse& u : a.first_uses) pa.insert(u.pipelines.begin(), u.pipelines.end());
    for (const SelftestFirstUse& u : b.first_uses) pb.insert(u.pipelines.begin(), u.pipelines.end());
    CHECK(pa == pb);
  }
}

TEST_CASE("selftest: a model's pipeline sizes from its config.json, and a config the runner cannot read") {
  const auto read = [](const std::string& name) {
    return bench::selftest_model_for_model(std::string(DIFFVK_TEST_DATA_DIR) + "/" + name);
  };
  const ModelPipelineShape v1 = model_pipeline_shape(read("model_tiny"));
  CHECK(v1.kind == "v1");
  CHECK(v1.heads == 2);
  CHECK(v1.kv_heads == 1);
  CHECK(v1.head_dim == 16);
  CHECK_FALSE(v1.unaligned_width);
  CHECK(model_pipeline_shape(read("model_tiny_v2")).kind == "v2");
  const ModelPipelineShape phi = model_pipeline_shape(read("phi4flash_tiny"));
  CHECK(phi.kind == "phi4flash");
  CHECK(phi.heads == 8);
  CHECK(phi.kv_heads == 4);
  CHECK(phi.head_dim == 4);
  CHECK(phi.d_state == 4);
  CHECK(phi.unaligned_width);  // dt_proj reads ceil(32 / 16) = 2
  // The published shapes: Phi-4-mini-flash's 40/20 heads of 64, d_state 16, every width a multiple of 8; DiffLlama's
  // (Hugging Face keys: sub-heads paired into differential heads).
  const ModelPipelineShape pub = model_pipeline_shape(bench::selftest_model_for_shape("phi4-mini-flash"));
  CHECK(pub.head_dim == 64);
  CHECK(pub.heads / pub.kv_heads == 2);
  CHECK(pub.d_state == 16);
  CHECK_FALSE(pub.unaligned_width);
  const ModelPipelineShape dl = model_pipeline_shape(bench::selftest_model_for_shape("diffllama-1b"));
  CHECK(dl.kind == "v1");
  CHECK(dl.head_dim == 64);
  CHECK_FALSE(dl.unaligned_width);
  CHECK(bench::selftest_model_for_model(std::string(DIFFVK_TEST_DATA_DIR) + "/no-such-model").empty());
  // A config the load would refuse is no model for the self-test (Model::load then says why); set by hand, it is the
  // create's error, naming the field and the key.
  SelftestEnv env;
  ContextOptions o = selftest_options(SelftestMode::always, {"silu_mul"});
  o.selftest_model = R"({"model_type": "phi4flash", "hidden_size": 32})";
  CHECK_THROWS_WITH_AS(Context::create(o), doctest::Contains("ContextOptions::selftest_model: config.json: '"), Error);
}

// A .gguf file's config (model_config_text: the config.json its metadata stands for) gives the self-test the same
// sizes as its directory's config.json, from a path and from memory, and the C ABI passes it on: diffvk_model_config*
// and diffvk_context_options.selftest_model reach the runner's request (a recording runner: nothing is run).
TEST_CASE("selftest: a .gguf's config and the C ABI's selftest_model reach the runner") {
  test::TempDir tmp{"diffvk-gguf-config"};
  const auto same_shape = [](const ModelPipelineShape& a, const ModelPipelineShape& b) {
    return a.kind == b.kind && a.heads == b.heads && a.kv_heads == b.kv_heads && a.head_dim == b.head_dim &&
           a.d_state == b.d_state && a.unaligned_width == b.unaligned_width;
  };
  std::string tiny_text;
  for (const std::string name : {"model_tiny", "phi4flash_tiny"}) {
    INFO(name);
    const std::string dir = std::string(DIFFVK_TEST_DATA_DIR) + "/" + name, gguf = tmp.path() + "/" + name + ".gguf";
    quantize_model(dir, gguf, QuantKind::f16);
    const std::string text = model_config_text(gguf);
    CHECK(same_shape(model_pipeline_shape(text), model_pipeline_shape(model_config_text(dir))));
    CHECK(bench::selftest_model_for_model(gguf) == text);
    CHECK(bench::selftest_ops_for_model(gguf) == bench::selftest_ops_for_model(dir));
    std::ifstream in(gguf, std::ios::binary);
    const std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    CHECK(model_config_text(bytes.data(), bytes.size()) == text);
    // The C ABI: the size with the NUL, a buffer too small (nothing written), the text.
    size_t n = 0;
    REQUIRE(diffvk_model_config(gguf.c_str(), nullptr, 0, &n) == DIFFVK_OK);
    CHECK(n == text.size() + 1);
    std::vector<char> buf(n, 'x');
    CHECK(diffvk_model_config(gguf.c_str(), buf.data(), n - 1, &n) == DIFFVK_BUFFER_TOO_SMALL);
    CHECK(buf[0] == 'x');
    REQUIRE(diffvk_model_config(gguf.c_str(), buf.data(), buf.size(), &n) == DIFFVK_OK);
    CHECK(std::string(buf.data()) == text);
    std::fill(buf.begin(), buf.end(), 'x');
    REQUIRE(diffvk_model_config_memory(nullptr, 0, bytes.data(), bytes.size(), buf.data(), buf.size(), &n) ==
            DIFFVK_OK);
    CHECK(std::string(buf.data()) == text);
    const std::string cfg = model_config_text(dir);
    REQUIRE(diffvk_model_config(dir.c_str(), nullptr, 0, &n) == DIFFVK_OK);
    CHECK(n == cfg.size() + 1);
    if (name == "model_tiny") tiny_text = text;
  }
  size_t n = 0;
  CHECK(diffvk_model_config(nullptr, nullptr, 0, &n) == DIFFVK_INVALID_ARGUMENT);
  CHECK(diffvk_model_config((tmp.path() + "/none").c_str(), nullptr, 0, &n) == DIFFVK_IO_ERROR);
  CHECK(diffvk_model_config_memory(nullptr, 0, "{}", 2, nullptr, 0, &n) == DIFFVK_FORMAT_ERROR);
  CHECK(std::string(diffvk_last_error()).find("not a .gguf") != std::string::npos);

  SelftestEnv env;
  std::vector<std::string> seen;
  set_selftest_runner([&seen](Device&, const SelftestRequest& r) {
    seen.push_back(r.model);
    return std::vector<SelftestRow>{};
  });
  diffvk_context_options o;
  diffvk_context_default_options(&o);
  CHECK(o.selftest_model == nullptr);
  o.selftest = DIFFVK_SELFTEST_ALWAYS;
  o.pipeline_cache = 0;
  o.selftest_model = tiny_text.c_str();
  diffvk_context* c = nullptr;
  REQUIRE(diffvk_context_create(&o, &c) == DIFFVK_OK);
  CHECK(diffvk_context_destroy(c) == DIFFVK_OK);
  REQUIRE(seen.size() == 1);
  CHECK(seen[0] == tiny_text);
  o.selftest_model = "{\"hidden_size\": 32";
  CHECK(diffvk_context_create(&o, &c) == DIFFVK_INVALID_ARGUMENT);
  CHECK(std::string(diffvk_last_error()).find("selftest_model: ") != std::string::npos);
  CHECK(seen.size() == 1);  // refused before the device was opened
}
