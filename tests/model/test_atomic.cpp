// Operations are all or nothing, and a lost device stays lost.
//  - A chunked prefill that fails at any checked Vulkan call (every submit, fence reset and wait of
//    every chunk) leaves the position and the visible KV cache exactly as before: a retry computes
//    the same logits as a session that never failed, and so does the next decode.
//  - VK_ERROR_DEVICE_LOST marks the context lost: every later call on it, its models and sessions
//    fails at once with device_lost and a message saying to recreate the context (C++ API and C ABI).
#include <doctest/doctest.h>

#include <atomic>
#include <string>
#include <vector>

#include "diffvk/diffvk.h"
#include "diffvk/model.hpp"
#include "vk/gpu.hpp"
#include "c_api_fixture.hpp"
#include "gpu_test.hpp"
#include "model_fixture.hpp"

using namespace diffvk;

namespace {
std::string model_dir(test::TempDir& tmp) {
  std::string dir = test::shared_tiny_model_dir();
  if (dir.empty()) {
    test::write_tiny_model(tmp.path());
    dir = tmp.path();
  }
  return dir;
}

// Fails the n-th checked Vulkan call (1-based) with `fault` while alive; counts all calls.
struct FaultAt {
  FaultAt(int n, VkResult fault) {
    set_vk_fault_hook([this, n, fault](const char* call) {
      if (++seen != n) return VK_SUCCESS;
      site = call;
      return fault;
    });
  }
  ~FaultAt() { set_vk_fault_hook(nullptr); }
  std::atomic<int> seen{0};
  std::string site;
};

const std::vector<int32_t> kHead{2, 72, 101};                        // before the failing prefill
const std::vector<int32_t> kBody{108, 108, 111, 32, 119, 111, 114};  // 7 tokens: 4 chunks of 2
}  // namespace

TEST_CASE("atomic: a prefill failing at any chunk leaves position and KV cache as before") {
  test::TempDir tmp("diffvk-atomic");
  const std::string dir = model_dir(tmp);
  auto ctx = test::make_context();
  auto model = Model::load(*ctx, dir);
  const SessionOptions so{32, 2};
  // The reference: a session that never failed.
  auto ref = Session::create(*model, so);
  ref->prefill(kHead);
  const auto want = ref->prefill(kBody);
  const auto want_next = ref->decode(65);

  // How many checked Vulkan calls the failing prefill makes (its programs are already recorded).
  int total = 0;
  {
    auto s = Session::create(*model, so);
    s->prefill(kHead);
    FaultAt count(0, VK_SUCCESS);
    s->prefill(kBody);
    total = count.seen;
  }
  REQUIRE(total >= 8);  // at least a submit and a wait per chunk
  MESSAGE(total << " checked Vulkan calls in a 4-chunk prefill");
  int failed = 0;
  for (int n = 1; n <= total; ++n) {
    auto s = Session::create(*model, so);
    s->prefill(kHead);
    std::string site;
    bool threw = false;
    {
      FaultAt fault(n, VK_ERROR_OUT_OF_DEVICE_MEMORY);
      try {
        s->prefill(kBody);
      } catch (const Error& e) {
        threw = true;
        CHECK(e.status() == Status::out_of_memory);
      }
      site = fault.site;
    }
    CAPTURE(n);
    CAPTURE(site);
    CHECK(threw);
    failed += threw;
    CHECK(s->position() == kHead.size());  // old behaviour: 3 + 2 x (chunks done)
    // The same work again gives exactly what a session that never failed computed.
    CHECK(s->prefill(kBody) == want);
    CHECK(s->decode(65) == want_next);
  }
  CHECK(failed == total);
}

TEST_CASE("atomic: device loss in any chunk of a prefill leaves the position and marks the context lost") {
  test::TempDir tmp("diffvk-atomic");
  const std::string dir = model_dir(tmp);
  for (int n : {1, 4, 7, 10}) {  // a call of the 1st, 2nd, 3rd and 4th chunk (3 calls per chunk)
    CAPTURE(n);
    auto ctx = test::make_context();
    auto model = Model::load(*ctx, dir);
    auto s = Session::create(*model, SessionOptions{32, 2});
    s->prefill(kHead);
    {
      FaultAt fault(n, VK_ERROR_DEVICE_LOST);
      CHECK_THROWS_AS(s->prefill(kBody), Error);
    }
    CHECK(s->position() == kHead.size());
    CHECK(ctx->lost());
    // Every later operation fails at once, with a message that says what to do.
    auto expect_lost = [](auto&& f) {
      try {
        f();
        FAIL_CHECK("no error after the device was lost");
      } catch (const Error& e) {
        CHECK(e.status() == Status::device_lost);
        CHECK(std::string(e.what()).find("create a new context") != std::string::npos);
      }
    };
    expect_lost([&] { s->decode(65); });
    expect_lost([&] { s->prefill(kHead); });
    expect_lost([&] { s->reset(); });
    expect_lost([&] { Session::create(*model, SessionOptions{32, 2}); });
    expect_lost([&] { Model::load(*ctx, dir); });
  }
}

TEST_CASE("atomic: after device loss every C ABI call on the context and its objects returns DEVICE_LOST") {
  test::TempDir tmp("diffvk-atomic");
  const std::string dir = model_dir(tmp);
  test::FailOnLoggedValidation fail_on_messages;  // the C ABI context has no callback
  auto [c, m, s, lg] = test::open_c_api(dir, 32, 2);
  REQUIRE(diffvk_session_prefill(s, kHead.data(), kHead.size(), lg.data(), lg.size()) == DIFFVK_OK);
  {
    FaultAt fault(2, VK_ERROR_DEVICE_LOST);  // the submit of the decode
    CHECK(diffvk_session_decode(s, 65, lg.data(), lg.size()) == DIFFVK_DEVICE_LOST);
  }
  auto lost = [](diffvk_status st) {
    CHECK(st == DIFFVK_DEVICE_LOST);
    CHECK(std::string(diffvk_last_error()).find("create a new context") != std::string::npos);
  };
  uint32_t u = 0;
  int32_t i = 0;
  char name[256];
  diffvk_precision p;
  diffvk_model* m2 = nullptr;
  diffvk_session* s2 = nullptr;
  lost(diffvk_session_decode(s, 65, lg.data(), lg.size()));
  lost(diffvk_session_prefill(s, kHead.data(), kHead.size(), lg.data(), lg.size()));
  lost(diffvk_session_reset(s));
  lost(diffvk_session_position(s, &u));
  lost(diffvk_session_capacity(s, &u));
  lost(diffvk_session_create(m, 32, 2, &s2));
  lost(diffvk_model_vocab_size(m, &u));
  lost(diffvk_model_eos_token(m, &i));
  lost(diffvk_model_bos_token(m, &i));
  lost(diffvk_model_load(c, dir.c_str(), &m2));
  lost(diffvk_context_device_name(c, name, sizeof name));
  lost(diffvk_context_precision(c, &p));
  // Cleaning up still works.
  CHECK(diffvk_session_destroy(s) == DIFFVK_OK);
  CHECK(diffvk_model_destroy(m) == DIFFVK_OK);
  CHECK(diffvk_context_destroy(c) == DIFFVK_OK);
}
