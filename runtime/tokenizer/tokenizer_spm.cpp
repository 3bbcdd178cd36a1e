// SentencePiece (tokenizer.model): the identity normalizer's whitespace rules, unigram (Viterbi) and
// BPE (merges by piece score) encoding, byte fallback, and decoding as sentencepiece does.
#include <algorithm>
#include <cfloat>
#include <queue>
#include <unordered_map>

#include "tokenizer/tokenizer_spm.hpp"

#include "io/sentencepiece_model.hpp"
#include "tokenizer/tokenizer_files.hpp"
#include "tokenizer/tokenizer_unicode.hpp"
#include "platform.hpp"

namespace diffvk::tok {
namespace {

using PieceType = SentencePieceModel::PieceType;
const std::string kSpace = "\xE2\x96\x81";  // U+2581, SentencePiece's visible space
constexpr uint32_t kReplacement = 0xFFFD;

// "<0xAB>" -> 0xAB; -1 when the text is not of that form.
int byte_piece_value(const std::string& t) {
  auto hex = [](char c) {
    return c >= '0' && c <= '9'   ? c - '0'
           : c >= 'A' && c <= 'F' ? c - 'A' + 10
           : c >= 'a' && c <= 'f' ? c - 'a' + 10
                                  : -1;
  };
  if (t.size() != 6 || t.compare(0, 3, "<0x") != 0 || t[5] != '>' || hex(t[3]) < 0 || hex(t[4]) < 0) return -1;
  return hex(t[3]) * 16 + hex(t[4]);
}

class SentencePiece final : public Tokenizer::Impl {
 public:
  SentencePiece(SentencePieceModel m, const std::string& path);
  std::vector<int32_t> encode(std::string_view text, bool add_special) const override;
  std::string decode(const int32_t* ids, size_t n) const override;

 private:
  struct Sym {  // a piece of the normalized text: [begin, end) bytes
    size_t begin, end;
  };
  std::string normalize(std::string_view text) const;
  std::vector<Sym> initial_symbols(const std::string& s) const;  // characters, user-defined symbols whole
  std::vector<std::pair<Sym, int32_t>> encode_unigram(const std::string& s) const;
  std::vector<std::pair<Sym, int32_t>> encode_bpe(const std::string& s) const;
  int32_t piece_id(std::string_view p) const {  // normal / user-defined / unused pieces
    auto it = pieces_.find(std::string(p));
    return it == pieces_.end() ? -1 : it->second;
  }
  bool is(int32_t id, PieceType t) const { return m_.pieces[id].type == t; }

