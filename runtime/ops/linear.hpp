// Linear op y = x·Wᵀ (+ b) (+ r): tile choice (pure) and the matrix-matrix, matrix-vector and one-row
// paths (shaders/linear.comp, linear_vec.comp, linear_row.comp).
#pragma once
#include <array>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "io/quant.hpp"
#include "ops/kernel_options.hpp"

namespace diffvk {

// y = x·Wᵀ (+ b) (+ r). x: rows x in (row stride x_stride), W: out x in row-major (torch Linear layout, dense),
// y and the optional residual r: rows x out (row stride y_stride), the optional bias b: out float32 values
// (every record call's trailing `bias`; Phi-4-mini-flash's Wqkv, out_proj and dt_proj). fp32 accumulation, one
// rounding to the storage type at the end (after adding b, then r: v = (x·Wᵀ + b) + r).
struct LinearParams {
  uint32_t rows = 0, in = 0, out = 0, x_stride = 0, y_stride = 0;
};

// Rows handled by the matrix-vector (decode) path; larger row counts use the tiled matrix-matrix path.
constexpr uint32_t kLinearVecMaxRows = 8;
// The register-tiled candidate's index in linear_tile_candidates().
constexpr uint32_t kLinearRegVariant = 3;
// The cooperative-matrix candidate's index (present only where DeviceCaps::coopmat_m != 0).
constexpr uint32_t kLinearCoopVariant = 4;
constexpr uint32_t kVendorArm = 0x13B5;  // VkPhysicalDeviceProperties::vendorID of Arm (Mali)

// Workgroup geometry of one linear pipeline. Matrix-matrix (vec == false): a workgroup computes a
// bm x bn tile of y (rows x out features), stepping `in` by bk through two shared buffers (double
// buffering); each invocation owns an rm x rn register block: rm/4 runs of 4 consecutive rows (4·bm/rm
// apart) and rn/4 runs of 4 consecutive columns (fewer when rm or rn < 4; shaders/linear.comp).
// Matrix-vector (vec == true): a workgroup computes nf consecutive output features for all rows
// (<= kLinearVecMaxRows), its wg invocations striding over `in`, then one workgroup reduction per
// (row, feature).
struct LinearTiles {
  bool vec = false;
  bool reg = false;      // register-tiled path without shared memory (shaders/linear_reg.comp)
  uint32_t variant = 0;  // index into linear_tile_candidates(); one pipeline per candidate
  uint32_t wg = 0;       // invocations per workgroup (1-D local size)
  uint32_t bm = 0, bn = 0, bk = 0, rm = 0, rn = 0;  // matrix-matrix tile (0 for vec)
  uint32_t ku = 0;  // matrix-matrix: k steps per unrolled body (bk, or 8 under quirk long_unrolled_compile)
  uint32_t nf = 0;  // matrix-vector: output features per workgroup (0 for matrix-matrix)
  // reg: one subgroup (wg lanes) per bm x bn tile, bn = wg·rn, each lane rn columns of all bm rows
  // (bk and rm unused).
  uint32_t shared_bytes = 0;  // shared memory the shader declares for these sizes
  // coop: the cooperative-matrix path (shaders/coopmat/linear_coopmat.comp, fp16 only): nsg subgroups of
  // `sg` lanes (sgm along the rows), each with 2 x 2 matrices of cm x cn; bm = sgm·2·cm, bn = (nsg/sgm)·2·cn,
  // bk a multiple of ck. pin: the required subgroup size (0: the device has one size).
  bool coop = false;
  uint32_t cm = 0, cn = 0, ck = 0, nsg = 0, sgm = 0, sg = 0, pin = 0;
};
// Every configuration LinearKernel builds a pipeline for, derived from the device limits only:
// [0] matrix-vector, [1] large matrix-matrix tile, [2] small matrix-matrix tile, [3] register-tiled
// (one subgroup per workgroup, no shared memory), and [4] cooperative matrices where the device has a usable
// shape (DeviceCaps::coopmat_m) and a geometry fits its limits. Each one respects
// maxComputeSharedMemorySize, maxComputeWorkGroupInvocations and maxComputeWorkGroupSize.x, and its
// workgroup holds at least one full subgroup where the limits allow.
std::vector<LinearTiles> linear_tile_candidates(const DeviceCaps& caps);
// The candidate used for a shape (pure): rows <= kLinearVecMaxRows -> matrix-vector; otherwise on CPU
// drivers the register-tiled path (their shared memory is no faster than any memory, and every
// non-uniform load is a per-lane loop: the fewest loads per FMA win); on GPUs the large tile when it
// still yields enough workgroups to fill the device, else the small tile. Past 16 rows, cooperative
// matrices come first wherever candidate [4] exists, the storage is fp16 and no quirk (coopmat_emulated)
// speaks against them.
LinearTiles choose_linear_tiles(const DeviceCaps& caps, uint32_t rows, uint32_t in, uint32_t out, bool fp16 = true);
// Whether choose_linear_tiles takes the cooperative-matrix candidate past 16 rows on this device, and why
// not where it does not (pure; `bench` and the log print it).
bool linear_uses_coopmat(const DeviceCaps& caps, bool fp16, std::string* why_not = nullptr);
// The tile LinearKernel::record_quant takes (pure): choose_linear_tiles' choice without cooperative
// matrices (the one-row path of a model is QuantRowKernel): on GPUs the matrix-vector shader for 2-8 rows (each
// weight dequantized once for every row: a speculative verify pass), the register tile for 9-16, past 16 rows a
// shared-memory tile that dequantizes W on the way into shared memory; on CPU drivers the register tile.
LinearTiles choose_quant_linear_tiles(const DeviceCaps& caps, uint32_t rows, uint32_t in, uint32_t out);
// The candidates choose_linear_tiles can pick on this device, for any shape (pure): [3] alone on CPU
// drivers, [0] and [3] on Mali, [0]-[3] elsewhere; plus [4] where linear_uses_coopmat.
std::vector<uint32_t> linear_reachable_variants(const DeviceCaps& caps, bool fp16 = true);

// The two ways the quantized kernels multiply Q8_0 / Q4_0 weights: dequantize the weights in
// registers (or on the way into shared memory) and accumulate in fp32, or quantize the activations per block of
// 32 to int8 (Q8_0's rule, shaders/q8_0.glsl) and use 4x8-bit integer dot products (linear_row_dot.comp for one
// row, linear_reg_dot.comp for more; their results differ from the dequantizing path's by the activations'
// rounding: the tests use a reference on the same int8 activations).
enum class QuantRowPath { dequant, int8_dot };
const char* quant_row_path_name(QuantRowPath p);  // "dequant" / "int8_dot"
struct QuantRowChoice {
  QuantRowPath path = QuantRowPath::dequant;
  std::string reason;  // one line, for the log and the benchmark
};
// The matmul's path (LinearKernel::record_quant, more than one row), pure: int8_dot where the device has
// shaderIntegerDotProduct and accelerates 4x8-bit packed signed dot products (DeviceCaps::int8_dot_accelerated),
// else dequant (choose_quant_linear_tiles' tile). `force`: that path; int8_dot needs the feature
// (Error(unsupported) naming the device otherwise).
QuantRowChoice choose_quant_matmul_path(const DeviceCaps& caps, const QuantRowPath* force = nullptr);

// One-row (decode) linear with an optional fused prologue (shaders/linear_row.comp):
//   none:     y = x·Wᵀ (+ r)                              x: in values
//   rmsnorm:  y = (x / sqrt(mean(x²) + eps) ⊙ g)·Wᵀ (+ r)   x, g: in values (the block RMSNorm)
//   silu_mul: y = (silu(x[0, in)) ⊙ x[in, 2·in))·Wᵀ (+ r)   x: 2·in values, the fused [gate | up] row
// The prologue result is not rounded to the storage type (one rounding, at the store).
enum class RowPrologue : uint32_t { none = 0, rmsnorm = 1, silu_mul = 2 };
struct LinearRowParams {
  uint32_t in = 0, out = 0;
  RowPrologue pro = RowPrologue::none;
  float eps = 1e-5f;
  Elem x_elem = Elem::storage;  // f32: x is float32 (none / rmsnorm only: the residual stream)
  Elem y_elem = Elem::storage;  // f32: y and the residual are float32 (the residual stream, logits)
};

// The push constants of linear_row.comp (dense and quantized variants) and the argument checks both
// one-row kernels share: sizes (w_bytes: the weight's bytes in its format), overlaps, the prologue's
// inputs. Throws invalid_argument naming `op`; returns whether the residual is y itself (in place).
struct LinearRowPush {
  uint32_t in = 0, out = 0;
  uint32_t flags = 0;  // linear_epilogue_flags: bit 0 the residual, bit 1 the bias
  float eps = 0.0f;
  uint32_t q_off = 0;  // quantized weights: uvec4 index of the quants in the weight binding
};
static_assert(sizeof(LinearRowPush) == 20, "linear_row.comp's push block");
constexpr uint32_t kLinearRowPushBytes = sizeof(LinearRowPush);
// The one-row kernels' push constants for p (dense: q_off 0; quantized: the quants' uvec4 index).
LinearRowPush linear_row_push(const LinearRowParams& p, uint32_t flags, uint32_t q_off);
// The fused q/k/v projection of a one-row decode with RoPE and the KV-cache append as its epilogue
// (linear_row_rope.comp / linear_row_dot_rope.comp: LinearKernel::record_row_rope, QuantRowKernel::record_rope;
// the decode step's qkv + rope_kv in one dispatch): W is [Wq; Wk; Wv] (out = qcols + 2·kcols rows, DIFF V1:
// no λ rows); q_out gets the qcols roped q values (storage type), the caches ([g][capacity][kw], storage
// type) the roped k and the v values at position pos0 + *dyn_pos. Prologue none or rmsnorm; no residual;
// the same rounding as linear_row + rope_kv (the sums are rounded to the storage type before the rotation).
// The row is [q: qcols | λ: lcols | k: kcols | v: kcols]; y (q_out) receives q roped and the λ columns as they
// are (DIFF V2's H logits; lcols even, so that every k pair lies in one workgroup); 0 for DIFF V1.
struct RowRope {
  BufferRange table, k_cache, v_cache, dyn_pos;  // table: float32 (cos, sin) [capacity][D/2]
  uint32_t qcols = 0, kcols = 0, D = 0, kw = 0, capacity = 0, pos0 = 0;
  uint32_t lcols = 0;
};
struct LinearRowRopePush {  // LinearRowPush, then the epilogue's shape
  LinearRowPush row;
  uint32_t qcols = 0, kcols = 0, hd = 0, kw = 0, capacity = 0, pos0 = 0, lcols = 0;
};
static_assert(sizeof(LinearRowRopePush) == 48, "linear_row_rope.comp's push block");
// The fused kernels' push constants for p and r (no residual or bias: flags 0; q_off as in linear_row_push).
LinearRowRopePush linear_row_rope_push(const LinearRowParams& p, const RowRope& r, uint32_t q_off);
// The checks both fused kernels share (op names the kernel in errors; w_bytes: the weight's bytes in its
// format; nf: features per workgroup) and their nine bindings.
std::vector<Arg> row_rope_args(const char* op, BufferRange x, BufferRange w, uint64_t w_bytes, BufferRange q_out,
                               const LinearRowParams& p, BufferRange norm_w, const RowRope& r, bool fp16, uint32_t nf);
bool check_linear_row_args(const char* op, BufferRange x, BufferRange w, uint64_t w_bytes, BufferRange y,
                           const LinearRowParams& p, BufferRange residual, BufferRange norm_w, bool fp16);
// The optional bias of every linear path (bias.buffer == VK_NULL_HANDLE: none): out float32 values, whatever the
// storage type (the checkpoint's BF16 biases convert exactly; GGUF keeps 1-D tensors F32), not overlapping y.
// Without one the shaders bind a dummy and never read it: the epilogue's flag is a push constant, so a biased
// and an unbiased call share one pipeline. Throws invalid_argument naming `op`.
void check_linear_bias(const char* op, BufferRange bias, uint32_t out, BufferRange y);
// The epilogue flags of the linear push constants: bit 0 residual, bit 1 bias.
uint32_t linear_epilogue_flags(BufferRange residual, BufferRange bias);

// Geometry of the one-row kernels (LinearKernel::record_row, QuantRowKernel): one subgroup per workgroup
// where the subgroup is at least 8 wide (no barrier in the reduction), else 8 invocations; nf features per
// workgroup (8 on GPUs, kCpuRowFeatures on CPU drivers; even, as the RoPE epilogue's pairs need). pin: the required
// subgroup size (VK_EXT_subgroup_size_control, where the device's sizes vary and wg is one of them), else 0. one_sg:
// one subgroup per workgroup is guaranteed (pinned, or the device has one subgroup size and it is wg), so the subgroup
// variant declares no shared memory (ONE_SG). lane_groups: row_lanes may split a workgroup into lane groups (GPUs; CPU
// drivers keep one group, where a lane is a SIMD slot of one batch and idle slots cost little).
constexpr uint32_t kCpuRowFeatures = 32;
struct RowGeometry {
  uint32_t wg = 0, nf = 0, pin = 0;
  bool one_sg = false;
  bool lane_groups = false;
  // The lanes per group row_lanes takes unless forced (0: its rule). CPU drivers: 1, each lane computes its features
  // over the whole row and no sum crosses lanes (a cross-lane reduction per feature cost as much as the row's loads
  // at in = 768 with 8 lanes); under quirk row_lane_pairs (LLVM <= 15 lavapipe) 2, which ran faster there.
  uint32_t lanes = 0;
};
RowGeometry row_geometry(const DeviceCaps& caps);
// Lanes per lane group (LG, spec constant 8 of linear_row.glsl) of a one-row dispatch whose
// rows take `steps` load steps (dense: in / 8 in fp16, in / 4 in fp32 with vector loads, else in; Q8_0: in / 16;
// Q4_0 and the int8 path: in / 32). Pure. g.lanes where set (CPU drivers: 1); one group (g.wg) where steps >= g.wg
// or !g.lane_groups; otherwise
// the smallest power of two >= steps, so that every lane has a load. Never fewer lanes than leave each group
// one feature (two with `pairs`: the RoPE epilogue's pairs stay in one group), i.e. LG >= wg·(pairs ? 2 : 1) / nf.
// force (the tuning's row_lanes, Device::tuning(); test hooks): that size wherever lane groups are not allowed
// too, rounded down to a power of two and clamped to [that minimum, g.wg].
uint32_t row_lanes(const RowGeometry& g, uint32_t steps, bool pairs, uint32_t force = 0);
// Pipeline sets of a one-row kernel, one per LG, declared (as LazyPipelines) on first use; thread-safe.
template <class Set>
class RowLaneSets {
 public:
  explicit RowLaneSets(std::function<void(Set&, uint32_t lg)> make) : make_(std::move(make)) {}
  const Set& get(uint32_t lg) const {
    std::lock_guard<std::mutex> lock(mutex_);
    std::unique_ptr<Set>& s = sets_[lg];
    if (!s) {
      s = std::make_unique<Set>();
      make_(*s, lg);
    }
    return *s;
  }

