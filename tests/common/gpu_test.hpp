// Shared helpers for GPU tests: a validated context, random data, poisoning, comparisons.
#pragma once
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "diffvk/device.hpp"
#include "vk/gpu.hpp"

namespace diffvk::test {

// Context with validation (and sync validation) on; any validation warning/error fails the running
// test case. precision: automatic / fp16 / fp32 (fp16 on a device without it -> test is skipped by caller).
ContextOptions validated_options(Precision precision = Precision::automatic);
std::unique_ptr<Context> make_context(Precision precision = Precision::automatic, bool force_no_subgroup = false);
int validation_message_count();

// Reports the running test case as skipped (the device cannot run it): prints `why` and, when every
// test case of the process was skipped, the process exits with kSkipExitCode, which CTest shows as
// "Skipped" (SKIP_RETURN_CODE), not "Passed". Call it, then return from the test case.
constexpr int kSkipExitCode = 77;
void skip(const std::string& why);
extern int g_cases_run, g_cases_skipped;
extern bool g_skip_current;

// While alive, every validation message that reaches the log ("validation: ..." at warn/error: contexts
// created through the C ABI, which have no callback) fails the running test case. Restores the default
// log sink on destruction.
struct FailOnLoggedValidation {
  FailOnLoggedValidation();
  ~FailOnLoggedValidation();
  FailOnLoggedValidation(const FailOnLoggedValidation&) = delete;
  FailOnLoggedValidation& operator=(const FailOnLoggedValidation&) = delete;
};

// Does the default test device support the fp16 path? (cached probe)
bool device_has_fp16();
// make_context(precision); for fp16 on a device without the fp16 path, skip() and null: the caller returns.
std::unique_ptr<Context> make_context_or_skip(Precision precision);
// fp32, then fp16 where the default test device supports it.
std::vector<Precision> supported_precisions();
bool device_has_subgroup_arithmetic();

std::vector<double> random_vector(std::mt19937_64& rng, size_t n, double lo = -1.0, double hi = 1.0);

// Packs doubles into the storage type (fp16 bits or fp32) as raw bytes, and back.
std::vector<uint8_t> pack(const std::vector<double>& v, bool fp16);
std::vector<double> unpack(const std::vector<uint8_t>& bytes, bool fp16);

// NaN poison pattern for outputs (0x7fc0/0x7fc07fc0 = quiet NaN in fp16 and (high half) fp32).
constexpr uint32_t kPoison = 0x7fc07fc0u;

struct Compare {
  double max_abs = 0, max_ref = 0, nmse = 0;
  size_t nonfinite = 0, worst_index = 0;
  std::string summary() const;
};
Compare compare(const std::vector<double>& got, const std::vector<double>& ref);
// docs/maths.md "How close is close enough", scale = max(1, max|ref|), against a float64
// reference from the same storage-rounded inputs:
//   one kernel:            fp32 max abs <= 2e-5*scale;  fp16 storage max abs <= 4e-3*scale and nmse <= 1e-6
//   a layer or a model:    fp32 max abs <= 1e-4*scale;  fp16 storage max abs <= 1e-2*scale and nmse <= 5e-6
// tests/ops/test_tolerances.cpp shows that planted faults (fp16 accumulation, a skipped online-softmax
// rescale, a dropped split) fail these bounds.
enum class Scope { kernel, layer };
bool within_spec(const Compare& c, bool fp16, Scope scope = Scope::kernel);

}  // namespace diffvk::test
