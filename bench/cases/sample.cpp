// diffvk_bench: device sampling's cases (shaders/sample_topk.comp: greedy or top-k with a host draw, one token id per
// dispatch from a float32 logits row), its table, its reference and its record call.
//
// The output is a token id, so the check is exact: the tolerance factor makes compare's bound half a token (any wrong
// id is off by at least one). The reference is the host sampler diffvk::sample_top_k (float64 weights) on the same
// float32 logits and draw. A draw within 1e-5 of a cumulative edge of the top-k weights, where the shader's float32
// weights may legitimately choose the neighbour, is drawn again (from the case's seed, so the inputs stay fixed).
// An id the kernel writes is read as a number; a value outside the vocabulary is not an id, so its bits are read as
// a float32: the NaN poison of an unwritten output (or a stale read) fails the check as non-finite, and the planted
// faults of the self-test's hook (op_plant.cpp) land as they do in the float outputs.
#include "bench/op_run_impl.hpp"
#include "diffvk/model.hpp"
#include "ops/sample.hpp"

namespace diffvk::bench {

using namespace op_detail;

struct SampleCaseParams {
  uint32_t vocab = 1;
  float temperature = 0;  // <= 0: greedy
  uint32_t k = 0;         // top-k (0 or 1 with temperature > 0: greedy)
  bool ties = false;      // logits on a coarse grid: many equal values, the order's index tie-break decides
  uint32_t draws = 1;     // dispatches, each with its own draw and token
};

class SampleCase final : public CaseOf<SampleCase, SampleCaseParams> {
 public:
  const char* op() const override { return "sample"; }
  RowShape row_shape() const override { return {p.draws, p.vocab, 1}; }

  std::string describe() const override {
    std::string s = precision_prefix(fp16) + strf("vocab=%u", p.vocab);
    s += p.temperature > 0 && p.k > 1 ? strf(" T=%g k=%u", double(p.temperature), p.k) : std::string(" greedy");
    if (p.ties) s += " ties";
    if (p.draws > 1) s += strf(" draws=%u", p.draws);
    return s;
  }

  std::string skip_reason(const Device& dev) const override {
    return SampleKernel::supports(dev.caps(), p.vocab, p.k) ? std::string()
                                                            : "vocabulary and top-k past the kernel's loop budget";
  }

  void prepare(Device& dev, KernelCache& kernels, bool, Prepared& pr) const override {
    const SampleKernel& kernel = kernels.get<SampleKernel>(
        "sample", [&] { return std::make_unique<SampleKernel>(dev, KernelOptions::for_device(dev)); });
    const uint32_t V = p.vocab, n = std::max(1u, p.draws);
    std::mt19937_64 rng(seed);
    auto raw = uniform(rng, V, -8.0, 8.0);
    if (p.ties)
      for (auto& v : raw) v = std::round(v);
    const auto lgd = ref::round_to_f32(raw);  // the model's logits are float32 in every precision
    const std::vector<float> lg(lgd.begin(), lgd.end());
    const bool sampled = p.temperature > 0 && p.k > 1;
    // Each dispatch binds its own params and token at an aligned offset: one slot of `stride` bytes per draw.
    Arena& a = pr.arena;
    const VkDeviceSize stride = a.align;
    std::vector<uint32_t> params(size_t(n) * stride / 4, 0);
    pr.expect.resize(n);
    for (uint32_t d = 0; d < n; ++d) {
      float u = 0;
      if (sampled) {
        int tries = 0;
        do u = std::generate_canonical<float, 24>(rng) * 0.999999f;
        while (sample_draw_near_edge(lg, p.temperature, p.k, u, 1e-5) && ++tries < 64);
      }
      uint32_t* q = &params[size_t(d) * stride / 4];
      q[3] = p.k;
      std::memcpy(&q[1], &u, 4);
      std::memcpy(&q[2], &p.temperature, 4);
      pr.expect[d] = double(sample_top_k(lg.data(), V, p.temperature, p.k, u));
    }
    const VkDeviceSize lb = VkDeviceSize(V) * 4, pb = VkDeviceSize(n) * stride, tb = VkDeviceSize(n - 1) * stride + 4;
    const VkDeviceSize lo = a.take(lb), po = a.take(pb), to = a.take(tb);
    a.create(dev, "op case sample");
    a.buf->upload(lo, lg.data(), lb);
    a.buf->upload(po, params.data(), pb);
    pr.prog = std::make_unique<Program>(dev, "op case sample", pr.timestamps);
    for (uint32_t d = 0; d < n; ++d)
      kernel.record(*pr.prog, a.range(lo, lb), a.range(po + d * stride, 16), a.range(to + d * stride, 4), V);
    Buffer* buf = a.buf.get();
    pr.reset = [=] { buf->fill(to, tb, kPoison); };
    pr.out_off = to, pr.out_bytes = tb;
    pr.extract = [=](const std::vector<uint8_t>& b, size_t& padding_changed) {
      std::vector<float> got(n);
      for (uint32_t d = 0; d < n; ++d) {
        const size_t at = size_t(d) * stride;
        uint32_t id;
        std::memcpy(&id, &b[at], 4);
        got[d] = id < V ? float(id) : value_at(b, at / 4, 4);  // not an id: its bits as a float32 (the poison: a NaN)
        for (size_t w = at + 4; d + 1 < n && w < at + stride; w += 4) padding_changed += !poisoned(b, w / 4, 4);
      }
      return got;
    };
    // compare's bound, half a token: (fp16 ? 4e-3 : 2e-5) * max(1, max id) * factor = 0.5.
    double max_id = 1;
    for (double e : pr.expect) max_id = std::max(max_id, e);
    pr.tolerance = 0.5 / ((dev.fp16() ? 4e-3 : 2e-5) * max_id);
    pr.bytes = lb * n + VkDeviceSize(n) * 4;
    pr.flops = 0;
  }
};

OpCases sample_cases(OpMode mode) {
  CaseTable<SampleCase> b(4700);
  using P = SampleCaseParams;
  if (mode == OpMode::bench) {
    b.add(P{32000, 0, 0});
    b.add(P{32000, 0.8f, 40});
    return b.take();
  }
  // The first case is the self-test's (one per path): top-k sampling at an odd vocabulary, several draws.
  b.add(P{1001, 0.7f, 40, false, 8});
  for (uint32_t V : {1u, 7u, 64u, 257u, 5000u}) {
    b.add(P{V, 0, 0});
    b.add(P{V, 0.7f, 2, false, 8});
    b.add(P{V, 1.3f, 5, false, 8});
    b.add(P{V, 0.5f, 64, false, 8});
  }
  // Ties: greedy and top-k pick the lower index among equal logits.
  for (uint32_t V : {7u, 257u, 1001u}) {
    b.add(P{V, 0, 0, true});
    b.add(P{V, 1.0f, 40, true, 8});
  }
  return b.take();
}

}  // namespace diffvk::bench
