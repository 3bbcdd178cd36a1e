// diffvk_bench: one attention case (prefill S = T, or decode S = 1 against T cached keys) run by three
// implementations on the same inputs — fused (DiffAttnKernel), two-pass (single-softmax flash attention
// for Q1K1 and Q2K2, then combine_norm), naive (materialised score matrices).
// DIFF V2 cases (CaseSpec::v2, docs/maths.md "DIFF V2": H output heads, 2H query heads of D): fused
// (AttnSoftmax::v2), two-pass (plain attention over the even query heads, then the odd ones, then a combine
// with λ), no naive yet, and two plain-attention rows on the same KV cache: the H even query heads
// ("plain H") and all 2H ("plain 2H"), so the second softmax's cost shows. Every output is checked
// (against each other and a double-precision CPU loop on sampled rows) before anything is timed; then
// warm-up and timed runs, interleaved across implementations.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "bench/ceilings.hpp"
#include "bench/check.hpp"
#include "bench/timing.hpp"

namespace diffvk::bench {

struct CaseSpec {
  bool decode = false;
  uint32_t D = 64, T = 512, H = 8, Hkv = 2;
  bool v2 = false;  // DIFF V2 (H output heads)
  std::string series() const {
    return strf("%s%s D=%u H=%u/%u", v2 ? "v2 " : "", decode ? "decode" : "prefill", D, H, Hkv);
  }
  std::string name() const {
    return strf("%s%s D=%u T=%u H=%u/%u", v2 ? "v2 " : "", decode ? "decode" : "prefill", D, T, H, Hkv);
  }
};

constexpr int kImpls = 5;
extern const char* const kImplNames[kImpls];  // "fused", "two-pass", "naive", "plain H", "plain 2H"
// Whether implementation i belongs to this variant's case (plain H / plain 2H: DIFF V2 only).
inline bool impl_applies(const CaseSpec& s, int i) { return i < 3 || s.v2; }

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
  size_t unwritten = 0;  // outputs still holding the NaN poison after the check run
};

struct CaseResult {
  CaseSpec spec;
  uint32_t S = 0, pos0 = 0;
  uint64_t bytes = 0;  // Q + K1 + K2 + V + output (the bytes that must move)
  double flops = 0;    // useful flops (causal): 12·D per visible (query, key) pair and head (V2: 8·D per output head)
  std::string skipped;
  ImplResult impl[kImpls];
  std::vector<uint32_t> cpu_rows;
  double wall_s = 0;
  uint32_t splits = 0, split_len = 0;
  std::vector<std::string> failures;
  double cooldown_s = 0;  // pause before this case (phone preset)
  json thermal;           // {"before": ..., "after": ...} (phone preset); null otherwise
  bool outputs_ok() const {
    if (!impl[0].ran) return false;
    for (const auto& r : impl)
      if (r.ran && !r.checked) return false;
    return true;
  }
};

bool timed(const CaseResult& r, int impl);   // ran, passed its check, has a median
double gbps(const CaseResult& r, int impl);  // bytes that must move / median time
double gflops(const CaseResult& r, int impl);
double speedup(const CaseResult& r, int impl);  // impl's median / fused's median (0 when either is missing)

struct CaseConfig {
  int warmup = 1, runs = 3;
  bool timestamps = false;
  bool no_naive = false;
};

class AttnBench {
 public:
  AttnBench(Device& dev, const CaseConfig& config, const Sink& sink);
  ~AttnBench();
  uint64_t naive_budget() const { return naive_budget_; }
  // Unsupported shapes and out-of-memory come back as a skipped case; cancellation throws.
  CaseResult run(const CaseSpec& cs, const std::string& tag);

 private:
  struct KernelSet;
  KernelSet& kernels(uint32_t D, uint32_t n_rep, bool v2);

  Device& dev_;
  bool fp16_;
  CaseConfig cfg_;
  const Sink& sink_;
  uint64_t naive_budget_ = 0;
  std::map<std::tuple<uint32_t, uint32_t, bool>, std::unique_ptr<KernelSet>> kernels_;
};

}  // namespace diffvk::bench
