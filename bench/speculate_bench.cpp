#include "bench/speculate_bench.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "bench/report.hpp"
#include "diffvk/generate.hpp"
#include "diffvk/tokenizer.hpp"

namespace diffvk::bench {

namespace {
constexpr size_t kMaxPromptFileBytes = 1 << 20;  // --speculate-prompt: a passage, not a corpus

// The text of a prompt file, at most kMaxPromptFileBytes (read stops one byte past it). A regular file only: opening a
// FIFO would wait for a writer.
std::string read_prompt_file(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec))
    throw Error(Status::io_error, "bench --speculate-prompt: '" + path + "' is not a regular file" +
                                      (ec ? " (" + ec.message() + ")" : std::string()));
  std::ifstream f(path, std::ios::binary);
  if (!f) throw Error(Status::io_error, "bench --speculate-prompt: cannot open '" + path + "'");
  std::string text;
  text.resize(kMaxPromptFileBytes + 1);
  f.read(&text[0], std::streamsize(text.size()));
  if (f.bad()) throw Error(Status::io_error, "bench --speculate-prompt: cannot read '" + path + "'");
  text.resize(size_t(f.gcount()));
  if (text.size() > kMaxPromptFileBytes)
    throw Error(Status::invalid_argument, "bench --speculate-prompt: '" + path + "' is larger than " +
                                              std::to_string(kMaxPromptFileBytes) + " bytes (a passage is expected)");
  return text;
}
}  // namespace

