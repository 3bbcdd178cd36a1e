// Streaming weight upload with row-split bindings (model/weight_store.hpp).
#include "model/weight_store.hpp"

#include <algorithm>

namespace diffvk {

namespace {
uint64_t align_up(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }
// Row counts of split parts are multiples of this, so that a part's first row starts at an aligned
// offset in any row-major output indexed by the same rows (the logits of a split lm_head).
constexpr uint64_t kSplitRowMultiple = 256;
}  // namespace

WeightStore::WeightStore(Device& dev, bool fp16, uint64_t max_binding) : dev_(dev), fp16_(fp16), max_binding_(max_binding) {}

size_t WeightStore::add(WeightSource source) {
  sources_.push_back(std::move(source));
  return sources_.size() - 1;
}

std::vector<uint64_t> WeightStore::part_rows(const WeightSource& w) const {
  const uint64_t es = fp16_ ? 2 : 4, row_bytes = std::max<uint64_t>(w.cols * es, 1), rows = w.rows();
  if (rows * row_bytes <= max_binding_) return {rows};
  uint64_t per = max_binding_ / row_bytes;
  if (per >= kSplitRowMultiple) per = per / kSplitRowMultiple * kSplitRowMultiple;
  if (per == 0)
    throw Error(Status::unsupported, "tensor '" + w.name + "': one row (" + std::to_string(row_bytes) +
                                         " bytes) exceeds the device's maxStorageBufferRange " + std::to_string(max_binding_));
  std::vector<uint64_t> out;
  for (uint64_t r = 0; r < rows; r += per) out.push_back(std::min(per, rows - r));
  return out;
}

uint64_t WeightStore::planned_bytes() const {
  const uint64_t al = dev_.caps().min_storage_buffer_offset_alignment, es = fp16_ ? 2 : 4;
  uint64_t total = 0;
  for (const auto& w : sources_)
    for (uint64_t r : part_rows(w)) total += align_up(r * w.cols * es, al);
  return total;
}

WeightUploadStats WeightStore::upload(uint64_t staging_bytes, bool force_staging) {
  const DeviceCaps& c = dev_.caps();
  const uint64_t al = c.min_storage_buffer_offset_alignment, es = fp16_ ? 2 : 4;
  const uint64_t limit = std::min<uint64_t>(c.max_memory_allocation_size ? c.max_memory_allocation_size : (1ull << 30), 1ull << 30);
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
    const auto& w = sources_[i];
    st.largest_tensor_bytes = std::max(st.largest_tensor_bytes, w.numel() * es);
    const auto rows = part_rows(w);
    st.split_tensors += rows.size() > 1;
    uint64_t row0 = 0;
    for (uint64_t r : rows) {
      const uint64_t bytes = r * w.cols * es;
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
    const WeightSource& w = sources_[pl.tensor];
    Buffer& buf = buffers_[pl.buffer];
    const uint64_t row_bytes = w.cols * es;
    const uint64_t chunk = std::max<uint64_t>(1, staging_bytes / std::max<uint64_t>(row_bytes, 1));
    for (uint64_t r = 0; r < pl.rows; r += chunk) {
      const uint64_t n = std::min(chunk, pl.rows - r), bytes = n * row_bytes, off = pl.offset + r * row_bytes;
      if (buf.mapped() && !force_staging) {  // UMA: convert straight into the device memory
        convert_rows(w, pl.row0 + r, n, fp16_, static_cast<uint8_t*>(buf.mapped()) + off);
        continue;
      }
      if (slice.size() < bytes) slice.resize(bytes);
      convert_rows(w, pl.row0 + r, n, fp16_, slice.data());
      buf.upload(off, slice.data(), bytes);  // through a staging buffer of `bytes`
      st.staging_peak_bytes = std::max(st.staging_peak_bytes, slice.size() + bytes);
    }
    const uint64_t bytes = pl.rows * row_bytes;
    parts_[pl.tensor].push_back({pl.row0, pl.rows, buf.range(pl.offset, std::max<uint64_t>(bytes, 4))});
    total_ += bytes;
    st.bytes += bytes;
    if (p + 1 == places.size() || places[p + 1].tensor != pl.tensor) release_source(w);
  }
  return st;
}

BufferRange WeightStore::range(size_t i) const {
  const auto& p = parts_.at(i);
  if (p.size() != 1)
    throw Error(Status::unsupported, "tensor '" + sources_.at(i).name + "' is split across " + std::to_string(p.size()) +
                                         " bindings (larger than the device's maxStorageBufferRange) where the model needs it whole");
  return p[0].range;
}

}  // namespace diffvk
