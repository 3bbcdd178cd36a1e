// The tokenizer section of the C ABI (include/diffvk/diffvk.h): handles checked against a registry
// of live tokenizers, like the other handles (runtime/capi/c_api.cpp).
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "diffvk/chat_template.hpp"
#include "diffvk/diffvk.h"
#include "diffvk/tokenizer.hpp"
#include "capi/c_api_guard.hpp"
#include "capi/c_api_internal.hpp"

struct diffvk_tokenizer {
  diffvk::Tokenizer tokenizer;
};
struct diffvk_chat_template {
  diffvk::ChatTemplate chat_template;
};

namespace {
using diffvk::capi::fail;
using diffvk::capi::guarded;
using diffvk::capi::need;

// The live handles of each kind (tokenizers, chat templates): the registry holds a reference and each call
// takes one, so a free racing on another thread cannot pull an object away during a call. Never destroyed.
std::mutex g_mutex;
template <class T>
std::unordered_map<const T*, std::shared_ptr<T>>& live() {
  static auto* m = new std::unordered_map<const T*, std::shared_ptr<T>>;
  return *m;
}
template <class T>
std::shared_ptr<T> check_handle(const T* p, const char* what) {
  need(p, what);
  std::lock_guard<std::mutex> l(g_mutex);
  auto it = live<T>().find(p);
  if (it == live<T>().end())
    fail(DIFFVK_INVALID_ARGUMENT, std::string(what) + " is not a live " + what + " handle (freed, or of another kind)");
  return it->second;
}
template <class T>
void track(std::shared_ptr<T> p, T** out) {
  std::lock_guard<std::mutex> l(g_mutex);
  *out = p.get();
  live<T>()[p.get()] = std::move(p);
}
template <class T>
void release(T* p, const char* what) {
  need(p, what);
  std::lock_guard<std::mutex> l(g_mutex);
  if (!live<T>().erase(p))
    fail(DIFFVK_INVALID_ARGUMENT, std::string(what) + " is not a live " + what + " handle (freed twice?)");
}
std::shared_ptr<diffvk_tokenizer> check(const diffvk_tokenizer* t) { return check_handle(t, "tokenizer"); }
std::shared_ptr<diffvk_chat_template> check(const diffvk_chat_template* t) { return check_handle(t, "chat_template"); }
void track(diffvk::ChatTemplate t, diffvk_chat_template** out) {
  track(std::make_shared<diffvk_chat_template>(diffvk_chat_template{std::move(t)}), out);
}
void track(diffvk::Tokenizer t, diffvk_tokenizer** out) {
  track(std::make_shared<diffvk_tokenizer>(diffvk_tokenizer{std::move(t)}), out);
}
// Every loader of the ABI: `out` checked and cleared first, then the object `make` builds (after checking its own
// arguments) is tracked; a failure leaves *out NULL.
template <class T, class F>
diffvk_status load_into(const char* fn, T** out, F&& make) {
  return guarded(fn, [&] {
    need(out, "out");
    *out = nullptr;
    track(make(), out);
  });
}
}  // namespace

std::shared_ptr<const diffvk::Tokenizer> diffvk::capi::tokenizer_of(const diffvk_tokenizer* tokenizer) {
  auto t = check(tokenizer);
  return std::shared_ptr<const diffvk::Tokenizer>(t, &t->tokenizer);
}

