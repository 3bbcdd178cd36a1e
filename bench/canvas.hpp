// The one PNG canvas of diffvk: an RGB image with filled rectangles, frames, thick (dashed)
// lines and text in the 5x7 font of font5x7.hpp, encoded by stb_image_write. Used by the benchmark's
// figure (plot.cpp) and by the attention maps of `diffvk attn-map` (attn_map_png.cpp).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace diffvk::bench {

class Canvas {
 public:
  Canvas(int w, int h) : w_(w), h_(h), px_(size_t(w) * h * 3, 255) {}  // white
  int width() const { return w_; }
  int height() const { return h_; }
  const std::vector<uint8_t>& pixels() const { return px_; }

  // Colours are 0xRRGGBB; pixels outside the canvas are dropped.
  void put(int x, int y, uint32_t c);
  void rect(int x0, int y0, int x1, int y1, uint32_t c);   // filled, [x0, x1) x [y0, y1)
  void frame(int x0, int y0, int x1, int y1, uint32_t c);  // the 1-pixel outline of the same
  // Thick line; dashed: on 10 px, off 7 px along the line.
  void line(double x0, double y0, double x1, double y1, uint32_t c, double thick, bool dashed = false);
  // Text with its top-left corner at (x, y), `s` pixels per font pixel; characters outside printable
  // ASCII show as '?'. vertical = rotated 90° counter-clockwise (reads bottom to top), then (x, y) is
  // the bottom-left corner of the rotated text.
  void text(int x, int y, const std::string& t, int s, uint32_t c = 0x000000, bool vertical = false);
  static int text_width(const std::string& t, int s);
  static int text_height(int s);

 private:
  int w_, h_;
  std::vector<uint8_t> px_;
};

constexpr uint32_t rgb(uint8_t r, uint8_t g, uint8_t b) { return uint32_t(r) << 16 | uint32_t(g) << 8 | b; }

// PNG file contents (RGB). Throws Error(internal) naming `what` when encoding fails, Error(unsupported)
// when the build has no stb_image_write (plot_available() is false then).
std::vector<uint8_t> encode_png(const Canvas& canvas, const std::string& what);

}  // namespace diffvk::bench
