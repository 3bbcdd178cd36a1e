// Host side of each compute shader: pipeline creation (at load time) and recording into a Program.
// Element type of every tensor argument is the storage type of the precision in use
// (float16 when Device::fp16(), else float32) unless stated otherwise.
#pragma once
#include <memory>

#include "vk/program.hpp"

namespace diffvk {

// Options that select shader variants; defaults follow the device.
struct KernelOptions {
  bool fp16 = false;
  bool subgroup = false;
  static KernelOptions for_device(const Device& d) { return {d.fp16(), d.subgroup_arithmetic()}; }
};

inline size_t storage_bytes(bool fp16) { return fp16 ? 2 : 4; }

// Element type of a tensor argument that may differ from the storage type. The model keeps its residual
// stream and its logits in float32 in every precision (issue 13: real activations exceed fp16's 65504);
// fp16 storage is for the weights, the KV cache and the activations between kernels.
enum class Elem : uint32_t { storage = 0, f32 = 1 };
inline size_t elem_bytes(Elem e, bool fp16) { return e == Elem::f32 ? 4 : storage_bytes(fp16); }

// Headwise RMSNorm (docs/maths.md, headwise RMSNorm): x, y: rows x row_stride, head h at columns [h*width, (h+1)*width); w: width.
struct HeadRmsNormParams {
  uint32_t rows = 0, heads = 0, width = 0, row_stride = 0;
  float gain = 1.0f;  // 1 - lambda_init
  float eps = 1e-5f;
};
class HeadRmsNormKernel {
 public:
  HeadRmsNormKernel(Device& device, KernelOptions options);
  // x_elem: x's element type (Elem::f32 for the model's residual stream); w and y are storage type.
  void record(Program& program, BufferRange x, BufferRange w, BufferRange y, const HeadRmsNormParams& params,
              Elem x_elem = Elem::storage) const;
  uint32_t workgroup_size() const { return wg_; }

