// Quantized weight -> storage-type rows (ops/dequant.hpp).
#include "ops/dequant.hpp"

namespace diffvk {

namespace {
struct DequantPush {
  uint32_t in, rows, q_off;
};
}  // namespace

DequantKernel::DequantKernel(Device& device, KernelOptions o, const std::vector<QuantType>& types) : device_(device), fp16_(o.fp16) {
  wg_ = pick_pow2_workgroup(device.caps(), 64);
  for (QuantType t : types) {
    if (t != QuantType::q8_0 && t != QuantType::q4_0)
      throw Error(Status::invalid_argument, std::string("dequant: no kernel for ") + quant_type_name(t));
    const uint32_t wq = t == QuantType::q8_0 ? 1 : 2;
    pipelines_[wq - 1] = std::make_unique<Pipeline>(device, PipelineDesc{"dequant", 2, sizeof(DequantPush), {wg_, wq}, false, o.fp16});
  }
}

void DequantKernel::record(Program& program, QuantType type, BufferRange w, BufferRange y, uint32_t rows, uint32_t in) const {
  const QuantLayout l = quant_layout(type, rows, in);
  const Pipeline* pl = pipelines_[type == QuantType::q8_0 ? 0 : 1].get();
  if (!pl) throw Error(Status::invalid_argument, std::string("dequant: this kernel has no pipeline for ") + quant_type_name(type));
  if (rows == 0) throw Error(Status::invalid_argument, "dequant: zero size");
  if (uint64_t(rows) * in > UINT32_MAX) throw Error(Status::invalid_argument, "dequant: matrix too large for 32-bit element indices");
  if (w.size < l.bytes() || y.size < uint64_t(rows) * in * storage_bytes(fp16_))
    throw Error(Status::invalid_argument, "dequant: buffer too small for the shape");
  if (w.offset % 16 != 0) throw Error(Status::invalid_argument, "dequant: the quantized weight must start 16-byte aligned");
  if (ranges_overlap(w, y)) throw Error(Status::invalid_argument, "dequant: the output overlaps the input");
  const DequantPush push{in, rows, uint32_t(l.quant_offset() / 16)};
  const uint64_t vectors = uint64_t(rows) * in / (type == QuantType::q4_0 ? 32 : 16);
  program.dispatch(*pl, {{w, Access::read}, {y, Access::write}}, &push, sizeof push, elementwise_grid(device_.caps(), vectors, wg_, 1),
                   type == QuantType::q8_0 ? "dequant q8_0" : "dequant q4_0");
}

}  // namespace diffvk
