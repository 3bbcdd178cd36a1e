// Mamba-1 selective scan (shaders/selective_scan.comp; docs/maths.md "Mamba-1 conv1d and selective scan"):
// decode (and any call of at most one chunk) in one dispatch; longer prefills by the chunked parallel scan, three
// dispatches of the same pipeline (chunk end states from zero, the carry across chunks, the rerun that emits y).
#pragma once
#include <array>
#include <memory>
#include <string>

#include "ops/kernel_options.hpp"

namespace diffvk {

// Shapes and where B, Cm and z sit in their rows (elements). u, delta_raw, y, y_pre: T x C, storage type, dense.
// B[t][s] = bc[b_offset + t·bc_stride + s], Cm[t][s] = bc[c_offset + t·bc_stride + s] (x_proj's rows
// [dt_low | B | Cm]: bc_stride = dt_rank + 2S, b_offset = dt_rank, c_offset = dt_rank + S), storage type.
// z[t][c] = z[z_offset + t·z_stride + c] (in_proj's [x | z] rows: z_stride = 2C, z_offset = C), storage type.
struct SelectiveScanParams {
  uint32_t T = 0, C = 0, S = 16;
  uint32_t bc_stride = 0;  // 0: 2S
  uint32_t b_offset = 0, c_offset = 0;
  uint32_t z_stride = 0;  // 0: C
  uint32_t z_offset = 0;
  uint32_t chunk = 0;  // chunk length of the parallel prefill; 0: choose_scan_chunk(T); >= T: one dispatch
};

// The buffers. A_log: C x S and D: C, float32 in every precision (the checkpoint's parameters, kept as
// Mamba keeps them); h: C x S float32, read and updated in place. z.buffer == VK_NULL_HANDLE: no gate (y = y_pre);
// y_pre.buffer == VK_NULL_HANDLE: not written. scratch: selective_scan_scratch_bytes() (unused, may be empty, when
// the call takes one dispatch).
struct SelectiveScanBuffers {
  BufferRange u, delta_raw, A_log, bc, D, z, h, y, y_pre, scratch;
};

// The parallel prefill's chunk length for T rows (pure): 0 when one dispatch walks all T rows (T <= 32: decode
// and short prefills, where three dispatches cost more than the walk), else 32 (T = 512 on C = 5120: 16 chunks,
// 16 x 80 workgroups of 64 channels; the scratch is chunks x C x (S + 1) float32, 5.2 MB).
uint32_t choose_scan_chunk(uint32_t T);
// The chunk length a call takes (params.chunk, or choose_scan_chunk), 0 for one dispatch.
uint32_t scan_chunk(const SelectiveScanParams& params);
// Scratch bytes of a call: chunks x C x (S + 1) float32 (each chunk's state and delta sum), 0 for one dispatch.
uint64_t selective_scan_scratch_bytes(const SelectiveScanParams& params);

class SelectiveScanKernel : public Pow2WorkgroupKernel {
 public:
  static constexpr uint32_t kMaxStates = 64;
  // S: d_state (a specialization constant: one pipeline per S; the states sit in registers).
  SelectiveScanKernel(Device& device, KernelOptions options, uint32_t S);
  // One dispatch (scan_chunk(params) == 0) or three. The path taken, for plans and reports.
  void record(Program& program, const SelectiveScanParams& params, const SelectiveScanBuffers& buffers) const;
  static std::string choice(const SelectiveScanParams& params);
  uint32_t states() const { return S_; }
  // limit_workgroups_for_testing: x caps the workgroups over channels, y those over chunks.

 private:
  uint32_t S_;
};

}  // namespace diffvk
