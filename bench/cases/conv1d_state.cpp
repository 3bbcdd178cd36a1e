// diffvk_bench: the conv1d_state op's cases (Mamba-1 causal depthwise conv1d with its rolling float32 state, SiLU
// fused: x read from [x | z] rows, T rows, optionally followed by one-row decode steps that carry the state), its
// table, its float64 reference (ref::causal_conv1d) and its record call.
#include "bench/op_run_impl.hpp"
#include "ops/conv1d_state.hpp"
#include "reference/ssm_ref.hpp"

namespace diffvk::bench {

using namespace op_detail;

struct Conv1dStateCaseParams {
  uint32_t T = 1, C = 0, K = 4;
  uint32_t steps = 0;  // one-row decode steps recorded after the T-row call (state carried), checked against
                       // one reference call of T + steps rows
  bool zx = true;      // x read from [x | z] rows (stride 2C + 3, offset 5) instead of dense rows
  bool bias = true;    // conv bias
  bool silu = true;    // SiLU fused
  bool fresh = false;  // zero starting state (a new sequence) instead of a random one
  uint32_t block = 0;  // Conv1dStateParams::rows_per_block (0: the kernel's choice)
  uint32_t wg_limit_x = 0, wg_limit_y = 0;  // capped workgroup counts (grid-stride loops); 0 = the device's
};

class Conv1dStateCase final : public CaseOf<Conv1dStateCase, Conv1dStateCaseParams> {
 public:
  const char* op() const override { return "conv1d_state"; }
  RowShape row_shape() const override { return {p.T + p.steps, p.K, p.C}; }
  std::string describe() const override {
    std::string s = precision_prefix(fp16) + strf("T=%u C=%u K=%u", p.T, p.C, p.K);
    if (p.steps) s += strf(" +%u steps", p.steps);
    if (!p.zx) s += " dense-x";
    if (!p.bias) s += " no-bias";
    if (!p.silu) s += " no-silu";
    if (p.fresh) s += " fresh";
    if (p.block) s += strf(" block=%u", p.block);
    s += wg_limit_name(p.wg_limit_x, p.wg_limit_y);
    return s;
  }

