#include "ops/embed.hpp"

#include "ops/linear_quant.hpp"

namespace diffvk {

namespace {
struct EmbedPush {
  uint32_t rows = 0, E = 0, vocab = 0, first = 0, total = 0, q_off = 0;
};
static_assert(sizeof(EmbedPush) == 24, "embed.comp's push block");
int format_index(QuantType t) {
  return t == QuantType::f16 ? 0 : t == QuantType::q8_0 ? 1 : t == QuantType::q4_0 ? 2 : -1;
}
}  // namespace

EmbedKernel::EmbedKernel(Device& device, KernelOptions o, const std::vector<QuantType>& quant) : device_(device) {
  wg_ = pick_pow2_workgroup(device.caps(), 64);
  pipelines_[0] = std::make_unique<LazyPipeline>(device,
                                                 PipelineDesc{"embed"}
                                                     .with_bindings(3)
                                                     .with_push(sizeof(EmbedPush))
                                                     .with_spec({wg_, 0u})
                                                     .with_subgroup(false)
                                                     .with_fp16(o.fp16),
                                                 false);
  for (QuantType t : quant) {
    const int i = format_index(t);
    if (i <= 0)
      throw Error(Status::invalid_argument, std::string("embed: no kernel for a ") + quant_type_name(t) + " table");
    if (!pipelines_[i])
      pipelines_[i] = std::make_unique<LazyPipeline>(device,
                                                     PipelineDesc{"embed"}
                                                         .with_bindings(3)
                                                         .with_push(sizeof(EmbedPush))
                                                         .with_spec({wg_, uint32_t(i)})
                                                         .with_subgroup(false)
                                                         .with_fp16(o.fp16),
                                                     false);
  }
}

void EmbedKernel::record(Program& program, BufferRange tokens, BufferRange table, BufferRange x, uint32_t rows,
                         uint32_t E, uint32_t vocab) const {
  record_part(program, tokens, table, x, rows, E, vocab, 0, vocab);
}

void EmbedKernel::record_part(Program& program, BufferRange tokens, BufferRange table, BufferRange x, uint32_t rows,
                              uint32_t E, uint32_t part_rows, uint32_t first, uint32_t total, QuantType format) const {
  const int fi = format_index(format);
  if (fi < 0 || !pipelines_[fi])
    throw Error(Status::invalid_argument,
                std::string("embed: this kernel has no pipeline for a ") + quant_type_name(format) + " table");
  const uint64_t es = storage_bytes(pipelines_[0]->desc().fp16);
  if (rows == 0 || E == 0 || part_rows == 0 || total == 0) throw Error(Status::invalid_argument, "embed: zero size");
  if (uint64_t(first) + part_rows > total)
    throw Error(Status::invalid_argument, "embed: table part beyond the vocabulary");
  uint64_t table_bytes = uint64_t(part_rows) * E * es, q_off = 0;
  if (fi > 0) {
    const QuantLayout l = quant_layout(format, part_rows, E);  // E a multiple of 32
    table_bytes = l.bytes();
    q_off = l.quant_offset() / 4;
  }
  if (tokens.size < rows * 4ull || table.size < table_bytes || x.size < uint64_t(rows) * E * 4)
    throw Error(Status::invalid_argument, "embed: buffer too small for the shape");
  EmbedPush p;
  p.rows = rows;
  p.E = E;
  p.vocab = part_rows;
  p.first = first;
  p.total = total;
  p.q_off = uint32_t(q_off);
  static const char* const labels[3] = {"embed", "embed q8_0", "embed q4_0"};
  program.dispatch(*pipelines_[fi], {{tokens, Access::read}, {table, Access::read}, {x, Access::write}}, &p, sizeof p,
                   elementwise_grid(device_.caps(), E, wg_, rows), labels[fi]);
}

}  // namespace diffvk