 private:
  uint32_t wg_;
  std::unique_ptr<Pipeline> pipeline_[2];  // [x float32] (fp16 devices only; [1] is [0] otherwise)
};

// Largest power of two <= min(cap, device invocation limit, device x-size limit), at least 1.
uint32_t pick_pow2_workgroup(const DeviceCaps& caps, uint32_t cap);

// ==== linear / rope_kv: the non-attention kernels of one layer (kernel_linear.cpp, kernel_rope_kv.cpp) ====

// y = x·Wᵀ (+ r). x: rows x in (row stride x_stride), W: out x in row-major (torch Linear layout, dense),
// y and the optional residual r: rows x out (row stride y_stride). fp32 accumulation, one rounding to the
// storage type at the end (after adding r).
struct LinearParams {
  uint32_t rows = 0, in = 0, out = 0, x_stride = 0, y_stride = 0;
};

// Rows handled by the matrix-vector (decode) path; larger row counts use the tiled matrix-matrix path.
constexpr uint32_t kLinearVecMaxRows = 8;

// Workgroup geometry of one linear pipeline. Matrix-matrix (vec == false): a workgroup computes a
// bm x bn tile of y (rows x out features), stepping `in` by bk through shared memory; each invocation
// owns an rm x rn register block (rows ty + i·bm/rm, columns tx + j·bn/rn). Matrix-vector (vec == true):
// a workgroup computes nf consecutive output features for all rows (<= kLinearVecMaxRows), its wg
// invocations striding over `in`, then one workgroup reduction per (row, feature).
struct LinearTiles {
  bool vec = false;
  uint32_t variant = 0;   // index into linear_tile_candidates(); one pipeline per candidate
  uint32_t wg = 0;        // invocations per workgroup (1-D local size)
  uint32_t bm = 0, bn = 0, bk = 0, rm = 0, rn = 0;  // matrix-matrix tile (0 for vec)
  uint32_t nf = 0;        // matrix-vector: output features per workgroup (0 for matrix-matrix)
  uint32_t shared_bytes = 0;  // shared memory the shader declares for these sizes
};
// Every configuration LinearKernel builds a pipeline for, derived from the device limits only:
// [0] matrix-vector, [1] large matrix-matrix tile, [2] small matrix-matrix tile. Each one respects
// maxComputeSharedMemorySize, maxComputeWorkGroupInvocations and maxComputeWorkGroupSize.x, and its
// workgroup holds at least one full subgroup where the limits allow.
std::vector<LinearTiles> linear_tile_candidates(const DeviceCaps& caps);
// The candidate used for a shape (pure): rows <= kLinearVecMaxRows -> matrix-vector; otherwise the
// large tile when it still yields enough workgroups to fill the device, else the small tile.
LinearTiles choose_linear_tiles(const DeviceCaps& caps, uint32_t rows, uint32_t in, uint32_t out);

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

class LinearKernel {
 public:
  LinearKernel(Device& device, KernelOptions options);
  // residual.buffer == VK_NULL_HANDLE: no residual. The residual may be exactly y's range (in-place
  // y += x·Wᵀ: each element is read and written by the same invocation); any other overlap of an
  // output with an input is rejected (invalid_argument).
  // y_elem: the element type of y and the residual (Elem::f32: the residual stream, the logits); x and W
  // are always the storage type.
  void record(Program& program, BufferRange x, BufferRange w, BufferRange y, const LinearParams& params,
              BufferRange residual = {}, Elem y_elem = Elem::storage) const;
  // Same, with a given candidate index (tests use it to run every path on every shape; the
  // matrix-vector candidate needs rows <= kLinearVecMaxRows).
  void record_variant(Program& program, uint32_t variant, BufferRange x, BufferRange w, BufferRange y,
                      const LinearParams& params, BufferRange residual = {}, Elem y_elem = Elem::storage) const;
  // One row: see LinearRowParams. Reads x, g and W as 16-byte vectors when `in` is a multiple of the
  // vector width (8 in fp16, 4 in fp32) and every binding offset is 16-byte aligned, else elementwise.
  // residual as in record(); norm_w is required for rmsnorm and ignored otherwise.
  void record_row(Program& program, BufferRange x, BufferRange w, BufferRange y, const LinearRowParams& params,
                  BufferRange residual = {}, BufferRange norm_w = {}) const;
  // Workgroup size and output features per workgroup of record_row.
  uint32_t row_workgroup_size() const { return row_wg_; }
  uint32_t row_features() const { return row_nf_; }
  // Test hook: never use the vector loads (record_row and the matrix-matrix path).
  void force_row_scalar_for_testing(bool on) { row_scalar_ = on; }
  const std::vector<LinearTiles>& candidates() const { return tiles_; }
  // Test hook: cap the dispatched workgroup counts below the device limit (0 = device limit) so that
  // the shaders' grid-stride loops are exercised.
  void limit_workgroups_for_testing(uint32_t x, uint32_t y) { test_limit_ = {x, y}; }

 private:
  Device& device_;
  std::vector<LinearTiles> tiles_;
  bool fp16_ = false;
  std::vector<std::unique_ptr<Pipeline>> pipelines_[2];  // [y float32 (fp16 only)]: one per candidate
  std::vector<std::unique_ptr<Pipeline>> vec_pipelines_[2];  // matrix-matrix candidates with 4-wide loads (null: n/a)
  std::array<uint32_t, 2> test_limit_{0, 0};
  uint32_t row_wg_ = 0, row_nf_ = 0;
  std::unique_ptr<Pipeline> row_pipelines_[2][3][2][2];  // [vector loads][prologue][x f32][y f32] (f32 ones: fp16 only)
  bool row_scalar_ = false;
};

// RoPE (docs/maths.md, interleaved GPT-J) of the fused QKV projection, and the KV-cache append.
//   qkv:     rows x (2H·D | 2Hkv·D | Hkv·2D), dense, = x·[Wq; Wk; Wv]ᵀ; row r is at position pos0 + r.
//   table:   float32 (always, also in the fp16 variant) [max_positions][D/2][2] = {cos, sin}(p·θ^(−2i/D)),
//            from rope_table(); must cover positions < pos0 + rows.
//   q_out:   rows x 2H·D, every D-wide sub-head roped.
//   k_cache: [Hkv][capacity][2D]; row (g, p) = [roped K1_g | roped K2_g] (k columns [2gD, 2gD + 2D)).
//   v_cache: [Hkv][capacity][2D]; row (g, p) = v columns [2gD, 2gD + 2D), copied unrotated.
// Only cache rows pos0 .. pos0 + rows − 1 are written; the rest is left untouched (the whole cache
// ranges are declared written to Program, a superset).
struct RopeKvParams {
  uint32_t rows = 0, H = 0, Hkv = 0, D = 0, pos0 = 0, capacity = 0;
};
class RopeKvKernel {
 public:
  RopeKvKernel(Device& device, KernelOptions options);
  // Throws invalid_argument (zero sizes, odd D, H % Hkv != 0, buffers too small or overlapping outputs)
  // and context_overflow (pos0 + rows > capacity).
  void record(Program& program, BufferRange qkv, BufferRange table, BufferRange q_out, BufferRange k_cache,
              BufferRange v_cache, const RopeKvParams& params, BufferRange dyn_pos = {}) const;
  // dyn_pos: optional 4-byte uint added to params.pos0 at run time (recorded once, replayed at
  // every decode position); the host must keep pos0 + dyn + rows <= capacity (rows past it are skipped).
  uint32_t workgroup_size() const { return wg_; }
  void limit_workgroups_for_testing(uint32_t x, uint32_t y) { test_limit_ = {x, y}; }

