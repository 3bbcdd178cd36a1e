// diffvk — text generation on a session: sampling, streaming text, stop strings and cancellation from the
// text callback. The CLI's `run`, the C ABI's diffvk_session_generate and apps use it.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace diffvk {

class Session;
class Sampler;
class Tokenizer;

// Limits of GenerateOptions::stop (checked before any work, invalid_argument naming the string).
constexpr size_t kMaxStopStrings = 16;
constexpr size_t kMaxStopStringBytes = 256;

enum class StopReason {
  eos,          // the model's end-of-sequence token (GenerateOptions::eos_token)
  stop_string,  // a stop string appeared in the text (GenerateResult::stop says which)
  max_tokens,   // GenerateOptions::max_tokens tokens were sampled
  cancelled,    // the text callback returned false
};
const char* stop_reason_name(StopReason reason);  // "eos", "stop string", "max tokens", "cancelled"

// What generate() does when the conversation reaches the session's capacity (docs/context-overflow.md).
enum class ContextOverflow {
  refuse,  // context_overflow before any work when the prompt and max_tokens do not fit
  shift,   // keep the first `keep` tokens, drop the oldest half of the rest and go on (Session::shift)
};

// Speculative decoding: a draft of up to k tokens is checked in one pass of k + 1 rows (Session::prefill with every
// row's logits); the drafted tokens the sampler keeps are kept, with the model's own token after the last of them, and
// the session is rewound past the rest. Greedy: the tokens are those of plain decoding (the first maximum of logits of
// the same context: the rows of one pass instead of one-row decodes, equal within the kernels' rounding). Sampling:
// each drafted row by the speculative sampling rule (Sampler::sample_draft), so every token is distributed as plain
// sampling's; the draws differ, so the text differs from a plain run's with the same seed.
enum class Draft {
  none,    // plain decoding, one token per pass
  lookup,  // prompt lookup: the tokens that followed the latest earlier occurrence of the context's last n-gram
  model,   // a draft model: SpeculateOptions::draft_session's greedy continuation of the context
};
const char* draft_name(Draft draft);  // "none", "lookup", "model"

struct SpeculateOptions {
  Draft draft = Draft::none;
  // Drafted tokens per pass at most, 1 ... kMaxDraftTokens. 7 (default): a pass of 8 rows, the most that the
  // matrix-vector linears (GPUs) and the 8-row tile (CPU drivers) take, so that the pass reads each weight once
  // without the 16-row tile; 9 rows cost 1.7x 8 on lavapipe (BENCHMARKS.md "Speculation on a summarise prompt").
  uint32_t k = 7;
  // lookup: the longest n-gram matched (shorter ones are tried down to 1), 1 ... kMaxDraftNgram
  uint32_t ngram = 3;
  // model: a session of a second, smaller model that shares the tokenizer (the same vocabulary; checked at the first
  // draft), not the generating session itself. Before each pass it is brought to the generating session's context
  // (Session::prefill_reusing: what it already holds is kept) and decodes k tokens greedily, which are the draft. It
  // must outlive generate(); its capacity bounds the drafts (none where the context does not fit it).
  Session* draft_session = nullptr;
};
constexpr uint32_t kMaxDraftTokens = 16;
constexpr uint32_t kMaxDraftNgram = 16;

// Prompt-lookup drafting, pure: for n = ngram down to 1, the latest earlier occurrence of the last n tokens of
// `context` (one that ends before the context does); returns up to k tokens that followed it, from the first n
// that has one; empty when none matches.
std::vector<int32_t> lookup_draft(const std::vector<int32_t>& context, uint32_t ngram, uint32_t k);
// Draft-model drafting: `draft` brought to `context` (prefill_reusing), then up to k tokens decoded greedily (the first
// maximum), fewer where its capacity ends; empty when the context does not fit it. invalid_argument when its
// vocabulary is not `vocab`.
std::vector<int32_t> model_draft(Session& draft, const std::vector<int32_t>& context, uint32_t k, uint32_t vocab);
// Checks SpeculateOptions (k and ngram in range where drafting is on); throws Error(invalid_argument) naming the
// field. generate() calls it before any work.
void validate_speculation(const SpeculateOptions& options);

