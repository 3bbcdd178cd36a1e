// The threading model. Several sessions of ONE model, driven by 4 threads at once
// through the C ABI (what the Java binding's "one Session per conversation" invites), must compute
// logits bit-identical to a serial run of the same sessions, with the Khronos validation layer on
// (its thread-safety checks report e.g. "VkFence simultaneously used by thread A and B"): any
// validation message fails the test. Each thread also churns the C ABI registry (samplers created,
// used and destroyed, position queries) while the others run.
//
// A standalone program (not doctest) so that .ci/tsan can build just it and the library with
// -fsanitize=thread. Usage: diffvk_threads_test <model dir> [decode steps per session]
// Environment: DIFFVK_THREADS_STEPS overrides the decode steps (default 128).
#include <atomic>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "diffvk/diffvk.h"
#include "platform.hpp"

namespace {

constexpr int kThreads = 4;
constexpr int kSessionsPerThread = 2;
constexpr int kSessions = kThreads * kSessionsPerThread;
constexpr uint32_t kPrompt = 6;

std::atomic<int> g_validation{0};
std::atomic<int> g_failures{0};
std::mutex g_print;

void fail(const std::string& msg) {
  ++g_failures;
  std::lock_guard<std::mutex> l(g_print);
  std::fprintf(stderr, "threads_test: FAIL: %s\n", msg.c_str());
}

#define CHECK_OK(call)                                                                            \
  do {                                                                                            \
    const diffvk_status st_ = (call);                                                             \
    if (st_ != DIFFVK_OK) {                                                                       \
      fail(std::string(#call) + " -> " + diffvk_status_string(st_) + ": " + diffvk_last_error()); \
      return false;                                                                               \
    }                                                                                             \
  } while (0)

// Deterministic token stream of session k (teacher forcing: independent of the logits).
struct Tokens {
  explicit Tokens(int k) : state(0x9e3779b97f4a7c15ull * uint64_t(k + 1)) {}
  int32_t next(uint32_t vocab) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<int32_t>((state >> 33) % vocab);
  }
  uint64_t state;
};

// One session's whole run: prefill kPrompt tokens, decode until `steps` decode steps are done, resetting
// (and prefilling again) whenever the context is full. Appends every step's logits to out.
struct SessionRun {
  int k = 0;
  diffvk_session* s = nullptr;
  Tokens tok{0};
  uint32_t decoded = 0;
  bool need_prefill = true;
  std::vector<float> out;
};

bool step(SessionRun& r, uint32_t vocab, uint32_t capacity) {
  std::vector<float> lg(vocab);
  uint32_t pos = 0;
  CHECK_OK(diffvk_session_position(r.s, &pos));
  if (r.need_prefill || pos >= capacity) {
    if (pos >= capacity) CHECK_OK(diffvk_session_reset(r.s));
    int32_t p[kPrompt];
    for (auto& t : p) t = r.tok.next(vocab);
    CHECK_OK(diffvk_session_prefill(r.s, p, kPrompt, lg.data(), lg.size()));
    r.need_prefill = false;
  } else {
    CHECK_OK(diffvk_session_decode(r.s, r.tok.next(vocab), lg.data(), lg.size()));
    ++r.decoded;
  }
  r.out.insert(r.out.end(), lg.begin(), lg.end());
  return true;
}

// Drives the sessions [first, first + n) of runs, interleaving their steps, until each did `steps`
// decode steps. Creates the sessions itself (session creation concurrent with other threads' work)
// and churns the registry with a sampler every few steps.
bool drive(diffvk_model* model, std::vector<SessionRun>& runs, int first, int n, uint32_t steps, uint32_t vocab,
           uint32_t context) {
  for (int i = first; i < first + n; ++i) {
    runs[i].k = i;
    runs[i].tok = Tokens(i);
    CHECK_OK(diffvk_session_create(model, context, 4, &runs[i].s));
  }
  uint32_t capacity = 0;
  CHECK_OK(diffvk_session_capacity(runs[first].s, &capacity));
  for (uint32_t it = 0;; ++it) {
    bool more = false;
    for (int i = first; i < first + n; ++i) {
      if (runs[i].decoded >= steps) continue;
      more = true;
      if (!step(runs[i], vocab, capacity)) return false;
    }
    if (!more) break;
    if (it % 16 == 0) {  // registry churn beside the GPU work of the other threads
      diffvk_sampler* sm = nullptr;
      CHECK_OK(diffvk_sampler_create(0.8f, 10, 0.9f, it, &sm));
      int32_t t = -1;
      const std::vector<float>& last = runs[first].out;
      CHECK_OK(diffvk_sampler_sample(sm, last.data() + last.size() - vocab, vocab, &t));
      CHECK_OK(diffvk_sampler_destroy(sm));
      if (t < 0 || uint32_t(t) >= vocab) fail("sampled token out of range");
    }
  }
  for (int i = first; i < first + n; ++i) CHECK_OK(diffvk_session_destroy(runs[i].s));
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s <model dir> [decode steps per session]\n", argv[0]);
    return 2;
  }
  uint32_t steps = 128;
  if (const char* e = std::getenv("DIFFVK_THREADS_STEPS")) steps = static_cast<uint32_t>(std::strtoul(e, nullptr, 10));
  if (argc > 2) steps = static_cast<uint32_t>(std::strtoul(argv[2], nullptr, 10));
  if (steps == 0) steps = 1;
  // Every validation message (warning or error) fails the test; they reach the log as "validation: ...".
  diffvk::platform::set_log_sink([](diffvk::platform::LogLevel level, const std::string& msg) {
    std::lock_guard<std::mutex> l(g_print);
    std::fprintf(stderr, "diffvk: [%s] %s\n", diffvk::platform::log_level_name(level), msg.c_str());
    if (level >= diffvk::platform::LogLevel::warn && msg.rfind("validation: ", 0) == 0) ++g_validation;
  });

  diffvk_context_options o;
  diffvk_context_default_options(&o);
  o.validation = 1;
  diffvk_context* ctx = nullptr;
  diffvk_model* model = nullptr;
  if (diffvk_context_create(&o, &ctx) != DIFFVK_OK || diffvk_model_load(ctx, argv[1], &model) != DIFFVK_OK) {
    std::fprintf(stderr, "threads_test: setup failed: %s\n", diffvk_last_error());
    return 1;
  }
  uint32_t vocab = 0;
  diffvk_model_vocab_size(model, &vocab);
  const uint32_t context = 32;  // small: the sessions wrap around (reset) several times

  // Serial reference: every session alone, one after another, on this thread.
  std::vector<SessionRun> serial(kSessions);
  for (int i = 0; i < kSessions; ++i)
    if (!drive(model, serial, i, 1, steps, vocab, context)) return 1;

  // Concurrent: 4 threads, each with its own 2 sessions of the same model, started together.
  std::vector<SessionRun> conc(kSessions);
  std::atomic<int> ready{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      ++ready;
      while (ready.load() < kThreads) std::this_thread::yield();
      drive(model, conc, t * kSessionsPerThread, kSessionsPerThread, steps, vocab, context);
    });
  for (auto& th : threads) th.join();

