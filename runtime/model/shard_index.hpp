// model.safetensors.index.json: which shard file holds each tensor of a Hugging Face checkpoint.
#pragma once
#include <cstddef>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "io/safetensors.hpp"

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

// A tensor of an opened checkpoint: the file that holds it and its header entry.
struct LocatedTensor {
  const SafetensorsFile* file = nullptr;
  const TensorInfo* info = nullptr;
};
// A Hugging Face checkpoint directory's weights: <dir>/model.safetensors, or the shards that
// <dir>/model.safetensors.index.json names (each opened, memory-mapped, once). `where` gets every tensor of every
// file. format_error naming the tensor: one in two files, one in a shard other than the index says, one the index
// lists that its shard lacks. Shared by the DiffLlama and phi4flash readers.
std::vector<std::unique_ptr<SafetensorsFile>> open_safetensors_files(const std::string& dir,
                                                                     std::map<std::string, LocatedTensor>& where);

}  // namespace diffvk
