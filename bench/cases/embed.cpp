// diffvk_bench: the embed op's cases (token ids -> rows of the table, float32; ids past the vocabulary embed
// to zeros; the table whole, split by rows into parts, or quantized), its table, its float64 reference and
// its record call.
#include "bench/op_run_impl.hpp"
#include "ops/embed.hpp"
#include "ops/linear_quant.hpp"

namespace diffvk::bench {

using namespace op_detail;

struct EmbedCaseParams {
  uint32_t rows = 1, E = 0, vocab = 0;
  uint32_t parts = 1;                  // > 1: the table split by rows (one record_part dispatch per part)
  QuantType weights = QuantType::f16;  // q8_0 / q4_0: a quantized table, against its dequantized values
};

class EmbedCase final : public CaseOf<EmbedCase, EmbedCaseParams> {
 public:
  const char* op() const override { return "embed"; }
  RowShape row_shape() const override { return {p.rows, p.vocab, p.E}; }

  std::string describe() const override {
    std::string s = precision_prefix(fp16) + strf("rows=%u E=%u vocab=%u", p.rows, p.E, p.vocab);
    if (p.parts > 1) s += strf(" parts=%u", p.parts);
    if (p.weights != QuantType::f16) s += std::string(" ") + quant_type_name(p.weights);
    return s;
  }

  void prepare(Device& dev, KernelCache& kernels, bool, Prepared& pr) const override {
    const EmbedKernel& kernel = kernels.get<EmbedKernel>("embed", [&] {
      return std::make_unique<EmbedKernel>(dev, options_for(dev, true),
                                           std::vector<QuantType>{QuantType::q8_0, QuantType::q4_0});
    });
    const bool f16 = dev.fp16();
    const uint32_t E = p.E, vocab = p.vocab, parts = std::max<uint32_t>(1, std::min(p.parts, vocab));
    std::mt19937_64 rng(seed);
    auto table = rounded(uniform(rng, size_t(vocab) * E, -2, 2), f16);
    // A quantized table: its GGUF blocks, and the table becomes their dequantized values.
    const bool quant = p.weights != QuantType::f16;
    std::vector<uint8_t> blocks;
    const size_t rb = quant ? quant_row_bytes(p.weights, E) : 0;
    if (quant) {
      blocks.resize(size_t(vocab) * rb);
      std::vector<float> row(E);
      for (uint32_t v = 0; v < vocab; ++v) {
        for (uint32_t e = 0; e < E; ++e) row[e] = float(table[size_t(v) * E + e]);
        quantize_row(p.weights, row.data(), E, blocks.data() + v * rb);
        dequantize_row(p.weights, blocks.data() + v * rb, E, row.data());
        for (uint32_t e = 0; e < E; ++e) table[size_t(v) * E + e] = row[e];
      }
    }
    std::vector<uint32_t> tokens(p.rows);
    for (auto& t : tokens) t = uint32_t(rng() % (vocab + vocab / 4 + 1));  // some ids past the vocabulary: zeros
    pr.expect.assign(size_t(p.rows) * E, 0.0);
    for (uint32_t r = 0; r < p.rows; ++r)
      if (tokens[r] < vocab)
        for (uint32_t e = 0; e < E; ++e) pr.expect[size_t(r) * E + e] = table[size_t(tokens[r]) * E + e];
    const size_t es = storage_bytes(f16);
    Arena& a = pr.arena;
    const VkDeviceSize tb = tokens.size() * 4, xb = pr.expect.size() * 4;
    const VkDeviceSize to = a.take(tb), xo = a.take(xb);
    std::vector<std::pair<uint32_t, uint32_t>> part_rows;  // (first, rows)
    std::vector<VkDeviceSize> part_off;
    std::vector<std::vector<uint8_t>> part_bytes;  // each part's device bytes (storage type, or its quantized layout)
    const auto tbytes = quant ? std::vector<uint8_t>{} : pack(table, f16);
    for (uint32_t i = 0, first = 0; i < parts; ++i) {
      const uint32_t n = vocab / parts + (i < vocab % parts ? 1 : 0);
      part_rows.push_back({first, n});
      if (quant)
        part_bytes.push_back(pack_quant_matrix(p.weights, n, E, blocks.data() + size_t(first) * rb));
      else
        part_bytes.emplace_back(tbytes.begin() + size_t(first) * E * es, tbytes.begin() + size_t(first + n) * E * es);
      part_off.push_back(a.take(part_bytes.back().size()));
      first += n;
    }
    a.create(dev, "op case embed");
    a.buf->upload(to, tokens.data(), tb);
    for (uint32_t i = 0; i < parts; ++i) a.buf->upload(part_off[i], part_bytes[i].data(), part_bytes[i].size());
    pr.prog = std::make_unique<Program>(dev, "op case embed", pr.timestamps);
    if (parts == 1 && !quant)
      kernel.record(*pr.prog, a.range(to, tb), a.range(part_off[0], tbytes.size()), a.range(xo, xb), p.rows, E, vocab);
    else
      for (uint32_t i = 0; i < parts; ++i)
        kernel.record_part(*pr.prog, a.range(to, tb), a.range(part_off[i], part_bytes[i].size()), a.range(xo, xb),
                           p.rows, E, part_rows[i].second, part_rows[i].first, vocab, p.weights);
    dense_output(pr, xo, xb, pr.expect.size(), 4);  // x is float32 (the residual stream)
    pr.bytes = tb + uint64_t(p.rows) * E * (es + 4);
    pr.flops = 0;
  }
};

OpCases embed_cases(OpMode mode) {
  CaseTable<EmbedCase> b(4400);
  using P = EmbedCaseParams;
  if (mode == OpMode::bench) {
    b.add(P{1, 2048, 4096});  // the table size does not change the traffic (only the gathered rows move)
    b.add(P{256, 2048, 4096});
    return b.take();
  }
  // The tokens include ids past the vocabulary (they embed to zeros); parts > 1: the table split by rows
  // (one dispatch per part, as for a table beyond the binding range).
  for (const P& s : {P{1, 16, 5}, P{3, 7, 11}, P{17, 64, 100}, P{130, 37, 64}, P{9, 200, 300, 2}, P{33, 24, 257, 3},
                     P{2, 1000, 8, 2}})
    b.add(s);
  // Quantized tables: E a multiple of 32, split tables too; against the dequantized values.
  for (QuantType q : {QuantType::q8_0, QuantType::q4_0})
    for (P s : {P{17, 64, 100}, P{9, 96, 300, 2}, P{33, 32, 257, 3}, P{1, 1024, 5}}) {
      s.weights = q;
      b.add(s);
    }
  return b.take();
}

}  // namespace diffvk::bench
