// The C ABI (include/diffvk/diffvk.h): every entry point catches everything, validates handles
// against a registry of live objects and reports through a status code + thread-local message.
#include "diffvk/diffvk.h"

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <functional>
#include <memory>
#include <type_traits>
#include <mutex>
#include <new>
#include <string>
#include <unordered_map>

#include "diffvk/generate.hpp"
#include "diffvk/model.hpp"
#include "capi/c_api_guard.hpp"
#include "capi/c_api_internal.hpp"
#include "io/gguf.hpp"
#include "platform.hpp"

// Handles are kept alive by shared_ptr while any call uses them: the registry holds one reference,
// each call takes another (under the registry lock) for its duration, children hold their parent's.
// So a destroy racing a call on another thread cannot free memory under it (using a handle while
// another thread destroys it is still the caller's error: the call fails or completes, never crashes).
// children: live (or being created) children; changed only under the registry lock.
struct diffvk_context {
  std::unique_ptr<diffvk::Context> ctx;
  int children = 0;
};
struct diffvk_model {
  std::shared_ptr<diffvk_context> parent;
  std::unique_ptr<diffvk::Model> model;
  int children = 0;
};
struct diffvk_session {
  std::shared_ptr<diffvk_model> parent;
  std::unique_ptr<diffvk::Session> session;
};
struct diffvk_sampler {
  diffvk::Sampler sampler;
};

#define DIFFVK_STR2_(x) #x
#define DIFFVK_STR_(x) DIFFVK_STR2_(x)
#define DIFFVK_VERSION_STRING_ \
  DIFFVK_STR_(DIFFVK_VERSION_MAJOR) "." DIFFVK_STR_(DIFFVK_VERSION_MINOR) "." DIFFVK_STR_(DIFFVK_VERSION_PATCH)
namespace diffvk::capi {
std::string& last_error() {
  thread_local std::string message;
  return message;
}
}  // namespace diffvk::capi

