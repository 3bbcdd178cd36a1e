// Token embedding op (shaders/embed.comp).
#pragma once
#include <memory>

#include "io/quant.hpp"
#include "ops/kernel_options.hpp"

namespace diffvk {

// x[r] = table[tokens[r]]: tokens are uint32 (rows), table vocab x E, x rows x E (float32: the residual stream).
// The table is in the storage type, or Q8_0 / Q4_0 blocks in the device layout of
// ops/linear_quant.hpp (each part its own range), dequantized as the rows are copied.
class EmbedKernel {
 public:
  // quant: the block formats the tables may have (their pipelines are built too).
  EmbedKernel(Device& device, KernelOptions options, const std::vector<QuantType>& quant = {});
  void record(Program& program, BufferRange tokens, BufferRange table, BufferRange x, uint32_t rows, uint32_t E,
              uint32_t vocab) const;
  // One row part of a split table: rows [first, first + part_rows) of a vocabulary of `total`; writes only
  // the rows of x whose token is in the part (and zeros for invalid ids when first == 0).
  void record_part(Program& program, BufferRange tokens, BufferRange table, BufferRange x, uint32_t rows, uint32_t E,
                   uint32_t part_rows, uint32_t first, uint32_t total, QuantType format = QuantType::f16) const;

 private:
  Device& device_;
  uint32_t wg_;
  std::unique_ptr<LazyPipeline> pipelines_[3];  // [f16 (storage type), q8_0, q4_0]
};

}  // namespace diffvk
