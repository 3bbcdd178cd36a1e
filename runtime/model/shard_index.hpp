// model.safetensors.index.json: which shard file holds each tensor of a Hugging Face checkpoint.
#pragma once
#include <cstddef>
#include <map>
#include <string>
#include <vector>

namespace diffvk {

inline constexpr size_t kMaxIndexEntries = size_t(1) << 20;  // tensors in weight_map (docs/limits.md)

struct ShardIndex {
  std::map<std::string, std::string> weight_map;  // tensor -> shard file name (a plain name, no '/')
  std::vector<std::string> shards;                // distinct shard names, in first-seen order
};

// Parses the index's bytes (`name` is used in messages). Throws Error(format_error) naming the problem:
// invalid or oversized JSON, no 'weight_map' object, more than kMaxIndexEntries entries, a non-string
// or non-plain file name, an empty map. Linear in the input.
ShardIndex parse_shard_index(const char* data, size_t size, const std::string& name);

}  // namespace diffvk
