// Line charts for diffvk bench: every panel has a log2 x axis (the context length T) and a linear
// y axis from 0; series are polylines with square markers, dashed where asked; text is
// stb_easy_font's vector font, scaled up and rasterised here.
#include "bench/plot.hpp"

#include "diffvk/error.hpp"

#if DIFFVK_HAVE_STB

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <stdexcept>

#define STB_IMAGE_WRITE_IMPLEMENTATION
#define STBI_WRITE_NO_STDIO
#if defined(__GNUC__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
#pragma GCC diagnostic ignored "-Wunused-function"
#pragma GCC diagnostic ignored "-Wsign-compare"
#pragma GCC diagnostic ignored "-Wunused-parameter"
#endif
#if DIFFVK_STB_NESTED
#include <stb/stb_easy_font.h>
#include <stb/stb_image_write.h>
#else
#include <stb_easy_font.h>
#include <stb_image_write.h>
#endif
#if defined(__GNUC__)
#pragma GCC diagnostic pop
#endif

namespace diffvk::bench {

namespace {

class Canvas {
 public:
  Canvas(int w, int h) : w_(w), h_(h), px_(size_t(w) * h * 3, 255) {}
  int width() const { return w_; }
  int height() const { return h_; }
  const std::vector<uint8_t>& pixels() const { return px_; }

  void put(int x, int y, uint32_t c) {
    if (x < 0 || y < 0 || x >= w_ || y >= h_) return;
    uint8_t* p = &px_[(size_t(y) * w_ + x) * 3];
    p[0] = uint8_t(c >> 16);
    p[1] = uint8_t(c >> 8);
    p[2] = uint8_t(c);
  }
  void rect(int x0, int y0, int x1, int y1, uint32_t c) {  // filled, inclusive-exclusive
    for (int y = std::max(0, y0); y < std::min(h_, y1); ++y)
      for (int x = std::max(0, x0); x < std::min(w_, x1); ++x) put(x, y, c);
  }
  void frame(int x0, int y0, int x1, int y1, uint32_t c) {
    rect(x0, y0, x1, y0 + 1, c);
    rect(x0, y1 - 1, x1, y1, c);
    rect(x0, y0, x0 + 1, y1, c);
    rect(x1 - 1, y0, x1, y1, c);
  }
  // Thick line; dashed: on 10 px, off 7 px along the line.
  void line(double x0, double y0, double x1, double y1, uint32_t c, double thick, bool dashed = false) {
    const double len = std::hypot(x1 - x0, y1 - y0);
    const int steps = std::max(1, int(std::ceil(len * 2)));
    const int r = std::max(0, int(std::floor(thick / 2)));
    for (int i = 0; i <= steps; ++i) {
      const double t = double(i) / steps, along = t * len;
      if (dashed && std::fmod(along, 17.0) > 10.0) continue;
      const int x = int(std::lround(x0 + t * (x1 - x0))), y = int(std::lround(y0 + t * (y1 - y0)));
      rect(x - r, y - r, x + r + 1, y + r + 1, c);
    }
  }
  // stb_easy_font text, `scale` pixels per font unit; (x, y) is the top-left corner.
  void text(double x, double y, const std::string& s, uint32_t c, double scale) {
    std::string t = sanitize(s);
    static std::vector<char> buf(1 << 20);
    const int quads = stb_easy_font_print(0, 0, t.data(), nullptr, buf.data(), int(buf.size()));
    for (int q = 0; q < quads; ++q) {
      const float* v = reinterpret_cast<const float*>(buf.data() + q * 64);  // 4 vertices x 16 bytes
      const float qx0 = v[0], qy0 = v[1], qx1 = v[8], qy1 = v[9];
      rect(int(std::lround(x + qx0 * scale)), int(std::lround(y + qy0 * scale)), int(std::lround(x + qx1 * scale)),
           int(std::lround(y + qy1 * scale)), c);
    }
  }
  static double text_width(const std::string& s, double scale) {
    std::string t = sanitize(s);
    return stb_easy_font_width(t.data()) * scale;
  }

 private:
  static std::string sanitize(const std::string& s) {
    std::string t;
    for (char ch : s) t += (ch >= 32 && ch < 127) ? ch : '?';
    return t;
  }
  int w_, h_;
  std::vector<uint8_t> px_;
};

double nice_step(double range, int target_ticks) {
  const double raw = range / std::max(1, target_ticks);
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 2.5, 5.0, 10.0})
    if (m * mag >= raw) return m * mag;
  return 10 * mag;
}

std::string fmt_num(double v) {
  char b[32];
  if (std::fabs(v) >= 1000 || v == std::floor(v)) std::snprintf(b, sizeof b, "%.0f", v);
  else std::snprintf(b, sizeof b, "%g", std::round(v * 1000) / 1000);
  return b;
}

constexpr uint32_t kInk = 0x202020, kGrid = 0xe4e4e4, kAxis = 0x606060;
constexpr double kText = 2.0, kTitle = 3.0;
constexpr int kPanelW = 760, kPlotW = kPanelW - 90 - 24;

int legend_rows_of(const PlotPanel& p) {
  double widest = 0;
  for (const auto& s : p.series) widest = std::max(widest, Canvas::text_width(s.label, kText));
  for (const auto& l : p.lines) widest = std::max(widest, Canvas::text_width(l.label, kText));
  const size_t n = p.series.size() + p.lines.size();
  return int(44 + widest < kPlotW / 2.0 ? (n + 1) / 2 : n);
}

