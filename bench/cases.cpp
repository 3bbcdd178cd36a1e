#include "bench/cases.hpp"

#include <algorithm>
#include <cmath>

#include "bench/two_pass_attn.hpp"
#include "bench/naive_attn.hpp"
#include "diffvk/error.hpp"
#include "ops/diff_attn.hpp"
#include "ops/kernel_options.hpp"
#include "reference/diff_v2_ref.hpp"
#include "vk/program.hpp"

namespace diffvk::bench {

const char* const kImplNames[kImpls] = {"fused", "two-pass", "naive", "plain H", "plain 2H"};

double gbps(const CaseResult& r, int i) {
  return r.impl[i].us.median > 0 ? double(r.bytes) / (r.impl[i].us.median * 1e3) : 0;
}
double gflops(const CaseResult& r, int i) {
  return r.impl[i].us.median > 0 ? r.flops / (r.impl[i].us.median * 1e3) : 0;
}
bool timed(const CaseResult& r, int i) { return r.impl[i].ran && r.impl[i].checked && r.impl[i].us.median > 0; }
double speedup(const CaseResult& r, int i) {
  return timed(r, 0) && timed(r, i) ? r.impl[i].us.median / r.impl[0].us.median : 0;
}

struct AttnBench::KernelSet {
  std::unique_ptr<DiffAttnKernel> fused;
  std::unique_ptr<TwoPassDiffAttn> two;
  std::unique_ptr<NaiveDiffAttn> naive;
  // DIFF V2: fused is AttnSoftmax::v2; the two-pass baseline (its plain pass is the "plain H" row) and the
  // plain attention over all 2H query heads.
  std::unique_ptr<TwoPassV2Attn> two_v2;
  std::unique_ptr<DiffAttnKernel> plain_all;
  std::unique_ptr<NaiveV2Attn> naive_v2;
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

AttnBench::KernelSet& AttnBench::kernels(uint32_t D, uint32_t n_rep, bool v2) {
  auto it = kernels_.find({D, n_rep, v2});
  if (it != kernels_.end()) return *it->second;
  sink_.step(strf("building %spipelines for D=%u n_rep=%u", v2 ? "DIFF V2 " : "", D, n_rep));
  const KernelOptions o = KernelOptions::for_device(dev_);
  auto k = std::make_unique<KernelSet>();  // all or nothing: a constructor that throws leaves no half-built set behind
  if (v2) {                                // n_rep: output heads per KV head (2·n_rep query heads)
    k->fused = std::make_unique<DiffAttnKernel>(dev_, o, D, 2 * n_rep, 8, AttnSoftmax::v2);
    k->two_v2 = std::make_unique<TwoPassV2Attn>(dev_, o, D, n_rep);
    k->plain_all = std::make_unique<DiffAttnKernel>(dev_, o, D, 2 * n_rep, 8, AttnSoftmax::v2_plain);
    if (!cfg_.no_naive) k->naive_v2 = std::make_unique<NaiveV2Attn>(dev_, o, D, n_rep);
  } else {
    k->fused = std::make_unique<DiffAttnKernel>(dev_, o, D, n_rep);
    k->two = std::make_unique<TwoPassDiffAttn>(dev_, o, D, n_rep);
    if (!cfg_.no_naive) k->naive = std::make_unique<NaiveDiffAttn>(dev_, o, D, n_rep);
  }
  return *(kernels_[{D, n_rep, v2}] = std::move(k));
}

namespace {
// The float64 DIFF V2 reference of query row i (reference/diff_v2_ref.hpp) on the bench's inputs: q rows of
// 2H·D query columns then H λ logits (q_stride), caches [Hkv][capacity][D]. Returns the fused output row
// (H·D), and through `plain` the plain attention of all 2H query heads (2H·D: head j at j·D).
std::vector<double> v2_cpu_row(const HostTensor& q, const HostTensor& kc, const HostTensor& vc, const AttnCall& c,
                               uint32_t D, uint32_t i, std::vector<double>& plain) {
  const uint32_t H = c.H / 2, Hkv = c.Hkv, keys = c.pos0 + i + 1, qw = 2 * H * D;
  std::vector<double> k(size_t(keys) * Hkv * D), v(k.size());
  for (uint32_t t = 0; t < keys; ++t)
    for (uint32_t g = 0; g < Hkv; ++g)
      for (uint32_t d = 0; d < D; ++d) {
        k[(size_t(t) * Hkv + g) * D + d] = kc.values[(size_t(g) * c.capacity + t) * D + d];
        v[(size_t(t) * Hkv + g) * D + d] = vc.values[(size_t(g) * c.capacity + t) * D + d];
      }
  const float* qi = q.values.data() + size_t(i) * c.q_stride;
  const std::vector<double> qrow(qi, qi + qw), z(qi + qw, qi + qw + H);
  const auto out = ref::diff_v2_attention(qrow, k, v, z, 1, int(keys), int(H), int(Hkv), int(D), int(keys - 1));
  // Plain attention per query head: λ = 0 (a logit of −1e300), the head in the even position.
  const std::vector<double> off(H, -1e300);
  std::vector<double> swapped(qrow);
  for (uint32_t h = 0; h < H; ++h)
    for (uint32_t d = 0; d < D; ++d) std::swap(swapped[(2 * h) * D + d], swapped[(2 * h + 1) * D + d]);
  const auto even = ref::diff_v2_attention(qrow, k, v, off, 1, int(keys), int(H), int(Hkv), int(D), int(keys - 1));
  const auto odd = ref::diff_v2_attention(swapped, k, v, off, 1, int(keys), int(H), int(Hkv), int(D), int(keys - 1));
  plain.assign(size_t(2) * H * D, 0.0);
  for (uint32_t h = 0; h < H; ++h)
    for (uint32_t d = 0; d < D; ++d) {
      plain[(2 * h) * D + d] = even[size_t(h) * D + d];
      plain[(2 * h + 1) * D + d] = odd[size_t(h) * D + d];
    }
  return out;
}
}  // namespace

CaseResult AttnBench::run(const CaseSpec& cs, const std::string& tag) {
  const auto t0 = Clock::now();
  CaseResult r;
  r.spec = cs;
  const bool v2 = cs.v2;
  // V1: heads 2D wide, H heads. V2: H output heads of D, 2H query heads (+ H λ logits per q row), caches D wide.
  const uint32_t D = cs.D, DV = v2 ? D : 2 * D, T = cs.T, H = cs.H, Hkv = cs.Hkv;
  r.S = cs.decode ? 1 : T;
  r.pos0 = cs.decode ? T - 1 : 0;
  const uint64_t es = storage_bytes(fp16_);
  const uint32_t q_stride = v2 ? 2 * H * D + H : H * DV, o_width = H * DV;
  r.bytes = (uint64_t(r.S) * (q_stride + o_width) + uint64_t(T) * Hkv * DV * 2) * es;
  double pairs = 0;
  for (uint32_t i = 0; i < r.S; ++i) pairs += double(r.pos0) + i + 1;
  r.flops = pairs * H * (v2 ? 8.0 : 12.0) * D;

  const int depth = 5;
  const float lambda_init = float(0.8 - 0.6 * std::exp(-0.3 * depth));
  AttnCall call;  // V1: q_stride and o_width are H * DV
  call.S = r.S;
  call.pos0 = r.pos0;
  call.H = v2 ? 2 * H : H;
  call.Hkv = Hkv;
  call.capacity = T;
  call.q_stride = q_stride;
  call.o_stride = o_width;
  if (!v2) {
    call.lambda = 0.55f;
    call.gain = 1.0f - lambda_init;
  }

  sink_.stage(strf("%s %s: preparing inputs", tag.c_str(), cs.name().c_str()));
  AttnBench::KernelSet* ksp = nullptr;
  try {
    ksp = &kernels(D, H / Hkv, v2);
  } catch (const Error& e) {
    if (e.status() != Status::unsupported && e.status() != Status::invalid_argument) throw;
    r.skipped = e.what();
    r.wall_s = seconds_since(t0);
    return r;
  }
  KernelSet& ks = *ksp;
  Rng rng(1000003ull * T + 7919ull * D + 31ull * H + Hkv + (cs.decode ? 17 : 0) + (v2 ? 101 : 0));
  const HostTensor q = make_tensor(size_t(r.S) * q_stride, fp16_, rng);  // V2: the λ logits are normal too
  const HostTensor kc = make_tensor(size_t(Hkv) * T * DV, fp16_, rng);
  const HostTensor vc = make_tensor(size_t(Hkv) * T * DV, fp16_, rng);
  const HostTensor subln = make_tensor(DV, fp16_, rng, 0.7f, 1.3f);

  // Output width of each implementation (plain 2H: every query head).
  uint64_t out_bytes[kImpls];
  for (int i = 0; i < kImpls; ++i) out_bytes[i] = uint64_t(r.S) * (i == 4 ? 2 * o_width : o_width) * es;
  auto buffer = [&](uint64_t bytes, const char* what) {
    return Buffer(dev_, std::max<uint64_t>(bytes, 16), MemoryDomain::device, what);
  };
  std::vector<Buffer> bufs;
  bufs.reserve(24);
  auto make = [&](uint64_t bytes, const char* what) -> BufferRange {
    bufs.push_back(buffer(bytes, what));
    return bufs.back().range(0, std::max<uint64_t>(bytes, 16));
  };
  // Split-K scratch of `sp` splits for call c (the arrival counters zeroed, as the kernel requires); none for sp = 0.
  auto split_scratch = [&](const AttnCall& c, uint32_t sp, AttnSoftmax sm) -> AttnSplitScratch {
    if (!sp) return {};
    AttnSplitScratch s{make(DiffAttnKernel::part_bytes(c, D, sp, sm), "bench part"),
                       make(DiffAttnKernel::stat_bytes(c, sp, sm), "bench stat"),
                       make(DiffAttnKernel::sync_bytes(c), "bench arrivals")};
    const std::vector<uint8_t> zero(s.sync.size, 0);
    bufs.back().upload(0, zero.data(), zero.size());
    return s;
  };
  try {
    const BufferRange bq = make(q.bytes.size(), "bench q"), bk = make(kc.bytes.size(), "bench k"),
                      bv = make(vc.bytes.size(), "bench v"), bw = make(subln.bytes.size(), "bench subln");
    bufs[0].upload(0, q.bytes.data(), q.bytes.size());
    bufs[1].upload(0, kc.bytes.data(), kc.bytes.size());
    bufs[2].upload(0, vc.bytes.data(), vc.bytes.size());
    bufs[3].upload(0, subln.bytes.data(), subln.bytes.size());
    BufferRange out[kImpls];
    size_t out_idx[kImpls];
    for (int i = 0; i < kImpls; ++i) {
      out_idx[i] = bufs.size();
      out[i] = make(impl_applies(cs, i) ? out_bytes[i] : 16, "bench out");
    }

    std::unique_ptr<Program> progs[kImpls];
    for (int i = 0; i < kImpls; ++i)
      progs[i] = std::make_unique<Program>(dev_, std::string("bench ") + kImplNames[i], cfg_.timestamps);
    const AttnSoftmax fsm = v2 ? AttnSoftmax::v2 : AttnSoftmax::differential;
    // One attention op (fused, or a plain pass) into program p: split-K decode, or prefill (split on loop-limited
    // devices).
    auto record_attn = [&](const DiffAttnKernel& k, Program& p, const AttnCall& c, BufferRange o, AttnSoftmax sm,
                           uint32_t* splits, uint32_t* split_len) {
      uint32_t len = 0, sp = 0;
      if (cs.decode) {
        sp = k.decode_splits(c, &len);
        k.record_decode(p, bq, bk, bv, bw, o, split_scratch(c, sp, sm), c, sp, len);
      } else {
        sp = k.prefill_splits(c, &len);
        k.record_prefill(p, bq, bk, bv, bw, o, c, split_scratch(c, sp, sm));
      }
      *splits = sp, *split_len = len;
    };
    uint32_t fused_splits = 0, fused_len = 0;
    record_attn(*ks.fused, *progs[0], call, out[0], fsm, &fused_splits, &fused_len);
    if (cs.decode) r.splits = fused_splits, r.split_len = fused_len;  // the report shows decode splits only
    r.impl[0].bytes_touched = r.bytes;
    // two-pass
    try {
      if (v2) {
        const uint64_t ib = TwoPassV2Attn::inter_bytes(call, D, fp16_);
        const BufferRange oe = make(ib, "bench oe"), oo = make(ib, "bench oo");
        const AttnCall pc = TwoPassV2Attn::pass_call(call, D, 0);
        const DiffAttnKernel& pk = ks.two_v2->plain();
        uint32_t len = 0;
        const uint32_t sp = cs.decode ? pk.decode_splits(pc, &len) : pk.prefill_splits(pc, &len);
        const AttnSplitScratch s1 = split_scratch(pc, sp, AttnSoftmax::v2_plain),
                               s2 = split_scratch(pc, sp, AttnSoftmax::v2_plain);
        if (cs.decode)
          ks.two_v2->record_decode(*progs[1], bq, bk, bv, out[1], oe, oo, s1, s2, call, sp, len);
        else
          ks.two_v2->record_prefill(*progs[1], bq, bk, bv, out[1], oe, oo, call, s1, s2);
        // Q twice, K + V twice, two intermediates written and read again, the output
        r.impl[1].bytes_touched = r.bytes + uint64_t(T) * Hkv * DV * 2 * es + 4 * ib;
      } else {
        const uint64_t ib = TwoPassDiffAttn::inter_bytes(call, D, fp16_);
        const BufferRange o1 = make(ib, "bench o1"), o2 = make(ib, "bench o2");
        if (cs.decode) {
          uint32_t len = 0;
          const uint32_t sp = ks.two->flash().decode_splits(call, &len);
          ks.two->record_decode(*progs[1], bq, bk, bv, bw, out[1], o1, o2, split_scratch(call, sp, AttnSoftmax::single),
                                split_scratch(call, sp, AttnSoftmax::single), call, sp, len);
        } else {
          uint32_t len = 0;
          const uint32_t sp = ks.two->flash().prefill_splits(call, &len);  // nonzero on loop-limited devices
          ks.two->record_prefill(*progs[1], bq, bk, bv, bw, out[1], o1, o2, call,
                                 split_scratch(call, sp, AttnSoftmax::single),
                                 split_scratch(call, sp, AttnSoftmax::single));
        }
        // K1 + V + K2 + V + Q + 2 intermediates written and read again + output
        r.impl[1].bytes_touched = r.bytes + uint64_t(T) * Hkv * DV * es + 4 * ib;
      }
      r.impl[1].ran = true;
    } catch (const Error& e) {
      r.impl[1].skipped = e.what();
    }
    // naive
    if (cfg_.no_naive) {
      r.impl[2].skipped = "--no-naive";
    } else if (v2) {
      const std::string why = NaiveV2Attn::unsupported_reason(dev_.caps(), call, naive_budget_);
      if (!why.empty()) {
        r.impl[2].skipped = why;
      } else {
        try {
          const uint64_t sb = NaiveV2Attn::score_bytes(call);
          const BufferRange s1 = make(sb, "bench scores even"), s2 = make(sb, "bench scores odd");
          ks.naive_v2->record(*progs[2], bq, bk, bv, out[2], s1, s2, call);
          // scores written, read + written by the softmax, read by PV (x2), plus Q, K, V, O
          r.impl[2].bytes_touched = r.bytes + 2 * 4 * sb;
          r.impl[2].ran = true;
        } catch (const Error& e) {
          r.impl[2].skipped = e.what();
        }
      }
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
          r.impl[2].bytes_touched = r.bytes + 2 * 4 * sb + 3 * out_bytes[2];
          r.impl[2].ran = true;
        } catch (const Error& e) {
          r.impl[2].skipped = e.what();
        }
      }
    }
    // plain attention rows (DIFF V2): the H even query heads, and all 2H, on the same cache
    if (v2) {
      for (int i = 3; i < kImpls; ++i) {
        try {
          const bool all = i == 4;
          AttnCall pc = all ? call : TwoPassV2Attn::pass_call(call, D, 0);
          if (all) pc.o_stride = 2 * o_width, pc.half = 2;
          const DiffAttnKernel& pk = all ? *ks.plain_all : ks.two_v2->plain();
          uint32_t sp = 0, len = 0;
          record_attn(pk, *progs[i], pc, out[i], AttnSoftmax::v2_plain, &sp, &len);
          r.impl[i].bytes_touched = uint64_t(r.S) * q_stride * es + uint64_t(T) * Hkv * DV * 2 * es + out_bytes[i];
          r.impl[i].ran = true;
        } catch (const Error& e) {
          r.impl[i].skipped = e.what();
        }
      }
    }
    r.impl[0].ran = true;
    for (int i = 0; i < kImpls; ++i)
      if (r.impl[i].ran) r.impl[i].dispatches = progs[i]->op_count();

