// The attention tile choice is a pure function of (DeviceCaps, shape): check every choice is legal
// on simulated devices (shared memory 16/32/48 KiB, subgroup 4..128, invocation limits, no fp16,
// CPU and GPU register budgets).
#include <doctest/doctest.h>

#include "ops/attn_tuning.hpp"
#include "vk/instance.hpp"
#include "vk/tuning.hpp"

using namespace diffvk;

namespace {
DeviceCaps simulated(uint32_t shared, uint32_t subgroup, uint32_t invocations, bool fp16, uint32_t cus = 0,
                     DeviceKind kind = DeviceKind::integrated) {
  DeviceCaps c;
  c.name = "simulated";
  c.kind = kind;
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
  int checked = 0, blocked = 0;
  for (uint32_t shared : {16384u, 32768u, 49152u})
    for (uint32_t sg : {4u, 8u, 16u, 32u, 64u, 128u})
      for (uint32_t inv : {128u, 256u, 1024u})
        for (DeviceKind kind : {DeviceKind::integrated, DeviceKind::cpu})
          for (uint32_t D : {2u, 6u, 8u, 16u, 24u, 32u, 48u, 64u, 96u, 128u})
            for (uint32_t n_rep : {1u, 2u, 4u, 8u, 32u, 64u})
              for (uint32_t nsm : {1u, 2u}) {
                DeviceCaps caps = simulated(shared, sg, inv, true, 0, kind);
                caps.subgroup_arithmetic_compute = D % 4 == 0;  // both cores (the key-block one needs subgroups)
                for (AttnPhase ph : {AttnPhase::prefill, AttnPhase::decode})
                  for (uint32_t rows : {1u, 3u, 8u}) {
                    INFO("shared=" << shared << " sg=" << sg << " inv=" << inv << " cpu=" << (kind == DeviceKind::cpu)
                                   << " D=" << D << " n_rep=" << n_rep << " nsm=" << nsm
                                   << " decode=" << (ph == AttnPhase::decode) << " rows=" << rows);
                    const AttnTiles t = choose_attn_tiles(caps, true, D, n_rep, ph, rows, nsm);
                    CHECK(check_attn_tiles(caps, true, D, n_rep, t) == "");
                    CHECK(t.shared_bytes <= shared);
                    CHECK(t.wg <= inv);
                    CHECK(t.wg == std::min(sg, inv));  // one subgroup per workgroup
                    CHECK(t.br >= 1);
                    // The register budget holds whenever more than one slot is kept.
                    if (t.br > 1) CHECK(t.accumulators <= attn_accumulator_budget(caps));
                    // The key-block core wherever subgroups run and its shared memory fits these slots.
                    if (!caps.subgroup_arithmetic_compute)
                      CHECK(t.blocks == 0);
                    else if (!t.blocks) {  // not even with one slot
                      AttnTiles one = t;
                      one.br = 1;
                      CHECK(attn_block_shared_bytes(one, D) > shared);
                    }
                    // Staged K/V: prefill only, on the key-block core with chunked rows, within the workgroup limits.
                    if (t.nsg > 1) {
                      CHECK(ph == AttnPhase::prefill);
                      CHECK(t.blocks == 1);
                      CHECK(t.chunk != 0);
                      CHECK(t.nsg * t.wg <= inv);
                      if (t.qh)
                        CHECK(attn_queries_per_workgroup(attn_unstaged(t, D), n_rep) <=
                              attn_queries_per_workgroup(t, n_rep));
                      CHECK(attn_queries_per_workgroup(t, n_rep) <= std::max(kAttnStagedQueries, t.br / n_rep) + t.br);
                    }
                    if (t.blocks) ++blocked;
                    ++checked;
                  }
              }
  MESSAGE("attention tilings checked: " << checked << ", " << blocked << " with the key-block core");
  CHECK(blocked > checked / 4);
}

TEST_CASE("attn tuning: GPU budget keeps at most 32 accumulators on phone-sized subgroups") {
  // D=64 on a 32-wide subgroup: one 4-half chunk of V per lane (8-half chunks would idle half the
  // lanes), 2 softmaxes -> 8 floats per slot, 4 slots.
  const DeviceCaps gpu = simulated(32768, 32, 1024, true);
  const AttnTiles t = choose_attn_tiles(gpu, true, 64, 4, AttnPhase::decode, 1);
  CHECK(t.br == 4);
  CHECK(t.accumulators == 32);
  CHECK(t.chunk == 4);
  // 8-lane subgroup (a CPU driver): 16-byte loads of 8 halves.
  CHECK(choose_attn_tiles(simulated(32768, 8, 1024, true), true, 64, 4, AttnPhase::decode, 1).chunk == 8);
  CHECK(choose_attn_tiles(simulated(32768, 8, 1024, false), false, 64, 4, AttnPhase::decode, 1).chunk == 4);
  CHECK(choose_attn_tiles(simulated(32768, 8, 1024, true), true, 6, 4, AttnPhase::decode, 1).chunk == 0);
  // GQA n_rep = 64 at D = 128 loads (issue: any n_rep up to 64), with fewer slots per workgroup.
  const AttnTiles g = choose_attn_tiles(gpu, true, 128, 64, AttnPhase::decode, 8);
  CHECK(g.br >= 1);
  CHECK(g.accumulators <= 32);
  // A CPU driver may keep more (cache-resident registers).
  const DeviceCaps cpu = simulated(32768, 8, 1024, true, 0, DeviceKind::cpu);
  CHECK(choose_attn_tiles(cpu, true, 64, 4, AttnPhase::decode, 1).accumulators <= 256);
  // ... so the fused kernel keeps all 4 heads of a group at D = 128 (256 accumulators), as the two-pass one does.
  CHECK(choose_attn_tiles(cpu, true, 128, 4, AttnPhase::decode, 1).br == 4);
  // Wave64 at the least (GCN, no narrower size): 16 accumulators, 2 slots (<= 64 VGPRs on radv raven).
  const DeviceCaps gcn = simulated(65536, 64, 1024, true);
  CHECK(attn_accumulator_budget(gcn) == 16);
  const AttnTiles w = choose_attn_tiles(gcn, true, 64, 4, AttnPhase::decode, 1);
  CHECK(w.br == 2);
  CHECK(w.accumulators == 16);
  DeviceCaps rdna = gcn;  // wave64 by default, 32 on request: the phone-sized budget
  rdna.subgroup_size_control = true;
  rdna.subgroup_min_size = 32;
  CHECK(attn_accumulator_budget(rdna) == 32);
}

TEST_CASE("attn tuning: the checker rejects illegal tiles (it can fail)") {
  const DeviceCaps caps = simulated(16384, 32, 1024, true);
  const AttnTiles t = choose_attn_tiles(caps, true, 64, 2, AttnPhase::prefill);
  REQUIRE(check_attn_tiles(caps, true, 64, 2, t) == "");
  AttnTiles big = t;
  big.br = 64;
  big.qb = 32;
  big.accumulators = 64 * 2 * 4 * 2;  // not what the tiles give
  CHECK(check_attn_tiles(caps, true, 64, 2, big) != "");
  AttnTiles bad_tc = t;
  bad_tc.tc = 3;
  CHECK(check_attn_tiles(caps, true, 64, 2, bad_tc) != "");
  AttnTiles bad_qb = t;
  bad_qb.qb = t.br + 1;
  CHECK(check_attn_tiles(caps, true, 64, 2, bad_qb) != "");
  AttnTiles bad_vec = t;
  bad_vec.chunk = 0;
  CHECK(check_attn_tiles(caps, true, 64, 2, bad_vec) != "");
  AttnTiles bad_wg = t;
  bad_wg.wg = bad_wg.tc = 2048;
  CHECK(check_attn_tiles(caps, true, 64, 2, bad_wg).find("workgroup") != std::string::npos);
  DeviceCaps tiny = simulated(16, 32, 1024, true);  // 16 bytes of shared memory: no variant fits
  CHECK_THROWS_AS(choose_attn_tiles(tiny, true, 64, 1, AttnPhase::prefill), Error);
}

TEST_CASE("attn tuning: split count follows the device and the cache length") {
  uint32_t len = 0;
  const DeviceCaps unknown = simulated(32768, 8, 1024, true, 0), h100 = simulated(49152, 32, 1024, true, 132);
  // No compute-unit count: 16 workgroups in total.
  CHECK(choose_splits(unknown, 8192, 64, 2, &len) == 8);
  CHECK(len % 64 == 0);
  CHECK(uint64_t(len) * 8 >= 8192);
  // 132 SMs: 528 workgroups wanted, bounded by the 128 blocks of keys.
  CHECK(choose_splits(h100, 8192, 64, 1, &len) == 128);
  // Short cache: never more splits than blocks; every split non-empty.
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
        CHECK(k < 65535);
      }
  // Splits respect the cap: every split within it, all keys covered.
  uint32_t len = 0;
  const uint32_t s = choose_splits(caps, 10000, 32, 64, &len, 256);
  CHECK(len <= 256);
  CHECK(uint64_t(s) * len >= 10000);
}

