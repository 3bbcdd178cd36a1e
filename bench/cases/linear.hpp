// diffvk_bench: the linear op's case class (cases/linear.cpp): rows x in -> out, the matrix-vector, tiled,
// register-tiled, cooperative-matrix, quantized and int8 dot-product paths. Declared here for the tests that
// pick cases by their parameters (tests/ops/test_linear.cpp).
#pragma once
#include "bench/op_run_impl.hpp"
#include "ops/linear.hpp"
#include "ops/linear_quant.hpp"

namespace diffvk::bench {

struct LinearCaseParams {
  uint32_t rows = 1, in = 0, out = 0;
  uint32_t x_pad = 0, y_pad = 0;  // x row stride in + x_pad; y (and residual) row stride out + y_pad
  op_detail::Residual residual = op_detail::Residual::none;
  bool y_f32 = false;  // Elem::f32 y and residual (the model's residual stream)
  bool bias = false;   // a float32 bias (Phi-4-mini-flash's Wqkv, out_proj, dt_proj), added before the residual
  // q8_0 / q4_0: GGUF blocks in the device layout (ops/linear_quant.hpp), checked against the reference on
  // the dequantized weights.
  QuantType weights = QuantType::f16;
  // The int8 dot-product path (LinearKernel::record_quant_path int8_dot), checked against the reference on
  // the dequantized weights and the int8-rounded activations; skipped without the feature.
  bool int8_dot = false;
  // ---- device quirks
  int variant = -1;           // a forced tile candidate (record_variant; kLinearCoopVariant: coopmat); -1: the kernel's
  bool subgroup = true;       // false: the shared-memory reduction even where subgroup arithmetic exists
  bool scalar_loads = false;  // never the 16-byte vector loads
  uint32_t wg_limit_x = 0, wg_limit_y = 0;  // capped workgroup counts (grid-stride loops); 0 = the device's
};

class LinearCase final : public op_detail::CaseOf<LinearCase, LinearCaseParams> {
 public:
  const char* op() const override { return "linear"; }
  std::string describe() const override;
  bool subgroup() const override { return p.subgroup; }
  std::string skip_reason(const Device& dev) const override;
  void prepare(Device& dev, op_detail::KernelCache& kernels, bool subgroup, op_detail::Prepared& out) const override;
  RowShape row_shape() const override { return {p.rows, p.in, p.out}; }
  void add_row_fields(json& row, const std::string& detail) const override;
};

// The linear kernel the linear and linear_row cases share (every variant, both quantized formats).
LinearKernel& linear_kernel(Device& dev, op_detail::KernelCache& kernels, bool subgroup);
// The quantized one-row kernel the linear_row and linear_row_rope cases share (Q8_0 and Q4_0; the int8 dot-product path
// or dequantizing in registers).
QuantRowKernel& quant_row_kernel(Device& dev, op_detail::KernelCache& kernels, bool subgroup, bool int8_dot);

}  // namespace diffvk::bench
