// What every op shares: the shader-variant options, element types and workgroup helpers.
// Element type of every tensor argument is the storage type of the precision in use
// (float16 when Device::fp16(), else float32) unless stated otherwise.
#pragma once
#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include "vk/program.hpp"

namespace diffvk {

// Options that select shader variants; defaults follow the device.
struct KernelOptions {
  bool fp16 = false;
  bool subgroup = false;
  static KernelOptions for_device(const Device& d) { return {d.fp16(), d.subgroup_arithmetic()}; }
  // The options of `op`'s kernel (Tuning::subgroup_for): the device's, less a subgroup variant the self-test's
  // per-op fallback turned off. The model's kernels are built with these.
  static KernelOptions for_op(const Device& d, const std::string& op) { return {d.fp16(), d.subgroup_arithmetic(op)}; }
};

// A pipeline description whose shader variant (fp16 arithmetic, subgroup reductions) follows these options.
inline PipelineDesc kernel_desc(std::string op, const KernelOptions& o) {
  return PipelineDesc{std::move(op)}.with_fp16(o.fp16).with_subgroup(o.subgroup);
}

inline size_t storage_bytes(bool fp16) { return fp16 ? 2 : 4; }

// Element type of a tensor argument that may differ from the storage type. The model keeps its residual
// stream and its logits in float32 in every precision (real activations exceed fp16's 65504);
// fp16 storage is for the weights, the KV cache and the activations between kernels.
enum class Elem : uint32_t { storage = 0, f32 = 1 };
inline size_t elem_bytes(Elem e, bool fp16) { return e == Elem::f32 ? 4 : storage_bytes(fp16); }

// Largest power of two <= min(cap, device invocation limit, device x-size limit), at least 1.
uint32_t pick_pow2_workgroup(const DeviceCaps& caps, uint32_t cap);

// Grid of an elementwise kernel: ceil(cols / wg) workgroups along x, one row per y, clamped to the device limits.
inline std::array<uint32_t, 3> elementwise_grid(const DeviceCaps& caps, uint64_t cols, uint32_t wg, uint32_t rows) {
  return {static_cast<uint32_t>(std::clamp<uint64_t>((cols + wg - 1) / wg, 1, caps.max_workgroup_count[0])),
          std::clamp<uint32_t>(rows, 1, caps.max_workgroup_count[1]), 1};
}

// What the one-pipeline kernels with a power-of-two workgroup of up to 64 lanes share (kv_shift, rope_kv,
// conv1d_state, selective_scan): the device, the workgroup size, the pipeline (the derived kernel declares it) and
// the workgroup-count caps of the tests.
class Pow2WorkgroupKernel {
 public:
  uint32_t workgroup_size() const { return wg_; }
  // Caps the workgroup counts along x and y (0: the device's limits), so that tests run the grid-stride loops.
  void limit_workgroups_for_testing(uint32_t x, uint32_t y) { test_limit_ = {x, y}; }

 protected:
  explicit Pow2WorkgroupKernel(Device& device) : device_(device), wg_(pick_pow2_workgroup(device.caps(), 64)) {}
  // The kernel's one pipeline, compiled when the first program that dispatches it is finalized: the fp16 variant where
  // the options say so, never the subgroup one (these kernels reduce nothing across lanes).
  void declare(PipelineDesc desc, const KernelOptions& o) {
    pipeline_ = std::make_unique<LazyPipeline>(device_, std::move(desc).with_subgroup(false).with_fp16(o.fp16), false);
  }
  Device& device_;
  uint32_t wg_;
  std::unique_ptr<LazyPipeline> pipeline_;
  std::array<uint32_t, 2> test_limit_{0, 0};
};

}  // namespace diffvk
