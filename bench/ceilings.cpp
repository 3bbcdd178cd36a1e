#include "bench/ceilings.hpp"

#include <algorithm>
#include <cstring>
#include <vector>

#include "bench/report.hpp"
#include "bench/shaders.hpp"
#include "diffvk/error.hpp"
#include "ops/kernel_options.hpp"
#include "vk/program.hpp"

namespace diffvk::bench {

CopyCeiling measure_copy(Device& dev, uint64_t bytes, int warmup, int runs, bool ts, const Sink& sink) {
  register_bench_shaders();
  const DeviceCaps& caps = dev.caps();
  CopyCeiling best;
  Buffer src(dev, bytes, MemoryDomain::device, "bench copy src"),
      dst(dev, bytes, MemoryDomain::device, "bench copy dst");
  src.fill(0, bytes, 0x3c003c01u);
  const uint32_t n = static_cast<uint32_t>(bytes / 16);
  const uint32_t wg = pick_pow2_workgroup(caps, 256);
  const uint32_t max_x = std::max(1u, std::min(caps.max_workgroup_count[0], 65535u));
  for (uint32_t items : {1u, 4u}) {
    sink.step(strf("ceilings: copy %s, %u x %u elements per workgroup", mib(bytes).c_str(), wg, items));
    Pipeline pipe(dev, PipelineDesc{"bench_copy"}
                           .with_bindings(2)
                           .with_push(8)
                           .with_spec({wg, items})
                           .with_subgroup(false)
                           .with_fp16(dev.fp16()));
    const uint32_t groups = (n + wg * items - 1) / (wg * items);
    const uint32_t gx = std::min(groups, max_x), gy = (groups + gx - 1) / gx;
    const uint32_t push[2] = {n, gx};
    Program prog(dev, "bench copy", ts);
    prog.dispatch(pipe, {{src.range(), Access::read}, {dst.range(), Access::write}}, push, sizeof push, {gx, gy, 1},
                  "copy");
    dst.fill(0, bytes, 0);
    prog.run();
    uint32_t probe[4] = {0, 0, 0, 0};
    dst.download(bytes - 16, probe, 16);
    if (probe[0] != 0x3c003c01u || probe[3] != 0x3c003c01u)
      throw Error(Status::internal, "bench: the copy shader produced wrong data");
    for (int i = 0; i < warmup; ++i) prog.run();
    std::vector<double> us;
    for (int i = 0; i < runs; ++i) {
      sink.check_cancel("during the copy ceiling");
      us.push_back(run_timed(prog, ts));
    }
    const Stats s = stats_of(us);
    const double gbps = 2.0 * double(bytes) / (s.median * 1e3);
    best.tried.push_back(
        json{{"workgroup", wg}, {"items_per_invocation", items}, {"median_us", s.median}, {"GBps", gbps}});
    if (gbps > best.gbps) {
      best.gbps = gbps;
      best.us = s;
      best.wg = wg;
      best.items = items;
    }
  }
  best.bytes = bytes;
  return best;
}

namespace {
constexpr uint32_t kFmaIters = 1024;              // per chain; fp16 stays exact while 63 + ITERS <= 2048
constexpr uint32_t kFmaChains[] = {2, 4, 8, 16};  // vec4 accumulators per invocation, each tried

// One grid of shaders/bench/bench_fma.comp, recorded once; check() runs it on a poisoned output and
// compares every invocation's value with the exact one.
struct FmaGrid {
  uint32_t chains, groups, gx, gy;
  uint64_t invocations;
  Buffer out;
  Program prog;
  FmaGrid(Device& dev, Pipeline& pipe, uint32_t chains_, uint32_t wg, uint32_t groups_, uint32_t max_x, bool ts)
      : chains(chains_),
        groups(groups_),
        gx(std::min(groups_, max_x)),
        gy((groups_ + gx - 1) / gx),
        invocations(uint64_t(gx) * gy * wg),
        out(dev, invocations * 4, MemoryDomain::device, "bench fma out"),
        prog(dev, "bench fma", ts) {
    struct {
      float m, c;
      uint32_t groups_x;
    } push{1.0f, 1.0f, gx};
    prog.dispatch(pipe, {{out.range(), Access::write}}, &push, sizeof push, {gx, gy, 1}, "fma");
  }
  uint64_t fmas() const { return invocations * chains * 4 * kFmaIters; }
  void check(const char* prec) {
    out.fill(0, invocations * 4, 0xffffffffu);  // NaN
    prog.run();
    std::vector<float> v(invocations);
    out.download(0, v.data(), invocations * 4);
    const double lanes = 4.0 * chains;
    const float want = float(lanes * (lanes - 1) / 2 + lanes * kFmaIters);  // sum of (4j + k + ITERS) over the lanes
    for (uint64_t i = 0; i < invocations; ++i)
      if (v[i] != want)
        throw Error(Status::internal, strf("bench: the %s FMA probe (%u chains) produced %g at invocation %llu of %llu "
                                           "(expected %g); not timed",
                                           prec, chains, double(v[i]), (unsigned long long)i,
                                           (unsigned long long)invocations, double(want)));
  }
};
}  // namespace

FmaCeiling measure_fma(Device& dev, bool fp16, double min_us, double max_us, int warmup, int runs, bool ts,
                       const Sink& sink) {
  FmaCeiling f;
  const char* prec = fp16 ? "fp16" : "fp32";
  if (fp16 && !dev.fp16()) {
    const DeviceCaps& c = dev.caps();
    f.absent = !c.fp16_arithmetic ? "the device has no fp16 arithmetic (shaderFloat16 = false)"
                                  : "this context runs fp32 (shaderFloat16 is enabled only for fp16 contexts)";
    return f;
  }
  register_bench_shaders();
  const DeviceCaps& caps = dev.caps();
  const uint32_t wg = pick_pow2_workgroup(caps, 256);
  const uint32_t max_x = std::max(1u, std::min(caps.max_workgroup_count[0], 65535u));
  // At most 2^24 invocations (a 64 MiB result buffer), within the device's grid.
  const uint64_t max_groups =
      std::min<uint64_t>((1ull << 24) / wg, uint64_t(max_x) * std::min(caps.max_workgroup_count[1], 65535u));
  double best_rate = 0;
  uint32_t best_groups = 8, best_chains = kFmaChains[0];
  for (uint32_t chains : kFmaChains) {
    Pipeline pipe(dev, PipelineDesc{"bench_fma"}
                           .with_bindings(1)
                           .with_push(12)
                           .with_spec({wg, kFmaIters, chains})
                           .with_subgroup(false)
                           .with_fp16(fp16));
    double chain_best = 0;
    for (uint32_t groups = 8;; groups *= 2) {
      sink.check_cancel("during the FMA ceiling");
      sink.step(strf("ceilings: %s FMA, %u chains, %u x %u invocations", prec, chains, groups, wg));
      FmaGrid g(dev, pipe, chains, wg, groups, max_x, ts);
      g.check(prec);  // also the pipeline's warm-up
      const double t = run_timed(g.prog, ts);
      const double rate = 2.0 * double(g.fmas()) / (t * 1e3);
      f.tried.push_back(json{{"chains", chains}, {"workgroups", groups}, {"us", t}, {"GFLOPs", rate}});
      const bool gaining = rate > 1.1 * chain_best;
      chain_best = std::max(chain_best, rate);
      if (rate > best_rate) {
        best_rate = rate;
        best_groups = groups;
        best_chains = chains;
      }
      if (uint64_t(groups) * 2 > max_groups || t * 2 > max_us || !(t < min_us || gaining)) break;
    }
  }
  // The best rate among the dispatches that were long enough (a short one's rate is one noisy sample);
  // the best of all when none was.
  double long_best = 0;
  for (const auto& e : f.tried)
    if (e["us"].get<double>() >= min_us && e["GFLOPs"].get<double>() > long_best) {
      long_best = e["GFLOPs"].get<double>();
      best_groups = e["workgroups"].get<uint32_t>();
      best_chains = e["chains"].get<uint32_t>();
    }
  Pipeline pipe(dev, PipelineDesc{"bench_fma"}
                         .with_bindings(1)
                         .with_push(12)
                         .with_spec({wg, kFmaIters, best_chains})
                         .with_subgroup(false)
                         .with_fp16(fp16));
  FmaGrid g(dev, pipe, best_chains, wg, best_groups, max_x, ts);
  sink.step(strf("ceilings: %s FMA, %u chains, %u x %u invocations, timing", prec, best_chains, best_groups, wg));
  g.check(prec);
  for (int i = 1; i < warmup; ++i) g.prog.run();
  std::vector<double> us;
  for (int i = 0; i < runs; ++i) {
    sink.check_cancel("during the FMA ceiling");
    us.push_back(run_timed(g.prog, ts));
  }
  f.measured = true;
  f.wg = wg;
  f.iters = kFmaIters;
  f.chains = best_chains;
  f.groups = best_groups;
  f.fmas = g.fmas();
  f.us = stats_of(us);
  f.gflops = 2.0 * double(f.fmas) / (f.us.median * 1e3);
  return f;
}

PeakFraction peak_fraction(const Ceilings& c, double gflops, double gbps) {
  PeakFraction f;
  f.flops = c.flops_ceiling() > 0 ? gflops / c.flops_ceiling() : 0;
  f.bytes = c.copy.gbps > 0 ? gbps / c.copy.gbps : 0;
  f.peak = std::max(f.flops, f.bytes);
  f.bound = f.flops > f.bytes ? "fma" : "copy";
  return f;
}

void add_peak_fields(json& row, const PeakFraction& f) {
  row["fraction_of_fma_ceiling"] = f.flops;
  row["fraction_of_copy_ceiling"] = f.bytes;
  row["fraction_of_peak"] = f.peak;
  row["peak_bound"] = f.bound;
}

static json fma_json(const FmaCeiling& f, const char* type, const char* vec) {
  if (!f.measured) return json{{"measured", false}, {"reason", f.absent}};
  return json{{"measured", true},
              {"shader", "shaders/bench/bench_fma.comp"},
              {"arithmetic", type},
              {"chains_per_invocation", strf("%u x %s", f.chains, vec)},
              {"chains_tried", "2, 4, 8, 16 (the best kept)"},
              {"iterations", f.iters},
              {"workgroup", f.wg},
              {"workgroups", f.groups},
              {"fmas_per_dispatch", f.fmas},
              {"flops_model", "2 per scalar FMA"},
              {"checked", "every invocation's exact result, before timing"},
              {"time", stats_json(f.us)},
              {"GFLOPs", f.gflops},
              {"sizes_tried", f.tried}};
}

json ceilings_json(const Ceilings& c) {
  return json{
      {"fma_f32_gflops", c.fma32.measured ? json(c.fma32.gflops) : json(nullptr)},
      {"fma_f16_gflops", c.fma16.measured ? json(c.fma16.gflops) : json(nullptr)},
      {"copy_gbps", c.copy.gbps},
      {"flops_ceiling_for_kernels", "fma_f32_gflops: diffvk's kernels accumulate in fp32 with either storage type"},
      {"copy", json{{"bytes_each_buffer", c.copy.bytes},
                    {"bytes_rule", c.copy.rule},
                    {"bytes_moved", 2 * c.copy.bytes},
                    {"workgroup", c.copy.wg},
                    {"items_per_invocation", c.copy.items},
                    {"time", stats_json(c.copy.us)},
                    {"GBps", c.copy.gbps},
                    {"configurations", c.copy.tried}}},
      {"fma_f32", fma_json(c.fma32, "float", "vec4")},
      {"fma_f16", fma_json(c.fma16, "float16_t", "f16vec4")}};
}

}  // namespace diffvk::bench
