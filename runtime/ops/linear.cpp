// Linear layer y = x·Wᵀ (+ r): tile choice (pure) and the two shader paths (shaders/linear.comp,
// shaders/linear_vec.comp).
#include "ops/linear.hpp"

#include <algorithm>
#include <tuple>
#include <cstdlib>

#include "ops/linear_quant.hpp"
#include "platform.hpp"

namespace diffvk {

namespace {

uint32_t invocation_limit(const DeviceCaps& c) {
  return std::max(1u, std::min(c.max_workgroup_invocations, c.max_workgroup_size[0]));
}

// Shared memory declared by linear.comp: two buffers (double buffering) of k-major fp32 x and W tiles
// (swizzled, no padding).
uint32_t mm_shared_bytes(uint32_t bm, uint32_t bn, uint32_t bk) { return 2u * 4u * bk * (bm + bn); }

// Fits a matrix-matrix tile (all powers of two) to the device: first the invocation limit (grow the
// register block up to 8 x 8, then shrink the tile), then fill at least one subgroup where possible
// (shrink the register block), then the shared-memory limit (shrink bk down to 8, then the tile, then bk).
// Terminates at worst at a 1 x 1 tile with bk 1 (1 invocation, 16 bytes), legal on every device.
LinearTiles fit_mm(const DeviceCaps& c, uint32_t variant, uint32_t bm, uint32_t bn, uint32_t bk, uint32_t rm,
                   uint32_t rn) {
  const uint32_t limit = invocation_limit(c);
  auto wg = [&] { return (bm / rm) * (bn / rn); };
  while (wg() > limit) {
    if (rm <= rn && rm < 8 && rm * 2 <= bm)
      rm *= 2;
    else if (rn < 8 && rn * 2 <= bn)
      rn *= 2;
    else if (bm >= bn && bm > 1) {
      bm /= 2;
      rm = std::min(rm, bm);
    } else {
      bn /= 2;
      rn = std::min(rn, bn);
    }
  }
  const uint32_t want = std::min(std::max(c.subgroup_size, 1u), limit);
  while (wg() < want && (rm > 1 || rn > 1)) {
    if (rm >= rn)
      rm /= 2;
    else
      rn /= 2;
  }
  while (wg() > limit) {  // undo an overshoot of the previous loop (non-power-of-two limits)
    if (rm <= rn)
      rm *= 2;
    else
      rn *= 2;
  }
  while (mm_shared_bytes(bm, bn, bk) > c.max_shared_memory) {
    if (bk > 8)
      bk /= 2;
    else if (bm >= bn && bm > 1) {
      bm /= 2;
      rm = std::min(rm, bm);
    } else if (bn > 1) {
      bn /= 2;
      rn = std::min(rn, bn);
    } else if (bk > 1)
      bk /= 2;
    else
      break;
  }
  LinearTiles t;
  t.variant = variant;
  std::tie(t.bm, t.bn, t.bk, t.rm, t.rn) = std::tie(bm, bn, bk, rm, rn);
  // The whole k step unrolled, except where the driver's compiler is superlinear in the body's size.
  t.ku = c.has_quirk("long_unrolled_compile") ? std::min(bk, 8u) : bk;
  t.wg = wg();
  t.shared_bytes = mm_shared_bytes(bm, bn, bk);
  return t;
}

// The register-tiled candidate: one subgroup per workgroup (the default subgroup size, a power of two
// within the limits; 8 when the driver reports none). Each lane keeps bm·rn fp32 accumulators.
// - GPUs: 16 rows, rn = 2 (32 accumulators: Mali Valhall keeps full occupancy at 64 registers per thread; AMD's
//   wave64 at 128 VGPRs).
// - CPU drivers: 8 rows, rn = 8 (lanes are SIMD slots of a CPU register; loads, not registers, are what is scarce
//   there: a lane's weight vector feeds 8 rows, a shared x vector 8 columns). LLVM compiles the unrolled step at the
//   pipeline's first dispatch, and its time grows faster than the tile (lavapipe 22.3, fp16, one pipeline):
//   16 x 8 took 4.8-5.0 s, 8 x 8 and 16 x 4 1.7-1.8 s, 8 x 4 0.8-1.1 s. 16 x 8 prefilled the 134M model 7% faster
//   (128 tokens: 114-115 against 106 tokens/s; 16 x 4 91, 8 x 4 79): 3 s of a cold start per weight format is worth
//   more than that, and a verify pass of 2-8 rows computes 8 rows instead of 16.
LinearTiles fit_reg(const DeviceCaps& c, uint32_t variant) {
  LinearTiles t;
  t.reg = true;
  t.variant = variant;
  t.wg = pick_pow2_workgroup(c, c.subgroup_size ? c.subgroup_size : 8u);
  t.bm = c.kind == DeviceKind::cpu ? 8 : 16;
  t.rn = c.kind == DeviceKind::cpu ? 8 : 2;
  t.bn = t.wg * t.rn;
  t.shared_bytes = 0;
  return t;
}

uint32_t ceil_div(uint32_t a, uint32_t b) { return (a + b - 1) / b; }

// Shared memory declared by linear_coopmat.comp: the x and W tiles in fp16 with rows of bk + 8 halves, and
// one fp32 cm x cn staging matrix per subgroup.
uint32_t coop_shared_bytes(uint32_t bm, uint32_t bn, uint32_t bk, uint32_t nsg, uint32_t cm, uint32_t cn) {
  return 2u * (bm + bn) * (bk + 8u) + 4u * nsg * cm * cn;
}

// The cooperative-matrix candidate: the subgroup size the device runs by default (pinned where sizes vary,
// so that the shader's NSG subgroups are the ones it was specialised for), 4 subgroups as 2 x 2 where they
// fit, each with 2 x 2 matrices, bk = 32 (or ck when larger). Absent (variant 0 returned as `false`) where
// no shape is usable or nothing fits the limits.
bool fit_coop(const DeviceCaps& c, LinearTiles* out) {
  if (c.coopmat_m == 0 || c.subgroup_size == 0) return false;
  const bool varies = c.subgroup_min_size != c.subgroup_max_size;
  if (varies && !c.subgroup_size_control) return false;  // the shader needs to know its subgroups
  const uint32_t limit = invocation_limit(c);
  const uint32_t bk = 32u % c.coopmat_k == 0 ? 32u : c.coopmat_k;  // ck is a multiple of 8 (probe)
  for (const uint32_t nsg : {4u, 2u, 1u}) {
    const uint32_t sgm = nsg == 4 ? 2u : 1u;
    const uint32_t bm = sgm * 2u * c.coopmat_m, bn = (nsg / sgm) * 2u * c.coopmat_n;
    const uint32_t shared = coop_shared_bytes(bm, bn, bk, nsg, c.coopmat_m, c.coopmat_n);
    if (nsg * c.subgroup_size > limit || shared > c.max_shared_memory) continue;
    LinearTiles t;
    t.coop = true;
    t.variant = kLinearCoopVariant;
    t.sg = c.subgroup_size;
    t.pin = varies ? c.subgroup_size : 0u;
    t.nsg = nsg;
    t.sgm = sgm;
    t.wg = nsg * c.subgroup_size;
    t.cm = c.coopmat_m;
    t.cn = c.coopmat_n;
    t.ck = c.coopmat_k;
    t.bm = bm;
    t.bn = bn;
    t.bk = bk;
    t.shared_bytes = shared;
    *out = t;
    return true;
  }
  return false;
}

}  // namespace

std::vector<LinearTiles> linear_tile_candidates(const DeviceCaps& c) {
  std::vector<LinearTiles> out;
  // [0] matrix-vector: 64 invocations (or one subgroup when larger), a power of two within the limits;
  // shared memory is reduce.glsl's WG floats.
  {
    const uint32_t limit = invocation_limit(c);
    uint32_t wg = 1;
    const uint32_t target = std::max(64u, c.subgroup_size);
    while (wg * 2 <= std::min(target, limit) && 4u * wg * 2 <= c.max_shared_memory) wg *= 2;
    LinearTiles t;
    t.vec = true;
    t.variant = 0;
    t.wg = wg;
    t.nf = 4;
    t.shared_bytes = 4u * wg;
    out.push_back(t);
  }
  // Shared-memory tiles (linear.comp), k step 32, double-buffered; FMAs per shared-memory load instruction
  // (ds_load_b128) in the main loop: rm·rn / (rm/4 + rn/4).
  // [1] large: 128 x 64 tile, 8 x 4 per invocation (32 FMAs per 3 vec4 loads), 256 invocations, 48 KiB
  //     (2 workgroups per 128-KiB RDNA WGP: 4 wave32 per SIMD).
  // [2] small: 64 x 64 tile, 4 x 4 per invocation (16 per 2), 256 invocations, 32 KiB.
  out.push_back(fit_mm(c, 1, 128, 64, 32, 8, 4));
  out.push_back(fit_mm(c, 2, 64, 64, 32, 4, 4));
  out.push_back(fit_reg(c, 3));  // [3] register-tiled, one subgroup per workgroup
  LinearTiles coop;
  if (fit_coop(c, &coop)) out.push_back(coop);  // [4] cooperative matrices
  return out;
}

bool linear_uses_coopmat(const DeviceCaps& c, bool fp16, std::string* why_not) {
  auto no = [&](const std::string& why) {
    if (why_not) *why_not = why;
    return false;
  };
  if (c.coopmat_m == 0) return no(c.coopmat_note.empty() ? "no VK_KHR_cooperative_matrix" : c.coopmat_note);
  if (!fp16) return no("fp32 precision (the cooperative-matrix shader takes fp16)");
  LinearTiles t;
  if (!fit_coop(c, &t)) return no("no cooperative-matrix tile fits the device's subgroup and shared-memory limits");
  if (c.has_quirk("coopmat_emulated")) return no("quirk coopmat_emulated");
  return true;
}

LinearTiles choose_linear_tiles(const DeviceCaps& c, uint32_t rows, uint32_t /*in*/, uint32_t out, bool fp16) {
  const auto cand = linear_tile_candidates(c);
  // Cooperative matrices past one register tile of rows (prefill); see linear_uses_coopmat.
  if (rows > cand[kLinearRegVariant].bm && linear_uses_coopmat(c, fp16)) return cand[kLinearCoopVariant];
  // CPU drivers: the register-tiled path for every row count (the matrix-vector path's per-lane strided
  // loads are loops there; measured on lavapipe 22.3: 8 rows x 2048 x 2048 in 11-28 ms against 127).
  if (c.kind == DeviceKind::cpu) return cand[3];
  // Mali (vendor 0x13B5): no shared memory either: its workgroup barriers and shared memory stop the
  // driver merging workgroups and cost occupancy, while its loads go through the same cache
  // (Arm's Mali GPU best-practices guide); registers are the tile.
  if (c.vendor_id == kVendorArm && rows > kLinearVecMaxRows) return cand[3];
  if (rows <= kLinearVecMaxRows) return cand[0];
  // 9-16 rows (batched decode, speculative verification): one register tile of 16 rows instead of a
  // shared-memory tile that is mostly padding.
  if (rows <= cand[3].bm) return cand[3];
  // The large tile re-reads x and W least; use it when it still gives every compute unit two
  // workgroups (32 workgroups when the driver does not report its compute units).
  const LinearTiles& big = cand[1];
  const uint64_t tiles = uint64_t(ceil_div(rows, big.bm)) * ceil_div(out, big.bn);
  const uint64_t enough = c.compute_units ? 2ull * c.compute_units : 32ull;
  return tiles >= enough ? big : cand[2];
}

LinearTiles choose_quant_linear_tiles(const DeviceCaps& c, uint32_t rows, uint32_t in, uint32_t out) {
  return choose_linear_tiles(c, rows, in, out, /*fp16=*/false);  // no cooperative matrices
}

RowGeometry row_geometry(const DeviceCaps& c) {
  RowGeometry g;
  g.wg = pick_pow2_workgroup(c, std::max(8u, c.subgroup_size));
  // 8 features per workgroup on GPUs; on CPU drivers each workgroup is one SIMD batch with a fixed cost of
  // several µs (llvmpipe), so 32 features share it and x's loads (BENCHMARKS.md).
  g.nf = c.kind == DeviceKind::cpu ? kCpuRowFeatures : std::min(8u, g.wg);
  if (c.subgroup_size_control && c.subgroup_min_size != c.subgroup_max_size && g.wg >= c.subgroup_min_size &&
      g.wg <= c.subgroup_max_size)
    g.pin = g.wg;
  g.one_sg = g.pin != 0 || (c.subgroup_min_size == c.subgroup_max_size && c.subgroup_size == g.wg);
  g.lane_groups = c.kind != DeviceKind::cpu;
  g.lanes = c.kind != DeviceKind::cpu ? 0 : c.has_quirk("row_lane_pairs") ? 2 : 1;
  return g;
}

uint32_t row_lanes(const RowGeometry& g, uint32_t steps, bool pairs, uint32_t force) {
  if (g.wg == 0 || g.nf == 0) return g.wg;
  // At most nf (nf / 2 with pairs) groups: each owns at least one feature (one RoPE pair).
  const uint32_t per_group = pairs ? 2u : 1u;
  uint32_t min_lg = 1;
  while (min_lg < g.wg && (g.wg / min_lg > g.nf / per_group || g.nf % (g.wg / min_lg) != 0)) min_lg *= 2;
  uint32_t lg = g.wg;
  if (force != 0) {
    lg = 1;
    while (lg * 2 <= force && lg * 2 <= g.wg) lg *= 2;
  } else if (g.lanes) {
    lg = g.lanes;
  } else if (g.lane_groups && steps < g.wg) {
    lg = 1;
    while (lg < steps) lg *= 2;
  }
  return std::min(g.wg, std::max(lg, min_lg));
}

std::vector<uint32_t> linear_reachable_variants(const DeviceCaps& c, bool fp16) {
  std::vector<uint32_t> v;
  if (c.kind == DeviceKind::cpu)
    v = {kLinearRegVariant};
  else if (c.vendor_id == kVendorArm)
    v = {0, kLinearRegVariant};
  else
    v = {0, 1, 2, kLinearRegVariant};
  if (linear_uses_coopmat(c, fp16)) v.push_back(kLinearCoopVariant);
  return v;
}

LinearKernel::LinearKernel(Device& device, KernelOptions o, const std::vector<QuantType>& quant, bool all_variants,
                           const QuantRowPath* quant_path)
    : device_(device),
      tiles_(linear_tile_candidates(device.caps())),
      fp16_(o.fp16),
      quant_choice_(choose_quant_matmul_path(device.caps(), quant_path)) {
  std::vector<bool> build(tiles_.size(), all_variants);
  // Compiled on first record (LazyPipeline), all_variants too: a test or the self-test that declares every
  // variant records a few of them (on an H200 compiling all of them at construction was 16.5 of the self-test's
  // 18.2 s). Program::finalize compiles what a program records, batched on the device's worker threads.
  auto lazy = [&](PipelineDesc d) { return std::make_unique<LazyPipeline>(device, std::move(d), false); };
  for (uint32_t v : linear_reachable_variants(device.caps(), o.fp16)) build[v] = true;
  // Every linear shader's push block: LinearParams, the epilogue flags and the quants' offset (dispatch_mm).
  const uint32_t push = sizeof(LinearParams) + 2 * sizeof(uint32_t);
  // The cooperative-matrix shader exists in fp16 only, and needs the extension enabled on the device.
  if (tiles_.size() > kLinearCoopVariant && (!o.fp16 || !device.coopmat())) build[kLinearCoopVariant] = false;
  auto coop_desc = [&](const LinearTiles& t, uint32_t vec, uint32_t y32) {
    return PipelineDesc{"linear_coopmat"}
        .with_bindings(5)
        .with_push(push)
        .with_spec({t.wg, t.nsg, t.sgm, t.cm, t.cn, t.ck, t.bk, vec, y32})
        .with_subgroup(false)
        .with_fp16(true)
        .with_subgroup_size(t.pin);
  };
  // The register-tiled shader shares x rows across the subgroup with subgroupBroadcast in its _sg variant;
  // it asks for its workgroup size as the subgroup size where the driver can be told.
  const DeviceCaps& dc = device.caps();
  // CPU drivers keep the shuffle form (spec constant XSH = 1: faster on lavapipe 22.3), GPUs broadcast with
  // constant lanes (radv 22.3 on gfx11 wave64 turns the shuffle into a loop that keeps the row loop rolled).
  // The tuning's linear_reg_share (runtime/vk/tuning.cpp) makes the choice; tests force broadcast on CPU drivers.
  const uint32_t xsh = device.tuning().linear_reg_shuffle ? 1u : 0u;
  reg_subgroup_ = o.subgroup && (dc.subgroup_operations & VK_SUBGROUP_FEATURE_BALLOT_BIT) != 0 &&
                  (dc.subgroup_operations & VK_SUBGROUP_FEATURE_SHUFFLE_BIT) != 0;
  auto reg_desc = [&](const LinearTiles& t, uint32_t vec, uint32_t y32, uint32_t wq = 0, bool sg = true,
                      const char* shader = "linear_reg") {
    const bool pin = dc.subgroup_size_control && t.wg >= dc.subgroup_min_size && t.wg <= dc.subgroup_max_size &&
                     dc.subgroup_min_size != dc.subgroup_max_size;
    // linear_reg.comp in fp16 takes its output type per dispatch (Y32 = 2, p.flags bit 2): the two y32 descriptions
    // are one pipeline on the device (shared, compiled once). linear_reg_dot keeps it a constant.
    const uint32_t y32_spec = o.fp16 && std::string(shader) == "linear_reg" ? 2u : y32;
    return PipelineDesc{shader}
        .with_bindings(5)
        .with_push(push)
        .with_spec({t.wg, t.bm, t.rn, vec, y32_spec, wq, xsh})
        .with_subgroup(reg_subgroup_ && sg)
        .with_fp16(o.fp16)
        .with_subgroup_size(pin ? t.wg : 0u);
  };
  // The matrix-vector shader: vec = 16-byte loads, wq = the weight format (0: storage type, 1: Q8_0, 2: Q4_0).
  auto vec_desc = [&](const LinearTiles& t, uint32_t vec, uint32_t y32, uint32_t wq) {
    return kernel_desc("linear_vec", o).with_bindings(5).with_push(push).with_spec({t.wg, t.nf, y32, vec, wq});
  };
  const LinearTiles& rt = tiles_[kLinearRegVariant];
  // y32 = 1: float32 output and residual (the model's residual stream and logits); fp16 devices only,
  // in fp32 the storage type is already float32.
  const uint32_t kv = o.fp16 ? 8u : 4u;  // elements per 16-byte load
  for (uint32_t y32 = 0; y32 < (o.fp16 ? 2u : 1u); ++y32) {
    for (const LinearTiles& t : tiles_) {
      if (!build[t.variant])
        pipelines_[y32].push_back(nullptr);
      else if (t.vec)
        pipelines_[y32].push_back(lazy(vec_desc(t, 0, y32, 0)));
      else if (t.reg)
        pipelines_[y32].push_back(lazy(reg_desc(t, 0, y32)));
      else if (t.coop)
        pipelines_[y32].push_back(lazy(coop_desc(t, 0, y32)));
      else
        pipelines_[y32].push_back(lazy(PipelineDesc{"linear"}
                                           .with_bindings(5)
                                           .with_push(push)
                                           .with_spec({t.wg, t.bm, t.bn, t.bk, t.rm, t.rn, 0u, y32, t.ku, 0u})
                                           .with_subgroup(false)
                                           .with_fp16(o.fp16)));
    }
    // Matrix-matrix candidates again with 16-byte global loads (used when the shape and alignment allow).
    for (const LinearTiles& t : tiles_)
      vec_pipelines_[y32].push_back(!build[t.variant] ? nullptr
                                    : t.reg           ? lazy(reg_desc(t, 1, y32))
                                    : t.coop          ? lazy(coop_desc(t, 1, y32))
                                    : t.vec           ? lazy(vec_desc(t, 1, y32, 0))
                                    : t.bk % kv != 0
                                        ? nullptr
                                        : lazy(PipelineDesc{"linear"}
                                                   .with_bindings(5)
                                                   .with_push(push)
                                                   .with_spec({t.wg, t.bm, t.bn, t.bk, t.rm, t.rn, 1u, y32, t.ku, 0u})
                                                   .with_subgroup(false)
                                                   .with_fp16(o.fp16)));
  }
  // Quantized weights (record_quant): the register-tiled candidate with WQ = 1 (Q8_0) / 2 (Q4_0),
  // built only for the formats asked for.
  const bool int8 = quant_choice_.path == QuantRowPath::int8_dot || (all_variants && dc.integer_dot_product);
  bool any_quant = false;
  for (const QuantType q : quant) {
    if (q != QuantType::q8_0 && q != QuantType::q4_0) continue;
    any_quant = true;
    // The int8 dot-product matmul (linear_reg_dot.comp: the register tile's geometry; no subgroup variant, the
    // quantized rows go through shared memory), compiled on first use even with all_variants (only the int8
    // tests and benchmark rows record it).
    if (int8)
      for (uint32_t vec = 0; vec < 2; ++vec)
        for (uint32_t y32 = 0; y32 < (o.fp16 ? 2u : 1u); ++y32)
          quant_dot_pipelines_[q == QuantType::q4_0][vec][y32] = std::make_unique<LazyPipeline>(
              device, reg_desc(rt, vec, y32, q == QuantType::q4_0 ? 2u : 1u, /*sg=*/false, "linear_reg_dot"), false);
  }
  if (any_quant)
    platform::log(platform::LogLevel::info, std::string("linear (quantized, more than one row): ") +
                                                quant_row_path_name(quant_choice_.path) + ": " + quant_choice_.reason);
  for (const QuantType q : quant) {
    if (q != QuantType::q8_0 && q != QuantType::q4_0) continue;
    const uint32_t qi = q == QuantType::q4_0;
    for (uint32_t vec = 0; vec < 2; ++vec)
      for (uint32_t y32 = 0; y32 < (o.fp16 ? 2u : 1u); ++y32) {
        quant_pipelines_[qi][vec][y32] = lazy(reg_desc(tiles_[kLinearRegVariant], vec, y32, qi + 1));
        // The matrix-vector shader with the quantized W loader (2-8 rows on GPUs), where this kernel builds it.
        if (build[0]) quant_vec_pipelines_[qi][vec][y32] = lazy(vec_desc(tiles_[0], vec, y32, qi + 1));
        // The shared-memory tiles with the quantized W loader (WQ), where this kernel builds the tile.
        for (uint32_t v = 1; v <= 2; ++v) {
          const LinearTiles& t = tiles_[v];
          if (build[v] && (vec == 0 || t.bk % kv == 0))
            quant_mm_pipelines_[qi][v - 1][vec][y32] =
                lazy(PipelineDesc{"linear"}
                         .with_bindings(5)
                         .with_push(push)
                         .with_spec({t.wg, t.bm, t.bn, t.bk, t.rm, t.rn, vec, y32, t.ku, qi + 1})
                         .with_subgroup(false)
                         .with_fp16(o.fp16));
        }
      }
  }
  // One-row path: one subgroup per workgroup where the subgroup is at least 8 wide (no barrier in the
  // reduction), else 8 invocations; row_geometry's features per workgroup. Measured on lavapipe (subgroup 8): 64
  // invocations (8 subgroups, barriers = coroutine switches there) were several times slower per token.
  const RowGeometry rg = row_geometry(device.caps());
  row_geo_ = rg;
  tuned_lanes_ = row_force_lanes_ = device.tuning().row_lanes;  // the tuning's row_lanes (0: the kernel's choice)
  const uint32_t one_sg = o.subgroup && rg.one_sg;
  // x32 / y32 (fp16 devices only): float32 x (the residual stream under the norm prologue or the lm_head's
  // last row) / float32 y and residual. The SwiGLU prologue reads the fp16 [gate | up] row only.
  // One pipeline set per lane-group size (LG, spec constant 8; 0 = one group), declared on first use; the
  // one-group set now (compiled on first record, as every variant).
  const uint32_t n32 = o.fp16 ? 2 : 1, wg = rg.wg, nf = rg.nf;
  row_sets_ = std::make_unique<RowLaneSets<RowPipes>>([&device, o, rg, one_sg, n32, wg, nf](RowPipes& s, uint32_t lg) {
    const uint32_t spec_lg = lg >= wg ? 0u : lg;
    auto make = [&](PipelineDesc d) { return std::make_unique<LazyPipeline>(device, std::move(d), false); };
    for (uint32_t vec = 0; vec < 2; ++vec)
      for (uint32_t pro = 0; pro < 3; ++pro)
        for (uint32_t x32 = 0; x32 < (pro == 2 ? 1 : n32); ++x32)
          for (uint32_t y32 = 0; y32 < n32; ++y32)
            s.row[vec][pro][x32][y32] = make(kernel_desc("linear_row", o)
                                                 .with_bindings(6)
                                                 .with_push(kLinearRowPushBytes)
                                                 .with_spec({wg, nf, vec, pro, x32, y32, 0u, one_sg, spec_lg})
                                                 .with_subgroup_size(o.subgroup ? rg.pin : 0u));
    // The decode step's fused q/k/v projection with RoPE + KV append (prologue none or rmsnorm, y in storage).
    for (uint32_t vec = 0; vec < 2; ++vec)
      for (uint32_t pro = 0; pro < 2; ++pro)
        for (uint32_t x32 = 0; x32 < n32; ++x32)
          s.rope[vec][pro][x32] = make(kernel_desc("linear_row_rope", o)
                                           .with_bindings(9)
                                           .with_push(sizeof(LinearRowRopePush))
                                           .with_spec({wg, nf, vec, pro, x32, 0u, 0u, one_sg, spec_lg})
                                           .with_subgroup_size(o.subgroup ? rg.pin : 0u));
  });
  row_sets_->get(wg);
}

bool LinearKernel::row_fuses_prologues() const { return !device_.tuning().row_prologue_split; }

uint32_t LinearKernel::row_lanes_for(uint32_t in, bool rope) const {
  const uint32_t vw = fp16_ ? 8 : 4;
  const uint32_t steps = !row_scalar_ && in % vw == 0 ? in / vw : in;
  return row_lanes(row_geo_, steps, rope, row_force_lanes_);
}

namespace {
std::string tile_text(const LinearTiles& t) {
  const std::string n = std::to_string(t.variant);
  if (t.vec) return "linear_vec #" + n + " (" + std::to_string(t.nf) + " features per workgroup)";
  const std::string tile = std::to_string(t.bm) + "x" + std::to_string(t.bn);
  if (t.coop)
    return "linear_coopmat #" + n + " (" + tile + " tile, " + std::to_string(t.cm) + "x" + std::to_string(t.cn) + "x" +
           std::to_string(t.ck) + " matrices)";
  if (t.reg) return "linear_reg #" + n + " (" + tile + " tile)";
  return "linear #" + n + " (" + tile + "x" + std::to_string(t.bk) + " shared-memory tile)";
}
}  // namespace

std::string LinearKernel::matmul_choice(uint32_t rows, uint32_t in, uint32_t out, QuantType format) const {
  if (format == QuantType::f16) return tile_text(choose_linear_tiles(device_.caps(), rows, in, out, fp16_));
  const std::string q = std::string(" ") + quant_type_name(format);
  if (quant_choice_.path == QuantRowPath::int8_dot) return "linear_reg_dot #" + std::to_string(kLinearRegVariant) + q;
  return tile_text(choose_quant_linear_tiles(device_.caps(), rows, in, out)) + q;
}

std::string LinearKernel::row_choice(uint32_t in, bool rope) const {
  return std::string(rope ? "linear_row_rope" : "linear_row") + " (" + std::to_string(row_features()) + " features, " +
         std::to_string(row_lanes_for(in, rope)) + " lanes per group)";
}

void LinearKernel::declare_row_widths(const std::vector<uint32_t>& ins) const {
  for (uint32_t in : ins) {
    if (in == 0) continue;
    row_sets_->get(row_lanes_for(in, false));
    row_sets_->get(row_lanes_for(in, true));
  }
}

void check_linear_bias(const char* op, BufferRange bias, uint32_t out, BufferRange y) {
  if (bias.buffer == VK_NULL_HANDLE) return;
  if (bias.size < uint64_t(out) * 4)
    throw Error(Status::invalid_argument,
                std::string(op) + ": bias too small (" + std::to_string(out) + " float32 values needed)");
  if (ranges_overlap(bias, y))
    throw Error(Status::invalid_argument, std::string(op) + ": the output overlaps the bias");
}

uint32_t linear_epilogue_flags(BufferRange residual, BufferRange bias) {
  return (residual.buffer != VK_NULL_HANDLE ? 1u : 0u) | (bias.buffer != VK_NULL_HANDLE ? 2u : 0u);
}

LinearRowPush linear_row_push(const LinearRowParams& p, uint32_t flags, uint32_t q_off) {
  LinearRowPush push;
  push.in = p.in;
  push.out = p.out;
  push.flags = flags;
  push.eps = p.eps;
  push.q_off = q_off;
  return push;
}

LinearRowRopePush linear_row_rope_push(const LinearRowParams& p, const RowRope& r, uint32_t q_off) {
  LinearRowRopePush push;
  push.row = linear_row_push(p, 0u, q_off);
  push.qcols = r.qcols;
  push.kcols = r.kcols;
  push.hd = r.D;
  push.kw = r.kw;
  push.capacity = r.capacity;
  push.pos0 = r.pos0;
  push.lcols = r.lcols;
  return push;
}

bool check_linear_row_args(const char* op, BufferRange x, BufferRange w, uint64_t w_bytes, BufferRange y,
                           const LinearRowParams& p, BufferRange residual, BufferRange norm_w, bool fp16) {
  const std::string n(op);
  const uint64_t es = storage_bytes(fp16), xs = elem_bytes(p.x_elem, fp16), ys = elem_bytes(p.y_elem, fp16);
  if (p.in == 0 || p.out == 0) throw Error(Status::invalid_argument, n + ": zero size");
  if (static_cast<uint32_t>(p.pro) > 2) throw Error(Status::invalid_argument, n + ": unknown prologue");
  if (p.pro == RowPrologue::silu_mul && p.x_elem == Elem::f32)
    throw Error(Status::invalid_argument, n + ": the SwiGLU prologue reads a storage-type row, not float32");
  const uint64_t x_elems = uint64_t(p.in) * (p.pro == RowPrologue::silu_mul ? 2 : 1);
  if (uint64_t(p.out) * p.in > UINT32_MAX)
    throw Error(Status::invalid_argument, n + ": weight too large for 32-bit element indices");
  const bool has_res = residual.buffer != VK_NULL_HANDLE, has_norm = p.pro == RowPrologue::rmsnorm;
  if (has_norm && norm_w.buffer == VK_NULL_HANDLE)
    throw Error(Status::invalid_argument, n + ": rmsnorm needs the norm weight");
  if (x.size < x_elems * xs || w.size < w_bytes || y.size < uint64_t(p.out) * ys ||
      (has_res && residual.size < uint64_t(p.out) * ys) || (has_norm && norm_w.size < uint64_t(p.in) * es))
    throw Error(Status::invalid_argument, n + ": buffer too small for the shape");
  if (ranges_overlap(x, y) || ranges_overlap(w, y) || (has_norm && ranges_overlap(norm_w, y)))
    throw Error(Status::invalid_argument, n + ": the output overlaps an input");
  const bool in_place = has_res && residual.buffer == y.buffer && residual.offset == y.offset;
  if (has_res && !in_place && ranges_overlap(residual, y))
    throw Error(Status::invalid_argument, n + ": the residual overlaps the output without being the same range");
  return in_place;
}

void LinearKernel::record_row(Program& program, BufferRange x, BufferRange w, BufferRange y, const LinearRowParams& p,
                              BufferRange residual, BufferRange norm_w, BufferRange bias) const {
  const bool fp16 = fp16_;
  const bool in_place = check_linear_row_args("linear_row", x, w, uint64_t(p.out) * p.in * storage_bytes(fp16), y, p,
                                              residual, norm_w, fp16);
  check_linear_bias("linear_row", bias, p.out, y);
  const uint32_t pro = static_cast<uint32_t>(p.pro);
  const bool has_res = residual.buffer != VK_NULL_HANDLE, has_norm = p.pro == RowPrologue::rmsnorm;
  const uint32_t vw = fp16 ? 8 : 4;
  const bool vec = !row_scalar_ && p.in % vw == 0 && x.offset % 16 == 0 && w.offset % 16 == 0 &&
                   (!has_norm || norm_w.offset % 16 == 0);

  std::vector<Arg> args{{x, Access::read}, {w, Access::read}, {y, in_place ? Access::read_write : Access::write}};
  args.push_back({has_res ? residual : x, Access::read});  // dummies: x's range, already declared read
  args.push_back({has_norm ? norm_w : x, Access::read});
  args.push_back({bias.buffer != VK_NULL_HANDLE ? bias : x, Access::read});
  const LinearRowPush push = linear_row_push(p, linear_epilogue_flags(residual, bias), 0u);
  const auto& maxc = device_.caps().max_workgroup_count;
  uint32_t lim = maxc[0];
  if (test_limit_[0]) lim = std::min(lim, test_limit_[0]);
  const std::array<uint32_t, 3> groups{std::max(1u, std::min(ceil_div(p.out, row_geo_.nf), lim)), 1, 1};
  static const char* const labels[3] = {"linear_row", "linear_row+rmsnorm", "linear_row+silu_mul"};
  const uint32_t x32 = fp16 && p.x_elem == Elem::f32, y32 = fp16 && p.y_elem == Elem::f32;
  const uint32_t steps = vec ? p.in / vw : p.in;
  const RowPipes& set = row_sets_->get(row_lanes(row_geo_, steps, false, row_force_lanes_));
  program.dispatch(*set.row[vec][pro][x32][y32], std::move(args), &push, sizeof push, groups, labels[pro]);
}

std::vector<Arg> row_rope_args(const char* op, BufferRange x, BufferRange w, uint64_t w_bytes, BufferRange q_out,
                               const LinearRowParams& p, BufferRange norm_w, const RowRope& r, bool fp16, uint32_t nf) {
  const std::string n(op);
  const uint64_t es = storage_bytes(fp16);
  if (p.pro == RowPrologue::silu_mul || p.y_elem == Elem::f32)
    throw Error(Status::invalid_argument, n + ": prologue none or rmsnorm, output in the storage type");
  if (r.D == 0 || r.D % 2 || r.qcols % r.D || r.kcols % r.D || r.kw == 0 || r.kcols % r.kw || r.kw % r.D ||
      r.lcols % 2 || p.out != r.qcols + r.lcols + 2 * r.kcols || nf % 2)
    throw Error(
        Status::invalid_argument,
        n + ": the row is not [q | λ | k | v] of D-wide sub-heads and an even λ count (out = " + std::to_string(p.out) +
            ", qcols " + std::to_string(r.qcols) + ", lcols " + std::to_string(r.lcols) + ", kcols " +
            std::to_string(r.kcols) + ", D " + std::to_string(r.D) + ")");
  LinearRowParams checked = p;
  checked.out = r.qcols + r.lcols;  // y holds the q part and the λ logits
  check_linear_row_args(op, x, w, w_bytes, q_out, checked, {}, norm_w, fp16);
  const uint64_t cache = uint64_t(r.kcols / r.kw) * r.capacity * r.kw * es;
  if (r.k_cache.size < cache || r.v_cache.size < cache || r.table.size < uint64_t(r.capacity) * (r.D / 2) * 8 ||
      r.dyn_pos.size < 4)
    throw Error(Status::invalid_argument, n + ": buffer too small for the shape");
  for (const BufferRange out : {q_out, r.k_cache, r.v_cache})
    for (const BufferRange in : {x, w, norm_w, r.table, r.dyn_pos})
      if (ranges_overlap(out, in)) throw Error(Status::invalid_argument, n + ": an output overlaps an input");
  if (ranges_overlap(q_out, r.k_cache) || ranges_overlap(q_out, r.v_cache) || ranges_overlap(r.k_cache, r.v_cache))
    throw Error(Status::invalid_argument, n + ": the outputs overlap");
  const bool has_norm = p.pro == RowPrologue::rmsnorm;
  return {{x, Access::read},
          {w, Access::read},
          {q_out, Access::write},
          {x, Access::read},
          {has_norm ? norm_w : x, Access::read},
          {r.table, Access::read},
          {r.k_cache, Access::write},
          {r.v_cache, Access::write},
          {r.dyn_pos, Access::read}};
}

void LinearKernel::record_row_rope(Program& program, BufferRange x, BufferRange w, BufferRange q_out,
                                   const LinearRowParams& p, BufferRange norm_w, const RowRope& r) const {
  const bool fp16 = fp16_;
  std::vector<Arg> args = row_rope_args("linear_row_rope", x, w, uint64_t(p.out) * p.in * storage_bytes(fp16), q_out, p,
                                        norm_w, r, fp16, row_geo_.nf);
  const bool has_norm = p.pro == RowPrologue::rmsnorm;
  const uint32_t vw = fp16 ? 8 : 4;
  const bool vec = !row_scalar_ && p.in % vw == 0 && x.offset % 16 == 0 && w.offset % 16 == 0 &&
                   (!has_norm || norm_w.offset % 16 == 0);
  const LinearRowRopePush push = linear_row_rope_push(p, r, 0u);
  uint32_t lim = device_.caps().max_workgroup_count[0];
  if (test_limit_[0]) lim = std::min(lim, test_limit_[0]);
  const std::array<uint32_t, 3> groups{std::max(1u, std::min(ceil_div(p.out, row_geo_.nf), lim)), 1, 1};
  const uint32_t x32 = fp16 && p.x_elem == Elem::f32;
  const uint32_t steps = vec ? p.in / vw : p.in;
  const RowPipes& set = row_sets_->get(row_lanes(row_geo_, steps, true, row_force_lanes_));
  program.dispatch(*set.rope[vec][has_norm ? 1 : 0][x32], std::move(args), &push, sizeof push, groups,
                   has_norm ? "linear_row+rmsnorm+rope_kv" : "linear_row+rope_kv");
}

void LinearKernel::record(Program& program, BufferRange x, BufferRange w, BufferRange y, const LinearParams& p,
                          BufferRange residual, Elem y_elem, BufferRange bias) const {
  const LinearTiles t = choose_linear_tiles(device_.caps(), p.rows, p.in, p.out, fp16_);
  record_variant(program, t.variant, x, w, y, p, residual, y_elem, bias);
}

void LinearKernel::record_variant(Program& program, uint32_t variant, BufferRange x, BufferRange w, BufferRange y,
                                  const LinearParams& p, BufferRange residual, Elem y_elem, BufferRange bias) const {
  dispatch_mm(program, variant, QuantType::f16, x, w, y, p, residual, y_elem, bias);
}

void LinearKernel::record_quant(Program& program, QuantType type, BufferRange x, BufferRange w, BufferRange y,
                                const LinearParams& p, BufferRange residual, Elem y_elem, BufferRange bias) const {
  record_quant_path(program, quant_choice_.path, type, x, w, y, p, residual, y_elem, bias);
}

void LinearKernel::record_quant_path(Program& program, QuantRowPath path, QuantType type, BufferRange x, BufferRange w,
                                     BufferRange y, const LinearParams& p, BufferRange residual, Elem y_elem,
                                     BufferRange bias) const {
  if (type != QuantType::q8_0 && type != QuantType::q4_0)
    throw Error(Status::invalid_argument, "linear: record_quant takes Q8_0 or Q4_0 weights");
  if (path == QuantRowPath::int8_dot) {
    if (!device_.caps().integer_dot_product)
      throw Error(Status::unsupported, "linear: the int8 dot-product matmul needs shaderIntegerDotProduct, which '" +
                                           device_.caps().name + "' lacks");
    dispatch_mm(program, kLinearRegVariant, type, x, w, y, p, residual, y_elem, bias, /*int8=*/true);
  } else {
    dispatch_mm(program, choose_quant_linear_tiles(device_.caps(), p.rows, p.in, p.out).variant, type, x, w, y, p,
                residual, y_elem, bias);
  }
}

void LinearKernel::record_quant_variant(Program& program, uint32_t variant, QuantType type, BufferRange x,
                                        BufferRange w, BufferRange y, const LinearParams& p, BufferRange residual,
                                        Elem y_elem, BufferRange bias) const {
  if (type != QuantType::q8_0 && type != QuantType::q4_0)
    throw Error(Status::invalid_argument, "linear: record_quant takes Q8_0 or Q4_0 weights");
  if (variant > kLinearRegVariant)
    throw Error(Status::invalid_argument, "linear: quantized weights run on tile variants 0 to 3 only");
  dispatch_mm(program, variant, type, x, w, y, p, residual, y_elem, bias);
}

void LinearKernel::dispatch_mm(Program& program, uint32_t variant, QuantType wq, BufferRange x, BufferRange w,
                               BufferRange y, const LinearParams& p, BufferRange residual, Elem y_elem,
                               BufferRange bias, bool int8) const {
  if (variant >= tiles_.size()) throw Error(Status::invalid_argument, "linear: no such tile variant");
  const LinearTiles& t = tiles_[variant];
  const bool quant = wq != QuantType::f16;
  if (p.rows == 0 || p.in == 0 || p.out == 0 || p.x_stride < p.in || p.y_stride < p.out)
    throw Error(Status::invalid_argument, "linear: bad shape (zero size or row stride below the row width)");
  if (t.vec && p.rows > kLinearVecMaxRows)
    throw Error(Status::invalid_argument, "linear: the matrix-vector path takes at most 8 rows");
  const uint64_t x_elems = uint64_t(p.rows - 1) * p.x_stride + p.in;
  const uint64_t w_elems = uint64_t(p.out) * p.in;
  const uint64_t y_elems = uint64_t(p.rows - 1) * p.y_stride + p.out;
  if (std::max({x_elems, w_elems, y_elems}) > UINT32_MAX)
    throw Error(Status::invalid_argument, "linear: tensor too large for 32-bit element indices");
  const uint64_t es = storage_bytes(fp16_), ys = elem_bytes(y_elem, fp16_);
  uint64_t w_bytes = w_elems * es, qoff = 0;
  if (quant) {
    const QuantLayout ql = quant_layout(wq, p.out, p.in);  // throws unless in % 32 == 0
    w_bytes = ql.bytes();
    qoff = ql.quant_offset();
    if (w.offset % 16 != 0)
      throw Error(Status::invalid_argument, "linear: a quantized weight must start 16-byte aligned");
    if (qoff + uint64_t(p.out) * ql.quant_row_bytes() > UINT32_MAX)
      throw Error(Status::invalid_argument, "linear: quantized weight too large for 32-bit byte offsets");
  }
  const bool has_res = residual.buffer != VK_NULL_HANDLE;
  if (x.size < x_elems * es || w.size < w_bytes || y.size < y_elems * ys || (has_res && residual.size < y_elems * ys))
    throw Error(Status::invalid_argument, "linear: buffer too small for the shape");
  if (ranges_overlap(x, y) || ranges_overlap(w, y))
    throw Error(Status::invalid_argument, "linear: the output overlaps an input");
  // In place (y += x·Wᵀ) is fine: element o of r is read only by the invocation that writes y[o].
  const bool in_place = has_res && residual.buffer == y.buffer && residual.offset == y.offset;
  if (has_res && !in_place && ranges_overlap(residual, y))
    throw Error(Status::invalid_argument, "linear: the residual overlaps the output without being the same range");
  check_linear_bias("linear", bias, p.out, y);

  std::vector<Arg> args{{x, Access::read}, {w, Access::read}, {y, in_place ? Access::read_write : Access::write}};
  // Without a residual, binding 3 is a dummy that the shader never reads: x's range, already declared read.
  args.push_back({has_res ? residual : x, Access::read});
  args.push_back({bias.buffer != VK_NULL_HANDLE ? bias : x, Access::read});  // binding 4: the same dummy

  struct {
    LinearParams lp;
    uint32_t flags = 0, qoff = 0;  // qoff: the quantized weights' quants (every linear shader's block ends with it)
  } push;
  push.lp = p;
  push.flags = linear_epilogue_flags(residual, bias);
  push.qoff = static_cast<uint32_t>(qoff);
  static_assert(sizeof push == sizeof(LinearParams) + 2 * sizeof(uint32_t), "push block layout");

  const auto& maxc = device_.caps().max_workgroup_count;
  auto clamp = [&](uint32_t n, int d) {
    uint32_t lim = maxc[d];
    if (test_limit_[d]) lim = std::min(lim, test_limit_[d]);
    return std::max(1u, std::min(n, lim));
  };
  std::array<uint32_t, 3> groups{1, 1, 1};
  if (t.vec) {
    groups[0] = clamp(ceil_div(p.out, t.nf), 0);
  } else {
    groups[0] = clamp(ceil_div(p.out, t.bn), 0);
    groups[1] = clamp(ceil_div(p.rows, t.bm), 1);
  }
  const uint32_t y32 = fp16_ && y_elem == Elem::f32;
  // 16-byte loads along k (8 halves / 4 floats): every row start of x and W on a vector boundary.
  const uint32_t kv = fp16_ ? 8u : 4u;
  const bool vec4 = vec_pipelines_[y32][variant] && !row_scalar_ && p.in % kv == 0 && p.x_stride % kv == 0 &&
                    x.offset % 16 == 0 && w.offset % 16 == 0;
  if (!quant && !pipelines_[y32][variant])
    throw Error(Status::invalid_argument,
                "linear: tile variant " + std::to_string(variant) +
                    " has no pipelines here (the device's tile choice never picks it; a kernel built "
                    "with all_variants has them)");
  const uint32_t qi = wq == QuantType::q4_0;
  const LazyPipeline* qpipe = !quant                         ? nullptr
                              : int8                         ? quant_dot_pipelines_[qi][vec4][y32].get()
                              : t.reg                        ? quant_pipelines_[qi][vec4][y32].get()
                              : t.vec                        ? quant_vec_pipelines_[qi][vec4][y32].get()
                              : variant == 1 || variant == 2 ? quant_mm_pipelines_[qi][variant - 1][vec4][y32].get()
                                                             : nullptr;
  if (quant && !qpipe)
    throw Error(Status::invalid_argument, std::string("linear: this kernel was built without ") + quant_type_name(wq) +
                                              (int8 ? " int8 dot-product pipelines (neither chosen nor all_variants)"
                                                    : " pipelines for tile variant " + std::to_string(variant)));
  const LazyPipeline& pipe = quant ? *qpipe : vec4 ? *vec_pipelines_[y32][variant] : *pipelines_[y32][variant];
  if (y32 && t.reg && !int8) push.flags |= 4u;  // linear_reg.comp's output type (Y32 = 2: see reg_desc)
  // linear_reg.comp may store y (and read r) as 16-byte vectors: both ranges start 16-byte aligned and every row
  // start is a multiple of 8 elements (4 floats or 8 halves: one vector). The shader checks its tile's edge.
  if (t.reg && !int8 && y.offset % 16 == 0 && (!has_res || residual.offset % 16 == 0) && p.y_stride % 8 == 0)
    push.flags |= 8u;
  program.dispatch(pipe, std::move(args), &push, sizeof push, groups,
                   quant   ? (int8    ? (wq == QuantType::q4_0 ? "linear_reg q4_0 int8" : "linear_reg q8_0 int8")
                              : t.vec ? (wq == QuantType::q4_0 ? "linear_vec q4_0" : "linear_vec q8_0")
                              : wq == QuantType::q4_0 ? "linear_reg q4_0"
                                                      : "linear_reg q8_0")
                   : t.vec ? "linear_vec"
                   : t.reg ? "linear_reg"
                           : "linear");
}

}  // namespace diffvk
