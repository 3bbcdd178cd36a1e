// The one tuning path (tuning.hpp): read the environment once per device, parse the overrides, resolve each key
// from the caps, then the quirks, then the overrides, and record why.
#include "vk/tuning.hpp"

#include <algorithm>
#include <cstdlib>
#include <map>
#include <sstream>
#include <thread>

#include "platform.hpp"
#include "vk/device_rules.hpp"
#include "vk/instance.hpp"

namespace diffvk {

namespace {
std::string trim(const std::string& s) {
  const size_t a = s.find_first_not_of(" \t"), b = s.find_last_not_of(" \t");
  return a == std::string::npos ? std::string() : s.substr(a, b - a + 1);
}

// pipeline_threads: the most an override may ask for, and the automatic choice's cap. A model's first programs compile
// 10-30 pipelines (the 134M bench model's first prefill and decode: 14), so past 8 threads most would have one or two
// pipelines each while each holds a driver compiler's working memory.
constexpr unsigned long kMaxPipelineThreads = 64;
constexpr unsigned kAutoPipelineThreadsCap = 8;
// pipeline_batch: the most pipelines an override may put in one vkCreateComputePipelines call.
constexpr unsigned long kMaxPipelineBatch = 64;

// subgroup_off's kernels (the kernels with subgroup variants) and the case-table ops each records: the self-test's
// rows name the latter.
struct SubgroupKernel {
  const char* kernel;
  std::vector<const char*> ops;
};
const std::vector<SubgroupKernel>& subgroup_kernels() {
  static const std::vector<SubgroupKernel> k = {{"linear", {"linear", "linear_row", "linear_row_rope"}},
                                                {"attention", {"diff_attn", "diff_v2_attn"}},
                                                {"head_rmsnorm", {"head_rmsnorm"}},
                                                {"layer_norm", {"layer_norm"}},
                                                {"attn_probs", {"attn_probs"}}};
  return k;
}

// subgroup_off's value KERNEL[+KERNEL...] as its names (an empty name where '+' has nothing on one side).
std::vector<std::string> plus_items(const std::string& value) {
  std::vector<std::string> items;
  for (size_t b = 0; b <= value.size();) {
    const size_t plus = std::min(value.find('+', b), value.size());
    items.push_back(value.substr(b, plus - b));
    b = plus + 1;
  }
  return items;
}

// The keys and their values (quirk, rule, subgroup_off, row_lanes, pipeline_threads and pipeline_batch are checked by
// code).
struct KeySpec {
  const char* key;
  std::vector<const char*> values;  // empty: checked below
};
const std::vector<KeySpec>& key_specs() {
  static const std::vector<KeySpec> specs = {
      {"coopmat", {"auto", "on", "off"}},
      {"int_dot", {"auto", "on", "off"}},
      {"fp16", {"auto", "off"}},
      {"subgroup", {"auto", "off"}},
      {"subgroup_off", {}},
      {"kv_staging", {"auto", "on", "off"}},
      {"attn_core", {"auto", "keys", "blocks", "staged", "coopmat"}},
      {"row_lanes", {}},
      {"q4_in_place", {"auto", "on", "off"}},
      {"linear_reg_share", {"auto", "shuffle", "broadcast"}},
      {"row_prologue", {"auto", "fused", "split"}},
      {"attn_decode", {"auto", "split", "prefill"}},
      {"pipeline_threads", {}},
      {"pipeline_batch", {}},
      {"quirk", {}},
      {"rule", {}},
  };
  return specs;
}

[[noreturn]] void bad(const std::string& source, const std::string& key, const std::string& what) {
  throw Error(Status::invalid_argument, source + ": tuning key '" + key + "' " + what);
}

void check_value(const std::string& source, const std::string& key, const std::string& value) {
  const auto& specs = key_specs();
  const auto it = std::find_if(specs.begin(), specs.end(), [&](const KeySpec& s) { return key == s.key; });
  if (it == specs.end()) {
    std::string keys;
    for (const KeySpec& s : specs) keys += std::string(keys.empty() ? "" : ", ") + s.key;
    bad(source, key, "is unknown (keys: " + keys + "; see runtime/vk/README.md)");
  }
  if (!it->values.empty()) {
    std::string list;
    for (const char* v : it->values) {
      if (value == v) return;
      list += std::string(list.empty() ? "" : ", ") + v;
    }
    bad(source, key, "must be " + list + ", not '" + value + "'");
  }
  if (key == "row_lanes") {
    if (value == "auto") return;
    const bool digits = !value.empty() && value.size() <= 4 &&
                        std::all_of(value.begin(), value.end(), [](char c) { return c >= '0' && c <= '9'; });
    const unsigned long v = digits ? std::strtoul(value.c_str(), nullptr, 10) : 1u << 20;
    if (v > 1024 || (v & (v - 1)) != 0)
      bad(source, key, "must be auto, 0 or a power of two up to 1024, not '" + value + "'");
    return;
  }
  if (key == "pipeline_threads") {  // auto, 0 (= auto) or 1 ... kMaxPipelineThreads
    if (value == "auto") return;
    const bool digits = !value.empty() && value.size() <= 3 &&
                        std::all_of(value.begin(), value.end(), [](char c) { return c >= '0' && c <= '9'; });
    if (!digits || std::strtoul(value.c_str(), nullptr, 10) > kMaxPipelineThreads)
      bad(source, key,
          "must be auto, 0 (auto) or a thread count up to " + std::to_string(kMaxPipelineThreads) + ", not '" + value +
              "'");
    return;
  }
  if (key == "pipeline_batch") {  // auto, per_thread or 1 ... kMaxPipelineBatch
    if (value == "auto" || value == "per_thread") return;
    const bool digits = !value.empty() && value.size() <= 3 &&
                        std::all_of(value.begin(), value.end(), [](char c) { return c >= '0' && c <= '9'; });
    const unsigned long v = digits ? std::strtoul(value.c_str(), nullptr, 10) : 0;
    if (v < 1 || v > kMaxPipelineBatch)
      bad(source, key,
          "must be auto, per_thread or a count of pipelines per call from 1 to " + std::to_string(kMaxPipelineBatch) +
              ", not '" + value + "'");
    return;
  }
  if (key == "subgroup_off") {  // kernels with subgroup variants, or case-table ops of them, joined by '+'
    const std::vector<std::string> names = plus_items(value);
    const auto unknown =
        std::find_if(names.begin(), names.end(), [](const std::string& n) { return !subgroup_kernel_of(n); });
    if (unknown == names.end()) return;
    std::string known;
    for (const SubgroupKernel& k : subgroup_kernels()) {
      known += std::string(known.empty() ? "" : ", ") + k.kernel;
      for (const char* op : k.ops)
        if (std::string(op) != k.kernel) known += std::string(", ") + op;
    }
    bad(source, key,
        "names '" + (unknown->empty() ? value : *unknown) + "', not a kernel with subgroup variants (known: " + known +
            "; several joined by '+')");
  }
  if (key == "rule") {  // NAME (force the row) or -NAME (drop it): a name of the device rule table
    const std::string name = !value.empty() && value[0] == '-' ? value.substr(1) : value;
    if (find_device_rule(name)) return;
    std::string known;
    for (const DeviceRule& r : device_rules()) known += std::string(known.empty() ? "" : ", ") + r.name;
    bad(source, key, "names an unknown device rule '" + name + "' (write NAME or -NAME; known: " + known + ")");
  }
  // quirk: a name of the quirk table.
  const std::vector<const char*> names = quirk_names();
  if (std::find_if(names.begin(), names.end(), [&](const char* n) { return value == n; }) != names.end()) return;
  std::string known;
  for (const char* n : names) known += std::string(known.empty() ? "" : ", ") + n;
  bad(source, key, "names an unknown device quirk '" + value + "' (known: " + known + ")");
}

std::string no_coopmat_why(const DeviceCaps& c) {
  return c.coopmat_note.empty() ? std::string("no VK_KHR_cooperative_matrix") : c.coopmat_note;
}

[[noreturn]] void no_coopmat_shape(const DeviceCaps& c, const std::string& setting) {
  throw Error(Status::unsupported, setting + ", but device '" + c.name + "' has no usable cooperative-matrix shape (" +
                                       no_coopmat_why(c) + ")");
}

void info(const std::string& what) { platform::log(platform::LogLevel::info, what); }

std::string rule_why(const DeviceRule& r) { return std::string("deny rule ") + r.name + ": " + r.reason; }

// The test hooks of ContextOptions that are aliases of a tuning key.
constexpr const char* kNoFp16 = "ContextOptions::force_no_fp16";
constexpr const char* kNoSubgroup = "ContextOptions::force_no_subgroup_arithmetic";

void set_choice(Tuning& t, const std::string& key, const std::string& value, const std::string& why) {
  for (TuningChoice& c : t.choices)
    if (c.key == key) {
      c.value = value;
      c.why = why;
      return;
    }
  t.choices.push_back({key, value, why});
}

// A key of two values whose auto is the device class's: on_value on CPU drivers (cpu_why), off_value on GPUs
// (gpu_why); an override of either value wins. Returns whether the resolved value is on_value.
bool device_class_choice(Tuning& t, const TuningOverride* o, bool cpu, const char* key, const char* on_value,
                         const char* off_value, const char* cpu_why, const char* gpu_why) {
  if (o && o->value != "auto") {
    set_choice(t, key, o->value, "override " + o->setting());
    return o->value == on_value;
  }
  set_choice(t, key, cpu ? on_value : off_value,
             std::string(o ? "override " + o->setting() + ": " : "cap: ") + (cpu ? cpu_why : gpu_why));
  return cpu;
}
}  // namespace

DeviceEnvironment read_device_environment() {
  auto var = [](const char* name) {
    const char* v = std::getenv(name);
    return v ? std::string(v) : std::string();
  };
  DeviceEnvironment e;
  e.device = var("DIFFVK_DEVICE");
  e.validation = var("DIFFVK_VALIDATION");
  e.tuning = var("DIFFVK_TUNING");
  e.selftest = var("DIFFVK_SELFTEST");
  for (const auto& a : tuning_aliases())
    if (const std::string v = var(a.first); !v.empty()) e.aliases.emplace_back(a.first, v);
  for (const char* name : {"VK_DRIVER_FILES", "VK_ICD_FILENAMES", "VK_ADD_DRIVER_FILES"}) {
    std::stringstream ss(var(name));
    std::string item;
    while (std::getline(ss, item, ':'))
      if (!item.empty()) e.icd_files.push_back(item);
  }
  return e;
}

const std::vector<std::pair<const char*, const char*>>& tuning_aliases() {
  static const std::vector<std::pair<const char*, const char*>> a = {{"DIFFVK_COOPMAT", "coopmat"},
                                                                     {"DIFFVK_ATTN_CORE", "attn_core"},
                                                                     {"DIFFVK_ROW_LANES", "row_lanes"},
                                                                     {"DIFFVK_LINEAR_REG_SHARE", "linear_reg_share"}};
  return a;
}

std::string TuningOverride::setting() const {
  for (const auto& a : tuning_aliases())
    if (source == a.first) return source + "=" + value;
  if (source == kNoFp16 || source == kNoSubgroup) return source + " (" + key + "=" + value + ")";
  return key + "=" + value + " (" + source + ")";
}

std::vector<TuningOverride> parse_tuning(const std::string& text, const std::string& source) {
  std::vector<TuningOverride> out;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    item = trim(item);
    if (item.empty()) continue;
    const size_t eq = item.find('=');
    if (eq == std::string::npos) bad(source, item, "has no value (write key=value)");
    TuningOverride o{trim(item.substr(0, eq)), trim(item.substr(eq + 1)), source};
    check_value(source, o.key, o.value);
    out.push_back(std::move(o));
  }
  return out;
}