TEST_CASE("attn tuning: subgroup size control narrows the lanes to the row's chunks") {
  DeviceCaps radv = simulated(65536, 64, 1024, true);  // radv: default 64, may require 32..64
  radv.subgroup_min_size = 32;
  radv.subgroup_size_control = true;
  const AttnTiles t = choose_attn_tiles(radv, true, 64, 4, AttnPhase::decode, 1);
  CHECK(t.wg == 32);
  CHECK(t.subgroup == 32);
  CHECK(check_attn_tiles(radv, true, 64, 4, t) == "");
  const AttnTiles wide = choose_attn_tiles(radv, true, 128, 4, AttnPhase::decode, 1);
  CHECK(wide.wg == 64);  // 64 chunks of 4: the default size has no idle lane
  CHECK(wide.subgroup == 0);
  // Without size control the default stands, and the checker refuses a required size.
  radv.subgroup_size_control = false;
  CHECK(choose_attn_tiles(radv, true, 64, 4, AttnPhase::decode, 1).wg == 64);
  CHECK(check_attn_tiles(radv, true, 64, 4, t) != "");
}

// ContextOptions::simulate_subgroup_size (a phone's 16 or 64 on lavapipe or radv): the lanes are the simulated size,
// with no required subgroup size and the per-key core (the variant without subgroup operations runs), legal tiles.
TEST_CASE("attn tuning: a simulated phone subgroup (16, 64) sets the lanes, with no required size or block core") {
  DeviceCaps lavapipe = simulated(32768, 8, 1024, true, 0, DeviceKind::cpu);
  lavapipe.subgroup_arithmetic_compute = true;
  lavapipe.subgroup_size_control = true;
  DeviceCaps radv = simulated(65536, 64, 1024, true, 8);
  radv.subgroup_arithmetic_compute = radv.subgroup_size_control = true;
  radv.subgroup_min_size = 32;
  for (const DeviceCaps& real : {lavapipe, radv})
    for (const uint32_t sg : {16u, 64u}) {
      ContextOptions o;
      o.simulate_subgroup_size = sg;
      DeviceCaps caps = real;
      simulate_limits(caps, o);
      for (const uint32_t D : {16u, 64u, 128u})
        for (AttnPhase ph : {AttnPhase::prefill, AttnPhase::decode}) {
          INFO("hardware " << real.subgroup_size << " simulated " << sg << " D=" << D
                           << " decode=" << (ph == AttnPhase::decode));
          const AttnTiles t = choose_attn_tiles(caps, true, D, 4, ph, 2);
          CHECK(t.wg == sg);
          CHECK(t.subgroup == 0);
          CHECK(t.blocks == 0);
          CHECK(t.nsg == 1);
          CHECK(check_attn_tiles(caps, true, D, 4, t) == "");
          // The shared-memory lane sums of the variant without subgroup operations fit.
          CHECK(attn_shared_bytes(t.nsm, t.wg, t.br) <= caps.max_shared_memory);
          CHECK_FALSE(attn_uses_coopmat(caps, true, D, 2, false, false, nullptr, nullptr));
        }
    }
}

