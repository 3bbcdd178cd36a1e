// Byte-level BPE from a Hugging Face tokenizer.json (GPT-2 / Llama-3 / o200k style): added tokens, the split
// pattern, the byte-to-unicode map, merges by rank, the post-processor template, the ByteLevel decoder.
#include <array>
#include <cstring>
#include <queue>
#include <unordered_map>

#include <nlohmann/json.hpp>

#include "tokenizer/tokenizer_bpe.hpp"

#include "io/bounded_json.hpp"

#include "tokenizer/tokenizer_added.hpp"
#include "tokenizer/tokenizer_files.hpp"
#include "tokenizer/tokenizer_pretok.hpp"
#include "tokenizer/tokenizer_unicode.hpp"

namespace diffvk::tok {
namespace {

using nlohmann::json;
constexpr int64_t kMaxVocab = 1 << 21;  // ids at or above are refused (a hostile id must not size an array)

// GPT-2's reversible byte -> printable character map.
std::array<uint32_t, 256> byte_to_unicode() {
  std::array<uint32_t, 256> m{};
  uint32_t extra = 256;
  for (uint32_t b = 0; b < 256; ++b) {
    const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
    m[b] = printable ? b : extra++;
  }
  return m;
}

class ByteLevelBpe final : public Tokenizer::Impl {
 public:
  ByteLevelBpe(const json& j, const std::string& path);
  std::vector<int32_t> encode(std::string_view text, bool add_special) const override;
  std::string decode(const int32_t* ids, size_t n) const override;
  int32_t token_id(const std::string& s) const {
    auto it = added_ids_.find(s);
    if (it != added_ids_.end()) return it->second;
    auto v = vocab_.find(s);
    return v == vocab_.end() ? -1 : v->second;
  }

 private:
  struct Merge {
    uint32_t rank;
    int32_t id;
  };
  static uint64_t key(int32_t a, int32_t b) { return (uint64_t(uint32_t(a)) << 32) | uint32_t(b); }
  void encode_piece(std::string_view piece, std::vector<int32_t>& out) const;
  void read_model(const json& m);
  void read_pre_tokenizer(const json& p);
  void read_post_processor(const json& p);
  int32_t check_id(const json& v, const std::string& what) const;
  [[noreturn]] void bad(const std::string& what) const { throw Error(Status::format_error, path_ + ": " + what); }
  [[noreturn]] void unsupported(const std::string& what) const {
    throw Error(Status::unsupported, path_ + ": " + what);
  }

