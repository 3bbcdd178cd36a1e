#include "bench/ceilings.hpp"

#include <algorithm>

#include "bench/shaders.hpp"
#include "diffvk/error.hpp"
#include "ops/linear.hpp"
#include "vk/program.hpp"

namespace diffvk::bench {

CopyCeiling measure_copy(Device& dev, uint64_t bytes, int warmup, int runs, bool ts, const Sink& sink) {
  register_bench_shaders();
  const DeviceCaps& caps = dev.caps();
  CopyCeiling best;
  Buffer src(dev, bytes, MemoryDomain::device, "bench copy src"), dst(dev, bytes, MemoryDomain::device, "bench copy dst");
  src.fill(0, bytes, 0x3c003c01u);
  const uint32_t n = static_cast<uint32_t>(bytes / 16);
  const uint32_t wg = pick_pow2_workgroup(caps, 256);
  const uint32_t max_x = std::max(1u, std::min(caps.max_workgroup_count[0], 65535u));
  for (uint32_t items : {1u, 4u}) {
    sink.step(strf("ceilings: copy %s, %u x %u elements per workgroup", mib(bytes).c_str(), wg, items));
    Pipeline pipe(dev, PipelineDesc{"bench_copy", 2, 8, {wg, items}, false, dev.fp16()});
    const uint32_t groups = (n + wg * items - 1) / (wg * items);
    const uint32_t gx = std::min(groups, max_x), gy = (groups + gx - 1) / gx;
    const uint32_t push[2] = {n, gx};
    Program prog(dev, "bench copy", ts);
    prog.dispatch(pipe, {{src.range(), Access::read}, {dst.range(), Access::write}}, push, sizeof push, {gx, gy, 1}, "copy");
    dst.fill(0, bytes, 0);
    prog.run();
    uint32_t probe[4] = {0, 0, 0, 0};
    dst.download(bytes - 16, probe, 16);
    if (probe[0] != 0x3c003c01u || probe[3] != 0x3c003c01u) throw Error(Status::internal, "bench: the copy shader produced wrong data");
    for (int i = 0; i < warmup; ++i) prog.run();
    std::vector<double> us;
    for (int i = 0; i < runs; ++i) {
      sink.check_cancel("during the copy ceiling");
      us.push_back(run_timed(prog, ts));
    }
    const Stats s = stats_of(us);
    const double gbps = 2.0 * double(bytes) / (s.median * 1e3);
    best.tried.push_back(json{{"workgroup", wg}, {"items_per_invocation", items}, {"median_us", s.median}, {"GBps", gbps}});
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

// n x n x n through the production linear kernel: x = 1, w = 0.5 (exact in fp16), y = x · wᵀ, recorded once.
struct SquareMatmul {
  uint64_t bytes;
  Buffer x, w, y;
  Program prog;
  SquareMatmul(Device& dev, const LinearKernel& lin, uint32_t n, bool ts)
      : bytes(uint64_t(n) * n * storage_bytes(dev.fp16())),
        x(dev, bytes, MemoryDomain::device, "bench mm x"),
        w(dev, bytes, MemoryDomain::device, "bench mm w"),
        y(dev, bytes, MemoryDomain::device, "bench mm y"),
        prog(dev, "bench matmul", ts) {
    x.fill(0, bytes, dev.fp16() ? 0x3c003c00u : 0x3f800000u);
    w.fill(0, bytes, dev.fp16() ? 0x38003800u : 0x3f000000u);
    lin.record(prog, x.range(), w.range(), y.range(), LinearParams{n, n, n, n, n});
  }
};

// Grows the square matmul from 256 while it is shorter than min_us or still gaining more than 10%
// in rate (and the next size, ~8x the time, stays under max_us), then times the best size.
MatmulCeiling measure_matmul(Device& dev, uint32_t n_max, double min_us, double max_us, int warmup, int runs, bool ts,
                             const Sink& sink) {
  const DeviceCaps& caps = dev.caps();
  const uint64_t es = storage_bytes(dev.fp16());
  LinearKernel lin(dev, KernelOptions::for_device(dev));
  MatmulCeiling m;
  double best_rate = 0;
  uint32_t best_n = 256;
  for (uint32_t n = 256;; n *= 2) {
    sink.check_cancel("during the matmul ceiling");
    const uint64_t bytes = uint64_t(n) * n * es;
    sink.step(strf("ceilings: matmul %u^3", n));
    SquareMatmul mm(dev, lin, n, ts);
    Program& prog = mm.prog;
    run_timed(prog, ts);  // first submit: pipeline warm-up
    const double t = run_timed(prog, ts);
    const double rate = 2.0 * double(n) * n * n / (t * 1e3);
    m.tried.push_back(json{{"n", n}, {"us", t}, {"GFLOPs", rate}});
    const bool gaining = rate > 1.1 * best_rate;
    if (rate > best_rate) {
      best_rate = rate;
      best_n = n;
    }
    const uint64_t next_bytes = 4 * bytes;
    if (n * 2 > n_max || next_bytes > caps.max_storage_buffer_range || t * 8 > max_us || !(t < min_us || gaining)) break;
  }
  // The smallest size within 5% of the best rate (cheaper to time, same ceiling) that is not too short.
  for (const auto& e : m.tried)
    if (e["GFLOPs"].get<double>() >= 0.95 * best_rate && (e["us"].get<double>() >= min_us || e["n"].get<uint32_t>() == best_n)) {
      best_n = e["n"].get<uint32_t>();
      break;
    }
  const uint32_t n = best_n;
  SquareMatmul mm(dev, lin, n, ts);
  Program& prog = mm.prog;
  sink.step(strf("ceilings: matmul %u^3, timing", n));
  for (int i = 0; i < std::max(1, warmup); ++i) prog.run();
  std::vector<double> us;
  for (int i = 0; i < runs; ++i) {
    sink.check_cancel("during the matmul ceiling");
    us.push_back(run_timed(prog, ts));
  }
  m.n = n;
  m.us = stats_of(us);
  m.gflops = 2.0 * double(n) * n * n / (m.us.median * 1e3);
  const LinearTiles tl = choose_linear_tiles(caps, n, n, n);
  m.tiles = strf("%ux%u tile, %ux%u per invocation, k-step %u", tl.bm, tl.bn, tl.rm, tl.rn, tl.bk);
  return m;
}

}  // namespace diffvk::bench
