// diffvk attn-map: the picture. Three panels per head (A1, A2 and A1 − λ·A2) with the prompt's token
// labels along both axes, a sequential colour scale shared by A1 and A2, a diverging one for the
// difference, each with its legend; text in the 5x7 font of font5x7.hpp.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "diffvk/model.hpp"

namespace diffvk::cli {

// PNG bytes of the maps; labels: one ASCII label per token (maps.tokens of them).
std::vector<uint8_t> render_attention_png(const AttentionMaps& maps, const std::vector<std::string>& labels);

}  // namespace diffvk::cli
