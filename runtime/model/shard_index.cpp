#include "model/shard_index.hpp"

#include <set>

#include <nlohmann/json.hpp>

#include "diffvk/error.hpp"
#include "io/bounded_json.hpp"
#include "platform.hpp"

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

std::vector<std::unique_ptr<SafetensorsFile>> open_safetensors_files(const std::string& dir,
                                                                     std::map<std::string, LocatedTensor>& where) {
  std::vector<std::unique_ptr<SafetensorsFile>> files;
  const std::string index = dir + "/model.safetensors.index.json";
  std::map<std::string, std::string> weight_map;  // tensor -> shard file name
  std::vector<std::string> names;
  if (platform::file_exists(index)) {  // read_file refuses anything but a regular file
    const auto bytes = platform::read_file(index, kJsonIndexMaxBytes);
    ShardIndex si = parse_shard_index(reinterpret_cast<const char*>(bytes.data()), bytes.size(), index);
    weight_map = std::move(si.weight_map);
    names = std::move(si.shards);
  } else {
    names.push_back("model.safetensors");
  }
  for (const auto& n : names) {
    files.push_back(std::make_unique<SafetensorsFile>(SafetensorsFile::open(dir + "/" + n)));
    for (const auto& t : files.back()->tensors()) {
      if (where.count(t.name))
        throw Error(Status::format_error,
                    files.back()->name() + ": tensor '" + t.name + "' is also in " + where[t.name].file->name());
      if (!weight_map.empty() && weight_map.count(t.name) && weight_map[t.name] != n)
        throw Error(Status::format_error, files.back()->name() + ": tensor '" + t.name + "' is listed in " + index +
                                              " under " + weight_map[t.name]);
      where[t.name] = {files.back().get(), &t};
    }
  }
  for (const auto& [tensor, f] : weight_map)
    if (!where.count(tensor)) throw Error(Status::format_error, index + ": tensor '" + tensor + "' is not in " + f);
  return files;
}
}  // namespace diffvk
