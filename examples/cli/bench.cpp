// diffvk bench: the on-device benchmark (issue 4).
//  1. Ceilings of the selected device: compute-shader copy bandwidth (GB/s, bytes read + written)
//     and the runtime's own matmul rate (LinearKernel, fp16 storage / fp32 accumulation; GFLOP/s).
//  2. Attention cases (prefill S = T; decode S = 1 against T cached keys) x D x (H, Hkv) x T, three
//     implementations on the same inputs: fused (DiffAttnKernel), two-pass (single-softmax flash
//     attention for Q1K1 and Q2K2, then combine_norm), naive (materialised score matrices). Outputs
//     are checked against each other and against a double-precision CPU loop on sampled rows before
//     anything is timed.
//  3. GPU timestamps around each implementation's dispatches, warm-up, median/min/max.
//  4. Table on stdout, --json, --plot; progress on stderr.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdarg>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "bench_plot.hpp"
#include "host_memory.hpp"
#include "commands.hpp"
#include "vk/gpu.hpp"
#include "io/half.hpp"
#include "ops/kernel_diff_attn.hpp"
#include "bench/kernel_flash_attn.hpp"
#include "bench/kernel_naive_attn.hpp"
#include "ops/kernels.hpp"
#include "diffvk/model.hpp"
#include "platform.hpp"
#include "vk/program.hpp"

