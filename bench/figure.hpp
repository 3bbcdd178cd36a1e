// diffvk_bench: the PNG figure of a run — fused speedup over each baseline and % of the measured copy
// bandwidth against T, prefill and decode panels (rendered by bench/plot.cpp).
#pragma once
#include <string>
#include <vector>

#include "bench/cases.hpp"

namespace diffvk::bench {

// Writes the PNG atomically. Error(unsupported) when the build has no plot (plot_available()).
void write_plot(const std::string& path, const std::vector<CaseResult>& results, const Ceilings& c,
                const std::string& device, const std::string& subtitle, bool cpu_device);

}  // namespace diffvk::bench