namespace {
using diffvk::capi::fail;
using diffvk::capi::guarded;
using diffvk::capi::need;

// A C caller may pass any integer in an enum parameter or field; read it as its integer type first
// (loading an out-of-range value as the enum type itself is undefined behaviour in C++).
template <class E>
int enum_value(const E& e) {
  std::underlying_type_t<E> v;
  std::memcpy(&v, &e, sizeof v);
  return static_cast<int>(v);
}

enum class Kind { context, model, session, sampler };
struct Entry {
  Kind kind;
  std::shared_ptr<void> object;
};
std::mutex g_mutex;  // the registry and every children counter; never held during GPU work
std::unordered_map<const void*, Entry>& registry() {
  static auto* r = new std::unordered_map<const void*, Entry>;  // never destroyed: handles leaked by
  return *r;                                                    // the caller are not torn down at exit
}
template <class T>
void track(const std::shared_ptr<T>& p, Kind k) {  // g_mutex held by the caller
  registry()[p.get()] = Entry{k, p};
}

// Looks up a live handle and returns a reference that keeps it alive for the call.
template <class T>
std::shared_ptr<T> check_locked(const T* p, Kind k, const char* what) {
  if (!p) fail(DIFFVK_INVALID_ARGUMENT, std::string(what) + " is NULL");
  auto it = registry().find(p);
  if (it == registry().end() || it->second.kind != k)
    fail(DIFFVK_INVALID_ARGUMENT, std::string(what) + " is not a live handle (destroyed, or of another kind)");
  return std::static_pointer_cast<T>(it->second.object);
}
template <class T>
std::shared_ptr<T> check(const T* p, Kind k, const char* what) {
  if (!p) fail(DIFFVK_INVALID_ARGUMENT, std::string(what) + " is NULL");
  std::lock_guard<std::mutex> l(g_mutex);
  return check_locked(p, k, what);
}
// The body of every destroy: under the lock, check the handle, run `unlink` (it may refuse: children still
// alive; it takes the handle from its parent's count), erase it; the object is released after the lock.
template <class T, class Unlink>
void destroy_handle(T* p, Kind k, const char* what, Unlink unlink) {
  std::shared_ptr<T> keep;  // released (and the object destroyed) after the lock
  std::lock_guard<std::mutex> l(g_mutex);
  keep = check_locked(p, k, what);
  unlink(*keep);
  registry().erase(p);
}
// Refuses the destroy of `what` (a context or a model) while what it created (`children`) is alive.
template <class T>
void refuse_children(const T& h, const char* children, const char* what) {
  if (h.children)
    fail(DIFFVK_INVALID_ARGUMENT,
         std::to_string(h.children) + " " + children + " created from this " + what + " are still alive");
}
// The fields diffvk_sampler_options and diffvk::SamplingOptions share, from one to the other (either way).
template <class To, class From>
void copy_sampling_fields(To& to, const From& from) {
  to.temperature = from.temperature;
  to.top_k = from.top_k;
  to.top_p = from.top_p;
  to.seed = from.seed;
  to.min_p = from.min_p;
  to.repeat_penalty = from.repeat_penalty;
  to.frequency_penalty = from.frequency_penalty;
  to.presence_penalty = from.presence_penalty;
  to.penalty_last_n = from.penalty_last_n;
}
// A lost device makes every later call on the context, its models and sessions fail at once.
void alive(const diffvk_context& c) {
  if (c.ctx->lost())
    fail(DIFFVK_DEVICE_LOST,
         "the Vulkan device was lost earlier; destroy the sessions, models and this context "
         "and create a new context");
}
const diffvk_context& ctx_of(const diffvk_context& c) { return c; }
const diffvk_context& ctx_of(const diffvk_model& m) { return *m.parent; }
const diffvk_context& ctx_of(const diffvk_session& s) { return *s.parent->parent; }
// check() and alive(): a live handle whose device has not been lost, kept alive for the call.
template <class T>
std::shared_ptr<T> live(const T* p, Kind k, const char* what) {
  auto h = check(p, k, what);
  alive(ctx_of(*h));
  return h;
}
// The body of every getter: one value of a live handle into `*out`. Each exported getter still
// passes its own __func__, so the errors name it.
template <class T, class Out, class Get>
diffvk_status get_value(const char* fn, const T* p, Kind k, const char* what, Out* out, Get&& get) {
  return guarded(fn, [&] {
    auto h = live(p, k, what);
    need(out, "out");
    *out = get(*h);
  });
}

// The layouts of each options struct (diffvk.h VERSIONING): its size at each version, ascending, the last
// sizeof(T). *_default_options_sized writes the largest that fits the caller's struct; the exported
// *_default_options (the 1.0 ABI) the first. A field added at the end needs its layout here: the static_asserts
// fail until the last entry ends at the new last field.
using diffvk::capi::Layout;
using diffvk::capi::layout;
constexpr Layout kContextLayouts[] = {
    layout(offsetof(diffvk_context_options, pipeline_cache_path) + sizeof(const char*),
           alignof(diffvk_context_options)),  // 1.0
    layout(offsetof(diffvk_context_options, pipeline_cache) + sizeof(int),
           alignof(diffvk_context_options)),                                                            // 1.1
    layout(offsetof(diffvk_context_options, selftest) + sizeof(int), alignof(diffvk_context_options)),  // 1.2
    layout(offsetof(diffvk_context_options, selftest_model) + sizeof(const char*),
           alignof(diffvk_context_options))};  // 1.3
constexpr Layout kSessionLayouts[] = {
    layout(offsetof(diffvk_session_options, kv_cache), alignof(diffvk_session_options)),  // 1.0: up to abort_user
    layout(offsetof(diffvk_session_options, kv_cache) + sizeof(uint32_t), alignof(diffvk_session_options))};  // 1.1
constexpr Layout kModelLayouts[] = {
    layout(offsetof(diffvk_model_options, q4_0_head), alignof(diffvk_model_options)),  // {struct_size, weights}
    layout(offsetof(diffvk_model_options, quant_prefill) + sizeof(uint32_t), alignof(diffvk_model_options))};  // 1.1
constexpr Layout kSamplerLayouts[] = {layout(offsetof(diffvk_sampler_options, penalty_last_n) + sizeof(uint32_t),
                                             alignof(diffvk_sampler_options))};  // 1.1
constexpr Layout kGenerateLayouts[] = {
    layout(offsetof(diffvk_generate_options, keep) + sizeof(uint32_t), alignof(diffvk_generate_options)),  // 1.1
    layout(offsetof(diffvk_generate_options, draft_ngram) + sizeof(uint32_t),
           alignof(diffvk_generate_options)),  // 1.2
    layout(offsetof(diffvk_generate_options, draft_session) + sizeof(diffvk_session*),
           alignof(diffvk_generate_options))};  // 1.3
template <class T, size_t N>
constexpr bool last_is_sizeof(const Layout (&layouts)[N]) {
  return layouts[N - 1].size == sizeof(T);
}
static_assert(last_is_sizeof<diffvk_context_options>(kContextLayouts),
              "diffvk_context_options grew: add its layout to kContextLayouts");
static_assert(last_is_sizeof<diffvk_session_options>(kSessionLayouts),
              "diffvk_session_options grew: add its layout to kSessionLayouts");
static_assert(last_is_sizeof<diffvk_model_options>(kModelLayouts),
              "diffvk_model_options grew: add its layout to kModelLayouts");
static_assert(last_is_sizeof<diffvk_sampler_options>(kSamplerLayouts),
              "diffvk_sampler_options grew: add its layout to kSamplerLayouts");
static_assert(last_is_sizeof<diffvk_generate_options>(kGenerateLayouts),
              "diffvk_generate_options grew: add its layout to kGenerateLayouts");
static_assert(sizeof(void*) != 8 ||
                  (kSessionLayouts[0].size == 32 && kModelLayouts[0].size == 16 && kContextLayouts[0].size == 32),
              "the 1.0 layouts of 64-bit targets (abi/libdiffvk.abi)");

// Reads a caller's options struct: the fields its struct_size covers, defaults for the rest (all of this
// library's: `defaults` is a diffvk_X_default_options_sized, called with sizeof(T)). Only whole fields: the bytes
// copied end where the last layout that struct_size covers ends (its `end`, not its padded size), so the tail
// padding of an older layout, where a later version put a field (diffvk_model_options.q4_0_head in 1.0's), is not
// read as that field, nor is a field that a hand-set struct_size covers in part. Where a later version's field lies
// in the older one's padding and both have one size (diffvk_context_options.selftest in 1.1's on 64-bit targets),
// the later one's fields are read; that version's *_default_options zeroes its padding. A struct_size below the
// first layout's end: the bytes given.
template <class T, size_t N>
T read_options(const T* o, void (*defaults)(T*, size_t), const Layout (&layouts)[N], const char* what) {
  T v;
  defaults(&v, sizeof v);
  if (!o) return v;
  if (o->struct_size < sizeof(size_t) || o->struct_size > sizeof(T))
    fail(DIFFVK_INVALID_ARGUMENT, std::string(what) + "->struct_size is " + std::to_string(o->struct_size) +
                                      "; this library (" + DIFFVK_VERSION_STRING_ + ") knows up to " +
                                      std::to_string(sizeof(T)) + " bytes: fill the struct with diffvk_" + what +
                                      "_default_options() first");
  std::memcpy(static_cast<void*>(&v), o, diffvk::capi::fields_covered(layouts, o->struct_size));
  v.struct_size = sizeof(T);
  return v;
}

void copy_logits(const std::vector<float>& lg, float* out, size_t cap) {
  if (lg.size() > cap) fail(DIFFVK_INTERNAL, "logits larger than the checked capacity");
  std::memcpy(out, lg.data(), lg.size() * sizeof(float));
}
}  // namespace

