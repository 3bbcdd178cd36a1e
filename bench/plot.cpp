// Line charts for diffvk bench: every panel has a log2 x axis (the context length T) and a linear
// y axis from 0; series are polylines with square markers, dashed where asked. Drawn on the one PNG
// canvas (canvas.hpp), text in its 5x7 font.
#include "bench/plot.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "bench/canvas.hpp"

namespace diffvk::bench {

namespace {

double nice_step(double range, int target_ticks) {
  const double raw = range / std::max(1, target_ticks);
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 2.5, 5.0, 10.0})
    if (m * mag >= raw) return m * mag;
  return 10 * mag;
}

std::string fmt_num(double v) {
  char b[32];
  if (std::fabs(v) >= 1000 || v == std::floor(v))
    std::snprintf(b, sizeof b, "%.0f", v);
  else
    std::snprintf(b, sizeof b, "%g", std::round(v * 1000) / 1000);
  return b;
}

constexpr uint32_t kInk = 0x202020, kGrid = 0xe4e4e4, kAxis = 0x606060;
constexpr int kText = 2, kTitle = 3;  // pixels per font pixel
constexpr int kPanelW = 760, kPlotW = kPanelW - 90 - 24;

int legend_rows_of(const PlotPanel& p) {
  double widest = 0;
  for (const auto& s : p.series) widest = std::max<double>(widest, Canvas::text_width(s.label, kText));
  for (const auto& l : p.lines) widest = std::max<double>(widest, Canvas::text_width(l.label, kText));
  const size_t n = p.series.size() + p.lines.size();
  return int(44 + widest < kPlotW / 2.0 ? (n + 1) / 2 : n);
}

