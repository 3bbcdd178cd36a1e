#include "bench/figure.hpp"

#include <algorithm>

#include "bench/plot.hpp"
#include "diffvk/atomic_write.hpp"

namespace diffvk::bench {

void write_plot(const std::string& path, const std::vector<CaseResult>& results, const Ceilings& c,
                const std::string& device, const std::string& subtitle, bool cpu_device) {
  static const uint32_t palette[] = {0x1f77b4, 0xd62728, 0x2ca02c, 0x9467bd, 0xff7f0e, 0x8c564b, 0x17becf, 0xe377c2};
  PlotFigure f;
  f.title = "diffvk bench: fused differential attention vs baselines - " + device;
  f.subtitle = subtitle;
  f.xlabel = "T (keys in context; prefill S = T, decode S = 1)";
  f.cols = 2;
  for (bool decode : {false, true}) {
    std::vector<std::string> series;
    for (const auto& r : results)
      if (r.spec.decode == decode && std::find(series.begin(), series.end(), r.spec.series()) == series.end())
        series.push_back(r.spec.series());
    PlotPanel sp, bw;
    const char* ph = decode ? "decode" : "prefill";
    sp.title = strf("%s: fused speedup (time of baseline / fused)", ph);
    sp.ylabel = "x";
    bw.title = strf("%s: %% of measured copy bandwidth (%.1f GB/s)", ph, c.copy.gbps);
    bw.ylabel = "%";
    sp.empty_note = bw.empty_note = strf("no %s cases in this run", ph);
    for (size_t s = 0; s < series.size(); ++s) {
      const uint32_t color = palette[s % 8];
      PlotSeries vs_two{"vs two-pass, " + series[s].substr(series[s].find(' ') + 1), color, false, {}};
      PlotSeries vs_naive{"vs naive, " + series[s].substr(series[s].find(' ') + 1), color, true, {}};
      PlotSeries bw_f{"fused, " + series[s].substr(series[s].find(' ') + 1), color, false, {}};
      PlotSeries bw_t{"two-pass, " + series[s].substr(series[s].find(' ') + 1), color, true, {}};
      for (const auto& r : results) {
        if (r.spec.series() != series[s] || !timed(r, 0)) continue;
        if (timed(r, 1)) vs_two.points.push_back({r.spec.T, speedup(r, 1)});
        if (timed(r, 2)) vs_naive.points.push_back({r.spec.T, speedup(r, 2)});
        bw_f.points.push_back({r.spec.T, 100 * gbps(r, 0) / c.copy.gbps});
        if (timed(r, 1)) bw_t.points.push_back({r.spec.T, 100 * gbps(r, 1) / c.copy.gbps});
      }
      for (auto* ps : {&vs_two, &vs_naive})
        if (!ps->points.empty()) sp.series.push_back(*ps);
      for (auto* ps : {&bw_f, &bw_t})
        if (!ps->points.empty()) bw.series.push_back(*ps);
    }
    sp.lines.push_back({1.0, "1x (parity)", 0x606060});
    sp.lines.push_back({decode ? 1.35 : 1.1, decode ? "target 1.35x (T>=2048)" : "target 1.1x (T>=1024)", 0xe07000});
    if (decode && !cpu_device) bw.lines.push_back({60, "target 60% (T>=4096)", 0xe07000});
    if (decode && cpu_device) bw.note = "(the 60% target applies to real GPUs only)";
    f.panels.push_back(sp);
    f.panels.push_back(bw);
  }
  const auto png = render_png(f);
  platform::write_file_atomic(path, png.data(), png.size());
}

}  // namespace diffvk::bench
