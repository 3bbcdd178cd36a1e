// The one tuning path (tuning.hpp): read the environment once per device, parse the overrides, resolve each key
// from the caps, then the quirks, then the overrides, and record why.
#include "vk/tuning.hpp"

#include <algorithm>
#include <cstdlib>
#include <map>
#include <sstream>

#include "platform.hpp"
#include "vk/instance.hpp"

namespace diffvk {

namespace {
std::string trim(const std::string& s) {
  const size_t a = s.find_first_not_of(" \t"), b = s.find_last_not_of(" \t");
  return a == std::string::npos ? std::string() : s.substr(a, b - a + 1);
}

// The keys and their values (quirk and row_lanes are checked by code).
struct KeySpec {
  const char* key;
  std::vector<const char*> values;  // empty: checked below
};
const std::vector<KeySpec>& key_specs() {
  static const std::vector<KeySpec> specs = {
      {"coopmat", {"auto", "on", "off"}},
      {"attn_core", {"auto", "keys", "blocks", "staged", "coopmat"}},
      {"row_lanes", {}},
      {"linear_reg_share", {"auto", "shuffle", "broadcast"}},
      {"quirk", {}},
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

void set_choice(Tuning& t, const std::string& key, const std::string& value, const std::string& why) {
  for (TuningChoice& c : t.choices)
    if (c.key == key) {
      c.value = value;
      c.why = why;
      return;
    }
  t.choices.push_back({key, value, why});
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

Tuning apply_tuning(DeviceCaps& c, const std::vector<TuningOverride>& overrides) {
  Tuning t;
  // The last override of each key (auto is no override); quirk= adds up, applied first.
  std::map<std::string, const TuningOverride*> last;
  std::string forced;
  for (const TuningOverride& o : overrides) {
    if (o.key == "quirk") {
      if (!c.has_quirk(o.value.c_str())) forced += (forced.empty() ? "" : ", ") + o.value + " by " + o.source;
      force_quirk(c, o.value);
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
  std::string dropped;
  auto drop = [&](const char* quirk, const TuningOverride& by) {
    if (!c.has_quirk(quirk)) return;
    drop_quirk(c, quirk);
    dropped += (dropped.empty() ? "" : ", ") + std::string(quirk) + " by " + by.setting();
  };
  auto add = [&](const char* quirk, const TuningOverride& by) {
    if (c.has_quirk(quirk)) return;
    force_quirk(c, quirk);
    forced += (forced.empty() ? "" : ", ") + std::string(quirk) + " by " + by.setting();
  };

  // coopmat: the device's usable shape (cap), unless quirk coopmat_emulated; on drops the quirk, off the shape.
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
  }
  // attn_core: keys (quirk per_key_attention), blocks (quirk no_kv_staging), else staged; coopmat forced.
  if (const TuningOverride* o = over("attn_core")) {
    if (o->value == "keys") {
      add("per_key_attention", *o);
    } else if (o->value == "coopmat") {
      if (!c.coopmat_m) no_coopmat_shape(c, o->setting());
      drop("coopmat_emulated", *o);
      info(o->setting() + ": prefill attention uses cooperative matrices on '" + c.name + "'");
    } else {
      drop("per_key_attention", *o);
      if (o->value == "staged")
        drop("no_kv_staging", *o);
      else
        add("no_kv_staging", *o);
    }
  }

  t.coopmat = c.coopmat_m != 0 && !c.has_quirk("coopmat_emulated");
  {
    const TuningOverride* o = over("coopmat");
    const TuningOverride* a = over("attn_core");
    std::string why;
    if (o && o->value == "off")
      why = "override " + o->setting();
    else if (o)
      why = "override " + o->setting() + " (drops quirk coopmat_emulated)";
    else if (a && a->value == "coopmat")
      why = "override " + a->setting() + " (drops quirk coopmat_emulated)";
    else if (!c.coopmat_m)
      why = "cap: " + no_coopmat_why(c);
    else if (!t.coopmat)
      why = "quirk coopmat_emulated";
    else
      why = "cap: usable shape " + c.coopmat_shape();
    set_choice(t, "coopmat", t.coopmat ? "on" : "off", why);
  }
  if (const TuningOverride* o = over("attn_core")) {
    t.attn_core = o->value;
    set_choice(t, "attn_core", t.attn_core, "override " + o->setting());
  } else if (c.has_quirk("per_key_attention")) {
    t.attn_core = "keys";
    set_choice(t, "attn_core", "keys", "quirk per_key_attention");
  } else if (c.has_quirk("no_kv_staging")) {
    t.attn_core = "blocks";
    set_choice(t, "attn_core", "blocks", "quirk no_kv_staging");
  } else {
    t.attn_core = "staged";
    set_choice(t, "attn_core", "staged", "cap: no quirk against the staged key-block core (GPU)");
  }
  if (const TuningOverride* o = over("row_lanes")) {
    t.row_lanes = static_cast<uint32_t>(std::strtoul(o->value.c_str(), nullptr, 10));
    set_choice(t, "row_lanes", std::to_string(t.row_lanes), "override " + o->setting());
  } else {
    set_choice(t, "row_lanes", "auto",
               "cap: each kernel's row geometry (lane groups on GPUs, one group on CPU drivers)");
  }
  if (const TuningOverride* o = over("linear_reg_share")) {
    t.linear_reg_shuffle = o->value == "shuffle";
    set_choice(t, "linear_reg_share", o->value, "override " + o->setting());
  } else {
    t.linear_reg_shuffle = c.kind == DeviceKind::cpu;
    set_choice(t, "linear_reg_share", t.linear_reg_shuffle ? "shuffle" : "broadcast",
               t.linear_reg_shuffle ? "cap: CPU driver (subgroupShuffle is faster on lavapipe 22.3)"
                                    : "cap: GPU (radv keeps a shuffle's row loop rolled)");
  }
  std::string names;
  for (const Quirk& q : c.quirks) names += std::string(names.empty() ? "" : " ") + q.name;
  std::string why = "the quirk table (runtime/vk/quirks.cpp)";
  if (!forced.empty()) why += "; forced: " + forced;
  if (!dropped.empty()) why += "; dropped: " + dropped;
  set_choice(t, "quirks", names.empty() ? "none" : names, why);
  return t;
}

void tuning_without_coopmat(Tuning& t, DeviceCaps& c, const std::string& why) {
  c.coopmat_m = c.coopmat_n = c.coopmat_k = 0;
  c.coopmat_note = why;
  if (t.coopmat) set_choice(t, "coopmat", "off", "cap: " + why);
  t.coopmat = false;
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
    if (c.key != "quirks") w = std::max(w, c.key.size()), vw = std::max(vw, c.value.size());  // quirks: a long list
  std::string out;
  for (const TuningChoice& c : choices)
    out += "  " + c.key + std::string(w > c.key.size() ? w - c.key.size() : 0, ' ') + " = " + c.value +
           std::string(vw > c.value.size() ? vw - c.value.size() : 0, ' ') + "  (" + c.why + ")\n";
  return out;
}

Tuning resolve_tuning(const DeviceCaps& caps, const ContextOptions& options) {
  DeviceCaps c = caps;
  Tuning t = apply_tuning(c, tuning_overrides(options, read_device_environment()));
  const bool fp16 = options.precision != Precision::fp32 && c.fp16_usable() && !options.force_no_fp16;
  if (c.coopmat_m != 0 && !fp16)
    tuning_without_coopmat(t, c, "fp32 precision (the cooperative-matrix shaders take fp16)");
  return t;
}

}  // namespace diffvk