namespace diffvk::capi {
diffvk_status with_context(const char* fn, diffvk_context* context, const std::function<void(Context&)>& body) {
  return guarded(fn, [&] {
    auto c = live(context, Kind::context, "context");
    body(*c->ctx);
  });
}
diffvk_status report_error(const char* fn, diffvk_status status, const std::string& message) {
  return guarded(fn, [&] { fail(status, message); });
}
}  // namespace diffvk::capi
namespace {
// Registers a model made by `load` (which runs without the registry lock) as a child of the context.
template <class Load>
void load_model(diffvk_context* c, diffvk_model** out, Load&& load) {
  need(out, "out");
  *out = nullptr;
  std::shared_ptr<diffvk_context> k;
  {
    std::lock_guard<std::mutex> l(g_mutex);
    k = check_locked(c, Kind::context, "context");
    alive(*k);
    ++k->children;  // reserved: the context cannot be destroyed while this model loads
  }
  auto m = std::make_shared<diffvk_model>();
  m->parent = k;
  try {
    m->model = load(*k->ctx);  // no lock held
  } catch (...) {
    std::lock_guard<std::mutex> l(g_mutex);
    --k->children;
    throw;
  }
  std::lock_guard<std::mutex> l(g_mutex);
  track(m, Kind::model);
  *out = m.get();
}
// DIFFVK_QUANT_PATH_* of the field `what` -> LoadOptions::QuantDecode.
diffvk::LoadOptions::QuantDecode quant_path(uint32_t v, const char* what) {
  using Q = diffvk::LoadOptions::QuantDecode;
  if (v > DIFFVK_QUANT_PATH_INT8_DOT)
    fail(DIFFVK_INVALID_ARGUMENT,
         std::string("model options: unknown ") + what + " value " + std::to_string(v) +
             " (DIFFVK_QUANT_PATH_AUTO = 0, DIFFVK_QUANT_PATH_DEQUANT = 1, DIFFVK_QUANT_PATH_INT8_DOT = 2)");
  return v == DIFFVK_QUANT_PATH_DEQUANT ? Q::dequant : v == DIFFVK_QUANT_PATH_INT8_DOT ? Q::int8_dot : Q::automatic;
}
// diffvk_model_options -> LoadOptions; an unknown value is the caller's error, never a fallback.
// *out is cleared first, so that a refused option leaves it NULL as every other failure does.
diffvk::LoadOptions load_options(const diffvk_model_options* opts, diffvk_model** out) {
  need(out, "out");
  *out = nullptr;
  const diffvk_model_options o = read_options(opts, diffvk_model_default_options_sized, kModelLayouts, "model");
  diffvk::LoadOptions lo;
  if (o.weights > DIFFVK_WEIGHTS_Q4_0)
    fail(DIFFVK_INVALID_ARGUMENT, "model options: unknown weights value " + std::to_string(o.weights) +
                                      " (DIFFVK_WEIGHTS_F16 = 0, DIFFVK_WEIGHTS_Q8_0 = 1, DIFFVK_WEIGHTS_Q4_0 = 2)");
  lo.weights = o.weights == DIFFVK_WEIGHTS_Q8_0   ? diffvk::QuantKind::q8_0
               : o.weights == DIFFVK_WEIGHTS_Q4_0 ? diffvk::QuantKind::q4_0
                                                  : diffvk::QuantKind::f16;
  if (o.q4_0_head > 1)
    fail(DIFFVK_INVALID_ARGUMENT,
         "model options: unknown q4_0_head value " + std::to_string(o.q4_0_head) + " (0 or 1)");
  lo.q4_0_head = o.q4_0_head == 1;
  lo.quant_decode = quant_path(o.quant_decode, "quant_decode");
  lo.quant_prefill = quant_path(o.quant_prefill, "quant_prefill");
  return lo;
}
// LoadStats' path name ("int8_dot", "dequant", "" = no quantized weights) -> DIFFVK_QUANT_PATH_*.
uint32_t quant_path_code(const std::string& name, const char* what) {
  if (name.empty()) return DIFFVK_QUANT_PATH_AUTO;
  if (name == "dequant") return DIFFVK_QUANT_PATH_DEQUANT;
  if (name == "int8_dot") return DIFFVK_QUANT_PATH_INT8_DOT;
  fail(DIFFVK_INTERNAL, std::string("the model's ") + what + " path is '" + name + "', which the C ABI does not know");
}
}  // namespace

// The checks prefill and prefill_reusing share: pointers, no tokens, the logits capacity. Returns the vocabulary.
static uint32_t check_prefill_args(const diffvk_session& k, const int32_t* tokens, size_t n, const float* logits,
                                   size_t cap) {
  need(tokens, "tokens");
  need(logits, "logits");
  if (n == 0) fail(DIFFVK_INVALID_ARGUMENT, "no tokens");
  const uint32_t V = k.parent->model->config().vocab_size;
  if (cap < V)
    fail(DIFFVK_BUFFER_TOO_SMALL, "logits buffer holds " + std::to_string(cap) + " floats, need " + std::to_string(V));
  return V;
}

