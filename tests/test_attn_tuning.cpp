// The attention tile choice is a pure function of (DeviceCaps, shape): check every choice is legal
// on simulated devices (shared memory 16/32/48 KiB, subgroup 4..128, invocation limits, no fp16).
#include <doctest/doctest.h>

#include "attn_tuning.hpp"

using namespace diffvk;

namespace {
DeviceCaps simulated(uint32_t shared, uint32_t subgroup, uint32_t invocations, bool fp16, uint32_t cus = 0) {
  DeviceCaps c;
  c.name = "simulated";
  c.max_shared_memory = shared;
  c.subgroup_size = c.subgroup_min_size = c.subgroup_max_size = subgroup;
  c.max_workgroup_invocations = invocations;
  c.max_workgroup_size = {invocations, invocations, 64};
  c.max_workgroup_count = {65535, 65535, 65535};
  c.storage_16bit = c.fp16_arithmetic = fp16;
  c.compute_units = cus;
  return c;
}
}  // namespace

TEST_CASE("attn tuning: every choice is legal on simulated devices") {
  int checked = 0;
  for (uint32_t shared : {16384u, 32768u, 49152u})
    for (uint32_t sg : {4u, 8u, 16u, 32u, 64u, 128u})
      for (uint32_t inv : {128u, 256u, 1024u})
        for (bool fp16 : {false, true})
          for (uint32_t D : {8u, 16u, 24u, 32u, 48u, 64u, 96u, 128u})
            for (uint32_t n_rep : {1u, 2u, 4u, 8u}) {
              const DeviceCaps caps = simulated(shared, sg, inv, fp16);
              for (AttnPhase ph : {AttnPhase::prefill, AttnPhase::decode})
                for (uint32_t rows : {1u, 3u, 8u}) {
                  INFO("shared=" << shared << " sg=" << sg << " inv=" << inv << " fp16=" << fp16 << " D=" << D
                                 << " n_rep=" << n_rep << " decode=" << (ph == AttnPhase::decode) << " rows=" << rows);
                  const AttnTiles t = choose_attn_tiles(caps, fp16, D, n_rep, ph, rows);
                  CHECK(check_attn_tiles(caps, fp16, D, n_rep, t, ph == AttnPhase::prefill) == "");
                  CHECK(t.shared_bytes <= shared);
                  CHECK(t.wg <= inv);
                  if (ph == AttnPhase::decode) CHECK(t.qb <= rows);
                  ++checked;
                }
            }
  MESSAGE("attention tilings checked: " << checked);
}

TEST_CASE("attn tuning: small shared memory gives smaller legal tiles, not failure") {
  const DeviceCaps big = simulated(49152, 32, 1024, true), small = simulated(16384, 32, 1024, true);
  const AttnTiles a = choose_attn_tiles(big, false, 128, 1, AttnPhase::prefill);
  const AttnTiles b = choose_attn_tiles(small, false, 128, 1, AttnPhase::prefill);
  CHECK(b.br * b.bc < a.br * a.bc);
  CHECK(b.shared_bytes <= 16384);
}

TEST_CASE("attn tuning: the checker rejects illegal tiles (it can fail)") {
  const DeviceCaps caps = simulated(16384, 32, 1024, true);
  AttnTiles t = choose_attn_tiles(caps, true, 64, 2, AttnPhase::prefill);
  REQUIRE(check_attn_tiles(caps, true, 64, 2, t, true) == "");
  AttnTiles big = t;
  big.bc = 256;
  big.shared_bytes = attn_shared_bytes(true, 64, big.br, big.bc, big.tc, true);
  CHECK(check_attn_tiles(caps, true, 64, 2, big, true).find("shared memory") != std::string::npos);
  AttnTiles bad_tc = t;
  bad_tc.tc = 3;
  CHECK(check_attn_tiles(caps, true, 64, 2, bad_tc, true) != "");
  AttnTiles bad_qb = t;
  bad_qb.qb = t.br;  // n_rep x qb > br
  CHECK(check_attn_tiles(caps, true, 64, 2, bad_qb, true) != "");
  CHECK_THROWS_AS(choose_attn_tiles(simulated(1024, 32, 1024, false), false, 128, 8, AttnPhase::prefill), Error);
}

TEST_CASE("attn tuning: split count follows the device and the cache length") {
  uint32_t len = 0;
  const DeviceCaps unknown = simulated(32768, 8, 1024, true, 0), h100 = simulated(49152, 32, 1024, true, 132);
  // No compute-unit count: 16 workgroups in total.
  CHECK(choose_splits(unknown, 8192, 64, 2, &len) == 8);
  CHECK(len % 64 == 0);
  CHECK(uint64_t(len) * 8 >= 8192);
  // 132 SMs: 264 workgroups wanted, bounded by the 128 tiles of keys.
  CHECK(choose_splits(h100, 8192, 64, 1, &len) == 128);
  // Short cache: never more splits than tiles; every split non-empty.
  const uint32_t s = choose_splits(h100, 70, 64, 1, &len);
  CHECK(s == 2);
  CHECK(uint64_t(len) * (s - 1) < 70);
  CHECK(choose_splits(h100, 1, 64, 1, &len) == 1);
}

TEST_CASE("attn tuning: keys per invocation are capped only on loop-limited devices") {
  DeviceCaps caps = simulated(32768, 8, 1024, true);
  const AttnTiles t = choose_attn_tiles(caps, true, 64, 1, AttnPhase::prefill);
  CHECK(attn_max_keys_per_invocation(caps, 64, t) == UINT32_MAX);
  caps.quirks.push_back({"loop_iteration_limit", "test"});
  for (uint32_t D : {16u, 32u, 64u, 128u})
    for (uint32_t n_rep : {1u, 8u})
      for (AttnPhase ph : {AttnPhase::prefill, AttnPhase::decode}) {
        const AttnTiles tt = choose_attn_tiles(caps, true, D, n_rep, ph, 8);
        const uint32_t k = attn_max_keys_per_invocation(caps, D, tt);
        INFO("D=" << D << " n_rep=" << n_rep);
        CHECK(k >= tt.bc);
        CHECK(k % tt.bc == 0);
        CHECK(k < 100000);
      }
  // Splits respect the cap: every split within it, all keys covered.
  uint32_t len = 0;
  const uint32_t s = choose_splits(caps, 10000, 32, 64, &len, 256);
  CHECK(len <= 256);
  CHECK(uint64_t(s) * len >= 10000);
}
