// Block-quantized linear weights on the device: the struct-of-arrays layout and the one-row
// (decode) linear over it (shaders/linear_row.comp with WQ = 1 / 2; the prologues and the residual
// epilogue are the dense kernel's own code).
//
// Device layout of one Q8_0 / Q4_0 matrix of `rows` x `in` weights (in a multiple of 32), in one range:
//   [0, scale_bytes)        fp16 scale bits d, row-major rows x in/32 (block b of row r at r·in/32 + b)
//   [quant_offset, bytes)   the quants, row-major, quant_offset = scale_bytes rounded up to 16:
//                           Q8_0: rows x in int8 (weight = q·d);
//                           Q4_0: rows x in/2 bytes, 16 per block; byte j of a block holds element j in
//                           its low nibble and element j + 16 in its high nibble (weight = (nibble − 8)·d).
// The bytes of a block are GGUF's (io/quant.hpp) with the scale moved out, so that the shaders read the
// quants with aligned 16-byte loads. The scales are read as uint bits (unpackHalf2x16): fp32-storage
// devices need no 16-bit storage.
#pragma once
#include <memory>
#include <string>

#include "io/quant.hpp"
#include "ops/linear.hpp"

namespace diffvk {

struct QuantLayout {
  QuantType type = QuantType::q8_0;
  uint64_t rows = 0, in = 0;
  uint64_t blocks() const { return rows * (in / kQuantBlockWeights); }
  uint64_t scale_bytes() const { return blocks() * 2; }
  uint64_t quant_offset() const { return (scale_bytes() + 15) / 16 * 16; }
  uint64_t quant_row_bytes() const { return type == QuantType::q4_0 ? in / 2 : in; }
  uint64_t bytes() const { return quant_offset() + rows * quant_row_bytes(); }
};
// Error(invalid_argument) naming the problem unless type is q8_0 / q4_0 and in is a multiple of 32.
QuantLayout quant_layout(QuantType type, uint64_t rows, uint64_t in);

// GGUF blocks of `rows` rows (quant_row_bytes(type, in) bytes each, io/quant.hpp) -> their scales
// (rows·in/32 fp16 values at `scales`) and quants (rows·quant_row_bytes at `quants`), i.e. the rows'
// slices of the two arrays of the device layout.
void split_quant_rows(QuantType type, uint64_t in, uint64_t rows, const uint8_t* blocks, uint8_t* scales,
                      uint8_t* quants);
// The whole device layout of a matrix from its GGUF rows (tests and the op table).
std::vector<uint8_t> pack_quant_matrix(QuantType type, uint64_t rows, uint64_t in, const uint8_t* blocks);

// y = pro(x)·Wᵀ (+ b) (+ r) over a quantized W; p as LinearKernel::record_row (the same checks), w = the
// layout's range (w.offset 16-byte aligned). x and the norm weight are read as 16-byte vectors when they
// start 16-byte aligned; the elementwise variants exist only on devices whose storage offset alignment
// is below 16 bytes (elsewhere every binding is aligned): a misaligned x there is invalid_argument.
// The one-row kernel's two paths (QuantRowPath, ops/linear.hpp; the matmul's are the same two).
// Pure: int8_dot where the device has shaderIntegerDotProduct and accelerates 4x8-bit packed signed and
// mixed-signedness dot products (DeviceCaps::int8_dot_accelerated), dequant elsewhere. `force` (tests, the
// benchmark's side-by-side rows): that path; int8_dot needs the feature (Error(unsupported) otherwise).
QuantRowChoice choose_quant_row_path(const DeviceCaps& caps, const QuantRowPath* force = nullptr);

class QuantRowKernel {
 public:
  // Builds the pipelines of the given formats (q8_0 / q4_0) only, for the path choose_quant_row_path()
  // takes (logged once at info level).
  QuantRowKernel(Device& device, KernelOptions options, const std::vector<QuantType>& types,
                 const QuantRowPath* force = nullptr);
  bool has(QuantType t) const;
  const QuantRowChoice& choice() const { return choice_; }
  void record(Program& program, QuantType type, BufferRange x, BufferRange w, BufferRange y,
              const LinearRowParams& params, BufferRange residual = {}, BufferRange norm_w = {},
              BufferRange bias = {}) const;
  // The fused q/k/v projection with RoPE + KV append as its epilogue (RowRope, ops/linear.hpp) over quantized W.
  void record_rope(Program& program, QuantType type, BufferRange x, BufferRange w, BufferRange q_out,
                   const LinearRowParams& params, BufferRange norm_w, const RowRope& rope) const;
  uint32_t workgroup_size() const { return geo_.wg; }
  // Lanes per lane group (row_lanes, ops/linear.hpp) of a row of `in` weights of this format (steps: one
  // 16-byte quant vector per lane step, in / 16 for Q8_0 and in / 32 for Q4_0; one block of 32 on the int8 path).
  uint32_t lanes_for(QuantType type, uint32_t in, bool rope = false) const;
  // The kernel record / record_rope take for a row of `in` weights of this format, as `diffvk plan` shows it.
  std::string row_choice(QuantType type, uint32_t in, bool rope = false) const;
  // As LinearKernel::declare_row_widths, for every format this kernel has.
  void declare_row_widths(const std::vector<uint32_t>& ins) const;
  // Test hook: cap the dispatched workgroup count (0 = the device limit) to exercise the grid-stride loop.
  void limit_workgroups_for_testing(uint32_t x) { test_limit_ = x; }
  // Test hook: lanes per lane group (as the tuning's row_lanes; 0 = back to the tuning's).
  void force_row_lanes_for_testing(uint32_t lg) { force_lanes_ = lg == 0 ? tuned_lanes_ : lg; }

 private:
  Device& device_;
  QuantRowChoice choice_;
  bool fp16_ = false;
  uint32_t test_limit_ = 0;
  RowGeometry geo_;  // the dense one-row kernel's geometry (row_geometry)
  uint32_t tuned_lanes_ = 0, force_lanes_ = 0;
  bool types_[2] = {false, false};  // [q8_0, q4_0]: built
  struct Pipes {
    std::unique_ptr<LazyPipeline> row[2][2][3][2][2];  // [vector loads][q8_0, q4_0][prologue][x f32][y f32]
    std::unique_ptr<LazyPipeline>
        rope[2][2][2][2];  // the RoPE epilogue: [vector loads][q8_0, q4_0][prologue none, rmsnorm][x f32]
  };
  std::unique_ptr<RowLaneSets<Pipes>> sets_;  // per LG
};

}  // namespace diffvk
