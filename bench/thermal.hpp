// diffvk_bench: the thermal zones the kernel exposes (/sys/class/thermal/thermal_zone*/temp + type),
// read before and after each case of the phone preset. Nothing is invented: a zone whose temp cannot be
// read says "not readable", and no zones at all gives {"state": "not readable", ...}.
#pragma once
#include <string>

#include "bench/ceilings.hpp"  // json

namespace diffvk::bench {

// {"state": "ok", "zones": [{"zone": "thermal_zone0", "type": "x86_pkg_temp", "temp_c": 41.5}, ...]};
// a zone without a readable temp has "state": "not readable" instead of temp_c.
json read_thermal(const std::string& root = "/sys/class/thermal");

}  // namespace diffvk::bench