 private:
  std::function<void(Set&, uint32_t)> make_;
  mutable std::mutex mutex_;
  mutable std::map<uint32_t, std::unique_ptr<Set>> sets_;
};

class LinearKernel {
 public:
  // quant: the block formats (q8_0, q4_0) record_quant will be asked for; their pipelines are built here.
  // all_variants: pipelines declared for every tile candidate, each compiled on its first record like every other
  // (record_variant of any of them: tests, the benchmark's
  // forced variants); otherwise only for those the device's tile choice can pick (linear_reachable_variants:
  // a CPU driver compiles none of the shared-memory tiles it never runs).
  // quant_path: forces record_quant's path (choose_quant_matmul_path; null = the device's choice, logged at info
  // level). The int8 pipelines (linear_reg_dot.comp) exist where that path is int8_dot, or with all_variants on a
  // device with shaderIntegerDotProduct (record_quant_path); they compile on first use.
  LinearKernel(Device& device, KernelOptions options, const std::vector<QuantType>& quant = {},
               bool all_variants = false, const QuantRowPath* quant_path = nullptr);
  // residual.buffer == VK_NULL_HANDLE: no residual. The residual may be exactly y's range (in-place
  // y += x·Wᵀ: each element is read and written by the same invocation); any other overlap of an
  // output with an input is rejected (invalid_argument).
  // y_elem: the element type of y and the residual (Elem::f32: the residual stream, the logits); x and W
  // are always the storage type.
  // bias: out float32 values added before the residual (check_linear_bias; none by default).
  void record(Program& program, BufferRange x, BufferRange w, BufferRange y, const LinearParams& params,
              BufferRange residual = {}, Elem y_elem = Elem::storage, BufferRange bias = {}) const;
  // Same, with a given candidate index (tests use it to run every path on every shape; the
  // matrix-vector candidate needs rows <= kLinearVecMaxRows). A candidate without pipelines (not reachable
  // and not all_variants) is an invalid_argument error.
  void record_variant(Program& program, uint32_t variant, BufferRange x, BufferRange w, BufferRange y,
                      const LinearParams& params, BufferRange residual = {}, Elem y_elem = Elem::storage,
                      BufferRange bias = {}) const;
  // Same as record(), over a Q8_0 / Q4_0 weight in the struct-of-arrays device layout of
  // ops/linear_quant.hpp (w: the whole layout, 16-byte aligned; `in` a multiple of 32), never through a
  // dequantized copy of the weight: the tile of choose_quant_linear_tiles, i.e. the matrix-vector or the
  // register-tiled shader (dequantizing in registers) or a shared-memory tile of linear.comp (dequantizing into its
  // fp32 tiles).
  void record_quant(Program& program, QuantType type, BufferRange x, BufferRange w, BufferRange y,
                    const LinearParams& params, BufferRange residual = {}, Elem y_elem = Elem::storage,
                    BufferRange bias = {}) const;
  // Same, on a given path: dequant = choose_quant_linear_tiles' tile; int8_dot = linear_reg_dot.comp (the
  // register tile, activations quantized per block of 32 on the way in, integer dot products). A path without
  // pipelines here is invalid_argument; int8_dot on a device without shaderIntegerDotProduct is unsupported.
  void record_quant_path(Program& program, QuantRowPath path, QuantType type, BufferRange x, BufferRange w,
                         BufferRange y, const LinearParams& params, BufferRange residual = {},
                         Elem y_elem = Elem::storage, BufferRange bias = {}) const;
  // record_quant's path on this device (or the forced one) and why.
  const QuantRowChoice& quant_choice() const { return quant_choice_; }
  // Same, on a given tile variant (0: matrix-vector, at most kLinearVecMaxRows rows; 1, 2: shared-memory; 3:
  // register-tiled); one without pipelines here is invalid_argument (tests run every quantized path on every device
  // with an all_variants kernel).
  void record_quant_variant(Program& program, uint32_t variant, QuantType type, BufferRange x, BufferRange w,
                            BufferRange y, const LinearParams& params, BufferRange residual = {},
                            Elem y_elem = Elem::storage, BufferRange bias = {}) const;
  // One row: see LinearRowParams. Reads x, g and W as 16-byte vectors when `in` is a multiple of the
  // vector width (8 in fp16, 4 in fp32) and every binding offset is 16-byte aligned, else elementwise.
  // residual and bias as in record(); norm_w is required for rmsnorm and ignored otherwise.
  void record_row(Program& program, BufferRange x, BufferRange w, BufferRange y, const LinearRowParams& params,
                  BufferRange residual = {}, BufferRange norm_w = {}, BufferRange bias = {}) const;
  // One row of the fused q/k/v projection with RoPE and the KV-cache append as its epilogue (RowRope).
  void record_row_rope(Program& program, BufferRange x, BufferRange w, BufferRange q_out, const LinearRowParams& params,
                       BufferRange norm_w, const RowRope& rope) const;
  // Workgroup size and output features per workgroup of record_row.
  uint32_t row_workgroup_size() const { return row_geo_.wg; }
  uint32_t row_features() const { return row_geo_.nf; }
  // Lanes per lane group record_row / record_row_rope take for a row of `in` values (row_lanes).
  uint32_t row_lanes_for(uint32_t in, bool rope = false) const;
  // The kernel record() (record_quant() for a quantized `format`) takes for this shape, as `diffvk plan` shows
  // it: shader, candidate and tile, from the same choice functions the record calls use (choose_linear_tiles).
  std::string matmul_choice(uint32_t rows, uint32_t in, uint32_t out, QuantType format = QuantType::f16) const;
  // The same for record_row / record_row_rope over dense weights: the one-row shader and its lanes per group.
  std::string row_choice(uint32_t in, bool rope = false) const;
  // Declares the pipelines of the lane-group sizes rows of these widths take (the model's E and I), so that
  // a kernel's declared pipelines (shader-stats, build_declared_pipelines) include them. Others are declared
  // on first record.
  void declare_row_widths(const std::vector<uint32_t>& ins) const;
  // Test hook: never use the vector loads (record_row and the matrix-matrix path).
  void force_row_scalar_for_testing(bool on) { row_scalar_ = on; }
  // Test hook: lanes per lane group of the one-row paths (as the tuning's row_lanes; 0 = back to the tuning's).
  void force_row_lanes_for_testing(uint32_t lg) { row_force_lanes_ = lg == 0 ? tuned_lanes_ : lg; }
  const std::vector<LinearTiles>& candidates() const { return tiles_; }
  // Whether the one-row linears take their prologues (RMSNorm, SwiGLU) fused, else as dispatches of their own first:
  // the device tuning's row_prologue (Tuning::row_prologue_split).
  bool row_fuses_prologues() const;
  // Test hook: cap the dispatched workgroup counts below the device limit (0 = device limit) so that
  // the shaders' grid-stride loops are exercised.
  void limit_workgroups_for_testing(uint32_t x, uint32_t y) { test_limit_ = {x, y}; }