namespace diffvk::cli {

namespace {

using json = nlohmann::ordered_json;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

struct BenchArgs {
  DeviceFlags dev;
  std::string phase = "both";
  std::vector<uint32_t> d, t, t_prefill, t_decode, heads, kv_heads;
  int runs = 0, warmup = -1;
  double budget = 0;
  std::string json_path, plot_path;
  bool quick = false, no_naive = false, profile = false;
  std::string model;                              // --model: whole-model benchmark instead of the kernel grid
  uint32_t prompt_tokens = 128, decode_tokens = 64;
};

// ------------------------------------------------------------------------------------ small helpers
struct Stats {
  double median = 0, min = 0, max = 0;
  std::vector<double> samples;
};
Stats stats_of(std::vector<double> v) {
  Stats s;
  s.samples = v;
  if (v.empty()) return s;
  std::sort(v.begin(), v.end());
  s.min = v.front();
  s.max = v.back();
  s.median = v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
  return s;
}
json stats_json(const Stats& s) {
  return json{{"median_us", s.median}, {"min_us", s.min}, {"max_us", s.max}, {"samples_us", s.samples}};
}

std::string strf(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
std::string strf(const char* fmt, ...) {
  char buf[1024];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  return buf;
}

std::string mib(uint64_t b) { return strf("%.1f MiB", double(b) / (1 << 20)); }

class Progress {
 public:
  Progress() : tty_(isatty(2)) {}
  void update(const std::string& s) {
    if (tty_) std::fprintf(stderr, "\r\033[K%s", s.c_str());
    else if (s != last_) std::fprintf(stderr, "%s\n", s.c_str());
    last_ = s;
    std::fflush(stderr);
  }
  // Non-tty: only lines that differ in their "stage" prefix are printed, to keep logs short.
  void stage(const std::string& s) {
    if (tty_) update(s);
    else {
      std::fprintf(stderr, "%s\n", s.c_str());
      std::fflush(stderr);
    }
  }
  void step(const std::string& s) {
    if (tty_) update(s);
  }
  void done() {
    if (tty_ && !last_.empty()) std::fprintf(stderr, "\r\033[K");
    last_.clear();
    std::fflush(stderr);
  }

 private:
  bool tty_;
  std::string last_;
};

// Fast deterministic approximately-normal numbers (Irwin-Hall of 4 uniforms, unit variance).
struct Rng {
  uint64_t s;
  explicit Rng(uint64_t seed) : s(seed * 0x9E3779B97F4A7C15ull + 1) {}
  uint32_t next() {
    s ^= s << 13;
    s ^= s >> 7;
    s ^= s << 17;
    return uint32_t(s >> 32);
  }
  float normal() {
    float u = 0;
    for (int i = 0; i < 4; ++i) u += float(next()) * (1.0f / 4294967296.0f);
    return (u - 2.0f) * 1.7320508f;
  }
};

// Host tensor in the storage type, with the exactly stored values as floats (for the CPU check).
struct HostTensor {
  std::vector<float> values;
  std::vector<uint8_t> bytes;
};
HostTensor make_tensor(size_t n, bool fp16, Rng& rng, float lo = 0, float hi = 0) {
  HostTensor t;
  t.values.resize(n);
  t.bytes.resize(n * (fp16 ? 2 : 4));
  for (size_t i = 0; i < n; ++i) {
    float x = hi > lo ? lo + (hi - lo) * float(rng.next()) * (1.0f / 4294967296.0f) : rng.normal();
    if (fp16) {
      const uint16_t h = float_to_half(x);
      x = half_to_float(h);
      std::memcpy(&t.bytes[i * 2], &h, 2);
    } else {
      std::memcpy(&t.bytes[i * 4], &x, 4);
    }
    t.values[i] = x;
  }
  return t;
}
std::vector<float> unpack(const std::vector<uint8_t>& b, bool fp16) {
  std::vector<float> v(b.size() / (fp16 ? 2 : 4));
  for (size_t i = 0; i < v.size(); ++i) {
    if (fp16) {
      uint16_t h;
      std::memcpy(&h, &b[i * 2], 2);
      v[i] = half_to_float(h);
    } else {
      std::memcpy(&v[i], &b[i * 4], 4);
    }
  }
  return v;
}

struct Check {
  std::string against;
  double max_abs = 0, max_ref = 0, nmse = 0;
  size_t nonfinite = 0, values = 0;
  double tolerance_factor = 1;
  bool ok = false;
};
// SPEC.md tolerances for one kernel (fp32: max abs <= 2e-5 * max(1, max|ref|); fp16 storage: nmse <= 1e-6
// and max abs <= 4e-3 * max(1, max|ref|)), times `factor` (2 when both sides are GPU results).
Check compare(const std::string& against, const std::vector<float>& got, const std::vector<double>& ref, bool fp16,
              double factor) {
  Check c;
  c.against = against;
  c.tolerance_factor = factor;
  c.values = got.size();
  double num = 0, den = 0;
  for (size_t i = 0; i < got.size() && i < ref.size(); ++i) {
    if (!std::isfinite(got[i])) {
      ++c.nonfinite;
      continue;
    }
    const double e = std::fabs(double(got[i]) - ref[i]);
    c.max_abs = std::max(c.max_abs, e);
    c.max_ref = std::max(c.max_ref, std::fabs(ref[i]));
    num += e * e;
    den += ref[i] * ref[i];
  }
  c.nmse = den > 0 ? num / den : (num > 0 ? 1 : 0);
  const double scale = std::max(1.0, c.max_ref);
  c.ok = c.nonfinite == 0 && got.size() == ref.size() &&
         (fp16 ? (c.nmse <= 1e-6 * factor && c.max_abs <= 4e-3 * factor * scale) : c.max_abs <= 2e-5 * factor * scale);
  return c;
}
json check_json(const Check& c) {
  return json{{"against", c.against}, {"values", c.values},     {"max_abs_err", c.max_abs}, {"max_abs_ref", c.max_ref},
              {"nmse", c.nmse},       {"nonfinite", c.nonfinite}, {"tolerance_factor", c.tolerance_factor}, {"ok", c.ok}};
}

std::string command_line() {
  std::vector<uint8_t> raw;
  try {
    raw = platform::read_file("/proc/self/cmdline", 1 << 16);
  } catch (const std::exception&) {
    return "diffvk bench";
  }
  std::string s;
  for (uint8_t ch : raw) s += ch ? char(ch) : ' ';
  while (!s.empty() && s.back() == ' ') s.pop_back();
  return s;
}

// ------------------------------------------------------------------------------------ ceilings
struct CopyCeiling {
  uint64_t bytes = 0;  // buffer size (each of src and dst)
  uint32_t wg = 0, items = 0;
  Stats us;
  double gbps = 0;
  json tried = json::array();
};

double run_timed(Program& prog, bool gpu_timestamps) {
  const auto t0 = Clock::now();
  prog.run();
  return gpu_timestamps ? prog.total_us() : seconds_since(t0) * 1e6;
}

CopyCeiling measure_copy(Device& dev, uint64_t bytes, int warmup, int runs, bool ts, Progress& progress) {
  const DeviceCaps& caps = dev.caps();
  CopyCeiling best;
  Buffer src(dev, bytes, MemoryDomain::device, "bench copy src"), dst(dev, bytes, MemoryDomain::device, "bench copy dst");
  src.fill(0, bytes, 0x3c003c01u);
  const uint32_t n = static_cast<uint32_t>(bytes / 16);
  const uint32_t wg = pick_pow2_workgroup(caps, 256);
  const uint32_t max_x = std::max(1u, std::min(caps.max_workgroup_count[0], 65535u));
  for (uint32_t items : {1u, 4u}) {
    progress.step(strf("ceilings: copy %s, %u x %u elements per workgroup", mib(bytes).c_str(), wg, items));
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
    for (int i = 0; i < runs; ++i) us.push_back(run_timed(prog, ts));
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

struct MatmulCeiling {
  uint32_t n = 0;
  Stats us;
  double gflops = 0;
  std::string tiles;
  json tried = json::array();
};

// Grows the square matmul from 256 while it is shorter than min_us or still gaining more than 10%
// in rate (and the next size, ~8x the time, stays under max_us), then times the best size.
MatmulCeiling measure_matmul(Device& dev, uint32_t n_max, double min_us, double max_us, int warmup, int runs, bool ts,
                             Progress& progress) {
  const DeviceCaps& caps = dev.caps();
  const uint64_t es = storage_bytes(dev.fp16());
  LinearKernel lin(dev, KernelOptions::for_device(dev));
  MatmulCeiling m;
  double best_rate = 0;
  uint32_t best_n = 256;
  for (uint32_t n = 256;; n *= 2) {
    const uint64_t bytes = uint64_t(n) * n * es;
    progress.step(strf("ceilings: matmul %u^3", n));
    Buffer x(dev, bytes, MemoryDomain::device, "bench mm x"), w(dev, bytes, MemoryDomain::device, "bench mm w"),
        y(dev, bytes, MemoryDomain::device, "bench mm y");
    x.fill(0, bytes, dev.fp16() ? 0x3c003c00u : 0x3f800000u);
    w.fill(0, bytes, dev.fp16() ? 0x38003800u : 0x3f000000u);
    Program prog(dev, "bench matmul", ts);
    lin.record(prog, x.range(), w.range(), y.range(), LinearParams{n, n, n, n, n});
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
  const uint64_t bytes = uint64_t(n) * n * es;
  Buffer x(dev, bytes, MemoryDomain::device, "bench mm x"), w(dev, bytes, MemoryDomain::device, "bench mm w"),
      y(dev, bytes, MemoryDomain::device, "bench mm y");
  x.fill(0, bytes, dev.fp16() ? 0x3c003c00u : 0x3f800000u);
  w.fill(0, bytes, dev.fp16() ? 0x38003800u : 0x3f000000u);
  Program prog(dev, "bench matmul", ts);
  lin.record(prog, x.range(), w.range(), y.range(), LinearParams{n, n, n, n, n});
  progress.step(strf("ceilings: matmul %u^3, timing", n));
  for (int i = 0; i < std::max(1, warmup); ++i) prog.run();
  std::vector<double> us;
  for (int i = 0; i < runs; ++i) us.push_back(run_timed(prog, ts));
  m.n = n;
  m.us = stats_of(us);
  m.gflops = 2.0 * double(n) * n * n / (m.us.median * 1e3);
  const LinearTiles tl = choose_linear_tiles(caps, n, n, n);
  m.tiles = strf("%ux%u tile, %ux%u per invocation, k-step %u", tl.bm, tl.bn, tl.rm, tl.rn, tl.bk);
  return m;
}

// ------------------------------------------------------------------------------------ attention cases
struct CaseSpec {
  bool decode = false;
  uint32_t D = 64, T = 512, H = 8, Hkv = 2;
  std::string series() const { return strf("%s D=%u H=%u/%u", decode ? "decode" : "prefill", D, H, Hkv); }
  std::string name() const { return strf("%s D=%u T=%u H=%u/%u", decode ? "decode" : "prefill", D, T, H, Hkv); }
};

const char* kImplNames[3] = {"fused", "two-pass", "naive"};

struct ImplResult {
  bool ran = false;
  std::string skipped;  // reason when not run
  Stats us;
  std::vector<std::pair<std::string, double>> op_median_us;
  size_t dispatches = 0;
  uint64_t bytes_touched = 0;  // this implementation's own minimum traffic model (see bytes_json)
  Check vs_fused;              // two-pass / naive only
  Check vs_cpu;                // every implementation, on the sampled rows
  bool checked = false;
  size_t unwritten = 0;        // outputs still holding the NaN poison after the check run
};

struct CaseResult {
  CaseSpec spec;
  uint32_t S = 0, pos0 = 0;
  uint64_t bytes = 0;  // Q + K1 + K2 + V + output (the bytes that must move)
  double flops = 0;    // useful flops (causal): 12·D per visible (query, key) pair and head
  std::string skipped;
  ImplResult impl[3];
  std::vector<uint32_t> cpu_rows;
  double wall_s = 0;
  uint32_t splits = 0, split_len = 0;
  std::vector<std::string> failures;
  bool outputs_ok() const {
    if (!impl[0].ran) return false;
    for (const auto& r : impl)
      if (r.ran && !r.checked) return false;
    return true;
  }
};

struct KernelSet {
  std::unique_ptr<DiffAttnKernel> fused;
  std::unique_ptr<TwoPassDiffAttn> two;
  std::unique_ptr<NaiveDiffAttn> naive;
};

// Double-precision differential attention + head norm for one (query row, head): SPEC.md eq. 1 + 3.
std::vector<double> cpu_row(const HostTensor& q, const HostTensor& kc, const HostTensor& vc, const HostTensor& subln,
                            const AttnCall& c, uint32_t D, uint32_t i, uint32_t h) {
  const uint32_t DV = 2 * D, g = h / (c.H / c.Hkv), keys = c.pos0 + i + 1;
  const float* qr = &q.values[size_t(i) * c.q_stride + size_t(h) * DV];
  const double scale = 1.0 / std::sqrt(double(D));
  std::vector<double> s1(keys), s2(keys);
  double m1 = -1e300, m2 = -1e300;
  for (uint32_t j = 0; j < keys; ++j) {
    const float* kr = &kc.values[(size_t(g) * c.capacity + j) * DV];
    double d1 = 0, d2 = 0;
    for (uint32_t d = 0; d < D; ++d) {
      d1 += double(qr[d]) * kr[d];
      d2 += double(qr[D + d]) * kr[D + d];
    }
    s1[j] = d1 * scale;
    s2[j] = d2 * scale;
    m1 = std::max(m1, s1[j]);
    m2 = std::max(m2, s2[j]);
  }
  double l1 = 0, l2 = 0;
  for (uint32_t j = 0; j < keys; ++j) {
    s1[j] = std::exp(s1[j] - m1);
    s2[j] = std::exp(s2[j] - m2);
    l1 += s1[j];
    l2 += s2[j];
  }
  std::vector<double> o(DV, 0.0);
  for (uint32_t j = 0; j < keys; ++j) {
    const double w = s1[j] / l1 - double(c.lambda) * s2[j] / l2;
    const float* vr = &vc.values[(size_t(g) * c.capacity + j) * DV];
    for (uint32_t d = 0; d < DV; ++d) o[d] += w * vr[d];
  }
  double ss = 0;
  for (double x : o) ss += x * x;
  const double f = double(c.gain) / std::sqrt(ss / DV + double(c.eps));
  for (uint32_t d = 0; d < DV; ++d) o[d] *= f * subln.values[d];
  return o;
}

class Bench {
 public:
  Bench(Device& dev, const BenchArgs& a, int warmup, int runs, bool ts, Progress& progress)
      : dev_(dev), fp16_(dev.fp16()), a_(a), warmup_(warmup), runs_(runs), ts_(ts), progress_(progress) {
    uint64_t heap = 0;
    for (const auto& h : dev.caps().heaps)
      if (h.device_local) heap = std::max(heap, h.size);
    if (!heap)
      for (const auto& h : dev.caps().heaps) heap = std::max(heap, h.size);
    naive_budget_ = std::min<uint64_t>(heap ? heap / 4 : (1ull << 30), 8ull << 30);
  }
  uint64_t naive_budget() const { return naive_budget_; }

  CaseResult run(const CaseSpec& cs, const std::string& tag);

 private:
  KernelSet& kernels(uint32_t D, uint32_t n_rep) {
    auto it = kernels_.find({D, n_rep});
    if (it != kernels_.end()) return it->second;
    progress_.step(strf("building pipelines for D=%u n_rep=%u", D, n_rep));
    const KernelOptions o = KernelOptions::for_device(dev_);
    KernelSet k;  // all or nothing: a constructor that throws leaves no half-built set behind
    k.fused = std::make_unique<DiffAttnKernel>(dev_, o, D, n_rep);
    k.two = std::make_unique<TwoPassDiffAttn>(dev_, o, D, n_rep);
    if (!a_.no_naive) k.naive = std::make_unique<NaiveDiffAttn>(dev_, o, D, n_rep);
    return kernels_[{D, n_rep}] = std::move(k);
  }

  Device& dev_;
  bool fp16_;
  const BenchArgs& a_;
  int warmup_, runs_;
  bool ts_;
  Progress& progress_;
  uint64_t naive_budget_ = 0;
  std::map<std::pair<uint32_t, uint32_t>, KernelSet> kernels_;
};

CaseResult Bench::run(const CaseSpec& cs, const std::string& tag) {
  const auto t0 = Clock::now();
  CaseResult r;
  r.spec = cs;
  const uint32_t D = cs.D, DV = 2 * D, T = cs.T, H = cs.H, Hkv = cs.Hkv;
  r.S = cs.decode ? 1 : T;
  r.pos0 = cs.decode ? T - 1 : 0;
  const uint64_t es = storage_bytes(fp16_);
  r.bytes = (uint64_t(r.S) * H * DV * 2 + uint64_t(T) * Hkv * DV * 2) * es;
  double pairs = 0;
  for (uint32_t i = 0; i < r.S; ++i) pairs += double(r.pos0) + i + 1;
  r.flops = pairs * H * 12.0 * D;

  const int depth = 5;
  const float lambda_init = float(0.8 - 0.6 * std::exp(-0.3 * depth));
  AttnCall call{r.S, r.pos0, H, Hkv, T, H * DV, H * DV, 0.55f, 1.0f - lambda_init};

  progress_.stage(strf("%s %s: preparing inputs", tag.c_str(), cs.name().c_str()));
  KernelSet* ksp = nullptr;
  try {
    ksp = &kernels(D, H / Hkv);
  } catch (const Error& e) {
    if (e.status() != Status::unsupported && e.status() != Status::invalid_argument) throw;
    r.skipped = e.what();
    r.wall_s = seconds_since(t0);
    return r;
  }
  KernelSet& ks = *ksp;
  Rng rng(1000003ull * T + 7919ull * D + 31ull * H + Hkv + (cs.decode ? 17 : 0));
  const HostTensor q = make_tensor(size_t(r.S) * H * DV, fp16_, rng);
  const HostTensor kc = make_tensor(size_t(Hkv) * T * DV, fp16_, rng);
  const HostTensor vc = make_tensor(size_t(Hkv) * T * DV, fp16_, rng);
  const HostTensor subln = make_tensor(DV, fp16_, rng, 0.7f, 1.3f);

  const uint64_t out_bytes = uint64_t(r.S) * H * DV * es;
  auto buffer = [&](uint64_t bytes, const char* what) { return Buffer(dev_, std::max<uint64_t>(bytes, 16), MemoryDomain::device, what); };
  std::vector<Buffer> bufs;
  bufs.reserve(20);
  auto make = [&](uint64_t bytes, const char* what) -> BufferRange {
    bufs.push_back(buffer(bytes, what));
    return bufs.back().range(0, std::max<uint64_t>(bytes, 16));
  };
  try {
    const BufferRange bq = make(q.bytes.size(), "bench q"), bk = make(kc.bytes.size(), "bench k"),
                      bv = make(vc.bytes.size(), "bench v"), bw = make(subln.bytes.size(), "bench subln");
    bufs[0].upload(0, q.bytes.data(), q.bytes.size());
    bufs[1].upload(0, kc.bytes.data(), kc.bytes.size());
    bufs[2].upload(0, vc.bytes.data(), vc.bytes.size());
    bufs[3].upload(0, subln.bytes.data(), subln.bytes.size());
    BufferRange out[3];
    size_t out_idx[3];
    for (int i = 0; i < 3; ++i) {
      out_idx[i] = bufs.size();
      out[i] = make(out_bytes, "bench out");
    }

    std::unique_ptr<Program> progs[3];
    for (int i = 0; i < 3; ++i) progs[i] = std::make_unique<Program>(dev_, std::string("bench ") + kImplNames[i], ts_);
    // fused
    if (cs.decode) {
      r.splits = ks.fused->decode_splits(call, &r.split_len);
      const BufferRange part = make(DiffAttnKernel::part_bytes(call, D, r.splits), "bench part"),
                        stat = make(DiffAttnKernel::stat_bytes(call, r.splits), "bench stat");
      ks.fused->record_decode(*progs[0], bq, bk, bv, bw, out[0], part, stat, call, r.splits, r.split_len);
    } else {
      uint32_t len = 0;
      const uint32_t ps = ks.fused->prefill_splits(call, &len);  // split-K on loop-limited devices (llvmpipe)
      BufferRange part{}, stat{};
      if (ps) {
        part = make(DiffAttnKernel::part_bytes(call, D, ps), "bench part");
        stat = make(DiffAttnKernel::stat_bytes(call, ps), "bench stat");
      }
      ks.fused->record_prefill(*progs[0], bq, bk, bv, bw, out[0], call, part, stat);
    }
    r.impl[0].bytes_touched = r.bytes;
    // two-pass
    try {
      const uint64_t ib = TwoPassDiffAttn::inter_bytes(call, D, fp16_);
      const BufferRange o1 = make(ib, "bench o1"), o2 = make(ib, "bench o2");
      if (cs.decode) {
        uint32_t len = 0;
        const uint32_t sp = ks.two->flash().decode_splits(call, &len);
        const uint64_t pb = FlashAttnKernel::part_bytes(call, D, sp), sb = FlashAttnKernel::stat_bytes(call, sp);
        const BufferRange p1 = make(pb, "bench part1"), s1 = make(sb, "bench stat1"), p2 = make(pb, "bench part2"),
                          s2 = make(sb, "bench stat2");
        ks.two->record_decode(*progs[1], bq, bk, bv, bw, out[1], o1, o2, p1, s1, p2, s2, call, sp, len);
      } else {
        uint32_t len = 0;
        BufferRange p1{}, s1{}, p2{}, s2{};
        if (const uint32_t sp = ks.two->flash().prefill_splits(call, &len)) {  // loop-limited devices
          const uint64_t pb = FlashAttnKernel::part_bytes(call, D, sp), sb = FlashAttnKernel::stat_bytes(call, sp);
          p1 = make(pb, "bench part1");
          s1 = make(sb, "bench stat1");
          p2 = make(pb, "bench part2");
          s2 = make(sb, "bench stat2");
        }
        ks.two->record_prefill(*progs[1], bq, bk, bv, bw, out[1], o1, o2, call, p1, s1, p2, s2);
      }
      // K1 + V + K2 + V + Q + 2 intermediates written and read again + output
      r.impl[1].bytes_touched = r.bytes + uint64_t(T) * Hkv * DV * es + 4 * ib;
      r.impl[1].ran = true;
    } catch (const Error& e) {
      r.impl[1].skipped = e.what();
    }
    // naive
    if (a_.no_naive) {
      r.impl[2].skipped = "--no-naive";
    } else {
      const std::string why = NaiveDiffAttn::unsupported_reason(dev_.caps(), call, D, fp16_, naive_budget_);
      if (!why.empty()) {
        r.impl[2].skipped = why;
      } else {
        try {
          const uint64_t sb = NaiveDiffAttn::score_bytes(call);
          const BufferRange s1 = make(sb, "bench scores1"), s2 = make(sb, "bench scores2"),
                            ot = make(NaiveDiffAttn::inter_bytes(call, D, fp16_), "bench naive o");
          ks.naive->record(*progs[2], bq, bk, bv, bw, out[2], s1, s2, ot, call);
          // scores written, read + written by the softmax, read by PV (x2), plus Q, K, V, O, norm pass
          r.impl[2].bytes_touched = r.bytes + 2 * 4 * sb + 3 * out_bytes;
          r.impl[2].ran = true;
        } catch (const Error& e) {
          r.impl[2].skipped = e.what();
        }
      }
    }
    r.impl[0].ran = true;
    for (int i = 0; i < 3; ++i)
      if (r.impl[i].ran) r.impl[i].dispatches = progs[i]->op_count();

    // ---- correctness, before anything is timed: one run each on poisoned outputs
    std::vector<float> got[3];
    for (int i = 0; i < 3; ++i) {
      if (!r.impl[i].ran) continue;
      progress_.step(strf("%s %s: checking %s", tag.c_str(), cs.name().c_str(), kImplNames[i]));
      bufs[out_idx[i]].fill(0, out_bytes, 0x7fc07fc0u);
      progs[i]->run();
      std::vector<uint8_t> raw(out_bytes);
      bufs[out_idx[i]].download(0, raw.data(), out_bytes);
      got[i] = unpack(raw, fp16_);
    }
    // CPU reference (double) on sampled rows, every head.
    std::vector<uint32_t> rows = {0};
    if (r.S > 1) rows = {0, 1, r.S / 3, (2 * r.S) / 3, r.S - 1};
    std::sort(rows.begin(), rows.end());
    rows.erase(std::unique(rows.begin(), rows.end()), rows.end());
    r.cpu_rows = rows;
    std::vector<double> ref;
    auto sample = [&](const std::vector<float>& all) {
      std::vector<float> s;
      for (uint32_t i : rows)
        for (uint32_t c = 0; c < H * DV; ++c) s.push_back(all[size_t(i) * H * DV + c]);
      return s;
    };
    progress_.step(strf("%s %s: CPU reference on %zu rows", tag.c_str(), cs.name().c_str(), rows.size()));
    for (uint32_t i : rows)
      for (uint32_t h = 0; h < H; ++h) {
        const auto o = cpu_row(q, kc, vc, subln, call, D, i, h);
        ref.insert(ref.end(), o.begin(), o.end());
      }
    r.impl[0].vs_cpu = compare("cpu double reference (sampled rows)", sample(got[0]), ref, fp16_, 1);
    r.impl[0].checked = r.impl[0].vs_cpu.ok;
    const std::vector<double> fused_d(got[0].begin(), got[0].end());
    for (int i = 1; i < 3; ++i) {
      if (!r.impl[i].ran) continue;
      r.impl[i].vs_fused = compare("fused (all outputs)", got[i], fused_d, fp16_, 2);
      r.impl[i].vs_cpu = compare("cpu double reference (sampled rows)", sample(got[i]), ref, fp16_, 1);
      // Against fused on every output when fused itself passed; else against the CPU rows alone.
      r.impl[i].checked = r.impl[i].vs_cpu.ok && (!r.impl[0].checked || r.impl[i].vs_fused.ok);
    }
    for (int i = 0; i < 3; ++i)
      if (r.impl[i].ran && !r.impl[i].checked) {
        size_t bad = 0, first = 0;
        for (size_t e = 0; e < got[i].size(); ++e)
          if (!std::isfinite(got[i][e]) && bad++ == 0) first = e;
        r.impl[i].unwritten = bad;
        std::string msg = strf("%s: %s output check FAILED (vs cpu rows: max abs %.3g, nmse %.3g", cs.name().c_str(), kImplNames[i],
                               r.impl[i].vs_cpu.max_abs, r.impl[i].vs_cpu.nmse);
        if (i > 0 && r.impl[0].checked) msg += strf("; vs fused: max abs %.3g", r.impl[i].vs_fused.max_abs);
        if (bad) msg += strf("; %zu of %zu outputs still hold the NaN poison (never written), the first in row %zu", bad, got[i].size(),
                             first / (size_t(H) * DV));
        msg += ") - not timed";
        std::fprintf(stderr, "diffvk bench: %s\n", msg.c_str());
        r.failures.push_back(msg);
      }

    // ---- timing: warm-up, then runs interleaved across implementations (fair under drifting noise)
    std::vector<double> us[3];
    std::vector<std::vector<double>> ops[3];
    // The output-check run above was the first warm-up run; `extra` more follow.
    const int extra = std::max(0, warmup_ - 1), total = extra + runs_;
    for (int it = 0; it < total; ++it) {
      for (int i = 0; i < 3; ++i) {
        if (!r.impl[i].ran || !r.impl[i].checked) continue;
        progress_.step(strf("%s %s: %s %s %d/%d", tag.c_str(), cs.name().c_str(), it < extra ? "warm-up" : "run",
                            kImplNames[i], it < extra ? it + 2 : it - extra + 1, it < extra ? warmup_ : runs_));
        const double t = run_timed(*progs[i], ts_);
        if (it < extra) continue;
        us[i].push_back(t);
        const auto tm = progs[i]->timings();
        if (ops[i].empty()) ops[i].resize(tm.size());
        for (size_t k = 0; k < tm.size() && k < ops[i].size(); ++k) ops[i][k].push_back(tm[k].us);
      }
    }
    for (int i = 0; i < 3; ++i) {
      if (!r.impl[i].ran || !r.impl[i].checked) continue;
      r.impl[i].us = stats_of(us[i]);
      const auto tm = progs[i]->timings();
      for (size_t k = 0; k < ops[i].size() && k < tm.size(); ++k) r.impl[i].op_median_us.push_back({tm[k].label, stats_of(ops[i][k]).median});
    }
  } catch (const Error& e) {
    if (e.status() != Status::unsupported && e.status() != Status::out_of_memory && e.status() != Status::invalid_argument &&
        e.status() != Status::context_overflow)
      throw;
    r.skipped = e.what();
    for (auto& im : r.impl) im.ran = false;
  }
  r.wall_s = seconds_since(t0);
  return r;
}

// ------------------------------------------------------------------------------------ output
struct Ceilings {
  CopyCeiling copy;
  MatmulCeiling mm;
};

double gbps(const CaseResult& r, int i) { return r.impl[i].us.median > 0 ? double(r.bytes) / (r.impl[i].us.median * 1e3) : 0; }
double gflops(const CaseResult& r, int i) { return r.impl[i].us.median > 0 ? r.flops / (r.impl[i].us.median * 1e3) : 0; }
bool timed(const CaseResult& r, int i) { return r.impl[i].ran && r.impl[i].checked && r.impl[i].us.median > 0; }
double speedup(const CaseResult& r, int i) { return timed(r, 0) && timed(r, i) ? r.impl[i].us.median / r.impl[0].us.median : 0; }

std::string us_str(double us) { return us >= 1e5 ? strf("%.0f", us) : us >= 100 ? strf("%.1f", us) : strf("%.2f", us); }

void print_table(const std::vector<CaseResult>& results, const Ceilings& c) {
  std::printf("%-7s %4s %6s %6s  %-8s %11s %11s %11s %8s %6s %8s %6s %8s\n", "phase", "D", "T", "H/Hkv", "impl",
              "median us", "min us", "max us", "GB/s", "%copy", "GFLOP/s", "%mm", "fused x");
  for (const auto& r : results) {
    const std::string hh = strf("%u/%u", r.spec.H, r.spec.Hkv);
    if (!r.skipped.empty()) {
      std::printf("%-7s %4u %6u %6s  skipped: %s\n", r.spec.decode ? "decode" : "prefill", r.spec.D, r.spec.T, hh.c_str(),
                  r.skipped.c_str());
      continue;
    }
    for (int i = 0; i < 3; ++i) {
      const char* ph = i == 0 ? (r.spec.decode ? "decode" : "prefill") : "";
      const std::string d = i == 0 ? strf("%u", r.spec.D) : "", t = i == 0 ? strf("%u", r.spec.T) : "";
      const std::string h = i == 0 ? hh : "";
      if (!timed(r, i)) {
        std::string why = r.impl[i].skipped;
        if (r.impl[i].ran && !r.impl[i].checked) why = "OUTPUT CHECK FAILED, not timed";
        std::printf("%-7s %4s %6s %6s  %-8s skipped: %s\n", ph, d.c_str(), t.c_str(), h.c_str(), kImplNames[i], why.c_str());
        continue;
      }
      const double g = gbps(r, i), f = gflops(r, i);
      const std::string sp = i == 0 || !timed(r, 0) ? "-" : strf("%.2fx", speedup(r, i));
      std::printf("%-7s %4s %6s %6s  %-8s %11s %11s %11s %8.2f %5.1f%% %8.2f %5.1f%% %8s\n", ph, d.c_str(), t.c_str(),
                  h.c_str(), kImplNames[i], us_str(r.impl[i].us.median).c_str(), us_str(r.impl[i].us.min).c_str(),
                  us_str(r.impl[i].us.max).c_str(), g, 100 * g / c.copy.gbps, f, 100 * f / c.mm.gflops, sp.c_str());
    }
  }
}

struct TargetEval {
  std::string target;
  CaseSpec spec;
  double value = 0, threshold = 0;
  std::string unit;
  bool measurable = true;
  std::string note;
};

std::vector<TargetEval> evaluate_targets(const std::vector<CaseResult>& results, const Ceilings& c, bool cpu_device) {
  std::vector<TargetEval> out;
  const char* names[3] = {"decode T>=2048: fused >= 1.35x two-pass", "prefill T>=1024: fused >= 1.1x two-pass",
                          "decode T>=4096 on a real GPU: fused >= 60% of copy bandwidth"};
  for (int k = 0; k < 3; ++k) {
    bool any = false;
    for (const auto& r : results) {
      const bool decode = k != 1;
      const uint32_t tmin = k == 0 ? 2048 : k == 1 ? 1024 : 4096;
      if (r.spec.decode != decode || r.spec.T < tmin || !r.skipped.empty()) continue;
      any = true;
      TargetEval t;
      t.target = names[k];
      t.spec = r.spec;
      if (k < 2) {
        t.threshold = k == 0 ? 1.35 : 1.1;
        t.unit = "x";
        t.measurable = timed(r, 0) && timed(r, 1);
        if (t.measurable) t.value = speedup(r, 1);
        else t.note = "not measured: an implementation failed its output check or was skipped";
      } else {
        t.threshold = 60;
        t.unit = "%";
        t.measurable = timed(r, 0) && !cpu_device;
        if (timed(r, 0)) t.value = 100 * gbps(r, 0) / c.copy.gbps;
        t.note = cpu_device ? "not measurable here: CPU device (lavapipe), not a real GPU"
                 : !timed(r, 0) ? "not measured: the fused output check failed" : "";
      }
      out.push_back(t);
    }
    if (!any) {
      TargetEval t;
      t.target = names[k];
      t.measurable = false;
      t.note = "not measured: no qualifying case in this run";
      out.push_back(t);
    }
  }
  return out;
}

json caps_json(const DeviceCaps& c, const Device& dev) {
  json heaps = json::array();
  for (const auto& h : c.heaps) heaps.push_back(json{{"size", h.size}, {"device_local", h.device_local}});
  return json{{"index", c.index},
              {"name", c.name},
              {"kind", device_kind_name(c.kind)},
              {"vendor_id", c.vendor_id},
              {"device_id", c.device_id},
              {"api_version", strf("%u.%u.%u", VK_API_VERSION_MAJOR(c.api_version), VK_API_VERSION_MINOR(c.api_version),
                                   VK_API_VERSION_PATCH(c.api_version))},
              {"driver_version", c.driver_version},
              {"driver_name", c.driver_name},
              {"driver_info", c.driver_info},
              {"storage_16bit", c.storage_16bit},
              {"fp16_arithmetic", c.fp16_arithmetic},
              {"fp16_in_use", dev.fp16()},
              {"subgroup_size", c.subgroup_size},
              {"subgroup_arithmetic_in_use", dev.subgroup_arithmetic()},
              {"max_shared_memory", c.max_shared_memory},
              {"max_workgroup_invocations", c.max_workgroup_invocations},
              {"max_storage_buffer_range", c.max_storage_buffer_range},
              {"max_memory_allocation_size", c.max_memory_allocation_size},
              {"compute_units", c.compute_units},
              {"timestamps", c.timestamps},
              {"timestamp_period_ns", c.timestamp_period_ns},
              {"heaps", heaps}};
}

json impl_json(const CaseResult& r, int i, const Ceilings& c) {
  const ImplResult& im = r.impl[i];
  json j{{"ran", im.ran}, {"output_checked", im.ran && im.checked}};
  if (!im.ran) {
    j["skipped"] = im.skipped;
    return j;
  }
  j["dispatches"] = im.dispatches;
  j["check_vs_cpu"] = check_json(im.vs_cpu);
  if (im.unwritten) j["outputs_never_written"] = im.unwritten;
  if (i > 0) j["check_vs_fused"] = check_json(im.vs_fused);
  if (!timed(r, i)) {
    j["skipped"] = "output check failed; not timed";
    return j;
  }
  j["time"] = stats_json(im.us);
  j["GBps"] = gbps(r, i);
  j["GFLOPs"] = gflops(r, i);
  j["pct_copy_bandwidth"] = 100 * gbps(r, i) / c.copy.gbps;
  j["pct_matmul_rate"] = 100 * gflops(r, i) / c.mm.gflops;
  j["bytes_touched_model"] = im.bytes_touched;
  j["GBps_touched_model"] = double(im.bytes_touched) / (im.us.median * 1e3);
  json ops = json::array();
  for (const auto& [label, us] : im.op_median_us) ops.push_back(json{{"label", label}, {"median_us", us}});
  j["ops"] = ops;
  if (i > 0) j["fused_speedup"] = speedup(r, i);
  return j;
}

// ------------------------------------------------------------------------------------ plot
void write_plot(const std::string& path, const std::vector<CaseResult>& results, const Ceilings& c, const std::string& device,
                const std::string& subtitle, bool cpu_device) {
  static const uint32_t palette[] = {0x1f77b4, 0xd62728, 0x2ca02c, 0x9467bd, 0xff7f0e, 0x8c564b, 0x17becf, 0xe377c2};
  PlotFigure f;
  f.title = "diffvk bench: fused differential attention vs baselines - " + device;
  f.subtitle = subtitle;
  f.xlabel = "T (keys in context; prefill S = T, decode S = 1)";
  f.cols = 2;
  for (bool decode : {false, true}) {
    std::vector<std::string> series;
    for (const auto& r : results)
      if (r.spec.decode == decode && std::find(series.begin(), series.end(), r.spec.series()) == series.end())
        series.push_back(r.spec.series());
    PlotPanel sp, bw;
    const char* ph = decode ? "decode" : "prefill";
    sp.title = strf("%s: fused speedup (time of baseline / fused)", ph);
    sp.ylabel = "x";
    bw.title = strf("%s: %% of measured copy bandwidth (%.1f GB/s)", ph, c.copy.gbps);
    bw.ylabel = "%";
    sp.empty_note = bw.empty_note = strf("no %s cases in this run", ph);
    for (size_t s = 0; s < series.size(); ++s) {
      const uint32_t color = palette[s % 8];
      PlotSeries vs_two{"vs two-pass, " + series[s].substr(series[s].find(' ') + 1), color, false, {}};
      PlotSeries vs_naive{"vs naive, " + series[s].substr(series[s].find(' ') + 1), color, true, {}};
      PlotSeries bw_f{"fused, " + series[s].substr(series[s].find(' ') + 1), color, false, {}};
      PlotSeries bw_t{"two-pass, " + series[s].substr(series[s].find(' ') + 1), color, true, {}};
      for (const auto& r : results) {
        if (r.spec.series() != series[s] || !timed(r, 0)) continue;
        if (timed(r, 1)) vs_two.points.push_back({r.spec.T, speedup(r, 1)});
        if (timed(r, 2)) vs_naive.points.push_back({r.spec.T, speedup(r, 2)});
        bw_f.points.push_back({r.spec.T, 100 * gbps(r, 0) / c.copy.gbps});
        if (timed(r, 1)) bw_t.points.push_back({r.spec.T, 100 * gbps(r, 1) / c.copy.gbps});
      }
      for (auto* ps : {&vs_two, &vs_naive})
        if (!ps->points.empty()) sp.series.push_back(*ps);
      for (auto* ps : {&bw_f, &bw_t})
        if (!ps->points.empty()) bw.series.push_back(*ps);
    }
    sp.lines.push_back({1.0, "1x (parity)", 0x606060});
    sp.lines.push_back({decode ? 1.35 : 1.1, decode ? "target 1.35x (T>=2048)" : "target 1.1x (T>=1024)", 0xe07000});
    if (decode && !cpu_device) bw.lines.push_back({60, "target 60% (T>=4096)", 0xe07000});
    if (decode && cpu_device) bw.note = "(the 60% target applies to real GPUs only)";
    f.panels.push_back(sp);
    f.panels.push_back(bw);
  }
  const auto png = render_png(f);
  platform::write_file_atomic(path, png.data(), png.size());
}

// ------------------------------------------------------------------------------------ grid
struct Plan {
  std::vector<CaseSpec> cases;
  bool reduced = false;   // CPU device defaults
  bool budgeted = false;  // default T list trimmed by the calibrated time budget
  double budget_s = 0;
  std::vector<std::string> notes;
};

}  // namespace

// ------------------------------------------------------------------------------------ whole model
// Prefill and decode tokens/s of a checkpoint, and decode's fraction of the weight-streaming bound:
// every decode step reads every weight once, so a token cannot take less than weight bytes / copy
// bandwidth. Wall-clock time per call (host submit + wait + logits read-back included), median of runs.
int run_model_bench(const BenchArgs& a, Context& ctx, double copy_gbps, int runs, const std::string& cmdline, Progress& progress) {
  progress.stage("model: loading " + a.model);
  const uint64_t rss0 = rss_bytes();
  const bool hwm = reset_peak_rss();
  auto model = Model::load(ctx, a.model);
  const LoadStats& ls = model->load_stats();
  const uint64_t load_peak = hwm && peak_rss_bytes() > rss0 ? peak_rss_bytes() - rss0 : 0;
  const ModelConfig& c = model->config();
  const uint32_t P = std::min(a.prompt_tokens, c.max_position_embeddings - 1);
  const uint32_t N = std::min(a.decode_tokens, c.max_position_embeddings - P);
  auto session = Session::create(*model, SessionOptions{P + N, 64, false});
  Rng rng(12345);
  std::vector<int32_t> prompt(P);
  for (auto& t : prompt) t = static_cast<int32_t>(rng.next() % c.vocab_size);
  std::vector<double> prefill_s, decode_s;
  for (int r = -1; r < runs; ++r) {  // r = -1: warm-up (pipelines, first-use costs)
    progress.step(strf("model: run %d of %d", r + 2, runs + 1));
    session->reset();
    auto t0 = Clock::now();
    auto logits = session->prefill(prompt);
    const double p = seconds_since(t0);
    int32_t next = static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
    t0 = Clock::now();
    for (uint32_t i = 0; i < N; ++i) next = session->decode_sample(next);  // greedy on the device
    const double d = seconds_since(t0);
    if (r >= 0) {
      prefill_s.push_back(p);
      decode_s.push_back(d);
    }
  }
  progress.done();
  const Stats ps = stats_of(prefill_s), ds = stats_of(decode_s);
  const double prefill_tps = P / ps.median, decode_tps = N / ds.median;
  const double bytes = static_cast<double>(model->weight_bytes());
  const double bound_s = bytes / (copy_gbps * 1e9);  // seconds per token at the copy rate
  const double fraction = bound_s / (ds.median / N);
  std::printf("model %s: %u layers, E=%u, H=%u, Hkv=%u, I=%u, vocab %u, %s storage\n", a.model.c_str(), c.num_layers,
              c.hidden_size, c.num_heads, c.num_kv_heads, c.intermediate_size, c.vocab_size, precision_name(ctx.precision()));
  std::printf("  load: %s, %u file(s), %.3f s; host staging peak %llu bytes (loader's counter; largest tensor %llu bytes); "
              "process peak RSS +%.1f MB over the pre-load RSS (VmHWM%s)\n", ls.format.c_str(), ls.files, ls.seconds,
              (unsigned long long)ls.staging_peak_bytes, (unsigned long long)ls.largest_tensor_bytes, load_peak / 1e6,
              hwm ? ": includes device memory on CPU drivers" : " not resettable: not measured");
  std::printf("  prefill: %u tokens, median %.3f s (min %.3f, max %.3f): %.1f tokens/s\n", P, ps.median, ps.min, ps.max, prefill_tps);
  std::printf("  decode:  %u tokens, median %.3f s (min %.3f, max %.3f): %.1f tokens/s, %.2f ms/token\n", N, ds.median, ds.min,
              ds.max, decode_tps, 1e3 * ds.median / N);
  std::printf("  weight-streaming bound: %.2f MB of weights per token / %.2f GB/s copy = %.3f ms/token -> decode at %.1f%% of it\n",
              bytes / 1e6, copy_gbps, bound_s * 1e3, 100.0 * fraction);
  std::printf("  (wall clock per call, median of %d runs after one warm-up; includes submit, wait and the read-back of\n"
              "   the last row's logits (prefill) or of the greedy token id sampled on the device (decode))\n", runs);
  json profile_json;
  if (a.profile) {
    // A separate session with timestamps between dispatches: GPU time per dispatch grouped by op over N decode steps.
    auto ps = Session::create(*model, SessionOptions{P + N, 64, true});
    auto lg = ps->prefill(prompt);
    int32_t tok = static_cast<int32_t>(std::max_element(lg.begin(), lg.end()) - lg.begin());
    struct Agg {
      double us = 0;
      uint64_t n = 0;
    };
    std::map<std::string, Agg> by_op;
    double total = 0;
    size_t per_token = 0;
    for (uint32_t i = 0; i < N; ++i) {
      tok = ps->decode_sample(tok);
      const auto prof = ps->last_profile();
      per_token = prof.size();
      for (const auto& d : prof) {
        by_op[d.op].us += d.us;
        by_op[d.op].n += 1;
        total += d.us;
      }
    }
    if (total <= 0) {
      std::printf("  profile: the device has no timestamps\n");
    } else {
      std::vector<std::pair<std::string, Agg>> rows(by_op.begin(), by_op.end());
      std::sort(rows.begin(), rows.end(), [](const auto& x, const auto& y) { return x.second.us > y.second.us; });
      std::printf("  decode profile (GPU timestamps between dispatches, %u steps, %zu dispatches per token, %.3f ms GPU time per token):\n",
                  N, per_token, total / N / 1e3);
      std::printf("    %-26s %10s %12s %12s %7s\n", "op", "per token", "us/token", "us/dispatch", "share");
      for (const auto& [op, g] : rows) {
        std::printf("    %-26s %10.1f %12.1f %12.1f %6.1f%%\n", op.c_str(), double(g.n) / N, g.us / N, g.us / g.n, 100.0 * g.us / total);
        profile_json.push_back({{"op", op}, {"dispatches_per_token", double(g.n) / N}, {"us_per_token", g.us / N},
                                {"us_per_dispatch", g.us / g.n}});
      }
    }
  }
  if (!a.json_path.empty()) {
    json j;
    j["command_line"] = cmdline;
    j["device"] = caps_json(ctx.caps(), ctx.device());
    j["precision"] = precision_name(ctx.precision());
    j["model"] = {{"dir", a.model}, {"num_layers", c.num_layers}, {"hidden_size", c.hidden_size}, {"num_heads", c.num_heads},
                  {"num_kv_heads", c.num_kv_heads}, {"intermediate_size", c.intermediate_size}, {"vocab_size", c.vocab_size},
                  {"weight_bytes_per_token", model->weight_bytes()}};
    j["copy_gbps"] = copy_gbps;
    j["load"] = {{"format", ls.format}, {"files", ls.files}, {"seconds", ls.seconds}, {"staging_peak_bytes", ls.staging_peak_bytes},
                 {"largest_tensor_bytes", ls.largest_tensor_bytes}, {"split_tensors", ls.split_tensors},
                 {"peak_rss_delta_bytes", hwm ? json(load_peak) : json(nullptr)}};
    j["prefill"] = {{"tokens", P}, {"seconds", stats_json(ps)}, {"tokens_per_s", prefill_tps}};
    j["decode"] = {{"tokens", N}, {"seconds", stats_json(ds)}, {"tokens_per_s", decode_tps},
                   {"weight_streaming_bound_ms_per_token", bound_s * 1e3}, {"fraction_of_bound", fraction}};
    if (a.profile) j["decode_profile"] = profile_json;
    const std::string text = j.dump(2) + "\n";
    platform::write_file_atomic(a.json_path, text.data(), text.size());
    std::printf("json: %s\n", a.json_path.c_str());
  }
  return 0;
}

Runner register_bench(CLI::App& app) {
  auto a = std::make_shared<BenchArgs>();
  auto* cmd = app.add_subcommand("bench", "on-device benchmark: ceilings, then fused vs two-pass vs naive differential attention");
  cmd->add_option("--phase", a->phase, "prefill (S = T), decode (S = 1 against T cached keys) or both")
      ->check(CLI::IsMember({"prefill", "decode", "both"}));
  cmd->add_option("--d", a->d, "head half widths D (list, e.g. 64,128)")->delimiter(',')->check(CLI::Range(2u, 256u));
  cmd->add_option("--t", a->t, "context lengths T (list, e.g. 512,1024,2048,4096,8192); given explicitly, no budget trimming")
      ->delimiter(',')
      ->check(CLI::Range(1u, 1u << 20));
  cmd->add_option("--t-prefill", a->t_prefill, "prefill context lengths (list; overrides --t for prefill)")
      ->delimiter(',')
      ->check(CLI::Range(1u, 1u << 20));
  cmd->add_option("--t-decode", a->t_decode, "decode context lengths (list; overrides --t for decode)")
      ->delimiter(',')
      ->check(CLI::Range(1u, 1u << 20));
  cmd->add_option("--heads", a->heads, "differential heads H (list)")->delimiter(',')->check(CLI::Range(1u, 1024u));
  cmd->add_option("--kv-heads", a->kv_heads, "key/value groups Hkv (list; pairs with H where H % Hkv == 0)")
      ->delimiter(',')
      ->check(CLI::Range(1u, 1024u));
  cmd->add_option("--runs", a->runs, "timed runs per implementation (default 20; 3 on a CPU device)")->check(CLI::Range(1, 100000));
  cmd->add_option("--warmup", a->warmup, "untimed runs per implementation before timing; the output-check run counts as the first (default 3; 1 on a CPU device)")->check(CLI::Range(0, 100000));
  cmd->add_option("--budget", a->budget, "seconds for the default T grid (trimmed by calibration; default 40 on a CPU device, 300 otherwise)")
      ->check(CLI::PositiveNumber);
  cmd->add_flag("--no-naive", a->no_naive, "skip the naive implementation");
  cmd->add_option("--json", a->json_path, "write every figure, the device caps and the command line to FILE (atomic)");
  cmd->add_option("--plot", a->plot_path, "write a PNG of fused speedup and % of copy bandwidth against T (atomic)");
  cmd->add_flag("--quick", a->quick, "tiny configuration (CI smoke test)");
  cmd->add_option("--model", a->model, "benchmark a whole model instead: prefill and decode tokens/s and decode's fraction "
                                       "of the weight-streaming bound (weight bytes per token / measured copy bandwidth)")
      ->check(CLI::ExistingDirectory);
  cmd->add_option("--prompt-tokens", a->prompt_tokens, "model benchmark: tokens to prefill (default 128)")->check(CLI::Range(1u, 1u << 20));
  cmd->add_option("--decode-tokens", a->decode_tokens, "model benchmark: tokens to decode (default 64)")->check(CLI::Range(1u, 1u << 20));
  cmd->add_flag("--profile", a->profile, "model benchmark: also print the GPU time per dispatch of a decode step, grouped by op "
                                         "(timestamps between dispatches)");
  add_device_flags(cmd, a->dev);
  return [a]() {
    const auto t_start = Clock::now();
    Progress progress;
    const ContextOptions opts = a->dev.options();
    progress.stage("diffvk bench: opening the device");
    auto ctx = Context::create(opts);
    Device& dev = ctx->device();
    const DeviceCaps& caps = ctx->caps();
    const bool cpu = caps.kind == DeviceKind::cpu;
    const bool ts = caps.timestamps;
    const bool fp32_fallback = !dev.fp16() && opts.precision != Precision::fp32;

    // ---- plan
    Plan plan;
    plan.reduced = cpu && !a->quick;
    int runs = a->runs ? a->runs : (a->quick ? 2 : cpu ? 3 : 20);
    int warmup = a->warmup >= 0 ? a->warmup : (a->quick ? 1 : cpu ? 1 : 3);
    std::vector<uint32_t> Ds = a->d, Ts = a->t, Hs = a->heads, Hkvs = a->kv_heads, Ts_prefill;
    if (Ds.empty()) Ds = a->quick || cpu ? std::vector<uint32_t>{64} : std::vector<uint32_t>{64, 128};
    if (Hs.empty()) Hs = {a->quick ? 2u : cpu ? 4u : 32u};
    if (Hkvs.empty()) Hkvs = {a->quick ? 1u : cpu ? 1u : 8u};
    const bool default_t = Ts.empty() && a->t_prefill.empty() && a->t_decode.empty();
    if (Ts.empty()) Ts = a->quick ? std::vector<uint32_t>{64, 128} : std::vector<uint32_t>{512, 1024, 2048, 4096, 8192};
    Ts_prefill = a->t_prefill.empty() ? Ts : a->t_prefill;
    if (!a->t_decode.empty()) Ts = a->t_decode;
    for (auto* v : {&Ts, &Ts_prefill}) {
      std::sort(v->begin(), v->end());
      v->erase(std::unique(v->begin(), v->end()), v->end());
    }
    if (default_t && cpu && !a->quick) Ts_prefill.insert(Ts_prefill.begin(), 256);  // prefill is T^2: start lower
    std::string llvmpipe_note;
    if (caps.has_quirk("loop_iteration_limit"))
      llvmpipe_note = "quirk loop_iteration_limit: this driver ends every loop of an invocation after 65535 iterations in total, "
                      "so both attention implementations cap the keys one invocation streams: long prefills run through their "
                      "split-K kernels here (as decode always does)";
    plan.budgeted = default_t && !a->quick;
    plan.budget_s = a->budget > 0 ? a->budget : (cpu ? 40.0 : 300.0);
    std::vector<bool> phases;
    if (a->phase != "prefill") phases.push_back(true);  // decode first: cheap, and fills the budget estimate
    if (a->phase != "decode") phases.push_back(false);
    for (bool decode : phases)
      for (uint32_t D : Ds)
        for (uint32_t H : Hs)
          for (uint32_t Hkv : Hkvs) {
            if (H % Hkv) {
              plan.notes.push_back(strf("H=%u, Hkv=%u skipped: H must be a multiple of Hkv", H, Hkv));
              continue;
            }
            if (D % 2) throw Error(Status::invalid_argument, "bench: D must be even");
            for (uint32_t T : decode ? Ts : Ts_prefill) plan.cases.push_back(CaseSpec{decode, D, T, H, Hkv});
          }
    if (plan.cases.empty()) throw Error(Status::invalid_argument, "bench: the grid is empty");
    if (plan.reduced) {
      std::vector<std::string> d;
      if (a->d.empty()) d.push_back("D=64");
      if (a->heads.empty() && a->kv_heads.empty()) d.push_back(strf("H/Hkv=%u/%u", Hs[0], Hkvs[0]));
      if (a->runs == 0) d.push_back(strf("%d runs", runs));
      if (a->warmup < 0) d.push_back(strf("%d warm-up", warmup));
      if (default_t) d.push_back(strf("prefill from T=256, T list trimmed to a %.0f s time budget by calibration", plan.budget_s));
      std::string list;
      for (const auto& x : d) list += (list.empty() ? "" : ", ") + x;
      if (!list.empty())
        plan.notes.push_back(strf("CPU device (%s): reduced defaults for the flags not given: %s", caps.name.c_str(), list.c_str()));
    }
    if (!llvmpipe_note.empty()) plan.notes.push_back(llvmpipe_note);
    if (fp32_fallback) plan.notes.push_back("fp32 FALLBACK active: the device has no usable fp16 storage path; every tensor is float32");
    if (!ts) plan.notes.push_back("the device has no compute timestamps: host wall time around submit+wait is reported instead");

    std::printf("diffvk bench\ndevice:    [%u] %s (%s), %s %s, Vulkan %u.%u\n", caps.index, caps.name.c_str(),
                device_kind_name(caps.kind), caps.driver_name.c_str(), caps.driver_info.c_str(),
                VK_API_VERSION_MAJOR(caps.api_version), VK_API_VERSION_MINOR(caps.api_version));
    std::printf("precision: %s storage, fp32 accumulation%s; subgroup arithmetic %s; timing by %s\n",
                precision_name(ctx->precision()), fp32_fallback ? " (fp32 FALLBACK: no usable fp16 on this device)" : "",
                dev.subgroup_arithmetic() ? "on" : "off", ts ? "GPU timestamps" : "host wall clock");
    for (const auto& n : plan.notes) std::printf("note:      %s\n", n.c_str());
    std::fflush(stdout);

    // ---- ceilings
    progress.stage("ceilings: copy bandwidth");
    Ceilings ceil;
    uint64_t copy_bytes = a->quick ? (16ull << 20) : (1ull << 30);  // beyond any cache (up to 256 MiB today)
    for (const auto& h : caps.heaps)
      if (h.device_local && h.size) copy_bytes = std::min<uint64_t>(copy_bytes, h.size / 8);
    copy_bytes = std::min<uint64_t>(copy_bytes, caps.max_storage_buffer_range);
    if (caps.max_memory_allocation_size) copy_bytes = std::min<uint64_t>(copy_bytes, caps.max_memory_allocation_size);
    copy_bytes &= ~uint64_t(0xffff);
    const int c_runs = a->quick ? 2 : cpu ? 3 : std::max(3, std::min(runs, 10)), c_warm = a->quick || cpu ? 1 : 2;
    ceil.copy = measure_copy(dev, copy_bytes, c_warm, c_runs, ts, progress);
    progress.stage("ceilings: matmul rate");
    ceil.mm = measure_matmul(dev, a->quick ? 256 : 8192, a->quick ? 0 : 50000, 1.5e6, c_warm, c_runs, ts, progress);
    progress.done();
    std::printf("ceilings:  copy %.2f GB/s (compute-shader copy of %s, read + write, %ux%u per workgroup, median of %d)\n",
                ceil.copy.gbps, mib(copy_bytes).c_str(), ceil.copy.wg, ceil.copy.items, c_runs);
    std::printf("           matmul %.2f GFLOP/s (LinearKernel %s storage / fp32 accumulate, %u^3, %s, median of %d)\n\n",
                ceil.mm.gflops, precision_name(ctx->precision()), ceil.mm.n, ceil.mm.tiles.c_str(), c_runs);
    std::fflush(stdout);
    if (!a->model.empty()) return run_model_bench(*a, *ctx, ceil.copy.gbps, runs, command_line(), progress);

    // ---- cases (series by series; with the default T grid each series gets an equal share of the
    // remaining budget, and a T is skipped when the previous case's wall time scaled by the flop
    // ratio would overrun it)
    Bench bench(dev, *a, warmup, runs, ts, progress);
    std::vector<CaseResult> results;
    std::vector<std::string> series;
    for (const auto& c : plan.cases)
      if (std::find(series.begin(), series.end(), c.series()) == series.end()) series.push_back(c.series());
    const auto t_cases = Clock::now();
    size_t index = 0;
    for (size_t s = 0; s < series.size(); ++s) {
      const double share = (plan.budget_s - seconds_since(t_cases)) / double(series.size() - s);
      const auto t_series = Clock::now();
      double last_wall = 0, last_flops = 0;
      bool stop = false;
      for (const auto& c : plan.cases) {
        if (c.series() != series[s]) continue;
        ++index;
        if (plan.budgeted && last_flops > 0) {
          const uint32_t S = c.decode ? 1 : c.T;
          double pairs = 0;
          for (uint32_t i = 0; i < S; ++i) pairs += double(c.decode ? c.T - 1 : 0) + i + 1;
          const double est = last_wall * (pairs * c.H * 12.0 * c.D) / last_flops;
          if (stop || seconds_since(t_series) + est > share) {
            stop = true;
            plan.notes.push_back(strf("%s skipped by the time budget (estimated %.0f s, %.0f s left for this series; pass --t to force)",
                                      c.name().c_str(), est, std::max(0.0, share - seconds_since(t_series))));
            continue;
          }
        }
        CaseResult r = bench.run(c, strf("[%zu/%zu]", index, plan.cases.size()));
        last_wall = r.wall_s;
        last_flops = r.flops;
        results.push_back(std::move(r));
      }
    }
    progress.done();

    // ---- report
    print_table(results, ceil);
    bool all_ok = !results.empty();
    size_t checked_cases = 0;
    for (const auto& r : results) {
      if (!r.skipped.empty()) continue;
      if (r.outputs_ok()) ++checked_cases;
      else all_ok = false;
    }
    if (checked_cases == 0) all_ok = false;
    std::printf("\noutputs checked: %s (%zu case(s): fused vs a double-precision CPU loop on sampled rows; two-pass and "
                "naive vs fused on every output and vs the CPU rows; SPEC.md tolerances, x2 between two GPU results)\n",
                all_ok ? "yes, all agree" : "NO - see the errors above", checked_cases);
    for (const auto& r : results) {
      if (!r.skipped.empty()) continue;
      std::printf("  %-32s vs cpu max abs %.2e", r.spec.name().c_str(), r.impl[0].vs_cpu.max_abs);
      for (int i = 1; i < 3; ++i)
        if (r.impl[i].ran) std::printf(" | %s vs fused max abs %.2e", kImplNames[i], r.impl[i].vs_fused.max_abs);
      std::printf("\n");
    }
    const auto targets = evaluate_targets(results, ceil, cpu);
    if (!targets.empty()) std::printf("\ntargets (issue 4; ratios from this one run):\n");
    for (const auto& t : targets) {
      if (t.unit.empty()) {
        std::printf("  %-62s %s\n", t.target.c_str(), t.note.c_str());
        continue;
      }
      const char* verdict = !t.measurable ? "n/a" : t.value >= t.threshold ? "met" : "MISSED";
      const std::string value = t.value > 0 ? strf("%7.2f%s", t.value, t.unit.c_str()) : std::string("      -");
      std::printf("  %-62s %-32s %s  %s%s%s\n", t.target.c_str(), t.spec.name().c_str(), value.c_str(), verdict,
                  t.note.empty() ? "" : " - ", t.note.c_str());
    }
    for (const auto& n : plan.notes)
      if (n.find("time budget (estimated") != std::string::npos) std::printf("note: %s\n", n.c_str());
    const double total_s = seconds_since(t_start);
    std::printf("\ntotal %.1f s\n", total_s);
    std::fflush(stdout);

    if (!a->json_path.empty()) {
      json j;
      j["tool"] = "diffvk bench";
      j["command_line"] = command_line();
      j["device"] = caps_json(caps, dev);
      j["precision"] = precision_name(ctx->precision());
      j["fp32_fallback"] = fp32_fallback;
      j["timing"] = ts ? "gpu_timestamps" : "host_wall_clock";
      j["config"] = json{{"runs", runs},         {"warmup", warmup},   {"phase", a->phase},         {"quick", a->quick},
                         {"reduced_grid_for_cpu_device", plan.reduced}, {"budgeted", plan.budgeted}, {"budget_s", plan.budget_s},
                         {"D", Ds},              {"T_decode", Ts},     {"T_prefill", Ts_prefill},            {"H", Hs},                   {"Hkv", Hkvs},
                         {"naive_memory_budget_bytes", bench.naive_budget()}};
      j["notes"] = plan.notes;
      j["ceilings"] = json{
          {"copy", json{{"bytes_each_buffer", ceil.copy.bytes}, {"bytes_moved", 2 * ceil.copy.bytes}, {"workgroup", ceil.copy.wg},
                        {"items_per_invocation", ceil.copy.items}, {"time", stats_json(ceil.copy.us)}, {"GBps", ceil.copy.gbps},
                        {"configurations", ceil.copy.tried}}},
          {"matmul", json{{"m", ceil.mm.n}, {"n", ceil.mm.n}, {"k", ceil.mm.n}, {"kernel", "LinearKernel"}, {"tiles", ceil.mm.tiles},
                          {"time", stats_json(ceil.mm.us)}, {"GFLOPs", ceil.mm.gflops}, {"sizes_tried", ceil.mm.tried}}}};
      json cases = json::array();
      for (const auto& r : results) {
        json c{{"phase", r.spec.decode ? "decode" : "prefill"}, {"D", r.spec.D}, {"T", r.spec.T}, {"S", r.S}, {"pos0", r.pos0},
               {"H", r.spec.H}, {"Hkv", r.spec.Hkv}};
        if (!r.skipped.empty()) {
          c["skipped"] = r.skipped;
          cases.push_back(c);
          continue;
        }
        c["bytes_must_move"] = r.bytes;
        c["bytes_model"] = "Q + K1 + K2 + V + output, storage type";
        c["flops"] = r.flops;
        c["flops_model"] = "12*D per visible (query, key) pair and head: two QK dots (2*2D) + two PV products (2*4D)";
        if (r.spec.decode) c["fused_splits"] = json{{"splits", r.splits}, {"split_len", r.split_len}};
        c["cpu_reference_rows"] = r.cpu_rows;
        c["outputs_checked"] = r.outputs_ok();
        if (!r.failures.empty()) c["check_failures"] = r.failures;
        json impls;
        for (int i = 0; i < 3; ++i) impls[kImplNames[i]] = impl_json(r, i, ceil);
        c["implementations"] = impls;
        c["fused_speedup_vs_two_pass"] = timed(r, 1) && timed(r, 0) ? json(speedup(r, 1)) : json(nullptr);
        c["fused_speedup_vs_naive"] = timed(r, 2) && timed(r, 0) ? json(speedup(r, 2)) : json(nullptr);
        c["wall_s"] = r.wall_s;
        cases.push_back(c);
      }
      j["cases"] = cases;
      j["outputs_checked"] = all_ok;
      json tj = json::array();
      for (const auto& t : targets)
        tj.push_back(json{{"target", t.target}, {"case", t.unit.empty() ? json(nullptr) : json(t.spec.name())},
                          {"value", t.value > 0 ? json(t.value) : json(nullptr)}, {"threshold", t.threshold},
                          {"unit", t.unit}, {"measurable", t.measurable},
                          {"met", t.measurable ? json(t.value >= t.threshold) : json(nullptr)}, {"note", t.note}});
      j["targets"] = tj;
      j["total_s"] = total_s;
      const std::string text = j.dump(2) + "\n";
      platform::write_file_atomic(a->json_path, text.data(), text.size());
      std::printf("json: %s\n", a->json_path.c_str());
    }
    if (!a->plot_path.empty()) {
      const std::string sub = strf("%s storage%s, %s device, median of %d runs; ceilings: copy %.1f GB/s, matmul %.2f GFLOP/s%s",
                                   precision_name(ctx->precision()), fp32_fallback ? " (fp32 FALLBACK)" : "",
                                   device_kind_name(caps.kind), runs, ceil.copy.gbps, ceil.mm.gflops,
                                   cpu ? "\nCPU device: a correctness target, not a GPU performance proxy" : "");
      write_plot(a->plot_path, results, ceil, caps.name, sub, cpu);
      std::printf("plot: %s\n", a->plot_path.c_str());
    }
    return all_ok ? 0 : 3;
  };
}

}  // namespace diffvk::cli
