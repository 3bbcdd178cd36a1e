// The only file of attn-map that touches the PNG encoder (stb_image_write, implemented in runtime/bench/plot.cpp).
#include "attn_map_png.hpp"

#include <stb/stb_image_write.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "diffvk/error.hpp"
#include "font5x7.hpp"

namespace diffvk::cli {
namespace {

struct Rgb {
  uint8_t r, g, b;
};

class Canvas {
 public:
  Canvas(int w, int h) : w_(w), h_(h), px_(size_t(w) * h * 3, 255) {}
  int width() const { return w_; }
  int height() const { return h_; }
  const std::vector<uint8_t>& pixels() const { return px_; }
  void rect(int x, int y, int w, int h, Rgb c) {
    for (int yy = std::max(0, y); yy < std::min(h_, y + h); ++yy)
      for (int xx = std::max(0, x); xx < std::min(w_, x + w); ++xx) {
        uint8_t* p = &px_[(size_t(yy) * w_ + xx) * 3];
        p[0] = c.r;
        p[1] = c.g;
        p[2] = c.b;
      }
  }
  // Text with its top-left corner at (x, y), `s` pixels per font pixel; vertical = rotated 90° counter-
  // clockwise (reads bottom to top), then (x, y) is the bottom-left corner of the rotated text.
  void text(int x, int y, const std::string& t, int s, Rgb c = {0, 0, 0}, bool vertical = false) {
    for (size_t k = 0; k < t.size(); ++k) {
      const uint8_t* g = glyph5x7(t[k]);
      const int adv = int(k) * (kGlyphW + 1) * s;
      for (int r = 0; r < kGlyphH; ++r)
        for (int col = 0; col < kGlyphW; ++col)
          if (g[r] & (0x10 >> col)) {
            if (vertical) rect(x + r * s, y - adv - (col + 1) * s, s, s, c);
            else rect(x + adv + col * s, y + r * s, s, s, c);
          }
    }
  }
  static int text_width(const std::string& t, int s) { return t.empty() ? 0 : int(t.size()) * (kGlyphW + 1) * s - s; }