  size_t compared = 0, differing_steps = 0;
  for (int i = 0; i < kSessions; ++i) {
    if (conc[i].out.size() != serial[i].out.size()) {
      fail("session " + std::to_string(i) + ": " + std::to_string(conc[i].out.size() / vocab) +
           " steps concurrently vs " + std::to_string(serial[i].out.size() / vocab) + " serially");
      continue;
    }
    size_t bad = 0;
    for (size_t s = 0; s < serial[i].out.size() / vocab; ++s)
      bad += std::memcmp(&conc[i].out[s * vocab], &serial[i].out[s * vocab], vocab * sizeof(float)) != 0;
    compared += serial[i].out.size() / vocab;
    differing_steps += bad;
    if (bad)
      fail("session " + std::to_string(i) + ": " + std::to_string(bad) + " of " +
           std::to_string(serial[i].out.size() / vocab) + " steps differ from the serial run");
  }
  if (diffvk_model_destroy(model) != DIFFVK_OK || diffvk_context_destroy(ctx) != DIFFVK_OK)
    fail(std::string("teardown: ") + diffvk_last_error());
  std::printf(
      "threads: %d threads x %d sessions x %u decode steps: %zu steps compared, %zu differ, %d validation message(s)\n",
      kThreads, kSessionsPerThread, steps, compared, differing_steps, g_validation.load());
  diffvk::platform::set_log_sink(nullptr);
  if (g_validation.load()) fail(std::to_string(g_validation.load()) + " validation message(s)");
  return g_failures.load() ? 1 : 0;
}
