#include "ops/embed.hpp"

namespace diffvk {

namespace {
struct EmbedPush {
  uint32_t rows, E, vocab, first, total;
};
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
                   elementwise_grid(device_.caps(), E, wg_, rows), "embed");
}

}  // namespace diffvk
