// diffvk bench: a small line-chart renderer for the benchmark's speedup and bandwidth plots, drawn on
// the one PNG canvas (canvas.hpp: stb_image_write, the 5x7 font).
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "diffvk/bench.hpp"  // plot_available()

namespace diffvk::bench {

struct PlotSeries {
  std::string label;
  uint32_t color = 0x1f77b4;  // 0xRRGGBB
  bool dashed = false;
  std::vector<std::pair<double, double>> points;  // (x, y), x > 0 (drawn on a log2 axis)
};
struct PlotLine {  // horizontal reference line
  double y = 0;
  std::string label;
  uint32_t color = 0x888888;
};
struct PlotPanel {
  std::string title;
  std::string ylabel;  // unit shown next to the tick labels, e.g. "x" or "%"
  std::vector<PlotSeries> series;
  std::vector<PlotLine> lines;
  std::string empty_note;  // shown when there are no points
  std::string note;        // small grey text in the top-left corner of the plot area
};
struct PlotFigure {
  std::string title, subtitle, xlabel;
  int cols = 2;
  std::vector<PlotPanel> panels;  // row-major
};

// PNG file contents (RGB). Throws diffvk::Error: internal when encoding fails, unsupported when the
// build has no stb.
std::vector<uint8_t> render_png(const PlotFigure& figure);

}  // namespace diffvk::bench