// llvmpipe ends an invocation's loops after 65535 iterations in all, silently: tiles whose one block of keys already
// passes that budget (wide lane groups summing in shared memory: a simulated subgroup of 128 there) are refused.
TEST_CASE("attn tuning: a key block past the loop-iteration budget is refused, not run truncated") {
  DeviceCaps caps = simulated(32768, 8, 1024, true, 0, DeviceKind::cpu);
  caps.quirks.push_back({"loop_iteration_limit", "test"});
  ContextOptions o;
  o.simulate_subgroup_size = 128;
  simulate_limits(caps, o);
  const AttnTiles wide = choose_attn_tiles(caps, true, 64, 16, AttnPhase::decode, 8);
  REQUIRE(wide.wg == 128);
  try {
    attn_max_keys_per_invocation(caps, 64, wide, false);
    FAIL("accepted " << wide.br << " slots of 128 lanes");
  } catch (const Error& e) {
    CHECK(e.status() == Status::unsupported);
    CHECK(std::string(e.what()).find("loop_iteration_limit") != std::string::npos);
  }
  // One query row (the tiny model's decode): within the budget.
  const AttnTiles one = choose_attn_tiles(caps, true, 16, 2, AttnPhase::decode, 1);
  CHECK(attn_max_keys_per_invocation(caps, 16, one, false) >= one.bc);
}

