#include <algorithm>

#include "ops/kernels.hpp"

namespace diffvk {

namespace {
struct EmbedPush {
  uint32_t rows, E, vocab, first, total;
};
struct SiluPush {
  uint32_t rows, I;
};
std::array<uint32_t, 3> grid(const DeviceCaps& caps, uint64_t cols, uint32_t wg, uint32_t rows) {
  return {static_cast<uint32_t>(std::clamp<uint64_t>((cols + wg - 1) / wg, 1, caps.max_workgroup_count[0])),
          std::clamp<uint32_t>(rows, 1, caps.max_workgroup_count[1]), 1};
}
}  // namespace

EmbedKernel::EmbedKernel(Device& device, KernelOptions o) : device_(device) {
  wg_ = pick_pow2_workgroup(device.caps(), 64);
  pipeline_ = std::make_unique<Pipeline>(device, PipelineDesc{"embed", 3, sizeof(EmbedPush), {wg_}, false, o.fp16});
}

void EmbedKernel::record(Program& program, BufferRange tokens, BufferRange table, BufferRange x, uint32_t rows,
                         uint32_t E, uint32_t vocab) const {
  record_part(program, tokens, table, x, rows, E, vocab, 0, vocab);
}

void EmbedKernel::record_part(Program& program, BufferRange tokens, BufferRange table, BufferRange x, uint32_t rows, uint32_t E,
                              uint32_t part_rows, uint32_t first, uint32_t total) const {
  const uint64_t es = storage_bytes(pipeline_->desc().fp16);
  if (rows == 0 || E == 0 || part_rows == 0 || total == 0) throw Error(Status::invalid_argument, "embed: zero size");
  if (uint64_t(first) + part_rows > total) throw Error(Status::invalid_argument, "embed: table part beyond the vocabulary");
  if (tokens.size < rows * 4ull || table.size < uint64_t(part_rows) * E * es || x.size < uint64_t(rows) * E * 4)
    throw Error(Status::invalid_argument, "embed: buffer too small for the shape");
  EmbedPush p{rows, E, part_rows, first, total};
  program.dispatch(*pipeline_, {{tokens, Access::read}, {table, Access::read}, {x, Access::write}}, &p, sizeof p,
                   grid(device_.caps(), E, wg_, rows), "embed");
}

SiluMulKernel::SiluMulKernel(Device& device, KernelOptions o) : device_(device) {
  wg_ = pick_pow2_workgroup(device.caps(), 64);
  pipeline_ = std::make_unique<Pipeline>(device, PipelineDesc{"silu_mul", 2, sizeof(SiluPush), {wg_}, false, o.fp16});
}

void SiluMulKernel::record(Program& program, BufferRange gu, BufferRange a, uint32_t rows, uint32_t I) const {
  const uint64_t es = storage_bytes(pipeline_->desc().fp16);
  if (rows == 0 || I == 0) throw Error(Status::invalid_argument, "silu_mul: zero size");
  if (gu.size < uint64_t(rows) * 2 * I * es || a.size < uint64_t(rows) * I * es)
    throw Error(Status::invalid_argument, "silu_mul: buffer too small for the shape");
  SiluPush p{rows, I};
  program.dispatch(*pipeline_, {{gu, Access::read}, {a, Access::write}}, &p, sizeof p, grid(device_.caps(), I, wg_, rows),
                   "silu_mul");
}

SampleKernel::SampleKernel(Device& device, KernelOptions o) : device_(device) {
  wg_ = pick_pow2_workgroup(device.caps(), 64);
  pipeline_ = std::make_unique<Pipeline>(device, PipelineDesc{"sample_topk", 3, 4, {wg_, kmax}, false, o.fp16});
}

bool SampleKernel::supports(uint32_t vocab, uint32_t top_k) const {
  const uint64_t k = std::max(1u, top_k);
  // Loop iterations per invocation (the llvmpipe quirk budget, applied everywhere: it is generous).
  return vocab > 0 && k <= kmax && k * ((uint64_t(vocab) + wg_ - 1) / wg_ + 32) <= 60000;
}

void SampleKernel::record(Program& program, BufferRange logits, BufferRange params, BufferRange token, uint32_t vocab) const {
  if (vocab == 0) throw Error(Status::invalid_argument, "sample_topk: empty vocabulary");
  if (logits.size < uint64_t(vocab) * 4 || params.size < 16 || token.size < 4)
    throw Error(Status::invalid_argument, "sample_topk: buffer too small");
  if (!supports(vocab, 1)) throw Error(Status::invalid_argument, "sample_topk: vocabulary too large for one workgroup");
  program.dispatch(*pipeline_, {{logits, Access::read}, {params, Access::read}, {token, Access::write}}, &vocab, 4,
                   {1, 1, 1}, "sample_topk");
}

}  // namespace diffvk