  void prepare(Device& dev, KernelCache& kernels, bool, Prepared& pr) const override {
    Conv1dStateKernel& kernel = kernels.get<Conv1dStateKernel>(strf("conv1d_state K=%u", p.K), [&] {
      return std::make_unique<Conv1dStateKernel>(dev, options_for(dev, false), p.K);
    });
    const bool f16 = dev.fp16();
    const size_t es = storage_bytes(f16);
    const uint32_t C = p.C, K = p.K, rows = p.T + p.steps;
    const uint32_t stride = p.zx ? 2 * C + 3 : C, xoff = p.zx ? 5 : 0;
    std::mt19937_64 rng(seed);
    const auto xbuf = rounded(uniform(rng, size_t(xoff) + size_t(rows) * stride, -3, 3), f16);
    const auto w = rounded(uniform(rng, size_t(C) * K, -1, 1), f16);
    const auto bias = p.bias ? rounded(uniform(rng, C, -1, 1), f16) : std::vector<double>{};
    const auto state0 = p.fresh ? std::vector<double>(size_t(K - 1) * C, 0.0)
                                : ref::round_to_f32(uniform(rng, size_t(K - 1) * C, -3, 3));
    std::vector<double> x(size_t(rows) * C);
    for (uint32_t t = 0; t < rows; ++t)
      for (uint32_t c = 0; c < C; ++c) x[size_t(t) * C + c] = xbuf[xoff + size_t(t) * stride + c];
    std::vector<double> state = state0;
    pr.expect = ref::causal_conv1d(x, int(rows), int(C), w, int(K), bias, state, p.silu);
    pr.expect.insert(pr.expect.end(), state.begin(), state.end());

    Arena& a = pr.arena;
    const VkDeviceSize xb = xbuf.size() * es, wb = w.size() * es, bb = std::max<size_t>(bias.size(), 1) * es;
    const VkDeviceSize xo = a.take(xb), wo = a.take(wb), bo = a.take(bb);
    // Outputs: the T-row call's, each decode step's (its own aligned range), then the state.
    std::vector<OutputRegion> regions;
    regions.push_back({a.take(size_t(p.T) * C * es), size_t(p.T) * C, es});
    for (uint32_t i = 0; i < p.steps; ++i) regions.push_back({a.take(size_t(C) * es), C, es});
    const VkDeviceSize sb = state0.size() * 4, so = a.take(sb);
    regions.push_back({so, state0.size(), 4});
    a.create(dev, "op case conv1d_state");
    a.buf->upload(xo, pack(xbuf, f16).data(), xb);
    a.buf->upload(wo, pack(w, f16).data(), wb);
    if (p.bias) a.buf->upload(bo, pack(bias, f16).data(), bias.size() * es);
    Buffer* buf = a.buf.get();
    const std::vector<uint8_t> s0 = pack(state0, false);
    output_regions(pr, regions, [=] { buf->upload(so, s0.data(), sb); });

    pr.prog = std::make_unique<Program>(dev, "op case conv1d_state", pr.timestamps);
    const BufferRange bias_range = p.bias ? a.range(bo, bb) : BufferRange{};
    Conv1dStateParams cp;
    cp.C = C, cp.x_stride = stride, cp.silu = p.silu, cp.rows_per_block = p.block;
    kernel.limit_workgroups_for_testing(p.wg_limit_x, p.wg_limit_y);
    for (uint32_t i = 0; i <= p.steps; ++i) {
      cp.T = i == 0 ? p.T : 1;
      cp.x_offset = xoff + (i == 0 ? 0 : p.T + i - 1) * stride;
      const OutputRegion& r = regions[i];
      kernel.record(*pr.prog, cp, a.range(xo, xb), a.range(wo, wb), bias_range, a.range(so, sb),
                    a.range(r.off, r.n * es));
    }
    kernel.limit_workgroups_for_testing(0, 0);
    pr.detail = strf("wg=%u", kernel.workgroup_size());
    pr.bytes = uint64_t(rows) * C * es * 2 + (w.size() + bias.size()) * es + 2 * sb;
    pr.flops = double(rows) * C * (2.0 * K + (p.silu ? 4 : 0));
  }
};

namespace {
Conv1dStateCaseParams conv(uint32_t T, uint32_t C, uint32_t K = 4) {
  Conv1dStateCaseParams c;
  c.T = T, c.C = C, c.K = K;
  return c;
}
}  // namespace

OpCases conv1d_state_cases(OpMode mode) {
  CaseTable<Conv1dStateCase> b(12100);
  if (mode == OpMode::bench) {  // Phi-4-mini-flash: d_inner 5120, d_conv 4, x from in_proj's [x | z] rows
    for (uint32_t T : {1u, 512u}) b.add(conv(T, 5120));
    return b.take();
  }
  b.add(conv(1, 1));     // one channel, one row: decode
  b.add(conv(2, 37));    // T = 2 < K - 1: the new state keeps one row of the old
  b.add(conv(1, 130));   // decode, C not a multiple of the workgroup
  b.add(conv(17, 200));  // prefill
  Conv1dStateCaseParams c = conv(7, 65);
  c.bias = false, c.silu = false, c.zx = false;
  b.add(c);
  c = conv(9, 33);
  c.fresh = true;  // a new sequence: zero state
  b.add(c);
  c = conv(5, 67);
  c.steps = 4;  // prefill, then decode steps carrying the state
  b.add(c);
  c = conv(1, 29);
  c.steps = 2;  // decode steps only
  b.add(c);
  b.add(conv(6, 19, 2));  // another width
  c = conv(4, 200);
  c.wg_limit_x = 1;  // one workgroup strides over the 200 channels
  b.add(c);
  c = conv(13, 70);
  c.block = 3, c.steps = 2;  // 5 blocks of 3 (= K - 1: the blocks after the first read all their window from x)
  b.add(c);
  c = conv(70, 33);  // the kernel's choice: 3 blocks of 32; grid-stride loop over 2 y workgroups
  c.wg_limit_y = 2;
  b.add(c);
  return b.take();
}

}  // namespace diffvk::bench
