#include "bench/model_bench.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <vector>

#include "bench/check.hpp"
#include "bench/host_memory.hpp"
#include "bench/report.hpp"
#include "bench/shapes.hpp"
#include "bench/speculate_bench.hpp"
#include "ops/linear.hpp"
#include "vk/gpu.hpp"

namespace diffvk::bench {

namespace {

// One greedy decode step: sampled on the device where the session can (decode_sample), else its logits read back
// and the argmax taken on the host (a phi4flash session).
int32_t greedy_step(Session& s, int32_t token) {
  if (s.device_sampling()) return s.decode_sample(token);
  const std::vector<float> lg = s.decode(token);
  return static_cast<int32_t>(std::max_element(lg.begin(), lg.end()) - lg.begin());
}

// One weight type's figures, for the side-by-side table of --weights LIST.
struct TypeRow {
  QuantKind kind = QuantKind::f16;
  uint64_t weight_bytes = 0, device_peak = 0;
  double bits_per_weight = 0, prefill_tps = 0, decode_tps = 0, fraction = 0;
};

// first: the context's first model (the self-test at its creation counts in this one's cold start only).
json bench_one(const Options& a, QuantKind kind, Context& ctx, const Ceilings& ceil, int runs,
               const std::string& cmdline, const Sink& sink, TypeRow& row, bool first) {
  const std::string what = a.shape.empty() ? a.model_dir : "shape " + a.shape + " (random weights)";
  sink.stage("model: loading " + what + " (" + quant_kind_name(kind) + ", KV cache " + kv_cache_type_name(a.kv_cache) +
             ")");
  const uint64_t rss0 = rss_bytes();
  const bool hwm = reset_peak_rss();
  const uint64_t dev0 = device_bytes_allocated();
  reset_device_bytes_peak();
  LoadOptions lo;
  lo.weights = kind;
  const Device::CompileStats compiled0 = ctx.device().compile_stats();
  const auto load_t0 = Clock::now();
  auto model = a.shape.empty() ? Model::load(ctx, a.model_dir, lo)
                               : Model::synthesize(ctx, published_shape(a.shape).config, lo, 1, "shape " + a.shape);
  const LoadStats& ls = model->load_stats();
  const uint64_t load_peak = hwm && peak_rss_bytes() > rss0 ? peak_rss_bytes() - rss0 : 0;
  const ModelConfig& c = model->config();
  const uint32_t P = std::min(a.prompt_tokens, c.max_position_embeddings - 1);
  const uint32_t N = std::min(a.decode_tokens, c.max_position_embeddings - P);
  // The session holds the longest context asked for (Options::contexts), then N decode steps.
  uint32_t longest = P;
  for (uint32_t C : a.contexts) longest = std::max(longest, std::min(C, c.max_position_embeddings - N));
  SessionOptions so{longest + N, 64, false, {}};
  so.kv_cache = a.kv_cache;
  if (a.cancel) so.should_abort = [&sink] { return sink.cancel_requested(); };  // a long prefill stops between layers
  const double load_wall_s = seconds_since(load_t0);
  auto t_session = Clock::now();
  auto session = Session::create(*model, so);
  const double session_s = seconds_since(t_session);
  double first_prefill_s = 0;  // the warm-up's prefill: the first use of every prefill pipeline
  double first_step_s = 0;     // the warm-up's first decode step: the first use of every decode pipeline
  Rng rng(12345);
  std::vector<int32_t> prompt(P);
  for (auto& t : prompt) t = static_cast<int32_t>(rng.next() % c.vocab_size);
  std::vector<double> prefill_s, decode_s;
  for (int r = -1; r < runs; ++r) {  // r = -1: warm-up (pipelines, first-use costs)
    sink.check_cancel("between model runs");
    sink.step(strf("model: run %d of %d", r + 2, runs + 1));
    session->reset();
    auto t0 = Clock::now();
    auto logits = session->prefill(prompt);
    const double p = seconds_since(t0);
    int32_t next = static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
    t0 = Clock::now();
    for (uint32_t i = 0; i < N; ++i) {
      next = greedy_step(*session, next);  // greedy, on the device where it can
      if (r < 0 && i == 0) first_step_s = seconds_since(t0);
    }
    const double d = seconds_since(t0);
    if (r >= 0) {
      prefill_s.push_back(p);
      decode_s.push_back(d);
    } else {
      first_prefill_s = p;
    }
  }
  const Device::CompileStats compiled1 = ctx.device().compile_stats();  // after the first prefill and decode
  const Stats ps = stats_of(prefill_s), ds = stats_of(decode_s);
  // Decode at other context lengths: one prefill of C tokens (timed: the time to first token at that prompt
  // length), or with context_fill "zeros" the session filled to C positions without computing them
  // (Session::fill_for_timing), then N greedy decode steps, once each after the warm-up above.
  const bool zero_fill = a.context_fill == "zeros";
  json context_rows = json::array();
  for (uint32_t C0 : a.contexts) {
    const uint32_t C = std::min(C0, longest);
    sink.check_cancel("between context lengths");
    sink.step(strf("model: context %u", C));
    session->reset();
    json ctx_row = {{"context", C}, {"fill", a.context_fill}};
    int32_t next = prompt[0];
    if (zero_fill) {
      session->fill_for_timing(C);
    } else {
      std::vector<int32_t> long_prompt(C);
      for (auto& t : long_prompt) t = static_cast<int32_t>(rng.next() % c.vocab_size);
      auto t0 = Clock::now();
      auto lg = session->prefill(long_prompt);
      const double p = seconds_since(t0);
      next = static_cast<int32_t>(std::max_element(lg.begin(), lg.end()) - lg.begin());
      ctx_row["prefill_seconds"] = p;
      ctx_row["prefill_tokens_per_s"] = C / p;
    }
    auto t0 = Clock::now();
    for (uint32_t i = 0; i < N; ++i) next = greedy_step(*session, next);
    const double d = seconds_since(t0);
    ctx_row["decode_ms_per_token"] = 1e3 * d / N;
    ctx_row["decode_tokens_per_s"] = N / d;
    context_rows.push_back(std::move(ctx_row));
  }
  // phi4flash: YOCO prefill (the cross-decoder for the last row only) against every row through every layer
  // (SessionOptions::yoco false), the same prompt, each after one warm-up, interleaved; the last row's logits compared.
  json yoco_json;
  const bool sambay = c.format == "phi4flash";
  double yoco_speedup = 0, yoco_s_median = 0, yoco_full_s = 0, yoco_max_diff = 0;
  if (sambay) {
    sink.step("model: YOCO prefill against every row through every layer");
    SessionOptions fso = so;
    fso.yoco = false;
    auto full = Session::create(*model, fso);
    std::vector<double> yoco_s, full_s;
    for (int r = -1; r < runs; ++r) {
      sink.check_cancel("between YOCO runs");
      session->reset();
      full->reset();
      auto t0 = Clock::now();
      const std::vector<float> a1 = session->prefill(prompt);
      const double y = seconds_since(t0);
      t0 = Clock::now();
      const std::vector<float> a2 = full->prefill(prompt);
      const double f = seconds_since(t0);
      for (size_t i = 0; i < a1.size(); ++i) yoco_max_diff = std::max(yoco_max_diff, double(std::abs(a1[i] - a2[i])));
      if (r >= 0) {
        yoco_s.push_back(y);
        full_s.push_back(f);
      }
    }
    const Stats y = stats_of(yoco_s), f = stats_of(full_s);
    yoco_speedup = f.median / y.median;
    yoco_s_median = y.median;  // the interleaved YOCO runs' own median (the prefill figure above reads the logits back)
    yoco_full_s = f.median;
    yoco_json = {{"tokens", P},
                 {"yoco_seconds", stats_json(y, "s")},
                 {"every_layer_seconds", stats_json(f, "s")},
                 {"speedup", yoco_speedup},
                 {"last_row_max_abs_diff", yoco_max_diff}};
  }
  const uint64_t session_state_bytes = session->kv_cache_bytes();
  // Saved state: the P-token prompt's state saved and restored into another session,
  // checked first (the restored session's next logits equal the saved one's, bit for bit), then timed.
  // The peak device memory figure is that of the model and its timed session (the second session below is not counted).
  const uint64_t dev_peak_runs = device_bytes_peak() - dev0;
  sink.step("model: session state save and restore");
  session->reset();
  session->prefill(prompt);
  auto restored = Session::create(*model, so);
  std::vector<uint8_t> state = session->save_state();
  restored->restore_state(state.data(), state.size());
  if (restored->tokens() != session->tokens() || (N > 0 && restored->decode(1) != session->decode(1)))
    throw Error(Status::internal, "bench: a restored session's logits differ from the saved session's");
  session->rewind(P);
  std::vector<double> save_s, restore_s;
  for (int r = 0; r < runs; ++r) {
    sink.check_cancel("between state runs");
    auto t0 = Clock::now();
    state = session->save_state();
    save_s.push_back(seconds_since(t0));
    t0 = Clock::now();
    restored->restore_state(state.data(), state.size());
    restore_s.push_back(seconds_since(t0));
  }
  const Stats ss = stats_of(save_s), rs = stats_of(restore_s);
  const double prefill_tps = P / ps.median, decode_tps = N / ds.median;
  const double copy_gbps = ceil.copy.gbps;
  const double bytes = static_cast<double>(model->weight_bytes());
  // FLOPs per token: 2 x the matrix weights (q, k, v, o, gate_up, down per layer, lm_head); the embedding
  // is a lookup and the attention products (12*D per query-key pair and head) are left out.
  // DIFF V2: q is 2H·D + H rows (the λ logits), o has H·D inputs.
  const double E = c.hidden_size, kv = double(c.num_kv_heads) * c.kv_row();
  const double qo =
      c.v2() ? (2.0 * c.num_heads * c.head_dim() + c.num_heads + double(c.num_heads) * c.head_dim()) * E : 2.0 * E * E;
  // phi4flash: every stored weight (its layers differ by kind), the tied embedding counted once as the head.
  const double mat_weights =
      sambay ? bytes / (ctx.device().fp16() ? 2.0 : 4.0)
             : c.num_layers * (qo + 2.0 * E * kv + 3.0 * E * c.intermediate_size) + E * c.vocab_size;
  const double flops_per_token = 2.0 * mat_weights;
  // Prefill reads the weights once for P rows; decode once per token.
  const PeakFraction prefill_pf =
      peak_fraction(ceil, flops_per_token * P / (ps.median * 1e9), bytes / (ps.median * 1e9));
  const PeakFraction decode_pf =
      peak_fraction(ceil, flops_per_token * N / (ds.median * 1e9), bytes * N / (ds.median * 1e9));
  const double bound_s = bytes / (copy_gbps * 1e9);  // seconds per token at the copy rate
  const double fraction = bound_s / (ds.median / N);
  // Which matmul the prefill's linears take (cooperative matrices shown where they are used, and
  // why not where the device has them).
  std::string why_not;
  const DeviceCaps& dc = ctx.device().caps();
  const std::string prefill_matmul = kind != QuantKind::f16
                                         ? std::string("quantized tiles (") + quant_kind_name(kind) + ", path " +
                                               ls.quant_prefill + "; cooperative matrices take f16 weights only)"
                                     : linear_uses_coopmat(dc, ctx.device().fp16(), &why_not)
                                         ? "cooperative matrices " + dc.coopmat_shape()
                                         : "scalar FMA (no cooperative matrices: " + why_not + ")";
  const std::string arch = sambay ? std::string("Phi-4-mini-flash (SambaY), differential attention V1")
                                  : "DIFF V" + std::to_string(c.diff_version);
  sink.reportf(
      "model %s: %s, %u layers, E=%u, H=%u, Hkv=%u, D=%u, I=%u, vocab %u, %s storage, linear weights %s%s%s%s%s",
      what.c_str(), arch.c_str(), c.num_layers, c.hidden_size, c.num_heads, c.num_kv_heads, c.head_dim(),
      c.intermediate_size, c.vocab_size, precision_name(ctx.precision()), quant_kind_name(kind),
      ls.quant_decode.empty() ? "" : ", decode path ", ls.quant_decode.c_str(),
      ls.quant_prefill.empty() ? "" : ", prefill path ", ls.quant_prefill.c_str());
  sink.reportf(
      "  load: %s, %u file(s), %.3f s; host staging peak %llu bytes (loader's counter; largest tensor %llu bytes); "
      "process peak RSS +%.1f MB over the pre-load RSS (VmHWM%s)",
      ls.format.c_str(), ls.files, ls.seconds, (unsigned long long)ls.staging_peak_bytes,
      (unsigned long long)ls.largest_tensor_bytes, load_peak / 1e6,
      hwm ? ": includes device memory on CPU drivers" : " not resettable: not measured");
  sink.reportf("  prefill: %u tokens, median %.3f s (min %.3f, max %.3f): %.1f tokens/s", P, ps.median, ps.min, ps.max,
               prefill_tps);
  sink.reportf("  prefill matmul: %s", prefill_matmul.c_str());
  sink.reportf("  decode:  %u tokens, median %.3f s (min %.3f, max %.3f): %.1f tokens/s, %.2f ms/token", N, ds.median,
               ds.min, ds.max, decode_tps, 1e3 * ds.median / N);
  sink.reportf("  time to first token: %.3f s (the %u-token prefill, logits read back)", ps.median, P);
  if (sambay)
    sink.reportf(
        "  YOCO prefill: %.3f s against %.3f s with every row through every layer: %.2fx (last row's logits differ "
        "by at most %.3g); session caches and states: %.2f MB for a context of %u",
        yoco_s_median, yoco_full_s, yoco_speedup, yoco_max_diff, session_state_bytes / 1e6, session->capacity());
  sink.reportf(
      "  cold start: load %.3f s + session %.3f s + first prefill %.3f s = %.3f s to the first token; the first "
      "prefill and decode compiled %llu pipeline(s) in %.3f s (pipeline cache %s)",
      load_wall_s, session_s, first_prefill_s, load_wall_s + session_s + first_prefill_s,
      (unsigned long long)(compiled1.pipelines - compiled0.pipelines), compiled1.seconds - compiled0.seconds,
      ctx.device().pipeline_cache_state().c_str());
  // The self-test at context creation comes before all of that (ContextOptions::selftest): its seconds are part of a
  // first load's wait where it ran in this process, none where its verdict was read.
  const SelftestReport& st = ctx.selftest();
  const std::string selftest_state = !first          ? "counted in the first weight type"
                                     : st.ran        ? "ran"
                                     : st.from_cache ? "verdict read"
                                                     : "not run";
  const double selftest_s = first ? st.seconds : 0.0;
  sink.reportf(
      "  self-test at context creation: %s%s; with it, %.3f s to the first token, %.3f s to the second (the first "
      "decode step, %.3f s, compiles the decode pipelines)",
      selftest_state.c_str(), first && st.ran ? strf(", %.3f s", st.seconds).c_str() : "",
      selftest_s + load_wall_s + session_s + first_prefill_s,
      selftest_s + load_wall_s + session_s + first_prefill_s + first_step_s, first_step_s);
  for (const json& r : context_rows) {
    const std::string how = r.contains("prefill_seconds")
                                ? strf("prefill %.3f s (%.1f tokens/s)", r["prefill_seconds"].get<double>(),
                                       r["prefill_tokens_per_s"].get<double>())
                                : std::string("zero-filled, not prefilled (--context-fill zeros: decode timing only)");
    sink.reportf("  context %6u: %s; decode %.2f ms/token (%.1f tokens/s), %.2fx the ms/token at %u tokens (one run)",
                 r["context"].get<uint32_t>(), how.c_str(), r["decode_ms_per_token"].get<double>(),
                 r["decode_tokens_per_s"].get<double>(), r["decode_ms_per_token"].get<double>() / (1e3 * ds.median / N),
                 P);
  }
  sink.reportf(
      "  session state: %u tokens, %.2f MB; save median %.4f s, restore median %.4f s: restore %.1fx faster than "
      "prefilling them (checked: a restored session's next logits equal the saved one's)",
      P, state.size() / 1e6, ss.median, rs.median, ps.median / rs.median);
  sink.reportf(
      "  weight-streaming bound: %.2f MB of weights per token / %.2f GB/s copy = %.3f ms/token -> decode at %.1f%% of "
      "it",
      bytes / 1e6, copy_gbps, bound_s * 1e3, 100.0 * fraction);
  sink.reportf(
      "  under the ceilings (%%fma of %.2f GFLOP/s fp32, %%copy of %.2f GB/s; flops = 2 x %.0f matrix weights per "
      "token):\n"
      "    prefill %.1f%% fma, %.1f%% copy; decode %.1f%% fma, %.1f%% copy",
      ceil.flops_ceiling(), copy_gbps, mat_weights, 100 * prefill_pf.flops, 100 * prefill_pf.bytes,
      100 * decode_pf.flops, 100 * decode_pf.bytes);
  sink.reportf(
      "  (wall clock per call, median of %d runs after one warm-up; includes submit, wait and the read-back of\n"
      "   the last row's logits (prefill) or of the greedy token id sampled on the device (decode))",
      runs);
  json profile_json;
  if (a.profile) {
    // A separate session with timestamps between dispatches: GPU time per dispatch grouped by op over N decode steps.
    SessionOptions pso = so;
    pso.profile = true;
    auto prof_session = Session::create(*model, pso);
    auto lg = prof_session->prefill(prompt);
    int32_t tok = static_cast<int32_t>(std::max_element(lg.begin(), lg.end()) - lg.begin());
    struct Agg {
      double us = 0;
      uint64_t n = 0;
    };
    std::map<std::string, Agg> by_op;
    double total = 0;
    size_t per_token = 0;
    for (uint32_t i = 0; i < N; ++i) {
      tok = greedy_step(*prof_session, tok);
      const auto prof = prof_session->last_profile();
      per_token = prof.size();
      for (const auto& d : prof) {
        by_op[d.op].us += d.us;
        by_op[d.op].n += 1;
        total += d.us;
      }
    }
    if (total <= 0) {
      sink.reportf("  profile: the device has no timestamps");
    } else {
      std::vector<std::pair<std::string, Agg>> rows(by_op.begin(), by_op.end());
      std::sort(rows.begin(), rows.end(), [](const auto& x, const auto& y) { return x.second.us > y.second.us; });
      sink.reportf(
          "  decode profile (GPU timestamps between dispatches, %u steps, %zu dispatches per token, %.3f ms GPU time "
          "per token):",
          N, per_token, total / N / 1e3);
      sink.reportf("    %-26s %10s %12s %12s %7s", "op", "per token", "us/token", "us/dispatch", "share");
      for (const auto& [op, g] : rows) {
        sink.reportf("    %-26s %10.1f %12.1f %12.1f %6.1f%%", op.c_str(), double(g.n) / N, g.us / N, g.us / g.n,
                     100.0 * g.us / total);
        profile_json.push_back({{"op", op},
                                {"dispatches_per_token", double(g.n) / N},
                                {"us_per_token", g.us / N},
                                {"us_per_dispatch", g.us / g.n}});
      }
    }
  }
  // Every Buffer of the model and its sessions (weights, staging, KV cache, arena) is allocated up front.
  const uint64_t dev_peak = a.profile ? device_bytes_peak() - dev0 : dev_peak_runs;
  row = TypeRow();
  row.kind = kind;
  row.weight_bytes = model->weight_bytes();
  row.device_peak = dev_peak;
  row.bits_per_weight = 8.0 * bytes / mat_weights;
  row.prefill_tps = prefill_tps;
  row.decode_tps = decode_tps;
  row.fraction = fraction;
  sink.reportf(
      "  peak device memory: %.2f MB (Buffers: weights, load staging, KV cache, activations; the driver's own not "
      "counted)",
      dev_peak / 1e6);
  json j;
  j["command_line"] = cmdline;
  j["weights"] = quant_kind_name(kind);
  j["kv_cache"] = kv_cache_type_name(a.kv_cache);
  j["bits_per_weight"] = row.bits_per_weight;
  j["quant_decode_path"] = ls.quant_decode.empty() ? json(nullptr) : json(ls.quant_decode);
  j["quant_prefill_path"] = ls.quant_prefill.empty() ? json(nullptr) : json(ls.quant_prefill);
  j["peak_device_bytes"] = dev_peak;
  j["device"] = caps_json(ctx.caps(), ctx.device());
  j["precision"] = precision_name(ctx.precision());
  j["model"] = {{"dir", a.model_dir.empty() ? json(nullptr) : json(a.model_dir)},
                {"shape", a.shape.empty() ? json(nullptr) : json(a.shape)},
                {"diff_version", c.diff_version},
                {"num_layers", c.num_layers},
                {"hidden_size", c.hidden_size},
                {"num_heads", c.num_heads},
                {"num_kv_heads", c.num_kv_heads},
                {"head_dim", c.head_dim()},
                {"intermediate_size", c.intermediate_size},
                {"vocab_size", c.vocab_size},
                {"weight_bytes_per_token", model->weight_bytes()}};
  j["copy_gbps"] = copy_gbps;
  j["ceilings"] = ceilings_json(ceil);
  j["flops_per_token"] = flops_per_token;
  j["flops_model"] =
      "2 x matrix weights per token (q, k, v, o, gate_up, down, lm_head); attention products and the embedding left "
      "out";
  j["load"] = {{"format", ls.format},
               {"files", ls.files},
               {"seconds", ls.seconds},
               {"staging_peak_bytes", ls.staging_peak_bytes},
               {"largest_tensor_bytes", ls.largest_tensor_bytes},
               {"split_tensors", ls.split_tensors},
               {"peak_rss_delta_bytes", hwm ? json(load_peak) : json(nullptr)}};
  j["prefill"] = {{"tokens", P},
                  {"seconds", stats_json(ps, "s")},
                  {"tokens_per_s", prefill_tps},
                  {"GFLOPs", flops_per_token * P / (ps.median * 1e9)},
                  {"GBps", bytes / (ps.median * 1e9)}};
  add_peak_fields(j["prefill"], prefill_pf);
  j["prefill"]["matmul"] = prefill_matmul;
  j["decode"] = {{"tokens", N},
                 {"seconds", stats_json(ds, "s")},
                 {"tokens_per_s", decode_tps},
                 {"GFLOPs", flops_per_token * N / (ds.median * 1e9)},
                 {"GBps", bytes * N / (ds.median * 1e9)},
                 {"weight_streaming_bound_ms_per_token", bound_s * 1e3},
                 {"fraction_of_bound", fraction}};
  add_peak_fields(j["decode"], decode_pf);
  j["time_to_first_token_seconds"] = ps.median;
  // The first use in this process: pipelines compiled from what the caches held (diffvk's pipeline cache file, and the
  // driver's own disk cache, which diffvk does not control). Cold = both empty: --no-pipeline-cache (or a new
  // --pipeline-cache file) and an empty XDG_CACHE_HOME (Mesa's shader cache lives there).
  j["cold_start"] = {
      {"load_seconds", load_wall_s},
      {"session_create_seconds", session_s},
      {"first_prefill_seconds", first_prefill_s},
      {"time_to_first_token_seconds", load_wall_s + session_s + first_prefill_s},
      {"selftest", selftest_state},
      {"selftest_seconds", selftest_s},
      // The ops it left to their first record (attention maps, context shift), which this run does not record.
      {"selftest_deferred", ctx.device().selftest_untested()},
      {"time_to_first_token_with_selftest_seconds", selftest_s + load_wall_s + session_s + first_prefill_s},
      {"first_decode_step_seconds", N ? json(first_step_s) : json(nullptr)},
      {"time_to_second_token_with_selftest_seconds",
       N ? json(selftest_s + load_wall_s + session_s + first_prefill_s + first_step_s) : json(nullptr)},
      {"pipelines_compiled", compiled1.pipelines - compiled0.pipelines},
      {"pipeline_compile_seconds", compiled1.seconds - compiled0.seconds},
      {"pipeline_cache", ctx.device().pipeline_cache_state()},
      {"pipeline_cache_file", ctx.device().pipeline_cache_path()}};
  if (!context_rows.empty()) j["contexts"] = std::move(context_rows);
  if (sambay) j["yoco_prefill"] = std::move(yoco_json);
  j["session_cache_bytes"] = session_state_bytes;
  j["session_context"] = session->capacity();
  j["session_state"] = {{"tokens", P},
                        {"bytes", state.size()},
                        {"save_seconds", stats_json(ss, "s")},
                        {"restore_seconds", stats_json(rs, "s")},
                        {"restore_vs_prefill", ps.median / rs.median},
                        {"checked", true}};
  if (a.profile) j["decode_profile"] = profile_json;
  if (!a.speculate.empty()) j["speculate"] = speculate_bench(a, ctx, *model, so, prompt, N, runs, sink);
  return j;
}

}  // namespace

json run_model_bench(const Options& a, Context& ctx, const Ceilings& ceil, int runs, const std::string& cmdline,
                     const Sink& sink) {
  const std::vector<QuantKind> kinds = a.weight_list.empty() ? std::vector<QuantKind>{a.weights} : a.weight_list;
  std::vector<TypeRow> rows(kinds.size());
  std::vector<json> docs;
  for (size_t i = 0; i < kinds.size(); ++i) {
    sink.check_cancel("between weight types");
    docs.push_back(bench_one(a, kinds[i], ctx, ceil, runs, cmdline, sink, rows[i], i == 0));
  }
  if (docs.size() == 1) return docs[0];  // one type: the document of one model run
  sink.reportf(
      "weight types side by side (bits per weight = 8 x weight bytes per token / matrix weights; peak device memory = "
      "Buffers allocated by the model and its sessions):");
  sink.reportf("  %-6s %14s %8s %16s %14s %14s %12s", "type", "weight bytes", "bits/w", "peak device MB",
               "prefill tok/s", "decode tok/s", "% of bound");
  for (const TypeRow& r : rows)
    sink.reportf("  %-6s %14llu %8.2f %16.2f %14.1f %14.1f %11.1f%%", quant_kind_name(r.kind),
                 (unsigned long long)r.weight_bytes, r.bits_per_weight, r.device_peak / 1e6, r.prefill_tps,
                 r.decode_tps, 100.0 * r.fraction);
  // One entry per type (each the document of a one-type run); the shared fields once, at the top.
  json j;
  for (const char* k :
       {"command_line", "device", "precision", "copy_gbps", "ceilings", "flops_per_token", "flops_model"})
    j[k] = docs[0][k];
  j["model"] = docs[0]["model"];
  j["model"].erase("weight_bytes_per_token");
  j["weight_types"] = json::array();
  for (json& d : docs) {
    for (const char* k :
         {"command_line", "device", "precision", "copy_gbps", "ceilings", "flops_per_token", "flops_model"})
      d.erase(k);
    j["weight_types"].push_back(std::move(d));
  }
  return j;
}

}  // namespace diffvk::bench
