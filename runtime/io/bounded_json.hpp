// The one JSON entry point of the runtime: every JSON reader (config.json, the shard index,
// tokenizer files, memory loads, the safetensors header) parses through parse_json, which bounds the
// nesting depth (kJsonMaxDepth) and the text's size (the caller's limit), so that no input can exhaust
// the stack (a value nested 10^5 levels deep) or memory. The limits are listed in docs/limits.md.
#pragma once
#include <cstddef>
#include <string>

#include <nlohmann/json.hpp>

namespace diffvk {

// Containers (objects and arrays) that may be open at once; the 65th is refused.
inline constexpr int kJsonMaxDepth = 64;
// Size limits of the JSON files: config.json and tokenizer_config.json, the shard index
// (model.safetensors.index.json), tokenizer.json.
inline constexpr size_t kJsonConfigMaxBytes = size_t(16) << 20;
inline constexpr size_t kJsonIndexMaxBytes = size_t(64) << 20;
inline constexpr size_t kJsonTokenizerMaxBytes = size_t(256) << 20;

// Parses [data, data + size) as one JSON value. Throws Error(format_error) naming `name` when the text
// is larger than max_bytes ("<name>: JSON text of N bytes is larger than the limit of M bytes"), nests
// deeper than kJsonMaxDepth ("<name>: JSON nests deeper than 64 levels (at byte offset N)") or is not
// valid JSON ("<name>: invalid JSON (...)"). `extra`, when given, sees the object_start, array_start
// (after the depth check) and key events with the number of containers open, as nlohmann's parser
// callback would (the safetensors header's duplicate-key check); its return value is ignored and an
// Error it throws goes through unchanged.
nlohmann::json parse_json(const char* data, size_t size, const std::string& name, size_t max_bytes,
                          const nlohmann::json::parser_callback_t& extra = nullptr);
inline nlohmann::json parse_json(const std::string& text, const std::string& name, size_t max_bytes) {
  return parse_json(text.data(), text.size(), name, max_bytes);
}

// The integer `v` of key `key` in [lo, hi] (hi < 2^32), else Error(format_error, "<name>: '<key>' must be an integer"
// or "... = <value> is out of range [lo, hi]"). Unsigned and negative values are compared apart (get<int64_t>() would
// wrap 2^64 - 1 to -1). The config readers' one range check.
uint32_t json_uint_in_range(const nlohmann::json& v, const std::string& name, const std::string& key, uint64_t lo,
                            uint64_t hi);

}  // namespace diffvk