void draw_panel(Canvas& cv, const PlotPanel& p, int px, int py, int pw, int ph, const std::string& xlabel) {
  const int left = 90, right = 24, top = 44;
  const int legend_rows = legend_rows_of(p);
  const int bottom = 64 + legend_rows * 22;
  const int x0 = px + left, x1 = px + pw - right, y0 = py + top, y1 = py + ph - bottom;
  cv.text(px + left, py + 10, p.title, kInk, kText);

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
    cv.text(x0 + 20, (y0 + y1) / 2, p.empty_note.empty() ? "no data" : p.empty_note, kAxis, kText);
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
    cv.text(x0 - 10 - Canvas::text_width(lab, kText), y - 6, lab, kInk, kText);
  }
  std::sort(xs.begin(), xs.end());
  for (double x : xs) {  // x grid + labels at every measured T
    const int xx = int(std::lround(X(x)));
    cv.rect(xx, y0, xx + 1, y1, kGrid);
    const std::string lab = fmt_num(x);
    cv.text(xx - Canvas::text_width(lab, kText) / 2, y1 + 8, lab, kInk, kText);
  }
  cv.text((x0 + x1) / 2.0 - Canvas::text_width(xlabel, kText) / 2, y1 + 32, xlabel, kInk, kText);
  for (const auto& l : p.lines) {
    const double y = Y(l.y);
    cv.line(x0, y, x1, y, l.color, 2, true);
  }
  for (const auto& s : p.series) {
    for (size_t i = 1; i < s.points.size(); ++i)
      cv.line(X(s.points[i - 1].first), Y(s.points[i - 1].second), X(s.points[i].first), Y(s.points[i].second), s.color, 3,
              s.dashed);
    for (auto [x, y] : s.points) {
      const int cx = int(std::lround(X(x))), cy = int(std::lround(Y(y)));
      cv.rect(cx - 5, cy - 5, cx + 6, cy + 6, s.color);
      if (s.dashed) cv.rect(cx - 2, cy - 2, cx + 3, cy + 3, 0xffffff);  // hollow marker for dashed series
    }
  }
  cv.frame(x0, y0, x1 + 1, y1 + 1, kAxis);
  if (!p.note.empty()) cv.text(x0 + 10, y0 + 8, p.note, 0x707070, kText);

  // Legend below the axis label, two columns (one when a label would not fit half the width).
  double widest = 0;
  for (const auto& s : p.series) widest = std::max(widest, Canvas::text_width(s.label, kText));
  for (const auto& l : p.lines) widest = std::max(widest, Canvas::text_width(l.label, kText));
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
    cv.text(lx + 40, ly, label, kInk, kText);
    ++i;
  };
  for (const auto& s : p.series) entry(s.label, s.color, s.dashed, true);
  for (const auto& l : p.lines) entry(l.label, l.color, true, false);
}

void write_to_vector(void* ctx, void* data, int size) {
  auto* out = static_cast<std::vector<uint8_t>*>(ctx);
  const auto* p = static_cast<const uint8_t*>(data);
  out->insert(out->end(), p, p + size);
}

}  // namespace

bool plot_available() { return true; }

std::vector<uint8_t> render_png(const PlotFigure& f) {
  const int cols = std::max(1, f.cols);
  const int rows = std::max<int>(1, int(f.panels.size() + cols - 1) / cols);
  size_t max_legend = 0;
  for (const auto& p : f.panels) max_legend = std::max(max_legend, size_t(legend_rows_of(p)));
  const int sub_lines = 1 + int(std::count(f.subtitle.begin(), f.subtitle.end(), '\n'));
  const int pw = kPanelW, ph = 470 + int(max_legend) * 22, header = 76 + 24 * sub_lines;
  Canvas cv(cols * pw, header + rows * ph);
  cv.text(24, 16, f.title, kInk, kTitle);
  size_t start = 0;
  for (int l = 0; l < sub_lines; ++l) {  // stb_easy_font's own newline spacing is too tight when scaled
    const size_t end = f.subtitle.find('\n', start);
    cv.text(24, 56 + 24 * l, f.subtitle.substr(start, end == std::string::npos ? std::string::npos : end - start), 0x505050, kText);
    start = end == std::string::npos ? f.subtitle.size() : end + 1;
  }
  for (size_t i = 0; i < f.panels.size(); ++i)
    draw_panel(cv, f.panels[i], int(i % cols) * pw, header + int(i / cols) * ph, pw, ph, f.xlabel);
  std::vector<uint8_t> png;
  if (!stbi_write_png_to_func(write_to_vector, &png, cv.width(), cv.height(), 3, cv.pixels().data(), cv.width() * 3))
    throw std::runtime_error("PNG encoding failed");
  return png;
}

}  // namespace diffvk::bench

#else  // no stb in this build

namespace diffvk::bench {
bool plot_available() { return false; }
std::vector<uint8_t> render_png(const PlotFigure&) {
  throw Error(Status::unsupported, "this build has no PNG plot: stb (stb_image_write.h, stb_easy_font.h) was not found at configure time");
}
}  // namespace diffvk::bench

#endif