void draw_panel(Canvas& cv, const PlotPanel& p, int px, int py, int pw, int ph, const std::string& xlabel) {
  const int left = 90, right = 24, top = 44;
  const int legend_rows = legend_rows_of(p);
  const int bottom = 64 + legend_rows * 22;
  const int x0 = px + left, x1 = px + pw - right, y0 = py + top, y1 = py + ph - bottom;
  cv.text(px + left, py + 10, p.title, kText, kInk);

  double xmin = 1e300, xmax = -1e300, ymax = 0;
  std::vector<double> xs;
  for (const auto& s : p.series)
    for (auto [x, y] : s.points) {
      xmin = std::min(xmin, std::log2(x));
      xmax = std::max(xmax, std::log2(x));
      ymax = std::max(ymax, y);
      if (std::find(xs.begin(), xs.end(), x) == xs.end()) xs.push_back(x);
    }
  for (const auto& l : p.lines) ymax = std::max(ymax, l.y);
  cv.rect(x0, y0, x1, y1, 0xffffff);
  if (xs.empty()) {
    cv.frame(x0, y0, x1 + 1, y1 + 1, kAxis);
    cv.text(x0 + 20, (y0 + y1) / 2, p.empty_note.empty() ? "no data" : p.empty_note, kText, kAxis);
    return;
  }
  if (xmax - xmin < 1e-9) {
    xmin -= 0.5;
    xmax += 0.5;
  } else {
    const double pad = 0.06 * (xmax - xmin);
    xmin -= pad;
    xmax += pad;
  }
  if (ymax <= 0) ymax = 1;
  const double step = nice_step(ymax * 1.12, 5);
  const double ytop = std::ceil(ymax * 1.12 / step) * step;
  auto X = [&](double x) { return x0 + (std::log2(x) - xmin) / (xmax - xmin) * (x1 - x0); };
  auto Y = [&](double y) { return y1 - y / ytop * (y1 - y0); };

  for (double t = 0; t <= ytop + step * 1e-6; t += step) {  // y grid + labels
    const int y = int(std::lround(Y(t)));
    cv.rect(x0, y, x1, y + 1, kGrid);
    const std::string lab = fmt_num(t) + p.ylabel;
    cv.text(x0 - 10 - Canvas::text_width(lab, kText), y - 6, lab, kText, kInk);
  }
  std::sort(xs.begin(), xs.end());
  for (double x : xs) {  // x grid + labels at every measured T
    const int xx = int(std::lround(X(x)));
    cv.rect(xx, y0, xx + 1, y1, kGrid);
    const std::string lab = fmt_num(x);
    cv.text(xx - Canvas::text_width(lab, kText) / 2, y1 + 8, lab, kText, kInk);
  }
  cv.text((x0 + x1) / 2 - Canvas::text_width(xlabel, kText) / 2, y1 + 32, xlabel, kText, kInk);
  for (const auto& l : p.lines) {
    const double y = Y(l.y);
    cv.line(x0, y, x1, y, l.color, 2, true);
  }
  for (const auto& s : p.series) {
    for (size_t i = 1; i < s.points.size(); ++i)
      cv.line(X(s.points[i - 1].first), Y(s.points[i - 1].second), X(s.points[i].first), Y(s.points[i].second), s.color,
              3, s.dashed);
    for (auto [x, y] : s.points) {
      const int cx = int(std::lround(X(x))), cy = int(std::lround(Y(y)));
      cv.rect(cx - 5, cy - 5, cx + 6, cy + 6, s.color);
      if (s.dashed) cv.rect(cx - 2, cy - 2, cx + 3, cy + 3, 0xffffff);  // hollow marker for dashed series
    }
  }
  cv.frame(x0, y0, x1 + 1, y1 + 1, kAxis);
  if (!p.note.empty()) cv.text(x0 + 10, y0 + 8, p.note, kText, 0x707070);

  // Legend below the axis label, two columns (one when a label would not fit half the width).
  double widest = 0;
  for (const auto& s : p.series) widest = std::max<double>(widest, Canvas::text_width(s.label, kText));
  for (const auto& l : p.lines) widest = std::max<double>(widest, Canvas::text_width(l.label, kText));
  const int ncol = 44 + widest < (x1 - x0) / 2.0 ? 2 : 1;
  int i = 0;
  auto entry = [&](const std::string& label, uint32_t color, bool dashed, bool marker) {
    const int col = i % ncol, row = i / ncol;
    const int lx = x0 + col * ((x1 - x0) / 2), ly = y1 + 58 + row * 22;
    cv.line(lx, ly + 6, lx + 32, ly + 6, color, marker ? 3 : 2, dashed);
    if (marker) {
      cv.rect(lx + 11, ly + 1, lx + 22, ly + 12, color);
      if (dashed) cv.rect(lx + 14, ly + 4, lx + 19, ly + 9, 0xffffff);
    }
    cv.text(lx + 40, ly, label, kText, kInk);
    ++i;
  };
  for (const auto& s : p.series) entry(s.label, s.color, s.dashed, true);
  for (const auto& l : p.lines) entry(l.label, l.color, true, false);
}

}  // namespace

std::vector<uint8_t> render_png(const PlotFigure& f) {
  const int cols = std::max(1, f.cols);
  const int rows = std::max<int>(1, int(f.panels.size() + cols - 1) / cols);
  size_t max_legend = 0;
  for (const auto& p : f.panels) max_legend = std::max(max_legend, size_t(legend_rows_of(p)));
  const int sub_lines = 1 + int(std::count(f.subtitle.begin(), f.subtitle.end(), '\n'));
  const int pw = kPanelW, ph = 470 + int(max_legend) * 22, header = 76 + 24 * sub_lines;
  Canvas cv(cols * pw, header + rows * ph);
  cv.text(24, 16, f.title, kTitle, kInk);
  size_t start = 0;
  for (int l = 0; l < sub_lines; ++l) {  // one line at a time: the font has no newline
    const size_t end = f.subtitle.find('\n', start);
    cv.text(24, 56 + 24 * l, f.subtitle.substr(start, end == std::string::npos ? std::string::npos : end - start),
            kText, 0x505050);
    start = end == std::string::npos ? f.subtitle.size() : end + 1;
  }
  for (size_t i = 0; i < f.panels.size(); ++i)
    draw_panel(cv, f.panels[i], int(i % cols) * pw, header + int(i / cols) * ph, pw, ph, f.xlabel);
  return encode_png(cv, "bench plot");
}

}  // namespace diffvk::bench
