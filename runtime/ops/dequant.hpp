// Dequantization of a block-quantized weight (Q8_0 / Q4_0 in the layout of ops/linear_quant.hpp) into
// dense storage-type rows (shaders/dequant.comp): y[r][k] = q·d, formed exactly in fp32 and rounded once
// to the storage type. The prefill path of quantized linears (model/recipe.cpp) until the tiled matmul
// dequantizes its own tiles.
#pragma once
#include <memory>

#include "ops/linear_quant.hpp"

namespace diffvk {

class DequantKernel {
 public:
  // Builds the pipelines of the given formats (q8_0 / q4_0) only.
  DequantKernel(Device& device, KernelOptions options, const std::vector<QuantType>& types);
  // w: the quantized rows x in matrix (16-byte aligned); y: rows x in storage-type values.
  void record(Program& program, QuantType type, BufferRange w, BufferRange y, uint32_t rows, uint32_t in) const;

 private:
  Device& device_;
  bool fp16_ = false;
  uint32_t wg_ = 0;
  std::unique_ptr<Pipeline> pipelines_[2];  // [q8_0, q4_0]
};

}  // namespace diffvk