std::vector<TuningOverride> tuning_overrides(const ContextOptions& options, const DeviceEnvironment& env) {
  std::vector<TuningOverride> out;
  for (const std::string& q : options.force_quirks) {
    check_value("ContextOptions::force_quirks", "quirk", q);
    out.push_back({"quirk", q, "ContextOptions::force_quirks"});
  }
  // The test hooks, aliases of fp16=off and subgroup=off (a later override of the key wins, as for any key).
  if (options.force_no_fp16) out.push_back({"fp16", "off", kNoFp16});
  if (options.force_no_subgroup_arithmetic) out.push_back({"subgroup", "off", kNoSubgroup});
  for (TuningOverride& o : parse_tuning(options.tuning, "ContextOptions::tuning")) out.push_back(std::move(o));
  for (const auto& a : env.aliases) {
    const auto& aliases = tuning_aliases();
    const auto it = std::find_if(aliases.begin(), aliases.end(), [&](const auto& x) { return a.first == x.first; });
    const std::string key = it->second;
    const std::string src = a.first + " (alias of DIFFVK_TUNING key " + key + ")";
    check_value(src, key, a.second);
    info(a.first + "=" + a.second + ": an alias of DIFFVK_TUNING=" + key + "=" + a.second + " (prefer DIFFVK_TUNING)");
    out.push_back({key, a.second, a.first});
  }
  for (TuningOverride& o : parse_tuning(env.tuning, "DIFFVK_TUNING")) out.push_back(std::move(o));
  return out;
}