TEST_CASE("attn tuning: the key-block core wherever subgroups run, unless quirk per_key_attention") {
  DeviceCaps gpu = simulated(32768, 32, 1024, true);
  gpu.subgroup_arithmetic_compute = true;
  const AttnTiles t = choose_attn_tiles(gpu, true, 64, 4, AttnPhase::prefill);
  CHECK(t.blocks == 1);
  CHECK(t.shared_bytes == attn_block_shared_bytes(t, 64));
  // D = 64, n_rep 4, 32 lanes, 4-element chunks: per subgroup Q of 4 slots (4 x 32 chunks of 16 bytes) + 8 x 32
  // probabilities; the staged block: 32 rows of 33 8-byte units (32 chunks of 4 halves, padded to an odd count).
  // Every array of the other mode is declared with one element. With Q in fp32, 32 KiB holds (32768 - 8448 - 40) /
  // 3072 = 7 subgroups (7 queries), so Q goes to shared memory as halves: (32768 - 8448 - 32) / 2048 = 11.
  CHECK(t.qh == 1);
  CHECK(t.nsg == 11);
  CHECK(t.shared_bytes == t.nsg * (4 * 32 * 8 + 8 * 32 * 4) + 32 * 33 * 8 + 16 + 16);
  CHECK(attn_unstaged(t, 64).shared_bytes == 4 * 32 * 16 + 8 * 32 * 4 + 16 + 8 + 8);
  CHECK(attn_unstaged(t, 64).qh == 0);
  CHECK(choose_attn_tiles(gpu, false, 64, 4, AttnPhase::prefill).qh == 0);  // fp32 storage: Q stays fp32
  CHECK(check_attn_tiles(gpu, true, 64, 4, t) == "");
  // Key groups: D = 16 on 64 lanes (8 chunks of a V row): 56 lanes fold their partial P.V through shared memory.
  DeviceCaps wave64 = simulated(65536, 64, 1024, true);
  wave64.subgroup_arithmetic_compute = true;
  const AttnTiles g = choose_attn_tiles(wave64, true, 16, 1, AttnPhase::decode);
  CHECK(g.blocks == 1);
  CHECK(attn_block_shared_bytes(g, 16) >= (64 - 8) * 2 * g.br * 16);
  // The quirk and missing subgroup arithmetic both keep the per-key core; the checker refuses a block core
  // without subgroups.
  DeviceCaps cpu = gpu;
  cpu.quirks.push_back({"per_key_attention", "test"});
  CHECK(choose_attn_tiles(cpu, true, 64, 4, AttnPhase::prefill).blocks == 0);
  DeviceCaps none = gpu;
  none.subgroup_arithmetic_compute = false;
  CHECK(choose_attn_tiles(none, true, 64, 4, AttnPhase::prefill).blocks == 0);
  CHECK(check_attn_tiles(none, true, 64, 4, t) != "");
  // Too little shared memory for Q even with one slot: the per-key core, which needs none with subgroups.
  DeviceCaps tiny = gpu;
  tiny.max_shared_memory = 1024;
  const AttnTiles small = choose_attn_tiles(tiny, true, 128, 8, AttnPhase::prefill);
  CHECK(small.blocks == 0);
  CHECK(check_attn_tiles(tiny, true, 128, 8, small) == "");
}

