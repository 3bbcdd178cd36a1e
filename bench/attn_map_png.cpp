// diffvk attn-map's picture (include/diffvk/png.hpp), drawn on the one PNG canvas (bench/canvas.hpp).
#include "diffvk/png.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdio>

#include "bench/canvas.hpp"
#include "diffvk/error.hpp"

namespace diffvk::bench {
namespace {

struct Rgb {
  uint8_t r, g, b;
  operator uint32_t() const { return rgb(r, g, b); }
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

// A w x h block with its top-left corner at (x, y).
void fill(Canvas& cv, int x, int y, int w, int h, uint32_t c) { cv.rect(x, y, x + w, y + h, c); }

std::string num(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.3g", v);
  return b;
}

}  // namespace

std::vector<uint8_t> render_attention_png(const AttentionMaps& m, const std::vector<std::string>& labels) {
  const int T = int(m.tokens);
  if (T == 0 || labels.size() != m.tokens || m.a1.size() != size_t(m.heads) * T * T || m.a2.size() != m.a1.size() ||
      m.lambda_rows.size() != (m.v2 ? size_t(m.heads) * T : 0))
    throw Error(Status::invalid_argument, "attn-map: maps and labels do not match");
  // Geometry: cells of 3 … 24 pixels (panels about 512 pixels wide), labels at 2x where cells allow.
  const int cell = std::clamp(512 / T, 3, 24), panel = cell * T, ls = cell >= 16 ? 2 : 1;
  const int step = std::max(1, (8 * ls + cell - 1) / cell);  // label every `step`-th token so they do not overlap
  size_t longest = 1;
  for (const auto& l : labels) longest = std::max(longest, l.size());
  const int label_w = Canvas::text_width(std::string(longest, 'M'), ls), ts = 2;  // ts: title scale
  const int left = 16 + label_w + 6, gap = 40, top = 16 + 9 * ts + 14;
  const int head_title = 9 * ts + 6, panel_title = 9 * ts + 6, xlabels = label_w + 8, bar = 12,
            legend = 8 + bar + 4 + 9 * ts;
  const int row_h = head_title + panel_title + panel + xlabels + legend + 24;
  // DIFF V2: λ differs per query row, so a strip right of the difference shows λ_t of each row (0 … 1), with
  // the head's range of λ under it.
  const int strip_x = left + 3 * panel + 2 * gap + 12, strip_w = std::max(cell, 10);
  std::vector<std::string> ranges;
  int strip_text = Canvas::text_width("lambda_t", ts);
  for (uint32_t hh = 0; m.v2 && hh < m.heads; ++hh) {
    const auto row = m.lambda_rows.begin() + std::ptrdiff_t(hh) * T;
    const auto [lo, hi] = std::minmax_element(row, row + T);
    ranges.push_back(num(*lo) + " - " + num(*hi));
    strip_text = std::max(strip_text, Canvas::text_width(ranges.back(), ls));
  }
  const int W = left + 3 * panel + 2 * gap + 24 + (m.v2 ? 12 + std::max(strip_w, strip_text) : 0);

  char head[200];
  if (m.v2) {
    const std::string which = m.heads == 1
                                  ? "head " + std::to_string(m.head0)
                                  : "heads " + std::to_string(m.head0) + "-" + std::to_string(m.head0 + m.heads - 1);
    std::snprintf(head, sizeof head,
                  "diffvk attn-map: DIFF V2, layer %u, %s, %d tokens, A1 - lambda_t*A2 (lambda per query row)", m.layer,
                  which.c_str(), T);
  } else {
    std::snprintf(head, sizeof head, "diffvk attn-map: layer %u, %d tokens, lambda = %.4g, lambda_init = %.4g", m.layer,
                  T, m.lambda, m.lambda_init);
  }
  const int min_w =
      std::max(Canvas::text_width("layer 00, head 00: A1 - lambda*A2, lambda = -0.000, lambda_init = 0.000", ts),
               Canvas::text_width(head, ts)) +
      32;
  Canvas cv(std::max(W, min_w), top + int(m.heads) * row_h);
  cv.text(16, 16, head, ts);

  // Scales: A1 and A2 share [0, max]; the difference is symmetric around 0.
  std::vector<float> diff(m.a1.size());
  double amax = 1e-12, dmax = 1e-12;
  for (size_t i = 0; i < diff.size(); ++i) {
    diff[i] = float(m.a1[i] - m.lambda_at(uint32_t(i / (size_t(T) * T)), uint32_t(i / T % T)) * m.a2[i]);
    amax = std::max({amax, double(m.a1[i]), double(m.a2[i])});
    dmax = std::max(dmax, std::fabs(double(diff[i])));
  }
  for (uint32_t hh = 0; hh < m.heads; ++hh) {
    const int y0 = top + int(hh) * row_h;
    const uint32_t h = m.head0 + hh;
    const std::string titles[3] = {m.v2 ? "A1 (query head " + std::to_string(2 * h) + ")" : "A1",
                                   m.v2 ? "A2 (query head " + std::to_string(2 * h + 1) + ")" : "A2",
                                   m.v2 ? "A1 - lambda_t*A2" : "A1 - lambda*A2"};
    cv.text(16, y0, "head " + std::to_string(h), ts);
    const int py = y0 + head_title + panel_title;
    for (int i = 0; i < T; i += step)  // query labels, left of the first panel
      cv.text(left - 6 - Canvas::text_width(labels[i], ls), py + i * cell + (cell - 7 * ls) / 2, labels[i], ls);
    for (int p = 0; p < 3; ++p) {
      const int px = left + p * (panel + gap);
      const float* src = p == 0   ? &m.a1[size_t(hh) * T * T]
                         : p == 1 ? &m.a2[size_t(hh) * T * T]
                                  : &diff[size_t(hh) * T * T];
      cv.text(px, y0 + head_title, titles[p], ts);
      fill(cv, px - 1, py - 1, panel + 2, panel + 2, kFrame);
      for (int i = 0; i < T; ++i)
        for (int j = 0; j < T; ++j) {
          const double v = src[size_t(i) * T + j];
          const Rgb c = j > i ? kMasked : p < 2 ? sequential(v / amax) : diverging(v / dmax);
          fill(cv, px + j * cell, py + i * cell, cell, cell, c);
        }
      for (int j = 0; j < T; j += step)  // key labels, under the panel, reading upwards
        cv.text(px + j * cell + (cell - 7 * ls) / 2, py + panel + 6 + Canvas::text_width(labels[j], ls), labels[j], ls,
                0x000000, true);
      // Legend: the colour bar and its end (and middle) values.
      const int by = py + panel + xlabels + 8;
      for (int x = 0; x < panel; ++x) {
        const double t = double(x) / std::max(1, panel - 1);
        fill(cv, px + x, by, 1, bar, p < 2 ? sequential(t) : diverging(2 * t - 1));
      }
      fill(cv, px - 1, by - 1, panel + 2, 1, kFrame);
      fill(cv, px - 1, by + bar, panel + 2, 1, kFrame);
      const std::string lo = p < 2 ? "0" : num(-dmax), hi = p < 2 ? num(amax) : num(dmax);
      cv.text(px, by + bar + 4, lo, ts, kGrey);
      cv.text(px + panel - Canvas::text_width(hi, ts), by + bar + 4, hi, ts, kGrey);
      if (p == 2) cv.text(px + panel / 2 - Canvas::text_width("0", ts) / 2, by + bar + 4, "0", ts, kGrey);
    }
    if (m.v2) {  // λ_t of each query row on the sequential scale of [0, 1], its range under it
      cv.text(strip_x, y0 + head_title, "lambda_t", ts);
      fill(cv, strip_x - 1, py - 1, strip_w + 2, panel + 2, kFrame);
      for (int i = 0; i < T; ++i)
        fill(cv, strip_x, py + i * cell, strip_w, cell, sequential(m.lambda_rows[size_t(hh) * T + i]));
      cv.text(strip_x, py + panel + 6, ranges[hh], ls, kGrey);
    }
  }
  return encode_png(cv, "attn-map");
}

}  // namespace diffvk::bench