void simulate_limits(DeviceCaps& c, const ContextOptions& options) {
  auto mib = [](uint64_t b) {
    return b % (1ull << 20) == 0 ? std::to_string(b >> 20) + " MiB" : std::to_string(b) + " bytes";
  };
  std::vector<std::string> what;
  if (const uint32_t s = options.simulate_subgroup_size) {
    if (s > 128 || (s & (s - 1)) != 0)
      throw Error(Status::invalid_argument, "ContextOptions::simulate_subgroup_size " + std::to_string(s) +
                                                " is not a power of two up to 128 (0: the hardware's subgroup size)");
    const uint32_t limit = std::min(c.max_workgroup_invocations, c.max_workgroup_size[0]);
    if (s > limit)
      throw Error(Status::unsupported, "ContextOptions::simulate_subgroup_size " + std::to_string(s) + ": device '" +
                                           c.name + "' runs at most " + std::to_string(limit) +
                                           " invocations in a workgroup's first dimension, not one subgroup of " +
                                           std::to_string(s));
    // The hardware's one size: nothing to simulate. Otherwise (another size, or sizes that vary) no shader may
    // depend on a subgroup's width: the simulated lanes are not the hardware's subgroups.
    if (s != c.subgroup_size || c.subgroup_min_size != c.subgroup_max_size) {
      const std::string hw =
          std::to_string(c.subgroup_size) +
          (c.subgroup_min_size != c.subgroup_max_size
               ? " (" + std::to_string(c.subgroup_min_size) + ".." + std::to_string(c.subgroup_max_size) + ")"
               : std::string());
      const std::string why = "simulated subgroup size " + std::to_string(s) +
                              " (ContextOptions::simulate_subgroup_size) is not the hardware's " + hw;
      c.subgroup_hardware_size = c.subgroup_size;
      c.subgroup_size = c.subgroup_min_size = c.subgroup_max_size = s;
      c.subgroup_size_control = false;
      c.subgroup_arithmetic_compute = false;
      c.subgroup_operations = 0;
      if (c.coopmat_m) {
        c.coopmat_m = c.coopmat_n = c.coopmat_k = 0;
        c.coopmat_note = why + " (cooperative matrices are subgroup-scoped)";
      }
      what.push_back("subgroup " + std::to_string(s) + " (hardware " + hw +
                     ": no subgroup operations, size control or cooperative matrices)");
      info("device '" + c.name + "': " + why +
           ": tiles and workgroups are planned for it; subgroup operations, subgroup size control and cooperative "
           "matrices are off (the shared-memory reductions run)");
    }
  }
  if (options.simulate_max_storage_buffer_range) {
    c.max_storage_buffer_range = std::min(c.max_storage_buffer_range, options.simulate_max_storage_buffer_range);
    what.push_back("storage buffer range " + mib(c.max_storage_buffer_range));
  }
  if (options.simulate_max_memory_allocation_size) {
    c.max_memory_allocation_size = c.max_memory_allocation_size ? std::min(c.max_memory_allocation_size,
                                                                           options.simulate_max_memory_allocation_size)
                                                                : options.simulate_max_memory_allocation_size;
    what.push_back("max allocation " + mib(c.max_memory_allocation_size));
  }
  if (options.simulate_heap_bytes) {
    for (auto& h : c.heaps) h.size = std::min<uint64_t>(h.size, options.simulate_heap_bytes);
    what.push_back("heaps at most " + mib(options.simulate_heap_bytes));
  }
  c.simulated.clear();
  for (const std::string& w : what) c.simulated += (c.simulated.empty() ? "" : ", ") + w;
}

