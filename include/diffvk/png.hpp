// diffvk_bench — PNG pictures drawn on the benchmark module's one canvas and font (link
// diffvk::diffvk_bench). Public because `diffvk attn-map` (examples/cli) draws its maps with the same
// canvas as the benchmark's plot and the CLI uses only public headers.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "diffvk/model.hpp"  // AttentionMaps

namespace diffvk::bench {

// The attention maps of one layer as PNG bytes: three panels per head (A1, A2 and A1 − λ·A2) with the
// prompt's token labels along both axes, a sequential colour scale shared by A1 and A2, a diverging one
// for the difference, each with its legend. DIFF V2 maps (maps.v2): the title says DIFF V2, the panels
// are the query heads 2h and 2h + 1 and A1 − λ_t·A2 with λ_t of each query row, drawn as a strip beside
// the difference. labels: one ASCII label per token (maps.tokens of them).
// Throws Error(invalid_argument) when maps and labels do not match, Error(unsupported) when the build
// has no PNG encoder (plot_available() in diffvk/bench.hpp is false).
std::vector<uint8_t> render_attention_png(const AttentionMaps& maps, const std::vector<std::string>& labels);

}  // namespace diffvk::bench
