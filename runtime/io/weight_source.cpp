// Row spans of safetensors tensors -> device storage type, a bounded slice at a time (io/weight_source.hpp).
#include "io/weight_source.hpp"

#include <cmath>
#include <algorithm>
#include <cstring>
#include <vector>

#include "io/half.hpp"

namespace diffvk {

uint64_t WeightSource::rows() const {
  uint64_t n = 0;
  for (const auto& s : spans) n += s.rows;
  return n;
}

WeightSource& WeightSource::add(const SafetensorsFile& f, const TensorInfo& t, uint64_t row, uint64_t rows) {
  const uint64_t trows = t.shape.empty() ? 1 : uint64_t(t.shape[0]);
  const uint64_t tcols = trows ? t.numel() / trows : 0;
  if (t.dtype != DType::F32 && t.dtype != DType::F16 && t.dtype != DType::BF16)
    throw Error(Status::format_error,
                f.name() + ": tensor '" + t.name + "' must be F32, F16 or BF16, not " + dtype_name(t.dtype));
  if (tcols != cols)
    throw Error(Status::format_error, f.name() + ": tensor '" + t.name + "' has rows of " + std::to_string(tcols) +
                                          " elements, " + name + " needs " + std::to_string(cols));
  if (row > trows || rows > trows - row)
    throw Error(Status::internal,
                name + ": rows " + std::to_string(row) + "+" + std::to_string(rows) + " outside '" + t.name + "'");
  if (!spans.empty() && spans.back().file == &f && spans.back().tensor == &t &&
      spans.back().row + spans.back().rows == row)
    spans.back().rows += rows;  // contiguous with the previous span
  else
    spans.push_back({&f, &t, row, rows});
  return *this;
}

WeightSource& WeightSource::add(const SafetensorsFile& f, const TensorInfo& t) {
  return add(f, t, 0, t.shape.empty() ? 1 : uint64_t(t.shape[0]));
}

WeightSource& WeightSource::add(const GgufFile& f, const GgufTensorInfo& t) {
  const QuantType q = t.type == GgmlType::q8_0   ? QuantType::q8_0
                      : t.type == GgmlType::q4_0 ? QuantType::q4_0
                                                 : QuantType::f16;
  if (q == QuantType::f16 && t.type != GgmlType::f32 && t.type != GgmlType::f16 && t.type != GgmlType::bf16)
    throw Error(Status::format_error, f.name() + ": tensor '" + std::string(t.name) +
                                          "' must be F32, F16, BF16, Q8_0 or Q4_0, not " + ggml_type_name(t.type));
  if (!spans.empty() && q != stored)
    throw Error(Status::format_error, f.name() + ": tensor '" + std::string(t.name) + "' is " + ggml_type_name(t.type) +
                                          " but the other " + "parts of " + name + " are " + quant_type_name(stored) +
                                          " (one type per fused weight)");
  const uint64_t trows = t.n_dims == 1 ? t.dims[0] : t.numel / t.dims[0];
  const uint64_t tcols = t.numel / trows;
  if (tcols != cols)
    throw Error(Status::format_error, f.name() + ": tensor '" + std::string(t.name) + "' has rows of " +
                                          std::to_string(tcols) + " elements, " + name + " needs " +
                                          std::to_string(cols));
  // The reader checked that nbytes (whole blocks along dim 0) lies in the data section; the rows must fill it exactly.
  if (q != QuantType::f16 && (tcols % kQuantBlockWeights != 0 || t.nbytes != trows * quant_row_bytes(q, tcols)))
    throw Error(Status::format_error, f.name() + ": tensor '" + std::string(t.name) + "': " + std::to_string(t.nbytes) +
                                          " bytes are not " + std::to_string(trows) + " rows of " + quant_type_name(q) +
                                          " blocks");
  stored = q;
  RowSpan s;
  s.rows = trows;
  s.gguf = &f;
  s.gtensor = &t;
  spans.push_back(s);
  return *this;
}

WeightSource& WeightSource::add_ones(uint64_t rows) {
  spans.push_back({nullptr, nullptr, 0, rows});
  return *this;
}

WeightSource& WeightSource::add_random(uint64_t rows, float scale, uint64_t seed) {
  if (!(scale > 0)) throw Error(Status::internal, name + ": random rows need a positive scale");
  RowSpan s;
  s.rows = rows;
  s.random_scale = scale;
  s.random_seed = seed;
  spans.push_back(s);
  return *this;
}

namespace {
uint16_t load16(const uint8_t* p) { return uint16_t(p[0] | (p[1] << 8)); }

// n elements of one tensor's bytes -> storage type.
void convert(const uint8_t* src, DType dt, uint64_t n, bool fp16, uint8_t* out) {
  if (dt == DType::F16 && fp16) return void(std::memcpy(out, src, n * 2));
  if (dt == DType::F32 && !fp16) return void(std::memcpy(out, src, n * 4));
  for (uint64_t i = 0; i < n; ++i) {
    float v;
    if (dt == DType::F32)
      std::memcpy(&v, src + 4 * i, 4);
    else if (dt == DType::F16)
      v = half_to_float(load16(src + 2 * i));
    else
      v = bf16_to_float(load16(src + 2 * i));
    if (fp16) {
      const uint16_t h = float_to_half(v);
      std::memcpy(out + 2 * i, &h, 2);
    } else {
      std::memcpy(out + 4 * i, &v, 4);
    }
  }
}

// Element `index` of a random span: splitmix64 of (seed, index) -> uniform in [-scale, scale).
float random_element(uint64_t seed, uint64_t index, float scale) {
  uint64_t z = seed * 0x9E3779B97F4A7C15ull + index + 0x632BE59BD9B4E019ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return scale * (float(double(z >> 40) * (1.0 / 8388608.0)) - 1.0f);  // 24 bits: [0, 2) - 1
}

bool all_finite(const uint8_t* p, uint64_t n, bool fp16) {
  for (uint64_t i = 0; i < n; ++i) {
    float v;
    if (fp16)
      v = half_to_float(load16(p + 2 * i));
    else
      std::memcpy(&v, p + 4 * i, 4);
    if (!std::isfinite(v)) return false;
  }
  return true;
}
}  // namespace

void convert_rows(const WeightSource& w, uint64_t row0, uint64_t rows, bool fp16, void* out_v) {
  const uint64_t es = fp16 ? 2 : 4;
  uint8_t* out = static_cast<uint8_t*>(out_v);
  uint64_t at = 0;  // first row of the current span in w
  for (const auto& s : w.spans) {
    if (!rows) break;
    const uint64_t end = at + s.rows;
    if (row0 < end) {
      const uint64_t r = row0 - at, n = std::min(rows, s.rows - r), count = n * w.cols;
      if (s.gguf && w.stored != QuantType::f16) {
        const uint64_t rb = quant_row_bytes(w.stored, w.cols);
        std::vector<float> f(size_t(w.cols));
        for (uint64_t k = 0; k < n; ++k) {
          dequantize_row(w.stored, s.gguf->data(*s.gtensor) + (s.row + r + k) * rb, size_t(w.cols), f.data());
          convert(reinterpret_cast<const uint8_t*>(f.data()), DType::F32, w.cols, fp16, out + k * w.cols * es);
        }
        if (w.check_finite && !all_finite(out, count, fp16))
          throw Error(Status::format_error,
                      s.gguf->name() + ": non-finite value in '" + std::string(s.gtensor->name) + "'");
      } else if (s.gguf) {
        const DType dt = s.gtensor->type == GgmlType::f32   ? DType::F32
                         : s.gtensor->type == GgmlType::f16 ? DType::F16
                                                            : DType::BF16;
        convert(s.gguf->data(*s.gtensor) + (s.row + r) * w.cols * dtype_size(dt), dt, count, fp16, out);
        if (w.check_finite && !all_finite(out, count, fp16))
          throw Error(Status::format_error,
                      s.gguf->name() + ": non-finite value in '" + std::string(s.gtensor->name) + "'");
      } else if (!s.file && s.random_scale > 0) {
        const uint64_t first = (s.row + r) * w.cols;
        for (uint64_t i = 0; i < count; ++i) {
          const float v = random_element(s.random_seed, first + i, s.random_scale);
          if (fp16) {
            const uint16_t h = float_to_half(v);
            std::memcpy(out + 2 * i, &h, 2);
          } else {
            std::memcpy(out + 4 * i, &v, 4);
          }
        }
      } else if (!s.file) {
        const float one = 1.0f;
        const uint16_t h = float_to_half(one);
        for (uint64_t i = 0; i < count; ++i) std::memcpy(out + i * es, fp16 ? static_cast<const void*>(&h) : &one, es);
      } else {
        const uint64_t tes = dtype_size(s.tensor->dtype);
        convert(s.file->data(*s.tensor) + (s.row + r) * w.cols * tes, s.tensor->dtype, count, fp16, out);
        if (w.check_finite && !all_finite(out, count, fp16))
          throw Error(Status::format_error, s.file->name() + ": non-finite value in '" + s.tensor->name + "'");
      }
      out += count * es;
      row0 += n;
      rows -= n;
    }
    at = end;
  }
  if (rows) throw Error(Status::internal, w.name + ": rows past the end of the weight");
}

void copy_block_rows(const WeightSource& w, uint64_t row0, uint64_t rows, uint8_t* out) {
  if (w.stored == QuantType::f16) throw Error(Status::internal, w.name + ": copy_block_rows on float rows");
  const uint64_t rb = quant_row_bytes(w.stored, w.cols);
  uint64_t at = 0;
  for (const auto& s : w.spans) {
    if (!rows) break;
    const uint64_t end = at + s.rows;
    if (row0 < end) {
      const uint64_t r = row0 - at, n = std::min(rows, s.rows - r);
      if (!s.gguf || (s.row + r + n) * rb > s.gtensor->nbytes)
        throw Error(Status::internal, w.name + ": block rows outside the tensor");
      std::memcpy(out, s.gguf->data(*s.gtensor) + (s.row + r) * rb, n * rb);
      out += n * rb;
      row0 += n;
      rows -= n;
    }
    at = end;
  }
  if (rows) throw Error(Status::internal, w.name + ": rows past the end of the weight");
}

void release_source(const WeightSource& w) {
  for (const auto& s : w.spans)
    if (s.file)
      s.file->release(*s.tensor);
    else if (s.gguf)
      s.gguf->release(*s.gtensor);
}

}  // namespace diffvk