 private:
  Device& device_;
  uint32_t wg_;
  std::unique_ptr<Pipeline> pipeline_;
  std::array<uint32_t, 2> test_limit_{0, 0};
};

// cos/sin table for RopeKvKernel: max_positions x D/2 x {cos, sin} of p·θ^(−2i/D), computed in double
// and rounded once to float. Angles are computed on the host because a GPU's fp32 angle p·inv_freq
// has an absolute rounding error of ~p·6e-8 rad (6e-3 rad at p = 1e5) and GPU sin/cos of large
// arguments are only loosely specified, which would cost accuracy at long contexts.
std::vector<float> rope_table(uint32_t max_positions, uint32_t D, double theta = 10000.0);
// The same table from given inverse frequencies (D/2 of them; e.g. llama3-scaled, model/checkpoint.hpp).
std::vector<float> rope_table(uint32_t max_positions, const std::vector<double>& inv_freq);

// ==== end linear / rope_kv ====

// ==== model ops (kernel_model_ops.cpp) ====

// x[r] = table[tokens[r]]: tokens are uint32 (rows), table vocab x E, x rows x E (float32: the residual stream).
class EmbedKernel {
 public:
  EmbedKernel(Device& device, KernelOptions options);
  void record(Program& program, BufferRange tokens, BufferRange table, BufferRange x, uint32_t rows, uint32_t E,
              uint32_t vocab) const;
  // One row part of a split table: rows [first, first + part_rows) of a vocabulary of `total`; writes only
  // the rows of x whose token is in the part (and zeros for invalid ids when first == 0).
  void record_part(Program& program, BufferRange tokens, BufferRange table, BufferRange x, uint32_t rows, uint32_t E,
                   uint32_t part_rows, uint32_t first, uint32_t total) const;

 private:
  Device& device_;
  uint32_t wg_;
  std::unique_ptr<Pipeline> pipeline_;
};

// a = silu(gate) * up, gu = [gate | up] (rows x 2I), a rows x I.
class SiluMulKernel {
 public:
  SiluMulKernel(Device& device, KernelOptions options);
  void record(Program& program, BufferRange gu, BufferRange a, uint32_t rows, uint32_t I) const;

 private:
  Device& device_;
  uint32_t wg_;
  std::unique_ptr<Pipeline> pipeline_;
};

// Device sampling (shaders/sample_topk.comp): token[0] = greedy or top-k choice from one logits row.
//   logits: vocab float32 values (in every precision); params: 4 uint32 = {position (unused), u (float bits), temperature (float bits),
//   top_k}; token: 4 bytes (uint32). Greedy when temperature <= 0 or top_k == 0.
class SampleKernel {
 public:
  SampleKernel(Device& device, KernelOptions options);
  void record(Program& program, BufferRange logits, BufferRange params, BufferRange token, uint32_t vocab) const;
  // Whether top_k (1 for greedy) fits the shader (<= kmax) and llvmpipe's loop budget for this vocabulary.
  bool supports(uint32_t vocab, uint32_t top_k) const;
  static constexpr uint32_t kmax = 64;

 private:
  Device& device_;
  uint32_t wg_;
  std::unique_ptr<Pipeline> pipeline_;
};

// ==== end model ops ====

}  // namespace diffvk