TEST_CASE("attn tuning: DIFF V2 tiles pair their slots, stay legal, and hold V1's registers") {
  int checked = 0;
  for (uint32_t shared : {16384u, 49152u})
    for (uint32_t sg : {4u, 8u, 32u, 64u, 128u})
      for (DeviceKind kind : {DeviceKind::integrated, DeviceKind::cpu})
        for (uint32_t D : {6u, 8u, 16u, 64u, 128u})
          for (uint32_t n_rep : {2u, 4u, 8u, 64u})  // query heads per KV head: always even
            for (AttnPhase ph : {AttnPhase::prefill, AttnPhase::decode})
              for (uint32_t rows : {1u, 8u}) {
                const DeviceCaps caps = simulated(shared, sg, 1024, true, 0, kind);
                INFO("shared=" << shared << " sg=" << sg << " cpu=" << (kind == DeviceKind::cpu) << " D=" << D
                               << " n_rep=" << n_rep << " decode=" << (ph == AttnPhase::decode) << " rows=" << rows);
                const AttnTiles t = choose_attn_tiles(caps, true, D, n_rep, ph, rows, 1, true);
                CHECK(t.v2);
                CHECK(check_attn_tiles(caps, true, D, n_rep, t) == "");
                CHECK(t.br >= 2);
                CHECK(t.br % 2 == 0);  // slots 2k, 2k + 1 are one output head's pair
                ++checked;
              }
  MESSAGE("DIFF V2 tilings checked: " << checked);
  // At D = 64 on a wave64-only GPU (16 accumulators) V2 keeps one pair, as V1 keeps 2 slots (radv raven: 48 VGPRs,
  // 5 subgroups per SIMD each); on a 32-wide one, 3 pairs against V1's 4 slots.
  DeviceCaps gcn = simulated(65536, 64, 1024, true);
  CHECK(choose_attn_tiles(gcn, true, 64, 8, AttnPhase::decode, 1, 1, true).br == 2);
  CHECK(choose_attn_tiles(gcn, true, 64, 4, AttnPhase::decode, 1, 2).br == 2);
  const DeviceCaps rdna = simulated(65536, 32, 1024, true);
  CHECK(choose_attn_tiles(rdna, true, 64, 8, AttnPhase::decode, 1, 1, true).br == 6);
  CHECK(choose_attn_tiles(rdna, true, 64, 4, AttnPhase::decode, 1, 2).br == 4);
  // Odd n_rep or two softmaxes are refused.
  CHECK_THROWS_AS(choose_attn_tiles(gcn, true, 64, 3, AttnPhase::decode, 1, 1, true), Error);
  CHECK_THROWS_AS(choose_attn_tiles(gcn, true, 64, 4, AttnPhase::decode, 1, 2, true), Error);
  AttnTiles odd = choose_attn_tiles(gcn, true, 64, 8, AttnPhase::decode, 1, 1, true);
  odd.br = 3;
  odd.accumulators = 12;
  CHECK(check_attn_tiles(gcn, true, 64, 8, odd) != "");
}