  SentencePieceModel m_;
  std::string path_;
  std::unordered_map<std::string, int32_t> pieces_, reserved_;
  std::vector<const std::string*> user_defined_;  // longest first
  int32_t byte_ids_[256];
  size_t max_piece_bytes_ = 0;
  float min_score_ = FLT_MAX, max_score_ = FLT_MIN;  // over normal pieces, as sentencepiece initialises them
};

SentencePiece::SentencePiece(SentencePieceModel m, const std::string& path) : m_(std::move(m)), path_(path) {
  auto bad = [&](const std::string& why) { return Error(Status::format_error, path_ + ": " + why); };
  if (m_.model_type != SentencePieceModel::ModelType::unigram && m_.model_type != SentencePieceModel::ModelType::bpe)
    throw Error(Status::unsupported, path_ + ": SentencePiece model type " + std::to_string(int(m_.model_type)) +
                                         " is not supported (unigram and BPE only)");
  if (!m_.precompiled_charsmap.empty())
    throw Error(Status::unsupported,
                path_ + ": normalizer '" + printable(m_.normalizer_name) +
                    "' (a precompiled character map, e.g. nmt_nfkc) is not supported; only 'identity'");
  if (m_.pieces.size() > (1u << 21)) throw bad(std::to_string(m_.pieces.size()) + " pieces is more than supported");
  kind = m_.model_type == SentencePieceModel::ModelType::bpe ? "sentencepiece BPE" : "sentencepiece unigram";
  vocab_size = uint32_t(m_.pieces.size());
  std::fill(std::begin(byte_ids_), std::end(byte_ids_), -1);
  for (size_t i = 0; i < m_.pieces.size(); ++i) {
    const auto& p = m_.pieces[i];
    const bool normal = p.type == PieceType::normal || p.type == PieceType::user_defined || p.type == PieceType::unused;
    if (p.text.empty()) throw bad("piece " + std::to_string(i) + " is empty");
    if (!(normal ? pieces_ : reserved_).emplace(p.text, int32_t(i)).second)
      throw bad("piece '" + printable(p.text) + "' appears twice");
    if (normal) max_piece_bytes_ = std::max(max_piece_bytes_, p.text.size());
    if (p.type == PieceType::normal)
      min_score_ = std::min(min_score_, p.score), max_score_ = std::max(max_score_, p.score);
    if (p.type == PieceType::user_defined) user_defined_.push_back(&p.text);
    if (p.type == PieceType::byte) {
      const int v = byte_piece_value(p.text);
      if (v < 0) throw bad("byte piece " + std::to_string(i) + " '" + printable(p.text) + "' is not <0xXX>");
      byte_ids_[v] = int32_t(i);
    }
  }
  std::sort(user_defined_.begin(), user_defined_.end(), [](auto* a, auto* b) { return a->size() > b->size(); });
  if (m_.unk_id < 0 || size_t(m_.unk_id) >= m_.pieces.size() || !is(m_.unk_id, PieceType::unknown))
    throw bad("unk_id " + std::to_string(m_.unk_id) + " is not the id of an unknown piece");
  for (int32_t* id : {&m_.bos_id, &m_.eos_id})
    if (*id < -1 || (*id >= 0 && size_t(*id) >= m_.pieces.size()))
      throw bad("bos/eos id " + std::to_string(*id) + " is outside the pieces");
  if (m_.byte_fallback)
    for (int b = 0; b < 256; ++b)
      if (byte_ids_[b] < 0) throw bad("byte_fallback is on but the byte piece of " + std::to_string(b) + " is missing");
  bos = m_.bos_id;
  eos = m_.eos_id;
}

// The identity normalizer: invalid UTF-8 bytes become U+FFFD each; with remove_extra_whitespaces,
// leading/trailing spaces go and runs become one; the dummy prefix; spaces shown as U+2581.
std::string SentencePiece::normalize(std::string_view text) const {
  std::string out;
  size_t i = 0;
  const bool squeeze = m_.remove_extra_whitespaces;
  if (squeeze)
    while (i < text.size() && text[i] == ' ') ++i;
  if (i == text.size()) return out;
  const std::string space = m_.escape_whitespaces ? kSpace : " ";
  if (m_.add_dummy_prefix && !m_.treat_whitespace_as_suffix) out += space;
  bool prev_space = false;
  while (i < text.size()) {
    const auto u = next_utf8(text, i);
    i += u.len;
    if (u.cp == ' ') {
      if (!(squeeze && prev_space)) out += space;
      prev_space = true;
      continue;
    }
    prev_space = false;
    append_utf8(out, u.cp == Utf8Char::invalid ? kReplacement : u.cp);
  }
  if (squeeze)
    while (out.size() >= space.size() && out.compare(out.size() - space.size(), space.size(), space) == 0)
      out.resize(out.size() - space.size());
  if (m_.add_dummy_prefix && m_.treat_whitespace_as_suffix) out += space;
  return out;
}

std::vector<SentencePiece::Sym> SentencePiece::initial_symbols(const std::string& s) const {
  std::vector<Sym> out;
  for (size_t i = 0; i < s.size();) {
    size_t len = next_utf8(s, i).len;
    for (const std::string* u : user_defined_)
      if (s.compare(i, u->size(), *u) == 0) {
        len = u->size();
        break;
      }
    out.push_back({i, i + len});
    i += len;
  }
  return out;
}

std::vector<std::pair<SentencePiece::Sym, int32_t>> SentencePiece::encode_unigram(const std::string& s) const {
  struct Node {
    int32_t id = -1;
    float score = 0.0f;
    long from = -1;  // start byte of the best last piece; -1 = unreached
  };
  constexpr float kUnkPenalty = 10.0f;
  const float unk_score = min_score_ - kUnkPenalty;
  std::vector<Node> best(s.size() + 1);
  best[0].from = 0;
  for (size_t b = 0; b < s.size();) {
    const size_t char_len = next_utf8(s, b).len;
    const float here = best[b].score;
    bool single = false;
    for (size_t e = b + char_len; e - b <= max_piece_bytes_; e += next_utf8(s, e).len) {
      const int32_t id = piece_id(std::string_view(s).substr(b, e - b));
      if (id >= 0 && !is(id, PieceType::unused)) {
        // As sentencepiece computes it: the user-defined bonus makes the score a double, so the candidate
        // is a double compared with the stored float path score (ties and rounding follow from that).
        const double score =
            is(id, PieceType::user_defined) ? double(float(e - b) * max_score_) - 0.1 : double(m_.pieces[id].score);
        const double cand = score + double(here);
        if (best[e].from < 0 || cand > double(best[e].score)) best[e] = {id, float(cand), long(b)};
        if (e - b == char_len) single = true;
      }
      if (e == s.size()) break;
    }
    if (!single) {
      const float cand = unk_score + here;
      Node& t = best[b + char_len];
      if (t.from < 0 || cand > t.score) t = {m_.unk_id, cand, long(b)};
    }
    b += char_len;
  }
  std::vector<std::pair<Sym, int32_t>> out;
  for (size_t e = s.size(); e > 0; e = size_t(best[e].from)) out.push_back({{size_t(best[e].from), e}, best[e].id});
  std::reverse(out.begin(), out.end());
  return out;
}

std::vector<std::pair<SentencePiece::Sym, int32_t>> SentencePiece::encode_bpe(const std::string& s) const {
  struct Node {
    Sym sym;
    int prev, next;
  };
  std::vector<Node> n;
  for (const Sym& y : initial_symbols(s)) n.push_back({y, int(n.size()) - 1, int(n.size()) + 1});
  if (n.empty()) return {};
  n.back().next = -1;
  struct Cand {
    float score;
    int left, right;
    size_t size;  // bytes of the merged piece
    bool operator<(const Cand& o) const { return score != o.score ? score < o.score : left > o.left; }  // best = top
  };
  std::priority_queue<Cand> q;
  auto push = [&](int l, int r) {
    if (l < 0 || r < 0) return;
    const int32_t id = piece_id(std::string_view(s).substr(n[l].sym.begin, n[r].sym.end - n[l].sym.begin));
    if (id < 0 || is(id, PieceType::unused)) return;
    q.push({m_.pieces[id].score, l, r, n[r].sym.end - n[l].sym.begin});
  };
  for (size_t i = 0; i + 1 < n.size(); ++i) push(int(i), int(i + 1));
  while (!q.empty()) {
    const Cand c = q.top();
    q.pop();
    Node &l = n[c.left], &r = n[c.right];
    if (l.sym.end == l.sym.begin || r.sym.end == r.sym.begin || l.next != c.right || r.sym.end - l.sym.begin != c.size)
      continue;
    l.sym.end = r.sym.end;
    r.sym.end = r.sym.begin;  // emptied
    l.next = r.next;
    if (r.next >= 0) n[r.next].prev = c.left;
    push(l.prev, c.left);
    push(c.left, l.next);
  }
  std::vector<std::pair<Sym, int32_t>> out;
  for (int i = 0; i >= 0; i = n[i].next) {
    const std::string_view p = std::string_view(s).substr(n[i].sym.begin, n[i].sym.end - n[i].sym.begin);
    int32_t id = piece_id(p);
    if (id < 0) {
      auto r = reserved_.find(std::string(p));
      id = r == reserved_.end() ? m_.unk_id : r->second;
    }
    out.push_back({n[i].sym, id});
  }
  return out;
}

std::vector<int32_t> SentencePiece::encode(std::string_view text, bool add_special) const {
  std::vector<int32_t> ids;
  if (add_special && bos >= 0) ids.push_back(bos);
  const std::string s = normalize(text);
  const auto pieces = m_.model_type == SentencePieceModel::ModelType::bpe ? encode_bpe(s) : encode_unigram(s);
  bool prev_unk = false;
  for (const auto& [sym, id] : pieces) {
    const bool after_unk = prev_unk;
    prev_unk = id == m_.unk_id;
    if (id == m_.unk_id && m_.byte_fallback) {
      for (size_t i = sym.begin; i < sym.end; ++i) ids.push_back(byte_ids_[static_cast<unsigned char>(s[i])]);
    } else if (id == m_.unk_id && after_unk) {
      // a run of unknown characters is one <unk>, as sentencepiece merges them
    } else {
      ids.push_back(id);
    }
  }
  return ids;
}

std::string SentencePiece::decode(const int32_t* ids, size_t n) const {
  std::string out, bytes;
  bool at_start = true;  // the dummy prefix's space is dropped from the first piece
  auto flush = [&] {     // a run of byte pieces: valid UTF-8 kept, every other byte U+FFFD
    for (size_t i = 0; i < bytes.size();) {
      const auto u = next_utf8(bytes, i);
      append_utf8(out, u.cp == Utf8Char::invalid ? kReplacement : u.cp);
      i += u.len;
    }
    if (!bytes.empty()) at_start = false;
    bytes.clear();
  };
  for (size_t i = 0; i < n; ++i) {
    if (ids[i] < 0 || uint32_t(ids[i]) >= vocab_size)
      throw Error(Status::invalid_argument, "decode: id " + std::to_string(ids[i]) + " at index " + std::to_string(i) +
                                                " is outside the vocabulary (size " + std::to_string(vocab_size) + ")");
    const auto& p = m_.pieces[ids[i]];
    if (p.type == PieceType::byte) {
      bytes += char(byte_piece_value(p.text));  // checked to be <0xXX> at load
      continue;
    }
    flush();
    if (p.type == PieceType::control) continue;
    std::string piece = p.type == PieceType::unknown ? m_.unk_surface : p.text;
    if (p.type == PieceType::normal || p.type == PieceType::unused) {
      if (at_start && m_.add_dummy_prefix && !m_.treat_whitespace_as_suffix &&
          piece.compare(0, kSpace.size(), kSpace) == 0)
        piece.erase(0, kSpace.size());
      std::string plain;
      for (size_t k = 0; k < piece.size();)
        if (piece.compare(k, kSpace.size(), kSpace) == 0)
          plain += ' ', k += kSpace.size();
        else
          plain += piece[k++];
      piece = plain;
    }
    out += piece;
    at_start = false;
  }
  flush();
  return out;
}

}  // namespace

std::unique_ptr<Tokenizer::Impl> parse_sentencepiece(const uint8_t* data, size_t size, const std::string& name) {
  if (size > kSentencePieceMaxBytes)
    throw Error(Status::format_error, name + ": " + std::to_string(size) + " bytes, more than the limit of " +
                                          std::to_string(kSentencePieceMaxBytes) + " bytes of a tokenizer.model");
  return std::make_unique<SentencePiece>(parse_sentencepiece_model(data, size, name), name);
}

std::unique_ptr<Tokenizer::Impl> make_sentencepiece(SentencePieceModel model, const std::string& name) {
  return std::make_unique<SentencePiece>(std::move(model), name);
}

std::unique_ptr<Tokenizer::Impl> load_sentencepiece(const std::string& path) {
  const auto data = platform::read_file(path, kSentencePieceMaxBytes);
  return parse_sentencepiece(data.data(), data.size(), path);
}

}  // namespace diffvk::tok
