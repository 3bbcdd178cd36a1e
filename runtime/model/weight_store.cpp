// Streaming weight upload with row-split bindings (model/weight_store.hpp).
#include "model/weight_store.hpp"

#include <algorithm>

#include "ops/linear_quant.hpp"

namespace diffvk {

namespace {
// Row counts of split parts are multiples of this, so that a part's first row starts at an aligned
// offset in any row-major output indexed by the same rows (the logits of a split lm_head).
constexpr uint64_t kSplitRowMultiple = 256;
}  // namespace

WeightStore::WeightStore(Device& dev, bool fp16, uint64_t max_binding)
    : dev_(dev), fp16_(fp16), max_binding_(max_binding) {}

size_t WeightStore::add(WeightSource source, QuantType format) {
  if (format != QuantType::f16) quant_layout(format, source.rows(), source.cols);  // throws naming the width
  // Blocks go to the device as they are (a quantized GGUF), or are dequantized into the storage type (its
  // embedding); never requantized into another block type.
  if (source.stored != QuantType::f16 && format != QuantType::f16 && format != source.stored)
    throw Error(Status::invalid_argument, "tensor '" + source.name + "' is stored as " +
                                              quant_type_name(source.stored) + " and cannot be requantized to " +
                                              quant_type_name(format));
  sources_.push_back(std::move(source));
  formats_.push_back(format);
  return sources_.size() - 1;
}

uint64_t WeightStore::part_bytes(size_t i, uint64_t rows) const {
  const WeightSource& w = sources_[i];
  if (formats_[i] == QuantType::f16) return rows * w.cols * (fp16_ ? 2 : 4);
  return quant_layout(formats_[i], rows, w.cols).bytes();
}

std::vector<uint64_t> WeightStore::part_rows(size_t i) const {
  const WeightSource& w = sources_[i];
  const uint64_t rows = w.rows();
  if (std::max(part_bytes(i, rows), rows * w.cols * (fp16_ ? 2 : 4)) <= max_binding_) return {rows};
  // Bytes per row: a quantized part is split as if it were in the storage type, so that the prefill's
  // dequantized copy of a part (model/recipe.cpp) fits a binding too.
  const uint64_t row_bytes = std::max<uint64_t>(w.cols * (fp16_ ? 2 : 4), 1);
  uint64_t per = max_binding_ / row_bytes;
  if (per >= kSplitRowMultiple) per = per / kSplitRowMultiple * kSplitRowMultiple;
  if (per == 0)
    throw Error(Status::unsupported, "tensor '" + w.name + "': one row (" + std::to_string(row_bytes) +
                                         " bytes) exceeds the device's maxStorageBufferRange " +
                                         std::to_string(max_binding_));
  std::vector<uint64_t> out;
  for (uint64_t r = 0; r < rows; r += per) out.push_back(std::min(per, rows - r));
  return out;
}

uint64_t WeightStore::planned_bytes() const {
  const uint64_t al = std::max<uint64_t>(dev_.caps().min_storage_buffer_offset_alignment, 16);
  uint64_t total = 0;
  for (size_t i = 0; i < sources_.size(); ++i)
    for (uint64_t r : part_rows(i)) total += align_up(part_bytes(i, r), al);
  return total;
}

WeightUploadStats WeightStore::upload(uint64_t staging_bytes, bool force_staging) {
  const DeviceCaps& c = dev_.caps();
  const uint64_t al = std::max<uint64_t>(c.min_storage_buffer_offset_alignment, 16);  // quantized parts: 16-byte loads
  const uint64_t limit =
      std::min<uint64_t>(c.max_memory_allocation_size ? c.max_memory_allocation_size : (1ull << 30), 1ull << 30);
  struct Place {
    size_t tensor;
    uint64_t row0, rows;
    uint32_t buffer;
    uint64_t offset;
  };
  std::vector<Place> places;
  std::vector<uint64_t> sizes{0};
  WeightUploadStats st;
  for (size_t i = 0; i < sources_.size(); ++i) {
    st.largest_tensor_bytes = std::max(st.largest_tensor_bytes, part_bytes(i, sources_[i].rows()));
    const auto rows = part_rows(i);
    st.split_tensors += rows.size() > 1;
    uint64_t row0 = 0;
    for (uint64_t r : rows) {
      const uint64_t bytes = part_bytes(i, r);
      if (sizes.back() && align_up(sizes.back(), al) + bytes > limit) sizes.push_back(0);
      const uint64_t off = align_up(sizes.back(), al);
      places.push_back({i, row0, r, static_cast<uint32_t>(sizes.size() - 1), off});
      sizes.back() = off + bytes;
      row0 += r;
    }
  }
  for (size_t i = 0; i < sizes.size(); ++i)
    buffers_.emplace_back(dev_, std::max<uint64_t>(sizes[i], 4), MemoryDomain::device, "weights " + std::to_string(i));
  parts_.assign(sources_.size(), {});
  std::vector<uint8_t> slice;  // host conversion buffer (unused when the device memory is mapped)
  for (size_t p = 0; p < places.size(); ++p) {
    const Place& pl = places[p];
    Buffer& buf = buffers_[pl.buffer];
    upload_part(pl.tensor, pl.row0, pl.rows, buf, pl.offset, staging_bytes, force_staging, slice, st);
    const uint64_t bytes = part_bytes(pl.tensor, pl.rows);
    parts_[pl.tensor].push_back({pl.row0, pl.rows, buf.range(pl.offset, std::max<uint64_t>(bytes, 4))});
    total_ += bytes;
    st.bytes += bytes;
    if (p + 1 == places.size() || places[p + 1].tensor != pl.tensor) release_source(sources_[pl.tensor]);
  }
  return st;
}

void WeightStore::upload_part(size_t i, uint64_t row0, uint64_t rows, Buffer& buf, uint64_t offset,
                              uint64_t staging_bytes, bool force_staging, std::vector<uint8_t>& slice,
                              WeightUploadStats& st) const {
  const WeightSource& w = sources_[i];
  const bool direct = buf.mapped() && !force_staging;  // UMA: write straight into the device memory
  const QuantType q = formats_[i];
  if (q == QuantType::f16) {
    const uint64_t row_bytes = w.cols * (fp16_ ? 2 : 4);
    const uint64_t chunk = std::max<uint64_t>(1, staging_bytes / std::max<uint64_t>(row_bytes, 1));
    for (uint64_t r = 0; r < rows; r += chunk) {
      const uint64_t n = std::min(chunk, rows - r), bytes = n * row_bytes, off = offset + r * row_bytes;
      if (direct) {
        convert_rows(w, row0 + r, n, fp16_, static_cast<uint8_t*>(buf.mapped()) + off);
        continue;
      }
      if (slice.size() < bytes) slice.resize(bytes);
      convert_rows(w, row0 + r, n, fp16_, slice.data());
      buf.upload(off, slice.data(), bytes);  // through a staging buffer of `bytes`
      st.staging_peak_bytes = std::max(st.staging_peak_bytes, slice.size() + bytes);
    }
    return;
  }
  // Quantized: float32 rows -> GGUF blocks (io/quant.hpp), or the file's own blocks (a quantized GGUF), ->
  // the part's scale and quant arrays. The host holds one slice of rows plus its blocks, never the tensor.
  const QuantLayout l = quant_layout(q, rows, w.cols);
  const uint64_t nb = w.cols / kQuantBlockWeights, blk = quant_row_bytes(q, w.cols), qrb = l.quant_row_bytes();
  const bool blocks_in = w.stored == q;
  const uint64_t chunk = std::max<uint64_t>(1, staging_bytes / (blocks_in ? blk : w.cols * 4));
  for (uint64_t r = 0; r < rows; r += chunk) {
    const uint64_t n = std::min(chunk, rows - r), fbytes = blocks_in ? 0 : n * w.cols * 4, bbytes = n * blk;
    if (slice.size() < fbytes + 2 * bbytes) slice.resize(fbytes + 2 * bbytes);
    float* f = reinterpret_cast<float*>(slice.data());
    uint8_t* blocks = slice.data() + fbytes;
    if (blocks_in) {
      copy_block_rows(w, row0 + r, n, blocks);
    } else {
      convert_rows(w, row0 + r, n, false, f);
      for (uint64_t k = 0; k < n; ++k) quantize_row(q, f + k * w.cols, w.cols, blocks + k * blk);
    }
    const uint64_t s_off = offset + r * nb * 2, q_off = offset + l.quant_offset() + r * qrb;
    if (direct) {
      uint8_t* m = static_cast<uint8_t*>(buf.mapped());
      split_quant_rows(q, w.cols, n, blocks, m + s_off, m + q_off);
      continue;
    }
    uint8_t* scales = blocks + bbytes;  // n·nb·2 scale bytes, then n·qrb quant bytes (= bbytes in all)
    split_quant_rows(q, w.cols, n, blocks, scales, scales + n * nb * 2);
    buf.upload(s_off, scales, n * nb * 2);
    buf.upload(q_off, scales + n * nb * 2, n * qrb);
    st.staging_peak_bytes = std::max(st.staging_peak_bytes, slice.size() + n * qrb);
  }
}

std::vector<uint8_t> WeightStore::download(size_t i) const {
  std::vector<uint8_t> out;
  for (const WeightPart& p : parts_.at(i)) {
    const uint64_t bytes = part_bytes(i, p.rows), at = out.size();
    out.resize(at + bytes);
    for (const Buffer& b : buffers_)
      if (b.handle() == p.range.buffer) b.download(p.range.offset, out.data() + at, bytes);
  }
  return out;
}

BufferRange WeightStore::range(size_t i) const {
  const auto& p = parts_.at(i);
  if (p.size() != 1)
    throw Error(Status::unsupported,
                "tensor '" + sources_.at(i).name + "' is split across " + std::to_string(p.size()) +
                    " bindings (larger than the device's maxStorageBufferRange) where the model needs it whole");
  return p[0].range;
}

}  // namespace diffvk