TEST_CASE("attn tuning: prefill stages K/V blocks for 16 queries where the workgroup and shared memory allow") {
  DeviceCaps gpu = simulated(65536, 32, 1024, true);  // an RDNA-like desktop GPU: 64 KiB, 1024 invocations
  gpu.subgroup_arithmetic_compute = true;
  const AttnTiles t = choose_attn_tiles(gpu, true, 64, 4, AttnPhase::prefill);
  INFO("nsg=" << t.nsg << " br=" << t.br << " shared=" << t.shared_bytes);
  CHECK(t.blocks == 1);
  CHECK(t.nsg > 1);
  CHECK(t.qh == 0);  // 16 queries with Q in fp32
  CHECK(attn_queries_per_workgroup(t, 4) >= kAttnStagedQueries);
  CHECK(check_attn_tiles(gpu, true, 64, 4, t) == "");
  // The staged block is part of the shared memory: the same tiles without it need less.
  CHECK(attn_unstaged(t, 64).shared_bytes < t.shared_bytes);
  CHECK(attn_unstaged(t, 64).nsg == 1);
  CHECK(check_attn_tiles(gpu, true, 64, 4, attn_unstaged(t, 64)) == "");
  // Decode never stages (one workgroup per group of heads, split over keys).
  CHECK(choose_attn_tiles(gpu, true, 64, 4, AttnPhase::decode, 1).nsg == 1);
  // A phone's 32 KiB: fewer subgroups, still more than one, and within the limit.
  DeviceCaps phone = simulated(32768, 16, 512, true);
  phone.subgroup_arithmetic_compute = true;
  const AttnTiles ph = choose_attn_tiles(phone, true, 128, 4, AttnPhase::prefill);
  CHECK(ph.nsg >= 2);
  CHECK(ph.shared_bytes <= 32768u);
  CHECK(check_attn_tiles(phone, true, 128, 4, ph) == "");
  // A Q8_0 cache is staged as floats: more shared memory per subgroup's share of the block than fp16 rows.
  const AttnTiles q8 = choose_attn_tiles(gpu, true, 64, 4, AttnPhase::prefill, 1, 2, false, true, true);
  CHECK(!q8.kv_halves);
  CHECK(check_attn_tiles(gpu, true, 64, 4, q8) == "");
  AttnTiles as_halves = q8;
  as_halves.kv_halves = true;
  CHECK(attn_block_shared_bytes(as_halves, 64) < attn_block_shared_bytes(q8, 64));
  // Quirk no_kv_staging (CPU drivers) and element-wise rows keep one subgroup.
  DeviceCaps cpu = gpu;
  cpu.quirks.push_back({"no_kv_staging", "test"});
  CHECK(choose_attn_tiles(cpu, true, 64, 4, AttnPhase::prefill).nsg == 1);
  CHECK(choose_attn_tiles(gpu, true, 6, 4, AttnPhase::prefill).nsg == 1);
  // The checker refuses staging without the key-block core, and beyond the workgroup limit.
  AttnTiles no_blocks = t;
  no_blocks.blocks = 0;
  CHECK(check_attn_tiles(gpu, true, 64, 4, no_blocks) != "");
  AttnTiles too_many = t;
  too_many.nsg = 1024 / t.wg + 1;
  too_many.shared_bytes = attn_block_shared_bytes(too_many, 64);
  CHECK(check_attn_tiles(gpu, true, 64, 4, too_many).find("workgroup") != std::string::npos);
  // Row blocks count nsg·br slots per workgroup.
  CHECK(attn_row_blocks(100, 4, t) == (400 + t.nsg * t.br - 1) / (t.nsg * t.br));
}

TEST_CASE("attn tuning: Q in halves only where fp32 Q keeps fewer than 16 queries, and never without fp16 storage") {
  DeviceCaps nv = simulated(49152, 32, 1024, true);  // 48 KiB
  nv.subgroup_arithmetic_compute = true;
  const AttnTiles t = choose_attn_tiles(nv, true, 64, 4, AttnPhase::prefill);
  INFO("nsg=" << t.nsg << " qh=" << t.qh);
  CHECK(t.qh == 1);  // fp32 Q: 13 queries; halves: 16
  CHECK(attn_queries_per_workgroup(t, 4) >= kAttnStagedQueries);
  CHECK(check_attn_tiles(nv, true, 64, 4, t) == "");
  CHECK(check_attn_tiles(nv, false, 64, 4, t) != "");  // the checker refuses halves without fp16 storage
  // Where fp32 Q already holds 16 queries, Q stays fp32 (the conversions cost VALU instructions).
  DeviceCaps big = simulated(65536, 32, 1024, true);
  big.subgroup_arithmetic_compute = true;
  CHECK(choose_attn_tiles(big, true, 64, 4, AttnPhase::prefill).qh == 0);
  CHECK(choose_attn_tiles(nv, false, 64, 4, AttnPhase::prefill).qh == 0);  // fp32 storage
  AttnTiles unstaged_qh = attn_unstaged(t, 64);
  unstaged_qh.qh = 1;
  CHECK(check_attn_tiles(nv, true, 64, 4, unstaged_qh) != "");
}

