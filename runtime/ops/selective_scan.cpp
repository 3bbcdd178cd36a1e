#include "ops/selective_scan.hpp"

#include <algorithm>

namespace diffvk {

namespace {
struct ScanPush {
  uint32_t T = 0, C = 0, mode = 0, L = 0, chunks = 0, bc_stride = 0, b_off = 0, c_off = 0, z_stride = 0, z_off = 0,
           flags = 0;
};
static_assert(sizeof(ScanPush) == 44, "selective_scan.comp's push block");
enum : uint32_t { kDirect = 0, kChunk = 1, kCarry = 2, kFinal = 3 };
constexpr uint32_t kScanChunk = 32;

uint32_t chunk_count(uint32_t T, uint32_t L) { return L ? (T + L - 1) / L : 1; }
}  // namespace

uint32_t choose_scan_chunk(uint32_t T) { return T <= kScanChunk ? 0 : kScanChunk; }

uint32_t scan_chunk(const SelectiveScanParams& p) {
  const uint32_t L = p.chunk ? p.chunk : choose_scan_chunk(p.T);
  return L >= p.T ? 0 : L;
}

uint64_t selective_scan_scratch_bytes(const SelectiveScanParams& p) {
  const uint32_t L = scan_chunk(p);
  return L ? uint64_t(chunk_count(p.T, L)) * p.C * (p.S + 1) * 4 : 0;
}

std::string SelectiveScanKernel::choice(const SelectiveScanParams& p) {
  const uint32_t L = scan_chunk(p);
  return L ? "chunked L=" + std::to_string(L) + " x " + std::to_string(chunk_count(p.T, L)) : "one dispatch";
}

SelectiveScanKernel::SelectiveScanKernel(Device& device, KernelOptions o, uint32_t S)
    : Pow2WorkgroupKernel(device), S_(S) {
  if (S == 0 || S > kMaxStates)
    throw Error(Status::invalid_argument,
                "selective_scan: d_state " + std::to_string(S) + " outside 1.." + std::to_string(kMaxStates));
  declare(PipelineDesc{"selective_scan"}.with_bindings(10).with_push(sizeof(ScanPush)).with_spec({wg_, S}), o);
}

void SelectiveScanKernel::record(Program& program, const SelectiveScanParams& p, const SelectiveScanBuffers& b) const {
  const uint64_t es = storage_bytes(pipeline_->desc().fp16);
  if (p.T == 0 || p.C == 0) throw Error(Status::invalid_argument, "selective_scan: zero size");
  if (p.S != S_)
    throw Error(Status::invalid_argument,
                "selective_scan: S " + std::to_string(p.S) + ", the kernel was built for " + std::to_string(S_));
  const uint64_t bc_stride = p.bc_stride ? p.bc_stride : 2 * p.S;
  const uint64_t z_stride = p.z_stride ? p.z_stride : p.C;
  const bool has_z = b.z.buffer != VK_NULL_HANDLE, has_ypre = b.y_pre.buffer != VK_NULL_HANDLE;
  if (has_z && z_stride < p.C) throw Error(Status::invalid_argument, "selective_scan: z_stride smaller than C");
  const uint64_t tc = uint64_t(p.T) * p.C, cs = uint64_t(p.C) * p.S;
  const uint64_t bc_elems = std::max(p.b_offset, p.c_offset) + (p.T - 1) * bc_stride + p.S;
  const uint64_t z_elems = p.z_offset + (p.T - 1) * z_stride + p.C;
  const uint32_t L = scan_chunk(p), chunks = chunk_count(p.T, L);
  const uint64_t scratch = selective_scan_scratch_bytes(p);
  if (tc > UINT32_MAX || bc_elems > UINT32_MAX || (has_z && z_elems > UINT32_MAX) || scratch / 4 > UINT32_MAX)
    throw Error(Status::invalid_argument, "selective_scan: more than 2^32 elements");
  if (b.u.size < tc * es || b.delta_raw.size < tc * es || b.A_log.size < cs * 4 || b.bc.size < bc_elems * es ||
      b.D.size < uint64_t(p.C) * 4 || (has_z && b.z.size < z_elems * es) || b.h.size < cs * 4 || b.y.size < tc * es ||
      (has_ypre && b.y_pre.size < tc * es) || (L && b.scratch.size < scratch))
    throw Error(Status::invalid_argument, "selective_scan: buffer too small for the shape");
  const BufferRange zero = device_.zero_range();
  ScanPush push;
  push.T = p.T;
  push.C = p.C;
  push.mode = kDirect;
  push.L = L;
  push.chunks = chunks;
  push.bc_stride = uint32_t(bc_stride);
  push.b_off = p.b_offset;
  push.c_off = p.c_offset;
  push.z_stride = uint32_t(z_stride);
  push.z_off = p.z_offset;
  push.flags = (has_z ? 1u : 0u) | (has_ypre ? 2u : 0u);
  const DeviceCaps& caps = device_.caps();
  uint32_t gx = std::clamp<uint32_t>((p.C + wg_ - 1) / wg_, 1, caps.max_workgroup_count[0]);
  uint32_t gy = std::clamp<uint32_t>(chunks, 1, caps.max_workgroup_count[1]);
  if (test_limit_[0]) gx = std::min(gx, test_limit_[0]);
  if (test_limit_[1]) gy = std::min(gy, test_limit_[1]);
  // The argument list of one pass. A binding the pass does not use is bound to the zero buffer only where the
  // shader declares it readonly: synchronization validation counts every writable binding as written, so h, y,
  // y_pre and the scratch are always bound to their own ranges (y_pre absent: y again; one dispatch: h again) and
  // declared written; the passes depend on each other through the scratch anyway.
  const BufferRange ypre = has_ypre ? b.y_pre : b.y, scr = L ? b.scratch.sub(0, scratch) : b.h;
  auto args = [&](uint32_t mode) {
    const bool emit = mode == kDirect || mode == kFinal, walk = mode != kCarry;
    return std::vector<Arg>{{walk ? b.u : zero, Access::read},
                            {walk ? b.delta_raw : zero, Access::read},
                            {b.A_log, Access::read},
                            {walk ? b.bc : zero, Access::read},
                            {walk ? b.D : zero, Access::read},
                            {emit && has_z ? b.z : zero, Access::read},
                            {b.h, Access::read_write},
                            {b.y, Access::write},
                            {ypre, Access::write},
                            {scr, Access::read_write}};
  };
  if (!L) {
    program.dispatch(*pipeline_, args(kDirect), &push, sizeof push, {gx, 1, 1}, "selective_scan");
    return;
  }
  push.mode = kChunk;
  program.dispatch(*pipeline_, args(kChunk), &push, sizeof push, {gx, gy, 1}, "selective_scan chunk");
  push.mode = kCarry;
  program.dispatch(*pipeline_, args(kCarry), &push, sizeof push, {gx, 1, 1}, "selective_scan carry");
  push.mode = kFinal;
  program.dispatch(*pipeline_, args(kFinal), &push, sizeof push, {gx, gy, 1}, "selective_scan final");
}

}  // namespace diffvk