extern "C" {

const char* diffvk_version(void) { return DIFFVK_VERSION_STRING_; }
uint32_t diffvk_version_number(void) { return DIFFVK_VERSION; }

const char* diffvk_last_error(void) { return diffvk::capi::last_error().c_str(); }

diffvk_status diffvk_set_cache_dir(const char* base) {
  return guarded(__func__, [&] { diffvk::platform::set_cache_dir(base ? base : ""); });
}

void diffvk_set_log_callback(diffvk_log_fn fn, void* user, int max_level) {
  using diffvk::platform::LogLevel;
  const int lv = std::clamp(max_level, int(DIFFVK_LOG_ERROR), int(DIFFVK_LOG_DEBUG));
  diffvk::platform::set_log_level(lv == DIFFVK_LOG_ERROR  ? LogLevel::error
                                  : lv == DIFFVK_LOG_WARN ? LogLevel::warn
                                  : lv == DIFFVK_LOG_INFO ? LogLevel::info
                                                          : LogLevel::debug);
  if (!fn) {
    diffvk::platform::set_log_sink(nullptr);
    return;
  }
  diffvk::platform::set_log_sink([fn, user](LogLevel level, const std::string& msg) {
    const int c = level == LogLevel::error  ? DIFFVK_LOG_ERROR
                  : level == LogLevel::warn ? DIFFVK_LOG_WARN
                  : level == LogLevel::info ? DIFFVK_LOG_INFO
                                            : DIFFVK_LOG_DEBUG;
    fn(user, c, msg.c_str());
  });
}

// *_default_options_sized: the largest known layout that fits `size` (diffvk.h VERSIONING). The exported
// *_default_options (1.0 ABI; parenthesized: diffvk.h makes the names function-like macros) write the first.
void diffvk_context_default_options_sized(diffvk_context_options* o, size_t size) {
  auto d = diffvk::capi::zeroed<diffvk_context_options>();
  d.struct_size = sizeof d;
  d.device = nullptr;
  d.precision = DIFFVK_PRECISION_AUTO;
  d.validation = -1;
  d.pipeline_cache_path = nullptr;
  d.pipeline_cache = 1;
  d.selftest = DIFFVK_SELFTEST_AUTO;
  d.selftest_model = nullptr;
  diffvk::capi::write_defaults(o, size, d, kContextLayouts);
}
void(diffvk_context_default_options)(diffvk_context_options* o) {
  diffvk_context_default_options_sized(o, kContextLayouts[0].size);
}

void diffvk_session_default_options_sized(diffvk_session_options* o, size_t size) {
  auto d = diffvk::capi::zeroed<diffvk_session_options>();
  d.struct_size = sizeof d;
  d.context_len = 0;
  d.chunk = 0;
  d.abort_cb = nullptr;
  d.abort_user = nullptr;
  d.kv_cache = DIFFVK_KV_F16;
  diffvk::capi::write_defaults(o, size, d, kSessionLayouts);
}
void(diffvk_session_default_options)(diffvk_session_options* o) {
  diffvk_session_default_options_sized(o, kSessionLayouts[0].size);
}

const char* diffvk_status_string(diffvk_status s) {
  const int v = enum_value(s);
  if (v == DIFFVK_BUFFER_TOO_SMALL) return "buffer too small";
  if (v < DIFFVK_OK || v > DIFFVK_CANCELLED) return "unknown status";
  return diffvk::status_name(static_cast<diffvk::Status>(v));
}

diffvk_status diffvk_context_create(const diffvk_context_options* opts, diffvk_context** out) {
  return guarded(__func__, [&] {
    need(out, "out");
    *out = nullptr;
    const diffvk_context_options o =
        read_options(opts, diffvk_context_default_options_sized, kContextLayouts, "context");
    diffvk::ContextOptions co;
    if (o.device) co.device = o.device;
    const int precision = enum_value(o.precision);
    if (precision < DIFFVK_PRECISION_AUTO || precision > DIFFVK_PRECISION_FP32)
      fail(DIFFVK_INVALID_ARGUMENT, "unknown precision " + std::to_string(precision));
    co.precision = precision == DIFFVK_PRECISION_FP16   ? diffvk::Precision::fp16
                   : precision == DIFFVK_PRECISION_FP32 ? diffvk::Precision::fp32
                                                        : diffvk::Precision::automatic;
    co.validation = o.validation < 0 ? -1 : (o.validation ? 1 : 0);
    if (o.pipeline_cache != 0 && o.pipeline_cache != 1)
      fail(DIFFVK_INVALID_ARGUMENT, "pipeline_cache " + std::to_string(o.pipeline_cache) + " is not 0 or 1");
    co.pipeline_cache = o.pipeline_cache == 1;
    if (o.pipeline_cache_path) co.pipeline_cache_path = o.pipeline_cache_path;
    if (o.selftest < DIFFVK_SELFTEST_AUTO || o.selftest > DIFFVK_SELFTEST_OFF)
      fail(DIFFVK_INVALID_ARGUMENT, "selftest " + std::to_string(o.selftest) +
                                        " is not DIFFVK_SELFTEST_AUTO, DIFFVK_SELFTEST_ALWAYS or DIFFVK_SELFTEST_OFF");
    co.selftest = o.selftest == DIFFVK_SELFTEST_ALWAYS ? diffvk::SelftestMode::always
                  : o.selftest == DIFFVK_SELFTEST_OFF  ? diffvk::SelftestMode::off
                                                       : diffvk::SelftestMode::automatic;
    if (o.selftest_model && *o.selftest_model) {
      co.selftest_model = o.selftest_model;
      try {  // checked here too: libdiffvk.so alone runs no self-test, and a wrong text is the caller's mistake
        (void)diffvk::model_pipeline_shape(co.selftest_model);
      } catch (const diffvk::Error& e) {
        fail(DIFFVK_INVALID_ARGUMENT, std::string("selftest_model: ") + e.what());
      }
    }
    auto c = std::make_shared<diffvk_context>();
    c->ctx = diffvk::Context::create(co);
    std::lock_guard<std::mutex> l(g_mutex);
    track(c, Kind::context);
    *out = c.get();
  });
}

diffvk_status diffvk_context_destroy(diffvk_context* c) {
  return guarded(__func__, [&] {
    destroy_handle(c, Kind::context, "context",
                   [](const diffvk_context& k) { refuse_children(k, "model(s)", "context"); });
  });
}

diffvk_status diffvk_context_device_name(const diffvk_context* c, char* buf, size_t cap) {
  return guarded(__func__, [&] {
    auto k = live(c, Kind::context, "context");
    need(buf, "buffer");
    const std::string& n = k->ctx->caps().name;
    if (cap < n.size() + 1) fail(DIFFVK_BUFFER_TOO_SMALL, "need " + std::to_string(n.size() + 1) + " bytes");
    std::memcpy(buf, n.c_str(), n.size() + 1);
  });
}

diffvk_status diffvk_context_precision(const diffvk_context* c, diffvk_precision* out) {
  return get_value(__func__, c, Kind::context, "context", out, [](const diffvk_context& k) {
    return k.ctx->precision() == diffvk::Precision::fp16 ? DIFFVK_PRECISION_FP16 : DIFFVK_PRECISION_FP32;
  });
}

void diffvk_model_default_options_sized(diffvk_model_options* o, size_t size) {
  auto d = diffvk::capi::zeroed<diffvk_model_options>();
  d.struct_size = sizeof d;
  d.weights = DIFFVK_WEIGHTS_F16;
  d.q4_0_head = 0;
  d.quant_decode = DIFFVK_QUANT_PATH_AUTO;
  d.quant_prefill = DIFFVK_QUANT_PATH_AUTO;
  diffvk::capi::write_defaults(o, size, d, kModelLayouts);
}
void(diffvk_model_default_options)(diffvk_model_options* o) {
  diffvk_model_default_options_sized(o, kModelLayouts[0].size);
}

diffvk_status diffvk_model_load(diffvk_context* c, const char* dir, diffvk_model** out) {
  return diffvk_model_load_with_options(c, dir, nullptr, out);
}
diffvk_status diffvk_model_load_with_options(diffvk_context* c, const char* dir, const diffvk_model_options* opts,
                                             diffvk_model** out) {
  return guarded(__func__, [&] {
    const diffvk::LoadOptions lo = load_options(opts, out);
    need(dir, "dir");
    load_model(c, out, [&](diffvk::Context& ctx) { return diffvk::Model::load(ctx, dir, lo); });
  });
}

diffvk_status diffvk_model_load_memory(diffvk_context* c, const char* config_json, size_t config_size,
                                       const void* safetensors, size_t safetensors_size, diffvk_model** out) {
  return diffvk_model_load_memory_with_options(c, config_json, config_size, safetensors, safetensors_size, nullptr,
                                               out);
}
diffvk_status diffvk_model_load_memory_with_options(diffvk_context* c, const char* config_json, size_t config_size,
                                                    const void* safetensors, size_t safetensors_size,
                                                    const diffvk_model_options* opts, diffvk_model** out) {
  return guarded(__func__, [&] {
    const diffvk::LoadOptions lo = load_options(opts, out);
    if (!config_json && config_size)
      fail(DIFFVK_INVALID_ARGUMENT, "config_json is NULL with config_size " + std::to_string(config_size));
    need(safetensors, "safetensors");  // a .gguf here with config_json NULL, 0: Model::load_memory checks the rest
    load_model(c, out, [&](diffvk::Context& ctx) {
      return diffvk::Model::load_memory(ctx, config_json, config_size, safetensors, safetensors_size, "memory", lo);
    });
  });
}

namespace {
// A config text into the caller's buffer, NUL-terminated (diffvk_model_config*).
void write_text(const std::string& text, char* buffer, size_t cap, size_t* size) {
  *size = text.size() + 1;
  if (!buffer && cap == 0) return;
  need(buffer, "buffer");
  if (cap < text.size() + 1)
    fail(DIFFVK_BUFFER_TOO_SMALL,
         "buffer holds " + std::to_string(cap) + " bytes, the config needs " + std::to_string(text.size() + 1));
  std::memcpy(buffer, text.c_str(), text.size() + 1);
}
}  // namespace

diffvk_status diffvk_model_config(const char* path, char* buffer, size_t cap, size_t* size) {
  return guarded(__func__, [&] {
    need(path, "path");
    need(size, "size");
    write_text(diffvk::model_config_text(std::string(path)), buffer, cap, size);
  });
}

diffvk_status diffvk_model_config_memory(const char* config_json, size_t config_size, const void* weights,
                                         size_t weights_size, char* buffer, size_t cap, size_t* size) {
  return guarded(__func__, [&] {
    need(size, "size");
    if (config_json) {
      write_text(diffvk::model_config_text(config_json, config_size), buffer, cap, size);
      return;
    }
    if (config_size)
      fail(DIFFVK_INVALID_ARGUMENT, "config_json is NULL with config_size " + std::to_string(config_size));
    need(weights, "weights");  // a .gguf: config_json NULL, 0
    if (!diffvk::GgufFile::has_magic(weights, weights_size))
      fail(DIFFVK_FORMAT_ERROR,
           "config_json is NULL and the weights are not a .gguf (only a .gguf carries its own "
           "configuration)");
    write_text(diffvk::model_config_text(weights, weights_size), buffer, cap, size);
  });
}

diffvk_status diffvk_model_load_fd(diffvk_context* c, int config_fd, int64_t config_offset, int64_t config_size,
                                   int safetensors_fd, int64_t safetensors_offset, int64_t safetensors_size,
                                   diffvk_model** out) {
  return diffvk_model_load_fd_with_options(c, config_fd, config_offset, config_size, safetensors_fd, safetensors_offset,
                                           safetensors_size, nullptr, out);
}
diffvk_status diffvk_model_load_fd_with_options(diffvk_context* c, int config_fd, int64_t config_offset,
                                                int64_t config_size, int safetensors_fd, int64_t safetensors_offset,
                                                int64_t safetensors_size, const diffvk_model_options* opts,
                                                diffvk_model** out) {
  return guarded(__func__, [&] {
    const diffvk::LoadOptions lo = load_options(opts, out);
    if (config_size < -1)
      fail(DIFFVK_INVALID_ARGUMENT, "config_size " + std::to_string(config_size) + " (-1 = to the end)");
    if (safetensors_size < -1)
      fail(DIFFVK_INVALID_ARGUMENT, "safetensors_size " + std::to_string(safetensors_size) + " (-1 = to the end)");
    load_model(c, out, [&](diffvk::Context& ctx) {
      return diffvk::Model::load_fd(ctx, {config_fd, config_offset, config_size},
                                    {safetensors_fd, safetensors_offset, safetensors_size}, lo);
    });
  });
}

diffvk_status diffvk_model_destroy(diffvk_model* m) {
  return guarded(__func__, [&] {
    destroy_handle(m, Kind::model, "model", [](const diffvk_model& k) {
      refuse_children(k, "session(s)", "model");
      --k.parent->children;
    });
  });
}

diffvk_status diffvk_model_vocab_size(const diffvk_model* m, uint32_t* out) {
  return get_value(__func__, m, Kind::model, "model", out,
                   [](const diffvk_model& k) { return k.model->config().vocab_size; });
}
diffvk_status diffvk_model_eos_token(const diffvk_model* m, int32_t* out) {
  return get_value(__func__, m, Kind::model, "model", out,
                   [](const diffvk_model& k) { return static_cast<int32_t>(k.model->config().eos_token_id); });
}
diffvk_status diffvk_model_bos_token(const diffvk_model* m, int32_t* out) {
  return get_value(__func__, m, Kind::model, "model", out,
                   [](const diffvk_model& k) { return static_cast<int32_t>(k.model->config().bos_token_id); });
}

diffvk_status diffvk_model_quant_paths(const diffvk_model* m, uint32_t* decode, uint32_t* prefill) {
  return guarded(__func__, [&] {
    auto k = live(m, Kind::model, "model");
    need(decode, "decode");
    need(prefill, "prefill");
    const diffvk::LoadStats& ls = k->model->load_stats();
    const uint32_t d = quant_path_code(ls.quant_decode, "decode"), p = quant_path_code(ls.quant_prefill, "prefill");
    *decode = d;
    *prefill = p;
  });
}

diffvk_status diffvk_session_create(diffvk_model* m, uint32_t context_len, uint32_t chunk, diffvk_session** out) {
  diffvk_session_options o;
  diffvk_session_default_options(&o);
  o.context_len = context_len;
  o.chunk = chunk;
  return diffvk_session_create_with_options(m, &o, out);
}

diffvk_status diffvk_session_create_with_options(diffvk_model* m, const diffvk_session_options* opts,
                                                 diffvk_session** out) {
  return guarded(__func__, [&] {
    need(out, "out");
    *out = nullptr;
    const diffvk_session_options o =
        read_options(opts, diffvk_session_default_options_sized, kSessionLayouts, "session");
    if (o.kv_cache != DIFFVK_KV_F16 && o.kv_cache != DIFFVK_KV_Q8_0)
      fail(DIFFVK_INVALID_ARGUMENT,
           "options->kv_cache is " + std::to_string(o.kv_cache) + "; use DIFFVK_KV_F16 or DIFFVK_KV_Q8_0");
    std::shared_ptr<diffvk_model> k;
    {
      std::lock_guard<std::mutex> l(g_mutex);
      k = check_locked(m, Kind::model, "model");
      alive(ctx_of(*k));
      ++k->children;  // reserved: the model cannot be destroyed while this session is created
    }
    diffvk::SessionOptions so;
    so.context = o.context_len;
    if (o.chunk) so.chunk = o.chunk;
    if (o.abort_cb) so.should_abort = [cb = o.abort_cb, user = o.abort_user] { return cb(user) != 0; };
    so.kv_cache = o.kv_cache == DIFFVK_KV_Q8_0 ? diffvk::KvCacheType::q8_0 : diffvk::KvCacheType::f16;
    auto s = std::make_shared<diffvk_session>();
    s->parent = k;
    try {
      s->session = diffvk::Session::create(*k->model, so);
    } catch (...) {
      std::lock_guard<std::mutex> l(g_mutex);
      --k->children;
      throw;
    }
    std::lock_guard<std::mutex> l(g_mutex);
    track(s, Kind::session);
    *out = s.get();
  });
}

diffvk_status diffvk_session_destroy(diffvk_session* s) {
  return guarded(__func__, [&] {
    destroy_handle(s, Kind::session, "session", [](const diffvk_session& k) { --k.parent->children; });
  });
}

diffvk_status diffvk_session_prefill(diffvk_session* s, const int32_t* tokens, size_t n, float* logits, size_t cap) {
  return guarded(__func__, [&] {
    auto k = live(s, Kind::session, "session");
    const uint32_t V = check_prefill_args(*k, tokens, n, logits, cap);
    // Sizes before anything is copied: n is bounded by the context from here on.
    const uint32_t pos = k->session->position(), capacity = k->session->capacity();
    if (n > capacity - std::min(pos, capacity))
      fail(DIFFVK_CONTEXT_OVERFLOW, std::to_string(n) + " tokens after " + std::to_string(pos) +
                                        " exceed the context of " + std::to_string(capacity));
    for (size_t i = 0; i < n; ++i)
      if (tokens[i] < 0 || uint32_t(tokens[i]) >= V)
        fail(DIFFVK_INVALID_ARGUMENT, "token " + std::to_string(tokens[i]) + " at index " + std::to_string(i) +
                                          " is outside the vocabulary [0, " + std::to_string(V) + ")");
    copy_logits(k->session->prefill(std::vector<int32_t>(tokens, tokens + n)), logits, cap);
  });
}

diffvk_status diffvk_session_decode(diffvk_session* s, int32_t token, float* logits, size_t cap) {
  return guarded(__func__, [&] {
    auto k = live(s, Kind::session, "session");
    need(logits, "logits");
    const uint32_t V = k->parent->model->config().vocab_size;
    if (cap < V)
      fail(DIFFVK_BUFFER_TOO_SMALL,
           "logits buffer holds " + std::to_string(cap) + " floats, need " + std::to_string(V));
    k->session->decode(token, logits, cap);
  });
}

diffvk_status diffvk_session_reset(diffvk_session* s) {
  return guarded(__func__, [&] {
    auto k = live(s, Kind::session, "session");
    k->session->reset();
  });
}
diffvk_status diffvk_session_rewind(diffvk_session* s, uint32_t n) {
  return guarded(__func__, [&] {
    auto k = live(s, Kind::session, "session");
    k->session->rewind(n);
  });
}
static void copy_ids(const std::vector<int32_t>& ids, int32_t* tokens, size_t cap, size_t* n) {
  need(n, "n");
  *n = ids.size();
  if (!tokens && cap == 0) return;
  need(tokens, "tokens");
  if (cap < ids.size())
    fail(DIFFVK_BUFFER_TOO_SMALL,
         "tokens buffer holds " + std::to_string(cap) + " ids, the session holds " + std::to_string(ids.size()));
  std::copy(ids.begin(), ids.end(), tokens);
}
diffvk_status diffvk_session_tokens(const diffvk_session* s, int32_t* tokens, size_t cap, size_t* n) {
  return guarded(__func__, [&] { copy_ids(live(s, Kind::session, "session")->session->tokens(), tokens, cap, n); });
}
diffvk_status diffvk_session_history(const diffvk_session* s, int32_t* tokens, size_t cap, size_t* n) {
  return guarded(__func__, [&] { copy_ids(live(s, Kind::session, "session")->session->history(), tokens, cap, n); });
}
diffvk_status diffvk_session_shift(diffvk_session* s, uint32_t keep, uint32_t discard) {
  return guarded(__func__, [&] { live(s, Kind::session, "session")->session->shift(keep, discard); });
}
diffvk_status diffvk_session_prefill_shifting(diffvk_session* s, const int32_t* tokens, size_t n, uint32_t keep,
                                              float* logits, size_t cap, uint32_t* reused) {
  return guarded(__func__, [&] {
    auto k = live(s, Kind::session, "session");
    check_prefill_args(*k, tokens, n, logits, cap);
    uint32_t kept = 0;
    copy_logits(k->session->prefill_shifting(std::vector<int32_t>(tokens, tokens + n), keep, &kept), logits, cap);
    if (reused) *reused = kept;
  });
}
diffvk_status diffvk_session_prefill_reusing(diffvk_session* s, const int32_t* tokens, size_t n, float* logits,
                                             size_t cap, uint32_t* reused) {
  return guarded(__func__, [&] {
    auto k = live(s, Kind::session, "session");
    check_prefill_args(*k, tokens, n, logits, cap);
    // The whole sequence must fit the context (sizes before anything is copied).
    const uint32_t capacity = k->session->capacity();
    if (n > capacity)
      fail(DIFFVK_CONTEXT_OVERFLOW, std::to_string(n) + " tokens exceed the context of " + std::to_string(capacity));
    uint32_t kept = 0;
    copy_logits(k->session->prefill_reusing(std::vector<int32_t>(tokens, tokens + n), &kept), logits, cap);
    if (reused) *reused = kept;
  });
}
diffvk_status diffvk_session_save_state(const diffvk_session* s, const char* path) {
  return guarded(__func__, [&] {
    auto k = live(s, Kind::session, "session");
    need(path, "path");
    k->session->save_state_file(path);
  });
}
diffvk_status diffvk_session_restore_state(diffvk_session* s, const char* path) {
  return guarded(__func__, [&] {
    auto k = live(s, Kind::session, "session");
    need(path, "path");
    k->session->restore_state_file(path);
  });
}
diffvk_status diffvk_session_save_state_buffer(const diffvk_session* s, void* buffer, size_t cap, size_t* size) {
  return guarded(__func__, [&] {
    auto k = live(s, Kind::session, "session");
    need(size, "size");
    const uint64_t bytes = k->session->state_bytes();
    *size = static_cast<size_t>(bytes);
    if (!buffer && cap == 0) return;
    need(buffer, "buffer");
    if (cap < bytes)
      fail(DIFFVK_BUFFER_TOO_SMALL,
           "buffer holds " + std::to_string(cap) + " bytes, the state is " + std::to_string(bytes));
    const std::vector<uint8_t> state = k->session->save_state();
    std::memcpy(buffer, state.data(), state.size());
  });
}
diffvk_status diffvk_session_restore_state_buffer(diffvk_session* s, const void* data, size_t size) {
  return guarded(__func__, [&] {
    auto k = live(s, Kind::session, "session");
    need(data, "data");
    k->session->restore_state(static_cast<const uint8_t*>(data), size);
  });
}
diffvk_status diffvk_session_position(const diffvk_session* s, uint32_t* out) {
  return get_value(__func__, s, Kind::session, "session", out,
                   [](const diffvk_session& k) { return k.session->position(); });
}
diffvk_status diffvk_session_capacity(const diffvk_session* s, uint32_t* out) {
  return get_value(__func__, s, Kind::session, "session", out,
                   [](const diffvk_session& k) { return k.session->capacity(); });
}

diffvk_status diffvk_sampler_create(float temperature, uint32_t top_k, float top_p, uint64_t seed,
                                    diffvk_sampler** out) {
  return guarded(__func__, [&] {
    need(out, "out");
    *out = nullptr;
    // The same rules as the CLI: diffvk::validate_sampling (non-finite values rejected).
    auto p = std::make_shared<diffvk_sampler>(
        diffvk_sampler{diffvk::Sampler(diffvk::SamplingOptions{temperature, top_k, top_p, seed})});
    std::lock_guard<std::mutex> l(g_mutex);
    track(p, Kind::sampler);
    *out = p.get();
  });
}
void diffvk_sampler_default_options_sized(diffvk_sampler_options* o, size_t size) {
  const diffvk::SamplingOptions s;
  auto d = diffvk::capi::zeroed<diffvk_sampler_options>();
  d.struct_size = sizeof d;
  copy_sampling_fields(d, s);
  diffvk::capi::write_defaults(o, size, d, kSamplerLayouts);
}
void(diffvk_sampler_default_options)(diffvk_sampler_options* o) {
  diffvk_sampler_default_options_sized(o, kSamplerLayouts[0].size);
}
diffvk_status diffvk_sampler_create_with_options(const diffvk_sampler_options* opts, diffvk_sampler** out) {
  return guarded(__func__, [&] {
    need(out, "out");
    *out = nullptr;
    const diffvk_sampler_options o =
        read_options(opts, diffvk_sampler_default_options_sized, kSamplerLayouts, "sampler");
    diffvk::SamplingOptions so;
    copy_sampling_fields(so, o);
    auto p = std::make_shared<diffvk_sampler>(diffvk_sampler{diffvk::Sampler(so)});  // validate_sampling
    std::lock_guard<std::mutex> l(g_mutex);
    track(p, Kind::sampler);
    *out = p.get();
  });
}
diffvk_status diffvk_sampler_accept(diffvk_sampler* p, int32_t token) {
  return guarded(__func__, [&] {
    auto k = check(p, Kind::sampler, "sampler");
    k->sampler.accept(token);
  });
}
diffvk_status diffvk_sampler_destroy(diffvk_sampler* p) {
  return guarded(__func__, [&] { destroy_handle(p, Kind::sampler, "sampler", [](const diffvk_sampler&) {}); });
}
diffvk_status diffvk_sampler_sample(diffvk_sampler* p, const float* logits, uint32_t vocab, int32_t* out) {
  return guarded(__func__, [&] {
    auto k = check(p, Kind::sampler, "sampler");
    need(logits, "logits");
    need(out, "out");
    *out = k->sampler.sample(logits, vocab);
  });
}

static_assert(DIFFVK_STOP_EOS == int(diffvk::StopReason::eos) &&
                  DIFFVK_STOP_STRING == int(diffvk::StopReason::stop_string) &&
                  DIFFVK_STOP_MAX_TOKENS == int(diffvk::StopReason::max_tokens) &&
                  DIFFVK_STOP_CANCELLED == int(diffvk::StopReason::cancelled),
              "DIFFVK_STOP_* follow diffvk::StopReason");
static_assert(DIFFVK_MAX_STOP_STRINGS == diffvk::kMaxStopStrings &&
                  DIFFVK_MAX_STOP_STRING_BYTES == diffvk::kMaxStopStringBytes &&
                  DIFFVK_MAX_DRAFT_TOKENS == diffvk::kMaxDraftTokens &&
                  DIFFVK_MAX_DRAFT_NGRAM == diffvk::kMaxDraftNgram,
              "the C limits are the C++ ones");
void diffvk_generate_default_options_sized(diffvk_generate_options* o, size_t size) {
  auto d = diffvk::capi::zeroed<diffvk_generate_options>();
  d.struct_size = sizeof d;
  d.max_tokens = diffvk::GenerateOptions{}.max_tokens;
  d.stop_count = 0;
  d.stop = nullptr;
  d.eos_token = -2;
  d.on_text = nullptr;
  d.user = nullptr;
  d.overflow = DIFFVK_OVERFLOW_REFUSE;
  d.keep = 0;
  d.draft = DIFFVK_DRAFT_NONE;
  d.draft_k = diffvk::SpeculateOptions{}.k;
  d.draft_ngram = diffvk::SpeculateOptions{}.ngram;
  d.draft_session = nullptr;
  diffvk::capi::write_defaults(o, size, d, kGenerateLayouts);
}
void(diffvk_generate_default_options)(diffvk_generate_options* o) {
  diffvk_generate_default_options_sized(o, kGenerateLayouts[0].size);
}
diffvk_status diffvk_session_generate(diffvk_session* s, diffvk_sampler* p, const diffvk_tokenizer* t,
                                      const int32_t* prompt, size_t n_prompt, const diffvk_generate_options* opts,
                                      diffvk_generate_result* result) {
  return guarded(__func__, [&] {
    size_t result_size = 0;  // the fields the caller's struct has (it may be older than this library's)
    if (result) {
      result_size = result->struct_size;
      if (result_size < sizeof(size_t) || result_size > sizeof(diffvk_generate_result))
        fail(DIFFVK_INVALID_ARGUMENT,
             "result->struct_size is " + std::to_string(result_size) + "; set it to sizeof(diffvk_generate_result)");
    }
    auto k = live(s, Kind::session, "session");
    auto sampler = check(p, Kind::sampler, "sampler");
    const auto tokenizer = diffvk::capi::tokenizer_of(t);
    const diffvk_generate_options o =
        read_options(opts, diffvk_generate_default_options_sized, kGenerateLayouts, "generate");
    if (n_prompt == 0) fail(DIFFVK_INVALID_ARGUMENT, "n_prompt is 0: the prompt has no tokens");
    need(prompt, "prompt");
    diffvk::GenerateOptions go;
    go.max_tokens = o.max_tokens;
    if (o.stop_count > DIFFVK_MAX_STOP_STRINGS)
      fail(DIFFVK_INVALID_ARGUMENT, "options->stop_count is " + std::to_string(o.stop_count) + "; at most " +
                                        std::to_string(DIFFVK_MAX_STOP_STRINGS));
    if (o.stop_count) need(o.stop, "options->stop");
    for (uint32_t i = 0; i < o.stop_count; ++i) {
      if (!o.stop[i]) fail(DIFFVK_INVALID_ARGUMENT, "options->stop[" + std::to_string(i) + "] is NULL");
      const size_t len = strnlen(o.stop[i], DIFFVK_MAX_STOP_STRING_BYTES + 1);
      if (len > DIFFVK_MAX_STOP_STRING_BYTES)
        fail(DIFFVK_INVALID_ARGUMENT, "options->stop[" + std::to_string(i) + "] is longer than " +
                                          std::to_string(DIFFVK_MAX_STOP_STRING_BYTES) + " bytes");
      go.stop.emplace_back(o.stop[i], len);
    }
    const int32_t model_eos = k->parent->model->config().eos_token_id;
    if (o.eos_token < -2)
      fail(DIFFVK_INVALID_ARGUMENT,
           "options->eos_token is " + std::to_string(o.eos_token) + "; -2 (the model's), -1 (none) or a token id");
    go.eos_token = o.eos_token == -2 ? model_eos : o.eos_token;
    if (o.overflow != DIFFVK_OVERFLOW_REFUSE && o.overflow != DIFFVK_OVERFLOW_SHIFT)
      fail(DIFFVK_INVALID_ARGUMENT, "options->overflow is " + std::to_string(o.overflow) +
                                        "; DIFFVK_OVERFLOW_REFUSE (0) or DIFFVK_OVERFLOW_SHIFT (1)");
    go.overflow =
        o.overflow == DIFFVK_OVERFLOW_SHIFT ? diffvk::ContextOverflow::shift : diffvk::ContextOverflow::refuse;
    go.keep = o.keep;
    if (o.draft != DIFFVK_DRAFT_NONE && o.draft != DIFFVK_DRAFT_LOOKUP && o.draft != DIFFVK_DRAFT_MODEL)
      fail(DIFFVK_INVALID_ARGUMENT, "options->draft is " + std::to_string(o.draft) +
                                        "; DIFFVK_DRAFT_NONE (0), DIFFVK_DRAFT_LOOKUP (1) or DIFFVK_DRAFT_MODEL (2)");
    go.speculate.draft = o.draft == DIFFVK_DRAFT_LOOKUP  ? diffvk::Draft::lookup
                         : o.draft == DIFFVK_DRAFT_MODEL ? diffvk::Draft::model
                                                         : diffvk::Draft::none;
    std::shared_ptr<diffvk_session> draft;  // kept alive for the call
    if (o.draft == DIFFVK_DRAFT_MODEL) {
      if (!o.draft_session)
        fail(DIFFVK_INVALID_ARGUMENT, "options->draft is DIFFVK_DRAFT_MODEL but options->draft_session is NULL");
      if (o.draft_session == s)
        fail(DIFFVK_INVALID_ARGUMENT, "options->draft_session is the generating session; a draft model needs its own");
      draft = live(o.draft_session, Kind::session, "options->draft_session");
      go.speculate.draft_session = draft->session.get();
    }
    go.speculate.k = o.draft_k;
    go.speculate.ngram = o.draft_ngram;
    if (o.on_text) {
      const diffvk_text_fn fn = o.on_text;
      void* user = o.user;
      go.on_text = [fn, user](std::string_view piece) { return fn(piece.data(), piece.size(), user) != 0; };
    }
    const diffvk::GenerateResult r = diffvk::generate(*k->session, sampler->sampler, *tokenizer,
                                                      std::vector<int32_t>(prompt, prompt + n_prompt), go);
    if (result) {
      diffvk_generate_result out{};
      out.struct_size = result_size;
      out.tokens = static_cast<uint32_t>(r.tokens.size());
      out.reused = r.reused;
      out.stop_reason = static_cast<int32_t>(r.reason);
      out.stop_index = r.stop_index;
      out.shifts = r.shifts;
      out.verify_passes = r.verify_passes;
      out.drafted = r.drafted;
      out.accepted = r.accepted;
      std::memcpy(result, &out, result_size);
    }
  });
}

}  // extern "C"
