// diffvk_bench: speculative decoding in the whole-model benchmark (Options::speculate): a pass of k + 1 rows against
// a one-row decode, then N greedy tokens generated plainly and with drafts (generate()), alternately: prompt lookup, or
// (Options::speculate "draft:DIR") a draft model loaded on `ctx` with its own session,
// on a prompt whose second half repeats its first: the acceptance rate, tokens per pass, both tokens/s, and whether
// the tokens are the same.
#pragma once
#include <cstdint>
#include <vector>

#include "bench/ceilings.hpp"
#include "bench/timing.hpp"
#include "diffvk/model.hpp"

namespace diffvk::bench {

json speculate_bench(const Options& a, Context& ctx, Model& model, const SessionOptions& so,
                     const std::vector<int32_t>& random, uint32_t N, int runs, const Sink& sink);

}  // namespace diffvk::bench