Tuning apply_tuning(DeviceCaps& c, const std::vector<TuningOverride>& overrides) {
  Tuning t;
  // The last override of each key (auto is no override); quirk=, rule= and subgroup_off= add up, applied first.
  std::map<std::string, const TuningOverride*> last;
  std::string forced, rules_forced, rules_dropped;
  std::vector<std::pair<std::string, const TuningOverride*>> sg_off;  // kernel, first override naming it
  std::vector<const DeviceRule*> rules = matching_device_rules(c);    // the deny rows in force
  for (const TuningOverride& o : overrides) {
    if (o.key == "subgroup_off") {            // KERNEL[+KERNEL...]
      check_value(o.source, o.key, o.value);  // throws, naming the key and the name
      for (const std::string& name : plus_items(o.value)) {
        const char* k = subgroup_kernel_of(name);
        if (std::find_if(sg_off.begin(), sg_off.end(), [&](const auto& x) { return x.first == k; }) == sg_off.end())
          sg_off.emplace_back(k, &o);
      }
    } else if (o.key == "quirk") {
      if (!c.has_quirk(o.value.c_str())) forced += (forced.empty() ? "" : ", ") + o.value + " by " + o.source;
      force_quirk(c, o.value);
    } else if (o.key == "rule") {
      const bool drop_it = !o.value.empty() && o.value[0] == '-';
      const DeviceRule* r = find_device_rule(drop_it ? o.value.substr(1) : o.value);
      if (!r) check_value(o.source, o.key, o.value);  // throws, naming the key
      const auto it = std::find(rules.begin(), rules.end(), r);
      if (drop_it && it != rules.end()) {
        rules.erase(it);
        rules_dropped += (rules_dropped.empty() ? "" : ", ") + std::string(r->name) + " by " + o.setting();
      } else if (!drop_it && it == rules.end()) {
        rules.push_back(r);
        rules_forced += (rules_forced.empty() ? "" : ", ") + std::string(r->name) + " by " + o.setting();
      }
    } else if (o.value == "auto") {
      last.erase(o.key);
    } else {
      last[o.key] = &o;
    }
  }
  auto over = [&](const char* key) -> const TuningOverride* {
    const auto it = last.find(key);
    return it == last.end() ? nullptr : it->second;
  };
  // The deny row that switches `key` off (none where the key has an override, which wins).
  auto denied = [&](const char* key) -> const DeviceRule* {
    return over(key) ? nullptr : deny_rule_for(key, c, rules);
  };
  std::string dropped;
  auto drop = [&](const char* quirk, const TuningOverride& by) {
    if (!c.has_quirk(quirk)) return;
    drop_quirk(c, quirk);
    dropped += (dropped.empty() ? "" : ", ") + std::string(quirk) + " by " + by.setting();
  };
  auto add = [&](const char* quirk, const std::string& by) {
    if (c.has_quirk(quirk)) return;
    force_quirk(c, quirk);
    forced += (forced.empty() ? "" : ", ") + std::string(quirk) + " by " + by;
  };
  const TuningOverride* attn = over("attn_core");

  // coopmat: the device's usable shape (cap), unless quirk coopmat_emulated; on drops the quirk, off (or a deny
  // rule, unless attn_core=coopmat) the shape.
  const DeviceRule* coop_rule = attn && attn->value == "coopmat" ? nullptr : denied("coopmat");
  if (const TuningOverride* o = over("coopmat")) {
    if (o->value == "off") {
      if (c.coopmat_m) info(o->setting() + ": no cooperative matrices on '" + c.name + "'");
      c.coopmat_m = c.coopmat_n = c.coopmat_k = 0;
      c.coopmat_note = "off by " + o->setting();
    } else {
      if (!c.coopmat_m) no_coopmat_shape(c, o->setting());
      drop("coopmat_emulated", *o);
      c.coopmat_note = "forced on by " + o->setting();
      info(o->setting() + ": the matmul and the prefill attention use cooperative matrices on '" + c.name + "'");
    }
  } else if (coop_rule) {
    if (c.coopmat_m)
      info(std::string("deny rule ") + coop_rule->name + ": no cooperative matrices on '" + c.name + "'");
    c.coopmat_m = c.coopmat_n = c.coopmat_k = 0;
    c.coopmat_note = std::string("off by deny rule ") + coop_rule->name;
  }
  // attn_core: keys (quirk per_key_attention), blocks (quirk no_kv_staging), else staged; coopmat forced.
  if (const TuningOverride* o = attn) {
    if (o->value == "keys") {
      add("per_key_attention", o->setting());
    } else if (o->value == "coopmat") {
      if (!c.coopmat_m) no_coopmat_shape(c, o->setting());
      drop("coopmat_emulated", *o);
      info(o->setting() + ": prefill attention uses cooperative matrices on '" + c.name + "'");
    } else {
      drop("per_key_attention", *o);
      if (o->value == "staged")
        drop("no_kv_staging", *o);
      else
        add("no_kv_staging", o->setting());
    }
  }

  t.coopmat = c.coopmat_m != 0 && !c.has_quirk("coopmat_emulated");
  {
    const TuningOverride* o = over("coopmat");
    std::string why;
    if (o && o->value == "off")
      why = "override " + o->setting();
    else if (o)
      why = "override " + o->setting() + " (drops quirk coopmat_emulated)";
    else if (attn && attn->value == "coopmat")
      why = "override " + attn->setting() + " (drops quirk coopmat_emulated)";
    else if (coop_rule)
      why = rule_why(*coop_rule);
    else if (!c.coopmat_m)
      why = "cap: " + no_coopmat_why(c);
    else if (!t.coopmat)
      why = "quirk coopmat_emulated";
    else
      why = "cap: usable shape " + c.coopmat_shape();
    set_choice(t, "coopmat", t.coopmat ? "on" : "off", why);
  }

  // int_dot: shaderIntegerDotProduct (cap); off (or a deny rule) clears it from the caps, so that the quantized
  // linears take the dequantize path and the device does not enable the feature. on: the int8 paths wherever the
  // feature is there, accelerated or not (CPU drivers: how the tests run the choice an accelerating GPU makes).
  {
    const TuningOverride* o = over("int_dot");
    const DeviceRule* r = denied("int_dot");
    std::string why;
    if (o && o->value == "on") {
      if (!c.integer_dot_product)
        throw Error(Status::unsupported, o->setting() + ", but device '" + c.name + "' has no shaderIntegerDotProduct");
      c.int8_dot_accelerated = true;
      why = "override " + o->setting() + " (the int8 paths, accelerated or not)";
    } else if (o || r) {
      why = o ? "override " + o->setting() : rule_why(*r);
      if (c.integer_dot_product)
        info((o ? o->setting() : std::string("deny rule ") + r->name) + ": no integer dot products on '" + c.name +
             "' (the quantized linears dequantize)");
      c.integer_dot_product = c.int8_dot_accelerated = false;
    } else if (!c.integer_dot_product) {
      why = "cap: no shaderIntegerDotProduct";
    } else {
      why = c.int8_dot_accelerated
                ? "cap: shaderIntegerDotProduct, 4x8-bit accelerated (the quantized decode takes the int8 path)"
                : "cap: shaderIntegerDotProduct, not accelerated (the quantized linears keep the dequantize path)";
    }
    t.int_dot = c.integer_dot_product;
    set_choice(t, "int_dot", t.int_dot ? "on" : "off", why);
  }
  // fp16: fp16 storage and arithmetic (16-bit storage buffers, shaderFloat16, no quirk against them); off (or a deny
  // rule, or ContextOptions::force_no_fp16) runs the fp32 variants. apply_precision applies the context's precision.
  {
    const TuningOverride* o = over("fp16");
    const DeviceRule* r = denied("fp16");
    t.fp16 = !o && !r && c.fp16_usable();
    std::string why = o                    ? "override " + o->setting()
                      : r                  ? rule_why(*r)
                      : !c.storage_16bit   ? "cap: no 16-bit storage buffers"
                      : !c.fp16_arithmetic ? "cap: no shaderFloat16"
                      : !t.fp16            ? "quirk broken_fp16_storage"
                                           : "cap: 16-bit storage buffers and shaderFloat16";
    set_choice(t, "fp16", t.fp16 ? "on" : "off", why);
  }
  // subgroup: subgroup arithmetic in compute shaders (cap); off (or a deny rule, or
  // ContextOptions::force_no_subgroup_arithmetic) runs the shared-memory reductions.
  {
    const TuningOverride* o = over("subgroup");
    const DeviceRule* r = denied("subgroup");
    t.subgroup = !o && !r && c.subgroup_arithmetic_compute;
    std::string why = o            ? "override " + o->setting()
                      : r          ? rule_why(*r)
                      : t.subgroup ? "cap: subgroup arithmetic in compute shaders"
                      : c.subgroup_hardware_size
                          ? "cap: simulated subgroup size " + std::to_string(c.subgroup_size) +
                                " (ContextOptions::simulate_subgroup_size; hardware " +
                                std::to_string(c.subgroup_hardware_size) + "): no subgroup operations"
                          : "cap: no subgroup arithmetic in compute shaders";
    set_choice(t, "subgroup", t.subgroup ? "on" : "off", why);
    // Off: no choice made from the caps may assume it (the attention's key-block cores need it; a subgroup pipeline
    // is refused).
    if (!t.subgroup) c.subgroup_arithmetic_compute = false;
  }
  // subgroup_off: per kernel, while subgroup is on (each kernel then plans as a device without subgroup arithmetic:
  // KernelOptions::for_op).
  {
    std::string value, why;
    const TuningOverride* prev = nullptr;  // one override naming several kernels is named once
    for (const auto& [kernel, o] : sg_off) {
      value += (value.empty() ? "" : "+") + kernel;
      if (o != prev) why += (why.empty() ? "override " : ", ") + o->setting();
      prev = o;
    }
    if (!t.subgroup) {
      set_choice(t, "subgroup_off", sg_off.empty() ? "none" : value,
                 sg_off.empty() ? "subgroup is off for every kernel" : why + " (subgroup is off for every kernel)");
    } else {
      for (const auto& x : sg_off) t.subgroup_off.push_back(x.first);
      set_choice(t, "subgroup_off", sg_off.empty() ? "none" : value,
                 sg_off.empty() ? "no override: every kernel with subgroup variants runs them" : why);
    }
  }
  // kv_staging: attention stages K/V blocks in shared memory unless quirk no_kv_staging; on drops the quirk, off (or
  // a deny rule) adds it. attn_core=staged and attn_core=blocks decide it too; contradicting kv_staging is an error.
  bool kv_decided = false;  // by an override or a rule, not by the quirk table
  {
    const TuningOverride* o = over("kv_staging");
    const DeviceRule* r = attn && (attn->value == "staged" || attn->value == "blocks") ? nullptr : denied("kv_staging");
    if (o && attn && ((attn->value == "staged" && o->value == "off") || (attn->value == "blocks" && o->value == "on")))
      throw Error(Status::invalid_argument, attn->setting() + " and " + o->setting() +
                                                " contradict (the staged core stages K/V blocks, the blocks core does "
                                                "not): tuning key 'kv_staging'");
    std::string why;
    if (o) {
      if (o->value == "on")
        drop("no_kv_staging", *o);
      else
        add("no_kv_staging", o->setting());
      why = "override " + o->setting();
    } else if (attn && (attn->value == "staged" || attn->value == "blocks")) {
      why = "override " + attn->setting();
    } else if (r) {
      add("no_kv_staging", std::string("deny rule ") + r->name);
      why = rule_why(*r);
    } else if (c.has_quirk("no_kv_staging")) {
      why = "quirk no_kv_staging";
    } else {
      why = "cap: no quirk against staging K/V blocks in shared memory (GPU)";
    }
    kv_decided = o || r;
    t.kv_staging = !c.has_quirk("no_kv_staging");
    set_choice(t, "kv_staging", t.kv_staging ? "on" : "off", why);
  }

  if (attn && !t.subgroup && (attn->value == "blocks" || attn->value == "staged"))
    throw Error(Status::invalid_argument, attn->setting() +
                                              ": the key-block cores need subgroup arithmetic, which is " + "off (" +
                                              t.why("subgroup") + "): tuning key 'attn_core'");
  if (attn) {
    t.attn_core = attn->value;
    set_choice(t, "attn_core", t.attn_core, "override " + attn->setting());
  } else if (c.has_quirk("per_key_attention")) {
    t.attn_core = "keys";
    set_choice(t, "attn_core", "keys", "quirk per_key_attention");
  } else if (!t.subgroup) {
    t.attn_core = "keys";
    set_choice(t, "attn_core", "keys",
               "subgroup off (" + t.why("subgroup") + "): the key-block cores need subgroup arithmetic");
  } else if (c.has_quirk("no_kv_staging")) {
    t.attn_core = "blocks";
    set_choice(t, "attn_core", "blocks",
               kv_decided ? "kv_staging off (" + t.why("kv_staging") + ")" : std::string("quirk no_kv_staging"));
  } else {
    t.attn_core = "staged";
    set_choice(t, "attn_core", "staged", "cap: no quirk against the staged key-block core (GPU)");
  }
  if (const TuningOverride* o = over("row_lanes")) {
    t.row_lanes = static_cast<uint32_t>(std::strtoul(o->value.c_str(), nullptr, 10));
    set_choice(t, "row_lanes", std::to_string(t.row_lanes), "override " + o->setting());
  } else {
    set_choice(t, "row_lanes", "auto",
               "cap: each kernel's row geometry (lane groups on GPUs, one lane per group on CPU drivers)");
  }
  const bool cpu = c.kind == DeviceKind::cpu;
  t.q4_in_place = device_class_choice(t, over("q4_in_place"), cpu, "q4_in_place", "on", "off",
                                      "CPU driver (a nibble's shift costs an instruction per weight)",
                                      "GPU (a bitfield extract is one instruction)");
  if (const TuningOverride* o = over("linear_reg_share")) {
    t.linear_reg_shuffle = o->value == "shuffle";
    set_choice(t, "linear_reg_share", o->value, "override " + o->setting());
  } else {
    t.linear_reg_shuffle = c.kind == DeviceKind::cpu;
    set_choice(t, "linear_reg_share", t.linear_reg_shuffle ? "shuffle" : "broadcast",
               t.linear_reg_shuffle ? "cap: CPU driver (subgroupShuffle is faster on lavapipe 22.3)"
                                    : "cap: GPU (radv keeps a shuffle's row loop rolled)");
  }
  // Measured on lavapipe, 2 cores (BENCHMARKS.md, "One-row prologues as dispatches of their own"), decode medians
  // split against fused: the 134M model 1.08-1.24x on Mesa 22.3 and 0.97-1.08x on Mesa 26.1, a model of 2048-wide
  // layers 1.12-1.5x, Phi-4-mini-flash's shape 1.12x.
  t.row_prologue_split =
      device_class_choice(t, over("row_prologue"), cpu, "row_prologue", "split", "fused",
                          "CPU driver (a lane computes a fused prologue over the whole row for its own 4 features)",
                          "GPU (the prologue hides under the weight stream)");
  // Measured on lavapipe 22.3, 2 cores (BENCHMARKS.md, "Decode attention on the prefill kernel"): the 134M model's
  // cold wait to its second token 0.3 s shorter (the split-K pipeline's compile at the first decode step and in the
  // self-test), decode after 128 and 1024 tokens of context unchanged within the noise.
  t.attn_decode_prefill =
      device_class_choice(t, over("attn_decode"), cpu, "attn_decode", "prefill", "split",
                          "CPU driver (it compiles each pipeline at its first dispatch: decode reuses the prefill's)",
                          "GPU (the split-K kernel spreads a row's keys over the compute units)");
  {
    const TuningOverride* o = over("pipeline_threads");
    const unsigned long asked = o ? std::strtoul(o->value.c_str(), nullptr, 10) : 0;
    if (asked) {
      t.pipeline_threads = static_cast<uint32_t>(asked);
      set_choice(t, "pipeline_threads", std::to_string(t.pipeline_threads), "override " + o->setting());
    } else {
      const unsigned hw = std::thread::hardware_concurrency();  // 0 when unknown
      t.pipeline_threads = std::max(1u, std::min(hw, kAutoPipelineThreadsCap));
      set_choice(t, "pipeline_threads", std::to_string(t.pipeline_threads),
                 std::string(o ? "override " + o->setting() + ": " : "cap: ") +
                     (hw ? std::to_string(hw) + " hardware threads" : "hardware threads unknown") + ", at most " +
                     std::to_string(kAutoPipelineThreadsCap));
    }
  }
  {
    const TuningOverride* o = over("pipeline_batch");
    if (o && o->value != "auto") {
      t.pipeline_batch =
          o->value == "per_thread" ? 0u : static_cast<uint32_t>(std::strtoul(o->value.c_str(), nullptr, 10));
      set_choice(t, "pipeline_batch", o->value, "override " + o->setting());
    } else {
      t.pipeline_batch = cpu ? 1u : 0u;
      set_choice(t, "pipeline_batch", cpu ? "1" : "per_thread",
                 std::string(o ? "override " + o->setting() + ": " : "cap: ") +
                     (cpu ? "CPU driver (it compiles in the calling thread: single calls let the threads balance)"
                          : "GPU (one call per thread: a driver may compile a batch together)"));
    }
  }
  {
    std::string names;
    for (const DeviceRule* r : rules) names += std::string(names.empty() ? "" : " ") + r->name;
    std::string why = "the device rule table (runtime/vk/device_rules.cpp)";
    if (!rules_forced.empty()) why += "; forced: " + rules_forced;
    if (!rules_dropped.empty()) why += "; dropped: " + rules_dropped;
    set_choice(t, "rules", names.empty() ? "none" : names, why);
  }
  std::string names;
  for (const Quirk& q : c.quirks) names += std::string(names.empty() ? "" : " ") + q.name;
  std::string why = "the quirk table (runtime/vk/quirks.cpp)";
  if (!forced.empty()) why += "; forced: " + forced;
  if (!dropped.empty()) why += "; dropped: " + dropped;
  set_choice(t, "quirks", names.empty() ? "none" : names, why);
  return t;
}

