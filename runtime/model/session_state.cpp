// Saved session state: the format (session_state.hpp) and Session::save_state / restore_state.
#include "model/session_state.hpp"

#include <cstring>

#include "diffvk/atomic_write.hpp"
#include "diffvk/error.hpp"
#include "model/session_impl.hpp"
#include "platform.hpp"
#include "vk/pipeline_cache_file.hpp"  // fnv1a64, put_u32/get_u32 (little-endian)

namespace diffvk {
namespace {

const char kMagic[8] = {'D', 'V', 'K', 'S', 'T', 'A', 'T', 'E'};

[[noreturn]] void refuse(const std::string& why) { throw Error(Status::invalid_argument, "session state: " + why); }

template <class T>
uint64_t mix(uint64_t h, const T& v) {
  return fnv1a64(&v, sizeof v, h);
}

// What makes a state belong to a model: the config, each layer's lambda values, every weight's format and
// the norm weights' bytes (a fine-tune of the same architecture differs there). Not the large matrices:
// reading them back would cost as much as the state itself.
uint64_t model_fingerprint(const Model::Impl& m) {
  const ModelConfig& c = m.cfg;
  uint64_t h = fnv1a64("diffvk model", 12);
  for (uint32_t v :
       {c.vocab_size, c.hidden_size, c.num_layers, c.num_heads, c.num_kv_heads, c.intermediate_size,
        c.max_position_embeddings, c.rope_original_max_positions, uint32_t(c.tie_word_embeddings), uint32_t(m.fp16)})
    h = mix(h, v);
  for (double v :
       {c.rope_theta, c.rms_norm_eps, c.subln_eps, c.rope_factor, c.rope_low_freq_factor, c.rope_high_freq_factor})
    h = mix(h, v);
  h = fnv1a64(c.rope_type.data(), c.rope_type.size(), h);
  if (c.v2()) h = mix(mix(h, c.diff_version), c.head_dim());  // only for V2: V1 states keep their fingerprints
  const WeightStore& ws = *m.weights;
  auto weight = [&](size_t i, bool bytes) {
    h = mix(h, uint32_t(ws.format(i)));
    if (bytes) {
      const std::vector<uint8_t> b = ws.download(i);
      h = fnv1a64(b.data(), b.size(), h);
    }
  };
  for (const auto& L : m.layers) {
    h = mix(h, L.lambda);
    h = mix(h, L.lambda_init);
    for (size_t i : {L.wqkv, L.wo, L.wgu, L.wdown}) weight(i, false);
    for (size_t i : {L.attn_norm, L.subln, L.ffn_norm})
      if (i != Model::Impl::kNone) weight(i, true);
  }
  weight(m.embed, false);
  weight(m.lm_head, false);
  weight(m.norm, true);
  return h;
}

// Where the state's bytes of one cache lie in the cache buffer, in file order: per KV head its n rows
// (the cache is [KV head][cap][row]); Q8_0: per head its quants, then its scales (after every quant).
struct Segment {
  uint64_t offset, bytes;
};
std::vector<Segment> head_segments(const SessionStateShape& sh, uint32_t cap, uint32_t n) {
  const uint64_t row = uint64_t(sh.row_elems) * sh.elem_bytes(), sb = sh.scale_bytes();
  std::vector<Segment> out;
  for (uint32_t h = 0; h < sh.kv_heads; ++h) {
    out.push_back({uint64_t(h) * cap * row, uint64_t(n) * row});
    if (sb) out.push_back({uint64_t(sh.kv_heads) * cap * row + uint64_t(h) * cap * sb, uint64_t(n) * sb});
  }
  return out;
}

SessionStateShape shape_of(Session::Impl& s) {
  if (!s.fingerprint) s.fingerprint = s.m->sambay ? phi4flash_fingerprint(*s.m->sambay) : model_fingerprint(*s.m);
  SessionStateShape sh;
  sh.kv_type = s.kv_format == KvFormat::q8_0 ? StateKvType::q8_0 : s.m->fp16 ? StateKvType::f16 : StateKvType::f32;
  sh.fingerprint = s.fingerprint;
  sh.layers = s.m->cfg.num_layers;
  sh.kv_heads = s.m->cfg.num_kv_heads;
  sh.row_elems = s.m->cfg.kv_row();
  if (s.sambay) {
    const Phi4FlashForward* f = s.sambay.get();
    sh.sambay_body = [f](uint32_t n) { return f->saved_bytes(n); };
  }
  return sh;
}

}  // namespace

const char* state_kv_type_name(StateKvType t) {
  switch (t) {
    case StateKvType::f32:
      return "f32";
    case StateKvType::f16:
      return "f16";
    case StateKvType::q8_0:
      return "q8_0";
  }
  return "unknown";
}

std::vector<uint8_t> encode_session_state_header(const SessionStateShape& sh, const std::vector<int32_t>& tokens,
                                                 uint32_t exact) {
  std::vector<uint8_t> out(kSessionStateHeaderSize + 4 * tokens.size());
  std::memcpy(out.data(), kMagic, 8);
  put_u32(&out[8], sh.version());
  put_u32(&out[12], uint32_t(sh.kv_type));
  put_u64(&out[16], sh.fingerprint);
  put_u32(&out[24], sh.layers);
  put_u32(&out[28], sh.kv_heads);
  put_u32(&out[32], sh.row_elems);
  put_u32(&out[36], uint32_t(tokens.size()));
  put_u32(&out[40], exact);
  for (size_t i = 0; i < tokens.size(); ++i) put_u32(&out[kSessionStateHeaderSize + 4 * i], uint32_t(tokens[i]));
  return out;
}

CheckedState check_session_state(const uint8_t* data, size_t size, const SessionStateShape& want, uint32_t capacity,
                                 uint32_t vocab) {
  if (!data && size) refuse("no data");
  if (size < kSessionStateV1HeaderSize + kSessionStateTrailerSize)
    refuse(std::to_string(size) + " bytes is shorter than the " +
           std::to_string(kSessionStateV1HeaderSize + kSessionStateTrailerSize) + "-byte header and checksum");
  if (std::memcmp(data, kMagic, 8) != 0) refuse("not a diffvk session state (magic)");
  if (get_u64(data + size - kSessionStateTrailerSize) != fnv1a64(data, size - kSessionStateTrailerSize))
    refuse("checksum mismatch: the state is corrupt or truncated");
  const uint32_t version = get_u32(data + 8);
  if (version < 1 || version > kSessionStateSambaYVersion)
    refuse("format version " + std::to_string(version) + ", this build reads versions 1 to " +
           std::to_string(kSessionStateSambaYVersion));
  if ((version == kSessionStateSambaYVersion) != bool(want.sambay_body))
    refuse(want.sambay_body ? "format version " + std::to_string(version) +
                                  " is a Differential Transformer's state; this phi4flash (SambaY) session keeps "
                                  "version 3"
                            : std::string("format version 3 is a phi4flash (SambaY) session's state; this model "
                                          "keeps versions 1 and 2"));
  CheckedState r;
  r.header = version == 1 ? kSessionStateV1HeaderSize : kSessionStateHeaderSize;
  if (size < r.header + kSessionStateTrailerSize)
    refuse(std::to_string(size) + " bytes is shorter than the " + std::to_string(r.header + kSessionStateTrailerSize) +
           "-byte header and checksum of version " + std::to_string(version));
  const uint32_t kv = get_u32(data + 12);
  if (kv != uint32_t(want.kv_type))
    refuse(std::string("KV type ") +
           (kv == 1   ? "f32"
            : kv == 2 ? "f16"
            : kv == 3 ? "q8_0"
                      : ("#" + std::to_string(kv)).c_str()) +
           ", this session's is " + state_kv_type_name(want.kv_type) + " (another precision or KV cache type)");
  if (get_u64(data + 16) != want.fingerprint) refuse("saved from another model (fingerprint mismatch)");
  const uint32_t layers = get_u32(data + 24), heads = get_u32(data + 28), row = get_u32(data + 32);
  if (layers != want.layers || heads != want.kv_heads || row != want.row_elems)
    refuse("shape " + std::to_string(layers) + " layers x " + std::to_string(heads) + " KV heads x " +
           std::to_string(row) + ", this model's is " + std::to_string(want.layers) + " x " +
           std::to_string(want.kv_heads) + " x " + std::to_string(want.row_elems));
  const uint32_t n = get_u32(data + 36);
  if (n > capacity)
    refuse("position " + std::to_string(n) + " exceeds this session's context of " + std::to_string(capacity));
  r.n = n;
  r.exact = version == 1 ? n : get_u32(data + 40);
  if (r.exact > n) refuse("exact rows " + std::to_string(r.exact) + " exceed the position " + std::to_string(n));
  if (size != want.file_bytes(n, r.header))
    refuse(std::to_string(size) + " bytes, " + std::to_string(want.file_bytes(n, r.header)) + " expected for " +
           std::to_string(n) + " tokens");
  for (uint32_t i = 0; i < n; ++i) {
    const uint32_t t = get_u32(data + r.header + 4ull * i);
    if (t >= vocab)
      refuse("token " + std::to_string(int32_t(t)) + " at index " + std::to_string(i) + " is outside the vocabulary");
  }
  return r;
}

// ---- Session ---------------------------------------------------------------------------------------
std::vector<uint8_t> Session::save_state() const {
  Impl& s = *impl_;
  s.m->dev->check_not_lost();
  const SessionStateShape sh = shape_of(s);
  const uint32_t n = s.pos;
  std::vector<uint8_t> out =
      encode_session_state_header(sh, std::vector<int32_t>(s.held.begin(), s.held.begin() + n), s.exact);
  const uint64_t body = sh.file_bytes(n) - kSessionStateTrailerSize;
  out.resize(body + kSessionStateTrailerSize);
  uint64_t at = kSessionStateHeaderSize + 4ull * n;
  if (s.sambay) {
    s.sambay->seek(s.held.data(), n);  // after a rewind: the states of the tokens held
    s.sambay->save(out.data() + at);
  }
  for (uint32_t l = 0; l < sh.layers && !s.sambay; ++l)
    for (const BufferRange* r : {&s.kc[l], &s.vc[l]})
      for (const Segment& g : head_segments(sh, s.cap, n)) {
        s.kv[l].download(r->offset + g.offset, out.data() + at, g.bytes);
        at += g.bytes;
      }
  put_u64(out.data() + body, fnv1a64(out.data(), body));
  return out;
}

uint64_t Session::state_bytes() const { return shape_of(*impl_).file_bytes(impl_->pos); }

void Session::save_state_file(const std::string& path) const {
  const std::vector<uint8_t> state = save_state();
  platform::write_file_atomic(path, state.data(), state.size());
}

void Session::restore_state(const uint8_t* data, size_t size) {
  Impl& s = *impl_;
  s.m->dev->check_not_lost();
  const SessionStateShape sh = shape_of(s);
  const CheckedState st = check_session_state(data, size, sh, s.cap, s.m->cfg.vocab_size);
  const uint32_t n = st.n;
  std::vector<int32_t> toks(n);
  for (uint32_t i = 0; i < n; ++i) toks[i] = int32_t(get_u32(data + st.header + 4ull * i));
  // Checked: from here on a failure (the device) leaves the session empty rather than half restored.
  s.truncate(0);
  uint64_t at = st.header + 4ull * n;
  if (s.sambay) s.sambay->restore(n, data + at);
  for (uint32_t l = 0; l < sh.layers && !s.sambay; ++l)
    for (const BufferRange* r : {&s.kc[l], &s.vc[l]})
      for (const Segment& g : head_segments(sh, s.cap, n)) {
        s.kv[l].upload(r->offset + g.offset, data + at, g.bytes);
        at += g.bytes;
      }
  s.held = toks;
  s.history = std::move(toks);  // the tokens a shift dropped before the save are not in a state
  s.tail_at = 0;
  s.exact = st.exact;
  s.pos = n;
}

void Session::fill_for_timing(uint32_t n) {
  Impl& s = *impl_;
  s.m->dev->check_not_lost();
  if (n > s.cap)
    throw Error(Status::context_overflow,
                "fill_for_timing: " + std::to_string(n) + " positions, but the session holds " + std::to_string(s.cap));
  s.truncate(0);
  if (s.sambay) s.sambay->zero_states(n);
  for (size_t l = 0; l < s.kv.size() && !s.sambay; ++l) s.kv[l].fill(0, s.kv[l].size(), 0);
  s.held.assign(n, 0);
  s.history = s.held;
  s.tail_at = 0;
  s.exact = 0;  // nothing here is what a prefill of the tokens would give: prefill_reusing reuses none of it
  s.pos = n;
}

void Session::restore_state_file(const std::string& path) {
  Impl& s = *impl_;
  // No file larger than the biggest state this session can hold is read into memory.
  const std::vector<uint8_t> data = platform::read_file(path, shape_of(s).file_bytes(s.cap));  // >= a version 1 file
  try {
    restore_state(data.data(), data.size());
  } catch (const Error& e) {
    if (e.status() != Status::invalid_argument) throw;
    throw Error(Status::invalid_argument, path + ": " + e.what());
  }
}

}  // namespace diffvk
