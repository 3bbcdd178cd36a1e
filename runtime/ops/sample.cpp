#include "ops/sample.hpp"

#include <algorithm>

namespace diffvk {

SampleKernel::SampleKernel(Device& device, KernelOptions o) : device_(device) {
  wg_ = pick_pow2_workgroup(device.caps(), 64);
  pipeline_ = std::make_unique<LazyPipeline>(device,
                                             PipelineDesc{"sample_topk"}
                                                 .with_bindings(3)
                                                 .with_push(4)
                                                 .with_spec({wg_, kmax})
                                                 .with_subgroup(false)
                                                 .with_fp16(o.fp16),
                                             false);
}

bool SampleKernel::supports(uint32_t vocab, uint32_t top_k) const { return fits(wg_, vocab, top_k); }

bool SampleKernel::supports(const DeviceCaps& caps, uint32_t vocab, uint32_t top_k) {
  return fits(pick_pow2_workgroup(caps, 64), vocab, top_k);
}

bool SampleKernel::fits(uint32_t wg, uint32_t vocab, uint32_t top_k) {
  const uint64_t k = std::max(1u, top_k);
  // Loop iterations per invocation (the llvmpipe quirk budget, applied everywhere: it is generous).
  return vocab > 0 && k <= kmax && k * ((uint64_t(vocab) + wg - 1) / wg + 32) <= 60000;
}

void SampleKernel::record(Program& program, BufferRange logits, BufferRange params, BufferRange token,
                          uint32_t vocab) const {
  if (vocab == 0) throw Error(Status::invalid_argument, "sample_topk: empty vocabulary");
  if (logits.size < uint64_t(vocab) * 4 || params.size < 16 || token.size < 4)
    throw Error(Status::invalid_argument, "sample_topk: buffer too small");
  if (!supports(vocab, 1)) throw Error(Status::invalid_argument, "sample_topk: vocabulary too large for one workgroup");
  program.dispatch(*pipeline_, {{logits, Access::read}, {params, Access::read}, {token, Access::write}}, &vocab, 4,
                   {1, 1, 1}, "sample_topk");
}

}  // namespace diffvk