struct GenerateOptions {
  uint32_t max_tokens = 64;  // tokens to sample at most (0: only the prompt is prefilled)
  // Generation ends where the first of these appears in the generated text, even across tokens; neither
  // the stop string nor anything after it is emitted. Each is non-empty, at most kMaxStopStringBytes long;
  // at most kMaxStopStrings of them.
  std::vector<std::string> stop;
  int32_t eos_token = -1;  // the token that ends generation (not emitted); -1 = none
  // Called with each piece of text once it is final (concatenated, the pieces are GenerateResult::text).
  // Held back until it is final: a trailing incomplete UTF-8 sequence (U+FFFD from the tokenizer), and a
  // tail that could still be the start of a stop string. Return false to stop (StopReason::cancelled):
  // nothing more is emitted, sampled or decoded. Empty = no streaming.
  std::function<bool(std::string_view piece)> on_text;
  // Called once the prompt is in the session, before the first token is sampled (e.g. to save its state).
  std::function<void()> on_prefilled;
  ContextOverflow overflow = ContextOverflow::refuse;
  // shift: the tokens at the start that are never dropped (a system prompt); < the session's capacity.
  uint32_t keep = 0;
  SpeculateOptions speculate;
};

struct GenerateResult {
  std::string text;             // the text emitted (the prompt not included)
  std::vector<int32_t> tokens;  // every token sampled, in order (an EOS included)
  StopReason reason = StopReason::max_tokens;
  std::string stop;            // the stop string that matched (reason == stop_string)
  int stop_index = -1;         // its index in GenerateOptions::stop, else -1
  uint32_t reused = 0;         // prompt tokens kept from the session (Session::prefill_reusing)
  uint32_t shifts = 0;         // context shifts made while sampling (ContextOverflow::shift)
  double prefill_seconds = 0;  // the prompt's prefill (wall clock)
  double sample_seconds = 0;   // from the first sample to the end (wall clock)
  // Speculation (SpeculateOptions): passes of drafted rows, tokens drafted, and drafted tokens kept.
  uint32_t verify_passes = 0, drafted = 0, accepted = 0;
};

// Prefills `prompt` on `session` with prompt-prefix reuse (Session::prefill_reusing: what the session
// already holds of it is not recomputed), then samples up to max_tokens tokens with `sampler` (which first
// accepts the prompt's tokens for its penalties; greedy and device-capable samplers pick on the device),
// decoding each into the session except the last one sampled. Afterwards the session holds the prompt and
// every sampled token but the last (Session::tokens()), so a chat app's next turn is a prefill_reusing of
// the whole conversation. With ContextOverflow::shift the prompt goes through Session::prefill_shifting
// (the common prefix taken with Session::history(), room made by shifts) and a decode at the capacity first
// shifts out half of what follows `keep`: the session then holds the conversation's latest part, and
// history() the whole of it, so the next turn is again the whole conversation. Text is decode(prompt + generated) minus
// decode(prompt) (SentencePiece's leading space sees the whole text). Bad options are refused before any work; errors
// of the session (context overflow when prompt + max_tokens exceed the capacity, a lost device, cancelled) are thrown
// as Error.
GenerateResult generate(Session& session, Sampler& sampler, const Tokenizer& tokenizer,
                        const std::vector<int32_t>& prompt, const GenerateOptions& options);

// Checks GenerateOptions::stop against the limits above; throws Error(invalid_argument) naming the string.
void validate_stop_strings(const std::vector<std::string>& stop);

// The text side of generate(), pure (tests, other front ends): given the whole generated text so far after
// each token, returns what may be emitted now. Holds back a trailing U+FFFD (a byte token may complete it)
// and the longest tail that is a proper prefix of a stop string; finds the first stop string, emits what
// precedes it and reports it.
class StopStream {
 public:
  explicit StopStream(std::vector<std::string> stop);
  // `text`: everything generated so far (text grows; what was emitted is never taken back). Returns the
  // piece to emit now ("" when nothing). `final` (no more tokens): emits everything held back, U+FFFD included.
  std::string update(const std::string& text, bool final = false);
  bool stopped() const { return matched_ >= 0; }
  const std::string& matched() const;             // the stop string found ("" when none)
  int matched_index() const { return matched_; }  // its index, else -1
  size_t emitted() const { return emitted_; }

 private:
  std::vector<std::string> stop_;
  size_t emitted_ = 0;
  int matched_ = -1;
};

}  // namespace diffvk