  std::string path_;
  std::unordered_map<std::string, int32_t> vocab_, added_ids_;
  std::unordered_map<uint64_t, Merge> merges_;
  std::array<std::string, 256> byte_str_;  // byte -> its character (UTF-8)
  std::array<int32_t, 256> byte_id_{};
  std::vector<std::string> surface_;  // id -> the bytes it decodes to
  std::vector<uint8_t> known_;        // id is in the vocabulary or an added token
  AddedTokens added_;
  bool split_ = true, add_prefix_space_ = false, ignore_merges_ = false;
  SplitPattern pattern_ = SplitPattern::gpt2;
  std::vector<int32_t> prefix_, suffix_;  // the post-processor's single-sequence template
};

int32_t ByteLevelBpe::check_id(const json& v, const std::string& what) const {
  if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() >= kMaxVocab)
    bad(what + " has id " + printable(v.dump()) + " (ids must be integers in [0, " + std::to_string(kMaxVocab) + "))");
  return int32_t(v.get<int64_t>());
}

void ByteLevelBpe::read_model(const json& m) {
  if (!m.is_object()) bad("'model' must be an object");
  if (m.value("type", std::string("BPE")) != "BPE")
    unsupported("model type '" + printable(m.value("type", "")) + "' is not supported (only BPE)");
  if (!m.contains("vocab") || !m["vocab"].is_object()) bad("'model.vocab' must be an object");
  if (!m.contains("merges") || !m["merges"].is_array()) bad("'model.merges' must be an array");
  if (m.value("byte_fallback", false))
    unsupported("model.byte_fallback = true is not supported for tokenizer.json (byte-level BPE only)");
  for (const char* k : {"continuing_subword_prefix", "end_of_word_suffix"})
    if (m.contains(k) && !m[k].is_null() && !(m[k].is_string() && m[k].get<std::string>().empty()))
      unsupported(std::string("model.") + k + " is not supported (byte-level BPE only)");
  if (m.contains("dropout") && !m["dropout"].is_null() &&
      !(m["dropout"].is_number() && m["dropout"].get<double>() == 0.0))
    unsupported("model.dropout is not supported (inference only)");
  ignore_merges_ = m.value("ignore_merges", false);
  for (const auto& [text, id] : m["vocab"].items()) {
    const int32_t i = check_id(id, "vocab entry '" + printable(text) + "'");
    if (!vocab_.emplace(text, i).second) bad("vocab entry '" + printable(text) + "' appears twice");
  }
  uint32_t rank = 0;
  for (const auto& e : m["merges"]) {
    std::string a, b;
    if (e.is_string()) {
      const std::string s = e.get<std::string>();
      const size_t sp = s.find(' ');
      if (sp == std::string::npos || s.find(' ', sp + 1) != std::string::npos)
        bad("merge " + std::to_string(rank) + " '" + printable(s) + "' is not 'A B'");
      a = s.substr(0, sp), b = s.substr(sp + 1);
    } else if (e.is_array() && e.size() == 2 && e[0].is_string() && e[1].is_string()) {
      a = e[0].get<std::string>(), b = e[1].get<std::string>();
    } else {
      bad("merge " + std::to_string(rank) + " is neither 'A B' nor [\"A\", \"B\"]");
    }
    const auto ia = vocab_.find(a), ib = vocab_.find(b), ic = vocab_.find(a + b);
    if (ia == vocab_.end() || ib == vocab_.end() || ic == vocab_.end())
      bad("merge " + std::to_string(rank) + " ('" + printable(a) + "' '" + printable(b) +
          "') names a token that is not in the vocab");
    merges_.emplace(key(ia->second, ib->second), Merge{rank, ic->second});  // a repeated pair keeps its first rank
    ++rank;
  }
}

void ByteLevelBpe::read_pre_tokenizer(const json& p) {
  auto byte_level = [&](const json& b) {
    add_prefix_space_ = b.value("add_prefix_space", false);
    return b.value("use_regex", true);
  };
  if (!p.is_object()) unsupported("pre_tokenizer must be ByteLevel or Sequence[Split, ByteLevel]");
  const std::string type = p.value("type", "");
  if (type == "ByteLevel") {
    split_ = byte_level(p);
    pattern_ = SplitPattern::gpt2;
    return;
  }
  const json* list = type == "Sequence" && p.contains("pretokenizers") ? &p["pretokenizers"] : nullptr;
  if (!list || !list->is_array() || list->size() != 2 || !(*list)[0].is_object() || !(*list)[1].is_object() ||
      (*list)[0].value("type", "") != "Split" || (*list)[1].value("type", "") != "ByteLevel")
    unsupported("pre_tokenizer '" + printable(p.dump(), 120) +
                "' is not supported (ByteLevel, or Sequence[Split, ByteLevel])");
  const json& s = (*list)[0];
  // The matches as pieces: Isolated keeps them and what lies between, Removed with invert keeps the matches only.
  // The same here, as the patterns match every character (GPT-4o's conversion, which Phi-4-mini's follows, writes
  // the latter).
  const std::string behavior = s.value("behavior", "");
  const bool invert = s.value("invert", false);
  if (!(behavior == "Isolated" && !invert) && !(behavior == "Removed" && invert))
    unsupported("Split pre-tokenizer must have behavior Isolated with invert false, or Removed with invert true");
  if (!s.contains("pattern") || !s["pattern"].is_object() || !s["pattern"].contains("Regex") ||
      !s["pattern"]["Regex"].is_string())
    unsupported("Split pre-tokenizer must have a Regex pattern");
  pattern_ = split_pattern_from_regex(s["pattern"]["Regex"].get<std::string>());
  if (byte_level((*list)[1])) unsupported("Sequence[Split, ByteLevel(use_regex = true)] is not supported");
  split_ = true;
}

void ByteLevelBpe::read_post_processor(const json& p) {
  if (p.is_null()) return;
  if (!p.is_object()) bad("'post_processor' must be an object or null");
  const std::string type = p.value("type", "");
  if (type == "ByteLevel") return;  // offsets only
  if (type == "Sequence") {
    if (!p.contains("processors") || !p["processors"].is_array()) bad("post_processor Sequence without 'processors'");
    for (const auto& q : p["processors"]) read_post_processor(q);
    return;
  }
  if (type != "TemplateProcessing")
    unsupported("post_processor '" + printable(type) + "' is not supported (ByteLevel, TemplateProcessing)");
  if (!p.contains("single") || !p["single"].is_array()) bad("TemplateProcessing without a 'single' list");
  bool seen_a = false;
  for (const auto& item : p["single"]) {
    if (item.is_object() && item.contains("Sequence")) {
      if (seen_a) bad("TemplateProcessing 'single' holds the sequence twice");
      seen_a = true;
    } else if (item.is_object() && item.contains("SpecialToken") && item["SpecialToken"].is_object() &&
               item["SpecialToken"].contains("id") && item["SpecialToken"]["id"].is_string()) {
      const std::string name = item["SpecialToken"]["id"].get<std::string>();
      const json* st =
          p.contains("special_tokens") && p["special_tokens"].is_object() && p["special_tokens"].contains(name)
              ? &p["special_tokens"][name]
              : nullptr;
      if (!st || !st->is_object() || !st->contains("ids") || !(*st)["ids"].is_array())
        bad("TemplateProcessing names special token '" + printable(name) + "' without its ids in 'special_tokens'");
      for (const auto& id : (*st)["ids"])
        (seen_a ? suffix_ : prefix_).push_back(check_id(id, "special token '" + printable(name) + "'"));
    } else {
      bad("TemplateProcessing 'single' item '" + printable(item.dump(), 80) + "' is neither SpecialToken nor Sequence");
    }
  }
  if (!seen_a) bad("TemplateProcessing 'single' has no sequence");
}

ByteLevelBpe::ByteLevelBpe(const json& j, const std::string& path) : path_(path) {
  kind = "byte-level BPE";
  if (!j.contains("model")) bad("'model' is missing");
  read_model(j["model"]);
  if (j.contains("normalizer") && !j["normalizer"].is_null())
    unsupported("normalizer '" + printable(j["normalizer"].dump(), 80) +
                "' is not supported (byte-level BPE without a normalizer only)");
  if (!j.contains("pre_tokenizer")) bad("'pre_tokenizer' is missing");
  read_pre_tokenizer(j["pre_tokenizer"]);
  if (!j.contains("decoder") || !j["decoder"].is_object() || j["decoder"].value("type", "") != "ByteLevel")
    unsupported("decoder must be ByteLevel");
  if (j.contains("post_processor")) read_post_processor(j["post_processor"]);
  // Added tokens.
  std::vector<std::pair<int32_t, std::string>> added;
  if (j.contains("added_tokens")) {
    if (!j["added_tokens"].is_array()) bad("'added_tokens' must be an array");
    if (j["added_tokens"].size() > size_t(kMaxVocab))
      bad("'added_tokens' has " + std::to_string(j["added_tokens"].size()) + " entries, more than the limit of " +
          std::to_string(kMaxVocab));
    for (const auto& t : j["added_tokens"]) {
      if (!t.is_object() || !t.contains("content") || !t["content"].is_string() || !t.contains("id"))
        bad("an added token lacks 'content' or 'id'");
      const std::string content = t["content"].get<std::string>();
      const int32_t id = check_id(t["id"], "added token '" + printable(content) + "'");
      if (content.empty()) bad("an added token (id " + std::to_string(id) + ") is empty");
      if (t.value("single_word", false))
        unsupported("added token '" + printable(content) + "': single_word is not supported");
      added_.add({content, id, t.value("lstrip", false), t.value("rstrip", false)});
      added_ids_[content] = id;
      added.emplace_back(id, content);
    }
  }
  // Byte map, ids, surfaces.
  const auto b2u = byte_to_unicode();
  std::unordered_map<uint32_t, uint8_t> u2b;
  for (uint32_t b = 0; b < 256; ++b) {
    append_utf8(byte_str_[b], b2u[b]);
    u2b[b2u[b]] = uint8_t(b);
    auto it = vocab_.find(byte_str_[b]);
    if (it == vocab_.end())
      bad("the vocab lacks the byte-level character of byte " + std::to_string(b) + " (not a byte-level BPE?)");
    byte_id_[b] = it->second;
  }
  int64_t size = 0;
  for (const auto& [t, id] : vocab_) size = std::max<int64_t>(size, id + 1);
  for (const auto& [id, t] : added) size = std::max<int64_t>(size, id + 1);
  vocab_size = uint32_t(size);
  surface_.assign(vocab_size, {});
  known_.assign(vocab_size, 0);
  auto set_surface = [&](int32_t id, const std::string& text) {
    std::string bytes;  // the ByteLevel decoder: every character mapped back, else the text as is
    for (size_t i = 0; i < text.size();) {
      const auto u = next_utf8(text, i);
      auto it = u2b.find(u.cp);
      if (it == u2b.end()) {
        bytes = text;
        break;
      }
      bytes += char(it->second);
      i += u.len;
    }
    surface_[id] = bytes;
    known_[id] = 1;
  };
  for (const auto& [t, id] : vocab_) set_surface(id, t);
  for (const auto& [id, t] : added) set_surface(id, t);
  for (int32_t id : prefix_)
    if (uint32_t(id) >= vocab_size) bad("post_processor names id " + std::to_string(id) + " outside the vocabulary");
  for (int32_t id : suffix_)
    if (uint32_t(id) >= vocab_size) bad("post_processor names id " + std::to_string(id) + " outside the vocabulary");
}

void ByteLevelBpe::encode_piece(std::string_view piece, std::vector<int32_t>& out) const {
  if (piece.empty()) return;
  if (ignore_merges_) {
    std::string mapped;
    for (unsigned char ch : piece) mapped += byte_str_[ch];
    auto it = vocab_.find(mapped);
    if (it != vocab_.end()) return out.push_back(it->second);
  }
  struct Sym {
    int32_t id;
    int prev, next;
  };
  std::vector<Sym> s(piece.size());
  for (size_t i = 0; i < piece.size(); ++i)
    s[i] = {byte_id_[static_cast<unsigned char>(piece[i])], int(i) - 1, int(i) + 1};
  s.back().next = -1;
  struct Cand {
    uint32_t rank;
    int pos;
    int32_t id;  // the merged id
    bool operator>(const Cand& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
  };
  std::priority_queue<Cand, std::vector<Cand>, std::greater<Cand>> q;
  auto push = [&](int pos) {
    if (pos < 0 || s[pos].next < 0) return;
    auto it = merges_.find(key(s[pos].id, s[s[pos].next].id));
    if (it != merges_.end()) q.push({it->second.rank, pos, it->second.id});
  };
  for (int i = 0; i + 1 < int(s.size()); ++i) push(i);
  while (!q.empty()) {
    const Cand c = q.top();
    q.pop();
    const int nx = s[c.pos].next;
    if (s[c.pos].id < 0 || nx < 0) continue;
    auto it = merges_.find(key(s[c.pos].id, s[nx].id));
    if (it == merges_.end() || it->second.id != c.id) continue;  // stale: a neighbour merged first
    s[c.pos].id = c.id;
    s[c.pos].next = s[nx].next;
    if (s[nx].next >= 0) s[s[nx].next].prev = c.pos;
    s[nx].id = -1;
    push(s[c.pos].prev);
    push(c.pos);
  }
  for (int i = 0; i >= 0; i = s[i].next) out.push_back(s[i].id);
}

std::vector<int32_t> ByteLevelBpe::encode(std::string_view text, bool add_special) const {
  std::vector<int32_t> ids;
  if (add_special) ids = prefix_;
  std::string prefixed;
  for (const Segment& seg : added_.split(text)) {
    if (seg.id >= 0) {
      ids.push_back(seg.id);
      continue;
    }
    std::string_view t = seg.text;
    if (add_prefix_space_ && !t.empty() && t[0] != ' ') t = prefixed = " " + std::string(t);
    if (!split_) {
      encode_piece(t, ids);
      continue;
    }
    for (std::string_view piece : split(t, pattern_)) encode_piece(piece, ids);
  }
  if (add_special) ids.insert(ids.end(), suffix_.begin(), suffix_.end());
  return ids;
}

std::string ByteLevelBpe::decode(const int32_t* ids, size_t n) const {
  std::string out;
  for (size_t i = 0; i < n; ++i) {
    if (ids[i] < 0 || uint32_t(ids[i]) >= vocab_size || !known_[ids[i]])
      throw Error(Status::invalid_argument, "decode: id " + std::to_string(ids[i]) + " at index " + std::to_string(i) +
                                                " is not in the vocabulary (size " + std::to_string(vocab_size) + ")");
    out += surface_[ids[i]];
  }
  return out;
}

}  // namespace

std::unique_ptr<Tokenizer::Impl> parse_hf_json(std::string_view text, const std::string& name) {
  const json j = parse_json(text.data(), text.size(), name, kJsonTokenizerMaxBytes);
  if (!j.is_object()) throw Error(Status::format_error, name + ": top level must be an object");
  try {
    return std::make_unique<ByteLevelBpe>(j, name);
  } catch (const json::exception& e) {  // a field of an unexpected type that the checks above missed
    throw Error(Status::format_error, name + ": " + printable(e.what(), 300));
  }
}

std::unique_ptr<Tokenizer::Impl> hf_json_with_configs(std::string_view text, const std::string& name,
                                                      const SpecialConfigs& configs) {
  auto t = parse_hf_json(text, name);
  const auto* raw = static_cast<const ByteLevelBpe*>(t.get());
  const SpecialIds s = special_ids(configs, t->vocab_size, [raw](const std::string& x) { return raw->token_id(x); });
  t->bos = s.bos;
  t->eos = s.eos;
  return t;
}

std::unique_ptr<Tokenizer::Impl> load_hf_json(const std::string& path, const std::string& config_dir) {
  const std::string text = read_text_file(path, kJsonTokenizerMaxBytes);
  const DirConfigs files(config_dir);
  return hf_json_with_configs(text, path, files.configs);
}

}  // namespace diffvk::tok
