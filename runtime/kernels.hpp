// Host side of each compute shader: pipeline creation (at load time) and recording into a Program.
// Element type of every tensor argument is the storage type of the precision in use
// (float16 when Device::fp16(), else float32) unless stated otherwise.
#pragma once
#include <memory>

#include "program.hpp"

namespace diffvk {

// Options that select shader variants; defaults follow the device.
struct KernelOptions {
  bool fp16 = false;
  bool subgroup = false;
  static KernelOptions for_device(const Device& d) { return {d.fp16(), d.subgroup_arithmetic()}; }
};

inline size_t storage_bytes(bool fp16) { return fp16 ? 2 : 4; }

// Headwise RMSNorm (SPEC.md eq. 3): x, y: rows x row_stride, head h at columns [h*width, (h+1)*width); w: width.
struct HeadRmsNormParams {
  uint32_t rows = 0, heads = 0, width = 0, row_stride = 0;
  float gain = 1.0f;  // 1 - lambda_init
  float eps = 1e-5f;
};
class HeadRmsNormKernel {
 public:
  HeadRmsNormKernel(Device& device, KernelOptions options);
  void record(Program& program, BufferRange x, BufferRange w, BufferRange y, const HeadRmsNormParams& params) const;
  uint32_t workgroup_size() const { return wg_; }

 private:
  uint32_t wg_;
  std::unique_ptr<Pipeline> pipeline_;
};

// Largest power of two <= min(cap, device invocation limit, device x-size limit), at least 1.
uint32_t pick_pow2_workgroup(const DeviceCaps& caps, uint32_t cap);

}  // namespace diffvk