 private:
  Device& device_;
  std::vector<LinearTiles> tiles_;
  bool fp16_ = false;
  std::vector<std::unique_ptr<LazyPipeline>> pipelines_[2];  // [y float32 (fp16 only)]: one per candidate
  std::vector<std::unique_ptr<LazyPipeline>>
      vec_pipelines_[2];       // matrix-matrix candidates with 4-wide loads (null: n/a)
  bool reg_subgroup_ = false;  // the register-tiled pipelines share x rows with subgroupShuffle
  std::unique_ptr<LazyPipeline> quant_pipelines_[2][2][2];  // register-tiled over [q8_0, q4_0][vector loads][y f32]
  std::unique_ptr<LazyPipeline>
      quant_mm_pipelines_[2][2][2][2];  // linear.comp with WQ: [q8_0, q4_0][variant 1, 2][vector x loads][y f32]
  std::unique_ptr<LazyPipeline> quant_vec_pipelines_[2][2][2];  // linear_vec.comp with WQ: [q8_0, q4_0][vector][y f32]
  QuantRowChoice quant_choice_;
  std::unique_ptr<LazyPipeline> quant_dot_pipelines_[2][2]
                                                    [2];  // linear_reg_dot.comp: [q8_0, q4_0][vector x loads][y f32]
  void dispatch_mm(Program& program, uint32_t variant, QuantType wq, BufferRange x, BufferRange w, BufferRange y,
                   const LinearParams& p, BufferRange residual, Elem y_elem, BufferRange bias, bool int8 = false) const;
  std::array<uint32_t, 2> test_limit_{0, 0};
  RowGeometry row_geo_;
  uint32_t tuned_lanes_ = 0, row_force_lanes_ = 0;
  struct RowPipes {
    std::unique_ptr<LazyPipeline> row[2][3][2][2];  // [vector loads][prologue][x f32][y f32] (f32 ones: fp16 only)
    std::unique_ptr<LazyPipeline> rope[2][2][2];    // linear_row_rope: [vector loads][prologue none, rmsnorm][x f32]
  };
  std::unique_ptr<RowLaneSets<RowPipes>> row_sets_;  // per LG
  bool row_scalar_ = false;
};

}  // namespace diffvk
