// The one tuning path: the environment's one reader, the DIFFVK_TUNING parser, and the resolution of a
// device's Tuning (include/diffvk/device.hpp) from its caps, its quirks and the overrides. Keys: README.md here.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "diffvk/device.hpp"

namespace diffvk {

// Everything the library reads from the environment, read by this one function of the device layer (nothing below
// it calls getenv; platform/ reads its own platform facts: DIFFVK_LOG, XDG_CACHE_HOME, HOME). Read afresh whenever
// an instance or a device is created, so that a variable set between two contexts applies to the second.
struct DeviceEnvironment {
  std::string device;      // DIFFVK_DEVICE
  std::string validation;  // DIFFVK_VALIDATION
  std::string tuning;      // DIFFVK_TUNING
  std::string selftest;    // DIFFVK_SELFTEST: the self-test's mode where ContextOptions::selftest is auto
                           // (runtime/vk/selftest.cpp)
  // The older variables, each an alias of one DIFFVK_TUNING key: {variable, value} of those set and not empty.
  std::vector<std::pair<std::string, std::string>> aliases;
  std::vector<std::string> icd_files;  // the Vulkan loader's VK_DRIVER_FILES, VK_ICD_FILENAMES, VK_ADD_DRIVER_FILES
};
DeviceEnvironment read_device_environment();

// The kernel with subgroup variants that `op` names (a kernel: linear, attention, head_rmsnorm, layer_norm,
// attn_probs; or a case-table op of one: linear_row, linear_row_rope, diff_attn, diff_v2_attn): the value of the tuning
// key subgroup_off. nullptr for any other name.
const char* subgroup_kernel_of(const std::string& op);

// The alias variables and their keys: {"DIFFVK_COOPMAT", "coopmat"}, ...
const std::vector<std::pair<const char*, const char*>>& tuning_aliases();

// One override: key, value, and where it came from ("DIFFVK_TUNING", "ContextOptions::tuning",
// "ContextOptions::force_quirks", or an alias variable such as "DIFFVK_COOPMAT").
struct TuningOverride {
  std::string key, value, source;
  std::string setting() const;  // how the user wrote it: "DIFFVK_COOPMAT=on", "coopmat=on (DIFFVK_TUNING)"
};

// Parses "key=value,..." (spaces around items ignored, empty items skipped). Pure. Throws Error(invalid_argument)
// naming the key and `source` for an unknown key, a bad value, or an item without '='.
std::vector<TuningOverride> parse_tuning(const std::string& text, const std::string& source);

// The overrides of `options` and `env`, in the order they apply (a later one wins for its key; quirk= adds up):
// force_quirks, options.tuning, the alias variables, DIFFVK_TUNING. Logs each alias as an alias.
std::vector<TuningOverride> tuning_overrides(const ContextOptions& options, const DeviceEnvironment& env);

// The ContextOptions::simulate_* limits (heap, maxStorageBufferRange, maxMemoryAllocationSize, subgroup size) applied
// to `caps`, the probed caps with the driver's quirks, before apply_tuning: everything planned from the caps then
// plans for the simulated device, and caps.simulated lists what is simulated. Device::create and resolve_tuning call
// it. A simulated subgroup size other than the hardware's one size turns off subgroup operations, subgroup size
// control and cooperative matrices (caps.subgroup_hardware_size, and the note of each). Throws Error
// (invalid_argument) for a simulated subgroup size that is not a power of two up to 128, Error(unsupported) for one
// above the device's workgroup limits.
void simulate_limits(DeviceCaps& caps, const ContextOptions& options);

// Resolves the tuning of `caps` (probed, driver quirks applied) under `overrides`, and applies it to `caps`: the
// quirks an override adds or drops, the cooperative-matrix shape that coopmat=off removes, the integer dot products
// that int_dot=off removes; the device rule table's deny rows (runtime/vk/device_rules.cpp) switch features off
// below the overrides (rule=-NAME drops a row, rule=NAME forces one). Throws Error
// (invalid_argument) as parse_tuning, and Error(unsupported) naming the setting where cooperative matrices are
// forced on a device without a usable shape.
Tuning apply_tuning(DeviceCaps& caps, const std::vector<TuningOverride>& overrides);

// The context's precision over the resolved tuning (the one place that decides fp16): Precision::fp16 where fp16 is
// off is Error(unsupported) saying why; fp32 turns fp16 off; without fp16 the cooperative matrices go too (their
// shaders take fp16), saying why. Device::create and resolve_tuning call it after apply_tuning.
void apply_precision(Tuning& t, DeviceCaps& caps, Precision precision);

// An fp32 device uses no cooperative matrices (their shaders take fp16): zeroes the caps' shape and turns the
// tuning's coopmat off, saying why.
void tuning_without_coopmat(Tuning& t, DeviceCaps& caps, const std::string& why);

}  // namespace diffvk
