// The helpers the tokenizer kinds share: bounded file reads and BOS/EOS from the configs of a model
// directory or their bytes (tokenizer_files.hpp).
#include "tokenizer/tokenizer_files.hpp"

#include <nlohmann/json.hpp>

#include "diffvk/error.hpp"
#include "io/bounded_json.hpp"
#include "platform.hpp"

namespace diffvk::tok {

std::string read_text_file(const std::string& path, uint64_t max_bytes) {
  const auto b = platform::read_file(path, max_bytes);
  return std::string(b.begin(), b.end());
}

// stat only: opening would block on a FIFO. Whatever is there is then read by read_file, which refuses
// anything but a regular file with an error naming it.
bool exists(const std::string& path) { return platform::file_exists(path); }

namespace {

nlohmann::json json_object(const ConfigText& c) {
  const nlohmann::json j = parse_json(c.text->data(), c.text->size(), c.name, kJsonConfigMaxBytes);
  if (!j.is_object()) throw Error(Status::format_error, c.name + ": top level must be an object");
  return j;
}

}  // namespace

DirConfigs::DirConfigs(const std::string& dir) {
  if (dir.empty()) return;
  ConfigText* which[2] = {&configs.tokenizer_config, &configs.config};
  const char* file[2] = {"/tokenizer_config.json", "/config.json"};
  for (int i = 0; i < 2; ++i) {
    which[i]->name = dir + file[i];
    if (!exists(which[i]->name)) continue;
    bytes_[i] = read_text_file(which[i]->name, kJsonConfigMaxBytes);
    which[i]->text = std::string_view(bytes_[i]);
  }
}

SpecialIds special_ids(const SpecialConfigs& configs, uint32_t vocab_size,
                       const std::function<int32_t(const std::string&)>& lookup) {
  SpecialIds ids;
  if (const ConfigText& tc = configs.tokenizer_config; tc.text) {
    const auto j = json_object(tc);
    for (auto [key, field] : {std::pair<const char*, int32_t*>{"bos_token", &ids.bos}, {"eos_token", &ids.eos}}) {
      if (!j.contains(key) || j[key].is_null()) continue;
      const auto& v = j[key];
      const auto* text = v.is_string()                                                          ? &v
                         : (v.is_object() && v.contains("content") && v["content"].is_string()) ? &v["content"]
                                                                                                : nullptr;
      if (!text)
        throw Error(Status::format_error,
                    tc.name + ": '" + key + "' must be a string or an object with a string 'content'");
      *field = lookup(text->get<std::string>());
      if (*field < 0)
        throw Error(Status::format_error, tc.name + ": '" + key + "' = '" + printable(text->get<std::string>()) +
                                              "' is not a token of the vocabulary");
    }
  }
  if (const ConfigText& cc = configs.config; cc.text) {
    const auto j = json_object(cc);
    for (auto [key, field] : {std::pair<const char*, int32_t*>{"bos_token_id", &ids.bos}, {"eos_token_id", &ids.eos}}) {
      if (*field >= 0 || !j.contains(key) || j[key].is_null()) continue;
      auto v = j[key];
      if (v.is_array() && !v.empty()) v = v[0];  // Llama-3.1 lists several EOS ids: the first is the main one
      if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() >= int64_t(vocab_size))
        throw Error(Status::format_error, cc.name + ": '" + key +
                                              "' is not a token id below the tokenizer's vocabulary size " +
                                              std::to_string(vocab_size));
      *field = int32_t(v.get<int64_t>());
    }
  }
  return ids;
}

}  // namespace diffvk::tok