void apply_precision(Tuning& t, DeviceCaps& c, Precision precision) {
  if (precision == Precision::fp16 && !t.fp16)
    throw Error(Status::unsupported,
                "fp16 precision requested but device '" + c.name + "' has no fp16 path (" + t.why("fp16") + ")");
  if (precision == Precision::fp32 && t.fp16) {
    t.fp16 = false;
    set_choice(t, "fp16", "off", "ContextOptions::precision fp32");
  }
  if (c.coopmat_m != 0 && !t.fp16) {
    info("device '" + c.name + "': fp32 precision, so no cooperative matrices (their inputs are fp16)");
    if (precision == Precision::fp32 || t.why("fp16").rfind("cap: ", 0) == 0) {
      tuning_without_coopmat(t, c, "fp32 precision (the cooperative-matrix shaders take fp16)");
    } else {  // fp16 off by an override or a rule: say which
      const std::string why = "fp16 off by " + t.why("fp16") + " (the cooperative-matrix shaders take fp16)";
      c.coopmat_m = c.coopmat_n = c.coopmat_k = 0;
      c.coopmat_note = why;
      if (t.coopmat) set_choice(t, "coopmat", "off", why);
      t.coopmat = false;
    }
  }
}

void tuning_without_coopmat(Tuning& t, DeviceCaps& c, const std::string& why) {
  c.coopmat_m = c.coopmat_n = c.coopmat_k = 0;
  c.coopmat_note = why;
  if (t.coopmat) set_choice(t, "coopmat", "off", "cap: " + why);
  t.coopmat = false;
}

