// The self-test at load, the core's part (include/diffvk/selftest.hpp; docs/decisions/024-selftest-at-load.md): the
// registered runner (diffvk_bench's cases and float64 reference), the fallback chain over the tuning keys, and the
// verdict file in the platform cache directory. Context::create calls open_tested_device.
#include "vk/selftest.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <functional>
#include <mutex>

#include "diffvk/atomic_write.hpp"
#include "diffvk/cache_dir.hpp"
#include "platform.hpp"
#include "vk/gpu.hpp"
#include "vk/pipeline_cache_file.hpp"
#include "vk/shader_blob.hpp"
#include "vk/tuning.hpp"

namespace diffvk {

using platform::LogLevel;
using json = nlohmann::json;

namespace {

constexpr int kVerdictFormat = 1;
constexpr uint64_t kVerdictMaxBytes = 4u << 20;

std::mutex& runner_mutex() {
  static std::mutex m;
  return m;
}
SelftestRunner& runner_slot() {
  static SelftestRunner r;
  return r;
}

std::string hex_of(uint64_t v, int digits) {
  char b[24];
  std::snprintf(b, sizeof b, "%0*" PRIx64, digits, v);
  return b;
}

// The fallback chain (decision 024): the first key among the failing row's features that is still on, and its
// fallback. Subgroup operations go for the row's kernel only (subgroup_off=KERNEL); the other keys for the device.
std::string next_fallback(const SelftestRow& row, const Tuning& t) {
  for (const std::string& k : row.uses) {
    if (k == "coopmat" && t.coopmat) return "coopmat=off";
    if (k == "int_dot" && t.int_dot) return "int_dot=off";
    if (k == "attn_core" && t.attn_core != "keys") return "attn_core=keys";
    if (k == "subgroup" && t.subgroup_for(row.op)) {
      const char* kernel = subgroup_kernel_of(row.op);
      return kernel ? std::string("subgroup_off=") + kernel : "subgroup=off";
    }
    if (k == "fp16" && t.fp16) return "fp16=off";
  }
  return "";
}

// The configuration a verdict is for: the precision asked for, every resolved tuning value, the ops and the
// test hook. Two contexts with the same configuration on the same device, driver and shaders run the same
// pipelines.
std::string config_of(const Device& d, const ContextOptions& o) {
  std::string s = std::string("precision=") + precision_name(o.precision);
  for (const TuningChoice& c : d.tuning().choices)
    // How many threads compile, and how many pipelines per call, change no result.
    if (c.key != "pipeline_threads" && c.key != "pipeline_batch") s += ";" + c.key + "=" + c.value;
  if (!o.selftest_ops.empty()) {
    s += ";ops=";
    for (size_t i = 0; i < o.selftest_ops.size(); ++i) s += (i ? "," : "") + o.selftest_ops[i];
  }
  if (!o.selftest_weights.empty()) {
    s += ";weights=";
    for (size_t i = 0; i < o.selftest_weights.size(); ++i) s += (i ? "," : "") + o.selftest_weights[i];
  }
  if (!o.selftest_model.empty()) s += ";model=" + hex_of(fnv1a64(o.selftest_model.data(), o.selftest_model.size()), 16);
  if (!o.selftest_fail_variant.empty())
    s += ";fail=" + o.selftest_fail_variant + ";fault=" + selftest_fault_name(o.selftest_fault);
  return s;
}

// Every fault class, and their names for errors ("wrong_value, nan, ...").
constexpr SelftestFault kFaults[] = {SelftestFault::wrong_value, SelftestFault::nan, SelftestFault::fp16_overflow,
                                     SelftestFault::stale, SelftestFault::pipeline_failure};
std::string fault_choices() {
  std::string s;
  for (SelftestFault f : kFaults) s += std::string(s.empty() ? "" : ", ") + selftest_fault_name(f);
  return s;
}

// The weight formats are known names; the test hook's fields: a fault class of the enum, and one other than the
// default only with the variants to plant it in.
void validate_selftest_fields(const ContextOptions& o) {
  for (const std::string& w : o.selftest_weights)
    if (w != "f16" && w != "q8_0" && w != "q4_0" && w != "kv=q8_0")
      throw Error(Status::invalid_argument, "ContextOptions::selftest_weights: '" + w.substr(0, 64) +
                                                "' is not a weight or KV cache format (f16, q8_0, q4_0, kv=q8_0)");
  const char* name = selftest_fault_name(o.selftest_fault);
  if (!name)
    throw Error(Status::invalid_argument, "ContextOptions::selftest_fault " + std::to_string(int(o.selftest_fault)) +
                                              " is not a fault class (" + fault_choices() + ")");
  if (o.selftest_fault != SelftestFault::wrong_value && o.selftest_fail_variant.empty())
    throw Error(Status::invalid_argument, std::string("ContextOptions::selftest_fault '") + name +
                                              "' needs ContextOptions::selftest_fail_variant (the variants to plant "
                                              "it in)");
}

json row_json(const SelftestRow& r) {
  return json{{"op", r.op},
              {"variant", r.variant},
              {"cases", r.cases},
              {"failed", r.failed},
              {"max_error", r.max_error},
              {"worst", r.worst},
              {"seconds", r.seconds},
              {"pass", r.pass},
              {"failure", r.failure},
              {"fallback", r.fallback},
              {"tuning", r.tuning},
              {"uses", r.uses}};
}
SelftestRow row_of(const json& j) {
  SelftestRow r;
  r.op = j.at("op").get<std::string>();
  r.variant = j.at("variant").get<std::string>();
  r.cases = j.at("cases").get<uint32_t>();
  r.failed = j.at("failed").get<uint32_t>();
  r.max_error = j.at("max_error").get<double>();
  r.worst = j.at("worst").get<double>();
  r.seconds = j.at("seconds").get<double>();
  r.pass = j.at("pass").get<bool>();
  r.failure = j.at("failure").get<std::string>();
  r.fallback = j.at("fallback").get<std::string>();
  r.tuning = j.at("tuning").get<std::string>();
  r.uses = j.at("uses").get<std::vector<std::string>>();
  return r;
}

json device_key(const DeviceCaps& c) {
  std::string uuid;
  for (uint8_t b : c.pipeline_cache_uuid) uuid += hex_of(b, 2);
  return json{{"vendor_id", c.vendor_id},
              {"device_id", c.device_id},
              {"pipeline_cache_uuid", uuid},
              {"driver_version", c.driver_version},
              {"shader_hash", hex_of(embedded_shaders_hash(), 16)}};
}

// The verdict file's JSON, or an empty object when it is missing, unreadable, of another format or another key
// (logged: the test then runs and rewrites it).
json read_verdicts(const std::string& path, const DeviceCaps& caps) {
  if (path.empty() || !platform::file_exists(path)) return json::object();
  try {
    const std::vector<uint8_t> bytes = platform::read_file(path, kVerdictMaxBytes);
    json j = json::parse(bytes.begin(), bytes.end());
    if (!j.is_object() || j.value("format", 0) != kVerdictFormat || j.value("key", json()) != device_key(caps) ||
        !j.contains("configs") || !j["configs"].is_object()) {
      platform::log(LogLevel::info, "self-test verdict file " + path + " is of another format or key: testing again");
      return json::object();
    }
    return j;
  } catch (const std::exception& e) {
    platform::log(LogLevel::warn, "self-test verdict file " + path + " unreadable (" + e.what() + "): testing again");
    return json::object();
  }
}

// Replaces the configuration's verdict (`verdict`), or changes the one kept (`change`, given the configuration's entry;
// nothing where the file no longer has it).
void write_verdict(const std::string& path, const DeviceCaps& caps, const std::string& config, const json& verdict,
                   const std::function<void(json&)>& change = {}) {
  if (path.empty()) return;
  try {
    json j = read_verdicts(path, caps);
    if (change) {
      if (!j.contains("configs") || !j["configs"].contains(config)) return;
      change(j["configs"][config]);
    } else {
      if (j.empty()) j = json{{"format", kVerdictFormat}, {"key", device_key(caps)}, {"configs", json::object()}};
      j["configs"][config] = verdict;
    }
    const std::string text = j.dump(1) + "\n";
    platform::make_dirs(path.substr(0, path.rfind('/')));
    platform::write_file_atomic(path, text.data(), text.size());
  } catch (const std::exception& e) {  // a verdict not kept only costs a retest next time
    platform::log(LogLevel::warn, "self-test verdict not written to " + path + ": " + e.what());
  }
}

// The ops that sessions record only on request: the attention maps (Session::attention_maps) and the context shift
// (Session::shift). With auto, Context::create leaves them to their first record (SelftestReport::deferred): on
// lavapipe their compiles were 0.16 s of the 134M model's cold load, which most sessions never record.
const std::vector<std::string>& on_request_ops() {
  static const std::vector<std::string> ops{"attn_probs", "kv_shift"};
  return ops;
}

std::vector<std::string> strings_of(const json& entry, const char* key) {
  if (!entry.contains(key)) return {};
  return entry.at(key).get<std::vector<std::string>>();
}

bool contains(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

// What the test of an op left to its first record needs, copied: the device keeps it past Context::create.
struct FirstUseSetup {
  SelftestRunner runner;
  SelftestRequest request;
  DeviceCaps caps;
  std::string path, config, fallback;
};
struct FirstUseResult {
  std::vector<SelftestRow> rows;
  std::string error;  // "" = every row passed
};

// Tests one deferred op on the device as it is (its fallback included: none can be taken now, the sessions'
// programs are recorded) and keeps the rows in the verdict; a failure marks the op to be tested at the next create's
// load, where the fallback chain can take over.
FirstUseResult test_deferred_op(const FirstUseSetup& f, Device& d, const std::string& op) {
  SelftestRequest r = f.request;
  r.ops = {op};
  r.deferred.clear();
  const auto t0 = std::chrono::steady_clock::now();
  FirstUseResult out;
  d.park_pipelines(true);  // the session's kernels adopt the compiled pipelines
  try {
    out.rows = f.runner(d, r);
  } catch (...) {
    d.park_pipelines(false);
    throw;
  }
  d.park_pipelines(false);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  for (SelftestRow& row : out.rows) {
    row.tuning = f.fallback;
    if (!row.pass && out.error.empty())
      out.error = "self-test at first use: op '" + row.op + "' variant '" + row.variant + "' failed (" + row.failure +
                  "), so this context refuses what records it; the next Context::create on this device tests it at "
                  "load, where its fallback can take over (docs/decisions/024-selftest-at-load.md; "
                  "ContextOptions::selftest = off skips the test)";
  }
  write_verdict(f.path, f.caps, f.config, json(), [&](json& e) {
    for (const SelftestRow& row : out.rows) e["rows"].push_back(row_json(row));
    std::vector<std::string> left = strings_of(e, "deferred");
    left.erase(std::remove(left.begin(), left.end(), op), left.end());
    e["deferred"] = left;
    if (!out.error.empty()) {
      std::vector<std::string> at_load = strings_of(e, "test_at_load");
      if (!contains(at_load, op)) at_load.push_back(op);
      e["test_at_load"] = at_load;
      e["retest"] = true;
    }
  });
  platform::log(out.error.empty() ? LogLevel::info : LogLevel::warn,
                "self-test at first use of '" + op + "': " + std::to_string(out.rows.size()) + " op variants in " +
                    std::to_string(seconds) + " s" + (out.error.empty() ? ", every one passed" : ": " + out.error));
  return out;
}

std::string failure_message(const SelftestRow& r, const std::string& why_no_fallback) {
  return "self-test at load: op '" + r.op + "' variant '" + r.variant + "' failed (" + r.failure + ") and " +
         why_no_fallback + " (docs/decisions/024-selftest-at-load.md; ContextOptions::selftest = off skips the test)";
}

ContextOptions with_fallback(const ContextOptions& o, const std::string& fallback) {
  ContextOptions f = o;
  if (!fallback.empty()) f.tuning = o.tuning.empty() ? fallback : o.tuning + "," + fallback;
  return f;
}

}  // namespace

const char* selftest_mode_name(SelftestMode mode) noexcept {
  switch (mode) {
    case SelftestMode::automatic:
      return "auto";
    case SelftestMode::always:
      return "always";
    case SelftestMode::off:
      return "off";
  }
  return "?";
}

SelftestMode parse_selftest_mode(const std::string& text, const std::string& what) {
  if (text == "auto") return SelftestMode::automatic;
  if (text == "always") return SelftestMode::always;
  if (text == "off") return SelftestMode::off;
  throw Error(Status::invalid_argument,
              what + ": '" + text.substr(0, 64) + "' is not a self-test mode (auto, always, off)");
}

const char* selftest_fault_name(SelftestFault fault) noexcept {
  switch (fault) {
    case SelftestFault::wrong_value:
      return "wrong_value";
    case SelftestFault::nan:
      return "nan";
    case SelftestFault::fp16_overflow:
      return "fp16_overflow";
    case SelftestFault::stale:
      return "stale";
    case SelftestFault::pipeline_failure:
      return "pipeline_failure";
  }
  return nullptr;
}

SelftestFault parse_selftest_fault(const std::string& text, const std::string& what) {
  for (SelftestFault f : kFaults)
    if (text == selftest_fault_name(f)) return f;
  throw Error(Status::invalid_argument,
              what + ": '" + text.substr(0, 64) + "' is not a fault class (" + fault_choices() + ")");
}

void set_selftest_runner(SelftestRunner runner) {
  std::lock_guard<std::mutex> lock(runner_mutex());
  runner_slot() = std::move(runner);
}
bool has_selftest_runner() {
  std::lock_guard<std::mutex> lock(runner_mutex());
  return bool(runner_slot());
}

std::string selftest_verdict_path(const DeviceCaps& c) {
  std::string dir;
  try {
    dir = platform::cache_dir();
  } catch (const Error& e) {
    return "";
  }
  std::string uuid;
  for (uint8_t b : c.pipeline_cache_uuid) uuid += hex_of(b, 2);
  return dir + "/selftest/" + hex_of(c.vendor_id, 8) + "-" + hex_of(c.device_id, 8) + "-" + uuid + "-" +
         hex_of(c.driver_version, 8) + "-" + hex_of(embedded_shaders_hash(), 16) + ".json";
}

SelftestReport run_selftest(const ContextOptions& options) {
  SelftestReport report;
  open_tested_device(options, report, true);  // the device closes here
  return report;
}

std::string SelftestReport::table() const {
  std::string s;
  char line[512];
  std::snprintf(line, sizeof line, "%-15s %-34s %5s %11s %7s %9s  %-7s %s\n", "op", "variant", "cases", "max error",
                "of tol", "seconds", "verdict", "fallback taken");
  s += line;
  std::string last_tuning = "\x01";
  for (const SelftestRow& r : rows) {
    if (r.tuning != last_tuning) {
      s += r.tuning.empty() ? "-- as requested\n" : "-- retest under " + r.tuning + "\n";
      last_tuning = r.tuning;
    }
    std::snprintf(line, sizeof line, "%-15s %-34s %5u %11.3g %7.3f %9.3f  %-7s %s\n", r.op.c_str(), r.variant.c_str(),
                  r.cases, r.max_error, r.worst, r.seconds, r.pass ? "pass" : "FAIL",
                  r.fallback.empty() ? "-" : r.fallback.c_str());
    s += line;
    if (!r.pass) s += "    " + r.failure + "\n";
  }
  return s;
}

std::unique_ptr<Device> open_tested_device(const ContextOptions& options, SelftestReport& report, bool keep_failure) {
  report = SelftestReport();
  // A failure with no fallback left: thrown, or kept in the report (run_selftest).
  auto fail = [&](const std::string& msg) -> std::unique_ptr<Device> {
    if (!keep_failure) throw Error(Status::unsupported, msg);
    report.error = msg;
    return nullptr;
  };
  auto device_name = [](const Device& dev) { return dev.caps().name + (dev.fp16() ? " (fp16)" : " (fp32)"); };
  // DIFFVK_SELFTEST replaces the default (auto) as DIFFVK_DEVICE replaces an empty ContextOptions::device: an
  // explicit always or off wins.
  const std::string env = read_device_environment().selftest;
  const SelftestMode mode = options.selftest == SelftestMode::automatic && !env.empty()
                                ? parse_selftest_mode(env, "DIFFVK_SELFTEST")
                                : options.selftest;
  const std::string source = mode != options.selftest ? "DIFFVK_SELFTEST" : "ContextOptions::selftest";
  report.mode = mode;
  validate_selftest_fields(options);
  std::unique_ptr<Device> d = Device::create(options);
  report.device = device_name(*d);
  if (mode == SelftestMode::off) {
    report.note = "off (" + source + ")";
    return d;
  }
  SelftestRunner runner;
  {
    std::lock_guard<std::mutex> lock(runner_mutex());
    runner = runner_slot();
  }
  if (!runner) {
    const std::string why =
        "no self-test runner in this program (the cases and the float64 reference are in diffvk_bench: "
        "diffvk::bench::install_selftest(), or link libdiffvk_bench.so)";
    if (mode == SelftestMode::always) throw Error(Status::unsupported, "selftest=always: " + why);
    report.note = "not run: " + why;
    platform::log(LogLevel::debug, "self-test " + report.note);
    return d;
  }
  const DeviceCaps caps0 = d->caps();
  report.config = config_of(*d, options);
  report.verdict_path = selftest_verdict_path(caps0);

  // The ops left to their first record (SelftestReport::deferred), and the verdict's ops that failed there, which
  // are tested at load again. `leave_to_first_use`: the device tests report.deferred at their first record;
  // run_selftest (keep_failure) tests them now.
  std::vector<std::string> test_at_load;
  FirstUseSetup setup;
  setup.runner = runner;
  setup.request.ops = options.selftest_ops;
  setup.request.weights = options.selftest_weights;
  setup.request.model = options.selftest_model;
  setup.request.fail_variant = options.selftest_fail_variant;
  setup.request.fault = options.selftest_fault;
  setup.caps = caps0;
  setup.path = report.verdict_path;
  setup.config = report.config;
  auto leave_to_first_use = [&](Device& dev) {
    setup.fallback = report.fallback;
    if (report.deferred.empty()) return;
    if (!keep_failure) {
      dev.defer_selftest(report.deferred, [setup](Device& on, const std::string& op) {
        const FirstUseResult r = test_deferred_op(setup, on, op);
        if (!r.error.empty()) throw Error(Status::unsupported, r.error);
      });
      return;
    }
    for (const std::string& op : report.deferred) {
      FirstUseResult r = test_deferred_op(setup, dev, op);
      report.rows.insert(report.rows.end(), r.rows.begin(), r.rows.end());
      if (report.error.empty()) report.error = r.error;
    }
    report.deferred.clear();
  };

  if (mode == SelftestMode::automatic) {
    const json all = read_verdicts(report.verdict_path, caps0);
    const json* v = nullptr;
    if (all.contains("configs") && all["configs"].contains(report.config)) v = &all["configs"][report.config];
    bool retest = false;  // an op failed at its first record (or the marks are unreadable): test at load now
    try {
      retest = v && v->is_object() && v->value("retest", false);
      if (retest) test_at_load = strings_of(*v, "test_at_load");
    } catch (const nlohmann::json::exception&) {
      retest = true;
    }
    if (retest) {
      platform::log(LogLevel::info, "self-test verdict in " + report.verdict_path +
                                        ": an op failed at its first use; testing again at load");
      v = nullptr;
    }
    if (v) {
      try {
        report.from_cache = true;
        report.fallback = v->at("fallback").get<std::string>();
        report.tested_seconds = v->at("seconds").get<double>();
        for (const json& r : v->at("rows")) report.rows.push_back(row_of(r));
        report.deferred = strings_of(*v, "deferred");
        report.note = "verdict read from " + report.verdict_path;
        const std::string error = v->value("error", std::string());
        if (!error.empty()) return fail(error + " [verdict read from " + report.verdict_path + "]");
        platform::log(report.fallback.empty() ? LogLevel::debug : LogLevel::info,
                      "self-test: " + report.note +
                          (report.fallback.empty() ? std::string(": every op passed")
                                                   : ": running with the fallback " + report.fallback));
        if (!report.fallback.empty()) {
          d.reset();
          d = Device::create(with_fallback(options, report.fallback));
          report.device = device_name(*d);
        }
        leave_to_first_use(*d);
        return d;
      } catch (const nlohmann::json::exception& e) {
        platform::log(LogLevel::warn,
                      "self-test verdict in " + report.verdict_path + " unreadable (" + e.what() + "): testing again");
        report = SelftestReport();
        report.mode = mode;
        report.device = device_name(*d);
        report.config = config_of(*d, options);
        report.verdict_path = selftest_verdict_path(caps0);
        test_at_load.clear();
      }
    }
  }

  SelftestRequest request = setup.request;
  // auto at Context::create: the ops sessions record only on request wait for their first record, unless they failed
  // there before.
  if (mode == SelftestMode::automatic && !keep_failure)
    for (const std::string& op : on_request_ops())
      if ((request.ops.empty() || contains(request.ops, op)) && !contains(test_at_load, op))
        request.deferred.push_back(op);
  report.deferred = request.deferred;
  const auto t0 = std::chrono::steady_clock::now();
  auto seconds = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); };
  auto save = [&](const std::string& error) {
    report.seconds = report.tested_seconds = seconds();
    json rows = json::array();
    for (const SelftestRow& r : report.rows) rows.push_back(row_json(r));
    write_verdict(report.verdict_path, caps0, report.config,
                  json{{"fallback", report.fallback},
                       {"seconds", report.seconds},
                       {"rows", rows},
                       {"error", error},
                       {"deferred", report.deferred},
                       {"test_at_load", test_at_load}});
  };
  report.ran = true;
  for (int pass = 0;; ++pass) {
    // The runner's pipelines stay compiled for the model (Device::park_pipelines); a failing pass's device goes.
    d->park_pipelines(true);
    std::vector<SelftestRow> rows = runner(*d, request);
    d->park_pipelines(false);
    size_t failing = rows.size();
    for (size_t i = 0; i < rows.size(); ++i) {
      rows[i].tuning = report.fallback;
      if (!rows[i].pass && failing == rows.size()) failing = i;
    }
    const size_t first = report.rows.size();
    report.rows.insert(report.rows.end(), rows.begin(), rows.end());
    if (failing == rows.size()) break;
    SelftestRow& bad = report.rows[first + failing];
    const std::string step = next_fallback(bad, d->tuning());
    if (step.empty() || pass >= 8) {
      const std::string msg = failure_message(bad, "no fallback is left for it");
      save(msg);
      return fail(msg);
    }
    bad.fallback = step;
    const std::string key = step.substr(0, step.find('='));
    report.fallback += (report.fallback.empty() ? "" : ",") + step;
    platform::log(LogLevel::warn, "self-test: op '" + bad.op + "' variant '" + bad.variant + "' failed (" +
                                      bad.failure + "): falling back to " + step + " and testing again");
    d.reset();
    try {
      d = Device::create(with_fallback(options, report.fallback));
    } catch (const Error& e) {
      const std::string msg = failure_message(bad, "its fallback " + step + " cannot be applied: " + e.what());
      save(msg);
      return fail(msg);
    }
    const TuningChoice* c = d->tuning().find(key);
    if (next_fallback(bad, d->tuning()) == step) {  // an override that wins over ContextOptions::tuning (DIFFVK_TUNING)
      const std::string msg = failure_message(
          bad, "its fallback " + step + " did not take (" + key + " = " + (c ? c->value + ": " + c->why : "?") + ")");
      save(msg);
      return fail(msg);
    }
    report.device = device_name(*d);
  }
  save("");
  leave_to_first_use(*d);
  platform::log(LogLevel::info, "self-test: " + std::to_string(report.rows.size()) + " op variants in " +
                                    std::to_string(report.seconds) + " s" +
                                    (report.fallback.empty() ? std::string(", every one passed")
                                                             : ", running with the fallback " + report.fallback) +
                                    (report.verdict_path.empty() ? "" : "; verdict in " + report.verdict_path));
  return d;
}

}  // namespace diffvk
