// diffvk_bench: OpRunner's planted output faults (op_cases.hpp OpRunner::Plant; the self-test's
// ContextOptions::selftest_fault). A fault is planted in the GPU's output as downloaded, never in the reference: the
// element slots are found by probing the case's own extract (a slot whose bytes, overwritten with a probe value,
// change exactly one checked value to exactly that value), so every layout (strides, several outputs, float32
// ends in fp16 storage, caches) is planted through the bytes the check really reads.
#include <cmath>

#include "bench/op_run_impl.hpp"

namespace diffvk::bench::op_detail {

namespace {

constexpr float kProbe = 777.0f;     // exact in fp16 and fp32
constexpr size_t kMaxProbes = 4096;  // per element size and slot sought
constexpr size_t kStaleElements = 4;
constexpr double kWrongBounds = 8;  // wrong_value: the element's error, in the case's bounds
constexpr size_t kNone = ~size_t(0);

std::vector<uint8_t> bits_bytes(uint32_t bits, size_t es) {  // the low es bytes (little-endian)
  std::vector<uint8_t> b(es);
  std::memcpy(b.data(), &bits, es);
  return b;
}
std::vector<uint8_t> value_bytes(float v, size_t es) {
  if (es == 2) return bits_bytes(float_to_half(v), 2);
  uint32_t u;
  std::memcpy(&u, &v, 4);
  return bits_bytes(u, 4);
}

std::vector<float> extracted(const Prepared& p, const std::vector<uint8_t>& b) {
  size_t pad = 0;
  return p.extract(b, pad);
}

// The checked values whose bits differ.
std::vector<size_t> changed(const std::vector<float>& a, const std::vector<float>& b) {
  std::vector<size_t> idx;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i)
    if (std::memcmp(&a[i], &b[i], sizeof(float)) != 0) idx.push_back(i);
  return idx;
}

struct Slot {
  size_t offset = 0, es = 0, index = kNone;
};

// The checked value that the es-byte slot at `offset` of `b` decodes to, or kNone: overwritten with the probe, the
// slot must change exactly one checked value, to the probe. `b` is restored.
size_t probe(const Prepared& p, std::vector<uint8_t>& b, const std::vector<float>& base, size_t offset, size_t es) {
  std::vector<uint8_t> saved(b.begin() + offset, b.begin() + offset + es);
  const std::vector<uint8_t> v = value_bytes(kProbe, es);
  std::copy(v.begin(), v.end(), b.begin() + offset);
  const std::vector<float> got = extracted(p, b);
  std::copy(saved.begin(), saved.end(), b.begin() + offset);
  if (got.size() != base.size()) return kNone;
  const std::vector<size_t> idx = changed(base, got);
  return idx.size() == 1 && got[idx[0]] == kProbe ? idx[0] : kNone;
}

// The first slot at or after byte `from` (wrapping around) of the first element size in `sizes` that has one, whose
// checked value is not in `taken`; kNone as its index where there is none.
Slot find_slot(const Prepared& p, std::vector<uint8_t>& b, const std::vector<float>& base, size_t from,
               const std::vector<size_t>& sizes, const std::vector<size_t>& taken) {
  for (size_t es : sizes) {
    const size_t slots = b.size() / es;
    if (slots == 0) continue;
    const size_t first = std::min(from / es, slots - 1);
    for (size_t k = 0; k < slots && k < kMaxProbes; ++k) {
      const size_t offset = (first + k) % slots * es;
      const size_t i = probe(p, b, base, offset, es);
      if (i != kNone && std::find(taken.begin(), taken.end(), i) == taken.end()) return {offset, es, i};
    }
  }
  return {};
}

const char* plant_name(OpRunner::Plant plant) {
  switch (plant) {
    case OpRunner::Plant::wrong_value:
      return "a wrong element";
    case OpRunner::Plant::nan:
      return "a NaN";
    case OpRunner::Plant::fp16_overflow:
      return "an fp16 overflow (+inf)";
    case OpRunner::Plant::stale:
      return "stale elements (the poison)";
    default:
      return "?";
  }
}

}  // namespace

std::vector<PlantedBytes> plan_output_fault(OpRunner::Plant plant, const Prepared& p, const std::vector<uint8_t>& out,
                                            bool fp16, const std::string& name) {
  const std::string what = std::string("test hook: planting ") + plant_name(plant) + " in the output of case '" + name;
  std::vector<uint8_t> b = out;  // probed in place, restored
  const std::vector<float> base = extracted(p, b);
  const size_t own = fp16 ? 2 : 4, other = fp16 ? 4 : 2;
  const std::vector<size_t> sizes =
      plant == OpRunner::Plant::fp16_overflow ? std::vector<size_t>{2} : std::vector<size_t>{own, other};
  double max_ref = 0;
  for (double e : p.expect) max_ref = std::max(max_ref, std::fabs(e));
  const double bound = tolerance_bound(fp16, max_ref, p.tolerance);  // what compare allows
  std::vector<PlantedBytes> plants;
  std::vector<size_t> indices;
  const size_t n = plant == OpRunner::Plant::stale ? kStaleElements : 1;
  for (size_t j = 0; j < n; ++j) {  // spread over the output: at 1/2, or at 1/8, 3/8, 5/8, 7/8
    const Slot s = find_slot(p, b, base, n == 1 ? b.size() / 2 : (2 * j + 1) * b.size() / (2 * n), sizes, indices);
    if (s.index == kNone) break;  // (stale: as many as the output has)
    indices.push_back(s.index);
    PlantedBytes pb;
    pb.offset = s.offset;
    if (plant == OpRunner::Plant::wrong_value) {
      pb.bytes = value_bytes(float(p.expect.at(s.index) + kWrongBounds * bound), s.es);
    } else if (plant == OpRunner::Plant::nan) {
      pb.bytes = bits_bytes(s.es == 2 ? 0x7e00u : 0x7fc00000u, s.es);
    } else if (plant == OpRunner::Plant::fp16_overflow) {
      pb.bytes = bits_bytes(0x7c00u, 2);
    } else if (plant == OpRunner::Plant::stale) {
      pb.bytes = bits_bytes(kPoison, s.es);
    } else {
      throw OpRunner::PlantError(what + "': not an output fault");
    }
    plants.push_back(pb);
  }
  if (plants.empty())
    throw OpRunner::PlantError(what + "': no " + (sizes.size() == 1 ? "fp16" : "fp16 or fp32") +
                               " output element to plant in");
  // Verified: the planted elements, and only they, changed, each to what the class must show.
  std::vector<uint8_t> check = out;
  apply_plants(plants, check);
  const std::vector<float> got = extracted(p, check);
  std::vector<size_t> want = indices;
  std::sort(want.begin(), want.end());
  bool ok = changed(base, got) == want;
  for (size_t i : indices) {
    if (plant == OpRunner::Plant::wrong_value) {
      ok = ok && std::fabs(double(got[i]) - p.expect[i]) > bound;
    } else if (plant == OpRunner::Plant::fp16_overflow) {
      ok = ok && std::isinf(got[i]) && got[i] > 0;
    } else {
      ok = ok && std::isnan(got[i]);
    }
  }
  if (!ok) throw OpRunner::PlantError(what + "': the planted bytes do not read back as planted");
  return plants;
}

void apply_plants(const std::vector<PlantedBytes>& plants, std::vector<uint8_t>& out) {
  for (const PlantedBytes& pb : plants) std::copy(pb.bytes.begin(), pb.bytes.end(), out.begin() + pb.offset);
}

}  // namespace diffvk::bench::op_detail
