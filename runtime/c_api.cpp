// The C ABI (include/diffvk/diffvk.h): every entry point catches everything, validates handles
// against a registry of live objects and reports through a status code + thread-local message.
#include "diffvk/diffvk.h"

#include <cstring>
#include <type_traits>
#include <mutex>
#include <new>
#include <string>
#include <unordered_map>

#include "diffvk/model.hpp"

struct diffvk_context {
  std::unique_ptr<diffvk::Context> ctx;
  int children = 0;
};
struct diffvk_model {
  diffvk_context* parent = nullptr;
  std::unique_ptr<diffvk::Model> model;
  int children = 0;
};
struct diffvk_session {
  diffvk_model* parent = nullptr;
  std::unique_ptr<diffvk::Session> session;
};
struct diffvk_sampler {
  diffvk::Sampler sampler;
};

namespace {
thread_local std::string t_error;

// A C caller may pass any integer in an enum parameter or field; read it as its integer type first
// (loading an out-of-range value as the enum type itself is undefined behaviour in C++).
template <class E>
int enum_value(const E& e) {
  std::underlying_type_t<E> v;
  std::memcpy(&v, &e, sizeof v);
  return static_cast<int>(v);
}

enum class Kind { context, model, session, sampler };
std::mutex g_mutex;
std::unordered_map<const void*, Kind>& registry() {
  static std::unordered_map<const void*, Kind> r;
  return r;
}
void track(const void* p, Kind k) {
  std::lock_guard<std::mutex> l(g_mutex);
  registry()[p] = k;
}
void untrack(const void* p) {
  std::lock_guard<std::mutex> l(g_mutex);
  registry().erase(p);
}

struct ApiError {
  diffvk_status status;
  std::string message;
};
[[noreturn]] void fail(diffvk_status s, const std::string& m) { throw ApiError{s, m}; }

template <class T>
void check(const T* p, Kind k, const char* what) {
  if (!p) fail(DIFFVK_INVALID_ARGUMENT, std::string(what) + " is NULL");
  std::lock_guard<std::mutex> l(g_mutex);
  auto it = registry().find(p);
  if (it == registry().end() || it->second != k)
    fail(DIFFVK_INVALID_ARGUMENT, std::string(what) + " is not a live handle (destroyed, or of another kind)");
}
void need(const void* p, const char* what) {
  if (!p) fail(DIFFVK_INVALID_ARGUMENT, std::string(what) + " is NULL");
}

template <class F>
diffvk_status guarded(const char* fn, F&& f) {
  t_error.clear();
  try {
    f();
    return DIFFVK_OK;
  } catch (const ApiError& e) {
    t_error = std::string(fn) + ": " + e.message;
    return e.status;
  } catch (const diffvk::Error& e) {
    t_error = std::string(fn) + ": " + e.what();
    return static_cast<diffvk_status>(e.status());
  } catch (const std::bad_alloc&) {
    t_error = std::string(fn) + ": out of host memory";
    return DIFFVK_OUT_OF_MEMORY;
  } catch (const std::exception& e) {
    t_error = std::string(fn) + ": " + e.what();
    return DIFFVK_INTERNAL;
  } catch (...) {
    t_error = std::string(fn) + ": unknown error";
    return DIFFVK_INTERNAL;
  }
}

void copy_logits(const std::vector<float>& lg, float* out, size_t cap) {
  if (lg.size() > cap) fail(DIFFVK_INTERNAL, "logits larger than the checked capacity");
  std::memcpy(out, lg.data(), lg.size() * sizeof(float));
}
}  // namespace

