// Tokenizers in GGUF files (gguf_tokenizer.hpp, docs/gguf.md "Tokenizer").
#include "model/gguf_tokenizer.hpp"

#include <algorithm>
#include <map>

#include <nlohmann/json.hpp>

#include "io/bounded_json.hpp"
#include "io/printable.hpp"
#include "io/sentencepiece_model.hpp"
#include "platform.hpp"
#include "tokenizer/tokenizer_bpe.hpp"
#include "tokenizer/tokenizer_files.hpp"
#include "tokenizer/tokenizer_pretok.hpp"
#include "tokenizer/tokenizer_spm.hpp"

namespace diffvk {
namespace {
// A model key of a diffvk GGUF file: "phi4flash.<name>" in a phi4flash file, else "diffllama.<name>".
std::string model_key(const GgufFile& f, const std::string& name) {
  const GgufValue* a = f.find_value("general.architecture");
  const bool phi = a && a->type == GgufType::string && a->str == "phi4flash";
  return (phi ? "phi4flash." : "diffllama.") + name;
}

const std::string kT = "tokenizer.ggml.";
const std::string kHfJson = "tokenizer.huggingface.json";
constexpr uint64_t kMaxPieces = uint64_t(1) << 21;        // tokenizer_spm.cpp refuses more
const std::string kDefaultUnkSurface = " \xE2\x81\x87 ";  // sentencepiece's default (U+2047 between spaces)

// GGUF's token types (llama.cpp's llama_token_type) are sentencepiece's piece types, numbered alike.
using PieceType = SentencePieceModel::PieceType;
constexpr int32_t type_id(PieceType t) { return int32_t(t); }
constexpr int32_t normal = type_id(PieceType::normal), control = type_id(PieceType::control),
                  user_defined = type_id(PieceType::user_defined), unused = type_id(PieceType::unused),
                  byte = type_id(PieceType::byte);

void add_ids(GgufWriter& w, int32_t bos, int32_t eos) {
  if (bos >= 0) w.add_u32(kT + "bos_token_id", uint32_t(bos));
  if (eos >= 0) w.add_u32(kT + "eos_token_id", uint32_t(eos));
}

bool add_sentencepiece(GgufWriter& w, const std::string& path, std::string* why) {
  const std::vector<uint8_t> data = platform::read_file(path, 256u << 20);
  const SentencePieceModel m = parse_sentencepiece_model(data.data(), data.size(), path);
  const bool has_bytes = std::any_of(m.pieces.begin(), m.pieces.end(), [](const SentencePieceModel::Piece& p) {
    return p.type == SentencePieceModel::PieceType::byte;
  });
  // What the GGUF keys cannot say (the reader takes sentencepiece's defaults for these).
  if (m.treat_whitespace_as_suffix)
    *why = "treat_whitespace_as_suffix is on";
  else if (!m.escape_whitespaces)
    *why = "escape_whitespaces is off";
  else if (m.unk_surface != kDefaultUnkSurface)
    *why = "its unk_surface is not sentencepiece's default";
  else if (m.byte_fallback != has_bytes)
    *why = "byte_fallback is " + std::string(m.byte_fallback ? "on without" : "off with") + " byte pieces";
  if (!why->empty()) return false;
  std::vector<std::string> tokens;
  std::vector<float> scores;
  std::vector<int32_t> types;
  for (const auto& p : m.pieces) {
    tokens.push_back(p.text);
    scores.push_back(p.score);
    types.push_back(int32_t(p.type));
  }
  // llama.cpp's names: "llama" is its SentencePiece (BPE) vocabulary, "t5" its unigram one.
  w.add_string(kT + "model", m.model_type == SentencePieceModel::ModelType::bpe ? "llama" : "t5");
  w.add_string_array(kT + "tokens", tokens);
  w.add_f32_array(kT + "scores", scores);
  w.add_i32_array(kT + "token_type", types);
  w.add_u32(kT + "unknown_token_id", uint32_t(m.unk_id));
  w.add_bool(kT + "add_space_prefix", m.add_dummy_prefix);
  w.add_bool(kT + "remove_extra_whitespaces", m.remove_extra_whitespaces);
  w.add_bool(kT + "add_bos_token", m.bos_id >= 0);
  w.add_bool(kT + "add_eos_token", false);
  return true;
}

// add_bos / add_eos: whether encoding with special tokens adds them (the post-processor's template), for readers of
// the arrays (llama.cpp; diffvk without tokenizer.huggingface.json, tokenizer_json_of_arrays).
bool add_byte_level_bpe(GgufWriter& w, const std::string& path, bool add_bos, bool add_eos, std::string* why) {
  const std::string text = tok::read_text_file(path, kJsonTokenizerMaxBytes);
  if (text.size() > kGgufMaxStringBytes) {
    *why = "tokenizer.json is larger than a GGUF string may be (" + std::to_string(kGgufMaxStringBytes >> 20) + " MiB)";
    return false;
  }
  const nlohmann::json j = parse_json(text, path, kJsonTokenizerMaxBytes);  // Tokenizer::load checked its shape
  std::map<int64_t, std::pair<std::string, int32_t>> by_id;                 // id -> (text, type)
  for (const auto& [tok, id] : j["model"]["vocab"].items()) by_id[id.get<int64_t>()] = {tok, normal};
  if (j.contains("added_tokens"))
    for (const auto& t : j["added_tokens"])
      by_id[t["id"].get<int64_t>()] = {t["content"].get<std::string>(),
                                       t.value("special", false) ? control : user_defined};
  const int64_t n = by_id.empty() ? 0 : by_id.rbegin()->first + 1;
  std::vector<std::string> tokens(static_cast<size_t>(n));
  std::vector<int32_t> types(static_cast<size_t>(n), unused);
  for (int64_t i = 0; i < n; ++i) tokens[size_t(i)] = "[PAD" + std::to_string(i) + "]";  // ids the file leaves out
  for (const auto& [id, t] : by_id) tokens[size_t(id)] = t.first, types[size_t(id)] = t.second;
  std::vector<std::string> merges;
  for (const auto& e : j["model"]["merges"]) {
    const std::string a =
        e.is_string() ? e.get<std::string>() : e[0].get<std::string>() + " " + e[1].get<std::string>();
    if (!e.is_string() && (e[0].get<std::string>().find(' ') != std::string::npos ||
                           e[1].get<std::string>().find(' ') != std::string::npos)) {
      *why = "a merge holds a space, which GGUF's 'A B' merges cannot say";
      return false;
    }
    merges.push_back(a);
  }
  // tokenizer.ggml.pre, llama.cpp's name for the split pattern (the three diffvk implements).
  const nlohmann::json& p = j["pre_tokenizer"];
  bool prefix = false;
  std::string pre = "gpt-2";
  if (p.value("type", "") == "ByteLevel") {
    prefix = p.value("add_prefix_space", false);
  } else {
    const auto& split = p["pretokenizers"][0];
    prefix = p["pretokenizers"][1].value("add_prefix_space", false);
    const tok::SplitPattern sp = tok::split_pattern_from_regex(split["pattern"]["Regex"].get<std::string>());
    if (sp == tok::SplitPattern::llama3) pre = "llama-bpe";
    if (sp == tok::SplitPattern::o200k) pre = "gpt-4o";  // llama.cpp's name for the o200k (GPT-4o, Phi-4) pattern
  }
  w.add_string(kT + "model", "gpt2");
  w.add_string(kT + "pre", pre);
  w.add_string_array(kT + "tokens", tokens);
  w.add_i32_array(kT + "token_type", types);
  w.add_string_array(kT + "merges", merges);
  w.add_bool(kT + "add_space_prefix", prefix);
  w.add_bool(kT + "add_bos_token", add_bos);
  w.add_bool(kT + "add_eos_token", add_eos);
  w.add_string(kHfJson, text);  // what diffvk reads back: the whole file, so encoding is the file's exactly
  return true;
}

const GgufValue* array_of(const GgufFile& f, const std::string& key, GgufType elem, uint64_t count, bool required) {
  const GgufValue* v = f.find_value(key);
  if (!v) {
    if (required) throw Error(Status::format_error, f.name() + ": " + key + " is missing");
    return nullptr;
  }
  if (v->type != GgufType::array || v->elem != elem)
    throw Error(Status::format_error, f.name() + ": " + key + " must be an array of " +
                                          (elem == GgufType::string    ? "strings"
                                           : elem == GgufType::float32 ? "float32"
                                                                       : "int32"));
  if (count && v->count != count)
    throw Error(Status::format_error, f.name() + ": " + key + " has " + std::to_string(v->count) +
                                          " entries, tokenizer.ggml.tokens " + std::to_string(count));
  return v;
}

int32_t id_or(const GgufFile& f, const std::string& key, uint64_t n, int32_t none) {
  const GgufValue* v = f.find_value(key);
  if (!v) return none;
  const uint64_t id = v->as_u64(f.name() + ": " + key);
  if (id >= n)
    throw Error(Status::format_error, f.name() + ": " + key + " " + std::to_string(id) +
                                          " is outside the vocabulary (" + std::to_string(n) + ")");
  return int32_t(id);
}

bool flag_or(const GgufFile& f, const std::string& key, bool dflt) {
  const GgufValue* v = f.find_value(key);
  return v ? v->as_bool(f.name() + ": " + key) : dflt;
}

std::unique_ptr<Tokenizer::Impl> read_sentencepiece(const GgufFile& f, bool bpe, uint64_t vocab) {
  const GgufValue* tokens = array_of(f, kT + "tokens", GgufType::string, 0, true);
  const uint64_t n = tokens->count;
  if (n > kMaxPieces)  // before anything is sized by it
    throw Error(Status::format_error, f.name() + ": tokenizer.ggml.tokens has " + std::to_string(n) +
                                          " entries, more than " + std::to_string(kMaxPieces) +
                                          " (the SentencePiece limit)");
  if (n == 0 || n > vocab)
    throw Error(Status::format_error, f.name() + ": tokenizer.ggml.tokens has " + std::to_string(n) + " entries; " +
                                          model_key(f, "vocab_size") + " is " + std::to_string(vocab));
  const GgufValue* scores = array_of(f, kT + "scores", GgufType::float32, n, true);
  const GgufValue* types = array_of(f, kT + "token_type", GgufType::int32, n, true);
  SentencePieceModel m;
  m.model_type = bpe ? SentencePieceModel::ModelType::bpe : SentencePieceModel::ModelType::unigram;
  m.pieces.resize(size_t(n));
  for (uint64_t i = 0; i < n; ++i) {
    auto& p = m.pieces[size_t(i)];
    p.text = std::string(tokens->strings[size_t(i)]);
    p.score = float(scores->number_at(i));
    const int64_t t = types->integer_at(i);
    if (t < normal || t > byte)
      throw Error(Status::format_error, f.name() + ": tokenizer.ggml.token_type[" + std::to_string(i) + "] is " +
                                            std::to_string(t) +
                                            " (1-6: normal, unknown, control, user-defined, unused, byte)");
    p.type = SentencePieceModel::PieceType(t);
    m.byte_fallback |= p.type == SentencePieceModel::PieceType::byte;
  }
  m.unk_id = id_or(f, kT + "unknown_token_id", n, -1);
  if (m.unk_id < 0) throw Error(Status::format_error, f.name() + ": tokenizer.ggml.unknown_token_id is missing");
  m.bos_id = id_or(f, kT + "bos_token_id", n, -1);
  m.eos_id = id_or(f, kT + "eos_token_id", n, -1);
  m.add_dummy_prefix = flag_or(f, kT + "add_space_prefix", true);
  m.remove_extra_whitespaces = flag_or(f, kT + "remove_extra_whitespaces", true);
  return tok::make_sentencepiece(std::move(m), f.name() + " (tokenizer.ggml.*)");
}

// A byte-level BPE from llama.cpp's arrays alone (a file another writer made, without tokenizer.huggingface.json):
// the tokenizer.json they stand for, read by the same parser. Normal tokens (type 1) form the vocabulary,
// control (3) and user-defined (4) ones are added tokens (special: control), unused ones (5) are holes; the split
// pattern comes from tokenizer.ggml.pre ('gpt-2', 'llama-bpe', 'gpt-4o': the three diffvk implements; llama-bpe also
// takes whole-word vocabulary hits first, as Llama 3's ignore_merges), BOS/EOS around the text from add_bos_token /
// add_eos_token.
std::string tokenizer_json_of_arrays(const GgufFile& f, uint64_t vocab) {
  using nlohmann::json;
  const GgufValue* tokens = array_of(f, kT + "tokens", GgufType::string, 0, true);
  const uint64_t n = tokens->count;
  if (n == 0 || n > vocab)
    throw Error(Status::format_error, f.name() + ": tokenizer.ggml.tokens has " + std::to_string(n) + " entries; " +
                                          model_key(f, "vocab_size") + " is " + std::to_string(vocab));
  const GgufValue* types = array_of(f, kT + "token_type", GgufType::int32, n, true);
  const GgufValue* merges = array_of(f, kT + "merges", GgufType::string, 0, true);
  const GgufValue* pv = f.find_value(kT + "pre");
  const std::string pre = pv ? std::string(pv->as_string(f.name() + ": " + kT + "pre")) : "";
  if (pre != "gpt-2" && pre != "llama-bpe" && pre != "gpt-4o")
    throw Error(Status::unsupported, f.name() + ": a byte-level BPE tokenizer without " + kHfJson +
                                         " and with tokenizer.ggml.pre '" + printable(pre, 40) +
                                         "': diffvk implements the split patterns 'gpt-2', 'llama-bpe' and 'gpt-4o' "
                                         "only");
  const bool llama3 = pre == "llama-bpe", o200k = pre == "gpt-4o";
  json vocab_map = json::object(), added = json::array(), merge_list = json::array();
  for (uint64_t i = 0; i < n; ++i) {
    const int64_t t = types->integer_at(i);
    const std::string text(tokens->strings[size_t(i)]);
    if (t == normal) {
      if (vocab_map.contains(text))
        throw Error(Status::format_error, f.name() + ": tokenizer.ggml.tokens[" + std::to_string(i) + "] '" +
                                              printable(text, 40) + "' appears twice");
      vocab_map[text] = i;
    } else if (t == control || t == user_defined) {
      added.push_back(json{{"id", i}, {"content", text}, {"special", t == control}});
    } else if (t != unused) {
      throw Error(Status::format_error,
                  f.name() + ": tokenizer.ggml.token_type[" + std::to_string(i) + "] is " + std::to_string(t) +
                      " (a byte-level BPE has 1 normal, 3 control, 4 user-defined and 5 unused tokens)");
    }
  }
  for (uint64_t i = 0; i < merges->count; ++i) merge_list.push_back(std::string(merges->strings[size_t(i)]));
  json j;
  j["model"] = json{
      {"type", "BPE"}, {"vocab", std::move(vocab_map)}, {"merges", std::move(merge_list)}, {"ignore_merges", llama3}};
  json byte_level{{"type", "ByteLevel"},
                  {"add_prefix_space", flag_or(f, kT + "add_space_prefix", false)},
                  {"use_regex", !llama3 && !o200k}};
  if (o200k) {  // Phi-4-mini's structure: Split(Removed, invert) of the o200k pattern, then ByteLevel without regex
    json split{
        {"type", "Split"}, {"pattern", json{{"Regex", tok::kO200kPattern}}}, {"behavior", "Removed"}, {"invert", true}};
    j["pre_tokenizer"] = json{{"type", "Sequence"}, {"pretokenizers", json::array({split, byte_level})}};
  } else if (llama3) {
    json split{{"type", "Split"},
               {"pattern", json{{"Regex", tok::kLlama3Pattern}}},
               {"behavior", "Isolated"},
               {"invert", false}};
    j["pre_tokenizer"] = json{{"type", "Sequence"}, {"pretokenizers", json::array({split, byte_level})}};
  } else {
    j["pre_tokenizer"] = byte_level;
  }
  j["decoder"] = json{{"type", "ByteLevel"}};
  j["added_tokens"] = std::move(added);
  const int32_t bos = id_or(f, kT + "bos_token_id", n, -1), eos = id_or(f, kT + "eos_token_id", n, -1);
  json single = json::array(), special = json::object();
  if (flag_or(f, kT + "add_bos_token", false) && bos >= 0) {
    single.push_back(json{{"SpecialToken", json{{"id", "bos"}, {"type_id", 0}}}});
    special["bos"] = json{{"ids", json::array({bos})}};
  }
  single.push_back(json{{"Sequence", json{{"id", "A"}, {"type_id", 0}}}});
  if (flag_or(f, kT + "add_eos_token", false) && eos >= 0) {
    single.push_back(json{{"SpecialToken", json{{"id", "eos"}, {"type_id", 0}}}});
    special["eos"] = json{{"ids", json::array({eos})}};
  }
  j["post_processor"] =
      json{{"type", "TemplateProcessing"}, {"single", std::move(single)}, {"special_tokens", std::move(special)}};
  return j.dump();
}

std::unique_ptr<Tokenizer::Impl> read_byte_level_bpe(const GgufFile& f, uint64_t vocab) {
  const GgufValue* json = f.find_value(kHfJson);
  auto t = json ? tok::parse_hf_json(std::string(json->as_string(f.name() + ": " + kHfJson)),
                                     f.name() + " (" + kHfJson + ")")
                : tok::parse_hf_json(tokenizer_json_of_arrays(f, vocab), f.name() + " (tokenizer.ggml.* arrays)");
  if (t->vocab_size > vocab)
    throw Error(Status::format_error, f.name() + ": the tokenizer's vocabulary (" + std::to_string(t->vocab_size) +
                                          ") is larger than " + model_key(f, "vocab_size") + " " +
                                          std::to_string(vocab));
  t->bos = id_or(f, kT + "bos_token_id", t->vocab_size, -1);
  t->eos = id_or(f, kT + "eos_token_id", t->vocab_size, -1);
  return t;
}

}  // namespace

bool add_gguf_tokenizer(GgufWriter& w, const std::string& dir, const std::string& config_tokenizer, int32_t bos,
                        int32_t eos, GgufTokenIds* written, std::string* why) {
  why->clear();
  bool ok = false;
  const bool spm = tok::exists(dir + "/tokenizer.model"), json = !spm && tok::exists(dir + "/tokenizer.json");
  if (spm || json) {
    const Tokenizer t = Tokenizer::load(dir);               // the one a directory load uses; throws where it does
    const std::vector<int32_t> empty = t.encode("", true);  // the special tokens encoding adds, and nothing else
    const bool add_bos = !empty.empty() && empty.front() == t.bos_id();  // BOS == EOS: one token is BOS alone
    const bool add_eos = empty.size() > (add_bos ? 1u : 0u) && empty.back() == t.eos_id();
    ok = spm ? add_sentencepiece(w, dir + "/tokenizer.model", why)
             : add_byte_level_bpe(w, dir + "/tokenizer.json", add_bos, add_eos, why);
    if (ok)
      bos = t.bos_id(), eos = t.eos_id();  // the tokenizer's own (they can differ from config.json's: Llama 3's EOS)
  } else if (config_tokenizer == "bytes") {
    // config.json alone: the bytes tokenizer (ids 0..255 are the bytes; no token list).
    w.add_string(kT + "model", "bytes");
    ok = true;
  } else {
    *why = "the checkpoint has no tokenizer.model or tokenizer.json";
  }
  add_ids(w, bos, eos);
  *written = {bos, eos};
  return ok;
}

bool copy_gguf_tokenizer(GgufWriter& w, const GgufFile& f, GgufTokenIds* written, std::string* why) {
  why->clear();
  *written = {-1, -1};
  if (const GgufValue* v = f.find_value(kT + "bos_token_id"))
    written->bos = int64_t(v->as_u64(f.name() + ": " + kT + "bos_token_id"));
  if (const GgufValue* v = f.find_value(kT + "eos_token_id"))
    written->eos = int64_t(v->as_u64(f.name() + ": " + kT + "eos_token_id"));
  for (const GgufKV& kv : f.metadata()) {
    const std::string key(kv.key);
    if (key.compare(0, 10, "tokenizer.") != 0) continue;
    const GgufValue& v = kv.value;
    if (v.type == GgufType::string)
      w.add_string(key, std::string(v.str));
    else if (v.type == GgufType::uint32)
      w.add_u32(key, uint32_t(v.as_u64(key)));
    else if (v.type == GgufType::boolean)
      w.add_bool(key, v.as_bool(key));
    else if (v.type == GgufType::array && v.elem == GgufType::string)
      w.add_string_array(key, std::vector<std::string>(v.strings.begin(), v.strings.end()));
    else if (v.type == GgufType::array && v.elem == GgufType::float32) {
      std::vector<float> a(size_t(v.count));
      for (uint64_t i = 0; i < v.count; ++i) a[size_t(i)] = float(v.number_at(i));
      w.add_f32_array(key, a);
    } else if (v.type == GgufType::array && v.elem == GgufType::int32) {
      std::vector<int32_t> a(size_t(v.count));
      for (uint64_t i = 0; i < v.count; ++i) a[size_t(i)] = int32_t(v.integer_at(i));
      w.add_i32_array(key, a);
    } else if (why->empty()) {
      *why = "key " + printable(key) + " has a type diffvk does not write; it was left out";
    }
  }
  return why->empty();
}

std::unique_ptr<Tokenizer::Impl> gguf_tokenizer(const GgufFile& f, std::string* why) {
  const GgufValue* model = f.find_value(kT + "model");
  if (!model) {
    *why = "the file has no tokenizer (no tokenizer.ggml.model)";
    return nullptr;
  }
  const std::string kind(model->as_string(f.name() + ": tokenizer.ggml.model"));
  const std::string vocab_key = model_key(f, "vocab_size");
  const uint64_t vocab = f.require_value(vocab_key).as_u64(f.name() + ": " + vocab_key);
  if (kind == "bytes") {
    if (vocab < 256)
      throw Error(Status::format_error,
                  f.name() + ": " + vocab_key + " " + std::to_string(vocab) + " < 256 for the bytes tokenizer");
    const uint64_t n = std::min<uint64_t>(vocab, uint64_t(1) << 31);
    return tok::make_bytes(uint32_t(n), id_or(f, kT + "bos_token_id", n, -1), id_or(f, kT + "eos_token_id", n, -1));
  }
  if (kind == "llama" || kind == "t5") return read_sentencepiece(f, kind == "llama", vocab);
  if (kind == "gpt2") return read_byte_level_bpe(f, vocab);
  throw Error(Status::unsupported, f.name() + ": tokenizer.ggml.model '" + printable(kind, 40) +
                                       "' is not one diffvk reads (bytes, llama, t5, gpt2)");
}

GgufTokenIds gguf_model_token_ids(const GgufFile& f) {
  GgufTokenIds ids;
  for (auto [name, id] : {std::pair<const char*, int64_t*>{"bos_token_id", &ids.bos}, {"eos_token_id", &ids.eos}}) {
    const std::string key = model_key(f, name);
    if (const GgufValue* v = f.find_value(key)) {
      *id = v->as_i64(f.name() + ": " + key);
      if (*id < -1)
        throw Error(Status::format_error, f.name() + ": " + key + " is " + std::to_string(*id) + " (-1 = none)");
    } else if (const GgufValue* t = f.find_value(kT + name)) {
      *id = int64_t(t->as_u64(f.name() + ": " + kT + name));
    }
  }
  return ids;
}

}  // namespace diffvk
