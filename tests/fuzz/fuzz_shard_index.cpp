// libFuzzer harness for the shard index reader (runtime/model/shard_index.cpp: model.safetensors.index.json
// of a Hugging Face checkpoint). Any input must parse or throw diffvk::Error; a parsed index must name
// only plain, non-empty shard file names, each once, and every weight_map entry must name one of them.
// Seeds: tests/fuzz/corpus/shard_index (tests/fuzz/make_shard_index_corpus.py).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <string>

#include "diffvk/error.hpp"
#include "model/shard_index.hpp"

using namespace diffvk;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  ShardIndex si;
  try {
    si = parse_shard_index(reinterpret_cast<const char*>(data), size, "fuzz.index.json");
  } catch (const Error&) {
    return 0;
  }
  const std::set<std::string> shards(si.shards.begin(), si.shards.end());
  bool bad = si.shards.empty() || shards.size() != si.shards.size() || si.weight_map.size() > kMaxIndexEntries;
  for (const auto& s : si.shards)
    bad = bad || s.empty() || s == "." || s == ".." || s.find('/') != std::string::npos ||
          s.find('\\') != std::string::npos;
  for (const auto& [tensor, f] : si.weight_map) bad = bad || !shards.count(f);
  if (bad) {
    std::fprintf(stderr, "fuzz_shard_index: accepted an index with an invalid shard list\n");
    std::abort();
  }
  return 0;
}
