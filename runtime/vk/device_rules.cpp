// The device allow/deny table (device_rules.hpp): rows keyed on vendor, device name, driver id and driver version,
// each switching tuning features off with a reason citing the public report. How to add a row: README.md here.
#include "vk/device_rules.hpp"

#include <algorithm>
#include <cctype>
#include <cstring>

namespace diffvk {

namespace {
constexpr uint32_t kVendorImagination = 0x1010;

std::string lower(const char* s) {
  std::string out(s ? s : "");
  for (char& ch : out) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return out;
}
}  // namespace

const std::vector<DeviceRule>& device_rules() {
  static const std::vector<DeviceRule> rules = {
      {"powervr_token_zero",
       "Pixel 10 Pro (Tensor G5, PowerVR DXT-48-1536): llama.cpp's Vulkan backend generated token id 0 at every step "
       "until cooperative matrices and integer dot products were disabled (ggml-org/llama.cpp#28502); the report "
       "gives no driver version, so every Imagination device and driver",
       kVendorImagination,
       nullptr,
       0,
       0,
       0,
       {"coopmat", "int_dot"}},
  };
  return rules;
}

bool device_rule_matches(const DeviceRule& r, const DeviceCaps& c) {
  if (c.vendor_id != r.vendor_id) return false;
  if (r.device && lower(c.name.c_str()).find(lower(r.device)) == std::string::npos) return false;
  if (r.driver_id && c.driver_id != r.driver_id) return false;
  if (r.driver_version_min && c.driver_version < r.driver_version_min) return false;
  if (r.driver_version_max && c.driver_version >= r.driver_version_max) return false;
  return true;
}

std::vector<const DeviceRule*> matching_device_rules(const DeviceCaps& caps, const std::vector<DeviceRule>& rules) {
  std::vector<const DeviceRule*> out;
  for (const DeviceRule& r : rules)
    if (!r.allow && device_rule_matches(r, caps)) out.push_back(&r);
  return out;
}

const DeviceRule* find_device_rule(const std::string& name) {
  for (const DeviceRule& r : device_rules())
    if (name == r.name) return &r;
  return nullptr;
}

bool device_rule_has_key(const DeviceRule& r, const std::string& key) {
  return std::any_of(r.keys.begin(), r.keys.end(), [&](const char* k) { return key == k; });
}

const DeviceRule* deny_rule_for(const std::string& key, const DeviceCaps& caps,
                                const std::vector<const DeviceRule*>& denies, const std::vector<DeviceRule>& rules) {
  for (const DeviceRule& r : rules)
    if (r.allow && device_rule_has_key(r, key) && device_rule_matches(r, caps)) return nullptr;
  for (const DeviceRule* r : denies)
    if (device_rule_has_key(*r, key)) return r;
  return nullptr;
}

}  // namespace diffvk
