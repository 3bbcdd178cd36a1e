#include "gpu_test.hpp"

#include <doctest/doctest.h>

#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <sstream>

#include "io/half.hpp"
#include "platform.hpp"

namespace diffvk::test {

namespace {
std::atomic<int> g_messages{0};
}

int validation_message_count() { return g_messages.load(); }

FailOnLoggedValidation::FailOnLoggedValidation() {
  platform::set_log_sink([](platform::LogLevel level, const std::string& msg) {
    std::fprintf(stderr, "diffvk: [%s] %s\n", platform::log_level_name(level), msg.c_str());
    if (level >= platform::LogLevel::warn && msg.rfind("validation: ", 0) == 0) {
      ++g_messages;
      ADD_FAIL_CHECK_AT(__FILE__, __LINE__, "Vulkan validation message (logged): " << msg);
    }
  });
}
FailOnLoggedValidation::~FailOnLoggedValidation() { platform::set_log_sink(nullptr); }

int g_cases_run = 0, g_cases_skipped = 0;
bool g_skip_current = false;
void skip(const std::string& why) {
  MESSAGE("SKIPPED: " << why);
  g_skip_current = true;
}

ContextOptions validated_options(Precision precision) {
  ContextOptions o;
  o.validation = 1;
  o.precision = precision;
  o.on_validation_message = [](MessageSeverity s, const std::string& msg) {
    ++g_messages;
    ADD_FAIL_CHECK_AT(__FILE__, __LINE__,
                      "Vulkan validation " << (s == MessageSeverity::error ? "error" : "warning") << ": " << msg);
  };
  return o;
}

std::unique_ptr<Context> make_context(Precision precision, bool force_no_subgroup) {
  ContextOptions o = validated_options(precision);
  o.force_no_subgroup_arithmetic = force_no_subgroup;
  return Context::create(o);
}

std::unique_ptr<Context> make_context_or_skip(Precision precision) {
  if (precision == Precision::fp16 && !device_has_fp16()) {
    skip("device has no fp16 path; not run");
    return nullptr;
  }
  return make_context(precision);
}

namespace {
const DeviceCaps& default_caps() {
  static const DeviceCaps caps = [] {
    auto devs = list_devices();
    const char* env = std::getenv("DIFFVK_DEVICE");
    return devs[select_device(devs, env ? env : "")];
  }();
  return caps;
}
}  // namespace

bool device_has_fp16() { return default_caps().fp16_usable(); }
bool device_has_subgroup_arithmetic() { return default_caps().subgroup_arithmetic_compute; }

std::vector<Precision> supported_precisions() {
  if (device_has_fp16()) return {Precision::fp32, Precision::fp16};
  return {Precision::fp32};
}

std::vector<double> random_vector(std::mt19937_64& rng, size_t n, double lo, double hi) {
  std::uniform_real_distribution<double> d(lo, hi);
  std::vector<double> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

std::vector<uint8_t> pack(const std::vector<double>& v, bool fp16) {
  std::vector<uint8_t> out(v.size() * (fp16 ? 2 : 4));
  for (size_t i = 0; i < v.size(); ++i) {
    if (fp16) {
      uint16_t h = float_to_half(static_cast<float>(v[i]));
      std::memcpy(&out[i * 2], &h, 2);
    } else {
      float f = static_cast<float>(v[i]);
      std::memcpy(&out[i * 4], &f, 4);
    }
  }
  return out;
}

std::vector<double> unpack(const std::vector<uint8_t>& bytes, bool fp16) {
  const size_t es = fp16 ? 2 : 4;
  std::vector<double> v(bytes.size() / es);
  for (size_t i = 0; i < v.size(); ++i) {
    if (fp16) {
      uint16_t h;
      std::memcpy(&h, &bytes[i * 2], 2);
      v[i] = half_to_float(h);
    } else {
      float f;
      std::memcpy(&f, &bytes[i * 4], 4);
      v[i] = f;
    }
  }
  return v;
}

Compare compare(const std::vector<double>& got, const std::vector<double>& ref) {
  Compare c;
  REQUIRE(got.size() == ref.size());
  double se = 0, sr = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    c.max_ref = std::max(c.max_ref, std::fabs(ref[i]));
    if (!std::isfinite(got[i])) {
      ++c.nonfinite;
      c.max_abs = INFINITY;
      c.worst_index = i;
      continue;
    }
    const double e = std::fabs(got[i] - ref[i]);
    if (e > c.max_abs) {
      c.max_abs = e;
      c.worst_index = i;
    }
    se += e * e;
    sr += ref[i] * ref[i];
  }
  c.nmse = c.nonfinite ? INFINITY : (sr > 0 ? se / sr : se);
  return c;
}

bool within_spec(const Compare& c, bool fp16, Scope scope) {
  if (c.nonfinite) return false;
  const double scale = std::max(1.0, c.max_ref);
  const bool kernel = scope == Scope::kernel;
  if (fp16) return c.nmse <= (kernel ? 1e-6 : 5e-6) && c.max_abs <= (kernel ? 4e-3 : 1e-2) * scale;
  return c.max_abs <= (kernel ? 2e-5 : 1e-4) * scale;
}

std::string Compare::summary() const {
  std::ostringstream s;
  s << "max_abs=" << max_abs << " (at " << worst_index << ") max|ref|=" << max_ref << " nmse=" << nmse
    << " nonfinite=" << nonfinite;
  return s.str();
}

}  // namespace diffvk::test
