// Shared helpers for GPU tests: a validated context, random data, poisoning, comparisons.
#pragma once
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "diffvk/device.hpp"
#include "gpu.hpp"

namespace diffvk::test {

// Context with validation (and sync validation) on; any validation warning/error fails the running
// test case. precision: automatic / fp16 / fp32 (fp16 on a device without it -> test is skipped by caller).
ContextOptions validated_options(Precision precision = Precision::automatic);
std::unique_ptr<Context> make_context(Precision precision = Precision::automatic, bool force_no_subgroup = false);
int validation_message_count();

// Does the default test device support the fp16 path? (cached probe)
bool device_has_fp16();
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
// SPEC.md tolerances: fp32 max abs <= 1e-4 * max(1, max|ref|); fp16 nmse <= 5e-4 and max abs <= 2e-2 * max(1, max|ref|).
// SPEC.md tolerances against a float64 reference of the storage-rounded inputs, scale = max(1, max|ref|):
// one kernel: fp32 max abs <= 2e-5·scale; fp16 storage max abs <= 4e-3·scale and nmse <= 1e-6.
bool within_spec(const Compare& c, bool fp16);
// a layer or a whole model: fp32 max abs <= 1e-4·scale; fp16 max abs <= 1e-2·scale and nmse <= 5e-6.
bool within_spec_layer(const Compare& c, bool fp16);

}  // namespace diffvk::test