json speculate_bench(const Options& a, Context& ctx, Model& model, const SessionOptions& so,
                     const std::vector<int32_t>& random, uint32_t N, int runs, const Sink& sink) {
  const ModelConfig& c = model.config();
  SpeculateOptions spec;
  spec.draft = Draft::lookup;
  spec.k = a.draft_k;
  validate_speculation(spec);
  // draft:DIR: a draft model on the same context, its own session; lookup otherwise.
  const bool by_model = a.speculate.rfind("draft:", 0) == 0;
  std::unique_ptr<Model> draft_model;
  std::unique_ptr<Session> draft_session;
  // The prompt: a text file's (Options::speculate_prompt, the model's tokenizer), else the first half of the random
  // prompt, twice (text that an answer may repeat, as in summaries and edits). Then N greedy tokens, plainly and
  // with speculation, alternately. With random tokens the text is not looked at (only generate()'s stop strings
  // would): the bytes tokenizer, at least 256 ids wide even for a model with a smaller vocabulary (the test
  // fixtures), whose ids are all bytes then.
  const bool from_file = !a.speculate_prompt.empty();
  Tokenizer tok =
      from_file ? Tokenizer::load(a.model_dir) : Tokenizer::bytes(std::max<uint32_t>(c.vocab_size, 256), -1, -1);
  std::vector<int32_t> prompt;
  if (from_file) {
    prompt = tok.encode(read_prompt_file(a.speculate_prompt), true);
    for (int32_t t : prompt)
      if (t < 0 || uint32_t(t) >= c.vocab_size)
        throw Error(Status::invalid_argument, "bench --speculate-prompt " + a.speculate_prompt + ": token " +
                                                  std::to_string(t) + " is outside the model's vocabulary");
  } else {
    prompt.assign(random.begin(), random.begin() + random.size() / 2);
    prompt.insert(prompt.end(), random.begin(), random.begin() + random.size() / 2);
  }
  if (prompt.empty() || N < 2) throw Error(Status::invalid_argument, "bench --speculate: needs a prompt and 2 tokens");
  SessionOptions sso = so;  // room for the prompt, the N tokens and a pass past the prompt's end
  sso.context = std::min<uint32_t>(c.max_position_embeddings,
                                   std::max<uint32_t>(so.context, uint32_t(prompt.size()) + N + spec.k + 1));
  if (prompt.size() + spec.k + 1 > sso.context)
    throw Error(Status::invalid_argument, "bench --speculate: the prompt and a pass of k + 1 rows exceed the context");
  auto session = Session::create(model, sso);
  if (by_model) {
    sink.step("model: speculation, loading the draft model " + a.speculate.substr(6));
    draft_model = Model::load(ctx, a.speculate.substr(6));
    SessionOptions dso;
    dso.context = std::min(sso.context, draft_model->config().max_position_embeddings);
    draft_session = Session::create(*draft_model, dso);
    spec.draft = Draft::model;
    spec.draft_session = draft_session.get();
  }
  SamplingOptions greedy;
  greedy.temperature = 0.0f;
  GenerateOptions plain;
  plain.max_tokens = N;
  GenerateOptions fast = plain;
  fast.speculate = spec;

  // The cost of one pass of k + 1 rows against one one-row decode, at the prompt's end (both rewound after).
  sink.step("model: speculation, a pass of k + 1 rows against a one-row decode");
  session->prefill(prompt);
  const uint32_t held = session->position();
  std::vector<int32_t> rows(spec.k + 1);
  for (uint32_t i = 0; i < rows.size(); ++i) rows[i] = prompt[i % prompt.size()];
  std::vector<double> pass_s, row_s;
  for (int r = -1; r < runs; ++r) {  // r = -1: warm-up (the k + 1-row program's first use)
    sink.check_cancel("between speculation runs");
    auto t0 = Clock::now();
    session->prefill(rows, true);
    const double p = seconds_since(t0);
    session->rewind(held);
    t0 = Clock::now();
    session->decode(rows[0]);
    const double d = seconds_since(t0);
    session->rewind(held);
    if (r >= 0) pass_s.push_back(p), row_s.push_back(d);
  }
  const Stats pass = stats_of(pass_s), one = stats_of(row_s);

  sink.step("model: speculation, generation with and without drafts");
  std::vector<double> plain_s, fast_s;
  GenerateResult rp, rf;
  for (int r = -1; r < runs; ++r) {
    sink.check_cancel("between speculation runs");
    session->reset();
    Sampler s1(greedy);
    rp = generate(*session, s1, tok, prompt, plain);
    session->reset();
    Sampler s2(greedy);
    rf = generate(*session, s2, tok, prompt, fast);
    if (r >= 0) plain_s.push_back(rp.sample_seconds), fast_s.push_back(rf.sample_seconds);
  }
  const Stats ps = stats_of(plain_s), fs = stats_of(fast_s);
  const std::string prompt_desc = from_file ? strf("%zu tokens of %s", prompt.size(), a.speculate_prompt.c_str())
                                            : strf("%zu random tokens twice", prompt.size() / 2);
  const bool same = rp.tokens == rf.tokens;
  const double plain_tps = N / ps.median, fast_tps = N / fs.median;
  const double per_pass = rf.verify_passes ? double(rf.accepted + rf.verify_passes) / rf.verify_passes : 0.0;
  sink.reportf(
      "  speculate (%s, k %u; prompt: %s; %u greedy tokens): %u passes, %u of %u drafted "
      "tokens accepted (%.0f%%), %.2f tokens per pass; a %u-row pass costs %.2fx a one-row decode (%.2f ms against "
      "%.2f ms); %.1f tokens/s against %.1f plain (%.2fx)%s",
      by_model ? a.speculate.c_str() : "lookup", spec.k, prompt_desc.c_str(), N, rf.verify_passes, rf.accepted,
      rf.drafted, rf.drafted ? 100.0 * rf.accepted / rf.drafted : 0.0, per_pass, spec.k + 1, pass.median / one.median,
      1e3 * pass.median, 1e3 * one.median, fast_tps, plain_tps, fast_tps / plain_tps,
      same ? "" : "; THE TOKENS DIFFER from plain decoding");
  return {{"draft", draft_name(spec.draft)},
          {"draft_model", by_model ? json(a.speculate.substr(6)) : json(nullptr)},
          {"k", spec.k},
          {"ngram", spec.ngram},
          {"prompt", prompt_desc},
          {"prompt_file", from_file ? json(a.speculate_prompt) : json(nullptr)},
          {"prompt_tokens", prompt.size()},
          {"tokens", N},
          {"verify_passes", rf.verify_passes},
          {"drafted", rf.drafted},
          {"accepted", rf.accepted},
          {"acceptance_rate", rf.drafted ? json(double(rf.accepted) / rf.drafted) : json(nullptr)},
          {"tokens_per_pass", rf.verify_passes ? json(per_pass) : json(nullptr)},
          {"pass_rows", spec.k + 1},
          {"pass_seconds", stats_json(pass, "s")},
          {"one_row_seconds", stats_json(one, "s")},
          {"pass_vs_one_row", pass.median / one.median},
          {"plain_tokens_per_s", plain_tps},
          {"speculative_tokens_per_s", fast_tps},
          {"speedup", fast_tps / plain_tps},
          {"same_tokens", same}};
}

}  // namespace diffvk::bench