extern "C" {

diffvk_status diffvk_chat_template_load(const char* model_dir, diffvk_chat_template** out) {
  return load_into(__func__, out, [&] {
    need(model_dir, "model_dir");
    return diffvk::ChatTemplate::load(model_dir);
  });
}
diffvk_status diffvk_chat_template_load_memory(const void* tokenizer_config, size_t size, diffvk_chat_template** out) {
  return load_into(__func__, out, [&] { return diffvk::ChatTemplate::load_memory(tokenizer_config, size); });
}
diffvk_status diffvk_chat_template_builtin(const char* family, const char* bos_token, const char* eos_token,
                                           diffvk_chat_template** out) {
  return load_into(__func__, out, [&] {
    need(family, "family");
    return diffvk::ChatTemplate::builtin(family, bos_token ? bos_token : "", eos_token ? eos_token : "");
  });
}
diffvk_status diffvk_chat_template_free(diffvk_chat_template* t) {
  return guarded(__func__, [&] { release(t, "chat_template"); });
}
diffvk_status diffvk_chat_template_family(const diffvk_chat_template* t, const char** out) {
  return guarded(__func__, [&] {
    need(out, "out");
    *out = nullptr;
    const std::string family = check(t)->chat_template.family();
    for (const char* name : {"chatml", "llama2", "llama3", "phi4"})
      if (family == name) *out = name;
    if (!*out) fail(DIFFVK_INTERNAL, "unknown chat template family " + family);
  });
}
diffvk_status diffvk_chat_template_end_of_turn(const diffvk_chat_template* t, char* text, size_t cap, size_t* len) {
  return guarded(__func__, [&] {
    need(len, "len");
    *len = 0;
    const std::string s = check(t)->chat_template.end_of_turn();
    *len = s.size();
    if (cap) need(text, "text");
    if (cap <= s.size())
      fail(DIFFVK_BUFFER_TOO_SMALL,
           "the end of turn is " + std::to_string(s.size()) + " bytes and a NUL; cap is " + std::to_string(cap));
    std::memcpy(text, s.c_str(), s.size() + 1);
  });
}
diffvk_status diffvk_chat_template_apply(const diffvk_chat_template* t, const diffvk_chat_message* messages, size_t n,
                                         int add_generation_prompt, char* text, size_t cap, size_t* len) {
  return guarded(__func__, [&] {
    need(len, "len");
    *len = 0;
    const auto k = check(t);
    if (n) need(messages, "messages");
    if (cap) need(text, "text");
    std::vector<diffvk::ChatMessage> m(n);
    for (size_t i = 0; i < n; ++i) {
      if (!messages[i].role || !messages[i].content)
        fail(DIFFVK_INVALID_ARGUMENT,
             "messages[" + std::to_string(i) + "]." + (messages[i].role ? "content" : "role") + " is NULL");
      m[i] = diffvk::ChatMessage{messages[i].role, messages[i].content};
    }
    const std::string s = k->chat_template.apply(m, add_generation_prompt != 0);
    *len = s.size();
    if (s.size() > cap)
      fail(DIFFVK_BUFFER_TOO_SMALL,
           "the prompt is " + std::to_string(s.size()) + " bytes; cap is " + std::to_string(cap));
    if (!s.empty()) std::memcpy(text, s.data(), s.size());
  });
}

diffvk_status diffvk_tokenizer_load(const char* dir, diffvk_tokenizer** out) {
  return load_into(__func__, out, [&] {
    need(dir, "dir");
    return diffvk::Tokenizer::load(dir);
  });
}

diffvk_status diffvk_tokenizer_load_memory(const void* gguf, size_t size, diffvk_tokenizer** out) {
  return load_into(__func__, out, [&] {
    need(gguf, "gguf");
    return diffvk::Tokenizer::load_gguf_memory(gguf, size);
  });
}

diffvk_status diffvk_tokenizer_load_fd(int fd, int64_t offset, int64_t size, diffvk_tokenizer** out) {
  return load_into(__func__, out, [&] { return diffvk::Tokenizer::load_gguf_fd(fd, offset, size); });
}

diffvk_status diffvk_tokenizer_load_json_memory(const void* tokenizer_json, size_t size, const void* tokenizer_config,
                                                size_t tokenizer_config_size, const void* config_json,
                                                size_t config_json_size, diffvk_tokenizer** out) {
  return load_into(__func__, out, [&] {
    need(tokenizer_json, "tokenizer_json");
    return diffvk::Tokenizer::load_json_memory(tokenizer_json, size, tokenizer_config, tokenizer_config_size,
                                               config_json, config_json_size);
  });
}

diffvk_status diffvk_tokenizer_load_json_fd(int fd, int64_t offset, int64_t size, int tokenizer_config_fd,
                                            int64_t tokenizer_config_offset, int64_t tokenizer_config_size,
                                            int config_json_fd, int64_t config_json_offset, int64_t config_json_size,
                                            diffvk_tokenizer** out) {
  return load_into(__func__, out, [&] {
    using R = diffvk::Tokenizer::FdRange;
    return diffvk::Tokenizer::load_json_fd(R{fd, offset, size},
                                           R{tokenizer_config_fd, tokenizer_config_offset, tokenizer_config_size},
                                           R{config_json_fd, config_json_offset, config_json_size});
  });
}

diffvk_status diffvk_tokenizer_load_sentencepiece_memory(const void* tokenizer_model, size_t size,
                                                         diffvk_tokenizer** out) {
  return load_into(__func__, out, [&] {
    need(tokenizer_model, "tokenizer_model");
    return diffvk::Tokenizer::load_sentencepiece_memory(tokenizer_model, size);
  });
}

diffvk_status diffvk_tokenizer_load_sentencepiece_fd(int fd, int64_t offset, int64_t size, diffvk_tokenizer** out) {
  return load_into(__func__, out, [&] { return diffvk::Tokenizer::load_sentencepiece_fd(fd, offset, size); });
}

diffvk_status diffvk_tokenizer_free(diffvk_tokenizer* tokenizer) {
  return guarded(__func__, [&] { release(tokenizer, "tokenizer"); });
}

diffvk_status diffvk_tokenizer_encode(const diffvk_tokenizer* tokenizer, const char* text, size_t len, int add_special,
                                      int32_t* ids, size_t cap, size_t* n) {
  return guarded(__func__, [&] {
    need(n, "n");
    *n = 0;
    const auto t = check(tokenizer);
    if (len) need(text, "text");
    if (cap) need(ids, "ids");
    const auto v = t->tokenizer.encode(std::string_view(len ? text : "", len), add_special != 0);
    *n = v.size();
    if (v.size() > cap)
      fail(DIFFVK_BUFFER_TOO_SMALL,
           "the text encodes to " + std::to_string(v.size()) + " ids; cap is " + std::to_string(cap));
    if (!v.empty()) std::memcpy(ids, v.data(), v.size() * sizeof(int32_t));
  });
}

diffvk_status diffvk_tokenizer_decode(const diffvk_tokenizer* tokenizer, const int32_t* ids, size_t n, char* bytes,
                                      size_t cap, size_t* len) {
  return guarded(__func__, [&] {
    need(len, "len");
    *len = 0;
    const auto t = check(tokenizer);
    if (n) need(ids, "ids");
    if (cap) need(bytes, "bytes");
    const std::string s = t->tokenizer.decode(ids, n);
    *len = s.size();
    if (s.size() > cap)
      fail(DIFFVK_BUFFER_TOO_SMALL,
           "the ids decode to " + std::to_string(s.size()) + " bytes; cap is " + std::to_string(cap));
    if (!s.empty()) std::memcpy(bytes, s.data(), s.size());
  });
}

diffvk_status diffvk_tokenizer_bos(const diffvk_tokenizer* tokenizer, int32_t* out) {
  return guarded(__func__, [&] {
    need(out, "out");
    *out = check(tokenizer)->tokenizer.bos_id();
  });
}

diffvk_status diffvk_tokenizer_eos(const diffvk_tokenizer* tokenizer, int32_t* out) {
  return guarded(__func__, [&] {
    need(out, "out");
    *out = check(tokenizer)->tokenizer.eos_id();
  });
}

diffvk_status diffvk_tokenizer_vocab_size(const diffvk_tokenizer* tokenizer, uint32_t* out) {
  return guarded(__func__, [&] {
    need(out, "out");
    *out = check(tokenizer)->tokenizer.vocab_size();
  });
}

}  // extern "C"
