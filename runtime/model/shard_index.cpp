#include "model/shard_index.hpp"

#include <set>

#include <nlohmann/json.hpp>

#include "diffvk/error.hpp"
#include "io/bounded_json.hpp"

namespace diffvk {

ShardIndex parse_shard_index(const char* data, size_t size, const std::string& index) {
  const auto j = parse_json(data, size, index, kJsonIndexMaxBytes);
  if (!j.is_object() || !j.contains("weight_map") || !j["weight_map"].is_object())
    throw Error(Status::format_error, index + ": expected an object with a 'weight_map' object");
  if (j["weight_map"].size() > kMaxIndexEntries)
    throw Error(Status::format_error, index + ": weight_map has " + std::to_string(j["weight_map"].size()) +
                                          " entries, more than the limit of " + std::to_string(kMaxIndexEntries));
  ShardIndex out;
  std::set<std::string> shard_set;
  for (const auto& [tensor, file] : j["weight_map"].items()) {
    if (!file.is_string())
      throw Error(Status::format_error, index + ": weight_map['" + tensor + "'] must be a file name");
    const std::string f = file.get<std::string>();
    if (f.empty() || f.find('/') != std::string::npos || f.find('\\') != std::string::npos || f == "." || f == "..")
      throw Error(Status::format_error,
                  index + ": shard '" + f + "' must be a plain file name in the checkpoint directory");
    out.weight_map[tensor] = f;
    if (shard_set.insert(f).second) out.shards.push_back(f);  // first-seen order, in linear time
  }
  if (out.shards.empty()) throw Error(Status::format_error, index + ": weight_map is empty");
  return out;
}

}  // namespace diffvk