const char* subgroup_kernel_of(const std::string& op) {
  for (const SubgroupKernel& k : subgroup_kernels()) {
    if (op == k.kernel) return k.kernel;
    for (const char* o : k.ops)
      if (op == o) return k.kernel;
  }
  return nullptr;
}

bool Tuning::subgroup_for(const std::string& op) const {
  if (!subgroup) return false;
  const char* k = subgroup_kernel_of(op);
  return !k || std::find(subgroup_off.begin(), subgroup_off.end(), k) == subgroup_off.end();
}

const TuningChoice* Tuning::find(const std::string& key) const {
  for (const TuningChoice& c : choices)
    if (c.key == key) return &c;
  return nullptr;
}

std::string Tuning::why(const std::string& key) const {
  const TuningChoice* c = find(key);
  return c ? c->why : std::string();
}

std::string Tuning::describe() const {
  size_t w = 0, vw = 0;
  for (const TuningChoice& c : choices)
    if (c.key != "quirks" && c.key != "rules")  // quirks and rules: lists
      w = std::max(w, c.key.size()), vw = std::max(vw, c.value.size());
  std::string out;
  for (const TuningChoice& c : choices)
    out += "  " + c.key + std::string(w > c.key.size() ? w - c.key.size() : 0, ' ') + " = " + c.value +
           std::string(vw > c.value.size() ? vw - c.value.size() : 0, ' ') + "  (" + c.why + ")\n";
  return out;
}

Tuning resolve_tuning(const DeviceCaps& caps, const ContextOptions& options) {
  DeviceCaps c = caps;
  simulate_limits(c, options);
  Tuning t = apply_tuning(c, tuning_overrides(options, read_device_environment()));
  apply_precision(t, c, options.precision);
  return t;
}

}  // namespace diffvk