TEST_CASE(
    "attn tuning: the cooperative-matrix prefill follows the matmul's policy (fit_attn_coop, attn_uses_coopmat)") {
  std::string why;
  // No shape: never, saying why.
  DeviceCaps none = simulated(49152, 32, 1024, true);
  CHECK(!attn_uses_coopmat(none, true, 64, 2, false, false, nullptr, &why));
  CHECK(why == "no VK_KHR_cooperative_matrix");
  for (uint32_t mnk : {8u, 16u})
    for (uint32_t sg : {8u, 32u, 64u})
      for (uint32_t shared : {32768u, 49152u, 65536u})
        for (uint32_t D : {8u, 16u, 24u, 32u, 64u, 128u}) {
          DeviceCaps c = simulated(shared, sg, 1024, true);
          c.coopmat_m = c.coopmat_n = c.coopmat_k = mnk;
          INFO("shape " << mnk << " sg=" << sg << " shared=" << shared << " D=" << D);
          AttnCoopTiles t;
          const bool fits = fit_attn_coop(c, true, D, 2, false, false, &t, &why);
          CHECK(fits == (D % mnk == 0 && attn_coop_shared_bytes(D, mnk, mnk) <= shared));
          if (!fits) {
            CHECK(!why.empty());
            CHECK(!attn_uses_coopmat(c, true, D, 2, false, false, nullptr, nullptr));
            continue;
          }
          CHECK(t.br == mnk);
          CHECK(t.bc % t.cn == 0);
          CHECK(t.bc % t.ck == 0);
          CHECK(t.wg == t.nsg * t.sg);
          CHECK(t.wg <= c.max_workgroup_invocations);
          CHECK(t.shared_bytes == attn_coop_shared_bytes(D, t.br, t.bc));
          CHECK(t.shared_bytes <= shared);
          CHECK(t.pin == 0);  // one subgroup size: nothing to pin
          CHECK(attn_coop_spec_constants(t, D) == std::vector<uint32_t>{t.wg, t.nsg, D, t.cm, t.cn, t.ck, t.bc});
          CHECK(attn_uses_coopmat(c, true, D, 2, false, false, nullptr, nullptr));
          // fp32, DIFF V2, the single softmax, a Q8_0 cache: the scalar kernel, saying why.
          CHECK(!attn_uses_coopmat(c, false, D, 2, false, false, nullptr, &why));
          CHECK(why.find("fp32") != std::string::npos);
          CHECK(!attn_uses_coopmat(c, true, D, 1, true, false, nullptr, &why));
          CHECK(why.find("DIFF V2") != std::string::npos);
          CHECK(!attn_uses_coopmat(c, true, D, 1, false, false, nullptr, &why));
          CHECK(!attn_uses_coopmat(c, true, D, 2, false, true, nullptr, &why));
          CHECK(why.find("Q8_0") != std::string::npos);
          // CPU drivers (quirk coopmat_emulated): never, unless the quirk is dropped (DIFFVK_COOPMAT=on,
          // DIFFVK_ATTN_CORE=coopmat).
          DeviceCaps cpu = c;
          force_quirk(cpu, "coopmat_emulated");
          CHECK(fit_attn_coop(cpu, true, D, 2, false, false, nullptr, nullptr));
          CHECK(!attn_uses_coopmat(cpu, true, D, 2, false, false, nullptr, &why));
          CHECK(why == "quirk coopmat_emulated");
          // Keys per invocation: unlimited unless loop-limited, then a multiple of the block, at least one block.
          CHECK(attn_coop_max_keys(c, D, t) == UINT32_MAX);
          force_quirk(cpu, "loop_iteration_limit");
          const uint32_t keys = attn_coop_max_keys(cpu, D, t);
          CHECK(keys % t.bc == 0);
          CHECK(keys >= t.bc);
          CHECK(keys < 60000);
        }
  // D not a multiple of the shape's K: the scalar kernel, naming D.
  DeviceCaps c = simulated(65536, 32, 1024, true);
  c.coopmat_m = c.coopmat_n = c.coopmat_k = 16;
  CHECK(!fit_attn_coop(c, true, 24, 2, false, false, nullptr, &why));
  CHECK(why.find("D=24") != std::string::npos);
  // Sizes that vary: pinned where the device can be told, else none.
  c.subgroup_min_size = 32, c.subgroup_max_size = 64;
  AttnCoopTiles t;
  CHECK(!fit_attn_coop(c, true, 64, 2, false, false, &t, &why));
  c.subgroup_size_control = true;
  REQUIRE(fit_attn_coop(c, true, 64, 2, false, false, &t, &why));
  CHECK(t.pin == 32);
  // Lavapipe's 8x8x8 at 32 KiB of shared memory: D = 128 fits (the largest the conformance table runs).
  DeviceCaps lvp = simulated(32768, 8, 1024, true, 0, DeviceKind::cpu);
  lvp.coopmat_m = lvp.coopmat_n = lvp.coopmat_k = 8;
  CHECK(fit_attn_coop(lvp, true, 128, 2, false, false, nullptr, nullptr));
}