    // ---- correctness, before anything is timed: one run each on poisoned outputs
    std::vector<float> got[kImpls];
    for (int i = 0; i < kImpls; ++i) {
      if (!r.impl[i].ran) continue;
      sink_.check_cancel("between output checks");
      sink_.step(strf("%s %s: checking %s", tag.c_str(), cs.name().c_str(), kImplNames[i]));
      bufs[out_idx[i]].fill(0, out_bytes[i], 0x7fc07fc0u);
      progs[i]->run();
      std::vector<uint8_t> raw(out_bytes[i]);
      bufs[out_idx[i]].download(0, raw.data(), out_bytes[i]);
      got[i] = unpack(raw, fp16_);
    }
    // CPU reference (double) on sampled rows, every head.
    std::vector<uint32_t> rows = {0};
    if (r.S > 1) rows = {0, 1, r.S / 3, (2 * r.S) / 3, r.S - 1};
    std::sort(rows.begin(), rows.end());
    rows.erase(std::unique(rows.begin(), rows.end()), rows.end());
    r.cpu_rows = rows;
    std::vector<double> ref, ref_even, ref_all;
    auto sample = [&](const std::vector<float>& all, uint32_t width) {
      std::vector<float> s;
      for (uint32_t i : rows)
        for (uint32_t c = 0; c < width; ++c) s.push_back(all[size_t(i) * width + c]);
      return s;
    };
    sink_.step(strf("%s %s: CPU reference on %zu rows", tag.c_str(), cs.name().c_str(), rows.size()));
    for (uint32_t i : rows) {
      if (v2) {
        std::vector<double> plain;
        const auto o = v2_cpu_row(q, kc, vc, call, D, i, plain);
        ref.insert(ref.end(), o.begin(), o.end());
        ref_all.insert(ref_all.end(), plain.begin(), plain.end());
        for (uint32_t h = 0; h < H; ++h)
          ref_even.insert(ref_even.end(), plain.begin() + 2 * h * D, plain.begin() + (2 * h + 1) * D);
        continue;
      }
      for (uint32_t h = 0; h < H; ++h) {
        const auto o = cpu_row(q, kc, vc, subln, call, D, i, h);
        ref.insert(ref.end(), o.begin(), o.end());
      }
    }
    r.impl[0].vs_cpu = compare("cpu double reference (sampled rows)", sample(got[0], o_width), ref, fp16_, 1);
    r.impl[0].checked = r.impl[0].vs_cpu.ok;
    const std::vector<double> fused_d(got[0].begin(), got[0].end());
    for (int i = 1; i < kImpls; ++i) {
      if (!r.impl[i].ran) continue;
      if (i >= 3) {  // plain rows: their own reference (no fused output computes the same thing)
        r.impl[i].vs_cpu =
            compare("cpu double reference (sampled rows)", sample(got[i], i == 4 ? 2 * o_width : o_width),
                    i == 4 ? ref_all : ref_even, fp16_, 1);
        r.impl[i].checked = r.impl[i].vs_cpu.ok;
        continue;
      }
      r.impl[i].vs_fused = compare("fused (all outputs)", got[i], fused_d, fp16_, 2);
      r.impl[i].vs_cpu = compare("cpu double reference (sampled rows)", sample(got[i], o_width), ref, fp16_, 1);
      // Against fused on every output when fused itself passed; else against the CPU rows alone.
      r.impl[i].checked = r.impl[i].vs_cpu.ok && (!r.impl[0].checked || r.impl[i].vs_fused.ok);
    }
    for (int i = 0; i < kImpls; ++i)
      if (r.impl[i].ran && !r.impl[i].checked) {
        size_t bad = 0, first = 0;
        for (size_t e = 0; e < got[i].size(); ++e)
          if (!std::isfinite(got[i][e]) && bad++ == 0) first = e;
        r.impl[i].unwritten = bad;
        std::string msg = strf("%s: %s output check FAILED (vs cpu rows: max abs %.3g, nmse %.3g", cs.name().c_str(),
                               kImplNames[i], r.impl[i].vs_cpu.max_abs, r.impl[i].vs_cpu.nmse);
        if (i > 0 && i < 3 && r.impl[0].checked) msg += strf("; vs fused: max abs %.3g", r.impl[i].vs_fused.max_abs);
        if (bad)
          msg += strf("; %zu of %zu outputs still hold the NaN poison (never written), the first in row %zu", bad,
                      got[i].size(), first / (got[i].size() / r.S));
        msg += ") - not timed";
        sink_.warn("diffvk bench: " + msg);
        r.failures.push_back(msg);
      }

