// diffvk_bench: what the op case classes (cases/<op>.cpp) and the generic runner (op_run.cpp) share: seeded
// inputs in the storage type, one arena buffer per case, the Prepared case the runner checks, replays and
// times, the kernels kept across cases, the table builder, and the helpers more than one op uses.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <random>

#include "bench/op_cases.hpp"
#include "io/half.hpp"
#include "io/quant.hpp"
#include "ops/kernel_options.hpp"
#include "reference/diff_attn_ref.hpp"
#include "vk/gpu.hpp"

namespace diffvk::bench::op_detail {

constexpr uint32_t kPoison = 0x7fc07fc0u;  // quiet NaN in fp16 and (high half) fp32

inline std::vector<double> uniform(std::mt19937_64& rng, size_t n, double lo, double hi) {
  std::uniform_real_distribution<double> d(lo, hi);
  std::vector<double> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}
inline std::vector<double> rounded(std::vector<double> v, bool f16) {
  return f16 ? ref::round_to_f16(v) : ref::round_to_f32(v);
}

inline std::vector<uint8_t> pack(const std::vector<double>& v, bool f16) {
  std::vector<uint8_t> out(v.size() * (f16 ? 2 : 4));
  for (size_t i = 0; i < v.size(); ++i) {
    if (f16) {
      const uint16_t h = float_to_half(float(v[i]));
      std::memcpy(&out[i * 2], &h, 2);
    } else {
      const float f = float(v[i]);
      std::memcpy(&out[i * 4], &f, 4);
    }
  }
  return out;
}

// One device buffer cut into aligned sub-ranges (non-zero binding offsets are part of every case).
struct Arena {
  VkDeviceSize align, size = 0;
  std::unique_ptr<Buffer> buf;
  explicit Arena(const Device& dev)
      : align(std::max<VkDeviceSize>(dev.caps().min_storage_buffer_offset_alignment, 16)) {}
  VkDeviceSize take(VkDeviceSize bytes, VkDeviceSize extra_offset = 0) {
    const VkDeviceSize off = size + extra_offset;
    size = (off + bytes + align - 1) / align * align;
    return off;
  }
  void create(Device& dev, const char* what) {
    buf = std::make_unique<Buffer>(dev, std::max<VkDeviceSize>(size, 16), MemoryDomain::device, what);
  }
  BufferRange range(VkDeviceSize off, VkDeviceSize bytes) const { return buf->range(off, bytes); }
};

// What a case's prepare() hands to the generic run: the program, how to reset its outputs before a run
// (poison, in-place residual), how to read the outputs, and the values to check.
struct Prepared {
  Arena arena;
  bool timestamps = false;  // bench mode on a device with timestamp queries: the program records them
  std::unique_ptr<Program> prog;
  std::function<void()> reset;
  VkDeviceSize out_off = 0, out_bytes = 0;  // the bytes compared across replays
  // From the downloaded output bytes: the checked values (same order as expect) and the count of
  // padding elements that no longer hold the poison.
  std::function<std::vector<float>(const std::vector<uint8_t>&, size_t&)> extract;
  std::vector<double> expect;
  // The one-kernel tolerance's factor (bench::compare): 1 for every op but those whose docs/maths.md row allows
  // more (the selective scan: bench::scan_tolerance_factor).
  double tolerance = 1.0;
  uint64_t bytes = 0;
  double flops = 0;
  std::string detail;
  explicit Prepared(const Device& dev) : arena(dev) {}
};

// The kernels an OpRunner keeps across cases, by a key the ops choose (linear and linear_row share theirs).
class KernelCache {
 public:
  // The kernel under `key`, made by `make()` (a std::unique_ptr<K>) the first time.
  template <class K, class Make>
  K& get(const std::string& key, Make&& make) {
    std::shared_ptr<void>& slot = kernels_[key];
    if (!slot) slot = std::shared_ptr<K>(make());
    return *static_cast<K*>(slot.get());
  }

 private:
  std::map<std::string, std::shared_ptr<void>> kernels_;
};

inline KernelOptions options_for(const Device& dev, bool subgroup) {
  return {dev.fp16(), subgroup && dev.subgroup_arithmetic()};
}

// An op's table under construction: seeds in order from the op's first seed, names from describe().
template <class Case>
class CaseTable {
 public:
  using Params = typename Case::Params;
  explicit CaseTable(uint64_t first_seed) : seed_(first_seed) {}
  // Adds `p` once per precision.
  void add(const Params& p) {
    for (bool fp16 : {false, true}) push(p, fp16);
  }
  // Adds `p` in fp16 only (paths that exist only with fp16 storage).
  void add_fp16(const Params& p) { push(p, true); }
  OpCases take() { return std::move(cases_); }