 private:
  int w_, h_;
  std::vector<uint8_t> px_;
};

Rgb mix(Rgb a, Rgb b, double t) {
  auto m = [&](uint8_t x, uint8_t y) { return uint8_t(std::lround(x + (double(y) - x) * t)); };
  return {m(a.r, b.r), m(a.g, b.g), m(a.b, b.b)};
}
// Sequential (white → blue, ColorBrewer "Blues" end points) for t in [0, 1].
Rgb sequential(double t) {
  t = std::clamp(t, 0.0, 1.0);
  const Rgb lo{247, 251, 255}, mid{107, 174, 214}, hi{8, 48, 107};
  return t < 0.5 ? mix(lo, mid, t * 2) : mix(mid, hi, t * 2 - 1);
}
// Diverging (blue → white → red) for t in [−1, 1].
Rgb diverging(double t) {
  t = std::clamp(t, -1.0, 1.0);
  const Rgb neg{33, 102, 172}, zero{247, 247, 247}, pos{178, 24, 43};
  return t < 0 ? mix(zero, neg, -t) : mix(zero, pos, t);
}
const Rgb kMasked{205, 205, 205}, kFrame{90, 90, 90}, kGrey{90, 90, 90};

std::string num(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.3g", v);
  return b;
}

void write_to_vector(void* ctx, void* data, int size) {
  auto* v = static_cast<std::vector<uint8_t>*>(ctx);
  v->insert(v->end(), static_cast<uint8_t*>(data), static_cast<uint8_t*>(data) + size);
}

}  // namespace

std::vector<uint8_t> render_attention_png(const AttentionMaps& m, const std::vector<std::string>& labels) {
  const int T = int(m.tokens);
  if (T == 0 || labels.size() != m.tokens || m.a1.size() != size_t(m.heads) * T * T || m.a2.size() != m.a1.size())
    throw Error(Status::invalid_argument, "attn-map: maps and labels do not match");
  // Geometry: cells of 3 … 24 pixels (panels about 512 pixels wide), labels at 2x where cells allow.
  const int cell = std::clamp(512 / T, 3, 24), panel = cell * T, ls = cell >= 16 ? 2 : 1;
  const int step = std::max(1, (8 * ls + cell - 1) / cell);  // label every `step`-th token so they do not overlap
  size_t longest = 1;
  for (const auto& l : labels) longest = std::max(longest, l.size());
  const int label_w = Canvas::text_width(std::string(longest, 'M'), ls), ts = 2;  // ts: title scale
  const int left = 16 + label_w + 6, gap = 40, top = 16 + 9 * ts + 14;
  const int head_title = 9 * ts + 6, panel_title = 9 * ts + 6, xlabels = label_w + 8, bar = 12, legend = 8 + bar + 4 + 9 * ts;
  const int row_h = head_title + panel_title + panel + xlabels + legend + 24;
  const int W = left + 3 * panel + 2 * gap + 24;
  const int min_w = Canvas::text_width("layer 00, head 00: A1 - lambda*A2, lambda = -0.000, lambda_init = 0.000", ts) + 32;
  Canvas cv(std::max(W, min_w), top + int(m.heads) * row_h);

  char head[160];
  std::snprintf(head, sizeof head, "diffvk attn-map: layer %u, %d tokens, lambda = %.4g, lambda_init = %.4g", m.layer, T, m.lambda,
                m.lambda_init);
  cv.text(16, 16, head, ts);

  // Scales: A1 and A2 share [0, max]; the difference is symmetric around 0.
  std::vector<float> diff(m.a1.size());
  double amax = 1e-12, dmax = 1e-12;
  for (size_t i = 0; i < diff.size(); ++i) {
    diff[i] = float(m.a1[i] - m.lambda * m.a2[i]);
    amax = std::max({amax, double(m.a1[i]), double(m.a2[i])});
    dmax = std::max(dmax, std::fabs(double(diff[i])));
  }
  const char* titles[3] = {"A1", "A2", "A1 - lambda*A2"};
  for (uint32_t hh = 0; hh < m.heads; ++hh) {
    const int y0 = top + int(hh) * row_h;
    cv.text(16, y0, "head " + std::to_string(m.head0 + hh), ts);
    const int py = y0 + head_title + panel_title;
    for (int i = 0; i < T; i += step)  // query labels, left of the first panel
      cv.text(left - 6 - Canvas::text_width(labels[i], ls), py + i * cell + (cell - 7 * ls) / 2, labels[i], ls);
    for (int p = 0; p < 3; ++p) {
      const int px = left + p * (panel + gap);
      const float* src = p == 0 ? &m.a1[size_t(hh) * T * T] : p == 1 ? &m.a2[size_t(hh) * T * T] : &diff[size_t(hh) * T * T];
      cv.text(px, y0 + head_title, titles[p], ts);
      cv.rect(px - 1, py - 1, panel + 2, panel + 2, kFrame);
      for (int i = 0; i < T; ++i)
        for (int j = 0; j < T; ++j) {
          const double v = src[size_t(i) * T + j];
          const Rgb c = j > i ? kMasked : p < 2 ? sequential(v / amax) : diverging(v / dmax);
          cv.rect(px + j * cell, py + i * cell, cell, cell, c);
        }
      for (int j = 0; j < T; j += step)  // key labels, under the panel, reading upwards
        cv.text(px + j * cell + (cell - 7 * ls) / 2, py + panel + 6 + Canvas::text_width(labels[j], ls), labels[j], ls, {0, 0, 0}, true);
      // Legend: the colour bar and its end (and middle) values.
      const int by = py + panel + xlabels + 8;
      for (int x = 0; x < panel; ++x) {
        const double t = double(x) / std::max(1, panel - 1);
        cv.rect(px + x, by, 1, bar, p < 2 ? sequential(t) : diverging(2 * t - 1));
      }
      cv.rect(px - 1, by - 1, panel + 2, 1, kFrame);
      cv.rect(px - 1, by + bar, panel + 2, 1, kFrame);
      const std::string lo = p < 2 ? "0" : num(-dmax), hi = p < 2 ? num(amax) : num(dmax);
      cv.text(px, by + bar + 4, lo, ts, kGrey);
      cv.text(px + panel - Canvas::text_width(hi, ts), by + bar + 4, hi, ts, kGrey);
      if (p == 2) cv.text(px + panel / 2 - Canvas::text_width("0", ts) / 2, by + bar + 4, "0", ts, kGrey);
    }
  }
  std::vector<uint8_t> png;
  if (!stbi_write_png_to_func(write_to_vector, &png, cv.width(), cv.height(), 3, cv.pixels().data(), cv.width() * 3))
    throw Error(Status::internal, "attn-map: PNG encoding failed");
  return png;
}

}  // namespace diffvk::cli
