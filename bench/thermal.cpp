#include "bench/thermal.hpp"

#include <dirent.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <vector>

#include "bench/host_memory.hpp"

namespace diffvk::bench {

namespace {
// The first line of a small sysfs file, or "" when it cannot be read.
std::string read_line(const std::string& path) {
  std::string s = read_small_file(path, 256);
  const size_t nl = s.find('\n');
  if (nl != std::string::npos) s.resize(nl);
  return s;
}

std::vector<std::string> zone_names(const std::string& root) {
  std::vector<std::string> names;
  if (DIR* d = ::opendir(root.c_str())) {
    while (const dirent* e = ::readdir(d)) {
      const std::string n = e->d_name;
      if (n.rfind("thermal_zone", 0) == 0) names.push_back(n);
    }
    ::closedir(d);
  }
  // thermal_zone2 before thermal_zone10
  std::sort(names.begin(), names.end(), [](const std::string& x, const std::string& y) {
    return x.size() != y.size() ? x.size() < y.size() : x < y;
  });
  return names;
}
}  // namespace

json read_thermal(const std::string& root) {
  json zones = json::array();
  size_t readable = 0;
  for (const auto& name : zone_names(root)) {
    json z{{"zone", name}};
    const std::string type = read_line(root + "/" + name + "/type");
    z["type"] = type.empty() ? json(nullptr) : json(type);
    const std::string temp = read_line(root + "/" + name + "/temp");
    char* end = nullptr;
    errno = 0;
    const long milli = temp.empty() ? 0 : std::strtol(temp.c_str(), &end, 10);
    if (temp.empty() || errno || !end || *end != '\0') {
      z["state"] = "not readable";
    } else {
      z["temp_c"] = double(milli) / 1000.0;  // the kernel reports millidegrees Celsius
      ++readable;
    }
    zones.push_back(z);
  }
  json j;
  j["state"] = readable ? "ok" : "not readable";
  if (!readable)
    j["reason"] = zones.empty() ? "no " + root + "/thermal_zone* on this system" : "no zone's temp could be read";
  j["zones"] = zones;
  return j;
}

}  // namespace diffvk::bench