 private:
  void push(const Params& p, bool fp16) {
    auto c = std::make_unique<Case>();
    c->p = p, c->fp16 = fp16, c->seed = seed_++;
    c->name = c->describe();
    cases_.push_back(std::move(c));
  }
  uint64_t seed_;
  OpCases cases_;
};

// The common parts of a case class: op() and clone() from the op's name and type.
template <class Derived, class P>
class CaseOf : public OpCase {
 public:
  using Params = P;
  Params p;
  std::unique_ptr<OpCase> clone() const override {
    return std::make_unique<Derived>(static_cast<const Derived&>(*this));
  }
};

// A table's parameters changed by `f` (the tables' one-line variations of a base shape).
template <class P, class F>
P with(P c, F&& f) {
  f(c);
  return c;
}

// The names' shared suffixes (every op names its forced paths the same way).
enum class Residual : uint32_t { none = 0, separate = 1, in_place = 2 };
inline const char* residual_name(Residual r) {
  return r == Residual::none ? "" : r == Residual::separate ? " +r" : " +=r";
}
inline std::string wg_limit_name(uint32_t x, uint32_t y) { return x || y ? strf(" wg-limit=%ux%u", x, y) : ""; }
inline const char* precision_prefix(bool fp16) { return fp16 ? "fp16 " : "fp32 "; }

// Values of `count` elements of `elem_bytes` each (2: fp16 bits, 4: float32).
inline float value_at(const std::vector<uint8_t>& b, size_t i, size_t es) {
  if (es == 2) {
    uint16_t h;
    std::memcpy(&h, &b[i * 2], 2);
    return half_to_float(h);
  }
  float f;
  std::memcpy(&f, &b[i * 4], 4);
  return f;
}
inline bool poisoned(const std::vector<uint8_t>& b, size_t i, size_t es) {
  const uint32_t p = kPoison;
  return std::memcmp(&b[i * es], &p, es) == 0;
}

// A dense output of n elements of es bytes at off: poisoned before each run, every element checked.
inline void dense_output(Prepared& p, VkDeviceSize off, VkDeviceSize bytes, size_t n, size_t es) {
  Buffer* buf = p.arena.buf.get();
  p.reset = [=] { buf->fill(off, bytes, kPoison); };
  p.out_off = off, p.out_bytes = bytes;
  p.extract = [=](const std::vector<uint8_t>& b, size_t&) {
    std::vector<float> got(n);
    for (size_t i = 0; i < n; ++i) got[i] = value_at(b, i, es);
    return got;
  };
}

// Several outputs of one case, each checked: n elements of es bytes at off (a float32 state: es = 4 in both
// precisions). They lie in one span of the arena, in this order; the span is poisoned before each run, then
// `after_poison` (the in/out states' initial values) runs, and the whole span must replay bit for bit.
struct OutputRegion {
  VkDeviceSize off = 0;
  size_t n = 0, es = 4;
};
inline void output_regions(Prepared& p, const std::vector<OutputRegion>& regions, std::function<void()> after_poison) {
  Buffer* buf = p.arena.buf.get();
  const VkDeviceSize first = regions.front().off, end = regions.back().off + regions.back().n * regions.back().es;
  p.reset = [=] {
    buf->fill(first, (end - first + 3) / 4 * 4, kPoison);  // the arena rounds every range up
    if (after_poison) after_poison();
  };
  p.out_off = first, p.out_bytes = end - first;
  p.extract = [=](const std::vector<uint8_t>& b, size_t&) {
    std::vector<float> got;
    for (const OutputRegion& r : regions)
      for (size_t i = 0; i < r.n; ++i) got.push_back(value_at(b, (r.off - first) / r.es + i, r.es));
    return got;
  };
}

// ---- linear and linear_row (op_case_util.cpp)
// Quantized weights (q8_0 / q4_0) of `out` rows of `in`: w becomes its GGUF blocks' dequantized values (what
// the reference sees) and the result is the device layout (ops/linear_quant.hpp); f16: w packed.
std::vector<uint8_t> weight_bytes(QuantType weights, uint32_t in, uint32_t out, bool f16, std::vector<double>& w);
// The int8 paths' activations: Q8_0's rule per block of 32 of v[off, off + n), the values replaced by q·d;
// `ties`: d where a device may round the value either way (a half-step within a few ulp), else 0.
void int8_round_blocks(std::vector<double>& v, size_t off, uint32_t n, std::vector<double>* ties = nullptr);
// The tolerance factor of an int8 case: 1 + (the largest sum over an output's inputs of ties·|w|, what rounding
// every tie the other way can change it by) / the one-kernel bound. w: [out][in]; ties: [rows][in].
double int8_tie_factor(const std::vector<double>& ties, uint32_t rows, uint32_t in, const std::vector<double>& w,
                       uint32_t out, const std::vector<double>& expect, bool fp16);

// ---- the KV-cache ops (op_case_util.cpp)
// A Q8_0 KV cache image (ops/kv_format.hpp: quants, then the padded fp16 scales) of `groups` x `cap` rows of
// `width`: row (g, j < T) is x[j·stride + g·width …], which is rounded in place through GGUF's Q8_0 (the
// reference then sees the dequantized values); rows T … cap − 1 are poisoned (quants 127, scale 1024). ring: the
// cache as the appends leave a ring of cap rows (position j at row j mod cap, only the last cap positions kept; every
// row of x is still rounded), rows never written poisoned.
std::vector<uint8_t> q8_cache(std::vector<double>& x, size_t stride, uint32_t groups, uint32_t cap, uint32_t T,
                              uint32_t width, bool ring = false);
// The values of a Q8_0 cache image, [groups][cap][width].
std::vector<double> q8_cache_values(const uint8_t* img, uint32_t groups, uint32_t cap, uint32_t width);
// The attention cache layout [groups][cap][width]: row (g, j < T) is x[j·stride + g·width …]; rows T … cap − 1
// hold 1000 (reading one wrecks the result).
inline std::vector<double> attn_cache(const std::vector<double>& x, size_t stride, uint32_t groups, uint32_t cap,
                                      uint32_t T, uint32_t width) {
  std::vector<double> c(size_t(groups) * cap * width, 1000.0);
  for (uint32_t g = 0; g < groups; ++g)
    for (uint32_t j = 0; j < T; ++j)
      for (uint32_t d = 0; d < width; ++d) c[(size_t(g) * cap + j) * width + d] = x[size_t(j) * stride + g * width + d];
  return c;
}
// The causal (query, key) pairs of S queries after pos0 cached positions.
inline double causal_pairs(uint32_t S, uint32_t pos0) {
  double pairs = 0;
  for (uint32_t i = 0; i < S; ++i) pairs += double(pos0) + i + 1;
  return pairs;
}
// A split attention's fp32 scratch (partials at po, stats at so) is poisoned with its output (at oo): a split
// the merge reads but nothing wrote shows.
inline void poison_split_scratch(Prepared& p, VkDeviceSize oo, VkDeviceSize ob, VkDeviceSize po, VkDeviceSize pb,
                                 VkDeviceSize so, VkDeviceSize sb) {
  Buffer* buf = p.arena.buf.get();
  p.reset = [=] {
    buf->fill(oo, ob, kPoison);
    buf->fill(po, pb, kPoison);
    buf->fill(so, sb, kPoison);
  };
}
// A KV cache of rope_kv / kv_shift at byte `off` of the downloaded arena: the elements the op writes
// (`written`) are appended to `got` in index order; every other one must still hold the pre-filled `pattern`
// bit for bit (each that does not counts in `pad`).
void check_cache(const std::vector<uint8_t>& b, VkDeviceSize off, const std::vector<uint8_t>& pattern,
                 const std::vector<bool>& written, size_t es, std::vector<float>& got, size_t& pad);
// A Q8_0 cache (ops/kv_format.hpp) of `rows` rows of `width`: the values of the elements marked in `written`
// are appended to got; every other quant byte, and the scales of every row with no element written, must
// equal the pattern's (pad counts those that differ).
void check_q8_cache(const std::vector<uint8_t>& b, VkDeviceSize off, const std::vector<uint8_t>& pattern,
                    const std::vector<bool>& written, uint32_t rows, uint32_t width, std::vector<float>& got,
                    size_t& pad);
// Q8_0 quantization on the device divides in fp32 without correct rounding (docs/maths.md "Q8_0 KV cache"),
// so a value whose x·(1/d) lies within 1e-3 of a rounding boundary may land on either side. For each
// element of `exact` (rows of `width` values, in order) marked in `written`: the block's binary16 step d
// when the element is that close to a boundary, else 0 (its quant must be the host's).
std::vector<float> q8_boundary_steps(const std::vector<double>& exact, const std::vector<bool>& written,
                                     uint32_t width);
// Replaces got[first + j] by expect[first + j] where steps[j] > 0 and they differ by at most that step (the
// other side of a rounding boundary).
void accept_boundary_flips(std::vector<float>& got, const std::vector<double>& expect, size_t first,
                           const std::vector<float>& steps);

// ---- OpRunner's planted output faults (op_plant.cpp)
struct PlantedBytes {
  size_t offset = 0;           // into the downloaded output bytes
  std::vector<uint8_t> bytes;  // written there
};
// The bytes that plant `plant` (wrong_value, nan, fp16_overflow, stale) in `out`, the output of case `name` as
// downloaded: slots of 2 or 4 bytes (fp16 or fp32; `fp16` says which to try first) that p.extract decodes to one
// checked value each, found by probing; verified on a copy. Throws Error(internal) where no slot fits.
std::vector<PlantedBytes> plan_output_fault(OpRunner::Plant plant, const Prepared& p, const std::vector<uint8_t>& out,
                                            bool fp16, const std::string& name);
void apply_plants(const std::vector<PlantedBytes>& plants, std::vector<uint8_t>& out);

}  // namespace diffvk::bench::op_detail