extern "C" {

const char* diffvk_last_error(void) { return t_error.c_str(); }

const char* diffvk_status_string(diffvk_status s) {
  const int v = enum_value(s);
  if (v == DIFFVK_BUFFER_TOO_SMALL) return "buffer too small";
  if (v < DIFFVK_OK || v > DIFFVK_BUFFER_TOO_SMALL) return "unknown status";
  return diffvk::status_name(static_cast<diffvk::Status>(v));
}

diffvk_status diffvk_context_create(const diffvk_context_options* o, diffvk_context** out) {
  return guarded(__func__, [&] {
    need(out, "out");
    *out = nullptr;
    diffvk::ContextOptions co;
    if (o) {
      if (o->device) co.device = o->device;
      const int precision = enum_value(o->precision);
      if (precision < DIFFVK_PRECISION_AUTO || precision > DIFFVK_PRECISION_FP32)
        fail(DIFFVK_INVALID_ARGUMENT, "unknown precision " + std::to_string(precision));
      co.precision = precision == DIFFVK_PRECISION_FP16 ? diffvk::Precision::fp16
                     : precision == DIFFVK_PRECISION_FP32 ? diffvk::Precision::fp32
                                                          : diffvk::Precision::automatic;
      co.validation = o->validation < 0 ? -1 : (o->validation ? 1 : 0);
      if (o->pipeline_cache_path) co.pipeline_cache_path = o->pipeline_cache_path;
    }
    auto c = std::make_unique<diffvk_context>();
    c->ctx = diffvk::Context::create(co);
    track(c.get(), Kind::context);
    *out = c.release();
  });
}

diffvk_status diffvk_context_destroy(diffvk_context* c) {
  return guarded(__func__, [&] {
    check(c, Kind::context, "context");
    if (c->children) fail(DIFFVK_INVALID_ARGUMENT, std::to_string(c->children) + " model(s) created from this context are still alive");
    untrack(c);
    delete c;
  });
}

diffvk_status diffvk_context_device_name(const diffvk_context* c, char* buf, size_t cap) {
  return guarded(__func__, [&] {
    check(c, Kind::context, "context");
    need(buf, "buffer");
    const std::string& n = c->ctx->caps().name;
    if (cap < n.size() + 1) fail(DIFFVK_BUFFER_TOO_SMALL, "need " + std::to_string(n.size() + 1) + " bytes");
    std::memcpy(buf, n.c_str(), n.size() + 1);
  });
}

diffvk_status diffvk_context_precision(const diffvk_context* c, diffvk_precision* out) {
  return guarded(__func__, [&] {
    check(c, Kind::context, "context");
    need(out, "out");
    *out = c->ctx->precision() == diffvk::Precision::fp16 ? DIFFVK_PRECISION_FP16 : DIFFVK_PRECISION_FP32;
  });
}

diffvk_status diffvk_model_load(diffvk_context* c, const char* dir, diffvk_model** out) {
  return guarded(__func__, [&] {
    check(c, Kind::context, "context");
    need(dir, "dir");
    need(out, "out");
    *out = nullptr;
    auto m = std::make_unique<diffvk_model>();
    m->model = diffvk::Model::load(*c->ctx, dir);
    m->parent = c;
    track(m.get(), Kind::model);
    ++c->children;
    *out = m.release();
  });
}

diffvk_status diffvk_model_destroy(diffvk_model* m) {
  return guarded(__func__, [&] {
    check(m, Kind::model, "model");
    if (m->children) fail(DIFFVK_INVALID_ARGUMENT, std::to_string(m->children) + " session(s) created from this model are still alive");
    untrack(m);
    --m->parent->children;
    delete m;
  });
}

diffvk_status diffvk_model_vocab_size(const diffvk_model* m, uint32_t* out) {
  return guarded(__func__, [&] {
    check(m, Kind::model, "model");
    need(out, "out");
    *out = m->model->config().vocab_size;
  });
}
diffvk_status diffvk_model_eos_token(const diffvk_model* m, int32_t* out) {
  return guarded(__func__, [&] {
    check(m, Kind::model, "model");
    need(out, "out");
    *out = static_cast<int32_t>(m->model->config().eos_token_id);
  });
}
diffvk_status diffvk_model_bos_token(const diffvk_model* m, int32_t* out) {
  return guarded(__func__, [&] {
    check(m, Kind::model, "model");
    need(out, "out");
    *out = static_cast<int32_t>(m->model->config().bos_token_id);
  });
}

diffvk_status diffvk_session_create(diffvk_model* m, uint32_t context_len, uint32_t chunk, diffvk_session** out) {
  return guarded(__func__, [&] {
    check(m, Kind::model, "model");
    need(out, "out");
    *out = nullptr;
    diffvk::SessionOptions so;
    so.context = context_len;
    if (chunk) so.chunk = chunk;
    auto s = std::make_unique<diffvk_session>();
    s->session = diffvk::Session::create(*m->model, so);
    s->parent = m;
    track(s.get(), Kind::session);
    ++m->children;
    *out = s.release();
  });
}

diffvk_status diffvk_session_destroy(diffvk_session* s) {
  return guarded(__func__, [&] {
    check(s, Kind::session, "session");
    untrack(s);
    --s->parent->children;
    delete s;
  });
}

diffvk_status diffvk_session_prefill(diffvk_session* s, const int32_t* tokens, size_t n, float* logits, size_t cap) {
  return guarded(__func__, [&] {
    check(s, Kind::session, "session");
    need(tokens, "tokens");
    need(logits, "logits");
    if (n == 0) fail(DIFFVK_INVALID_ARGUMENT, "no tokens");
    const uint32_t V = s->parent->model->config().vocab_size;
    if (cap < V) fail(DIFFVK_BUFFER_TOO_SMALL, "logits buffer holds " + std::to_string(cap) + " floats, need " + std::to_string(V));
    copy_logits(s->session->prefill(std::vector<int32_t>(tokens, tokens + n)), logits, cap);
  });
}

diffvk_status diffvk_session_decode(diffvk_session* s, int32_t token, float* logits, size_t cap) {
  return guarded(__func__, [&] {
    check(s, Kind::session, "session");
    need(logits, "logits");
    const uint32_t V = s->parent->model->config().vocab_size;
    if (cap < V) fail(DIFFVK_BUFFER_TOO_SMALL, "logits buffer holds " + std::to_string(cap) + " floats, need " + std::to_string(V));
    copy_logits(s->session->decode(token), logits, cap);
  });
}

diffvk_status diffvk_session_reset(diffvk_session* s) {
  return guarded(__func__, [&] {
    check(s, Kind::session, "session");
    s->session->reset();
  });
}
diffvk_status diffvk_session_position(const diffvk_session* s, uint32_t* out) {
  return guarded(__func__, [&] {
    check(s, Kind::session, "session");
    need(out, "out");
    *out = s->session->position();
  });
}
diffvk_status diffvk_session_capacity(const diffvk_session* s, uint32_t* out) {
  return guarded(__func__, [&] {
    check(s, Kind::session, "session");
    need(out, "out");
    *out = s->session->capacity();
  });
}

diffvk_status diffvk_sampler_create(float temperature, uint32_t top_k, float top_p, uint64_t seed, diffvk_sampler** out) {
  return guarded(__func__, [&] {
    need(out, "out");
    *out = nullptr;
    if (!(temperature >= 0.0f) || !(top_p > 0.0f && top_p <= 1.0f)) fail(DIFFVK_INVALID_ARGUMENT, "temperature must be >= 0 and top_p in (0, 1]");
    auto p = new diffvk_sampler{diffvk::Sampler(diffvk::SamplingOptions{temperature, top_k, top_p, seed})};
    track(p, Kind::sampler);
    *out = p;
  });
}
diffvk_status diffvk_sampler_destroy(diffvk_sampler* p) {
  return guarded(__func__, [&] {
    check(p, Kind::sampler, "sampler");
    untrack(p);
    delete p;
  });
}
diffvk_status diffvk_sampler_sample(diffvk_sampler* p, const float* logits, uint32_t vocab, int32_t* out) {
  return guarded(__func__, [&] {
    check(p, Kind::sampler, "sampler");
    need(logits, "logits");
    need(out, "out");
    *out = p->sampler.sample(logits, vocab);
  });
}

}  // extern "C"
