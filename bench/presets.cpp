#include "bench/presets.hpp"
#include "bench/shapes.hpp"

#include <algorithm>
#include <cmath>
#include <tuple>

#include "bench/op_cases.hpp"
#include "diffvk/error.hpp"
#include "diffvk/generate.hpp"

namespace diffvk::bench {

namespace {
// phone: short, so that the device stays near its resting temperature; the sweep starts low so that the
// first case of each series (always run; it calibrates the budget) is cheap.
constexpr double kPhoneBudgetS = 20, kPhoneCooldownS = 2;
constexpr uint64_t kPhoneCopyBytes = 64ull << 20, kQuickCopyBytes = 16ull << 20, kDefaultCopyBytes = 256ull << 20;
constexpr uint32_t kPhoneMaxT = 2048;
const std::vector<uint32_t> kPhoneTs = {128, 256, 512, 1024, 2048};

void sort_unique(std::vector<uint32_t>& v) {
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
}
}  // namespace

void validate_options(const Options& o) {
  auto bad = [](const std::string& m) { throw Error(Status::invalid_argument, "bench: " + m); };
  if (o.preset != "default" && o.preset != "phone") bad("unknown preset '" + o.preset + "' (default or phone)");
  if (o.phase != "both" && o.phase != "prefill" && o.phase != "decode")
    bad("unknown phase '" + o.phase + "' (prefill, decode or both)");
  if (o.variant != "both" && o.variant != "v1" && o.variant != "v2")
    bad("unknown variant '" + o.variant + "' (v1, v2 or both)");
  if (!std::isfinite(o.budget_seconds) || o.budget_seconds < 0) bad("budget_seconds must be finite and >= 0");
  if (!std::isfinite(o.cooldown_seconds) || o.cooldown_seconds > 600)
    bad("cooldown_seconds must be finite and <= 600 (< 0 = the preset's)");
  if (o.copy_bytes && (o.copy_bytes < (1ull << 20) || o.copy_bytes > (64ull << 30)))
    bad("copy_bytes must be 0 (the preset's) or between 1 MiB and 64 GiB");
  if ((o.ops || !o.op.empty()) && (!o.model_dir.empty() || !o.shape.empty()))
    bad("ops and a model (model_dir or shape) are two different benchmarks: give one");
  if (!o.model_dir.empty() && !o.shape.empty()) bad("model_dir and shape are two models: give one");
  if (!o.shape.empty()) published_shape(o.shape);  // unknown or not runnable yet: refused before any work
  for (uint32_t c : o.contexts)
    if (c == 0 || c > (1u << 20)) bad("contexts must be in 1..1048576 tokens");
  if (o.context_fill != "prefill" && o.context_fill != "zeros")
    bad("context_fill must be \"prefill\" or \"zeros\" (got \"" + o.context_fill + "\")");
  if (!o.op.empty() && std::find(table_ops().begin(), table_ops().end(), o.op) == table_ops().end()) {
    std::string known;
    for (const auto& op : table_ops()) known += (known.empty() ? "" : ", ") + op;
    bad("no case table for op '" + o.op + "' (ops with a table: " + known + ")");
  }
  if (o.runs < 0 || o.runs > 100000) bad("runs must be in 0..100000 (0 = the preset's)");
  if (o.warmup > 100000) bad("warmup must be <= 100000 (< 0 = the preset's)");
  for (const auto* v : {&o.t, &o.t_prefill, &o.t_decode})
    for (uint32_t t : *v)
      if (t < 1 || t > (1u << 20)) bad("T must be in 1..1048576");
  for (uint32_t d : o.d)
    if (d < 2 || d > 256 || d % 2) bad("D must be even and in 2..256");
  for (const auto* v : {&o.heads, &o.kv_heads})
    for (uint32_t h : *v)
      if (h < 1 || h > 1024) bad("heads and kv_heads must be in 1..1024");
  if (o.prompt_tokens < 1 || o.decode_tokens < 1) bad("prompt_tokens and decode_tokens must be positive");
  if (!o.speculate.empty() && o.speculate != "lookup" &&
      (o.speculate.rfind("draft:", 0) != 0 || o.speculate.size() == 6))
    bad("speculate must be \"\", \"lookup\" or \"draft:DIR\"");
  if (!o.speculate.empty() && o.model_dir.empty() && o.shape.empty()) bad("speculate needs a model or a shape");
  if (!o.speculate.empty() && (o.prompt_tokens < 2 || o.decode_tokens < 2))
    bad("speculate needs prompt_tokens and decode_tokens of at least 2");
  if (o.draft_k < 1 || o.draft_k > kMaxDraftTokens) bad("draft_k must be in 1.." + std::to_string(kMaxDraftTokens));
  if (!o.speculate_prompt.empty() && (o.speculate.empty() || o.model_dir.empty()))
    bad("speculate_prompt needs speculate and a model directory (its tokenizer encodes the text)");
}

uint64_t copy_buffer_bytes(const Options& a, const DeviceCaps& caps, uint64_t host_cache_bytes, std::string& rule) {
  uint64_t copy = 0;
  if (a.copy_bytes) {
    copy = a.copy_bytes;
    rule = "given (--copy-mib / Options::copy_bytes)";
  } else if (a.quick) {
    copy = kQuickCopyBytes;
    rule = "quick: 16 MiB (a smoke test; may stay in a cache, so not a bandwidth ceiling)";
  } else if (a.preset == "phone") {
    copy = kPhoneCopyBytes;
    rule = "preset phone: 64 MiB";
  } else if (caps.kind == DeviceKind::cpu && host_cache_bytes) {
    copy = (4 * host_cache_bytes + (1ull << 20) - 1) & ~((1ull << 20) - 1);
    rule = "4x the largest CPU cache (" + mib(host_cache_bytes) + ", sysfs): the device is the CPU";
  } else {
    copy = kDefaultCopyBytes;
    rule = caps.kind == DeviceKind::cpu ? "256 MiB (CPU device, but the CPU's cache sizes are not readable)"
                                        : "256 MiB (the device's last-level cache size is not known)";
  }
  std::string capped;
  for (const auto& h : caps.heaps)
    if (h.device_local && h.size && h.size / 8 < copy) {
      copy = h.size / 8;
      capped = "1/8 of a device-local heap";
    }
  if (caps.max_storage_buffer_range < copy) {
    copy = caps.max_storage_buffer_range;
    capped = "maxStorageBufferRange";
  }
  if (caps.max_memory_allocation_size && caps.max_memory_allocation_size < copy) {
    copy = caps.max_memory_allocation_size;
    capped = "maxMemoryAllocationSize";
  }
  if (!capped.empty()) rule += "; capped by " + capped;
  copy &= ~uint64_t(0xffff);
  if (copy == 0)
    throw Error(Status::unsupported, "bench: the device's limits leave no room for the copy ceiling's buffers");
  return copy;
}

Plan make_plan(const Options& a, const DeviceCaps& caps, bool fp32_fallback, uint64_t host_cache_bytes) {
  validate_options(a);
  const bool cpu = caps.kind == DeviceKind::cpu, phone = a.preset == "phone";
  Plan plan;
  plan.preset = a.preset;
  plan.reduced = cpu && !a.quick;
  plan.runs = a.runs ? a.runs : (a.quick ? 2 : phone ? (cpu ? 2 : 5) : cpu ? 3 : 20);
  plan.warmup = a.warmup >= 0 ? a.warmup : (a.quick || cpu ? 1 : phone ? 2 : 3);
  plan.Ds = a.d;
  plan.Hs = a.heads;
  plan.Hkvs = a.kv_heads;
  std::vector<uint32_t> Ts = a.t;
  if (plan.Ds.empty()) plan.Ds = a.quick || cpu || phone ? std::vector<uint32_t>{64} : std::vector<uint32_t>{64, 128};
  if (plan.Hs.empty()) plan.Hs = {a.quick || (phone && cpu) ? 2u : cpu ? 4u : phone ? 8u : 32u};
  if (plan.Hkvs.empty()) plan.Hkvs = {a.quick || cpu ? 1u : phone ? 2u : 8u};
  const bool default_t = Ts.empty() && a.t_prefill.empty() && a.t_decode.empty();
  if (Ts.empty()) {
    Ts = a.quick ? std::vector<uint32_t>{64, 128}
         : phone ? kPhoneTs
                 : std::vector<uint32_t>{512, 1024, 2048, 4096, 8192};
    if (phone) plan.t_cap = kPhoneMaxT;
  }
  plan.Ts_prefill = a.t_prefill.empty() ? Ts : a.t_prefill;
  plan.Ts_decode = a.t_decode.empty() ? Ts : a.t_decode;
  sort_unique(plan.Ts_decode);
  sort_unique(plan.Ts_prefill);
  if (default_t && cpu && !a.quick && !phone)
    plan.Ts_prefill.insert(plan.Ts_prefill.begin(), 256);  // prefill is T^2: start lower
  plan.budgeted = default_t && !a.quick;
  plan.budget_s = a.budget_seconds > 0 ? a.budget_seconds : phone ? kPhoneBudgetS : cpu ? 40.0 : 300.0;
  plan.cooldown_s = a.cooldown_seconds >= 0 ? a.cooldown_seconds : phone ? kPhoneCooldownS : 0.0;
  plan.thermal = phone;

  // ceilings
  plan.copy_bytes = copy_buffer_bytes(a, caps, host_cache_bytes, plan.copy_rule);
  plan.copy_runs = a.quick ? 2 : cpu ? 3 : std::max(3, std::min(plan.runs, 10));
  plan.copy_warmup = a.quick || cpu ? 1 : 2;
  plan.fma_min_us = a.quick ? 2000 : phone ? 20000 : 50000;
  plan.fma_max_us = 1.5e6;

  std::vector<bool> phases;
  if (a.phase != "prefill") phases.push_back(true);  // decode first: cheap, and fills the budget estimate
  if (a.phase != "decode") phases.push_back(false);
  std::vector<bool> variants;  // DIFF V2 after V1
  if (a.variant != "v2") variants.push_back(false);
  if (a.variant != "v1") variants.push_back(true);
  for (bool v2 : variants)
    for (bool decode : phases)
      for (uint32_t D : plan.Ds)
        for (uint32_t H : plan.Hs)
          for (uint32_t Hkv : plan.Hkvs) {
            if (H % Hkv) {
              if (!v2) plan.notes.push_back(strf("H=%u, Hkv=%u skipped: H must be a multiple of Hkv", H, Hkv));
              continue;
            }
            CaseSpec cs;
            std::tie(cs.v2, cs.decode, cs.D, cs.H, cs.Hkv) = std::tie(v2, decode, D, H, Hkv);
            for (uint32_t T : decode ? plan.Ts_decode : plan.Ts_prefill) {
              cs.T = T;
              plan.cases.push_back(cs);
            }
          }
  if (plan.cases.empty() && a.model_dir.empty() && a.shape.empty())
    throw Error(Status::invalid_argument, "bench: the grid is empty");

  if (phone)
    plan.notes.push_back(
        strf("preset phone: %.3g s budget, %s copy buffer, T <= %u for the default sweep, %.3g s cool-down before "
             "each case, thermal zones read before and after each case%s",
             plan.budget_s, mib(plan.copy_bytes).c_str(), kPhoneMaxT, plan.cooldown_s,
             cpu ? "; CPU device: H/Hkv 2/1, 2 runs for the values not given" : ""));
  if (plan.reduced && !phone) {
    std::vector<std::string> d;
    if (a.d.empty()) d.push_back("D=64");
    if (a.heads.empty() && a.kv_heads.empty()) d.push_back(strf("H/Hkv=%u/%u", plan.Hs[0], plan.Hkvs[0]));
    if (a.runs == 0) d.push_back(strf("%d runs", plan.runs));
    if (a.warmup < 0) d.push_back(strf("%d warm-up", plan.warmup));
    if (default_t && !phone)
      d.push_back(strf("prefill from T=256, T list trimmed to a %.0f s time budget by calibration", plan.budget_s));
    std::string list;
    for (const auto& x : d) list += (list.empty() ? "" : ", ") + x;
    if (!list.empty())
      plan.notes.push_back(
          strf("CPU device (%s): reduced defaults for the flags not given: %s", caps.name.c_str(), list.c_str()));
  }
  if (caps.has_quirk("loop_iteration_limit"))
    plan.notes.push_back(
        "quirk loop_iteration_limit: this driver ends every loop of an invocation after 65535 iterations in total, "
        "so both attention implementations cap the keys one invocation streams: long prefills run through their "
        "split-K kernels here (as decode always does)");
  if (fp32_fallback)
    plan.notes.push_back("fp32 FALLBACK active: the device has no usable fp16 storage path; every tensor is float32");
  if (!caps.timestamps)
    plan.notes.push_back("the device has no compute timestamps: host wall time around submit+wait is reported instead");
  return plan;
}

}  // namespace diffvk::bench
