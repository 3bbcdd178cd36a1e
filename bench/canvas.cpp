// The one PNG canvas (canvas.hpp) and the PNG encoder: stb_image_write's implementation is compiled here.
#include "bench/canvas.hpp"

#include <algorithm>
#include <cmath>

#include "bench/font5x7.hpp"
#include "diffvk/bench.hpp"  // plot_available()
#include "diffvk/error.hpp"

#if DIFFVK_HAVE_STB
#  define STB_IMAGE_WRITE_IMPLEMENTATION
#  define STBI_WRITE_NO_STDIO
#  if defined(__GNUC__)
#    pragma GCC diagnostic push
#    pragma GCC diagnostic ignored "-Wmissing-field-initializers"
#    pragma GCC diagnostic ignored "-Wunused-function"
#    pragma GCC diagnostic ignored "-Wsign-compare"
#    pragma GCC diagnostic ignored "-Wunused-parameter"
#  endif
#  include <stb/stb_image_write.h>
#  if defined(__GNUC__)
#    pragma GCC diagnostic pop
#  endif
#endif

namespace diffvk::bench {

void Canvas::put(int x, int y, uint32_t c) {
  if (x < 0 || y < 0 || x >= w_ || y >= h_) return;
  uint8_t* p = &px_[(size_t(y) * w_ + x) * 3];
  p[0] = uint8_t(c >> 16);
  p[1] = uint8_t(c >> 8);
  p[2] = uint8_t(c);
}

void Canvas::rect(int x0, int y0, int x1, int y1, uint32_t c) {
  for (int y = std::max(0, y0); y < std::min(h_, y1); ++y)
    for (int x = std::max(0, x0); x < std::min(w_, x1); ++x) put(x, y, c);
}

void Canvas::frame(int x0, int y0, int x1, int y1, uint32_t c) {
  rect(x0, y0, x1, y0 + 1, c);
  rect(x0, y1 - 1, x1, y1, c);
  rect(x0, y0, x0 + 1, y1, c);
  rect(x1 - 1, y0, x1, y1, c);
}

void Canvas::line(double x0, double y0, double x1, double y1, uint32_t c, double thick, bool dashed) {
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

void Canvas::text(int x, int y, const std::string& t, int s, uint32_t c, bool vertical) {
  for (size_t k = 0; k < t.size(); ++k) {
    const uint8_t* g = glyph5x7(t[k]);
    const int adv = int(k) * (kGlyphW + 1) * s;
    for (int r = 0; r < kGlyphH; ++r)
      for (int col = 0; col < kGlyphW; ++col)
        if (g[r] & (0x10 >> col)) {
          if (vertical)
            rect(x + r * s, y - adv - (col + 1) * s, x + r * s + s, y - adv - col * s, c);
          else
            rect(x + adv + col * s, y + r * s, x + adv + col * s + s, y + r * s + s, c);
        }
  }
}

int Canvas::text_width(const std::string& t, int s) { return t.empty() ? 0 : int(t.size()) * (kGlyphW + 1) * s - s; }
int Canvas::text_height(int s) { return kGlyphH * s; }

#if DIFFVK_HAVE_STB

namespace {
void write_to_vector(void* ctx, void* data, int size) {
  auto* out = static_cast<std::vector<uint8_t>*>(ctx);
  const auto* p = static_cast<const uint8_t*>(data);
  out->insert(out->end(), p, p + size);
}
}  // namespace

bool plot_available() { return true; }

std::vector<uint8_t> encode_png(const Canvas& cv, const std::string& what) {
  std::vector<uint8_t> png;
  if (!stbi_write_png_to_func(write_to_vector, &png, cv.width(), cv.height(), 3, cv.pixels().data(), cv.width() * 3))
    throw Error(Status::internal, what + ": PNG encoding failed");
  return png;
}

#else  // no stb in this build

bool plot_available() { return false; }

std::vector<uint8_t> encode_png(const Canvas&, const std::string& what) {
  throw Error(Status::unsupported,
              what + ": this build has no PNG output: stb (stb_image_write.h) was not found at configure time");
}

#endif

}  // namespace diffvk::bench
