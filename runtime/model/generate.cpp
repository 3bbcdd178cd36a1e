// Text generation on a session (include/diffvk/generate.hpp): the sampling loop shared by the CLI's `run`,
// the C ABI's diffvk_session_generate and apps, and the pure StopStream that decides what text is final.
#include "diffvk/generate.hpp"

#include <algorithm>
#include <chrono>

#include "diffvk/error.hpp"
#include "diffvk/model.hpp"
#include "diffvk/tokenizer.hpp"

namespace diffvk {

namespace {
constexpr const char kReplacement[] = "\xEF\xBF\xBD";  // U+FFFD: the tokenizer's broken byte sequence
}  // namespace

const char* stop_reason_name(StopReason reason) {
  switch (reason) {
    case StopReason::eos:
      return "eos";
    case StopReason::stop_string:
      return "stop string";
    case StopReason::max_tokens:
      return "max tokens";
    case StopReason::cancelled:
      return "cancelled";
  }
  return "unknown";
}

void validate_stop_strings(const std::vector<std::string>& stop) {
  if (stop.size() > kMaxStopStrings)
    throw Error(Status::invalid_argument,
                std::to_string(stop.size()) + " stop strings; at most " + std::to_string(kMaxStopStrings));
  for (size_t i = 0; i < stop.size(); ++i) {
    if (stop[i].empty()) throw Error(Status::invalid_argument, "stop string " + std::to_string(i) + " is empty");
    if (stop[i].size() > kMaxStopStringBytes)
      throw Error(Status::invalid_argument, "stop string " + std::to_string(i) + " is " +
                                                std::to_string(stop[i].size()) + " bytes; at most " +
                                                std::to_string(kMaxStopStringBytes));
  }
}

StopStream::StopStream(std::vector<std::string> stop) : stop_(std::move(stop)) { validate_stop_strings(stop_); }

const std::string& StopStream::matched() const {
  static const std::string none;
  return matched_ >= 0 ? stop_[static_cast<size_t>(matched_)] : none;
}

std::string StopStream::update(const std::string& text, bool final) {
  if (stopped() || text.size() <= emitted_) return {};
  // What is settled: all of it at the end, else without a trailing U+FFFD a later byte token may complete.
  size_t settled = text.size();
  while (!final && settled >= emitted_ + 3 && text.compare(settled - 3, 3, kReplacement) == 0) settled -= 3;
  // The first stop string, by where it starts; on a tie the shortest (the one that completes first when the
  // text comes a byte at a time), then the earlier listed. Emitted text never holds the start of a stop
  // string (it was held back while it could be one), so the search starts at emitted_.
  const std::string_view open(text.data() + emitted_, settled - emitted_);
  size_t first = std::string_view::npos;
  for (size_t i = 0; i < stop_.size(); ++i) {
    const size_t at = open.find(stop_[i]);
    if (at == std::string_view::npos) continue;
    if (at < first || (at == first && stop_[i].size() < stop_[static_cast<size_t>(matched_)].size())) {
      first = at;
      matched_ = static_cast<int>(i);
    }
  }
  if (first != std::string_view::npos) {
    std::string piece(open.substr(0, first));
    emitted_ += first;
    return piece;
  }
  // Hold back the longest tail that is a proper prefix of a stop string (unless nothing more will come).
  size_t hold = 0;
  if (!final)
    for (const auto& s : stop_)
      for (size_t n = std::min(s.size() - 1, open.size()); n > hold; --n)
        if (open.compare(open.size() - n, n, s, 0, n) == 0) {
          hold = n;
          break;
        }
  std::string piece(open.substr(0, open.size() - hold));
  emitted_ += piece.size();
  return piece;
}

const char* draft_name(Draft draft) {
  switch (draft) {
    case Draft::none:
      return "none";
    case Draft::lookup:
      return "lookup";
    case Draft::model:
      return "model";
  }
  return "unknown";
}

std::vector<int32_t> lookup_draft(const std::vector<int32_t>& context, uint32_t ngram, uint32_t k) {
  const size_t n_ctx = context.size();
  for (size_t n = std::min<size_t>(ngram, n_ctx ? n_ctx - 1 : 0); n >= 1; --n) {
    const int32_t* tail = context.data() + n_ctx - n;
    // Latest first: an occurrence ending at e - 1 (e < n_ctx), whose followers are context[e ...].
    for (size_t e = n_ctx - 1; e >= n; --e)
      if (std::equal(tail, tail + n, context.data() + e - n)) {
        const size_t end = std::min(n_ctx, e + size_t(k));
        return std::vector<int32_t>(context.begin() + static_cast<std::ptrdiff_t>(e),
                                    context.begin() + static_cast<std::ptrdiff_t>(end));
      }
  }
  return {};
}

std::vector<int32_t> model_draft(Session& d, const std::vector<int32_t>& context, uint32_t k, uint32_t vocab) {
  if (context.empty() || context.size() > d.capacity()) return {};
  k = uint32_t(std::min<uint64_t>(k, d.capacity() - context.size() + 1));  // the last drafted token is not decoded
  std::vector<float> lg = d.prefill_reusing(context);
  if (lg.size() != vocab)
    throw Error(Status::invalid_argument, "generate: the draft model's vocabulary (" + std::to_string(lg.size()) +
                                              " tokens) is not the model's (" + std::to_string(vocab) +
                                              "): a draft model must share the tokenizer");
  std::vector<int32_t> out;
  for (;;) {
    out.push_back(int32_t(std::max_element(lg.begin(), lg.end()) - lg.begin()));
    if (out.size() >= k) return out;
    lg = d.decode(out.back());
  }
}

void validate_speculation(const SpeculateOptions& o) {
  if (o.draft == Draft::none) return;
  if (o.draft != Draft::lookup && o.draft != Draft::model)
    throw Error(Status::invalid_argument, "generate: unknown speculate.draft");
  if (o.draft == Draft::model && !o.draft_session)
    throw Error(Status::invalid_argument, "generate: speculate.draft is model but speculate.draft_session is null");
  if (o.k < 1 || o.k > kMaxDraftTokens)
    throw Error(Status::invalid_argument,
                "generate: speculate.k " + std::to_string(o.k) + " is not in 1 ... " + std::to_string(kMaxDraftTokens));
  if (o.draft == Draft::lookup && (o.ngram < 1 || o.ngram > kMaxDraftNgram))
    throw Error(Status::invalid_argument, "generate: speculate.ngram " + std::to_string(o.ngram) + " is not in 1 ... " +
                                              std::to_string(kMaxDraftNgram));
}

namespace {
constexpr size_t kDecodeContext = 64;

// The rows of the last speculative pass: the session held `start` tokens, then [cur, draft...] went in; the
// latest token pushed was picked from row `row` (row i: the logits after cur, then after draft[i - 1]).
struct VerifyPass {
  bool active = false;
  uint32_t start = 0, row = 0;
  std::vector<int32_t> draft;
  std::vector<float> logits;  // (draft.size() + 1) x vocab
};
}  // namespace

GenerateResult generate(Session& session, Sampler& sampler, const Tokenizer& tokenizer,
                        const std::vector<int32_t>& prompt, const GenerateOptions& options) {
  StopStream stream(options.stop);  // validates the stop strings
  validate_speculation(options.speculate);
  if (options.speculate.draft == Draft::model && options.speculate.draft_session == &session)
    throw Error(Status::invalid_argument,
                "generate: speculate.draft_session is the generating session; a draft model needs its own");
  if (prompt.empty()) throw Error(Status::invalid_argument, "generate: the prompt has no tokens");
  const bool shifting = options.overflow == ContextOverflow::shift;
  if (shifting && options.keep + 1ull >= session.capacity())
    throw Error(Status::invalid_argument, "generate: keep " + std::to_string(options.keep) +
                                              " leaves no room to shift in a context of " +
                                              std::to_string(session.capacity()));
  // Decoded into the session: the prompt and every sampled token but the last.
  const uint64_t needed = prompt.size() + (options.max_tokens ? options.max_tokens - 1ull : 0ull);
  if (!shifting && needed > session.capacity())
    throw Error(Status::context_overflow, "generate: the prompt (" + std::to_string(prompt.size()) + " tokens) and " +
                                              std::to_string(options.max_tokens) + " new tokens need " +
                                              std::to_string(needed) + " positions; the session holds " +
                                              std::to_string(session.capacity()));
  GenerateResult r;
  using clock = std::chrono::steady_clock;
  auto t0 = clock::now();
  std::vector<float> logits =
      shifting ? session.prefill_shifting(prompt, options.keep, &r.reused) : session.prefill_reusing(prompt, &r.reused);
  r.prefill_seconds = std::chrono::duration<double>(clock::now() - t0).count();
  if (options.on_prefilled) options.on_prefilled();
  if (options.max_tokens == 0) return r;
  t0 = clock::now();
  for (int32_t t : prompt) sampler.accept(t);
  const uint32_t vocab = static_cast<uint32_t>(logits.size());
  const bool on_device = sampler.device_capable() && session.device_sampling();
  // The text is decoded from the prompt's last tokens on (decoding a long conversation at every token would
  // cost its length each time); a piece's text does not depend on tokens further back.
  const size_t from = prompt.size() > kDecodeContext ? prompt.size() - kDecodeContext : 0;
  std::vector<int32_t> ids(prompt.begin() + from, prompt.end());
  const size_t base = tokenizer.decode(ids).size();
  auto emit = [&](const std::string& piece) {
    if (piece.empty()) return true;
    r.text += piece;
    return !options.on_text || options.on_text(piece);
  };
  std::string text;  // generated so far: decode(prompt + generated) minus decode(prompt)
  const SpeculateOptions& spec = options.speculate;
  VerifyPass v;
  // The session keeps what was pushed but the latest token: the pass's rows past it go.
  auto settle = [&] {
    if (v.active && session.position() > v.start + v.row + 1) session.rewind(v.start + v.row + 1);
    v.active = false;
  };
  // Row i's token: a drafted row by the speculative sampling rule (the draft kept with its probability, else a draw
  // from the rest), the row after the last draft by plain sampling; either is distributed as plain decoding's.
  auto pick = [&](uint32_t i) {
    const float* row = v.logits.data() + size_t(i) * vocab;
    return i < v.draft.size() ? sampler.sample_draft(row, vocab, v.draft[i]) : sampler.sample(row, vocab);
  };
  int32_t next = sampler.sample(logits.data(), vocab);
  try {
    for (;;) {
      r.tokens.push_back(next);
      // The drafted token at this place, when the pass's rows go on from it.
      const bool agreed = v.active && v.row < v.draft.size() && next == v.draft[v.row];
      if (agreed) ++r.accepted;
      const bool eos = options.eos_token >= 0 && next == options.eos_token;  // not part of the text
      if (!eos) {
        sampler.accept(next);
        ids.push_back(next);
        const std::string all = tokenizer.decode(ids);
        text = all.size() > base ? all.substr(base) : std::string();
      }
      const bool last = eos || r.tokens.size() >= options.max_tokens;
      if (!emit(stream.update(text, last))) {
        r.reason = StopReason::cancelled;
        break;
      }
      if (eos) {
        r.reason = StopReason::eos;
        break;
      }
      if (stream.stopped()) {
        r.reason = StopReason::stop_string;
        r.stop = stream.matched();
        r.stop_index = stream.matched_index();
        break;
      }
      if (last) {
        r.reason = StopReason::max_tokens;
        break;
      }
      if (agreed) {  // the pass's next row holds the logits after this token
        ++v.row;
        next = pick(v.row);
        continue;
      }
      settle();
      if (spec.draft != Draft::none) {
        // Drafts that fit the context and that could be used before max_tokens (a pass yields up to k + 1 tokens).
        const uint64_t held = uint64_t(session.position()) + 1,
                       room = session.capacity() > held ? session.capacity() - held : 0;
        const uint64_t left = options.max_tokens - r.tokens.size() - 1;
        const uint32_t k = uint32_t(std::min<uint64_t>({spec.k, room, left}));
        std::vector<int32_t> context = session.tokens();
        context.push_back(next);
        std::vector<int32_t> draft = !k ? std::vector<int32_t>{}
                                     : spec.draft == Draft::lookup
                                         ? lookup_draft(context, spec.ngram, k)
                                         : model_draft(*spec.draft_session, context, k, vocab);
        if (!draft.empty()) {
          std::vector<int32_t> rows{next};
          rows.insert(rows.end(), draft.begin(), draft.end());
          v.start = session.position();
          v.logits = session.prefill(rows, true);
          v.draft = std::move(draft);
          v.row = 0;
          v.active = true;
          ++r.verify_passes;
          r.drafted += uint32_t(v.draft.size());
          next = pick(0);
          continue;
        }
      }
      if (shifting && session.make_room(options.keep, 1)) ++r.shifts;  // room for the next token
      if (on_device) {
        const float u = sampler.options().temperature > 0.0f ? sampler.draw() : 0.0f;
        next = session.decode_sample(next, sampler.options().temperature, sampler.options().top_k, u);
      } else {
        logits = session.decode(next);
        next = sampler.sample(logits.data(), vocab);
      }
    }
  } catch (...) {  // a failed pass, text callback or decode: the session still keeps what was pushed
    try {
      settle();
    } catch (...) {}
    throw;
  }
  settle();
  r.sample_seconds = std::chrono::duration<double>(clock::now() - t0).count();
  return r;
}

}  // namespace diffvk
