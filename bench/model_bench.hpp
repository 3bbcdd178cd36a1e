// diffvk_bench: the whole-model benchmark (Options::model_dir): prefill and decode tokens/s of a checkpoint,
// and decode's fraction of the weight-streaming bound (every decode step reads every weight once, so a
// token cannot take less than weight bytes / copy bandwidth). Wall-clock time per call (host submit +
// wait + read-back included), median of runs; optional per-op GPU profile of a decode step. Each phase also
// reports its place under the measured ceilings (ceilings.hpp: fraction_of_peak = the larger of the FMA
// and copy fractions), with flops = 2 x the matrix weights per token (attention's own products left out)
// and bytes = the weights read once per call.
#pragma once
#include <string>

#include "bench/ceilings.hpp"
#include "diffvk/model.hpp"

namespace diffvk::bench {

json run_model_bench(const Options& a, Context& ctx, const Ceilings& ceil, int runs, const std::string& cmdline,
                     const Sink& sink);

}  // namespace diffvk::bench