    // ---- timing: warm-up, then runs interleaved across implementations (fair under drifting noise)
    std::vector<double> us[kImpls];
    std::vector<std::vector<double>> ops[kImpls];
    // The output-check run above was the first warm-up run; `extra` more follow.
    const int extra = std::max(0, cfg_.warmup - 1), total = extra + cfg_.runs;
    for (int it = 0; it < total; ++it) {
      sink_.check_cancel("between timed repetitions");
      for (int i = 0; i < kImpls; ++i) {
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
    for (int i = 0; i < kImpls; ++i) {
      if (!r.impl[i].ran || !r.impl[i].checked) continue;
      r.impl[i].us = stats_of(us[i]);
      const auto tm = progs[i]->timings();
      for (size_t k = 0; k < ops[i].size() && k < tm.size(); ++k)
        r.impl[i].op_median_us.push_back({tm[k].label, stats_of(ops[i][k]).median});
    }
  } catch (const Error& e) {
    if (e.status() != Status::unsupported && e.status() != Status::out_of_memory &&
        e.status() != Status::invalid_argument && e.status() != Status::context_overflow)
      throw;
    r.skipped = e.what();
    for (auto& im : r.impl) im.ran = false;
  }
  r.wall_s = seconds_since(t0);
  return r;
}

}  // namespace diffvk::bench
