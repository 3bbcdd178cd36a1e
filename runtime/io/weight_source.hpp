// Where the rows of one device weight tensor come from, and their conversion to the device storage
// type a bounded slice at a time (the streaming loader: runtime/model/weight_store.cpp).
//
// A weight is a list of row spans, each `rows` consecutive rows of a safetensors or GGUF tensor (F32, F16
// or BF16; any rank, rows = the first dimension), rows of ones (a weightless norm) or seeded random rows (a
// synthesized model of a published shape: Model::synthesize, `diffvk bench --shape`). Concatenations
// (the fused qkv and gate_up projections) and row permutations (Hugging Face DiffLlama's head
// layout, runtime/model/hf_loader.cpp) are both just span lists: nothing is converted until upload.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "io/gguf.hpp"
#include "io/quant.hpp"
#include "io/safetensors.hpp"

namespace diffvk {

struct RowSpan {
  const SafetensorsFile* file = nullptr;  // nullptr (and no gguf): rows of 1.0, or random rows (random_scale)
  const TensorInfo* tensor = nullptr;
  uint64_t row = 0, rows = 0;      // first row in the tensor, row count
  const GgufFile* gguf = nullptr;  // instead of file/tensor: an F32/F16/BF16 tensor of a GGUF file
  const GgufTensorInfo* gtensor = nullptr;
  // No file: 0 gives rows of 1.0; otherwise element i of the span is uniform in [-random_scale, random_scale),
  // a pure function of (random_seed, i), so any slice of the rows converts to the same values.
  float random_scale = 0;
  uint64_t random_seed = 0;
};

struct WeightSource {
  std::string name;   // for messages ("layers.0.attn.qkv")
  uint64_t cols = 0;  // elements per row
  std::vector<RowSpan> spans;
  bool check_finite = false;  // norms and gains: a non-finite value is a format_error naming the tensor

  uint64_t rows() const;
  uint64_t numel() const { return rows() * cols; }
  // Appends `rows` rows of `t` starting at `row`, checking that t's rows are `cols` wide and in range.
  WeightSource& add(const SafetensorsFile& f, const TensorInfo& t, uint64_t row, uint64_t rows);
  WeightSource& add(const SafetensorsFile& f, const TensorInfo& t);  // every row
  WeightSource& add_ones(uint64_t rows);
  // `rows` seeded random rows, uniform in [-scale, scale) (scale > 0).
  WeightSource& add_random(uint64_t rows, float scale, uint64_t seed);
  // Every row of an F32, F16, BF16, Q8_0 or Q4_0 GGUF tensor (rows = the outermost dim; a 1-D tensor is rows
  // of 1). A weight's spans are all float or all of one quantized type (format_error naming the tensor).
  WeightSource& add(const GgufFile& f, const GgufTensorInfo& t);
  // QuantType::f16 when the rows are floats (any float type), else the GGUF block type of every span.
  QuantType stored = QuantType::f16;
};

// Converts rows [row0, row0 + rows) of `w` into `out` (rows·cols elements of fp16 bits when fp16,
// else fp32), exactly (F16 -> fp16, F32/BF16 -> fp32) or rounded to nearest even (F32/BF16 -> fp16).
// Q8_0/Q4_0 rows (a quantized GGUF's embedding table) are dequantized (io/quant.hpp) and then stored the same way.
void convert_rows(const WeightSource& w, uint64_t row0, uint64_t rows, bool fp16, void* out);
// Copies the GGUF blocks of rows [row0, row0 + rows) of a quantized `w` (w.stored, quant_row_bytes each)
// to `out` unchanged: a quantized GGUF's linear weights go to the device without a float round trip.
void copy_block_rows(const WeightSource& w, uint64_t row0, uint64_t rows, uint8_t* out);

// Tells the OS that the source pages of `w` are no longer needed (mapped files only; a no-op for
// files read into memory): streaming a large checkpoint then does not keep it resident.
void release_source(const WeightSource& w);

}  // namespace diffvk
