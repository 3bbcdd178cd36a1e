// The device allow/deny table: rows keyed on vendor id, an optional device-name substring, the driver id and an
// optional driver-version range, each switching tuning features off (the kill switches of runtime/vk/tuning.cpp)
// with a one-line reason citing the public report. Pure functions of DeviceCaps. How to add a row: README.md here.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "diffvk/device.hpp"

namespace diffvk {

struct DeviceRule {
  const char* name;              // the rule's name (tuning override rule=NAME forces it, rule=-NAME drops it)
  const char* reason;            // one line: what was seen where, citing the public report
  uint32_t vendor_id;            // VkPhysicalDeviceProperties::vendorID
  const char* device = nullptr;  // a case-insensitive substring of the device name; nullptr: every device
  uint32_t driver_id = 0;        // VkDriverId; 0: every driver
  // [driver_version_min, driver_version_max) of VkPhysicalDeviceProperties::driverVersion as the driver encodes it
  // (Mesa: VK_MAKE_VERSION(major, minor, patch)); 0: open at that end.
  uint32_t driver_version_min = 0, driver_version_max = 0;
  // The tuning keys of the row (int_dot, fp16, subgroup, kv_staging, coopmat): a deny row switches them off; an allow
  // row keeps them as the caps decide on the devices it matches, whatever a deny row says (a driver version that
  // fixed what a broader deny row names).
  std::vector<const char*> keys;
  bool allow = false;
};

// The table, in its order.
const std::vector<DeviceRule>& device_rules();
// Whether `rule` matches `caps` (vendor, device substring, driver id, driver-version range). Pure.
bool device_rule_matches(const DeviceRule& rule, const DeviceCaps& caps);
// The deny rows of `rules` that match `caps`, in table order (allow rows are not listed; see deny_rule_for). Pure.
std::vector<const DeviceRule*> matching_device_rules(const DeviceCaps& caps,
                                                     const std::vector<DeviceRule>& rules = device_rules());
// The row of the table named `name`; nullptr when there is none.
const DeviceRule* find_device_rule(const std::string& name);
// Whether the row names `key`.
bool device_rule_has_key(const DeviceRule& rule, const std::string& key);
// The first of `denies` (deny rows in force) that switches `key` off on `caps`, unless an allow row of `rules`
// that names `key` matches `caps`; nullptr when none does. Pure.
const DeviceRule* deny_rule_for(const std::string& key, const DeviceCaps& caps,
                                const std::vector<const DeviceRule*>& denies,
                                const std::vector<DeviceRule>& rules = device_rules());

}  // namespace diffvk
