#include "io/sentencepiece_model.hpp"

#include <cstring>

#include "diffvk/error.hpp"

namespace diffvk {
namespace {

class Reader {
 public:
  Reader(const uint8_t* p, size_t n, const std::string& where) : p_(p), end_(p + n), where_(where) {}
  bool done() const { return p_ == end_; }
  uint64_t varint() {
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (p_ == end_) fail("truncated varint");
      const uint8_t b = *p_++;
      v |= uint64_t(b & 0x7F) << shift;
      if (!(b & 0x80)) return v;
    }
    fail("varint longer than 10 bytes");
  }
  // Next field: its number and wire type.
  std::pair<uint32_t, uint32_t> key() {
    const uint64_t k = varint();
    if ((k >> 3) == 0 || (k >> 3) > 0x1FFFFFFF) fail("field number " + std::to_string(k >> 3));
    return {uint32_t(k >> 3), uint32_t(k & 7)};
  }
  Reader sub() {
    const uint64_t n = varint();
    if (n > uint64_t(end_ - p_)) fail("a length-delimited field of " + std::to_string(n) + " bytes runs past the end");
    Reader r(p_, size_t(n), where_);
    p_ += n;
    return r;
  }
  std::string bytes() {
    Reader r = sub();
    return std::string(reinterpret_cast<const char*>(r.p_), size_t(r.end_ - r.p_));
  }
  float f32() {
    if (end_ - p_ < 4) fail("truncated float");
    float f;
    std::memcpy(&f, p_, 4);  // little-endian on every target diffvk builds for
    p_ += 4;
    return f;
  }
  int32_t i32() { return int32_t(uint32_t(varint())); }  // int32 fields: negatives are 10-byte varints
  void skip(uint32_t wire) {
    switch (wire) {
      case 0:
        varint();
        return;
      case 1:
        advance(8);
        return;
      case 2:
        sub();
        return;
      case 5:
        advance(4);
        return;
      default:
        fail("unsupported wire type " + std::to_string(wire));
    }
  }
  void expect(uint32_t wire, uint32_t want, const char* field) {
    if (wire != want)
      fail(std::string("field '") + field + "' has wire type " + std::to_string(wire) + ", expected " +
           std::to_string(want));
  }
  [[noreturn]] void fail(const std::string& why) const {
    throw Error(Status::format_error, where_ + ": not a SentencePiece model (" + why + ")");
  }

 private:
  void advance(size_t n) {
    if (size_t(end_ - p_) < n) fail("truncated fixed-size field");
    p_ += n;
  }
  const uint8_t* p_;
  const uint8_t* end_;
  const std::string& where_;
};

SentencePieceModel::Piece read_piece(Reader r) {
  SentencePieceModel::Piece p;
  while (!r.done()) {
    auto [f, w] = r.key();
    if (f == 1)
      r.expect(w, 2, "piece"), p.text = r.bytes();
    else if (f == 2)
      r.expect(w, 5, "score"), p.score = r.f32();
    else if (f == 3) {
      r.expect(w, 0, "type");
      const uint64_t t = r.varint();
      if (t < 1 || t > 6) r.fail("piece type " + std::to_string(t));
      p.type = SentencePieceModel::PieceType(t);
    } else
      r.skip(w);
  }
  return p;
}

void read_trainer(Reader r, SentencePieceModel& m) {
  while (!r.done()) {
    auto [f, w] = r.key();
    switch (f) {
      case 3: {
        r.expect(w, 0, "model_type");
        const uint64_t t = r.varint();
        if (t < 1 || t > 4) r.fail("model_type " + std::to_string(t));
        m.model_type = SentencePieceModel::ModelType(t);
        break;
      }
      case 24:
        r.expect(w, 0, "treat_whitespace_as_suffix"), m.treat_whitespace_as_suffix = r.varint() != 0;
        break;
      case 35:
        r.expect(w, 0, "byte_fallback"), m.byte_fallback = r.varint() != 0;
        break;
      case 40:
        r.expect(w, 0, "unk_id"), m.unk_id = r.i32();
        break;
      case 41:
        r.expect(w, 0, "bos_id"), m.bos_id = r.i32();
        break;
      case 42:
        r.expect(w, 0, "eos_id"), m.eos_id = r.i32();
        break;
      case 43:
        r.expect(w, 0, "pad_id"), m.pad_id = r.i32();
        break;
      case 44:
        r.expect(w, 2, "unk_surface"), m.unk_surface = r.bytes();
        break;
      default:
        r.skip(w);
    }
  }
}

void read_normalizer(Reader r, SentencePieceModel& m) {
  while (!r.done()) {
    auto [f, w] = r.key();
    switch (f) {
      case 1:
        r.expect(w, 2, "name"), m.normalizer_name = r.bytes();
        break;
      case 2:
        r.expect(w, 2, "precompiled_charsmap"), m.precompiled_charsmap = r.bytes();
        break;
      case 3:
        r.expect(w, 0, "add_dummy_prefix"), m.add_dummy_prefix = r.varint() != 0;
        break;
      case 4:
        r.expect(w, 0, "remove_extra_whitespaces"), m.remove_extra_whitespaces = r.varint() != 0;
        break;
      case 5:
        r.expect(w, 0, "escape_whitespaces"), m.escape_whitespaces = r.varint() != 0;
        break;
      default:
        r.skip(w);
    }
  }
}

}  // namespace

SentencePieceModel parse_sentencepiece_model(const uint8_t* data, size_t size, const std::string& name) {
  SentencePieceModel m;
  Reader r(data, size, name);
  bool trainer = false;
  while (!r.done()) {
    auto [f, w] = r.key();
    if (f == 1)
      r.expect(w, 2, "pieces"), m.pieces.push_back(read_piece(r.sub()));
    else if (f == 2)
      r.expect(w, 2, "trainer_spec"), read_trainer(r.sub(), m), trainer = true;
    else if (f == 3)
      r.expect(w, 2, "normalizer_spec"), read_normalizer(r.sub(), m);
    else
      r.skip(w);
  }
  if (m.pieces.empty()) r.fail("no pieces");
  if (!trainer) r.fail("no trainer_spec");
  return m;
}

}  // namespace diffvk
