#include "bench/cases.hpp"

#include <algorithm>
#include <cmath>

#include "bench/two_pass_attn.hpp"
#include "bench/naive_attn.hpp"
#include "diffvk/error.hpp"
#include "ops/diff_attn.hpp"
#include "ops/kernel_options.hpp"
#include "vk/program.hpp"

namespace diffvk::bench {

const char* const kImplNames[3] = {"fused", "two-pass", "naive"};

double gbps(const CaseResult& r, int i) { return r.impl[i].us.median > 0 ? double(r.bytes) / (r.impl[i].us.median * 1e3) : 0; }
double gflops(const CaseResult& r, int i) { return r.impl[i].us.median > 0 ? r.flops / (r.impl[i].us.median * 1e3) : 0; }
bool timed(const CaseResult& r, int i) { return r.impl[i].ran && r.impl[i].checked && r.impl[i].us.median > 0; }
double speedup(const CaseResult& r, int i) { return timed(r, 0) && timed(r, i) ? r.impl[i].us.median / r.impl[0].us.median : 0; }

struct AttnBench::KernelSet {
  std::unique_ptr<DiffAttnKernel> fused;
  std::unique_ptr<TwoPassDiffAttn> two;
  std::unique_ptr<NaiveDiffAttn> naive;
};

AttnBench::AttnBench(Device& dev, const CaseConfig& config, const Sink& sink)
    : dev_(dev), fp16_(dev.fp16()), cfg_(config), sink_(sink) {
  uint64_t heap = 0;
  for (const auto& h : dev.caps().heaps)
    if (h.device_local) heap = std::max(heap, h.size);
  if (!heap)
    for (const auto& h : dev.caps().heaps) heap = std::max(heap, h.size);
  naive_budget_ = std::min<uint64_t>(heap ? heap / 4 : (1ull << 30), 8ull << 30);
}

AttnBench::~AttnBench() = default;

AttnBench::KernelSet& AttnBench::kernels(uint32_t D, uint32_t n_rep) {
  auto it = kernels_.find({D, n_rep});
  if (it != kernels_.end()) return *it->second;
  sink_.step(strf("building pipelines for D=%u n_rep=%u", D, n_rep));
  const KernelOptions o = KernelOptions::for_device(dev_);
  auto k = std::make_unique<KernelSet>();  // all or nothing: a constructor that throws leaves no half-built set behind
  k->fused = std::make_unique<DiffAttnKernel>(dev_, o, D, n_rep);
  k->two = std::make_unique<TwoPassDiffAttn>(dev_, o, D, n_rep);
  if (!cfg_.no_naive) k->naive = std::make_unique<NaiveDiffAttn>(dev_, o, D, n_rep);
  return *(kernels_[{D, n_rep}] = std::move(k));
}

CaseResult AttnBench::run(const CaseSpec& cs, const std::string& tag) {
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

  sink_.stage(strf("%s %s: preparing inputs", tag.c_str(), cs.name().c_str()));
  AttnBench::KernelSet* ksp = nullptr;
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
    for (int i = 0; i < 3; ++i) progs[i] = std::make_unique<Program>(dev_, std::string("bench ") + kImplNames[i], cfg_.timestamps);
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
        const uint64_t pb = TwoPassDiffAttn::part_bytes(call, D, sp), sb = TwoPassDiffAttn::stat_bytes(call, sp);
        const BufferRange p1 = make(pb, "bench part1"), s1 = make(sb, "bench stat1"), p2 = make(pb, "bench part2"),
                          s2 = make(sb, "bench stat2");
        ks.two->record_decode(*progs[1], bq, bk, bv, bw, out[1], o1, o2, p1, s1, p2, s2, call, sp, len);
      } else {
        uint32_t len = 0;
        BufferRange p1{}, s1{}, p2{}, s2{};
        if (const uint32_t sp = ks.two->flash().prefill_splits(call, &len)) {  // loop-limited devices
          const uint64_t pb = TwoPassDiffAttn::part_bytes(call, D, sp), sb = TwoPassDiffAttn::stat_bytes(call, sp);
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
    if (cfg_.no_naive) {
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
      sink_.check_cancel("between output checks");
      sink_.step(strf("%s %s: checking %s", tag.c_str(), cs.name().c_str(), kImplNames[i]));
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
    sink_.step(strf("%s %s: CPU reference on %zu rows", tag.c_str(), cs.name().c_str(), rows.size()));
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
        sink_.warn("diffvk bench: " + msg);
        r.failures.push_back(msg);
      }

    // ---- timing: warm-up, then runs interleaved across implementations (fair under drifting noise)
    std::vector<double> us[3];
    std::vector<std::vector<double>> ops[3];
    // The output-check run above was the first warm-up run; `extra` more follow.
    const int extra = std::max(0, cfg_.warmup - 1), total = extra + cfg_.runs;
    for (int it = 0; it < total; ++it) {
      sink_.check_cancel("between timed repetitions");
      for (int i = 0; i < 3; ++i) {
        if (!r.impl[i].ran || !r.impl[i].checked) continue;
        sink_.step(strf("%s %s: %s %s %d/%d", tag.c_str(), cs.name().c_str(), it < extra ? "warm-up" : "run",
                            kImplNames[i], it < extra ? it + 2 : it - extra + 1, it < extra ? cfg_.warmup : cfg_.runs));
        const double t = run_timed(*progs[i], cfg_.timestamps);
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

}  // namespace diffvk::bench
